// scheduler.c — the speculative decoding scheduler: Algorithm 1 of Leviathan et al. (2023), one round at a time.
// See speculative.h for the contract; the γ policy is policy.c, the accept step accept.c and tree.c. The round is
// cut at the target's forward (scheduler.h), so that batch.c runs the same steps for several sequences at once.
//
// A round is the paper's steps, each a function below, over a draft tree — a chain of γ drafts is the tree of
// width 1, and the same code runs it:
//   0. choose γ (and the tree's width)  next_request
//   1. draft x_1..x_k ~ q_1..q_k        draft (draft_more after each draft forward, which the caller runs: alone,
//                                       or in batch.c beside other sequences'): a tree of k nodes, each drawn from
//                                       its q (or deterministic) — or
//                                       the chain drafted ahead during the round before (pipelined drafting,
//                                       draft_ahead.h: start_drafting_ahead at the end of a draft model's chain,
//                                       finish_drafting_ahead at the start of the commit)
//   2. verify: p at every node          verify_rows: one target forward over [newest committed token, nodes]
//                                       under the tree mask (model_forward_batch: this sequence's rows alone in
//                                       generate, beside other sequences' in batch.c); p of the token after each
//                                       node
//   3. accept x_i, or                   accept_or_resample: from the root down, at each node its children in the
//   4. resample at the first rejection, order drawn (accept_at_node: Algorithm 1's step for one child, accept_chain;
//      else draw the bonus              for several, recursive rejection sampling over them); the bonus after a leaf
//   5. commit and roll back             commit_and_roll_back: the accepted path's rows kept (kv_keep_path)
//   6. observe                          record_round: the round's record (Round, round.h) teaches the γ policy
//                                       (policy_learn) and feeds the statistics, the trace and --show (record.c)

#include "speculative/speculative.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "grammar/mask.h"
#include "speculative/draft_ahead.h"
#include "speculative/policy.h"
#include "speculative/round.h"
#include "speculative/scheduler.h"

#ifdef SPECDEC_DEBUG
enum { CHECK_ROLLBACKS = 1 };  // make BUILD=debug: every rollback is checked against a recomputation
#else
enum { CHECK_ROLLBACKS = 0 };
#endif

// Where a p row of the round stands: not adjusted yet, adjusted (in Scheduler.p), or refused by sampler_adjust.
typedef enum { ROW_PENDING, ROW_READY, ROW_BAD } RowState;

// The scheduler's state between rounds.
struct Scheduler {
    Model *target;
    Drafter *drafter;                   // NULL: plain decoding
    const SpecParams *params;
    int V, n_ctx;
    Sampler *samplers;                  // [n_samplers]: the pool's thread i's adjusts the p rows it claims (adjust_row)
    int n_samplers;                     // the target pool's threads, 1 when greedy
    int rows_at_once;                   // the p rows adjusted at once: the target's threads
    Penalizer penalizer;                // SpecParams.penalties' (penalize_rows)
    RowState row_state[TREE_MAX_ROWS];  // of this round's p rows
    KVCache cache;                      // the target's: the committed tokens but the newest
    KVCache *callers_cache;             // speculative_continue's: where the cache goes back to, else NULL
    RollbackCheck check;                // the debug build's (CHECK_ROLLBACKS)
    int max_nodes;                      // the most nodes a tree of this run has (GAMMA_MAX for a chain)
    float *logits;                      // [max_nodes + 1, V]
    float *raw_logits;                  // [max_nodes + 1, V]: the round's rows as the forward gave them, before
                                        // penalties and masks (keep_raw_rows), when SpecParams.on_logprobs is set
    double *p;                          // [max_nodes + 1, V]: the rows the accept rule reached, adjusted
    double *q;                          // [max_nodes, V]
    double *scratch;                    // [3V]: the accept step's (tree_accept)
    int *context;                       // the committed tokens: prompt and emitted
    int n, n_prompt;                    // committed tokens; of them the prompt's
    int drafter_prefilled;              // the prompt tokens the drafter's prefill read (0: none, or left to the first
                                        // round that drafts: prompt_unread)
    bool prompt_unread;                 // the drafter reads the prompt in its first draft forward (scheduler_start)
    int *out;                           // the emitted tokens
    bool done;                          // end-of-text or -n reached
    GammaState g;                       // the γ policy's (policy.h)
    DraftAhead *ahead;                  // pipelined drafting's thread (draft_ahead.h), or NULL: off
    Tally tally;                        // the statistics' sums over the rounds (record.c)
    SpecStats *stats;
    Round round;                        // the round under way
    double t_draft;                     // when its drafting began
    double t_decode;                    // when the rounds began
};

// The shape a round may draft after `committed` tokens: a tree with no more nodes than the context left holds. Not
// capped by the tokens still wanted (max_tokens): a round drafts as deep as it would in a longer run and the commit
// stops at max_tokens, so that which positions are drafted — and so the random numbers each token gets — does not
// depend on -n, and the first k tokens of a run are those of every longer run (prefix-stable seeds, params.h).
static TreeShape fit_shape(const Scheduler *s, TreeShape shape, int committed) {
    int room = s->n_ctx - committed;  // the target's cache holds committed − 1 tokens, and verifies 1 + nodes
    room = room < s->max_nodes ? room : s->max_nodes;
    shape.depth = shape.depth < GAMMA_MAX ? shape.depth : GAMMA_MAX;
    shape.depth = shape.depth > 0 ? shape.depth : 0;
    if (shape.width * shape.depth > room)  // a narrower tree, down to the chain, if the context allows no other
        shape = room / shape.width > 0 ? (TreeShape){room / shape.width, shape.width}
                                       : (TreeShape){shape.depth < room ? shape.depth : room, 1};
    return shape;
}

