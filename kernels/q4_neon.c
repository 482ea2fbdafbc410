// q4_neon.c — the q4 matmul (kernels.h) with Advanced SIMD, q8's kernel (q8_neon.c) with an unpacking step, on the
// same panel walk (panel_walk_neon.h): a panel's 16 rows as four quarters of 4, one 32-bit lane per weight row.
// Each 16-byte quarter-line holds two groups of 4 inputs in its low and high nibbles, u = q + 8 ∈ [0, 15], which
// as signed bytes add_group multiplies by the activation bytes (|pair| ≤ 2 · 15 · 127 < 2¹⁵). Each block's sum
// starts at −8 · Σ q_x (Q8Block.offset / 16), so it is the exact Σ q_w · q_x; the float steps are the reference's,
// so the result is bit-identical to it.
#include "panel_walk_neon.h"

enum { LINES = Q4_BLOCK * Q4_PANEL / 2 / 64 };

// The walk's BlockSumsNeon for q4: each 16-byte quarter-line is two groups, inputs 4·line.. and 16 + 4·line...
static inline __attribute__((always_inline)) void q4_block_sums(int32x4_t isum[ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n) {
    const uint8x16_t nibble = vdupq_n_u8(0x0f);
    for (int t = 0; t < n; t++) isum[t] = vdupq_n_s32(x[(size_t)t * nb].offset / 16);
    for (int line = 0; line < LINES; line++) {
        const uint8x16_t packed = vld1q_u8(q + 64 * line);
        const int8x16_t low = vreinterpretq_s8_u8(vandq_u8(packed, nibble));  // inputs 4·line .. 4·line + 3
        const int8x16_t high = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));    // 16 more
        for (int t = 0; t < n; t++) {
            const int8_t *xq = x[(size_t)t * nb].q + 4 * line;
            isum[t] = add_group(add_group(isum[t], low, broadcast_group(xq)), high, broadcast_group(xq + 16));
        }
    }
}

static inline __attribute__((always_inline)) void q4_block_step(float32x4_t acc[ROWS_PER_PASS], const uint8_t *panel,
                                                                const Q8Block *x, int nb, int k, int b, const int n,
                                                                const WeightType type) {
    scaled_block_step(acc, panel, x, nb, k, b, n, type, q4_block_sums);
}

void q4_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q4, q4_block_step);
}

// GGUF's Q4_0 (kernels.h): the same panels with F16 scales.
void q4_0_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q4_0, q4_block_step);
}
