// q4.c — the 4-bit weight format (kernels.h, "4-bit weights"): quantizing weight panels at load, and the
// reference product that every variant's matmul_q4 reproduces bit for bit. The activations are q8's (q8.c).
//
// A block's scale d may be negative: the grid [−8, 7] reaches one step further on its negative side, and the
// weight of largest magnitude, whatever its sign, goes there when d has the opposite sign (llama.cpp's Q4_0 does
// the same). Among a few such grids the quantizer keeps the one of least squared error (choose_scale).
#include <math.h>
#include <string.h>

#include "kernels.h"

// The quantizer's loops run over 4 lanes at a time (one SSE2 or Advanced SIMD register), in GCC's and clang's
// vector extensions: a load quantizes every weight of the model 8 times over (choose_scale), and plain loops did
// not vectorize. Each lane does the operations a scalar loop would, so the results are those of one.
enum { LANES = 4, VECTORS = Q4_BLOCK / LANES };
typedef float Lanes __attribute__((vector_size(16)));
typedef int32_t IntLanes __attribute__((vector_size(16)));

static inline Lanes splat(float v) { return (Lanes){v, v, v, v}; }

static inline float lane_sum(Lanes v) { return ((v[0] + v[1]) + v[2]) + v[3]; }

// round(v), ties to even, clamped to [−8, 7], as floats, with no undefined case (q8.c's round_to_q, with this
// grid's bounds): adding 1.5 · 2²³ leaves round(v) in the low bits of the sum's mantissa (exactly, for
// |v| ≤ 2²²), read off as the difference of the bit patterns; a larger |v|, an infinity or a NaN gives a
// difference outside [−8, 7] that the clamp sends to a bound.
static inline Lanes round_to_q4(Lanes v) {
    const IntLanes low = (IntLanes){0} - 8, high = (IntLanes){0} + 7;
    IntLanes q = (IntLanes)(v + splat(12582912.0f)) - 0x4b400000;  // 1.5 · 2²³, bit pattern 0x4b400000
    IntLanes above = q > low, below = q < high;  // each lane −1 (true) or 0
    q = (q & above) | (low & ~above);
    q = (q & below) | (high & ~below);
    return __builtin_convertvector(q, Lanes);
}

// The BF16 value nearest d (ties to even): a block's scale, rounded before its quants are chosen for it.
static float bf16_nearest(float d) { return bf16_to_f32(f32_to_bf16(d)); }

// Quants of x [32] for scale d (d ≠ 0) into q (whole numbers in [−8, 7], as floats), and the squared error
// Σ (x − d·q)², summed in 4 lanes, then lane by lane.
static float quantize_with(Lanes q[VECTORS], const Lanes x[VECTORS], float d) {
    const Lanes inverse = splat(1.0f / d), scale = splat(d);
    Lanes error = splat(0.0f);
    for (int k = 0; k < VECTORS; k++) {
        q[k] = round_to_q4(x[k] * inverse);
        const Lanes e = x[k] - scale * q[k];
        error += e * e;
    }
    return lane_sum(error);
}

// The scale of least squared error for q's quants (Σ x q / Σ q², in 4 lanes as above), rounded to BF16.
static float refit(const Lanes q[VECTORS], const Lanes x[VECTORS]) {
    Lanes xq = splat(0.0f), qq = splat(0.0f);
    for (int k = 0; k < VECTORS; k++) xq += x[k] * q[k], qq += q[k] * q[k];
    return bf16_nearest(lane_sum(xq) / lane_sum(qq));  // Σ q² ≥ 36: the largest weight quantizes to |q| ≥ 6
}

// The block's weight of largest magnitude (the first, if several): the one whose bit pattern without the sign is
// max_magnitude's. NaN is larger than any number here.
static float largest_weight(const float x[Q4_BLOCK]) {
    const float largest = max_magnitude(x, Q4_BLOCK);
    uint32_t target;
    memcpy(&target, &largest, sizeof target);
    for (int i = 0; i < Q4_BLOCK; i++) {
        uint32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        if ((bits & 0x7fffffff) == target) return x[i];
    }
    return 0.0f;  // not reached
}

// The scale of least squared error among the candidates (its quants in q), a BF16 value: for each divisor m,
// d = v / m, where v is the block's weight of largest magnitude (so that v lands on −m), and that d refitted by
// least squares to the quants it gives, then the quants redone. m = −8 alone is llama.cpp's Q4_0 rule. An
// all-zero block (or one with a NaN or an infinity) gets d = 0 and q = 0.
static const float DIVISORS[] = {-8.0f, -7.0f};

static float choose_scale(int8_t q[Q4_BLOCK], const float x[Q4_BLOCK]) {
    const float v = largest_weight(x);
    memset(q, 0, Q4_BLOCK);
    if (!(fabsf(v) > 0.0f) || !isfinite(v)) return 0.0f;
    Lanes xs[VECTORS], best_q[VECTORS], trial[VECTORS];
    memcpy(xs, x, sizeof xs);
    float best = INFINITY, best_d = 0.0f;
    for (size_t c = 0; c < sizeof DIVISORS / sizeof *DIVISORS; c++) {
        const float d = bf16_nearest(v / DIVISORS[c]);
        float error = quantize_with(trial, xs, d);
        if (error < best) best = error, best_d = d, memcpy(best_q, trial, sizeof trial);
        const float fitted = refit(trial, xs);
        error = fitted != 0.0f && isfinite(fitted) ? quantize_with(trial, xs, fitted) : INFINITY;
        if (error < best) best = error, best_d = fitted, memcpy(best_q, trial, sizeof trial);
    }
    for (int i = 0; i < Q4_BLOCK && best_d != 0.0f; i++) q[i] = (int8_t)best_q[i / LANES][i % LANES];
    return best_d;
}

void q4_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    const int nb = q4_blocks(n_in);
    memset(panel, 0, q4_panel_bytes(n_in));
    uint16_t *scales = (uint16_t *)(panel + (size_t)nb * Q4_BLOCK * Q4_PANEL / 2);
    for (int r = 0; r < Q4_PANEL; r++)
        for (int b = 0; b < nb; b++) {
            const int i0 = b * Q4_BLOCK, n = n_in - i0 < Q4_BLOCK ? n_in - i0 : Q4_BLOCK;
            float x[Q4_BLOCK] = {0};
            if (r < n_rows) memcpy(x, rows + (size_t)r * ld + i0, sizeof(float) * (size_t)n);
            int8_t q[Q4_BLOCK];
            scales[b * Q4_PANEL + r] = f32_to_bf16(choose_scale(q, x));
            uint8_t *bytes = panel + q4_quant_index(n_in, r, i0);  // inputs k and k + 16 share a byte
            for (int k = 0; k < 16; k++) bytes[k / 4 * 64 + k % 4] = (uint8_t)((q[k] + 8) | (q[k + 16] + 8) << 4);
        }
}

// The reference product, q8's (q8.c) with q4's quants.
void q4_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                         int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q4, bias, T, n_in, ld_out, j0, j1);
}