// 0. What to ask of the drafter: by policy, within what the round may draft.
static DraftRequest next_request(Scheduler *s) {
    s->g.unread = s->prompt_unread ? s->n : 0;
    s->g.left = s->params->max_tokens - s->stats->generated;
    DraftRequest request = policy_choose(&s->g, s->params, s->drafter);
    request.shape = fit_shape(s, request.shape, s->n);
    request.n_prompt = s->n_prompt;
    return request;
}

// γ' of the chain drafted ahead: the depth of the draft model's drafts that the policy would ask for now, before
// this round teaches it anything — so it is chosen before the verification's outcome is known, and at temperature
// > 0 under rejection sampling from the cost model and the learned acceptance alone, like every γ there
// (policy.h) — fitted to the next round's limits if this one commits every draft and the next token. 0 where the
// policy would ask for a tree, or for nothing, or where that commit would end the run (max_tokens): no next round.
static int ahead_depth(const Scheduler *s, const Round *r) {
    const int committed = r->tree.n + 1;
    if (s->stats->generated + committed >= s->params->max_tokens) return 0;
    GammaState g = s->g;  // a copy: choosing moves the policy's counters of plain rounds, which the next round moves
    const DraftRequest next = policy_choose(&g, s->params, s->drafter);
    if (next.shape.width != 1) return 0;
    const int depth = next.shape.depth < next.model_gamma ? next.shape.depth : next.model_gamma;
    return fit_shape(s, (TreeShape){.depth = depth, .width = 1}, s->n + committed).depth;
}

// 1b. Pipelined drafting (draft_ahead.h): after a chain of the draft model's drafts, the drafting thread drafts the
// next round's chain while the target verifies this one, on the assumption that every draft is kept. Never after a
// tree (which path is kept is not known ahead), a lookup run or a plain round (the draft model drafted nothing).
// Handing it the job is timed (r->ahead_handoff_seconds).
static void start_drafting_ahead(Scheduler *s, Round *r) {
    if (!s->ahead || r->tree.n == 0 || r->width > 1 || r->report.run_proposed) return;
    const double t0 = now_seconds();
    const int depth = ahead_depth(s, r);
    if (depth >= 1) {
        int drafts[GAMMA_MAX];
        for (int i = 0; i < r->tree.n; i++) drafts[i] = r->tree.node[i].token;
        draft_ahead_start(s->ahead, s->context, s->n, drafts, r->tree.n, depth);
        r->ahead_started = true;
    }
    r->ahead_handoff_seconds += now_seconds() - t0;
}

// 4b. Waits for the drafting thread — always to the end of its job, so that what it drafted does not depend on how
// long the verification took — before the commit rolls the drafter back (timed: r->ahead_handoff_seconds). The next
// round's propose() takes its chain if the committed text is the one it assumed, else drops it.
static int finish_drafting_ahead(Scheduler *s, Round *r, Err *err) {
    if (!r->ahead_started) return 0;
    const double t0 = now_seconds();
    const int rc = draft_ahead_wait(s->ahead, &r->drafted_ahead, err);
    r->ahead_handoff_seconds += now_seconds() - t0;
    return rc;
}

// Under a grammar: a chain of deterministic drafts (a lookup's run) ends before its first token the grammar refuses,
// which the target would reject (its p is 0) with all after it — and the token drawn instead, from the residual
// norm(max(0, p − q)) of a one-hot q on a token of p 0, is drawn from p itself, as the cut chain's bonus token is.
// A sampled draft is never cut (drawn from a q that may give refused tokens mass, its rejection is what keeps the
// output exact); a draft model's q is masked, so it draws none. A tree's refused nodes stay, and are rejected.
static void cut_refused_chain(Scheduler *s, DraftTree *tree) {
    if (!s->params->constraint) return;
    for (int i = 0; i < tree->n; i++) {
        if (tree->parent[i] != i - 1 || tree->node[i].q) return;  // a tree, or a sampled draft
        int path[TREE_MAX_NODES];
        const int n_path = draft_tree_path(tree, i - 1, path);
        if (!grammar_constraint_allows(s->params->constraint, path, n_path, tree->node[i].token)) {
            tree->n = i;
            return;
        }
    }
}

// The drafted tree's shape in the round's record: each node's level, the depth, the widest level, the first branch.
static void set_levels(Round *r) {
    int depth[TREE_MAX_NODES], children[TREE_MAX_ROWS] = {0};  // of each node; of each row (node j: row j + 1)
    for (int i = 0; i < r->tree.n; i++) {
        const int parent = r->tree.parent[i];
        depth[i] = parent < 0 ? 1 : depth[parent] + 1;
        r->depth = depth[i] > r->depth ? depth[i] : r->depth;
        r->width = ++children[parent + 1] > r->width ? children[parent + 1] : r->width;
        r->level[i] = depth[i] - 1;
        r->first_branch[i] = children[parent + 1] == 1 && (parent < 0 || r->first_branch[parent]);
    }
}

