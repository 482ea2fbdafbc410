// policy.c — the shape of each round's draft (policy.h): expected tokens, costs, and learning α.
#include "speculative/policy.h"

#include <math.h>

// ---- expected tokens per round ------------------------------------------------------------------------------

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

// ---- priors, learning and costs ------------------------------------------------------------------------------


static const double ALPHA_PRIOR = 0.6, EMA = 0.1;
// A lookup run's drafts after its first: a copy under way mostly goes on, and every round teaches this α, whether it
// proposed a run or not. A prior as low as ALPHA_PRIOR kept greedy runs short for many rounds (the values learned
// on the bench prompts: docs/performance-history.md, "The γ policy's constants").
static const double ALPHA_NEXT_PRIOR = 0.9;
// The first drafts of lookup runs α_first must have learned from before a run may take the draft model's place
// (one or two is luck when sampling).
enum { LOOKUP_EVIDENCE = 4 };

static void running_mean(double *mean, double x) { *mean = *mean > 0 ? *mean + EMA * (x - *mean) : x; }

// The weight of the latest of `seen` values (a prior counted among them) in a mean that becomes a running mean:
// 1/seen — the plain mean — until there are 1/EMA of them, then EMA, so that older values are forgotten.
static double learning_rate(double seen) { return 1.0 / seen > EMA ? 1.0 / seen : EMA; }

// A forward's time learns as α does (learn_alpha): the mean of the readings so far until there are 1/EMA of them,
// then a running mean that forgets. A first reading taken whole, then EMA, kept a slow one's excess at 0.9^n after
// n readings more (a third of it after ten).
static void learn_time(double *mean, int *readings, double seconds) {
    *mean += learning_rate(++*readings) * (seconds - *mean);
}

// α learns from a draft's acceptance β: the mean of the drafts seen so far with the prior counting as prior_drafts
// of them, until there are 1/EMA of them; then a running mean that forgets. A useless draft is found out in a few
// drafts (the prior alone would take 1/EMA times as many), and plain decoding takes over. Where β is an outcome, 0
// or 1 (greedy, coupling), the prior counts as one draft: a good draft's first rejection must not end its drafting.
// Where β is an overlap Σ min(p, q) (rejection sampling at T > 0: the modelled plan), one draft's β says more, and
// the prior counts as half a draft: a useless draft's β ≈ 0.07 at temperature 1 took α from the prior 0.6 below the
// cost model's break-even (≈ 0.17 for the shipped target) in 5 drafts, and takes it there in 3.
static double prior_drafts(const GammaState *g) { return g->modelled ? 0.5 : 1.0; }

static void learn_alpha(GammaState *g, int source, double beta) {
    const int n = ++g->n_alpha[source];
    g->alpha[source] += learning_rate(n + prior_drafts(g)) * (beta - g->alpha[source]);
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

// The line y = mean_y + slope · (x − mean_x) fitted by least squares to the points (x, y[x]), x in [1, n), where
// y[x] > 0, each weighing weight[x] (NULL: 1 each; RowFit's fields, the x's as rows): slope = Σ w (x − mean_x)(y −
// mean_y) / spread, spread = Σ w (x − mean_x)², the means weighted alike; slope 0 through fewer than two points.
static RowFit fit_line(const double *y, const double *weight, int n) {
    double points = 0, sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int x = 1; x < n; x++) {
        const double w = weight ? weight[x] : 1;
        if (y[x] > 0 && w > 0) points++, sw += w, sx += w * x, sy += w * y[x], sxx += w * x * x, sxy += w * x * y[x];
    }
    if (points == 0) return (RowFit){0};
    const double mean_x = sx / sw, mean_y = sy / sw, spread = sxx - sw * mean_x * mean_x;
    const double slope = points > 1 && spread > 0 ? (sxy - sw * mean_x * mean_y) / spread : 0;
    return (RowFit){(int)points, mean_x, mean_y, points > 1 && spread > 0 ? spread : 0, slope};
}

void row_times_add(RowTimes *t, int rows, double seconds) {
    if (rows >= 1 && rows <= MEASURED_ROWS) running_mean(&t->seconds[rows], seconds);
}

RowFit row_times_fit(const RowTimes *t) { return fit_line(t->seconds, NULL, MEASURED_ROWS + 1); }

