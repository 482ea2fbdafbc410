// divergence.h — how far apart two next-token distributions are, from their logits (for the q8 accuracy test and
// the bench's quant suite).
#ifndef SPECDEC_DIVERGENCE_H
#define SPECDEC_DIVERGENCE_H

#include <stdbool.h>

// p = softmax(a), q = softmax(b), temperature 1, in double precision:
typedef struct {
    double kl;          // KL(p ‖ q) = Σ_x p(x) (log p(x) − log q(x)), in nats
    double overlap;     // Σ_x min(p(x), q(x)): with a the target's and b the draft's, the probability that a draft
                        // token x ~ q is accepted (β in Leviathan et al. 2023, §3.1)
    bool same_argmax;   // argmax a = argmax b (the first maximum of each)
} Divergence;

Divergence divergence(const float *a, const float *b, int V);

#endif
