// speculative.h — speculative decoding (Leviathan, Kalman & Matias 2023, Algorithm 1; Chen et al. 2023).
//
// A drafter proposes γ tokens x_1..x_γ with distributions q_1..q_γ; one target forward over the γ drafts gives
// p_1..p_{γ+1}; draft x_i is kept with probability min(1, p_i(x_i) / q_i(x_i)); at the first rejection the next
// token comes from norm(max(0, p_i − q_i)), and when all are kept a bonus token comes from p_{γ+1}. The tokens
// so produced are distributed exactly as the target's own samples (the paper's Appendix A.1); greedy output
// equals the target's greedy output token for token. With no drafter, the same loop is plain decoding. Drafters
// (drafter.h): a small draft model, n-gram lookup over the text (one-hot q), or the two staged.
//
// Token trees (SpecInfer, Miao et al. 2024; SpecParams.tree_width, .tree_auto): the drafter proposes a tree — the
// draft model's W children of the first level, each continued as a chain; a lookup's shorter matches as branches —
// which one target forward verifies under a tree mask (model_forward_tree); from the root down, the accept step at
// each node is recursive rejection sampling over its children (tree.h), so the output keeps the target's
// distribution, and the caches keep the accepted path (kv_keep_path). A chain is the tree of width 1: one code path.
//
// That is SAMPLER_REJECTION. SAMPLER_COUPLED is a second lossless rule (Daliri, Musco & Suresh, "Coupling without
// communication and drafter-invariant speculative decoding", arXiv:2408.07978): the target's token at each position
// is the Gumbel-max sample of p_i under noise keyed by (seed, position) (sampling_gumbel_max), the drafter proposes
// the Gumbel-max sample of q_i under the same noise, and x_i is kept when it equals the target's token — which is
// the next token otherwise. Every emitted token is then the target's own Gumbel-max sample: the output equals
// target-only decoding with the same seed, token for token, whatever the drafter, γ or thread count. With total
// variation distance δ between p and q a draft is kept with probability at least (1 − δ) / (1 + δ) (the paper's
// bound, which Gumbel sampling meets for every p and q), against exactly 1 − δ = Σ min(p, q) under rejection
// sampling: coupling buys reproducibility with some acceptance. Exactly, P(keep) = Σ_x 1 / Σ_y max(p(y)/p(x),
// q(y)/q(x)) (integrate P(x wins both races | E_x) over E_x ~ Exp(1); tests/speculative/test_sampling.c).
#ifndef SPECDEC_SPECULATIVE_H
#define SPECDEC_SPECULATIVE_H

#include <stdbool.h>
#include <stdio.h>

#include "model/model.h"
#include "speculative/accept.h"
#include "speculative/drafter.h"
#include "speculative/params.h"
#include "speculative/sampling.h"

enum { TREE_FIRST_WIDTH_MAX = 4 };  // the most children of a draft tree's first level (--tree-width)

// ---- the scheduler ------------------------------------------------------------------------------------------