// Grammar-forced drafting: appends to path[0..n) (the committed tokens' continuation drafted so far) the drafts the
// grammar forces after it, up to `most` in all, as deterministic drafts — q one-hot, no draft forward: the tokens it
// forces one by one (each the only one it allows), then the tokens of the text it forces further (several bytes
// other tokenizations could spell too). Under the masked p a forced token has probability 1, so the target keeps it;
// a token of the forced text is kept with probability p(x) (Algorithm 1 with q one-hot), the target's own choice
// where it is not. Returns how many were appended.
static int forced_drafts(Scheduler *s, int *path, int n, int most, Err *err) {
    int k = n;
    while (k < most) {
        const int token = grammar_constraint_forced(s->params->constraint, path, k, err);
        if (token < 0) break;
        path[k++] = token;
    }
    return k - n + grammar_constraint_forced_text(s->params->constraint, path, k, path + k, most - k);
}

// Appends path[from..to) to the round's tree as a chain of one-hot drafts.
static void append_chain(Round *r, const int *path, int from, int to) {
    for (int i = from; i < to; i++) {
        r->tree.node[i] = tree_one_hot_child(path[i]);
        r->tree.parent[i] = i - 1;
    }
    r->tree.n = to;
}

// A round of forced drafts alone (forced_drafts after the committed text), where no drafter drafts: without one, in a
// round the policy keeps plain, or for a tree (draft_forced_tail follows chains only). Returns the chain's length
// (0: the grammar forces nothing).
static int draft_forced(Scheduler *s, Round *r, int most, Err *err) {
    if (!s->params->constraint || !s->params->forced_drafts) return 0;
    int path[GAMMA_MAX];
    append_chain(r, path, 0, forced_drafts(s, path, 0, most, err));
    r->forced = r->tree.n > 0;
    return r->tree.n;
}

// Beside a drafter's chain, what the grammar forces after it — where the chain ends before tokens or text the
// grammar forces, where the grammar cut it, or where the drafter drafted nothing — drafted on (forced_drafts) up to
// the round's room. The drafter drafts through what the grammar forces inside its chain (its q, masked, is 1
// there): a round of forced tokens alone would end the round there, where the drafter goes on past them. The
// drafter did not draft the tail: its rollback keeps its own nodes only, and its next proposal reads what was
// committed after them as it reads any committed text.
static void draft_forced_tail(Scheduler *s, Round *r, Err *err) {
    if (!s->params->constraint || !s->params->forced_drafts) return;
    int path[GAMMA_MAX];
    for (int i = 0; i < r->tree.n; i++) {
        if (r->tree.parent[i] != i - 1) return;  // a tree: which branch is kept is not known
        path[i] = r->tree.node[i].token;
    }
    const int room = fit_shape(s, (TreeShape){.depth = GAMMA_MAX, .width = 1}, s->n).depth;
    if (r->tree.n >= room) return;
    r->forced_tail = forced_drafts(s, path, r->tree.n, room, err);
    append_chain(r, path, r->tree.n, r->tree.n + r->forced_tail);
}

// 1b. The drafts are in: a chain the grammar refuses cut, the text it forces after the chain drafted on, the tree's
// shape recorded, the drafting timed (r->draft_seconds); then, after a chain of the draft model's, drafting the next
// round ahead starts.
static void drafted(Scheduler *s, Round *r, Err *err) {
    cut_refused_chain(s, &r->tree);
    draft_forced_tail(s, r, err);
    set_levels(r);
    r->draft_calls = r->report.calls;
    r->read_prompt = s->prompt_unread && r->draft_calls > 0;
    s->prompt_unread &= !r->read_prompt;
    r->draft_seconds = now_seconds() - s->t_draft;
    start_drafting_ahead(s, r);
}

// 1. Draft a tree of nodes x_i ~ q_i continuing the committed tokens — or the chain the grammar forces. A drafter
// with a draft model (Drafter.begin) names the draft forwards it waits for in *forward, which the caller runs,
// calling draft_more after each (scheduler.h); a proposal on the drafting thread's core is made there whole.
static int draft(Scheduler *s, Round *r, DraftForward *forward, Err *err) {
    r->tree.n = 0;
    *forward = (DraftForward){0};
    s->t_draft = now_seconds();
    // Forced drafts cost no forward: as many as the round may verify, whatever depth the policy chose — a round of
    // their own where no drafter drafts a chain; beside one, after its chain (draft_forced_tail).
    const int room = fit_shape(s, (TreeShape){.depth = GAMMA_MAX, .width = 1}, s->n).depth;
    const bool chain = s->drafter && r->request.shape.depth > 0 && r->request.shape.width == 1;
    if (!chain && draft_forced(s, r, room, err)) {
        set_levels(r);
        r->draft_seconds = now_seconds() - s->t_draft;
        return 0;
    }
    if (r->request.shape.depth == 0) return 0;
    Drafter *d = s->drafter;
    int rc;
    if (draft_ahead_takes_proposals(s->ahead))  // the draft on the drafting thread's core
        rc = draft_ahead_propose(s->ahead, s->context, s->n, &r->request, &r->tree, s->q, &r->report, err);
    else if (d->begin)
        rc = d->begin(d, s->context, s->n, &r->request, &r->tree, s->q, &r->report, forward, err);
    else
        rc = d->propose(d, s->context, s->n, &r->request, &r->tree, s->q, &r->report, err);
    if (rc) return -1;
    if (forward->rows.T == 0) drafted(s, r, err);
    return 0;
}

