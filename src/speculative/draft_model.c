// draft_model.c — a small model as drafter (drafter.h).
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "grammar/mask.h"
#include "speculative/speculative.h"

static int max_width(const SpecParams *params) { return params->tree_width > 1 ? params->tree_width : 1; }

// Adds a node to the tree.
static void add_node(DraftTree *tree, TreeChild child, int parent) {
    tree->node[tree->n] = child;
    tree->parent[tree->n++] = parent;
}

// Up to `width` children of `parent` from q, the draft's distribution at `position` (its logits: greedy), drawn as
// tree.h says the accept step expects them — one child is the chain's draft, x ~ q (tree_draw_child is spec_draw
// for it); several (the first level of a tree) are W draws from q without replacement (under coupling, q's Gumbel
// top-W). Greedy, q is one-hot at the argmax `token` and never written out (q NULL): the child is that token, and
// several are the W most likely (tree_top_children), as one-hot children.
// A `guess` (drafting ahead's guess of the round's next token, draft_ahead.h) is no draft, and the accept step never
// sees it: it is drawn as the round draws its bonus token from p (spec_draw with DRAW_TARGET's number: inverse CDF,
// or under coupling the position's Gumbel noise), but from q, so that the two agree wherever q is close to p.
// Greedy, both are argmaxes.
static void draw_children(ModelDrafter *d, DraftTree *tree, const float *logits, const double *q, int token,
                          int parent, int width, int position, bool guess) {
    const int V = d->model->n_vocab;
    TreeChild children[TREE_FIRST_WIDTH_MAX];
    int n = 0;
    if (!q && width > 1) n = tree_top_children(logits, V, width, children);
    else if (!q) children[n++] = tree_one_hot_child(token);
    else if (guess)
        children[n++] = tree_drawn_child(q, spec_draw(d->params, q, V, position, DRAW_TARGET), false, NULL, 0, V, NULL);
    else
        while (n < width && tree_draw_child(d->params, q, V, position, width > 1, children, n, d->scratch) >= 0) n++;
    for (int k = 0; k < n; k++) add_node(tree, children[k], parent);
}

// The penalties (penalties.h) on the draft's row after `node` (−1: after the committed text): its history is the
// committed text and the tree's path down to the node, as the target's row after the same drafts has it.
static void penalize_draft_row(ModelDrafter *d, const DraftTree *tree, int node, float *logits) {
    if (!d->params->penalties) return;
    int path[GAMMA_MAX];
    const History history = {.context = d->committed, .n = d->n_committed, .n_prompt = d->n_prompt, .path = path,
                             .n_path = draft_tree_path(tree, node, path)};
    penalize(&d->penalizer, logits, &history);
}

// q at a position from the draft's logits there: its adjusted row, written to `row` and returned — or, greedy, no
// row (NULL returned) and only its argmax *token (sampling_greedy), q being one-hot there. Returns −1 with err set
// for logits sampler_adjust refuses.
static int draft_q(ModelDrafter *d, const float *logits, double *row, int position, const double **q, int *token,
                   Err *err) {
    const bool greedy = d->params->sampling.temperature == 0;
    *q = greedy ? NULL : row;
    *token = greedy ? sampling_greedy(d->model->kernels, logits, d->model->n_vocab) : 0;
    if (*token < 0 || (*q && sampler_adjust(&d->sampler, row, logits)))
        return err_fmt(err, "the draft model produced a NaN or infinite logit at position %d", position);
    return 0;
}

// Under a grammar (SpecParams.constraint), the draft's logits after `node` masked as the target's are (q masked and
// renormalised by sampler_adjust): the committed text then the node's path. 1: no token allowed there.
static int constrain(ModelDrafter *d, const DraftTree *tree, int node, float *logits, Err *err) {
    if (!d->params->constraint) return 0;
    int path[TREE_MAX_NODES];
    const int n_path = draft_tree_path(tree, node, path);
    return grammar_constraint_mask(d->params->constraint, path, n_path, logits, err);
}

