// q4_neon.c — the q4 matmul (kernels.h) with Advanced SIMD, q8's kernel (q8_neon.c) with an unpacking step: a
// panel's 16 rows as four quarters of 4, one 32-bit lane per weight row. Each 16-byte quarter-line holds two
// groups of 4 inputs in its low and high nibbles, u = q + 8 ∈ [0, 15], which as signed bytes smull multiplies by
// the activation bytes into 16 bits; addp adds neighbouring products (|pair| ≤ 2 · 15 · 127 < 2¹⁵) and sadalp
// adds those into each row's 32-bit lane. Each block's sum starts at −8 · Σ q_x (Q8Block.offset / 16), so it is
// the exact Σ q_w · q_x; the float steps are the reference's, so the result is bit-identical to it.
#include <arm_neon.h>
#include <string.h>

#include "kernels.h"

enum { QUARTER = 4, ROWS_PER_PASS = 4, LINES = Q4_BLOCK * Q4_PANEL / 2 / 64 };

static inline __attribute__((always_inline)) int8x16_t broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return vreinterpretq_s8_s32(vdupq_n_s32(four));
}

// Σ over the 4 inputs of a group of w · x into each row's lane of sum.   w: 4 rows × 4 inputs   x: broadcast
static inline __attribute__((always_inline)) int32x4_t add_group(int32x4_t sum, int8x16_t w, int8x16_t x) {
    return vpadalq_s16(sum, vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)), vmull_high_s8(w, x)));
}

// Quarter k (rows 4k..4k+3) of the panel against activation rows t < n ≤ 4 (a constant where this is inlined);
// rows lo..hi−1 of the quarter are stored.   out: [n, ld_out] from the quarter's first row
static inline __attribute__((always_inline)) void quarter_against_rows(float *out, const Q8Block *x,
                                                                       const uint8_t *panel, const float *bias,
                                                                       int nb, int ld_out, int k, int lo, int hi,
                                                                       const int n) {
    float32x4_t acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = vdupq_n_f32(0.0f);
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * Q4_BLOCK * Q4_PANEL / 2);
    const uint8x16_t nibble = vdupq_n_u8(0x0f);
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = panel + (size_t)b * Q4_BLOCK * Q4_PANEL / 2 + k * QUARTER * 4;
        const float32x4_t d_w = vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(scales + b * Q4_PANEL + k * QUARTER), 16));
        int32x4_t isum[ROWS_PER_PASS];
        for (int t = 0; t < n; t++) isum[t] = vdupq_n_s32(x[(size_t)t * nb + b].offset / 16);
        for (int line = 0; line < LINES; line++) {
            const uint8x16_t packed = vld1q_u8(q + 64 * line);
            const int8x16_t low = vreinterpretq_s8_u8(vandq_u8(packed, nibble));  // inputs 4·line .. 4·line + 3
            const int8x16_t high = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));    // 16 more
            for (int t = 0; t < n; t++) {
                const int8_t *xq = x[(size_t)t * nb + b].q + 4 * line;
                isum[t] = add_group(add_group(isum[t], low, broadcast_group(xq)), high, broadcast_group(xq + 16));
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

void q4_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    const int nb = q4_blocks(n_in);
    for (int p = j0 / Q4_PANEL; p * Q4_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * q4_panel_bytes(n_in);
        for (int k = 0; k < Q4_PANEL / QUARTER; k++) {
            const int first = p * Q4_PANEL + k * QUARTER;  // rows [first, first + 4), of which [j0, j1) are wanted
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
