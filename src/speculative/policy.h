// policy.h — the shape of each round's draft: its depth γ and its tree's width, from measured costs and learned
// acceptance (SpecParams.policy). GAMMA_FIXED drafts γ; GAMMA_HEURISTIC grows γ by 2 after a fully kept round and
// shrinks it by 1 otherwise; GAMMA_AUTO picks the shape of the highest expected rate, Theorem 3.8 with measured
// costs:
//   rate(γ, W) = E[tokens per round] / (γ · t_draft + t_target(W·γ + 1)),   γ = 0 (plain decoding) when none
//   promises DRAFT_MARGIN (5%) over plain decoding's rate (in a batch, 5% more of its own tokens: policy.c) —
//   planned from measured times, also when the cost model below finds no depth that does at the learned α (noisy
//   times must not keep a useless draft drafting),
//   E[tokens per round] = 1 + a_W (1 + α + … + α^{γ−1})                       (spec_tree_expected_tokens)
// with α the learned acceptance of later drafts and a_W that of a first level of W children (a_1 = α).
// What it learns (policy_learn), per source of drafts: the draft model's α; a lookup run's first draft per match
// length and its later drafts (a run costs no draft step, t_draft = 0); a_W per width. Runs the lookup found but
// did not propose teach as well. Costs: the measured draft step's running mean, and t_target(T) on one line through
// the measured forwards' times, its slope drawn toward the cost model's (policy.c: policy_target_time) — or, where
// the shape could change sampled output (SpecParams), spec_forward_cost's model of sizes and the target's thread
// count, the same on every run. In a batch (GammaState.others), where the shape changes no
// token (greedy, coupled), GAMMA_AUTO plans for the whole batch's rate instead: the tokens its round and the
// others' commit over the batch's drafting and one forward of all the batch's rows,
//   rate_batch(γ, W) = (E[tokens per round] + tokens_others) / (t_drafting + F(rows_others + W·γ + 1)),
//   t_drafting = (draft_others + shared / (drafting_others + 1) + max(γ − draft_others, 0)) · t_draft,
// where shared = min(γ, draft_others): each level's draft forward serves every sequence drafting it (batch.c), so
// the levels that the others' drafting runs anyway are charged this round's share of them, the levels past the
// others' in full (policy.c: round_rate says why a share, not nothing);
// with F(R) = S + R · A the batch's own forwards as it measured them (BatchCosts: the line through the seconds of
// every row count its steps ran, its slope drawn toward the cost model's until the counts timed spread wide enough
// to tell: policy.c, measured_line), t_draft its draft forward of a row per sequence, d(sequences) likewise; until
// the batch has timed a forward, spec_forward_cost's weight stream S and each row's arithmetic and sampling A. As
// the batch grows the forward turns compute-bound, a draft row costs as much as a committed one, and γ falls to
// plain decoding. (The roofline max(S, R · A) + R · s fits one sequence's rows below the knee better, but a batch
// planned with it ran slower: docs/performance-history.md, "Batched rounds: where the time goes".) Under rejection
// sampling at T > 0 the request's own plan stands, whatever the batch. For a drafter with a lookup, each match
// length's run competes with the model's drafts (DraftRequest.lookup_gamma). The reasons behind the priors and
// thresholds are beside them in policy.c.
#ifndef SPECDEC_POLICY_H
#define SPECDEC_POLICY_H

#include "speculative/round.h"

enum { T_SLOTS = TREE_MAX_ROWS + 1 };

// Whose drafts α learns from: the draft model's (SAMPLED); a lookup run's first after a match of m tokens (source
// m), or of any length (LOOKUP_FIRST); a lookup run's later ones (LOOKUP_NEXT).
enum { SAMPLED = 0, LOOKUP_FIRST = LOOKUP_MATCH_SLOTS, LOOKUP_NEXT, N_SOURCES };

// The rest of a batch (batch.h) that a sequence's round shares its target forward with, as their last step had it:
// the other sequences' rows in the forward, the tokens their rounds committed, the longest of their drafting (the
// draft forwards a sequence's round waited for; batch.c runs a level's for all at once) and how many of them drafted
// by draft forwards. sequences = 0: the sequence runs alone.
typedef struct {
    int sequences, rows, tokens, draft_forwards, drafting;
} BatchLoad;

