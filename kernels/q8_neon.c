// q8_neon.c — the q8 matmul (kernels.h) with Advanced SIMD, on the panel walk of panel_walk_neon.h: a panel's 16
// rows as four quarters of 4, one 32-bit lane per weight row. Base ARMv8-A has no byte dot product (sdot is
// optional, ARMv8.2): smull, addp and sadalp (add_group) add the products of each group into each row's 32-bit
// lane, a neighbouring pair at most 2 · 127² < 2¹⁵. The block's integer sum is exact and the float steps are the
// reference's, so the result is bit-identical to it.
#include "panel_walk_neon.h"

// The walk's BlockSumsNeon for q8: each 16-byte quarter-line is one group, 4 rows × 4 inputs.
static inline __attribute__((always_inline)) void q8_block_sums(int32x4_t isum[ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n) {
    for (int t = 0; t < n; t++) isum[t] = vdupq_n_s32(0);
    for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++) {
        const int8x16_t wq = vld1q_s8((const int8_t *)q + 64 * g);  // the quarter's rows × inputs 4g..4g+3
        for (int t = 0; t < n; t++) isum[t] = add_group(isum[t], wq, broadcast_group(x[(size_t)t * nb].q + Q8_GROUP * g));
    }
}

static inline __attribute__((always_inline)) void q8_block_step(float32x4_t acc[ROWS_PER_PASS], const uint8_t *panel,
                                                                const Q8Block *x, int nb, int k, int b, const int n,
                                                                const WeightType type) {
    scaled_block_step(acc, panel, x, nb, k, b, n, type, q8_block_sums);
}

void q8_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q8, q8_block_step);
}

// GGUF's Q8_0 (kernels.h): the same panels with F16 scales.
void q8_0_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q8_0, q8_block_step);
}