// Level by level: the first forward feeds, in one batch, every token the draft has not read yet (`unread`, the
// tokens at positions cache.len .. n − 1) — the committed tokens since its last use (the whole prompt at first;
// after plain rounds, all they committed; after a fully accepted round, the last draft and the bonus token) — and
// its last row gives the q of the first level. Each later level's forward feeds the level drawn last, one row per
// branch, which sees the committed text and its own path of the tree's rows fed before (model_extend_tree's rows: a
// chain's newest token is the case of one branch), and gives the q of every branch's next token. The levels hang
// under the tree's last node, or under the newest of the n tokens when the tree is empty, and their nodes and q
// rows follow those already there: node i's row is first_position + i, the nodes in breadth-first order. The
// deepest level is never fed, since the next round may not keep it. The report's counts add up.
//
// Cut at its forwards (Drafter.begin, .resume): draft_levels names the first in *forward (rows.T = 0: nothing to
// draft), and draw_level, after each, draws the level and names the next.
static void draft_levels(ModelDrafter *d, const int *unread, int n, TreeShape shape, bool guess, DraftTree *tree,
                         double *q, DraftReport *report, DraftForward *forward) {
    *forward = (DraftForward){.model = d->model, .logits = d->logits};
    if (shape.depth < 1 || n > d->model->cfg.n_positions) return;
    shape.width = shape.width < max_width(d->params) ? shape.width : max_width(d->params);
    DraftLevels *l = &d->levels;
    *l = (DraftLevels){.tree = tree, .q = q, .report = report, .n = n, .shape = shape, .guess = guess,
                       .frontier = tree->n > 0 ? tree->n - 1 : -1, .n_frontier = 1};
    for (int i = 0; i < tree->n; i++) l->q_rows += tree->node[i].q != NULL;
    forward->rows = (SequenceRows){.cache = &d->cache, .tokens = unread, .T = n - d->cache.len};
    report->rows += forward->rows.T;
}

// After a level's forward (its logits in d->logits, a row per frontier node): the level's nodes, each node's
// children drawn from its q; then the next level's forward in *forward, or none (rows.T = 0) where the levels are
// done — at the depth asked, when no branch drew a child (the draft unsure, or the grammar allowing nothing), or
// when the context is full.
static int draw_level(ModelDrafter *d, DraftForward *forward, Err *err) {
    DraftLevels *l = &d->levels;
    DraftTree *tree = l->tree;
    const int V = d->model->n_vocab, from = tree->n;  // the nodes this level adds
    l->report->calls++;
    forward->rows.T = 0;
    for (int f = 0; f < l->n_frontier; f++) {
        const int node = l->frontier + f;
        float *logits = d->logits + (size_t)f * V;
        penalize_draft_row(d, tree, node, logits);
        if (d->p_min > 0 && sampling_top_probability(d->model->kernels, logits, V, d->exponentials) < d->p_min)
            continue;  // the draft is unsure
        const double *q_row;
        int token;
        const double t0 = now_seconds();
        const int masked = constrain(d, tree, node, logits, err);
        if (masked < 0) return -1;
        if (masked > 0) continue;  // the grammar leaves this branch nothing
        double *row = l->q ? l->q + (size_t)l->q_rows * V : NULL;  // (greedy: no rows, drafting ahead gives none)
        if (draft_q(d, logits, row, l->n + l->level - 1, &q_row, &token, err)) return -1;
        l->report->q_seconds += now_seconds() - t0;
        draw_children(d, tree, logits, q_row, token, node, l->level == 0 ? l->shape.width : 1, l->n + l->level,
                      l->guess && l->level == 0);
        l->q_rows += q_row != NULL;
    }
    if (tree->n == from || ++l->level == l->shape.depth) return 0;
    l->frontier = from;
    l->n_frontier = tree->n - from;
    if (d->cache.len + l->n_frontier > d->model->cfg.n_positions) return 0;
    for (int i = 0; i < l->n_frontier; i++) l->tokens[i] = tree->node[from + i].token;
    forward->rows = (SequenceRows){.cache = &d->cache, .tokens = l->tokens, .T = l->n_frontier,
                                   .parent = tree->parent, .base = d->first_position, .all_logits = true};
    l->report->rows += l->n_frontier;
    return 0;
}

// Where the drafts to come continue the committed tokens context[0..n), n_prompt of them the prompt's: their rows'
// penalties' history (penalize_draft_row).
static void continue_text(ModelDrafter *d, const int *context, int n, int n_prompt) {
    d->committed = context;
    d->n_committed = n;
    d->n_prompt = n_prompt;
}