// FLOPs per byte of weights at which a forward's arithmetic takes as long as streaming its weights: a CPU's
// balance point, near what the bench measures for the shipped target (F32 weights).
static const double FORWARD_FLOPS_PER_BYTE = 4.0;

// How the weight stream speeds up with threads: as threads^0.72, the shipped target's decode speed from 1 to 16
// threads of a 16-core Xeon. The arithmetic divides among the threads.
static const double BANDWIDTH_EXPONENT = 0.72;
// One row of logits turned into probabilities (sampler_adjust) costs as long as one thread streaming this many bytes
// of weights per logit of the row: its passes run on one thread whatever the pool.
// The measurements behind these three: docs/performance-history.md, "The γ policy's constants".
static const double SAMPLING_BYTES_PER_TOKEN = 10.0;

// A multiply-add's time against an F32 weight's (FMA with F32 inputs), by how the matrices are held: the kernels'
// compute rates over 8 rows in the bench's matmul table, and q4's verification cost beside q8's. Priced alike, a q8
// or q4 target's further rows looked a third of a step or more each, and γ was planned too short
// (docs/performance-history.md, "The cost model against quantized targets" and "The γ policy's constants").
static double multiply_add_weight(Quant quant) {
    switch (quant) {
    case QUANT_Q8: return 0.36;
    case QUANT_Q4: return 0.44;
    case QUANT_BF16: return 1.4;
    case QUANT_NONE: case QUANT_STORED: break;  // (no model is held as QUANT_STORED: model.h)
    }
    return 1.0;
}

double spec_forward_cost(const Model *m, int T, int threads) {
    return (double)m->weight_bytes / pow(threads, BANDWIDTH_EXPONENT) +
           T * 2.0 * model_matrix_multiply_adds(m) * multiply_add_weight(m->quant) /
               (FORWARD_FLOPS_PER_BYTE * threads);
}

double spec_row_cost(int V) { return SAMPLING_BYTES_PER_TOKEN * V; }

// GAMMA_AUTO, measuring, starts with one plain round, which measures t_target(1), the yardstick of every choice (and of
// the predicted speedup), then drafts FIRST_DEPTH to measure a draft step (a lookup's costs nothing: not measured).
// The first forward after the prompt's runs cold (the shipped target's took 4 times a warm step), and a t_target(1)
// that high made every draft look cheap beside plain decoding, whose rounds — the only ones that measure it again — it
// then never chose: a useless draft kept drafting γ = 1 until α fell below the draft's cost over that inflated step. So
// until a second plain round's time replaces it, t_target(1) is at most what a drafting round's forward of more rows
// took (a second plain round before drafting instead cost short greedy generations 17% more target forwards). From then
// on it maximises rate(γ). Plain rounds teach it nothing about α, so after PROBE_INTERVAL plain rounds one round drafts
// one token (a probe), and the next probe waits twice as many plain rounds as the one before after each probe in a row
// that was rejected (8, 16, 32, … up to 8 · 2^PROBE_MISSES_MAX): α can recover when the text becomes easier again, and
// a useless draft's probes thin out. A kept probe is followed at once by another where the plan still says plain
// decoding: α learns from drafts only, and a good draft whose first drafts fell on hard text otherwise waited
// PROBE_INTERVAL plain rounds for each draft it was allowed to show (the shipped pair, greedy, on a loaded machine:
// its first draft rejected took α from the prior 0.6 to 0.3, a verification timed slow kept it plain, and 38 of a
// 48-token run's 44 rounds were plain, its three kept probes each followed by 8 plain rounds:
// docs/performance-history.md, "Kept probes"). A useless draft's probes are almost never kept, and it pays nothing
// more. The draft model reads the text those plain rounds committed in one batch when it is next used
// (draft_model.c): a plain round costs no draft forward.
//
// What a useless draft costs is these rounds: the first drafting round's drafts and the probes, each a draft step and
// a further verified row — on AVX2 a row of the shipped F32 target costs ~0.15 of a decode step (t(8)/t(1) = 2.03,
// issue 49), and the speculative suite's --quick runs are 48 tokens long, where 3% is 1.4 steps. The probes at 8,
// 8 + 16 and 8 + 16 + 32 plain rounds are two in 48 tokens where probes at every 8th, 16th, 32nd plain round in a
// row were three (docs/performance-history.md, "A useless draft, cheaper").
//
// The first round that drafts drafts FIRST_DEPTH, measured plan or modelled (a batch's greedy plan, which prices the
// others' rows too, keeps its depth): before any draft has been verified, α is the prior's guess, and the rows drafted
// past the first on that guess are what a useless draft pays most for (at temperature 1 the cost model's γ = 3 on the
// prior: two further drafts and rows of the four a run paid before it stopped drafting), while a good draft loses one
// round's difference between γ = 1 and its depth (the shipped pair at temperature 1 on AVX2: rate 1.40 against 1.52, in
// the first of ~20 rounds). Greedy, that round measures the draft step as well (docs/performance-history.md, "A useless
// draft's first round").
enum { FIRST_DEPTH = 1, PROBE_INTERVAL = 8, PROBE_MISSES_MAX = 6 };

