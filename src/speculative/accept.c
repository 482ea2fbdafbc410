// accept.c — the leaf rule (accept.h): random numbers, the acceptance probability, the residual, and the chain's
// accept / resample step.
#include "speculative/accept.h"

#include <stdint.h>
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

// Lane j of the 4 sums x ≡ j (mod 4) in order, as the scalar loop `part[x % 4] += min(p[x], q[x])` does, but in
// two 2-lane vectors (GCC's and Clang's vector extensions: SSE2 on x86-64, NEON on AArch64), which the compiler
// does not make of that loop. min is p < q ? p : q lane by lane (a mask selects), so the bits are the scalar
// loop's, NaN included.
typedef double Doubles __attribute__((vector_size(16)));
typedef int64_t Masks64 __attribute__((vector_size(16)));

static Doubles load_doubles(const double *x) {
    Doubles v;
    memcpy(&v, x, sizeof v);
    return v;
}

static Doubles smaller(Doubles a, Doubles b) {
    const Masks64 a_smaller = a < b;
    return (Doubles)((a_smaller & (Masks64)a) | (~a_smaller & (Masks64)b));
}

double spec_overlap(const double *p, const double *q, int V) {
    Doubles low = {0}, high = {0};  // lanes 0, 1 and 2, 3
    int x = 0;
    for (; x + 4 <= V; x += 4) {
        low += smaller(load_doubles(p + x), load_doubles(q + x));
        high += smaller(load_doubles(p + x + 2), load_doubles(q + x + 2));
    }
    double part[4] = {low[0], low[1], high[0], high[1]};
    for (; x < V; x++) part[x % 4] += p[x] < q[x] ? p[x] : q[x];
    return (part[0] + part[2]) + (part[1] + part[3]);
}

// The residual's entries p > q ? p − q : 0 (mask-selected, so NaN in p gives 0 as the scalar test does) and its
// mass in spec_overlap's 4 lanes: no branch on p > q, which is as likely false as true.
double spec_residual(double *residual, const double *p, const double *q, int V) {
    Doubles low = {0}, high = {0};
    int x = 0;
    for (; x + 4 <= V; x += 4)
        for (int half = 0; half < 2; half++) {
            const Doubles p2 = load_doubles(p + x + 2 * half), q2 = load_doubles(q + x + 2 * half);
            const Doubles r = (Doubles)((Masks64)(p2 - q2) & (p2 > q2));
            memcpy(residual + x + 2 * half, &r, sizeof r);
            if (half) high += r;
            else low += r;
        }
    double part[4] = {low[0], low[1], high[0], high[1]};
    for (; x < V; x++) part[x % 4] += residual[x] = p[x] > q[x] ? p[x] - q[x] : 0.0;
    const double mass = (part[0] + part[2]) + (part[1] + part[3]);
    if (!(mass > 0.0)) memcpy(residual, p, sizeof(double) * V);
    return mass;
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
    } else {  // q one-hot at x: the residual is p without x (sampling_draw normalises it) — p where that has no mass
        memcpy(residual, p, sizeof(double) * V);
        step.residual_mass = 1.0 - residual[x];
        residual[x] = 0.0;
        if (!(sampling_sum(residual, V) > 0.0)) residual[x] = p[x];  // (p(x) rounded below 1: as spec_residual does)
    }
    step.token = sampling_draw(residual, V, spec_uniform(params, position, DRAW_RESIDUAL, 0));
    return step;
}
