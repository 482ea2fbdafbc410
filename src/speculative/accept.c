// accept.c — the leaf rule (accept.h): random numbers, the acceptance probability, the residual, and the chain's
// accept / resample step.
#include "speculative/accept.h"

#include <string.h>

// ---- random numbers ---------------------------------------------------------------------------------------------

double spec_uniform(const SpecParams *params, int position, DrawPurpose purpose, int sibling) {
    return random_uniform(params->seed, (uint64_t)position, (1ULL << 32) + ((uint64_t)sibling << 8) + purpose);
}

int spec_draw(const SpecParams *params, const double *probs, int V, int position, DrawPurpose purpose) {
    if (params->sampler == SAMPLER_COUPLED) return sampling_gumbel_max(probs, V, params->seed, (uint64_t)position);
    return sampling_draw(probs, V, spec_uniform(params, position, purpose, 0));
}

// ---- the parts of the rule --------------------------------------------------------------------------------------

double spec_accept_probability(double p_x, double q_x) { return q_x <= p_x ? 1.0 : p_x / q_x; }

double spec_residual(double *residual, const double *p, const double *q, int V) {
    double mass = 0.0;
    for (int i = 0; i < V; i++) mass += residual[i] = p[i] > q[i] ? p[i] - q[i] : 0.0;
    if (mass > 0.0)
        for (int i = 0; i < V; i++) residual[i] /= mass;
    else
        memcpy(residual, p, sizeof(double) * V);
    return mass;
}

double spec_overlap(const double *p, const double *q, int V) {
    double part[4] = {0};
    for (int x = 0; x < V; x++) part[x % 4] += p[x] < q[x] ? p[x] : q[x];
    return (part[0] + part[2]) + (part[1] + part[3]);
}

// ---- the chain's rule -------------------------------------------------------------------------------------------

ChainStep accept_chain(const SpecParams *params, const double *p, const double *q, int x, int V, int position,
                       double *residual) {
    ChainStep step = {.token = x, .kept = true, .p_x = p[x], .q_x = q ? q[x] : 1.0};
    step.overlap = q ? spec_overlap(p, q, V) : step.p_x;
    if (params->sampler == SAMPLER_COUPLED) {  // the target's own sample decides: x is kept when it is that token
        step.token = sampling_gumbel_max(p, V, params->seed, (uint64_t)position);
        step.kept = step.token == x;
        return step;
    }
    step.r = spec_uniform(params, position, DRAW_ACCEPT, 0);       // r ~ U(0, 1)
    if (step.r < spec_accept_probability(step.p_x, step.q_x)) return step;  // keep x if r < p(x) / q(x)
    step.kept = false;                                              // else resample from norm(max(0, p − q))
    if (q) {
        step.residual_mass = spec_residual(residual, p, q, V);
    } else {  // q one-hot at x: the residual is p without x (sampling_draw normalises it)
        memcpy(residual, p, sizeof(double) * V);
        step.residual_mass = 1.0 - residual[x];
        residual[x] = 0.0;
    }
    step.token = sampling_draw(residual, V, spec_uniform(params, position, DRAW_RESIDUAL, 0));
    return step;
}