// In a batch, a drafter reads the prompt in its first draft forward (batch.c), so a sequence whose plan has kept it
// plain from its first round pays its first probe with a read of every committed token (GammaState.unread). At 8
// greedy clients of 32 tokens the draft took 3.5% of the time, most of it those reads (a read of ~100 tokens takes
// as long as ~70 of the draft's steps) — more than the drafting the probes led to gained
// (docs/performance-history.md, "Probes that read the prompt"). Such
// a probe is made only where the tokens still wanted are at least 1/PROBE_READ_PER_TOKEN_LEFT of those it reads: a
// rule of thumb from the shipped pair's serve sweep, which keeps the probes of 8 clients' 128-token requests after
// prompts of 80–130 tokens and drops those of their 32-token ones.
enum { PROBE_READ_PER_TOKEN_LEFT = 2 };

static double verify_time(const GammaState *g, int T) {
    return g->modelled ? g->model_target[T] : policy_target_time(g, T);
}

// Planned for the batch around it (GammaState.others): a sequence of a batch whose text does not depend on its
// shape (the modelled plan, rejection sampling at T > 0, stands for the request alone).
static bool batch_planned(const GammaState *g) { return g->others.sequences > 0 && !g->modelled; }

// Planned with the cost model's units: alone at T > 0 under rejection sampling, or for a batch.
static bool costed(const GammaState *g) { return g->modelled || batch_planned(g); }

// Whether a probe due now is worth its read of the prompt (above): alone, or with the drafter's prompt read, always.
static bool probe_pays_its_read(const GammaState *g) {
    return !batch_planned(g) || g->unread <= PROBE_READ_PER_TOKEN_LEFT * g->left;
}

// The batch's own measurements price its plan (BatchCosts) once it has timed its target's forward; before, the
// cost model.
static bool batch_measured(const GammaState *g) { return batch_planned(g) && g->batch_costs.target.points > 0; }

// How much the cost model's slope counts against a measured one, in rows² (measured_line: a batch's line, and
// alone, policy_target_time's).
static const double PRIOR_SPREAD = 32.0;

// The line F(R) = *fixed + R · *per_row a batch's plan prices its forwards with (and a sequence's alone, each count
// weighted by its readings: policy_target_time): through the measured mean (R̄, t̄) of the row counts timed (RowFit),
// with the slope of a normal prior at A₀ updated by them (ridge regression toward A₀; Bishop, "Pattern Recognition
// and Machine Learning", eq. 3.53–3.54, with one unknown):
//   A = (Σ (R − R̄)(t − t̄) + κ · A₀) / (Σ (R − R̄)² + κ),  A₀ = model_per_row · t̄ / (model_fixed + R̄ · model_per_row)
// — A₀ the cost model's slope, model_fixed + R · model_per_row, scaled to the measured level — and κ =
// PRIOR_SPREAD. A plan that had timed only the row counts of its few drafts (8 sequences decoding plainly: 7, 8 and
// 9 rows, Σ (R − R̄)² ≈ 2) took the slope from them alone, and the noise of those times on a shared machine made it
// anything from flat to a whole weight stream a row: a steep one kept the plan plain, which then timed no deeper
// count to correct it (8 × 128 with the draft 0.93 × without: docs/performance-history.md, "The ninth session on
// the idle machine"). With κ = 32 — as much as two counts 8 rows apart — a plan follows the cost model's shape
// until the counts it has timed spread that far, and its own drafts are what spread them. No forward costs less
// with more rows (A ≥ 0), and none is free (where the line's intercept would fall below 0: through the origin and
// the mean).
static void measured_line(const RowFit *f, double model_fixed, double model_per_row, double *fixed,
                          double *per_row) {
    const double modelled = model_fixed + f->mean_rows * model_per_row;  // (0 for a lookup, which drafts no forward)
    const double prior = modelled > 0 ? model_per_row * f->mean_seconds / modelled : 0;
    const double slope = (f->spread * f->slope + PRIOR_SPREAD * prior) / (f->spread + PRIOR_SPREAD);
    *per_row = slope > 0 ? slope : 0;
    *fixed = f->mean_seconds - *per_row * f->mean_rows;
    if (*fixed < 0) *fixed = 0, *per_row = f->mean_seconds / f->mean_rows;
}

