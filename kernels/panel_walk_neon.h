// panel_walk_neon.h — the Advanced SIMD walk over weight panels and activation rows that the quantized matmuls
// share (q8_neon.c, q4_neon.c, qk_neon.c): a panel's 16 rows as four quarters of 4, one 32-bit lane per weight row,
// up to ROWS_PER_PASS activation rows against a quarter in one pass over its blocks. A format gives each block's
// step (BlockStepNeon, inlined where the walk is): its exact integer sums and the reference's float steps around
// them, so the result is bit-identical to the reference's.
#ifndef SPECDEC_PANEL_WALK_NEON_H
#define SPECDEC_PANEL_WALK_NEON_H

#include <arm_neon.h>
#include <string.h>

#include "kernels.h"

enum { QUARTER = 4, ROWS_PER_PASS = 4 };

// 4 activation bytes in every 32-bit lane.
static inline __attribute__((always_inline)) int8x16_t broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return vreinterpretq_s8_s32(vdupq_n_s32(four));
}

// Σ over the 4 inputs of a group of w · x into each row's lane of sum: smull multiplies 8 bytes into 16 bits,
// addp adds neighbouring products (the formats keep |pair| < 2¹⁵) and sadalp adds those pairs into 32 bits.
//   w: 4 rows × 4 inputs   x: broadcast
static inline __attribute__((always_inline)) int32x4_t add_group(int32x4_t sum, int8x16_t w, int8x16_t x) {
    return vpadalq_s16(sum, vpaddq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)), vmull_high_s8(w, x)));
}

// acc[t], lane r += block b's part of the dot product of the quarter's row r (< 4) with activation row t < n ≤ 4
// (a constant where it is inlined), in the reference's float steps.
//   panel: the panel of `type`   x: row t's block b at x[t · nb + b]   k: the quarter
typedef void BlockStepNeon(float32x4_t acc[ROWS_PER_PASS], const uint8_t *panel, const Q8Block *x, int nb, int k,
                           int b, int n, WeightType type);

// q8's, q4's and q5's panels (q8, q4, Q8_0, Q4_0, Q5_0, Q5_1, Q4_1): isum[t], lane r = Σ_i q_w[r, i] · q_x[t, i]
// over one block, exact, for the quarter's rows r < 4 and activation rows t < n ≤ 4.
//   q: the block's quants from the quarter's first row   x: row t's block at x[t · nb]
typedef void BlockSumsNeon(int32x4_t isum[ROWS_PER_PASS], const uint8_t *q, const Q8Block *x, int nb, int n);

// The BlockStepNeon of q8's, q4's and q5's panels around their block sums: one fused multiply-add per block by
// fl(d_w · d_x), the scales F16 (GGUF's blocks) or BF16 as `type` says, widened exactly; for Q5_1 and Q4_1 one more,
// of the block's min m by fl(d_x · Σ q_x) (kernels.h).
static inline __attribute__((always_inline)) void scaled_block_step(float32x4_t acc[ROWS_PER_PASS],
                                                                    const uint8_t *panel, const Q8Block *x, int nb,
                                                                    int k, int b, const int n, const WeightType type,
                                                                    BlockSumsNeon *block_sums) {
    const int block_bytes = in_q5_panels(type)   ? q5_block_bytes(type)
                            : in_q4_panels(type) ? Q4_BLOCK * Q4_PANEL / 2
                                                 : Q8_BLOCK * Q8_PANEL;
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * block_bytes);
    const uint16x4_t scales_16 = vld1_u16(scales + b * Q8_PANEL + k * QUARTER);
    const float32x4_t d_w = f16_scales(type) ? vcvt_f32_f16(vreinterpret_f16_u16(scales_16))
                                             : vreinterpretq_f32_u32(vshll_n_u16(scales_16, 16));
    int32x4_t isum[ROWS_PER_PASS];
    block_sums(isum, panel + (size_t)b * block_bytes + k * QUARTER * 4, x + b, nb, n);
    for (int t = 0; t < n; t++) {
        const Q8Block *xb = &x[(size_t)t * nb + b];
        acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(isum[t]), vmulq_f32(d_w, vdupq_n_f32(xb->d)));
        if (block_mins(type)) {  // the mins, F16 after the scales
            const uint16x4_t mins_16 = vld1_u16(scales + (nb + b) * Q8_PANEL + k * QUARTER);
            acc[t] = vfmaq_f32(acc[t], vcvt_f32_f16(vreinterpret_f16_u16(mins_16)),
                               vdupq_n_f32(xb->d * (float)(xb->offset / -128)));
        }
    }
}

// Quarter k (rows 4k..4k+3) of the panel against activation rows t < n ≤ 4; rows lo..hi−1 of the quarter are
// stored.   out: [n, ld_out] from the quarter's first row
static inline __attribute__((always_inline)) void quarter_against_rows(float *out, const Q8Block *x,
                                                                       const uint8_t *panel, const float *bias,
                                                                       int nb, int ld_out, int k, int lo, int hi,
                                                                       const int n, const WeightType type,
                                                                       BlockStepNeon *block_step) {
    float32x4_t acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = vdupq_n_f32(0.0f);
    for (int b = 0; b < nb; b++) block_step(acc, panel, x, nb, k, b, n, type);
    for (int t = 0; t < n; t++) {
        float v[QUARTER];
        vst1q_f32(v, acc[t]);
        for (int r = lo; r < hi; r++) out[(size_t)t * ld_out + r] = bias ? v[r] + bias[r] : v[r];
    }
}

// The matmul of MatmulQ8Fn over panels of a quantized `type`, each block's part done by `block_step`.
static inline __attribute__((always_inline)) void walk_panels(float *out, const Q8Block *x, const void *w,
                                                              const float *bias, int T, int n_in, int ld_out, int j0,
                                                              int j1, const WeightType type,
                                                              BlockStepNeon *block_step) {
    const int nb = q8_blocks(n_in);
    const size_t panel_bytes = quantized_panel_bytes(type, n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * panel_bytes;
        for (int k = 0; k < Q8_PANEL / QUARTER; k++) {
            const int first = p * Q8_PANEL + k * QUARTER;  // rows [first, first + 4), of which [j0, j1) are wanted
            const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < QUARTER ? j1 - first : QUARTER;
            if (lo >= hi) continue;
            const float *b = bias ? bias + first : NULL;
            for (int t = 0; t < T; t += ROWS_PER_PASS) {
                float *o = out + (size_t)t * ld_out + first;
                const Q8Block *xt = x + (size_t)t * nb;
                switch (T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS) {  // n a constant in each case
#define PASS(n) quarter_against_rows(o, xt, panel, b, nb, ld_out, k, lo, hi, n, type, block_step)
                case 1: PASS(1); break;
                case 2: PASS(2); break;
                case 3: PASS(3); break;
                default: PASS(4); break;
#undef PASS
                }
            }
        }
    }
}

#endif
