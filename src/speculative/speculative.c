// speculative.c — the speculative decoding scheduler: Algorithm 1 of Leviathan et al. (2023), a draft-length
// policy, and statistics. See speculative.h for the contract.
#include "speculative/speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// ---- randomness ---------------------------------------------------------------------------------------------

static double uniform_for(const SpecParams *params, int position, DrawPurpose purpose) {
    return random_uniform(params->seed, (uint64_t)position, (1ULL << 32) + purpose);
}

int spec_draw(const SpecParams *params, const double *probs, int V, int position, DrawPurpose purpose) {
    if (params->sampler == SAMPLER_COUPLED) return sampling_gumbel_max(probs, V, params->seed, (uint64_t)position);
    return sampling_draw(probs, V, uniform_for(params, position, purpose));
}

// ---- the accept / resample step -----------------------------------------------------------------------------

double spec_accept_probability(double p_x, double q_x) { return q_x <= p_x ? 1.0 : p_x / q_x; }

double spec_residual(double *residual, const double *p, const double *q, int V) {
    double mass = 0.0;
    for (int i = 0; i < V; i++) mass += residual[i] = p[i] > q[i] ? p[i] - q[i] : 0.0;
    if (mass > 0.0)
        for (int i = 0; i < V; i++) residual[i] /= mass;
    else
        memcpy(residual, p, sizeof(double) * V);
    return mass;
}

double spec_expected_tokens(double alpha, double gamma) {
    return alpha < 1.0 ? (1.0 - pow(alpha, gamma + 1)) / (1.0 - alpha) : gamma + 1;
}

double spec_tree_expected_tokens(double first_alpha, double alpha, int depth) {
    return depth > 0 ? 1.0 + first_alpha * spec_expected_tokens(alpha, depth - 1) : 1.0;
}

double spec_expected_tokens_by_level(const double *accept, int depth) {
    double tokens = 1.0, reach = 1.0;
    for (int level = 1; level <= depth; level++) tokens += reach *= accept[level];
    return tokens;
}

double spec_predicted_speedup(double alpha, double gamma, double c) {
    return spec_expected_tokens(alpha, gamma) / (gamma * c + 1.0);
}

// ---- the draft-length policy --------------------------------------------------------------------------------
//
// GAMMA_AUTO picks the γ that maximises expected tokens per second, the measured-cost form of Theorem 3.8:
//   rate(γ) = E[tokens per round] / E[round time] = ((1 − α^{γ+1}) / (1 − α)) / (γ · t_draft + t_target(γ + 1))
// where α is a running mean of Σ_x min(p, q), t_draft the time of one draft step and t_target(T) the time of
// a target forward over T tokens — not constant on a CPU. γ = 0 (plain decoding) wins when no draft pays.
// α is learned per source: the draft model's sampled drafts, and the lookup's one-hot ones, which cost no draft
// step (t_draft = 0). A lookup run's first draft is kept with a probability α_first that depends on the length of
// the match behind it (and on the temperature: at 0.7 a one-hot draft is kept with probability p(x), far less often
// than greedily), its later drafts, once a copy is under way, with another, α_next; so for a run
//   E[tokens per round] = 1 + α_first · (1 − α_next^γ) / (1 − α_next)
// (equation 1 when α_first = α_next). A drafter with a lookup is told each round, per match length, how much of the
// lookup's run pays more than the draft model's drafts or plain decoding (Drafter.lookup_gamma; 0: not that run).
// The lookup costs nothing to ask, so it is asked every round, and a run it found but did not propose teaches α as
// well as one that was (learn_unproposed_run): the round's p_1 and committed tokens tell how much of the run would
// have been kept. A run takes the place of the draft model's drafts only once first drafts' acceptance has been
// learned from LOOKUP_EVIDENCE of them, never on the prior alone (a match length with fewer is judged by the
// lookup's other lengths): adding the lookup to the model must not cost. In place of plain decoding a run costs
// only its verification's extra tokens, and the prior is enough.
// Where the choice of γ could change the output (SpecParams), t_draft and t_target come from spec_forward_cost
// instead of measurements, so that they are the same on every run.
//
// Trees (--tree-width W, --tree): a tree of depth γ whose first level has W children, each continued as a chain,
// has W·γ nodes and yields E = 1 + a_W (1 + α + … + α^{γ−1}) tokens (spec_tree_expected_tokens), a_W the
// probability that one of W children is kept — learned per width from the rounds that drew W, starting from a
// prior below W independent tries (first_alpha) — at the cost of γ draft forwards over the tree so far and a
// verification of T = W·γ + 1 tokens. With --tree the widths 1..W compete on that rate, so a tree is chosen only
// where the measured verification cost of its T leaves it ahead of the chain. A lookup tree's first branch is the
// run, whose drafts teach α as above; its other branches, continuations of shorter matches, teach a_W at the first
// level and α_next below it.

enum { T_SLOTS = TREE_MAX_ROWS + 1 };

// Whose drafts α learns from: the draft model's (SAMPLED); a lookup run's first after a match of m tokens (source
// m), or of any length (LOOKUP_FIRST); a lookup run's later ones (LOOKUP_NEXT).
enum { SAMPLED = 0, LOOKUP_FIRST = LOOKUP_MATCH_SLOTS, LOOKUP_NEXT, N_SOURCES };

