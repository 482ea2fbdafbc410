// q5_neon.c — GGUF's Q5_0, Q5_1 and Q4_1 multiplied as stored (kernels.h, "GGUF's Q5_0, Q5_1 and Q4_1, as stored")
// with Advanced SIMD, on the panel walk of panel_walk_neon.h: a q5 panel's 16 rows as four quarters of 4, one 32-bit
// lane per weight row. A block's 8 groups of 4 rows × 4 inputs are unpacked once for the pass's activation rows —
// the nibbles as q4's (q4_neon.c), and for Q5_0 and Q5_1 each group's fifth bits shifted to bit 4 from the block's
// last line and or-ed in, u = q — and add_group multiplies them by the activation bytes (|pair| ≤ 2 · 31 · 127 <
// 2¹⁵). Q5_0's block sums start at −16 · Σ q_x (Q8Block.offset / 8), the exact Σ (q − 16) · q_x; Q5_1's and Q4_1's
// at 0. The float steps are the walk's, the reference's (q8.c; the mins' too), so the result is bit-identical to it.
#include "panel_walk_neon.h"

enum { GROUPS = Q8_BLOCK / Q8_GROUP };

// The walk's BlockSumsNeon for `type`.
static inline __attribute__((always_inline)) void q5_block_sums(int32x4_t isum[ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n,
                                                                const WeightType type) {
    int8x16_t w[GROUPS];
    for (int line = 0; line < GROUPS / 2; line++) {  // line l: groups l (low nibbles) and l + 4 (high ones)
        const uint8x16_t packed = vld1q_u8(q + 64 * line);
        w[line] = vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f)));
        w[line + GROUPS / 2] = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
    }
    const uint8x16_t high = vld1q_u8(q + Q5_NIBBLE_BYTES);
    for (int g = 0; g < GROUPS && fifth_bits(type); g++) {  // group g's fifth bits: bit g of each byte, to bit 4
        const uint8x16_t bits = vandq_u8(vshlq_u8(high, vdupq_n_s8((int8_t)(4 - g))), vdupq_n_u8(0x10));
        w[g] = vorrq_s8(w[g], vreinterpretq_s8_u8(bits));
    }
    for (int t = 0; t < n; t++) {
        const Q8Block *xb = &x[(size_t)t * nb];
        isum[t] = vdupq_n_s32(type == WEIGHT_Q5_0 ? xb->offset / 8 : 0);
        for (int g = 0; g < GROUPS; g++) isum[t] = add_group(isum[t], w[g], broadcast_group(xb->q + Q8_GROUP * g));
    }
}

// Each type's matmul, and the walk's BlockSumsNeon and BlockStepNeon for it.
#define Q5_MATMUL(name, TYPE)                                                                                         \
    static inline __attribute__((always_inline)) void name##_block_sums(int32x4_t isum[ROWS_PER_PASS],                \
                                                                        const uint8_t *q, const Q8Block *x, int nb,   \
                                                                        const int n) {                                \
        q5_block_sums(isum, q, x, nb, n, TYPE);                                                                       \
    }                                                                                                                 \
    static inline __attribute__((always_inline)) void name##_block_step(float32x4_t acc[ROWS_PER_PASS],               \
                                                                        const uint8_t *panel, const Q8Block *x,       \
                                                                        int nb, int k, int b, const int n,            \
                                                                        const WeightType type) {                      \
        scaled_block_step(acc, panel, x, nb, k, b, n, type, name##_block_sums);                                       \
    }                                                                                                                 \
    void name##_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,          \
                            int ld_out, int j0, int j1) {                                                             \
        walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, TYPE, name##_block_step);                               \
    }

Q5_MATMUL(q5_0, WEIGHT_Q5_0)
Q5_MATMUL(q5_1, WEIGHT_Q5_1)
Q5_MATMUL(q4_1, WEIGHT_Q4_1)
