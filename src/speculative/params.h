// params.h — what a run of the scheduler is asked for: its sampling, its rule, its seed, its γ policy and where its
// tokens go. The scheduler (scheduler.c), the accept step (accept.h, tree.h) and the drafters read it; it holds no
// state of theirs.
#ifndef SPECDEC_PARAMS_H
#define SPECDEC_PARAMS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "speculative/logprobs.h"
#include "speculative/penalties.h"
#include "speculative/sampling.h"

typedef enum { GAMMA_FIXED, GAMMA_HEURISTIC, GAMMA_AUTO } GammaPolicy;

typedef enum {
    TOKEN_ACCEPTED,     // a draft token the target kept
    TOKEN_REJECTED,     // a draft token the target rejected (shown, never emitted)
    TOKEN_RESAMPLED,    // the target's correction after a rejection
    TOKEN_BONUS,        // the target's extra token after a fully accepted round
    TOKEN_TARGET,       // a token of plain decoding (γ = 0)
} TokenKind;

// What a round did, for SpecParams.on_round: γ drafted, the drafts kept, the tokens committed.
typedef struct {
    int gamma;          // the depth drafted (a chain's γ; 0: a round of plain decoding)
    int width;          // the most children of a node (1: a chain)
    int drafted;        // draft tokens proposed (a tree's nodes)
    int accepted;       // drafts kept
    int committed;      // tokens committed: the kept drafts and the target's own token, fewer at a stop
} RoundOutcome;

// How drafts are checked, and so how every token is drawn (--sampler).
typedef enum {
    SAMPLER_REJECTION,  // Algorithm 1: tokens by inverse CDF; keep x with probability min(1, p(x)/q(x)), else resample
    SAMPLER_COUPLED,    // Gumbel-max under shared noise; keep x when it is the target's own sample
} SpecSampler;

// Pipelined drafting (draft_ahead.h): the next round's drafts drafted on a thread of their own while the target
// verifies. SpecParams' zero value is off; the CLI's --pipeline defaults to auto, which turns it on where a CPU is
// free beyond the target's pool (scheduler.c, pipelined), and there the drafting thread runs every draft forward.
typedef enum { PIPELINE_OFF, PIPELINE_AUTO, PIPELINE_ON } Pipelining;

// Random numbers are keyed by (seed, position, stream) (sampling.h), never drawn from a stream that rounds
// consume, so the same seed, files and options give the same tokens on every run:
//   - SAMPLER_COUPLED: whatever γ, policy, timings and thread count; and the same tokens as target-only decoding.
//   - SAMPLER_REJECTION: for a fixed γ and for heuristic, at every thread count; GAMMA_AUTO and tree_auto, whose
//     shapes would follow measured timings, plan with spec_forward_cost instead at temperature > 0, where which
//     positions are drafted decides which random numbers a token gets — the same tokens on every run with the same
//     target thread count (the model knows the threads: at 16 a draft step costs more against the target's than at
//     2), not necessarily at another; --draft-threads does not change them. Greedy output is the target's whatever
//     γ, so there it plans with measurements.
//   - Pipelining changes no token, under every policy: a round that takes drafts drafted ahead takes the ones it
//     would have drawn, and draws the rest where it asks for more (draft_ahead.h).
//   - Prefix-stable: max_tokens changes no draft and no random number — rounds draft as deep as in a longer run and
//     the commit stops at max_tokens (scheduler.c, fit_shape) — so the first k tokens of a run are the first k of
//     every run that differs only by a larger max_tokens, for every drafter, tree and sampler.
typedef struct SpecParams {
    SamplingParams sampling;
    // Repetition, presence and frequency penalties on every row of logits, the target's and the draft's, before the
    // sampling (penalties.h); NULL: none.
    const Penalties *penalties;
    SpecSampler sampler;
    uint64_t seed;
    GammaPolicy policy;
    int gamma;              // GAMMA_FIXED: γ; GAMMA_HEURISTIC: the starting γ (a tree's depth)
    int tree_width;         // children of a draft tree's first level, each continued as a chain (≤ 1: a chain)
    bool tree_auto;         // --tree: the policy picks the width (up to tree_width) with γ; a chain when no tree pays
    Pipelining pipeline;    // draft the next round while the target verifies (a draft model's chains only)
    int max_tokens;         // stop after this many new tokens
    int eos_id;             // stop at this token (not emitted); −1 = never
    const int *eos_ids;     // ... or at any of these n_eos (a config's list, e.g. Llama 3's three), may be NULL
    int n_eos;
    // Structured output (src/grammar/mask.h): tokens the grammar refuses get probability 0 in the target's p and the
    // draft's q alike, both renormalised over the tokens allowed; NULL: none. Not with pipelined drafting.
    struct GrammarConstraint *constraint;
    // Grammar-forced drafting: where the grammar allows exactly one token, that token is drafted with q = 1 and no
    // draft forward, as far as the grammar forces a chain (up to the round's depth), then, without a drafter, the
    // tokens of the text it forces on (several bytes other tokenizations could spell too: q = 1, verified); the
    // drafter drafts otherwise, and the text the grammar forces after its chain follows it the same way.
    bool forced_drafts;
    FILE *trace;            // one JSON line per round, or NULL
    // Called with every token as it is committed, in order; returning true makes it the last one (stop strings):
    // the round's later tokens are dropped and both caches end at it. May be NULL.
    bool (*stop)(void *stop_ctx, int id);
    void *stop_ctx;
    // Called with every token as it is decided (rejected drafts included, for --show); may be NULL.
    void (*on_token)(void *ctx, int id, TokenKind kind);
    // Called after each round, once its tokens went to on_token (with the same ctx); may be NULL.
    void (*on_round)(void *ctx, const RoundOutcome *round);
    void *ctx;
    // Called with every committed token's log-probability and its top_logprobs (0..LOGPROBS_TOP_MAX) most likely
    // alternatives (logprobs.h: the target's raw row, whatever penalties, grammar or sampling say), in order, before
    // `stop` is asked about the token, with how the token came (TOKEN_ACCEPTED, _RESAMPLED, _BONUS or _TARGET); may be
    // NULL (then nothing is computed).
    void (*on_logprobs)(void *logprobs_ctx, const TokenLogprobs *logprobs, TokenKind kind);
    void *logprobs_ctx;
    int top_logprobs;
} SpecParams;

#endif