// A forward's seconds by the rows it carried, as a batch measures its own (batch.c): each row count's running mean.
enum { MEASURED_ROWS = 512 };  // the most rows kept (a larger forward is left out)
typedef struct {
    double seconds[MEASURED_ROWS + 1];  // [rows]; 0: no forward of that many rows yet
} RowTimes;

// What a batch measured of a model's forwards (row_times_fit): the row counts it timed (points), their mean R̄ and
// the mean t̄ of their running means, the spread Σ (R − R̄)² of the counts, and the least-squares slope through them
// in seconds a row (0 through fewer than two counts; it may be negative: noise). The plan draws its line F(R) from it
// with the cost model's slope as a prior (policy.c: measured_line).
typedef struct {
    int points;
    double mean_rows, mean_seconds, spread, slope;
} RowFit;

// What a batch's forwards cost as it measured them: the target's forward over R rows and the draft model's (points
// 0: not timed yet, and the cost model prices that part of the plan).
typedef struct {
    RowFit target, draft;
} BatchCosts;

void row_times_add(RowTimes *t, int rows, double seconds);

// The least-squares fit through the row counts measured.
RowFit row_times_fit(const RowTimes *t);

typedef struct {
    double alpha[N_SOURCES];    // running means of the acceptance probability (Σ min(p, q) under rejection)
    double draft_step;          // seconds per draft forward (running mean)
    double tree_draft_step[TREE_FIRST_WIDTH_MAX + 1];  // ... of a tree of that width (0 = not measured)
    double first_alpha[TREE_FIRST_WIDTH_MAX + 1];      // a_W: P(one of W first-level children is kept), running means
    int n_first[TREE_FIRST_WIDTH_MAX + 1];             // the levels of W ≥ 2 children it has learned from
    bool draft_step_known;      // measured, or 0 by nature (a lookup's proposals cost no forward)
    double target[T_SLOTS];     // seconds per target forward of T tokens (policy.c: learn_time; 0 = not measured)
    int target_readings[T_SLOTS];  // ... the forwards of T tokens timed (policy.c: learn_time, policy_target_time)
    int plain_timed;            // plain rounds timed: the first one's target[1] (a cold step) capped by any longer
                                // forward's time until the second replaces it
    int largest_measured;       // the largest T of target[] measured (0: none)
    bool modelled;              // plan with the cost model below, not with the measurements above
    double model_draft_step, model_target[T_SLOTS];  // spec_forward_cost: the drafter's step, the target's T
    double model_draft_row;     // ... a further row of a draft forward (a tree's level forwards feed W)
    double model_stream, model_row_arithmetic, model_row_sampling;  // F(R) = S + R · (A + s) (batches)
    BatchLoad others;           // the batch beside this sequence (policy_choose plans for it where γ may adapt)
    BatchCosts batch_costs;     // ... and what its forwards cost (measured: the plan prices rows with them)
    int unread, left;           // the committed tokens its drafter would read first (a batch's drafter that has read
                                // none: scheduler_start), and the tokens still wanted
    int heuristic_gamma;
    int plain_streak;           // GAMMA_AUTO: rounds in a row it chose plain decoding since it drafted or probed
    int n_alpha[N_SOURCES];     // drafts α has learned from
    int probe_misses;           // probes in a row (one draft after plain rounds) that were rejected, up to
                                // PROBE_MISSES_MAX (policy.c)
    bool probing;               // this round's draft model drafts are a probe
    bool probe_kept;            // the last round was a probe whose draft was kept: a plain round probes again
} GammaState;

// The state before the first round, for a run of the target with this drafter (NULL: plain decoding).
void policy_init(GammaState *g, const Model *target, const Drafter *drafter, const SpecParams *params);

// What the drafter (NULL: none) is asked for in the next round: the shape, and a drafter with a lookup, how much of
// which run (DraftRequest).
DraftRequest policy_choose(GammaState *g, const SpecParams *params, const Drafter *drafter);

// Learns from a played round: the acceptance of its drafts, the costs it measured, the heuristic's γ. committed:
// the tokens the round committed (r->n_committed).
void policy_learn(GammaState *g, const SpecParams *params, const Round *r, const int *committed);

// F(R): the cost model's price of one target forward over a batch's R rows (above).
double policy_batch_forward(const GammaState *g, int rows);

// t_target(T): measured, or fitted to the T's measured (0 when none is).
double policy_target_time(const GammaState *g, int T);

// The time of one draft step: the chain's, else a tree's (0 when none was measured).
double policy_draft_step(const GammaState *g);

#endif