typedef struct {
    double alpha[N_SOURCES];    // running means of the acceptance probability (Σ min(p, q) under rejection)
    double draft_step;          // seconds per draft forward (running mean)
    double tree_draft_step[TREE_FIRST_WIDTH_MAX + 1];  // ... of a tree of that width (0 = not measured)
    double first_alpha[TREE_FIRST_WIDTH_MAX + 1];      // a_W: P(one of W first-level children is kept), running means
    int n_first[TREE_FIRST_WIDTH_MAX + 1];             // the levels of W ≥ 2 children it has learned from
    bool draft_step_known;      // measured, or 0 by nature (a lookup's proposals cost no forward)
    double target[T_SLOTS];     // seconds per target forward of T tokens (running means; 0 = not measured)
    int largest_measured;       // the largest T of target[] measured (0: none)
    bool modelled;              // plan with the cost model below, not with the measurements above
    double model_draft_step, model_target[T_SLOTS];  // spec_forward_cost: the drafter's step, the target's T
    double model_draft_row;     // ... a further row of a draft forward (a tree's level forwards feed W)
    int heuristic_gamma;
    int plain_streak;           // GAMMA_AUTO: rounds in a row it chose plain decoding
    int n_alpha[N_SOURCES];     // drafts α has learned from
    int probe_misses;           // probes in a row (one draft after plain rounds) that were rejected, up to 3
    bool probing;               // this round's draft model drafts are a probe
} GammaState;

static const double ALPHA_PRIOR = 0.6, EMA = 0.1;
// A lookup run's drafts after its first: a copy under way mostly goes on (α learned for them by the end of 64 tokens
// on the bench prompts: about 0.96 greedily, 0.4–0.55 at temperature 0.7, which every round teaches, whether it
// proposed a run or not). A prior as low as ALPHA_PRIOR kept greedy runs short for many rounds.
static const double ALPHA_NEXT_PRIOR = 0.9;
// The first drafts of lookup runs α_first must have learned from before a run may take the draft model's place
// (one or two is luck when sampling).
enum { LOOKUP_EVIDENCE = 4 };

static void running_mean(double *mean, double x) { *mean = *mean > 0 ? *mean + EMA * (x - *mean) : x; }

// α learns from a draft's acceptance β: the mean of the drafts seen so far with the prior counting as one of them,
// until there are 1/EMA of them; then a running mean that forgets. A useless draft is found out in a few drafts
// (the prior alone would take 1/EMA times as many), and plain decoding takes over.
static void learn_alpha(GammaState *g, int source, double beta) {
    const int n = ++g->n_alpha[source];
    const double weight = 1.0 / (n + 1) > EMA ? 1.0 / (n + 1) : EMA;
    g->alpha[source] += weight * (beta - g->alpha[source]);
}

// What the i-th draft of a lookup run after a match of match_length tokens teaches.
static void learn_lookup_alpha(GammaState *g, int match_length, int i, double beta) {
    if (i > 0) {
        learn_alpha(g, LOOKUP_NEXT, beta);
        return;
    }
    learn_alpha(g, match_length < LOOKUP_MATCH_SLOTS ? match_length : LOOKUP_MATCH_SLOTS - 1, beta);
    learn_alpha(g, LOOKUP_FIRST, beta);
}

// t_target(T): the measurement if there is one; else the line a + b·T fitted by least squares to the measured
// T's (b ≥ 0: verifying more tokens never costs less), or with a single measured T, that time plus 3% per token
// (roughly what the bench measures for a memory-bound model). 0 if nothing is measured yet.
static double target_time(const GammaState *g, int T) {
    if (g->target[T] > 0) return g->target[T];
    double n = 0, st = 0, sy = 0, stt = 0, sty = 0;
    for (int t = 1; t < T_SLOTS; t++)
        if (g->target[t] > 0) n++, st += t, sy += g->target[t], stt += (double)t * t, sty += t * g->target[t];
    if (n == 0) return 0.0;
    const double mean_t = st / n, mean_y = sy / n, var_t = stt / n - mean_t * mean_t;
    double slope = var_t > 0 ? (sty / n - mean_t * mean_y) / var_t : 0.03 * mean_y;
    slope = slope > 0 ? slope : 0;
    const double at_t = mean_y + slope * (T - mean_t);
    return at_t > 0 ? at_t : mean_y;
}

// FLOPs per byte of weights at which a forward's arithmetic takes as long as streaming its weights. What make
// bench measures for the shipped target (a forward over 9 tokens costs 1.99 times one token's) puts it near 3.6.
static const double FORWARD_FLOPS_PER_BYTE = 4.0;

double spec_forward_cost(const Model *m, int T) {
    return (double)m->weight_bytes + T * 2.0 * model_matrix_multiply_adds(m) / FORWARD_FLOPS_PER_BYTE;
}

// GAMMA_AUTO, measuring, starts with one plain round, which measures t_target(1), the yardstick of every choice (and
// of the predicted speedup), then drafts 4 to measure a draft step (a lookup's costs nothing: not measured); from
// then on it maximises rate(γ). Plain rounds teach it nothing about α, so every 8th plain round in a row drafts one
// token — every 16th, 32nd, 64th after one, two, three such probes in a row were rejected: α can recover when the
// text becomes easier again, and a useless draft costs a probe per 64 tokens. The draft model reads the text those
// plain rounds committed in one batch when it is next used (draft_model.c): a plain round costs no draft forward.
static double verify_time(const GammaState *g, int T) { return g->modelled ? g->model_target[T] : target_time(g, T); }

// A tree's verification, planned: as verify_time, except that a T larger than any measured is priced at the largest
// measured T's time scaled by the cost model's cost(T) / cost(T_max), which adds the further rows' arithmetic to the
// weight stream instead of hiding it behind. target_time's linear fit extrapolates a chain's cheap rows, and a tree
// chosen on that price does not pay it: the shipped target on 2 cores measures t(8)/t(1) 1.32 but t(13)/t(1) 2.09
// (compute-bound), and greedy --tree ran at 0.94× the chain. Once a tree's T has been verified, its time is known.
static double tree_verify_time(const GammaState *g, int T) {
    const int largest = g->largest_measured;
    if (g->modelled || largest == 0 || T <= largest) return verify_time(g, T);
    return g->target[largest] * g->model_target[T] / g->model_target[largest];
}

