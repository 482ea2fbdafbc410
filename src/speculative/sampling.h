// sampling.h — from logits to a token: the adjusted distribution, and a seeded random generator.
//
// "Standardized sampling" (Leviathan et al. 2023, §2.2): temperature, top-k and top-p turn logits into a
// distribution, and that one distribution is what tokens are drawn from — for the target and the draft alike.
// Temperature 0 is its limit, the one-hot distribution at the argmax (the lowest index wins a tie).
#ifndef SPECDEC_SAMPLING_H
#define SPECDEC_SAMPLING_H

#include <stdint.h>

typedef struct {
    float temperature;  // 0 = greedy
    int top_k;          // keep the k most likely tokens (ties at the k-th value kept too); 0 = all
    float top_p;        // keep the smallest most-likely set whose probability reaches top_p; 1 = all
} SamplingParams;

// probs = adjust(logits)       probs, logits: [V]. Returns -1 if a logit is NaN or +inf (nothing sensible to
// sample from), else 0. Probabilities are doubles: the rejection rule of speculative decoding divides and
// subtracts them, and should not lose the exactness of the target's distribution to rounding.
int sampling_adjust(double *probs, const float *logits, int V, const SamplingParams *params);

// The index of the largest logit, the lowest one on a tie.
int sampling_argmax(const float *logits, int V);

// Σ x[0..n), in a fixed order (8 interleaved partial sums: fast, and the same result at every call).
double sampling_sum(const double *x, int n);

// max_x softmax(logits)_x at temperature 1: how sure the model is, whatever the sampling settings.
double sampling_top_probability(const float *logits, int V);

// xoshiro256** (Blackman & Vigna 2018), seeded through splitmix64.
typedef struct {
    uint64_t s[4];
} Rng;
void rng_seed(Rng *rng, uint64_t seed);
uint64_t rng_next(Rng *rng);
double rng_uniform(Rng *rng);  // in [0, 1), 53 random bits

// The token x with Σ_{y<x} probs[y] ≤ u·Σ probs < Σ_{y≤x} probs[y]: inverse-CDF sampling, u ∈ [0, 1).
int sampling_draw(const double *probs, int V, double u);

#endif