// A tree of request->shape continuing the committed tokens context[0..n): its first forward in *forward.
static void propose_tree(ModelDrafter *d, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                         double *q, DraftReport *report, DraftForward *forward) {
    *report = (DraftReport){0};
    tree->n = 0;
    d->first_position = n;
    continue_text(d, context, n, request->n_prompt);
    draft_levels(d, context + d->cache.len, n, request->shape, request->guess, tree, q, report, forward);
}

// The chain drafted ahead, if it continues this text — the committed tokens are the ones it assumed, its guess the
// newest (a->n, checked by its last token: the others were the verified round's drafts, kept if the count is
// right) — and the request is a chain: its drafts after the guess, as many as asked, their q rows copied to q, and
// their rows, written past the cache's length, taken into it (the guess's and those of the drafts but the deepest,
// as propose_tree leaves them). Dropped either way: it serves one proposal. Returns whether it was taken; *more
// gets the drafts still to draw after it: where the request is deeper than the chain drafted ahead, which went as
// deep as it was asked (had it stopped before, unsure or at the context's end, this round would stop there too).
static bool take_ahead(ModelDrafter *d, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                       DraftReport *report, int *more) {
    AheadChain *a = &d->ahead;
    const bool holds = a->n == n && context[n - 1] == a->tree.node[0].token && d->cache.len == a->cache_len;
    a->n = 0;
    if (!holds || shape.width != 1 || shape.depth < 1) return false;
    const int V = d->model->n_vocab, k = a->tree.n - 1 < shape.depth ? a->tree.n - 1 : shape.depth;
    tree->n = 0;
    for (int i = 0; i < k; i++) {
        TreeChild child = a->tree.node[1 + i];
        if (child.q) child.q = memcpy(q + (size_t)i * V, child.q, sizeof(double) * V);
        add_node(tree, child, i - 1);
    }
    d->first_position = n;
    d->cache.len = n + k - 1;
    *report = (DraftReport){.ahead = true};
    *more = a->stopped ? 0 : shape.depth - k;
    return true;
}

// The chain drafted ahead if it holds (take_ahead), continued to the depth asked; else a tree drafted now
// (propose_tree). Either way the drafts, their q rows and their random numbers are the ones propose_tree would
// give: the continuation feeds the chain's deepest draft and draws from the same positions on, so pipelining
// changes no token whatever depth the next round asks for. The first forward goes to *forward (Drafter.begin).
static int model_begin(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                       double *q, DraftReport *report, DraftForward *forward, Err *err) {
    (void)err;
    ModelDrafter *d = (ModelDrafter *)self;
    int more;
    *forward = (DraftForward){.model = d->model, .logits = d->logits};
    if (!take_ahead(d, context, n, request->shape, tree, q, report, &more))
        propose_tree(d, context, n, request, tree, q, report, forward);
    else if (more > 0) {
        continue_text(d, context, n, request->n_prompt);
        d->ahead.deepest = tree->node[tree->n - 1].token;
        draft_levels(d, &d->ahead.deepest, n + tree->n, (TreeShape){.depth = more, .width = 1}, false, tree, q,
                     report, forward);
    }
    return 0;
}

static int model_resume(Drafter *self, DraftForward *forward, Err *err) {
    return draw_level((ModelDrafter *)self, forward, err);
}