// a_W: learned, or before any tree of width W was drawn, 1 − (1 − α)(1 − α/2)^{W−1}: each further child halves
// the odds of being kept against the first — W independent tries (1 − (1 − α)^W) promise far more than the residual
// left after a rejection gives; the trees suite measured on the shipped pair, temperature 1, depth 4: a_1 = 0.77,
// a_2 = 0.83, a_3 = 0.89, a_4 = 0.91 (this: 0.86, 0.91, 0.95; independent tries: 0.95, 0.99, 1.00).
static double first_alpha(const GammaState *g, int width, double alpha) {
    return width == 1              ? alpha
           : g->n_first[width] ? g->first_alpha[width]
                               : 1.0 - (1.0 - alpha) * pow(1.0 - alpha / 2, width - 1);
}

// a_W learns as α does (learn_alpha), from a level of W children: kept or not.
static void learn_first_alpha(GammaState *g, int width, double alpha, bool kept) {
    if (width < 2 || width > TREE_FIRST_WIDTH_MAX) return;  // (a wider level comes from no drafter here)
    if (g->n_first[width] == 0) g->first_alpha[width] = first_alpha(g, width, alpha);
    const int n = ++g->n_first[width];
    const double weight = 1.0 / (n + 1) > EMA ? 1.0 / (n + 1) : EMA;
    g->first_alpha[width] += weight * (kept - g->first_alpha[width]);
}

// The seconds (or cost units) of one draft forward of a tree of this width: measured, else the chain's.
static double draft_step_of(const GammaState *g, int width) {
    if (g->modelled) return g->model_draft_step;
    return width > 1 && g->tree_draft_step[width] > 0 ? g->tree_draft_step[width] : g->draft_step;
}

// The time of drafting `depth` levels at draft_step per level forward; with the cost model, a tree's level forwards
// after the first feed W rows (draft_model.c), (γ − 1)(W − 1) rows beyond one each.
static double draft_time(const GammaState *g, int width, int depth, double draft_step) {
    const double extra_rows = (depth - 1) * (width - 1.0);
    return width > 1 && g->modelled ? depth * draft_step + extra_rows * g->model_draft_row : depth * draft_step;
}

// The depth γ (0: plain decoding) that maximises rate for a tree of `width` (1: a chain) whose first drafted level
// is kept with probability a_W (first_alpha of alpha_first: alpha_first itself for a chain) and each later draft
// with alpha_next, at draft_step per level — or only γ = fixed_depth when that is > 0; *rate gets it. Verifying T
// tokens is taken to cost at least a plain step: a noisy measurement must not make drafting look free.
static int best_depth(const GammaState *g, int width, double alpha_first, double alpha_next, double draft_step,
                      int fixed_depth, double *rate) {
    int best = 0;
    const double plain_step = verify_time(g, 1), a_first = first_alpha(g, width, alpha_first);
    *rate = fixed_depth > 0 ? 0 : 1.0 / plain_step;
    for (int depth = fixed_depth > 0 ? fixed_depth : 1; depth <= (fixed_depth > 0 ? fixed_depth : GAMMA_MAX);
         depth++) {
        const int T = width * depth + 1;
        if (T > TREE_MAX_ROWS) break;
        const double t_planned = width > 1 ? tree_verify_time(g, T) : verify_time(g, T);
        const double t_verify = t_planned > plain_step ? t_planned : plain_step;
        const double tokens = spec_tree_expected_tokens(a_first, alpha_next, depth);
        const double r = tokens / (draft_time(g, width, depth, draft_step) + t_verify);
        if (r > *rate) best = depth, *rate = r;
    }
    return best;
}

// The widest first level a tree may have (SpecParams.tree_width).
static int widest(const SpecParams *params) { return params->tree_width > 1 ? params->tree_width : 1; }

// The best shape over the widths allowed — every width up to the widest with --tree, else the widest only — for
// drafts of one source (the model's, whose levels cost a draft step; a lookup's, which cost none) kept with
// probabilities alpha_first, alpha_next (best_depth), at depth fixed_depth when > 0.
static TreeShape best_shape(const SpecParams *params, const GammaState *g, bool model, double alpha_first,
                            double alpha_next, int fixed_depth, double *rate) {
    TreeShape best = {fixed_depth, params->tree_auto ? 1 : widest(params)};
    *rate = -1;
    for (int width = params->tree_auto ? 1 : widest(params); width <= widest(params); width++) {
        double r;
        const double step = model ? draft_step_of(g, width) : 0;
        const int depth = best_depth(g, width, alpha_first, alpha_next, step, fixed_depth, &r);
        if (r > *rate) best = (TreeShape){depth, width}, *rate = r;
    }
    return best;
}

// What the drafter is asked for this round: runs of the lookup by match length, and the draft model's drafts.
static void ask_drafter(Drafter *drafter, int lookup_gamma, int model_gamma) {
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) drafter->lookup_gamma[m] = lookup_gamma;
    drafter->model_gamma = model_gamma;
    drafter->n_run = drafter->match_length = 0;
    drafter->run_proposed = false;
}