// F(R) = S + R · (A + s): the cost model's target forward of R rows (a batch's: every sequence's rows in one
// forward). The serve suite's table "What a batched forward costs" measures it, and the roofline, against the forward.
static double modelled_batch_forward(const GammaState *g, int rows) {
    return g->model_stream + rows * (g->model_row_arithmetic + g->model_row_sampling);
}

double policy_batch_forward(const GammaState *g, int rows) {
    if (!batch_measured(g)) return modelled_batch_forward(g, rows);
    double fixed, per_row;
    measured_line(&g->batch_costs.target, g->model_stream, g->model_row_arithmetic + g->model_row_sampling, &fixed,
                  &per_row);
    return fixed + rows * per_row;
}

// t_target(T) for the measured plan alone (greedy, coupled): the batch's line (measured_line, with the cost model's
// slope as its prior) through each count's mean time, the count weighing as many readings as its mean holds
// (GammaState.target_readings, up to 1/EMA: a running mean forgets the older) — least squares through the
// readings themselves. Each count priced by its own mean, a plan re-timed only the counts it chose, and one slow
// reading (a preemption; the host's L3 taken by another guest) held: a count timed slow once was priced dear, the
// line through it and the counts below priced every deeper count dearer still, and the plan drafted γ = 1 round
// after round whose drafts were all kept, timing nothing deeper again (issue 49: the shipped pair greedy on AVX2,
// after one slow t(4); test speculative_auto_one_slow_reading_does_not_pin_the_plan, 21 such rounds). Through the
// readings, a slow one is one among the rest, the more so the more the plan times; and until the counts timed
// spread as far as PRIOR_SPREAD (rows²), the slope leans on the cost model's, which prices a further row of a
// memory-bound target at a fraction of a step — so a plan that has timed only one or two counts, or one of them
// slow, still goes deep where α says so, and timing the deeper counts is what corrects the line. 0 if nothing is
// measured yet.
double policy_target_time(const GammaState *g, int T) {
    double weight[T_SLOTS];
    for (int count = 0; count < T_SLOTS; count++)
        weight[count] = g->target_readings[count] < 1 / EMA ? g->target_readings[count] : 1 / EMA;
    const RowFit fit = fit_line(g->target, weight, T_SLOTS);
    if (fit.points == 0) return 0.0;
    double fixed, per_row;
    measured_line(&fit, g->model_stream, g->model_row_arithmetic + g->model_row_sampling, &fixed, &per_row);
    return fixed + T * per_row;
}

// A draft forward of one level (further_row false), or a further row of one (a tree's level feeds W), in the plan's
// units: the cost model's; with the batch's measurements, its draft forward d(R) over a row of every sequence in the
// batch (a level's forward carries one of each sequence that drafts it: at most all) — the measured line whose prior
// is the cost model's d(R) = step + (R − 1) · row — or before the batch has timed a draft forward, the cost model's
// scaled by the measured target forward of one row over the modelled one.
static double batch_draft_cost(const GammaState *g, bool further_row) {
    const double modelled = further_row ? g->model_draft_row : g->model_draft_step;
    const BatchCosts *c = &g->batch_costs;
    if (!batch_measured(g)) return modelled;
    if (c->draft.points == 0) return modelled * policy_batch_forward(g, 1) / modelled_batch_forward(g, 1);
    double fixed, per_row;
    measured_line(&c->draft, g->model_draft_step - g->model_draft_row, g->model_draft_row, &fixed, &per_row);
    return further_row ? per_row : fixed + (g->others.sequences + 1) * per_row;
}