// 1, continued: after the draft forward *forward named, the drafter's next (rows.T = 0: the drafts are in).
static int draft_more(Scheduler *s, Round *r, DraftForward *forward, Err *err) {
    if (s->drafter->resume(s->drafter, forward, err)) return -1;
    if (forward->rows.T == 0) drafted(s, r, err);
    return 0;
}

// The penalties (penalties.h) on verify's rows, each after the committed text and the drafts on its path — the
// history a target-only run has at that position, so the rows are the ones it would sample from.
static void penalize_rows(Scheduler *s, const Round *r) {
    if (!s->params->penalties) return;
    for (int row = 0; row <= r->tree.n; row++) {
        int path[GAMMA_MAX];
        const History history = {.context = s->context, .n = s->n, .n_prompt = s->n_prompt, .path = path,
                                 .n_path = draft_tree_path(&r->tree, row - 1, path)};
        penalize(&s->penalizer, s->logits + (size_t)row * s->V, &history);
    }
}

// The round's rows as the forward gave them, for the log-probabilities of the tokens committed (report_logprobs):
// copied before penalize_rows and the grammar's masks change them in place.
static void keep_raw_rows(Scheduler *s, const Round *r) {
    if (s->raw_logits) memcpy(s->raw_logits, s->logits, sizeof(float) * (size_t)(r->tree.n + 1) * s->V);
}

// 2. Verify: one target forward over [newest committed token, x_1..x_k] under the tree mask gives the logits of the
// token after each (p_1..p_{k+1} for a chain), penalised (penalize_rows, once they are in); accept_or_resample
// adjusts the rows it reaches (target_probs). The forward is the caller's (speculative_generate's alone, batch.c's
// with other sequences' rows): these are its rows.
static SequenceRows verify_rows(Scheduler *s, Round *r) {
    r->tokens[0] = s->context[s->n - 1];
    r->parent[0] = -1;
    for (int i = 0; i < r->tree.n; i++) {
        r->tokens[1 + i] = r->tree.node[i].token;
        r->parent[1 + i] = r->tree.parent[i] + 1;
    }
    r->base = s->cache.len;
    for (int row = 0; row <= r->tree.n; row++) s->row_state[row] = ROW_PENDING;
    return (SequenceRows){.cache = &s->cache, .tokens = r->tokens, .T = r->tree.n + 1, .parent = r->parent,
                          .base = r->base, .all_logits = true};
}

// The p rows [first, first + n) of the round, one chunk each (pool_run_chunks): each row adjusted by the thread that
// claims it, with that thread's sampler — a row's values do not depend on the thread that adjusts it. Claimed, not
// handed out: a thread the system runs late leaves its row to the others instead of holding up the round (with a
// row per thread, on 2 CPUs shared with other work, adjusting a round's rows took longer than verifying them).
typedef struct {
    Scheduler *s;
    int first, n;
} RowJob;

static void adjust_row(void *ctx, int chunk, int n_chunks, int thread) {
    (void)n_chunks;
    const RowJob *job = ctx;
    Scheduler *s = job->s;
    const int row = job->first + chunk;
    const int bad = sampler_adjust(&s->samplers[thread], s->p + (size_t)row * s->V, s->logits + (size_t)row * s->V);
    s->row_state[row] = bad ? ROW_BAD : ROW_READY;
}

// Under a grammar (SpecParams.constraint): the logits of rows [first, first + n) masked to the tokens allowed after
// the committed text and the path to each row's node, before they are adjusted — p masked and renormalised. A row
// under a refused draft, or after an end-of-text draft, stays as it is: the accept step never reaches the first
// (the draft's p is 0) and commits nothing after the second.
static int constrain_rows(Scheduler *s, const Round *r, int first, int n, Err *err) {
    for (int row = first; s->params->constraint && row < first + n; row++) {
        int path[TREE_MAX_NODES];
        const int n_path = draft_tree_path(&r->tree, row - 1, path);
        if (grammar_constraint_mask(s->params->constraint, path, n_path, s->logits + (size_t)row * s->V, err) < 0)
            return -1;
    }
    return 0;
}

// The target's distribution at a node: its adjusted row, or greedy only its token — p is one-hot there, and the
// accept step needs no more (tree_accept_one_hot).
typedef struct {
    const double *row;  // [V], or NULL: one-hot at token
    int token;
} TargetP;

// p after `node` (−1: after the newest committed token), from verify's row: adjusted (sampler_adjust), or greedy its
// argmax (sampling_greedy). A row not adjusted yet is adjusted with the rows after it, as many as the target has
// threads, one per chunk of a job on them (adjust_row): the walk may reach them next (a chain's, surely, if it
// goes on), and the threads would idle meanwhile. Greedy, a row's argmax costs about a hand-off to the pool, and
// stays on thread 0.
static int target_probs(Scheduler *s, Round *r, int node, int position, TargetP *p, Err *err) {
    const int row = node + 1;
    const double t0 = now_seconds();
    const bool greedy = s->params->sampling.temperature == 0;
    if (greedy && constrain_rows(s, r, row, 1, err)) return -1;
    if (!greedy && s->row_state[row] == ROW_PENDING) {
        const int rows_left = r->tree.n + 1 - row;
        RowJob job = {.s = s, .first = row, .n = rows_left < s->rows_at_once ? rows_left : s->rows_at_once};
        if (constrain_rows(s, r, row, job.n, err)) return -1;
        pool_run_chunks(s->target->pool, job.n, job.n, adjust_row, &job);
    }
    *p = (TargetP){.row = greedy ? NULL : s->p + (size_t)row * s->V,
                   .token = greedy ? sampling_greedy(s->target->kernels, s->logits + (size_t)row * s->V, s->V) : 0};
    if (p->token < 0 || (!greedy && s->row_state[row] == ROW_BAD))
        return err_fmt(err, "the target model produced a NaN or infinite logit at position %d", position);
    r->p_seconds += now_seconds() - t0;
    return 0;
}