// On the drafting thread (draft_ahead.h): propose_tree after context[0..n), the committed tokens and the verified
// round's chain, for a chain of depth + 1 — the guess of the round's next token, drawn from q after the last draft
// (draw_children: coupled to the round's own draw of that token), then the next round's drafts after it. Its
// forwards run on this thread alone (the pool is the target's, verifying). The drafter is left as the round left it
// but for these rows past the cache's length and the chain: the round's rollback and check read nothing of them.
static int model_draft_ahead(Drafter *self, const int *context, int n, int depth, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    AheadChain *a = &d->ahead;
    a->n = 0;
    // A chain ends with its deepest draft unfed unless the draft stopped below p_min after it: then the cache holds
    // all n tokens, and the q after the last draft — the guess's — was the unsure one. Nothing to draft ahead: the
    // guess's level would stop at the same test on the same logits.
    if (d->cache.len >= n) return 0;
    const size_t q_size = sizeof(double) * (GAMMA_MAX + 1) * d->model->n_vocab;
    if (!a->q && d->params->sampling.temperature > 0 && !(a->q = malloc(q_size)))
        return err_fmt(err, "out of memory for the draft's rows drafted ahead");
    const int first_position = d->first_position, len = d->cache.len, threads = d->model->max_threads;
    const int most = depth < GAMMA_MAX ? depth + 1 : GAMMA_MAX + 1;
    d->model->max_threads = 1;
    DraftReport report;
    const DraftRequest request = {.shape = {.depth = most, .width = 1}, .n_prompt = d->n_prompt, .guess = true};
    const int rc = drafter_propose_by_steps(self, context, n, &request, &a->tree, a->q, &report, err);
    d->model->max_threads = threads;
    d->first_position = first_position;
    d->cache.len = len;
    if (rc) return -1;
    if (a->tree.n < 2) return 0;
    a->n = n + 1;
    a->cache_len = len;
    a->stopped = a->tree.n < most;
    return a->tree.n - 1;
}

static int model_prefill(Drafter *self, const int *context, int n, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    d->ahead.n = 0;  // a new text
    if (n <= d->cache.len) return 0;
    return model_forward(d->model, &d->cache, context + d->cache.len, n - d->cache.len, d->logits, false, err);
}

// The accepted path's rows that were fed (the deepest level never is) move to base, base + 1, ... (a chain's are
// there already); then everything from position n on is forgotten.
static void model_rollback(Drafter *self, int n, const int *path, int n_path) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (n != d->ahead.n - 1) d->ahead.n = 0;  // the text moved past the guess's position, or back: it cannot hold
    int kept = 0;
    while (kept < n_path && d->first_position + path[kept] < d->cache.len) kept++;
    if (kept > 0) kv_keep_path(&d->cache, d->first_position, path, kept);
    if (d->cache.len > n) kv_truncate(&d->cache, n);
    // Rounds never take back more than the newest committed token; a rollback further back starts another sequence
    // of committed tokens (a conversation's next turn, rendered differently), which the debug check serves afresh.
    if (n + 1 < d->check.fresh.len) rollback_check_free(&d->check);
}

static int model_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    return model_check_rollback(d->model, &d->cache, &d->check, context, n_prefill, "draft", err);
}

int model_drafter_init(ModelDrafter *d, Model *draft, const SpecParams *params, float p_min, Err *err) {
    // Planned on one thread, whatever --draft-threads: a draft is small, its fastest count 1 or 2 (model/probe.h),
    // and a plan must not follow the probe's timings. A step samples its q row too.
    const double row = spec_row_cost(draft->n_vocab), step = spec_forward_cost(draft, 1, 1) + row;
    *d = (ModelDrafter){.base = {.prefill = model_prefill, .propose = drafter_propose_by_steps,
                                 .begin = model_begin, .resume = model_resume, .rollback = model_rollback,
                                 .draft_ahead = model_draft_ahead, .check_rollback = model_check, .step_cost = step,
                                 .row_cost = spec_forward_cost(draft, 2, 1) - spec_forward_cost(draft, 1, 1) + row},
                        .model = draft, .params = params, .p_min = p_min, .max_width = max_width(params)};
    d->logits = malloc(sizeof(float) * d->max_width * draft->n_vocab);
    d->scratch = malloc(sizeof(double) * draft->n_vocab);
    if (p_min > 0) d->exponentials = malloc(sizeof(float) * draft->n_vocab);
    if (!d->logits || !d->scratch || (p_min > 0 && !d->exponentials))
        return err_fmt(err, "out of memory for the draft's logits");
    if (sampler_init(&d->sampler, &params->sampling, draft->n_vocab, draft->kernels, err)) return -1;
    if (params->penalties && penalizer_init(&d->penalizer, params->penalties, draft->n_vocab, err)) return -1;
    return model_kv_init(draft, &d->cache, err);
}

void model_drafter_free(ModelDrafter *d) {
    sampler_free(&d->sampler);
    penalizer_free(&d->penalizer);
    kv_free(&d->cache);
    rollback_check_free(&d->check);
    free(d->logits);
    free(d->scratch);
    free(d->exponentials);
    free(d->ahead.q);
    d->logits = NULL;
    d->ahead.q = NULL;
}