// A tree's verification, planned: as verify_time, except that a T larger than any measured is priced at the largest
// measured T's price scaled by the cost model's cost(T) / cost(T_max), which adds the further rows' arithmetic to
// the weight stream instead of hiding it behind. policy_target_time's line extrapolates a chain's cheap rows, but a
// tree's larger T turns a forward compute-bound, and a tree chosen on the line's price ran slower than the chain
// (docs/performance-history.md, "The γ policy's constants"). Once a tree's T has been verified, the line runs
// through its time.
static double tree_verify_time(const GammaState *g, int T) {
    const int largest = g->largest_measured;
    if (g->modelled || largest == 0 || T <= largest) return verify_time(g, T);
    return verify_time(g, largest) * g->model_target[T] / g->model_target[largest];
}

// a_W: learned, or before any tree of width W was drawn, 1 − (1 − α)(1 − α/2)^{W−1}: each further child halves
// the odds of being kept against the first — W independent tries (1 − (1 − α)^W) promise far more than the residual
// left after a rejection gives (the trees suite's a_W against both: docs/performance-history.md, "The γ policy's
// constants").
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
    g->first_alpha[width] += learning_rate(n + 1) * (kept - g->first_alpha[width]);
}

// The seconds (or cost units) of one draft forward of a tree of this width: measured, else the chain's.
static double draft_step_of(const GammaState *g, int width) {
    if (costed(g)) return batch_draft_cost(g, false);
    return width > 1 && g->tree_draft_step[width] > 0 ? g->tree_draft_step[width] : g->draft_step;
}

// The time of drafting `depth` levels at draft_step per level forward; with the cost model, a tree's level forwards
// after the first feed W rows (draft_model.c), (γ − 1)(W − 1) rows beyond one each.
static double draft_time(const GammaState *g, int width, int depth, double draft_step) {
    const double extra_rows = (depth - 1) * (width - 1.0);
    return width > 1 && costed(g) ? depth * draft_step + extra_rows * batch_draft_cost(g, true) : depth * draft_step;
}

// The rate of a round of T rows (width: its tree's, 1 for a chain) expected to commit `tokens` after drafting for
// t_draft. Alone: tokens / (t_draft + t_verify(T)), verifying taken to cost at least a plain step (a noisy
// measurement must not make drafting look free). In a batch planned for it: rate_batch (policy.h), the batch's,
// with its share t_read of its drafter's read of the text (prompt_read_share), rows added to a draft forward
// whoever's. The draft forwards that the others' drafting runs anyway (batch.c runs each level's for all at once)
// are charged this round's share, 1 / (drafting others + 1), not nothing: a cost shared by every sequence that
// drafts, priced at its margin, is free to each of them while the others draft, and 8 coupled sequences at
// temperature 1 (α ≈ 0.5) kept drafting, each a little ahead of its own plain round, where the batch ran 0.83–0.88 ×
// as fast as target-only (0.87–0.95 × charged shares: docs/performance-history.md, "The fifteenth session on the
// idle machine"). Charged shares, alike sequences choose as the batch's best rate would have them all choose.
static double round_rate(const GammaState *g, double tokens, double t_draft, double t_read, int T, int width) {
    if (batch_planned(g)) {
        const double others_drafting = g->others.draft_forwards * draft_step_of(g, 1);
        const double shared = t_draft < others_drafting ? t_draft : others_drafting;
        const double t_drafting = others_drafting + shared / (g->others.drafting + 1) + (t_draft - shared);
        return (tokens + g->others.tokens) / (t_drafting + t_read + policy_batch_forward(g, g->others.rows + T));
    }
    const double plain_step = verify_time(g, 1);
    const double t_planned = width > 1 ? tree_verify_time(g, T) : verify_time(g, T);
    return tokens / (t_draft + (t_planned > plain_step ? t_planned : plain_step));
}

// A batch's drafter that has read nothing reads the committed tokens (GammaState.unread: the prompt and what plain
// rounds committed) in its first draft forward (batch.c), a row each, at the draft forward's price of a further row:
// paid once, for drafting over the tokens still wanted (GammaState.left). A round that commits `tokens` of them is
// left/tokens of the rounds drafting would take, and bears that share of the read (all of it where it commits all
// that is left). At 8 greedy clients of 32 tokens the plan drafted 0.04 tokens a round, after reads of ~100-token
// prompts that the plan never priced, and the batch with the draft ran 0.89–0.96 × the batch without
// (docs/performance-history.md, "The tenth session on the idle machine" and "A batch's plan prices its prompt reads").
static double prompt_read_share(const GammaState *g, double tokens) {
    if (!batch_planned(g) || g->unread == 0) return 0;
    const double read = g->unread * batch_draft_cost(g, true);
    return tokens < g->left ? read * tokens / g->left : read;
}