// The shape of the next round. A drafter with a lookup is told, per match length, how deep a run to propose
// (Drafter.lookup_gamma: a chain beside the staged drafter's model, the first branch of a lookup tree) and how deep
// the model's drafts go when no run is proposed (Drafter.model_gamma); the shape's width is the model's tree's
// (staged: a lookup run stays a chain), or the lookup tree's, chosen on the lookup's α of any match length.
static TreeShape choose_shape(const SpecParams *params, GammaState *g, Drafter *drafter) {
    TreeShape shape = {0, 1};
    if (!drafter) return shape;
    g->probing = false;
    const bool has_model = drafter->step_cost > 0;
    const bool measured = g->modelled || (g->target[1] > 0 && g->draft_step_known);
    const double alpha_first = has_model ? g->alpha[SAMPLED] : g->alpha[LOOKUP_FIRST];
    const double alpha_next = has_model ? g->alpha[SAMPLED] : g->alpha[LOOKUP_NEXT];
    double rate;
    if (params->policy != GAMMA_AUTO) {
        shape.depth = params->policy == GAMMA_FIXED ? params->gamma : g->heuristic_gamma;
        if (params->tree_auto && measured)
            shape.width = best_shape(params, g, has_model, alpha_first, alpha_next, shape.depth, &rate).width;
        else if (!params->tree_auto) shape.width = widest(params);
        ask_drafter(drafter, shape.depth, shape.depth);
        return shape;
    }
    ask_drafter(drafter, 0, 0);
    if (!g->modelled && g->target[1] <= 0) return shape;
    if (has_model && !g->modelled && !g->draft_step_known) {  // the draft model's step is what is measured
        drafter->model_gamma = 4;
        return (TreeShape){4, params->tree_auto ? 1 : widest(params)};
    }
    double model_rate = 1.0 / verify_time(g, 1);  // plain decoding's, where there is no model or it does not pay
    if (has_model) {
        shape = best_shape(params, g, true, alpha_first, alpha_next, 0, &model_rate);
        g->plain_streak = shape.depth == 0 ? g->plain_streak + 1 : 0;
        g->probing = shape.depth == 0 && g->plain_streak % (8 << g->probe_misses) == 0;
        if (g->probing) shape = (TreeShape){1, 1};
        drafter->model_gamma = shape.depth;
    }
    if (!drafter->has_lookup) return shape;
    if (!has_model) shape.width = best_shape(params, g, false, alpha_first, alpha_next, 0, &rate).width;
    const int lookup_width = has_model ? 1 : shape.width;
    const int evidence = shape.depth > 0 ? LOOKUP_EVIDENCE : 0;  // to take the model's place; plain decoding's, none
    for (int m = 1; m < LOOKUP_MATCH_SLOTS && g->n_alpha[LOOKUP_FIRST] >= evidence; m++) {
        const double alpha_m = g->alpha[g->n_alpha[m] > 0 && g->n_alpha[m] >= evidence ? m : LOOKUP_FIRST];
        double lookup_rate;
        const int lookup_gamma =
            best_depth(g, lookup_width, alpha_m, g->alpha[LOOKUP_NEXT], 0, 0, &lookup_rate);
        drafter->lookup_gamma[m] = lookup_gamma > 0 && lookup_rate >= model_rate ? lookup_gamma : 0;
        shape.depth = shape.depth > drafter->lookup_gamma[m] ? shape.depth : drafter->lookup_gamma[m];
    }
    shape.depth = shape.depth > 0 ? shape.depth : 1;  // the lookup is asked every round: what it finds teaches α
    return shape;
}

// ---- the scheduler: one round of Algorithm 1 ---------------------------------------------------------------
//
// A round is the paper's steps, each a function below, over a draft tree — a chain of γ drafts is the tree of
// width 1, and the same code runs it:
//   0. choose γ (and the tree's width)  next_shape
//   1. draft x_1..x_k ~ q_1..q_k        draft: a tree of k nodes, each drawn from its q (or deterministic)
//   2. verify: p at every node          verify: one target forward over [newest committed token, nodes] under
//                                       the tree mask (model_forward_tree); p of the token after each node
//   3. accept x_i, or                   accept_or_resample: from the root down, at each node its children in the
//   4. resample at the first rejection, order drawn (accept_at_node: Algorithm 1's test for one child; for
//      else draw the bonus              several, recursive rejection sampling over them); the bonus after a leaf
//   5. commit and roll back             commit_and_roll_back: the accepted path's rows kept (kv_keep_path)
// Each step writes what it decided into the round's record (Round); the statistics, the γ policy's
// measurements, the trace and --show's callbacks read the record afterwards (record_round).

#ifdef SPECDEC_DEBUG
enum { CHECK_ROLLBACKS = 1 };  // make BUILD=debug: every rollback is checked against a recomputation
#else
enum { CHECK_ROLLBACKS = 0 };
#endif

// One round, as it happened.
typedef struct {
    TreeShape shape;                    // asked of the drafter
    DraftTree tree;                     // drafted: tree.n nodes (k), of depth `depth`
    int depth, width, n_one_hot;        // the tree's levels, most children of a node; its nodes with a one-hot q
    int level[TREE_MAX_NODES];          // of each node (0: a child of the newest committed token)
    bool first_branch[TREE_MAX_NODES];  // each node: every node on its path is its parent's first child (a run)
    int base;                           // the target cache's length before verification
    int tokens[TREE_MAX_ROWS];          // [newest committed token, the nodes' tokens]: what the target verifies
    int parent[TREE_MAX_ROWS];          // row i's parent row in that batch (−1 for row 0; node j is row j + 1)
    // The children the accept rule looked at, in order: at each node of the accepted path, those it tried.
    int tried[TREE_MAX_NODES];          // nodes
    double p_x[TREE_MAX_NODES], q_x[TREE_MAX_NODES];  // p(x), q(x) of each (p after the earlier siblings' rejection)
    double r[TREE_MAX_NODES];           // rejection's acceptance numbers
    double overlap[TREE_MAX_NODES];     // β = Σ_x min(p, q) (p(x) for a one-hot q)
    double learned[TREE_MAX_NODES];     // what α learns from it: β, or under coupling, the outcome
    int n_verified;                     // children tried
    int path[GAMMA_MAX];                // the accepted nodes, root first
    int n_accepted, next;               // kept drafts; the target's token after them
    int wide_width, wide_kept;          // the widest level tried (children), and whether one of them was kept
    int n_sibling_kept;                 // kept children that were not their node's first
    TokenKind kind;                     // of next: TOKEN_BONUS, _RESAMPLED, or _TARGET (plain decoding)
    double residual_mass;               // Σ max(0, p − q) at the rejection
    int n_committed;                    // of x_1..x_{n_accepted}, next: committed (end-of-text and -n stop early)
    double draft_seconds, target_seconds;
    int draft_calls;                    // draft model forwards
} Round;

