// sampling_reference.h — the adjusted distribution of sampling.h computed naively, as an oracle that shares no code
// with src/speculative/sampling.c: every token sorted, probabilities and cumulative sums in double, and top-p in
// transformers' own formulation (sort ascending, remove the tokens whose cumulative probability is ≤ 1 − top_p,
// keep the most likely one). Slow and obviously right; the tests compare sampler_adjust with it.
#ifndef SPECDEC_SAMPLING_REFERENCE_H
#define SPECDEC_SAMPLING_REFERENCE_H

#include "speculative/penalties.h"
#include "speculative/sampling.h"

// probs: [V]. Returns -1 where sampler_adjust must reject the logits (NaN, +inf, all −inf), else 0.
// *margin (may be NULL): the distance of top-p's closest decision from flipping, min over the ranked tokens of
// |cumulative − (1 − top_p)|, and of min-p's, min over the tokens below the top logit of |p / (min_p · p_max) − 1| / 100 (a ratio of two
// probabilities, each off by up to 2e-5 relatively in the sampler); +inf when both are off. Below ~1e-6 rounding may
// legitimately decide either way.
int reference_adjust(double *probs, const float *logits, int V, const SamplingParams *params, double *margin);

// The penalties (penalties.h) on logits [V] after the text tokens[0..n), whose first n_prompt are the prompt: token
// by token over the vocabulary, each counted by a scan of the text.
void reference_penalize(float *logits, int V, const int *tokens, int n, int n_prompt, const Penalties *p);

#endif