// p(x) for a token x.
static double target_p_of(const TargetP *p, int x) { return p->row ? p->row[x] : x == p->token; }

// One child x drawn from q, against p's row: Algorithm 1's accept / resample step for one draft (accept_chain), its
// outcome written as tree_accept writes it — which, for one child, is the same step bit for bit (test_tree_accept.c,
// tree_one_child_is_the_chain_rule). Returns −1 with err set for a child whose q row changed since its draw.
static int chain_step(const SpecParams *params, const double *p, const TreeChild *x, int V, int position,
                      double *residual, TreeStep *step, Err *err) {
    if (x->q && x->q[x->token] != x->q_token)
        return err_fmt(err, "the draft %d has probability %.17g in its q row, but was drawn with %.17g", x->token,
                       x->q[x->token], x->q_token);
    const ChainStep c = accept_chain(params, p, x->q, x->token, V, position, residual);
    *step = (TreeStep){.token = c.token, .accepted = c.kept ? 0 : -1, .n_tried = 1,
                       .tried = {{.p = c.p_x, .q = c.q_x, .u = c.r, .overlap = c.overlap,
                                  .residual_mass = c.residual_mass}}};
    return 0;
}

// 3 and 4 at one node, whose target distribution is p at `position`: its children c_1..c_m, tried in the order they
// were drawn — one (a chain's node) by Algorithm 1's step for one draft (chain_step: accept_chain), several by
// recursive rejection sampling (tree_accept); under coupling the target's own Gumbel-max token chooses; when p is
// one-hot, tree_accept_one_hot — and m = 0 draws the bonus token (tree_accept). Returns the kept child, or −1 with
// r->next the token drawn. What α learns of each child tried is β = Σ min(p_k, q_k) (p_k(x) for a one-hot child);
// under coupling, for a sampled child, which has no cheap closed form, the outcome stands in.
static int accept_at_node(Scheduler *s, Round *r, const int *children, int m, const TargetP *p, int position,
                          Err *err) {
    TreeChild nodes[TREE_WIDTH_MAX];
    for (int k = 0; k < m; k++) nodes[k] = r->tree.node[children[k]];
    TreeStep step;
    int rc;
    if (!p->row) rc = tree_accept_one_hot(s->params, p->token, s->V, position, nodes, m, s->scratch, &step, err);
    else if (m == 1) rc = chain_step(s->params, p->row, &nodes[0], s->V, position, s->scratch, &step, err);
    else rc = tree_accept(s->params, p->row, s->V, position, nodes, m, s->scratch, &step, err);
    if (rc) return -2;
    for (int k = 0; k < step.n_tried; k++) {
        const int t = r->n_verified++;
        r->tried[t] = children[k];
        r->p_x[t] = step.tried[k].p, r->q_x[t] = step.tried[k].q, r->r[t] = step.tried[k].u;
        r->overlap[t] = r->learned[t] = step.tried[k].overlap;
        if (s->params->sampler == SAMPLER_COUPLED && nodes[k].q) r->learned[t] = k == step.accepted;
        r->residual_mass = step.tried[k].residual_mass;
    }
    if (step.accepted >= 0) return children[step.accepted];
    r->next = step.token;
    return -1;
}

// 3 and 4 over the tree: from the root (the newest committed token) down, at each node the accept step over its
// children; the accepted path x_1..x_{n_accepted}, and the next token — the residual's or the target's at a
// rejection, else the bonus token from p after the leaf reached (plain decoding: the target's token from p_1). Timed:
// r->p_seconds for the p rows (target_probs), r->accept_seconds for the rest.
static int accept_or_resample(Scheduler *s, Round *r, Err *err) {
    const double t0 = now_seconds();
    r->kind = r->tree.n > 0 ? TOKEN_BONUS : TOKEN_TARGET;
    for (int node = -1;;) {
        const int position = s->n + r->n_accepted;
        TargetP p;
        if (target_probs(s, r, node, position - 1, &p, err)) return -1;
        if (node < 0 && r->report.n_run > 0) r->p_run = target_p_of(&p, r->report.run[0]);
        int children[TREE_WIDTH_MAX], m = 0;
        for (int i = node + 1; i < r->tree.n && m < TREE_WIDTH_MAX; i++)
            if (r->tree.parent[i] == node) children[m++] = i;
        const int kept = accept_at_node(s, r, children, m, &p, position, err);
        if (kept == -2) return -1;
        if (m > r->wide_width) r->wide_width = m, r->wide_kept = kept >= 0;
        if (kept < 0) {
            if (m > 0) r->kind = TOKEN_RESAMPLED;
            r->accept_seconds = now_seconds() - t0 - r->p_seconds;
            return 0;
        }
        r->n_sibling_kept += kept != children[0];
        r->path[r->n_accepted++] = node = kept;
    }
}