typedef struct {
    int generated;          // tokens emitted
    int rounds;             // target verification calls
    int drafted, accepted;  // draft tokens proposed (a tree's nodes) and kept
    int sibling_accepted;   // of accepted: children kept after their node's first child was rejected (a tree's)
    double sum_min_pq;      // Σ over verified drafts of Σ_x min(p(x), q(x)): rejection's expected acceptance α
    int n_min_pq;
    int draft_calls;        // draft model forwards (a lookup makes none)
    int plain_rounds;       // rounds that drafted nothing: plain decoding
    int tree_rounds;        // rounds that drafted a tree (a node with several children)
    int lookup_rounds;      // rounds whose drafts were the lookup's run
    int lookup_drafted, lookup_accepted;    // of drafted, accepted: the lookup's (rounds whose run was proposed)
    int draft_rows;         // the rows the draft model's forwards fed (DraftReport.rows)
    bool pipelined;             // pipelined drafting was on (SpecParams.pipeline, draft_ahead.h)
    bool draft_own_core;        // ... on a CPU of its own, where the drafting thread ran every draft forward that
                                // it took up in time (on a busy machine the caller runs the others: draft_ahead.h)
    int ahead_rounds;           // rounds that took drafts drafted ahead, while the round before was verified
    int ahead_extended;         // ... of them, those that drew more drafts after the chain's (asked for more)
    int ahead_discarded;        // chains drafted ahead that no round took (a draft rejected, another next token,
                                // or the next round asked for no chain of the model's)
    double ahead_handoff_seconds;  // of decode_seconds: handing the drafting thread its job, and waiting for it to
                                   // end after the accept step
    double prefill_seconds;     // reading the prompt (both models), before the first round; in a batch (batch.h),
                                // from joining it: the steps that waited on other prompts' chunks too
    double decode_seconds;      // the rounds: generation proper, what tokens per second is measured over
    double target_seconds, draft_seconds;  // of decode_seconds: in target forwards, in the drafter
    // Where the rest of a round goes: of draft_seconds, the draft's q rows (sampler_adjust; greedy, the argmax
    // alone: sampling_greedy); beside it, the target's p rows (the same), the accept rule (steps 3 and 4 but the p
    // rows), the commit and the caches' rollback (step 5).
    // What decode_seconds holds beyond these and the forwards is the policy and the bookkeeping.
    double q_seconds, p_seconds, accept_seconds, commit_seconds;
    double target_t1_seconds;   // mean time of a T = 1 target forward (measured or fitted), for c
    double draft_step_seconds;  // mean time of one draft step (running estimate)
    double mean_gamma;          // the mean depth drafted (a chain's γ)
    // Per level l of the drafts (1 = the first drafted token): the rounds whose path reached level l − 1 with a
    // level l drafted, and those that kept a node of level l — the measured per-level acceptance kept / reached.
    int level_reached[GAMMA_MAX + 1], level_kept[GAMMA_MAX + 1];
    int rounds_by_depth[GAMMA_MAX + 1];  // rounds by the depth drafted (0: plain)
    // Σ over the rounds played of E[tokens | α, γ] = (1 − α^{γ+1}) / (1 − α) (the paper's equation 1), with α the
    // run's mean acceptance probability — Σ min(p, q) under rejection sampling, the acceptance rate under coupling:
    // what the rounds should have produced, given how well the models agree.
    double expected_tokens;
    // The speedup over target-only decoding predicted from the measured α and costs — Theorem 3.8 with the
    // measured time of the forwards in place of γc + 1 (verifying γ + 1 tokens costs more than 1 on a CPU):
    //   expected_tokens · t_target(1) / (target_seconds + draft_seconds)
    // What the scheduler spends beyond the forwards, and luck in the accepts, make measured differ from it.
    double predicted_speedup;
} SpecStats;

// Generates up to params->max_tokens tokens after prompt[0..n_prompt) with the target model, speculatively when
// drafter is not NULL. Emitted ids go to out[0..*n_out) (out has room for max_tokens).
int speculative_generate(Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err);

// A token's kind as the trace and the server's marks name it: "accepted", "rejected", "resampled", "bonus",
// "target".
const char *spec_token_kind_name(TokenKind kind);

// A conversation's next reply: speculative_generate with the target's KV cache the caller's, kept across calls.
// On entry it holds prompt[0..cache->len) (at most n_prompt − 1 tokens; the caller truncates it to the part that
// still matches) and only the rest is prefilled; on return it holds the committed tokens, prompt and out, but the
// newest. The drafter's state persists likewise: its prefill reads only what it does not hold (the caller rolls it
// back to cache->len first).
int speculative_continue(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err);

// The cost model GAMMA_AUTO plans with where timings must not decide (SpecParams): a forward over T tokens on
// `threads` threads streams the weights once, at a bandwidth that grows as threads^0.72, and does T tokens'
// arithmetic, divided among the threads, at an assumed FORWARD_FLOPS_PER_BYTE (a CPU's balance point), each
// multiply-add weighted w by how the matrices are held (1 for F32, less for q8's and q4's integer dot products)
//   cost(T, n) = weight bytes / n^0.72 + T · 2 · w · (matrix weights) / (FORWARD_FLOPS_PER_BYTE · n)  [bytes]
// and turning a row of V logits into probabilities costs spec_row_cost(V), on one thread. The target is planned on
// its max_threads (--threads), a draft on one. Deterministic — a function of the sizes and the thread count, the
// same on every run — and only a model: fixed per-forward costs (thread hand-offs, cache misses), which make a
// small draft dearer than its bytes, are not in it.
double spec_forward_cost(const Model *m, int T, int threads);
double spec_row_cost(int V);

// E[tokens per round] = (1 − α^{γ+1}) / (1 − α), the paper's equation 1 (γ + 1 when α = 1).
double spec_expected_tokens(double alpha, double gamma);

// E[tokens per round] of a tree of `depth` levels whose first level is kept with probability first_alpha and each
// level below with α (a first level of W children, each continued as a chain): 1 + first_alpha (1 + α + … +
// α^{depth−1}); equation 1 when first_alpha = α.
double spec_tree_expected_tokens(double first_alpha, double alpha, int depth);

// E[tokens per round] from per-level acceptance accept[1..depth] (P(a node of level l is kept | level l − 1
// was)): 1 + a_1 + a_1 a_2 + … + a_1 ⋯ a_depth. The bench's theory column for chains and trees alike.
double spec_expected_tokens_by_level(const double *accept, int depth);

// The expected speedup of Theorem 3.8: (1 − α^{γ+1}) / ((1 − α)(γc + 1)).
double spec_predicted_speedup(double alpha, double gamma, double c);

#endif
