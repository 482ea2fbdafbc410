// q8_neon.c — the q8 matmul (kernels.h) with Advanced SIMD: a panel's 16 rows as four quarters of 4, one 32-bit
// lane per weight row. Base ARMv8-A has no byte dot product (sdot is optional, ARMv8.2): smull multiplies 8
// bytes into 16 bits, addp adds neighbouring products (|pair| ≤ 2 · 127² < 2¹⁵) and sadalp adds those pairs into
// each row's 32-bit lane. The block's integer sum is exact and the float steps are the reference's, so the result
// is bit-identical to it.
#include <arm_neon.h>
#include <string.h>

#include "kernels.h"

enum { QUARTER = 4, ROWS_PER_PASS = 4 };

static inline __attribute__((always_inline)) int8x16_t broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return vreinterpretq_s8_s32(vdupq_n_s32(four));
}

// Quarter k (rows 4k..4k+3) of the panel against activation rows t < n ≤ 4 (a constant where this is inlined);
// rows lo..hi−1 of the quarter are stored.   out: [n, ld_out] from the quarter's first row
static inline __attribute__((always_inline)) void quarter_against_rows(float *out, const Q8Block *x,
                                                                       const uint8_t *panel, const float *bias,
                                                                       int nb, int ld_out, int k, int lo, int hi,
                                                                       const int n) {
    float32x4_t acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = vdupq_n_f32(0.0f);
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * Q8_BLOCK * Q8_PANEL);
    for (int b = 0; b < nb; b++) {
        const int8_t *q = (const int8_t *)panel + (size_t)b * Q8_BLOCK * Q8_PANEL + k * QUARTER * Q8_GROUP;
        const float32x4_t d_w = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(scales + b * Q8_PANEL + k * QUARTER), 16));
        int32x4_t isum[ROWS_PER_PASS];
        for (int t = 0; t < n; t++) isum[t] = vdupq_n_s32(0);
        for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++) {
            const int8x16_t wq = vld1q_s8(q + 64 * g);  // rows 4k..4k+3 × inputs 4g..4g+3
            for (int t = 0; t < n; t++) {
                const int8x16_t xq = broadcast_group(x[(size_t)t * nb + b].q + Q8_GROUP * g);
                const int16x8_t pairs = vpaddq_s16(vmull_s8(vget_low_s8(wq), vget_low_s8(xq)), vmull_high_s8(wq, xq));
                isum[t] = vpadalq_s16(isum[t], pairs);
            }
        }
        for (int t = 0; t < n; t++)
            acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(isum[t]), vmulq_f32(d_w, vdupq_n_f32(x[(size_t)t * nb + b].d)));
    }
    for (int t = 0; t < n; t++) {
        float v[QUARTER];
        vst1q_f32(v, acc[t]);
        for (int r = lo; r < hi; r++) out[(size_t)t * ld_out + r] = bias ? v[r] + bias[r] : v[r];
    }
}

void q8_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * q8_panel_bytes(n_in);
        for (int k = 0; k < Q8_PANEL / QUARTER; k++) {
            const int first = p * Q8_PANEL + k * QUARTER;  // rows [first, first + 4), of which [j0, j1) are wanted
            const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < QUARTER ? j1 - first : QUARTER;
            if (lo >= hi) continue;
            const float *b = bias ? bias + first : NULL;
            for (int t = 0; t < T; t += ROWS_PER_PASS) {
                float *o = out + (size_t)t * ld_out + first;
                const Q8Block *xt = x + (size_t)t * nb;
                switch (T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS) {  // n a constant in each case
                case 1: quarter_against_rows(o, xt, panel, b, nb, ld_out, k, lo, hi, 1); break;
                case 2: quarter_against_rows(o, xt, panel, b, nb, ld_out, k, lo, hi, 2); break;
                case 3: quarter_against_rows(o, xt, panel, b, nb, ld_out, k, lo, hi, 3); break;
                default: quarter_against_rows(o, xt, panel, b, nb, ld_out, k, lo, hi, 4); break;
                }
            }
        }
    }
}
