// sampling_reference.h — the adjusted distribution of sampling.h computed naively, as an oracle that shares no code
// with src/speculative/sampling.c: every token sorted, probabilities and cumulative sums in double, and top-p in
// transformers' own formulation (sort ascending, remove the tokens whose cumulative probability is ≤ 1 − top_p,
// keep the most likely one). Slow and obviously right; the tests compare sampler_adjust with it.
#ifndef SPECDEC_SAMPLING_REFERENCE_H
#define SPECDEC_SAMPLING_REFERENCE_H

#include "speculative/sampling.h"

// probs: [V]. Returns -1 where sampler_adjust must reject the logits (NaN, +inf, all −inf), else 0.
// *margin (may be NULL): the distance of top-p's closest decision from flipping, min over the ranked tokens of
// |cumulative − (1 − top_p)|; +inf when top-p is off. Below ~1e-6 rounding may legitimately decide either way.
int reference_adjust(double *probs, const float *logits, int V, const SamplingParams *params, double *margin);

#endif
