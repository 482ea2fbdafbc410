// q4.c — the 4-bit weight format (kernels.h, "4-bit weights"): quantizing weight panels at load, and the
// reference product that every variant's matmul_q4 reproduces bit for bit. The activations are q8's (q8.c).
//
// A block's scale d may be negative: the grid [−8, 7] reaches one step further on its negative side, and the
// weight of largest magnitude, whatever its sign, goes there when d has the opposite sign (llama.cpp's Q4_0 does
// the same). Among a few such grids the quantizer keeps the one of least squared error (choose_scale).
#include <math.h>
#include <string.h>

#include "kernels.h"

// round(v), ties to even, clamped to [−8, 7] (a NaN gives −8, clamped before it could reach a conversion): for
// |v| ≤ 8, adding 1.5 · 2²³ leaves round(v) in the low bits of the sum's mantissa (q8.c's round_to_q does the
// same), in arithmetic that needs no library call.
static inline int round_to_q4(float v) {
    v = v > -8.0f ? v : -8.0f;
    v = v < 7.0f ? v : 7.0f;
    const float sum = v + 12582912.0f;  // 1.5 · 2²³, bit pattern 0x4b400000
    uint32_t bits;
    memcpy(&bits, &sum, sizeof bits);
    return (int)(int32_t)(bits - 0x4b400000u);
}

// The BF16 value nearest d (ties to even): a block's scale, rounded before its quants are chosen for it.
static float bf16_nearest(float d) { return bf16_to_f32(f32_to_bf16(d)); }

// Quants of x [32] for scale d (d ≠ 0) into q, and the squared error Σ (x − d·q)².
static float quantize_with(int8_t q[Q4_BLOCK], const float x[Q4_BLOCK], float d) {
    const float inverse = 1.0f / d;
    float error = 0.0f;
    for (int i = 0; i < Q4_BLOCK; i++) {
        q[i] = (int8_t)round_to_q4(x[i] * inverse);
        const float e = x[i] - d * q[i];
        error += e * e;
    }
    return error;
}

// The scale of least squared error among the candidates (its quants in q), a BF16 value: for each divisor m,
// d = v / m, where v is the block's weight of largest magnitude (so that v lands on −m), and that d refitted by
// least squares to the quants it gives (d = Σ x q / Σ q², then the quants requantized). m = −8 alone is
// llama.cpp's Q4_0 rule. An all-zero block (or one of NaNs or infinities) gets d = 0 and q = 0.
static const float DIVISORS[] = {-8.0f, -7.5f, -7.0f, -6.5f};

static float choose_scale(int8_t q[Q4_BLOCK], const float x[Q4_BLOCK]) {
    float v = 0.0f;
    for (int i = 0; i < Q4_BLOCK; i++) v = fabsf(x[i]) > fabsf(v) ? x[i] : v;
    memset(q, 0, Q4_BLOCK);
    if (!(fabsf(v) > 0.0f) || !isfinite(v)) return 0.0f;
    float best = INFINITY, best_d = 0.0f;
    for (size_t c = 0; c < 2 * (sizeof DIVISORS / sizeof *DIVISORS); c++) {
        int8_t trial[Q4_BLOCK];
        float d = bf16_nearest(v / DIVISORS[c / 2]);
        if (c % 2) {  // the refit of candidate c / 2: its quants, then the d of least error for them
            quantize_with(trial, x, d);
            float xq = 0.0f, qq = 0.0f;
            for (int i = 0; i < Q4_BLOCK; i++) xq += x[i] * trial[i], qq += (float)(trial[i] * trial[i]);
            d = bf16_nearest(xq / qq);  // qq ≥ 36: v itself quantizes to |q| ≥ 6
        }
        const float error = d != 0.0f && isfinite(d) ? quantize_with(trial, x, d) : INFINITY;
        if (error < best) best = error, best_d = d, memcpy(q, trial, Q4_BLOCK);
    }
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
            for (int k = 0; k < Q4_BLOCK; k++)  // q_w[r, i0 + k] as u = q + 8, in its nibble
                panel[q4_quant_index(n_in, r, i0 + k)] |= (uint8_t)((q[k] + 8) << (k < 16 ? 0 : 4));
        }
}

// out[t, j] = bias[j] + Σ_b fl(d_w[j, b] · d_x[t, b]) · Σ_i q_w[j, i] · q_x[t, i], the float sum over blocks in
// block order, each step one fused multiply-add (kernels.h).
void q4_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                         int ld_out, int j0, int j1) {
    const int nb = q4_blocks(n_in);
    const uint16_t *scales = w;
    for (int j = j0; j < j1; j++)
        for (int t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                int32_t isum = 0;
                for (int i = 0; i < Q4_BLOCK; i++) isum += q4_quant(w, n_in, j, b * Q4_BLOCK + i) * xb->q[i];
                acc = fmaf((float)isum, bf16_to_f32(scales[q4_scale_index(n_in, j, b)]) * xb->d, acc);
            }
            out[(size_t)t * ld_out + j] = bias ? acc + bias[j] : acc;
        }
}
