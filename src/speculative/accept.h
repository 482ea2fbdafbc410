// accept.h — the leaf rule of speculative decoding: Algorithm 1's accept / resample step for one draft, its parts
// (the acceptance probability, the residual, the overlap Σ min(p, q)) and the random numbers every draw uses. The
// tree's node rule (tree.h) is built on these parts; accept_chain is the chain's rule on its own, short enough to
// read beside the paper: the scheduler runs it at every node of one child (a chain's), and the tests hold tree_accept
// to it at width 1.
#ifndef SPECDEC_ACCEPT_H
#define SPECDEC_ACCEPT_H

#include <stdbool.h>

#include "speculative/params.h"

// ---- random numbers ---------------------------------------------------------------------------------------------

// What a random number at a position is for, under SAMPLER_REJECTION: each purpose has its own stream (above any
// token id; under SAMPLER_COUPLED stream x is token x's Gumbel noise), so a token's numbers depend on its position
// and the seed only — never on how many rounds or draws came before it.
typedef enum { DRAW_DRAFT, DRAW_ACCEPT, DRAW_RESIDUAL, DRAW_TARGET } DrawPurpose;

// The number in [0, 1) for a purpose at a position, for the sibling-th child of a tree's node (0: a chain's draft,
// and the node's residual and bonus draws): random_uniform(seed, position, 2^32 + 256·sibling + purpose).
double spec_uniform(const SpecParams *params, int position, DrawPurpose purpose, int sibling);

// A token from probs for `position`: under coupling its Gumbel-max sample (the same noise for q and p), else by
// inverse CDF with the purpose's random number (sibling 0's).
int spec_draw(const SpecParams *params, const double *probs, int V, int position, DrawPurpose purpose);

// ---- the parts of the rule --------------------------------------------------------------------------------------

// P(keep draft x) = min(1, p(x) / q(x)) (Algorithm 1: accept if r ≤ p(x) / q(x), r ~ U(0, 1)).
double spec_accept_probability(double p_x, double q_x);

// residual = max(0, p − q) over [V], the resampling distribution norm(max(0, p − q)) before normalising:
// sampling_draw draws from it as it is (it divides by the total), and a caller that needs the normalised row (to
// test another draft against it) divides by the mass returned, Σ max(0, p − q), summed in spec_overlap's 4 lanes.
// A zero mass (p == q, when rejection cannot happen in exact arithmetic) leaves residual = p.
double spec_residual(double *residual, const double *p, const double *q, int V);

// Σ_x min(p(x), q(x)) over [V]: the probability that a draft x ~ q is kept (in 4 lanes, lane j summing x ≡ j mod 4,
// so that every caller gets the same bits).
double spec_overlap(const double *p, const double *q, int V);

// ---- the chain's rule -------------------------------------------------------------------------------------------

// One draft's accept / resample step, and what the record keeps of it.
typedef struct {
    int token;              // x when kept, else the token drawn in its place
    bool kept;
    double r;               // the acceptance number; 0 under coupling, which draws none
    double p_x, q_x;        // p(x), q(x) (1 for a one-hot draft)
    double overlap;         // Σ_x min(p(x), q(x)) (p(x) for a one-hot draft)
    double residual_mass;   // at a rejection, Σ max(0, p − q) (1 − p(x) for a one-hot draft); else 0
} ChainStep;

// The accept / resample step for the draft x at `position`, drawn from q (NULL: one-hot at x), against the
// target's adjusted distribution p there: keep x if r < p(x) / q(x), else draw from norm(max(0, p − q)) — or,
// under SAMPLER_COUPLED, keep x if it is the target's Gumbel-max token, else emit that token. residual: [V].
ChainStep accept_chain(const SpecParams *params, const double *p, const double *q, int x, int V, int position,
                       double *residual);

#endif
