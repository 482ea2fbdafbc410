// sampling.h — from logits to a token: the adjusted distribution, and counter-based random numbers.
//
// "Standardized sampling" (Leviathan et al. 2023, §2.2): temperature, top-k and top-p turn logits into a
// distribution, and that one distribution is what tokens are drawn from — for the target and the draft alike.
// The rules are transformers' warpers (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper), with min-p where
// vLLM applies it (after the temperature, before top-k and top-p), in that order:
//   1. temperature T: p ∝ exp((logit − max) / T). T = 0 is the limit, the one-hot distribution at the argmax
//      (the lowest index wins a tie, as in argmax everywhere here and in torch.argmax).
//   1b. min-p m: keep the tokens of p ≥ m · max p (relative to the most likely token), renormalised (vLLM's
//      min_p; Nguyen et al. 2024, "Turning up the heat: min-p sampling").
//   2. top-k: keep every token whose logit is ≥ the k-th largest logit — ties at the k-th value are all kept, so
//      more than k tokens may remain (transformers: `scores < topk(scores, k)[..., -1]` are removed).
//   3. top-p, over what top-k kept, renormalised: rank the tokens by logit (the lower id first on a tie) and keep
//      each token while the mass ranked strictly before it is < top_p. The token that crosses top_p stays, and
//      at least one token always does (transformers: sort ascending, remove the tokens whose cumulative
//      probability is ≤ 1 − top_p; its unstable sort leaves ties at the boundary unspecified, ours keeps the
//      lower id).
// A logit of −inf gets probability exactly 0 (a masked token); NaN and +inf are rejected, and so are logits that
// are all −inf (no distribution). Repetition, presence and frequency penalties change the logits before all this
// (penalties.h).
#ifndef SPECDEC_SAMPLING_H
#define SPECDEC_SAMPLING_H

#include <stdint.h>

#include "base/error.h"
#include "kernels.h"

typedef struct {
    float temperature;  // 0 = greedy
    int top_k;          // keep the k most likely tokens (ties at the k-th value kept too); 0 = all
    float top_p;        // keep the smallest most-likely set whose probability reaches top_p; 1 = all
    float min_p;        // keep the tokens at least min_p times as likely as the most likely one; 0 = all
} SamplingParams;

typedef struct SamplingCandidate SamplingCandidate;

// Turns logits into adjusted distributions for one vocabulary size and one set of parameters. Made once:
// adjusting allocates nothing and reads no environment.
typedef struct {
    SamplingParams params;
    int V;
    const Kernels *kernels;         // their softmax
    float *exponentials;            // [V] scratch: exp((logit − max) / T) (NULL when greedy)
    float *selection;               // [V] scratch: the logits, reordered while finding the k-th largest (NULL
                                    // unless top-k cuts)
    SamplingCandidate *candidates;  // [V] scratch: the tokens that top-k / top-p may keep, best first (NULL unless
                                    // either cuts)
} Sampler;

// Checks params (temperature finite and ≥ 0, top_k ≥ 0, top_p in (0, 1], min_p in [0, 1]) and allocates the scratch for V tokens.
int sampler_init(Sampler *s, const SamplingParams *params, int V, const Kernels *kernels, Err *err);
void sampler_free(Sampler *s);

// probs = adjust(logits)       probs, logits: [V]. Returns -1 if a logit is NaN or +inf or all are −inf (nothing
// sensible to sample from), else 0. Probabilities are doubles: the rejection rule of speculative decoding
// divides and subtracts them, and should not lose the exactness of the target's distribution to rounding.
int sampler_adjust(Sampler *s, double *probs, const float *logits);

// The token that sampler_adjust's one-hot distribution at temperature 0 puts its mass on (the argmax, the lowest
// index on a tie), without writing the distribution out: all that greedy decoding reads of a row, in one pass
// (Kernels.row_range). Returns −1 where sampler_adjust does (a logit NaN or +inf, or every logit −inf).
int sampling_greedy(const Kernels *kernels, const float *logits, int V);

// Σ x[0..n), in a fixed order (8 interleaved partial sums: fast, and the same result at every call).
double sampling_sum(const double *x, int n);

// max_x softmax(logits)_x at temperature 1: how sure the model is, whatever the sampling settings. The row's
// exponentials go to scratch [V] (Kernels.exp_sum: 1 / their sum is the answer).
double sampling_top_probability(const Kernels *kernels, const float *logits, int V, float *scratch);

// ---- random numbers ------------------------------------------------------------------------------------------
//
// Counter-based: a number is a pure function of (seed, position, stream) — nothing is consumed, so what the token
// at a position gets does not depend on how many numbers were drawn before it (rounds, γ, rejected drafts, thread
// count). The bits are SplitMix64's (Steele, Lea & Flood 2014): its finaliser applied to seed + position·φ gives a
// position's key, and the stream-th output of SplitMix64 started at that key is the number.

// 64 random bits for (seed, position, stream).
uint64_t random_bits(uint64_t seed, uint64_t position, uint64_t stream);
// Uniform in [0, 1): the top 53 bits.
double random_uniform(uint64_t seed, uint64_t position, uint64_t stream);
// Uniform in (0, 1), never 0: the top 53 bits plus half a step (what −log needs).
double random_open_uniform(uint64_t seed, uint64_t position, uint64_t stream);

// The token x with Σ_{y<x} probs[y] ≤ u·Σ probs < Σ_{y≤x} probs[y]: inverse-CDF sampling, u ∈ [0, 1). Tokens of
// probability 0 are never drawn. The sums are taken by blocks of tokens (sampling.c), so where u·Σ probs lies
// within rounding of a boundary the token may be the neighbour that one sum from the first token would give.
int sampling_draw(const double *probs, int V, double u);

// The Gumbel-max sample of probs at a position: argmax_x log p(x) + G_x, with G_x = −log(−log U_x) standard Gumbel
// noise and U_x = random_open_uniform(seed, position, x), over the tokens with p(x) > 0. Computed in its
// exponential-race form argmin_x E_x / p(x), E_x = −log U_x ~ Exp(1) (the same token: −log is decreasing); P(x) =
// p(x) / Σ p. The noise depends on (seed, position, x) only, not on probs: two distributions sampled at one
// position share it, which is what couples them (speculative.h, SAMPLER_COUPLED).
int sampling_gumbel_max(const double *probs, int V, uint64_t seed, uint64_t position);

#endif