bool spec_is_end_of_text(const SpecParams *params, int id) {
    bool eos = id == params->eos_id;
    for (int e = 0; e < params->n_eos; e++) eos |= id == params->eos_ids[e];
    return eos;
}

// The log-probabilities of the round's i-th committed token (SpecParams.on_logprobs): from the raw row after the
// newest committed token (i = 0) or after the accepted node before it.
static void report_logprobs(Scheduler *s, const Round *r, int i, int id) {
    if (!s->params->on_logprobs) return;
    const int row = i == 0 ? 0 : r->path[i - 1] + 1;
    TokenLogprobs lp;
    logprobs_of_row(&lp, s->raw_logits + (size_t)row * s->V, s->V, id, s->params->top_logprobs);
    s->params->on_logprobs(s->params->logprobs_ctx, &lp, i < r->n_accepted ? TOKEN_ACCEPTED : r->kind);
}

// 5. Once the drafting thread is done (finish_drafting_ahead), commit x_1..x_{n_accepted} and the next token,
// stopping at the end-of-text id (not emitted) or at max_tokens; then keep the accepted path's rows in both caches
// (kv_keep_path: a chain's are in place) and roll them back to the committed tokens but the newest, which the next
// round's verify feeds first. Timed: r->commit_seconds (not the debug build's check).
static int commit_and_roll_back(Scheduler *s, Round *r, Err *err) {
    if (finish_drafting_ahead(s, r, err)) return -1;
    const double t0 = now_seconds();
    for (int i = 0; i <= r->n_accepted && !s->done; i++) {
        const int id = i < r->n_accepted ? r->tree.node[r->path[i]].token : r->next;
        if (spec_is_end_of_text(s->params, id)) {
            s->done = true;
            break;
        }
        if (s->params->constraint && grammar_constraint_commit(s->params->constraint, id, err)) return -1;
        report_logprobs(s, r, i, id);
        s->context[s->n++] = s->out[s->stats->generated++] = id;
        r->n_committed++;
        const bool stop = s->params->stop && s->params->stop(s->params->stop_ctx, id);  // (every token, the last too)
        s->done = stop || s->stats->generated == s->params->max_tokens ||
                  (s->params->constraint && grammar_constraint_must_end(s->params->constraint));
    }
    int rows[GAMMA_MAX + 1] = {0};  // verify's rows of the newest committed token and the accepted path
    for (int i = 0; i < r->n_accepted; i++) rows[1 + i] = r->path[i] + 1;
    kv_keep_path(&s->cache, r->base, rows, 1 + r->n_accepted);
    kv_truncate(&s->cache, s->n - 1);
    const int own = r->forced ? 0 : r->tree.n - r->forced_tail;  // the drafter's nodes: the chain before the tail
    if (s->drafter) s->drafter->rollback(s->drafter, s->n - 1, r->path, r->n_accepted < own ? r->n_accepted : own);
    r->commit_seconds = now_seconds() - t0;
    if (!CHECK_ROLLBACKS) return 0;
    // Checked: both caches against a forward over the committed tokens that no rollback touches (rollback_check.c).
    if (model_check_rollback(s->target, &s->cache, &s->check, s->context, s->n_prompt - 1, "target", err)) return -1;
    return s->drafter && s->drafter->check_rollback
               ? s->drafter->check_rollback(s->drafter, s->context, s->drafter_prefilled, err)
               : 0;
}

// 6. Observe: the round's record teaches the γ policy and feeds the statistics, the trace, --show and on_round.
static void record_round(Scheduler *s, const Round *r) {
    record_stats(s->stats, &s->tally, r);
    if (!r->forced) policy_learn(&s->g, s->params, r, s->context + s->n - r->n_committed);
    if (s->params->trace) trace_round(s->params->trace, s->stats->rounds, r, s->params);
    if (s->params->on_token) show_round(s->params, r);
    if (s->params->on_round)
        s->params->on_round(s->params->ctx, &(RoundOutcome){.gamma = r->depth, .width = r->width,
                                                             .drafted = r->tree.n, .accepted = r->n_accepted,
                                                             .committed = r->n_committed});
}

static void scheduler_free(Scheduler *s) {
    draft_ahead_close(s->ahead);
    for (int i = 0; i < s->n_samplers; i++) sampler_free(&s->samplers[i]);
    free(s->samplers);
    penalizer_free(&s->penalizer);
    if (s->callers_cache) *s->callers_cache = s->cache;  // handed back, holding the committed tokens
    else kv_free(&s->cache);
    rollback_check_free(&s->check);
    free(s->logits);
    free(s->raw_logits);
    free(s->p);
    free(s->q);
    free(s->scratch);
    free(s->context);
}

// Whether this process may use more CPUs than the target's pool has threads (they spin between jobs): then the
// drafting thread has one of its own — never oversubscribing them. The CLI's default --threads leaves it one on
// machines of 8 CPUs or more (session_default_threads).
static bool cpu_to_spare(const Model *target) { return cpus_available() > pool_size(target->pool); }

