// round.h — one round of the scheduler as it happened (Round), written by its steps (scheduler.c) and read
// afterwards by the γ policy (policy_learn), the statistics, the trace and --show (record.c).
#ifndef SPECDEC_ROUND_H
#define SPECDEC_ROUND_H

#include "speculative/speculative.h"

// One round, as it happened.
typedef struct {
    DraftRequest request;               // asked of the drafter
    DraftReport report;                 // what it reported of its proposal
    DraftTree tree;                     // drafted: tree.n nodes (k), of depth `depth`
    int depth, width;                   // the tree's levels, most children of a node
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
    double p_run;                       // p_1(y_1): the target's probability of the lookup run's first token
                                        // (report.run[0]) after the newest committed token, when report.n_run > 0
    double draft_seconds, target_seconds;  // in the drafter's propose(); in the verify forward
    double p_seconds, accept_seconds;   // in the target's p rows (sampler_adjust); in the rest of steps 3 and 4
    double commit_seconds;              // in step 5, the commit and the caches' rollback
    int draft_calls;                    // draft model forwards
    bool read_prompt;                   // the first of them read the prompt too: a prefill left to the first round
                                        // that drafts (scheduler_start, batch.c), so not a step's time
    bool ahead_started;                 // the drafting thread drafted ahead during this round (draft_ahead.h)
    int drafted_ahead;                  // ... the drafts it holds for the next round (0: none)
    bool forced;                        // the drafts are the grammar's forced chain (SpecParams.forced_drafts): the
                                        // drafter was not asked, and the γ policy learns nothing from the round
    int forced_tail;                    // drafts appended after the drafter's chain: the text the grammar forces
                                        // there (draft_forced_tail), kept out of the drafter's rollback
    double ahead_handoff_seconds;       // handing it the job and waiting for it after the accept step
} Round;

// What the statistics add up over the rounds besides SpecStats, for finish_stats.
typedef struct {
    double alpha_sum, gamma_sum;        // Σ learned α over verified drafts; Σ depth over rounds
    int rounds_by_shape[TREE_FIRST_WIDTH_MAX + 1][GAMMA_MAX + 1];
    int wide_tried[TREE_FIRST_WIDTH_MAX + 1], wide_kept[TREE_FIRST_WIDTH_MAX + 1];  // levels of W ≥ 2 children; kept
    double draft_seconds;               // in the drafter's propose()
    int draft_calls;                    // draft model forwards
    int ahead_chains;                   // rounds whose drafting thread held drafts for the next round
} Tally;

// Whether id ends the text: the end-of-text id, or one of a config's list of them.
bool spec_is_end_of_text(const SpecParams *params, int id);

// ---- record.c: what a round's record feeds besides the policy ---------------------------------------------

// Adds the round to the statistics.
void record_stats(SpecStats *stats, Tally *tally, const Round *r);

// One JSON line for the round to f (SpecParams.trace).
void trace_round(FILE *f, int round, const Round *r, const SpecParams *params);

// The round's tokens to --show's callback (SpecParams.on_token), as decided.
void show_round(const SpecParams *params, const Round *r);

// The run's statistics, once the rounds are over: what the tally and the policy's measurements give
// (target_t1_seconds, draft_step_seconds: policy_target_time, policy_draft_step).
void finish_stats(SpecStats *stats, const Tally *tally, double target_t1_seconds, double draft_step_seconds);

#endif