// The scheduler's state between rounds.
typedef struct {
    Model *target;
    Drafter *drafter;                   // NULL: plain decoding
    const SpecParams *params;
    int V, n_ctx;
    Sampler sampler;
    KVCache cache;                      // the target's: the committed tokens but the newest
    KVCache *callers_cache;             // speculative_continue's: where the cache goes back to, else NULL
    RollbackCheck check;                // the debug build's (CHECK_ROLLBACKS)
    int max_nodes;                      // the most nodes a tree of this run has (GAMMA_MAX for a chain)
    float *logits;                      // [max_nodes + 1, V]
    double *p;                          // [max_nodes + 1, V]: the rows the accept rule reached, adjusted
    double *q;                          // [max_nodes, V]
    double *scratch;                    // [3V]: the accept step's (tree_accept)
    int *context;                       // the committed tokens: prompt and emitted
    int n, n_prompt;                    // committed tokens; of them the prompt's
    int *out;                           // the emitted tokens
    bool done;                          // end-of-text or -n reached
    GammaState g;
    double alpha_sum, gamma_sum;        // Σ learned α over verified drafts; Σ depth over rounds
    int rounds_by_shape[TREE_FIRST_WIDTH_MAX + 1][GAMMA_MAX + 1];
    int wide_tried[TREE_FIRST_WIDTH_MAX + 1], wide_kept[TREE_FIRST_WIDTH_MAX + 1];  // levels of W ≥ 2 children; kept
    SpecStats *stats;
} Scheduler;

// 0. The tree's shape: by policy, but no deeper than the tokens still wanted, and no more nodes than the context
// left holds.
static TreeShape next_shape(Scheduler *s) {
    TreeShape shape = choose_shape(s->params, &s->g, s->drafter);
    int room = s->n_ctx - s->cache.len - 1;
    const int wanted = s->params->max_tokens - s->stats->generated - 1;
    room = room < s->max_nodes ? room : s->max_nodes;
    shape.depth = shape.depth < wanted ? shape.depth : wanted;
    shape.depth = shape.depth < GAMMA_MAX ? shape.depth : GAMMA_MAX;
    shape.depth = shape.depth > 0 ? shape.depth : 0;
    if (shape.width * shape.depth > room)  // a narrower tree, down to the chain, if the context allows no other
        shape = room / shape.width > 0 ? (TreeShape){room / shape.width, shape.width}
                                       : (TreeShape){shape.depth < room ? shape.depth : room, 1};
    return shape;
}

// 1. Draft a tree of nodes x_i ~ q_i continuing the committed tokens.
static int draft(Scheduler *s, Round *r, Err *err) {
    r->tree.n = 0;
    if (r->shape.depth == 0) return 0;
    const int calls = s->drafter->calls;
    if (s->drafter->propose(s->drafter, s->context, s->n, r->shape, &r->tree, s->q, err)) return -1;
    int depth[TREE_MAX_NODES], children[TREE_MAX_ROWS] = {0};  // of each node; of each row (node j: row j + 1)
    for (int i = 0; i < r->tree.n; i++) {
        const int parent = r->tree.parent[i];
        depth[i] = parent < 0 ? 1 : depth[parent] + 1;
        r->depth = depth[i] > r->depth ? depth[i] : r->depth;
        r->width = ++children[parent + 1] > r->width ? children[parent + 1] : r->width;
        r->level[i] = depth[i] - 1;
        r->first_branch[i] = children[parent + 1] == 1 && (parent < 0 || r->first_branch[parent]);
        r->n_one_hot += !r->tree.node[i].q;
    }
    r->draft_calls = s->drafter->calls - calls;
    return 0;
}

// 2. Verify: one target forward over [newest committed token, x_1..x_k] under the tree mask gives the logits of the
// token after each (p_1..p_{k+1} for a chain); accept_or_resample adjusts the rows it reaches (target_probs).
static int verify(Scheduler *s, Round *r, Err *err) {
    r->tokens[0] = s->context[s->n - 1];
    r->parent[0] = -1;
    for (int i = 0; i < r->tree.n; i++) {
        r->tokens[1 + i] = r->tree.node[i].token;
        r->parent[1 + i] = r->tree.parent[i] + 1;
    }
    r->base = s->cache.len;
    return model_forward_tree(s->target, &s->cache, r->tokens, r->parent, r->tree.n + 1, s->logits, err);
}

// p after `node` (−1: after the newest committed token): the target's adjusted distribution of verify's row.
static const double *target_probs(Scheduler *s, int node, int position, Err *err) {
    double *p = s->p + (size_t)(node + 1) * s->V;
    if (sampler_adjust(&s->sampler, p, s->logits + (size_t)(node + 1) * s->V)) {
        err_fmt(err, "the target model produced a NaN or infinite logit at position %d", position);
        return NULL;
    }
    return p;
}