// Whether the drafting thread, on its one CPU, drafts a chain ahead within the target's verification: AHEAD_STEPS
// of the draft's steps on one thread against the target's step on its threads, both in the cost model's units
// (spec_forward_cost, which streams the draft from memory: on its own core a small draft runs faster, from its
// caches). A chain ahead is the guess and γ' drafts, but the verification it overlaps is longer than a step, and
// the accept step follows it. A small draft's modelled step is a fraction of its target's (the shipped pair's: 0.15
// on 16 threads, a quarter on 32); a large draft on a single thread could take longer than the verification,
// and the round would wait for it (Qwen2.5-0.5B's 0.5 GB in q8 against Qwen2.5-7B's 4 GB in q4 on 15 threads:
// about the same modelled step). A rule of thumb, measured on the shipped pair only.
enum { AHEAD_STEPS = 2 };
static bool drafts_ahead_in_time(const Model *target, const Drafter *drafter) {
    return AHEAD_STEPS * drafter->step_cost < spec_forward_cost(target, 1, target->max_threads);
}

// --pipeline on, off, or auto: where there is a CPU to spare (`spare`) and the draft drafts ahead in time, at every
// temperature. There the drafting thread polls (a hand-off costs about a microsecond; less on a busy machine,
// draft_ahead.c) and runs every draft forward on its core (draft_ahead.h), which pays even in the rounds that take no
// drafts drafted ahead: most of them at a temperature (docs/performance.md, "The draft on a core of its own"). Only a
// drafter with a draft model drafts ahead, and never under a grammar (SpecParams.constraint), whose state the round
// commits to meanwhile.
static bool pipelined(const SpecParams *params, const Model *target, const Drafter *drafter, bool spare) {
    if (!drafter || !drafter->draft_ahead || params->pipeline == PIPELINE_OFF || params->constraint) return false;
    return params->pipeline == PIPELINE_ON || (spare && drafts_ahead_in_time(target, drafter));
}

static int scheduler_init(Scheduler *s, Model *target, KVCache *cache, Drafter *drafter, const int *prompt,
                          int n_prompt, const SpecParams *params, int *out, SpecStats *stats, bool may_pipeline,
                          Err *err) {
    const int V = target->n_vocab;
    *s = (Scheduler){.target = target, .drafter = drafter, .params = params, .V = V,
                     .n_ctx = target->cfg.n_positions, .n = n_prompt, .n_prompt = n_prompt, .out = out,
                     .stats = stats, .callers_cache = cache};
    if (cache) s->cache = *cache;
    else if (model_kv_init(target, &s->cache, err)) return -1;
    // A sampler for each thread of the pool, any of which may claim a p row (target_probs); greedy adjusts none (one
    // checks params). As many rows are adjusted at once as the target has threads.
    const int threads = target->max_threads < TREE_MAX_ROWS ? target->max_threads : TREE_MAX_ROWS;
    s->rows_at_once = threads > 1 ? threads : 1;
    const int n_samplers = params->sampling.temperature == 0 ? 1 : pool_size(target->pool);
    s->samplers = calloc((size_t)n_samplers, sizeof(Sampler));
    if (!s->samplers) return err_fmt(err, "out of memory for the scheduler's samplers");
    for (; s->n_samplers < n_samplers; s->n_samplers++)
        if (sampler_init(&s->samplers[s->n_samplers], &params->sampling, V, target->kernels, err)) return -1;
    if (params->penalties && penalizer_init(&s->penalizer, params->penalties, V, err)) return -1;
    const int width = params->tree_width > 1 ? params->tree_width : 1;
    s->max_nodes = width * GAMMA_MAX < TREE_MAX_NODES ? width * GAMMA_MAX : TREE_MAX_NODES;
    s->logits = malloc(sizeof(float) * (s->max_nodes + 1) * V);
    s->p = malloc(sizeof(double) * (s->max_nodes + 1) * V);
    s->q = malloc(sizeof(double) * s->max_nodes * V);
    s->scratch = malloc(sizeof(double) * 3 * V);
    s->context = malloc(sizeof(int) * ((size_t)n_prompt + params->max_tokens));
    if (params->on_logprobs) s->raw_logits = malloc(sizeof(float) * (s->max_nodes + 1) * V);
    if (!s->logits || !s->p || !s->q || !s->scratch || !s->context || (params->on_logprobs && !s->raw_logits))
        return err_fmt(err, "out of memory for the scheduler's buffers");
    memcpy(s->context, prompt, sizeof(int) * n_prompt);
    policy_init(&s->g, target, drafter, params);
    const bool spare = cpu_to_spare(target);
    stats->pipelined = may_pipeline && pipelined(params, target, drafter, spare);
    stats->draft_own_core = stats->pipelined && spare;
    if (stats->pipelined &&
        !(s->ahead = draft_ahead_open(drafter, n_prompt + params->max_tokens, stats->draft_own_core, err)))
        return -1;
    return 0;
}

