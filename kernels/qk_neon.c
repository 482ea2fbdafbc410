// qk_neon.c — GGUF's K-quants multiplied as stored (kernels.h, "GGUF's K-quants, as stored") with Advanced SIMD, on the
// panel walk of panel_walk_neon.h: a K-panel's 16 rows as four quarters of 4, one 32-bit lane per weight row. A block's
// 8 groups of 4 rows × 4 inputs are loaded once for the pass's activation rows: Q4_K's nibbles unpacked as q4's
// (q4_neon.c), Q5_K's low 4 bits as Q4_K's with its fifth bits shifted in from their line, Q6_K's low 4 bits as Q4_K's
// with its top 2 bits shifted in from their lines and 32 taken off, so that its weights are the signed q − 32.
// add_group multiplies them by the activation bytes (|pair| ≤ 2 · 32 · 128 < 2¹⁵) into each row's exact integer sum — a
// Q6_K block's two halves apart — and the float steps around the sums are the reference's (kernels.h; qk.c), so the
// result is bit-identical to it.
#include "panel_walk_neon.h"

enum { GROUPS = Q8_BLOCK / Q8_GROUP };

// sum + Σ over groups [g0, g1) of the quarter's w · (the row's activation bytes), exact, in 32-bit lanes.
static inline __attribute__((always_inline)) int32x4_t group_sums(int32x4_t sum, const int8x16_t w[GROUPS],
                                                                  const int8_t *q_x, int g0, int g1) {
    for (int g = g0; g < g1; g++) sum = add_group(sum, w[g], broadcast_group(q_x + Q8_GROUP * g));
    return sum;
}

// The quarter's integer weights of block b, group g (inputs 4g..4g+3) in w[g]: Q4_K q ∈ [0, 15], Q5_K q ∈ [0, 31],
// Q6_K q − 32 ∈ [−32, 31].   q: the block's quants from the quarter's first row
static inline __attribute__((always_inline)) void k_block_weights(int8x16_t w[GROUPS], const uint8_t *q,
                                                                  const WeightType type) {
    for (int line = 0; line < GROUPS / 2; line++) {  // line l: groups l (low nibbles) and l + 4 (high ones)
        const uint8x16_t packed = vld1q_u8(q + 64 * line);
        w[line] = vreinterpretq_s8_u8(vandq_u8(packed, vdupq_n_u8(0x0f)));
        w[line + GROUPS / 2] = vreinterpretq_s8_u8(vshrq_n_u8(packed, 4));
    }
    for (int g = 0; g < GROUPS && type == WEIGHT_Q5_K; g++) {  // group g's fifth bits: bit g of the bytes, to bit 4
        const uint8x16_t bits = vshlq_u8(vld1q_u8(q + Q8_BLOCK * Q8_PANEL / 2), vdupq_n_s8((int8_t)(4 - g)));
        w[g] = vorrq_s8(w[g], vreinterpretq_s8_u8(vandq_u8(bits, vdupq_n_u8(0x10))));
    }
    for (int g = 0; g < GROUPS && type == WEIGHT_Q6_K; g++) {  // group g's top 2 bits: bits 2 · (g % 4) of line
        const uint8x16_t line = vld1q_u8(q + Q8_BLOCK * Q8_PANEL / 2 + 64 * (g / 4));  // g / 4, shifted to 4, 5
        const uint8x16_t top = vandq_u8(vshlq_u8(line, vdupq_n_s8((int8_t)(4 - 2 * (g % 4)))), vdupq_n_u8(0x30));
        w[g] = vsubq_s8(vorrq_s8(w[g], vreinterpretq_s8_u8(top)), vdupq_n_s8(32));
    }
}

// The walk's BlockStepNeon for the K-panels: per activation row t, acc = fma(Σ, fl(d·sc · d_x), acc) (Q6_K: each
// half's), and for Q4_K and Q5_K acc = fma(−dmin·m, fl(d_x · Σ q_x), acc) — the reference's steps (qk.c).
static inline __attribute__((always_inline)) void k_block_step(float32x4_t acc[ROWS_PER_PASS], const uint8_t *panel,
                                                               const Q8Block *x, int nb, int k, int b, const int n,
                                                               const WeightType type) {
    const int n_in = nb * Q8_BLOCK, first = k * QUARTER;
    const uint16_t *super = (const uint16_t *)(panel + k_super_offset(type, n_in, first, b / K_BLOCKS));
    const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(super)));
    int8x16_t w[GROUPS];
    k_block_weights(w, panel + (size_t)b * k_block_bytes(type) + first * 4, type);
    const uint8_t *scales = panel + k_scale_offset(type, n_in, first, b);
    float32x4_t d_scale, second;  // d·sc and d·sc_hi (Q6_K) or −dmin·m, exact, for all the pass's rows
    if (type == WEIGHT_Q6_K) {  // row r's (sc_lo, sc_hi) in lane r's low and high bytes
        const int16x4_t pairs = vreinterpret_s16_u16(vld1_u16((const uint16_t *)scales));
        d_scale = vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vshr_n_s16(vshl_n_s16(pairs, 8), 8))));
        second = vmulq_f32(d, vcvtq_f32_s32(vmovl_s16(vshr_n_s16(pairs, 8))));
    } else {  // row r's low 4 bits of sc and m in lane r's low byte, its top 2 bits of each at bits 0..3 of `tops`
        uint32_t four;
        memcpy(&four, scales, sizeof four);
        const uint32x4_t low = vmovl_u16(vget_low_u16(vmovl_u8(vcreate_u8(four)))), top = vdupq_n_u32(0x30);
        const uint8_t *super_tops = panel + k_tops_offset(type, n_in, first, b / K_BLOCKS);
        const uint32x4_t tops = vshlq_u32(vld1q_u32((const uint32_t *)super_tops), vdupq_n_s32(-4 * (b % K_BLOCKS)));
        const uint32x4_t sc = vorrq_u32(vandq_u32(low, vdupq_n_u32(0xf)), vandq_u32(vshlq_n_u32(tops, 4), top));
        const uint32x4_t m = vorrq_u32(vshrq_n_u32(low, 4), vandq_u32(vshlq_n_u32(tops, 2), top));
        const float32x4_t dmin = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(super + Q8_PANEL)));
        d_scale = vmulq_f32(d, vcvtq_f32_u32(sc));
        second = vnegq_f32(vmulq_f32(dmin, vcvtq_f32_u32(m)));
    }
    for (int t = 0; t < n; t++) {
        const Q8Block *xb = &x[(size_t)t * nb + b];
        const float32x4_t d_x = vdupq_n_f32(xb->d);
        if (type == WEIGHT_Q6_K) {
            const int32x4_t low = group_sums(vdupq_n_s32(0), w, xb->q, 0, GROUPS / 2),
                            high = group_sums(vdupq_n_s32(0), w, xb->q, GROUPS / 2, GROUPS);
            acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(low), vmulq_f32(d_scale, d_x));
            acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(high), vmulq_f32(second, d_x));
            continue;
        }
        acc[t] = vfmaq_f32(acc[t], vcvtq_f32_s32(group_sums(vdupq_n_s32(0), w, xb->q, 0, GROUPS)),
                           vmulq_f32(d_scale, d_x));
        acc[t] = vfmaq_f32(acc[t], second, vdupq_n_f32(xb->d * (float)(xb->offset / -128)));
    }
}

void q4_k_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q4_K, k_block_step);
}

void q5_k_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q5_K, k_block_step);
}

void q6_k_matmul_neon(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q6_K, k_block_step);
}