// 3 and 4 at one node, whose target distribution is p at `position`: its children c_1..c_m, tried in the order they
// were drawn (tree_accept: Algorithm 1's test for one child, recursive rejection sampling over several; under
// coupling the target's own Gumbel-max token chooses) — m = 0 draws the bonus token. Returns the kept child, or −1
// with r->next the token drawn. What α learns of each child tried is β = Σ min(p_k, q_k) (p_k(x) for a one-hot
// child); under coupling, for a sampled child, which has no cheap closed form, the outcome stands in.
static int accept_at_node(Scheduler *s, Round *r, const int *children, int m, const double *p, int position,
                          Err *err) {
    TreeChild nodes[TREE_WIDTH_MAX];
    for (int k = 0; k < m; k++) nodes[k] = r->tree.node[children[k]];
    TreeStep step;
    if (tree_accept(s->params, p, s->V, position, nodes, m, s->scratch, &step, err)) return -2;
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
// rejection, else the bonus token from p after the leaf reached (plain decoding: the target's token from p_1).
static int accept_or_resample(Scheduler *s, Round *r, Err *err) {
    r->kind = r->tree.n > 0 ? TOKEN_BONUS : TOKEN_TARGET;
    for (int node = -1;;) {
        const int position = s->n + r->n_accepted;
        const double *p = target_probs(s, node, position - 1, err);
        if (!p) return -1;
        int children[TREE_WIDTH_MAX], m = 0;
        for (int i = node + 1; i < r->tree.n && m < TREE_WIDTH_MAX; i++)
            if (r->tree.parent[i] == node) children[m++] = i;
        const int kept = accept_at_node(s, r, children, m, p, position, err);
        if (kept == -2) return -1;
        if (m > r->wide_width) r->wide_width = m, r->wide_kept = kept >= 0;
        if (kept < 0) {
            if (m > 0) r->kind = TOKEN_RESAMPLED;
            return 0;
        }
        r->n_sibling_kept += kept != children[0];
        r->path[r->n_accepted++] = node = kept;
    }
}

// Whether id ends the text: the end-of-text id, or one of a config's list of them.
static bool is_end_of_text(const SpecParams *params, int id) {
    bool eos = id == params->eos_id;
    for (int e = 0; e < params->n_eos; e++) eos |= id == params->eos_ids[e];
    return eos;
}

// 5. Commit x_1..x_{n_accepted} and the next token, stopping at the end-of-text id (not emitted) or at max_tokens;
// then keep the accepted path's rows in both caches (kv_keep_path: a chain's are in place) and roll them back to
// the committed tokens but the newest, which the next round's verify feeds first.
static int commit_and_roll_back(Scheduler *s, Round *r, Err *err) {
    for (int i = 0; i <= r->n_accepted && !s->done; i++) {
        const int id = i < r->n_accepted ? r->tree.node[r->path[i]].token : r->next;
        if (is_end_of_text(s->params, id)) {
            s->done = true;
            break;
        }
        s->context[s->n++] = s->out[s->stats->generated++] = id;
        r->n_committed++;
        const bool stop = s->params->stop && s->params->stop(s->params->stop_ctx, id);  // (every token, the last too)
        s->done = stop || s->stats->generated == s->params->max_tokens;
    }
    int rows[GAMMA_MAX + 1] = {0};  // verify's rows of the newest committed token and the accepted path
    for (int i = 0; i < r->n_accepted; i++) rows[1 + i] = r->path[i] + 1;
    kv_keep_path(&s->cache, r->base, rows, 1 + r->n_accepted);
    kv_truncate(&s->cache, s->n - 1);
    if (s->drafter) s->drafter->rollback(s->drafter, s->n - 1, r->path, r->n_accepted);
    if (!CHECK_ROLLBACKS) return 0;
    // Checked: both caches against a forward over the committed tokens that no rollback touches (rollback_check.c).
    if (model_check_rollback(s->target, &s->cache, &s->check, s->context, s->n_prompt - 1, "target", err)) return -1;
    return s->drafter && s->drafter->check_rollback
               ? s->drafter->check_rollback(s->drafter, s->context, s->n_prompt - 1, err)
               : 0;
}

// ---- what a round's record feeds: statistics, the γ policy, the trace, --show ------------------------------

// The token that ended a round and its kind, for the trace: the first accepted draft that is the end-of-text token
// (generation stops there: nothing after it is used), or else the target's token, of the round's kind.
static int round_end(const Round *r, const SpecParams *params, TokenKind *kind) {
    *kind = r->kind;
    for (int i = 0; i < r->n_accepted; i++)
        if (is_end_of_text(params, r->tree.node[r->path[i]].token)) {
            *kind = TOKEN_ACCEPTED;
            return r->tree.node[r->path[i]].token;
        }
    return r->next;
}

static void trace_ints(FILE *f, const char *name, const int *v, int n) {
    fprintf(f, ", \"%s\": [", name);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", v[i]);
    fputc(']', f);
}

// One JSON line: the tree (its nodes' tokens and parents, −1 for the newest committed token), the children the
// accept rule tried (nodes) with p(x), q(x) and r of each, and the accepted path (nodes, root first).
static void trace_round(FILE *f, int round, const Round *r, const SpecParams *params) {
    const bool coupled = params->sampler == SAMPLER_COUPLED;
    fprintf(f, "{\"round\": %d, \"gamma\": %d, \"width\": %d", round, r->depth, r->width);
    trace_ints(f, "drafted", r->tokens + 1, r->tree.n);
    trace_ints(f, "parents", r->tree.parent, r->tree.n);
    trace_ints(f, "tried", r->tried, r->n_verified);
    const double *columns[3] = {r->p_x, r->q_x, coupled ? NULL : r->r};  // coupling draws no acceptance number
    const char *names[3] = {"p", "q", "r"};
    for (int c = 0; c < 3; c++) {
        if (!columns[c]) continue;
        fprintf(f, ", \"%s\": [", names[c]);
        for (int i = 0; i < r->n_verified; i++) fprintf(f, "%s%.6g", i ? ", " : "", columns[c][i]);
        fputc(']', f);
    }
    trace_ints(f, "path", r->path, r->n_accepted);
    static const char *const kind_names[] = {[TOKEN_ACCEPTED] = "accepted", [TOKEN_REJECTED] = "rejected",
                                             [TOKEN_RESAMPLED] = "resampled", [TOKEN_BONUS] = "bonus",
                                             [TOKEN_TARGET] = "target"};
    TokenKind kind;
    const int token = round_end(r, params, &kind);
    fprintf(f, ", \"accepted\": %d, \"token\": %d, \"kind\": \"%s\", \"residual_mass\": %.6g}\n", r->n_accepted,
            token, kind_names[kind], r->residual_mass);
}

// The committed tokens to --show's callback, as decided: the children tried and rejected at a node are shown (never
// emitted) just before the token that took their place — a kept sibling, or the correction — as in the paper's
// Figure 1.
static void show_round(const SpecParams *params, const Round *r) {
    int t = 0;  // the children tried, in order: at each level, rejected ones, then the kept one (or none)
    for (int i = 0; i < r->n_committed; i++) {
        const int kept = i < r->n_accepted ? r->path[i] : -1;
        for (; t < r->n_verified && r->tried[t] != kept; t++)
            params->on_token(params->ctx, r->tree.node[r->tried[t]].token, TOKEN_REJECTED);
        t++;
        params->on_token(params->ctx, kept >= 0 ? r->tree.node[kept].token : r->next,
                         kept >= 0 ? TOKEN_ACCEPTED : r->kind);
    }
}

// A lookup run y_1.. found but not proposed: its first token would have been kept with probability p_1(y_1)
// (rejection sampling and coupling alike; 0 or 1 when greedy), which the round computed. Its later tokens were not
// verified, but the round's committed tokens c_1..c_j are the target's own samples, so while y_1..y_{i−1} =
// c_1..c_{i−1}, [y_i = c_i] stands in for the chance of keeping y_i (exactly when greedy; at a temperature, a
// sample of it — biased a little, as which positions a round commits depends on its drafts).
static void learn_unproposed_run(Scheduler *s, const Round *r) {
    const Drafter *d = s->drafter;
    learn_lookup_alpha(&s->g, d->match_length, 0, s->p[d->run[0]]);
    const int *committed = s->context + s->n - r->n_committed;
    for (int i = 1; i < d->n_run && i < r->n_committed && d->run[i - 1] == committed[i - 1]; i++)
        learn_lookup_alpha(&s->g, d->match_length, i, d->run[i] == committed[i]);
}

static void record_round(Scheduler *s, const Round *r) {
    SpecStats *st = s->stats;
    GammaState *g = &s->g;
    const int k = r->tree.n;
    const bool lookup = s->drafter && s->drafter->run_proposed;  // the round's nodes are the lookup's, else the model's
    st->rounds++;
    st->drafted += k;
    st->accepted += r->n_accepted;
    st->sibling_accepted += r->n_sibling_kept;
    st->plain_rounds += k == 0;
    st->tree_rounds += r->width > 1;
    st->one_hot_drafted += r->n_one_hot;
    st->target_seconds += r->target_seconds;
    s->gamma_sum += r->depth;
    s->rounds_by_shape[r->width][r->depth]++;
    st->rounds_by_depth[r->depth]++;
    for (int level = 1; level <= r->depth; level++) {
        st->level_reached[level] += r->n_accepted >= level - 1;
        st->level_kept[level] += r->n_accepted >= level;
    }
    for (int i = 0; i < r->n_accepted; i++) st->one_hot_accepted += !r->tree.node[r->path[i]].q;
    for (int i = 0; i < r->n_verified; i++) {
        st->sum_min_pq += r->overlap[i];
        st->n_min_pq++;
        s->alpha_sum += r->learned[i];
        const int node = r->tried[i];
        if (!lookup) learn_alpha(g, SAMPLED, r->learned[i]);
        else if (r->first_branch[node] || r->level[node] > 0)  // (a shorter match's first draft: a_W learns it)
            learn_lookup_alpha(g, s->drafter->match_length, r->level[node], r->learned[i]);
    }
    if (r->wide_width >= 2) {
        s->wide_tried[r->wide_width]++, s->wide_kept[r->wide_width] += r->wide_kept;
        learn_first_alpha(g, r->wide_width, g->alpha[lookup ? LOOKUP_FIRST : SAMPLED], r->wide_kept);
    }
    if (s->drafter && s->drafter->n_run > 0 && !s->drafter->run_proposed) learn_unproposed_run(s, r);
    if (g->probing && k > 0 && !lookup)  // the probe was made (not displaced by a lookup run)
        g->probe_misses = r->n_accepted ? 0 : g->probe_misses < 3 ? g->probe_misses + 1 : 3;
    running_mean(&g->target[k + 1], r->target_seconds);
    g->largest_measured = k + 1 > g->largest_measured ? k + 1 : g->largest_measured;
    if (s->drafter) s->drafter->seconds += r->draft_seconds;
    if (r->draft_calls > 0) {
        running_mean(r->width > 1 ? &g->tree_draft_step[r->width] : &g->draft_step,
                     r->draft_seconds / r->draft_calls);
        g->draft_step_known = true;
    }
    if (s->params->policy == GAMMA_HEURISTIC) {
        g->heuristic_gamma += r->n_accepted == r->depth && r->depth > 0 ? 2 : -1;
        g->heuristic_gamma = g->heuristic_gamma < 1           ? 1
                             : g->heuristic_gamma > GAMMA_MAX ? GAMMA_MAX
                                                              : g->heuristic_gamma;
    }
    if (s->params->trace) trace_round(s->params->trace, st->rounds, r, s->params);
    if (s->params->on_token) show_round(s->params, r);
}

// The run's statistics, once the rounds are over.
static void finish_stats(Scheduler *s) {
    SpecStats *st = s->stats;
    st->draft_calls = s->drafter ? s->drafter->calls : 0;
    st->draft_seconds = s->drafter ? s->drafter->seconds : 0;
    st->target_t1_seconds = target_time(&s->g, 1);
    st->draft_step_seconds = s->g.draft_step;
    for (int width = 2; width <= TREE_FIRST_WIDTH_MAX && st->draft_step_seconds == 0; width++)
        st->draft_step_seconds = s->g.tree_draft_step[width];  // a tree's only
    st->mean_gamma = st->rounds ? s->gamma_sum / st->rounds : 0;
    const double alpha = st->n_min_pq ? s->alpha_sum / st->n_min_pq : 0;
    for (int width = 1; width <= TREE_FIRST_WIDTH_MAX; width++) {  // a tree's a_W: the run's rate of kept wide levels
        const double a_first = s->wide_tried[width] ? (double)s->wide_kept[width] / s->wide_tried[width] : alpha;
        for (int gamma = 0; gamma <= GAMMA_MAX; gamma++)
            st->expected_tokens += s->rounds_by_shape[width][gamma] *
                                   (width == 1 ? spec_expected_tokens(alpha, gamma)
                                               : spec_tree_expected_tokens(a_first, alpha, gamma));
    }
    const double forwards = st->target_seconds + st->draft_seconds;
    st->predicted_speedup = forwards > 0 ? st->expected_tokens * st->target_t1_seconds / forwards : 1.0;
}

static void scheduler_free(Scheduler *s) {
    sampler_free(&s->sampler);
    if (s->callers_cache) *s->callers_cache = s->cache;  // handed back, holding the committed tokens
    else kv_free(&s->cache);
    rollback_check_free(&s->check);
    free(s->logits);
    free(s->p);
    free(s->q);
    free(s->scratch);
    free(s->context);
}

static int scheduler_init(Scheduler *s, Model *target, KVCache *cache, Drafter *drafter, const int *prompt,
                          int n_prompt, const SpecParams *params, int *out, SpecStats *stats, Err *err) {
    const int V = target->n_vocab;
    *s = (Scheduler){.target = target, .drafter = drafter, .params = params, .V = V,
                     .n_ctx = target->cfg.n_positions, .n = n_prompt, .n_prompt = n_prompt, .out = out,
                     .stats = stats, .callers_cache = cache};
    if (cache) s->cache = *cache;
    else if (model_kv_init(target, &s->cache, err)) return -1;
    if (sampler_init(&s->sampler, &params->sampling, V, target->kernels, err)) return -1;
    const int width = params->tree_width > 1 ? params->tree_width : 1;
    s->max_nodes = width * GAMMA_MAX < TREE_MAX_NODES ? width * GAMMA_MAX : TREE_MAX_NODES;
    s->logits = malloc(sizeof(float) * (s->max_nodes + 1) * V);
    s->p = malloc(sizeof(double) * (s->max_nodes + 1) * V);
    s->q = malloc(sizeof(double) * s->max_nodes * V);
    s->scratch = malloc(sizeof(double) * 3 * V);
    s->context = malloc(sizeof(int) * ((size_t)n_prompt + params->max_tokens));
    if (!s->logits || !s->p || !s->q || !s->scratch || !s->context)
        return err_fmt(err, "out of memory for the scheduler's buffers");
    memcpy(s->context, prompt, sizeof(int) * n_prompt);
    GammaState *g = &s->g;
    *g = (GammaState){.heuristic_gamma = params->gamma,
                      .draft_step_known = drafter && drafter->step_cost == 0,
                      .modelled = drafter && params->policy == GAMMA_AUTO && params->sampler == SAMPLER_REJECTION &&
                                  params->sampling.temperature > 0};
    for (int source = 0; source < N_SOURCES; source++) g->alpha[source] = ALPHA_PRIOR;
    g->alpha[LOOKUP_NEXT] = ALPHA_NEXT_PRIOR;
    for (int T = 1; T < T_SLOTS; T++) g->model_target[T] = spec_forward_cost(target, T);  // tree_verify_time too
    if (g->modelled) {
        g->model_draft_step = drafter->step_cost;
        g->model_draft_row = drafter->row_cost;
    }
    return 0;
}

// speculative_generate with the target's cache the caller's (speculative_continue) or its own (cache NULL).
static int generate(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                    const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    *stats = (SpecStats){0};
    *n_out = 0;
    if (n_prompt < 1) return err_fmt(err, "the prompt is empty");
    if (n_prompt >= target->cfg.n_positions)
        return err_fmt(err, "the prompt has %d tokens but the model's context is %d positions, which leaves no room "
                       "to generate", n_prompt, target->cfg.n_positions);
    if (cache && cache->len > n_prompt - 1)
        return err_fmt(err, "the cache holds %d tokens, more than the prompt's %d but the newest", cache->len,
                       n_prompt - 1);
    Scheduler s;
    int rc = -1;
    if (scheduler_init(&s, target, cache, drafter, prompt, n_prompt, params, out, stats, err)) goto done;
    const double t_start = now_seconds();
    // Prefill all but the newest committed token (both models), less what the cache holds already: each round's
    // verify forward starts with the newest, and its logits give p_1.
    const int cached = s.cache.len;
    if (n_prompt - 1 > cached &&
        model_forward(target, &s.cache, prompt + cached, n_prompt - 1 - cached, s.logits, false, err))
        goto done;
    if (n_prompt > 1 && drafter && drafter->prefill && drafter->prefill(drafter, prompt, n_prompt - 1, err)) goto done;
    const double t_decode = now_seconds();
    stats->prefill_seconds = t_decode - t_start;

    while (!s.done && stats->generated < params->max_tokens && s.cache.len < s.n_ctx) {
        Round r = {.shape = next_shape(&s), .width = 1};
        const double t0 = now_seconds();
        if (draft(&s, &r, err)) goto done;
        const double t1 = now_seconds();
        if (verify(&s, &r, err)) goto done;
        r.draft_seconds = t1 - t0;
        r.target_seconds = now_seconds() - t1;
        if (accept_or_resample(&s, &r, err) || commit_and_roll_back(&s, &r, err)) goto done;
        record_round(&s, &r);
    }
    *n_out = stats->generated;
    stats->decode_seconds = now_seconds() - t_decode;
    finish_stats(&s);
    rc = 0;
done:
    scheduler_free(&s);
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