Scheduler *scheduler_open(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                          const SpecParams *params, int *out, SpecStats *stats, bool may_pipeline, Err *err) {
    *stats = (SpecStats){0};
    if (n_prompt < 1) {
        err_fmt(err, "the prompt is empty");
        return NULL;
    }
    if (n_prompt >= target->cfg.n_positions) {
        err_fmt(err, "the prompt has %d token%s but the model's context is %d position%s, which leaves no room to "
                "generate", n_prompt, plural(n_prompt), target->cfg.n_positions, plural(target->cfg.n_positions));
        return NULL;
    }
    if (params->on_logprobs && (params->top_logprobs < 0 || params->top_logprobs > LOGPROBS_TOP_MAX)) {
        err_fmt(err, "top_logprobs is %d; it must be in [0, %d]", params->top_logprobs, LOGPROBS_TOP_MAX);
        return NULL;
    }
    if (cache && cache->len > n_prompt - 1) {
        err_fmt(err, "the cache holds %d token%s, more than the prompt's %d but the newest", cache->len,
                plural(cache->len), n_prompt - 1);
        return NULL;
    }
    Scheduler *s = malloc(sizeof *s);
    if (!s) {
        err_fmt(err, "out of memory for a scheduler");
        return NULL;
    }
    if (scheduler_init(s, target, cache, drafter, prompt, n_prompt, params, out, stats, may_pipeline, err)) {
        scheduler_free(s);
        free(s);
        return NULL;
    }
    return s;
}

KVCache *scheduler_cache(Scheduler *s) { return &s->cache; }

float *scheduler_logits(Scheduler *s) { return s->logits; }

int scheduler_start(Scheduler *s, double prefill_seconds, bool drafter_prefill, Err *err) {
    const double t0 = now_seconds();
    const bool reads = s->n_prompt > 1 && s->drafter && s->drafter->prefill;
    if (reads && drafter_prefill) {
        if (s->drafter->prefill(s->drafter, s->context, s->n_prompt - 1, err)) return -1;
        s->drafter_prefilled = s->n_prompt - 1;
    }
    s->prompt_unread = reads && !drafter_prefill;
    s->t_decode = now_seconds();
    s->stats->prefill_seconds = prefill_seconds + (s->t_decode - t0);
    return 0;
}

bool scheduler_running(const Scheduler *s) {
    return !s->done && s->stats->generated < s->params->max_tokens && s->cache.len < s->n_ctx;
}

void scheduler_share(Scheduler *s, BatchLoad others, BatchCosts costs) {
    s->g.others = others;
    s->g.batch_costs = costs;
}

int scheduler_draft_forwards(const Scheduler *s) { return s->drafter ? s->round.draft_calls : 0; }

int scheduler_draft(Scheduler *s, DraftForward *forward, Err *err) {
    s->round = (Round){.request = next_request(s), .width = 1};  // each step times itself into the round's record
    return draft(s, &s->round, forward, err);
}

int scheduler_draft_more(Scheduler *s, DraftForward *forward, Err *err) {
    return draft_more(s, &s->round, forward, err);
}

SequenceRows scheduler_verify_rows(Scheduler *s) { return verify_rows(s, &s->round); }

int scheduler_finish_round(Scheduler *s, double target_seconds, Err *err) {
    Round *r = &s->round;
    r->target_seconds = target_seconds;
    keep_raw_rows(s, r);
    penalize_rows(s, r);
    if (accept_or_resample(s, r, err) || commit_and_roll_back(s, r, err)) return -1;
    record_round(s, r);
    return 0;
}

void scheduler_close(Scheduler *s, int *n_out) {
    *n_out = s->stats->generated;
    if (s->t_decode > 0) {
        s->stats->decode_seconds = now_seconds() - s->t_decode;
        finish_stats(s->stats, &s->tally, policy_target_time(&s->g, 1), policy_draft_step(&s->g));
    }
    scheduler_free(s);
    free(s);
}

// speculative_generate with the target's cache the caller's (speculative_continue) or its own (cache NULL): the
// prefill, then the rounds, each verified by a forward over this sequence's rows alone (a batch of one).
static int generate(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                    const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    *n_out = 0;
    Scheduler *s = scheduler_open(target, cache, drafter, prompt, n_prompt, params, out, stats, true, err);
    if (!s) return -1;
    const double t_start = now_seconds();
    // Prefill all but the newest committed token (both models), less what the cache holds already: each round's
    // verify forward starts with the newest, and its logits give p_1.
    KVCache *kv = scheduler_cache(s);
    const int cached = kv->len;
    int rc = -1;
    if (n_prompt - 1 > cached &&
        model_forward(target, kv, prompt + cached, n_prompt - 1 - cached, scheduler_logits(s), false, err))
        goto done;
    if (scheduler_start(s, now_seconds() - t_start, true, err)) goto done;
    while (scheduler_running(s)) {
        DraftForward draft_forward;
        if (scheduler_draft(s, &draft_forward, err)) goto done;
        while (draft_forward.rows.T > 0)
            if (model_forward_batch(draft_forward.model, &draft_forward.rows, 1, draft_forward.logits, err) ||
                scheduler_draft_more(s, &draft_forward, err))
                goto done;
        const SequenceRows rows = scheduler_verify_rows(s);
        const double t0 = now_seconds();
        if (model_forward_batch(target, &rows, 1, scheduler_logits(s), err)) goto done;
        if (scheduler_finish_round(s, now_seconds() - t0, err)) goto done;
    }
    rc = 0;
done:
    scheduler_close(s, n_out);
    if (rc) *n_out = 0;
    return rc;
}

int speculative_generate(Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    return generate(target, NULL, drafter, prompt, n_prompt, params, out, n_out, stats, err);
}

int speculative_continue(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    return generate(target, cache, drafter, prompt, n_prompt, params, out, n_out, stats, err);
}