// Plain decoding's rate (round_rate of one row).
static double plain_rate(const GammaState *g) { return round_rate(g, 1, 0, 0, 1, 1); }

// A shape replaces plain decoding only where it promises this much more than plain decoding's rate. With a useless
// draft (random weights: α of 0.05–0.1 at temperature 1) the cost model promised γ = 1 a few percent, less than its
// error on a machine whose verification costs more than the model's (AVX2): it drafted in most rounds and ran slower
// than plain decoding (docs/performance-history.md, "A useless draft"). The same for every ISA and plan. The margin
// is on the round's own expected tokens: divided by DRAFT_MARGIN they must still beat plain decoding's rate —
// alone, rate > DRAFT_MARGIN × plain; in a batch, (E[tokens] / DRAFT_MARGIN + tokens_others) over the batch's time
// against plain decoding's batch rate. Put on the batch's whole rate, the margin asked one sequence of 8 to raise
// all 8's rate by 5%, a gain its own round can bring only when it is near doubled, and the plan stayed mostly plain
// at 8 × 128 where the batch's measured forwards said drafting paid (16 rows timed at 1.01–1.08 × 8 rows:
// docs/performance-history.md, "The batch's plan drafts again").
static const double DRAFT_MARGIN = 1.05;

// The depth γ (0: plain decoding) that maximises rate for a tree of `width` (1: a chain) whose first drafted level
// is kept with probability a_W (first_alpha of alpha_first: alpha_first itself for a chain) and each later draft
// with alpha_next, at draft_step per level — or only γ = fixed_depth when that is > 0; *rate gets it.
static int best_depth(const GammaState *g, int width, double alpha_first, double alpha_next, double draft_step,
                      int fixed_depth, double *rate) {
    int best = 0;
    const double a_first = first_alpha(g, width, alpha_first), plain = fixed_depth > 0 ? 0 : plain_rate(g);
    *rate = plain;
    for (int depth = fixed_depth > 0 ? fixed_depth : 1; depth <= (fixed_depth > 0 ? fixed_depth : GAMMA_MAX);
         depth++) {
        const int T = width * depth + 1;
        if (T > TREE_MAX_ROWS) break;
        const double tokens = spec_tree_expected_tokens(a_first, alpha_next, depth);
        const double t_draft = draft_time(g, width, depth, draft_step);
        const double t_read = draft_step > 0 ? prompt_read_share(g, tokens) : 0;  // (a lookup's runs read nothing)
        const double r = round_rate(g, tokens, t_draft, t_read, T, width);
        if (r > *rate && round_rate(g, tokens / DRAFT_MARGIN, t_draft, t_read, T, width) > plain)
            best = depth, *rate = r;
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

// Whether the cost model too (spec_forward_cost: sizes and threads) finds a depth that pays at the learned α. A
// measured plan drafts only where it does: its times come from a few forwards each, on a machine whose speed moves
// under them (another process, two threads placed on one core complex or on two), and a plain step timed slow beside
// a verification timed fast made a useless draft's γ = 1 look worth drafting at α = 0.1 and below, round after round
// (docs/performance-history.md, "A useless draft's worst prompt"). A draft worth drafting clears the model's
// break-even (α ≈ 0.2 for the shipped pair) by far; the depth stays the measurements' choice.
static bool drafting_pays_by_the_model(const GammaState *g, const SpecParams *params, double alpha_first,
                                       double alpha_next) {
    GammaState modelled = *g;
    modelled.modelled = true;
    double rate;
    return best_shape(params, &modelled, true, alpha_first, alpha_next, 0, &rate).depth > 0;
}

// What the drafter is asked for this round beside the shape: runs of the lookup by match length, and the draft
// model's drafts.
static void ask_drafter(DraftRequest *request, int lookup_gamma, int model_gamma) {
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) request->lookup_gamma[m] = lookup_gamma;
    request->model_gamma = model_gamma;
}

// The shape of the next round. A drafter with a lookup is told, per match length, how deep a run to propose
// (DraftRequest.lookup_gamma: a chain beside the staged drafter's model, the first branch of a lookup tree) and
// how deep the model's drafts go when no run is proposed (DraftRequest.model_gamma); the shape's width is the
// model's tree's (staged: a lookup run stays a chain), or the lookup tree's, chosen on the lookup's α of any match
// length.
static TreeShape choose_shape(GammaState *g, const SpecParams *params, const Drafter *drafter,
                              DraftRequest *request) {
    TreeShape shape = {0, 1};
    if (!drafter) return shape;
    g->probing = false;
    const bool has_model = drafter->step_cost > 0;
    const bool measured = costed(g) || (g->target[1] > 0 && g->draft_step_known);
    const double alpha_first = has_model ? g->alpha[SAMPLED] : g->alpha[LOOKUP_FIRST];
    const double alpha_next = has_model ? g->alpha[SAMPLED] : g->alpha[LOOKUP_NEXT];
    double rate;
    if (params->policy != GAMMA_AUTO) {
        shape.depth = params->policy == GAMMA_FIXED ? params->gamma : g->heuristic_gamma;
        if (params->tree_auto && measured)
            shape.width = best_shape(params, g, has_model, alpha_first, alpha_next, shape.depth, &rate).width;
        else if (!params->tree_auto) shape.width = widest(params);
        ask_drafter(request, shape.depth, shape.depth);
        return shape;
    }
    ask_drafter(request, 0, 0);
    if (!costed(g) && g->target[1] <= 0) return shape;
    if (has_model && !costed(g) && !g->draft_step_known) {  // the draft model's step is what is measured
        request->model_gamma = FIRST_DEPTH;
        return (TreeShape){FIRST_DEPTH, params->tree_auto ? 1 : widest(params)};
    }
    double model_rate = plain_rate(g);  // plain decoding's, where there is no model or it does not pay
    if (has_model) {
        shape = best_shape(params, g, true, alpha_first, alpha_next, 0, &model_rate);
        if (shape.depth > 0 && !costed(g) && !drafting_pays_by_the_model(g, params, alpha_first, alpha_next)) {
            shape.depth = 0;
            model_rate = plain_rate(g);
        }
        if (g->modelled && g->n_alpha[SAMPLED] == 0 && shape.depth > FIRST_DEPTH) shape.depth = FIRST_DEPTH;
        g->plain_streak = shape.depth == 0 ? g->plain_streak + 1 : 0;
        g->probing = shape.depth == 0 && (g->probe_kept || g->plain_streak == PROBE_INTERVAL << g->probe_misses);
        if (g->probing && !probe_pays_its_read(g)) g->probing = false, g->plain_streak = 0;  // (the next, later)
        if (g->probing) shape = (TreeShape){1, 1}, g->plain_streak = 0;
        request->model_gamma = shape.depth;
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
        request->lookup_gamma[m] = lookup_gamma > 0 && lookup_rate >= model_rate ? lookup_gamma : 0;
        shape.depth = shape.depth > request->lookup_gamma[m] ? shape.depth : request->lookup_gamma[m];
    }
    shape.depth = shape.depth > 0 ? shape.depth : 1;  // the lookup is asked every round: what it finds teaches α
    return shape;
}

DraftRequest policy_choose(GammaState *g, const SpecParams *params, const Drafter *drafter) {
    DraftRequest request = {0};
    request.shape = choose_shape(g, params, drafter, &request);
    return request;
}


// ---- the state, and learning from a round ------------------------------------------------------------------

void policy_init(GammaState *g, const Model *target, const Drafter *drafter, const SpecParams *params) {
    *g = (GammaState){.heuristic_gamma = params->gamma,
                      .draft_step_known = drafter && drafter->step_cost == 0,
                      .modelled = drafter && (params->policy == GAMMA_AUTO || params->tree_auto) &&
                                  params->sampler == SAMPLER_REJECTION && params->sampling.temperature > 0};
    for (int source = 0; source < N_SOURCES; source++) g->alpha[source] = ALPHA_PRIOR;
    g->alpha[LOOKUP_NEXT] = ALPHA_NEXT_PRIOR;
    // The target on its threads, with the p rows a verification of T tokens may adjust (tree_verify_time too).
    for (int T = 1; T < T_SLOTS; T++)
        g->model_target[T] = spec_forward_cost(target, T, target->max_threads) + T * spec_row_cost(target->n_vocab);
    g->model_stream = spec_forward_cost(target, 0, target->max_threads);
    g->model_row_arithmetic = spec_forward_cost(target, 1, target->max_threads) - g->model_stream;
    g->model_row_sampling = spec_row_cost(target->n_vocab);
    if (drafter) {
        g->model_draft_step = drafter->step_cost;
        g->model_draft_row = drafter->row_cost;
    }
}

// A lookup run y_1.. found but not proposed: its first token would have been kept with probability p_1(y_1)
// (rejection sampling and coupling alike; 0 or 1 when greedy), which the round recorded (Round.p_run). Its later
// tokens were not verified, but the round's committed tokens c_1..c_j are the target's own samples, so while
// y_1..y_{i−1} = c_1..c_{i−1}, [y_i = c_i] stands in for the chance of keeping y_i (exactly when greedy; at a temperature, a
// sample of it — biased a little, as which positions a round commits depends on its drafts).
static void learn_unproposed_run(GammaState *g, const DraftReport *d, const Round *r, const int *committed) {
    learn_lookup_alpha(g, d->match_length, 0, r->p_run);
    for (int i = 1; i < d->n_run && i < r->n_committed && d->run[i - 1] == committed[i - 1]; i++)
        learn_lookup_alpha(g, d->match_length, i, d->run[i] == committed[i]);
}


// α from the children the round tried: the model's drafts teach SAMPLED; a lookup run's (the first branch of a
// lookup tree) teach its first and later drafts' sources; a wide level teaches a_W.
static void learn_acceptance(GammaState *g, const Round *r, bool lookup) {
    for (int i = 0; i < r->n_verified; i++) {
        const int node = r->tried[i];
        if (!lookup) learn_alpha(g, SAMPLED, r->learned[i]);
        else if (r->first_branch[node] || r->level[node] > 0)  // (a shorter match's first draft: a_W learns it)
            learn_lookup_alpha(g, r->report.match_length, r->level[node], r->learned[i]);
    }
    if (r->wide_width >= 2)
        learn_first_alpha(g, r->wide_width, g->alpha[lookup ? LOOKUP_FIRST : SAMPLED], r->wide_kept);
}

void policy_learn(GammaState *g, const SpecParams *params, const Round *r, const int *committed) {
    const int k = r->tree.n;
    const bool lookup = r->report.run_proposed;  // the round's nodes are the lookup's, else the model's
    learn_acceptance(g, r, lookup);
    if (r->report.n_run > 0 && !lookup) learn_unproposed_run(g, &r->report, r, committed);
    const bool probed = g->probing && k > 0 && !lookup;  // the probe was made (not displaced by a lookup run)
    if (probed)
        g->probe_misses = r->n_accepted                        ? 0
                          : g->probe_misses < PROBE_MISSES_MAX ? g->probe_misses + 1
                                                               : PROBE_MISSES_MAX;
    g->probe_kept = probed && r->n_accepted > 0;
    if (k == 0 && ++g->plain_timed == 2) g->target[1] = r->target_seconds;  // the cold first step forgotten
    else learn_time(&g->target[k + 1], &g->target_readings[k + 1], r->target_seconds);
    if (g->plain_timed == 1 && k > 0 && r->target_seconds < g->target[1])  // T = k + 1 rows cost at least one row
        g->target[1] = r->target_seconds;
    g->largest_measured = k + 1 > g->largest_measured ? k + 1 : g->largest_measured;
    if (r->draft_calls > 0 && !r->read_prompt) {  // (a forward that read the prompt too is no step)
        running_mean(r->width > 1 ? &g->tree_draft_step[r->width] : &g->draft_step,
                     r->draft_seconds / r->draft_calls);
        g->draft_step_known = true;
    }
    if (params->policy == GAMMA_HEURISTIC) {
        g->heuristic_gamma += r->n_accepted == r->depth && r->depth > 0 ? 2 : -1;
        g->heuristic_gamma = g->heuristic_gamma < 1           ? 1
                             : g->heuristic_gamma > GAMMA_MAX ? GAMMA_MAX
                                                              : g->heuristic_gamma;
    }
}

double policy_draft_step(const GammaState *g) {
    double step = g->draft_step;
    for (int width = 2; width <= TREE_FIRST_WIDTH_MAX && step == 0; width++) step = g->tree_draft_step[width];
    return step;
}
