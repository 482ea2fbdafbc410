// neon.c — AArch64 Advanced SIMD kernels: 4 floats per register, 32 registers. Advanced SIMD is part of every
// ARMv8-A CPU, so dispatch.c offers this variant on every aarch64 build.
//
// NEON has no masked loads or stores: the last n % 4 elements of a row are copied into (or out of) a zero-padded
// local buffer and go through the same vector step as the rest, so nothing past the end of an array is touched.
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

enum { LANES = 4 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

// ---- loads and stores: 4 elements (or the first n < 4, zero-filled) -----------------------------------------

// All ones in lanes k < n (every lane when n ≥ 4).
static ALWAYS_INLINE uint32x4_t first_n(int n) {
    static const int32_t lane[LANES] = {0, 1, 2, 3};
    return vcltq_s32(vld1q_s32(lane), vdupq_n_s32(n));
}

static ALWAYS_INLINE float32x4_t load_f32(const float *p, int n) {
    if (n >= LANES) return vld1q_f32(p);
    float padded[LANES] = {0};
    memcpy(padded, p, (size_t)n * sizeof(float));
    return vld1q_f32(padded);
}

static ALWAYS_INLINE void store_f32(float *p, float32x4_t v, int n) {
    if (n >= LANES) {
        vst1q_f32(p, v);
        return;
    }
    float padded[LANES];
    vst1q_f32(padded, v);
    memcpy(p, padded, (size_t)n * sizeof(float));
}

// Four weights at p as floats.
static ALWAYS_INLINE float32x4_t convert_weights(const void *p, WeightType type) {
    switch (type) {
    case WEIGHT_F16: return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)p)));
    case WEIGHT_BF16: return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16((const uint16_t *)p), 16));  // top half
    default: return vld1q_f32((const float *)p);
    }
}

static ALWAYS_INLINE float32x4_t load_weights(const void *p, WeightType type, int n) {
    if (n >= LANES) return convert_weights(p, type);
    _Alignas(16) uint8_t padded[LANES * sizeof(float)] = {0};
    memcpy(padded, p, (size_t)n * (type == WEIGHT_F32 ? 4 : 2));
    return convert_weights(padded, type);
}

static ALWAYS_INLINE float32x4_t masked(float32x4_t v, uint32x4_t mask) {
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(v), mask));
}

// ---- matmul -------------------------------------------------------------------------------------------------
//
// A block of R weight rows × TT activation rows: each 4-wide quarter of a 16-input slice of the R weight rows is
// loaded once and multiplied into all TT activation rows. Each (t, j) pair keeps the canonical order's 8 partial
// sums (kernels.h, SUM_LANES) in two registers, sums 0–3 and 4–7: a slice's quarters go to the first, the second,
// the first, the second (inputs 0–3, 4–7, 8–11, 12–15), so lane l of the pair takes inputs l and then l + 8. The
// sums run over chunks of MATMUL_CHUNK inputs, each chunk's combined by the canonical tree and added in turn
// (2·R·TT ≤ 24 accumulators + R weight registers + 1 activation register of the 32). Every (t, j) pair sees the
// same fused multiply-adds whatever R and TT are, the zero-filled tail included, as in every variant.

enum { BLOCK_R = 4, BLOCK_T = 3 };

// The canonical tree over the 8 sums in lo (0–3) and hi (4–7): (l, l + 4), (l, l + 2), (l, l + 1).
static ALWAYS_INLINE float combine_lanes(float32x4_t lo, float32x4_t hi) {
    const float32x4_t u = vaddq_f32(lo, hi);
    const float32x2_t v = vadd_f32(vget_low_f32(u), vget_high_f32(u));
    return vget_lane_f32(v, 0) + vget_lane_f32(v, 1);
}

// acc[r][t][q % 2] += x[t, i + 4q ..] · W[r, i + 4q ..] lane by lane for the quarters q of the slice at i, the
// first n columns of it (the rest read as zero).
static ALWAYS_INLINE void matmul_slice(float32x4_t acc[BLOCK_R][BLOCK_T][2], const float *x, const uint8_t *w,
                                       WeightType type, size_t row_bytes, int R, int TT, int ld_x, int i, int n) {
    const size_t elem = type == WEIGHT_F32 ? 4 : 2;
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++) {
        const int left = n - q * LANES, at = i + q * LANES;
        float32x4_t wv[BLOCK_R];
#pragma GCC unroll 4  // gcc -O2 would keep these loops, and the accumulators on the stack
        for (int r = 0; r < R; r++)
            wv[r] = left > 0 ? load_weights(w + r * row_bytes + at * elem, type, left) : vdupq_n_f32(0.0f);
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++) {
            const float32x4_t xv = left > 0 ? load_f32(x + (size_t)t * ld_x + at, left) : vdupq_n_f32(0.0f);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) acc[r][t][q % 2] = vfmaq_f32(acc[r][t][q % 2], xv, wv[r]);
        }
    }
}

static ALWAYS_INLINE void matmul_block(float *out, const float *x, const uint8_t *w, WeightType type,
                                       size_t row_bytes, const float *bias, int R, int TT, int n_in, int ld_x,
                                       int ld_out) {
    for (int c0 = 0; c0 < n_in; c0 += MATMUL_CHUNK) {
        const int c1 = c0 + MATMUL_CHUNK < n_in ? c0 + MATMUL_CHUNK : n_in;
        float32x4_t acc[BLOCK_R][BLOCK_T][2];
        for (int r = 0; r < R; r++)
            for (int t = 0; t < TT; t++) acc[r][t][0] = acc[r][t][1] = vdupq_n_f32(0.0f);
        for (int i = c0; i < c1; i += 16) matmul_slice(acc, x, w, type, row_bytes, R, TT, ld_x, i, c1 - i);
        for (int r = 0; r < R; r++)
            for (int t = 0; t < TT; t++) {
                float *o = out + (size_t)t * ld_out + r;
                const float chunk = combine_lanes(acc[r][t][0], acc[r][t][1]);
                const float sum = c0 == 0 ? chunk : *o + chunk;
                *o = bias && c1 == n_in ? sum + bias[r] : sum;
            }
    }
}

// Weight rows j0..j1 in blocks of 4 (the last few one at a time), activations in tiles of up to 3 rows.
static ALWAYS_INLINE void matmul(float *out, const float *x, const void *w, WeightType type, const float *bias,
                                 int T, int n_in, int ld_x, int ld_out, int j0, int j1) {
    const size_t row_bytes = (size_t)n_in * (type == WEIGHT_F32 ? 4 : 2);
    for (int j = j0; j < j1;) {
        const int R = j1 - j >= BLOCK_R ? BLOCK_R : 1;
        const uint8_t *wj = (const uint8_t *)w + (size_t)j * row_bytes;
        const float *bj = bias ? bias + j : NULL;
        for (int t = 0; t < T; t += BLOCK_T) {
            const float *xt = x + (size_t)t * ld_x;
            float *o = out + (size_t)t * ld_out + j;
            switch ((R == 4 ? 10 : 0) + (T - t < BLOCK_T ? T - t : BLOCK_T)) {
            case 13: matmul_block(o, xt, wj, type, row_bytes, bj, 4, 3, n_in, ld_x, ld_out); break;
            case 12: matmul_block(o, xt, wj, type, row_bytes, bj, 4, 2, n_in, ld_x, ld_out); break;
            case 11: matmul_block(o, xt, wj, type, row_bytes, bj, 4, 1, n_in, ld_x, ld_out); break;
            case 3: matmul_block(o, xt, wj, type, row_bytes, bj, 1, 3, n_in, ld_x, ld_out); break;
            case 2: matmul_block(o, xt, wj, type, row_bytes, bj, 1, 2, n_in, ld_x, ld_out); break;
            default: matmul_block(o, xt, wj, type, row_bytes, bj, 1, 1, n_in, ld_x, ld_out); break;
            }
        }
        j += R;
    }
}

DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)

// ---- elementwise math ---------------------------------------------------------------------------------------

// exp(x) = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 ∈ [−ln2/2, ln2/2]; e^r by its degree-6 Taylor
// polynomial (relative error < 2e-7). x is clamped to [−87.3, 88] so that n ∈ [−126, 127] and 2^n is a normal
// float, built by writing n + 127 into the exponent field. Below −87.3 the result stays at e^−87.3 ≈ 1.2e-38
// instead of going subnormal.
static ALWAYS_INLINE float32x4_t exp_ps(float32x4_t x) {
    x = vmaxnmq_f32(vminnmq_f32(x, vdupq_n_f32(88.0f)), vdupq_n_f32(-87.3f));  // a NaN becomes 88, as on x86
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.4426950408889634f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693145751953125f));  // ln 2 in two parts, exact product
    r = vfmsq_f32(r, n, vdupq_n_f32(1.428606765330187e-06f));
    float32x4_t p = vdupq_n_f32(1.0f / 720);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t two_n = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(127)), 23);
    return vmulq_f32(p, vreinterpretq_f32_s32(two_n));
}

// tanh(y) = 1 − 2 / (e^{2y} + 1)
static ALWAYS_INLINE float32x4_t tanh_ps(float32x4_t y) {
    float32x4_t e = exp_ps(vaddq_f32(y, y));
    return vsubq_f32(vdupq_n_f32(1.0f), vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, vdupq_n_f32(1.0f))));
}

// erf(x) by Abramowitz & Stegun 7.1.26: 1 − (a1 t + … + a5 t⁵) e^{−x²}, t = 1 / (1 + p|x|); |error| ≤ 1.5e-7.
static ALWAYS_INLINE float32x4_t erf_ps(float32x4_t x) {
    float32x4_t ax = vabsq_f32(x);
    float32x4_t t = vdivq_f32(vdupq_n_f32(1.0f), vfmaq_f32(vdupq_n_f32(1.0f), vdupq_n_f32(0.3275911f), ax));
    float32x4_t poly = vdupq_n_f32(1.061405429f);
    poly = vfmaq_f32(vdupq_n_f32(-1.453152027f), poly, t);
    poly = vfmaq_f32(vdupq_n_f32(1.421413741f), poly, t);
    poly = vfmaq_f32(vdupq_n_f32(-0.284496736f), poly, t);
    poly = vfmaq_f32(vdupq_n_f32(0.254829592f), poly, t);
    poly = vmulq_f32(poly, t);
    float32x4_t e = exp_ps(vmulq_f32(vsubq_f32(vdupq_n_f32(0.0f), ax), ax));
    float32x4_t y = vfmsq_f32(vdupq_n_f32(1.0f), poly, e);
    uint32x4_t sign = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));  // copy the sign of x
    return vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(y), sign));
}

static void gelu_tanh(float *x, int n) {
    const float32x4_t half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
    for (int i = 0; i < n; i += LANES) {
        float32x4_t v = load_f32(x + i, n - i);
        float32x4_t cubic = vfmaq_f32(v, vmulq_f32(vdupq_n_f32(0.044715f), v), vmulq_f32(v, v));
        float32x4_t inner = vmulq_f32(vdupq_n_f32(0.7978845608028654f), cubic);
        store_f32(x + i, vmulq_f32(vmulq_f32(half, v), vaddq_f32(one, tanh_ps(inner))), n - i);
    }
}

static void gelu_erf(float *x, int n) {
    const float32x4_t half = vdupq_n_f32(0.5f), one = vdupq_n_f32(1.0f);
    for (int i = 0; i < n; i += LANES) {
        float32x4_t v = load_f32(x + i, n - i);
        float32x4_t e = erf_ps(vmulq_f32(v, vdupq_n_f32(0.7071067811865476f)));
        store_f32(x + i, vmulq_f32(vmulq_f32(half, v), vaddq_f32(one, e)), n - i);
    }
}

// ---- reductions over a row ----------------------------------------------------------------------------------

// The canonical 8 partial sums (kernels.h, SUM_LANES) in two registers, lo (0–3) and hi (4–7), 8 floats a step.
static float row_sum(const float *x, int n) {
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int i = 0; i < n; i += 2 * LANES) {
        lo = vaddq_f32(lo, load_f32(x + i, n - i));
        hi = vaddq_f32(hi, n - i > LANES ? load_f32(x + i + LANES, n - i - LANES) : vdupq_n_f32(0.0f));
    }
    return combine_lanes(lo, hi);
}

// Σ (x_i − c)², each a fused multiply-add (c = 0: Σ x_i²), in the same order.
static float row_sum_squares(const float *x, int n, float c) {
    float32x4_t lo = vdupq_n_f32(0.0f), hi = vdupq_n_f32(0.0f);
    for (int i = 0; i < n; i += 2 * LANES) {
        const float32x4_t dl = masked(vsubq_f32(load_f32(x + i, n - i), vdupq_n_f32(c)), first_n(n - i));
        lo = vfmaq_f32(lo, dl, dl);
        const int left = n - i - LANES;
        const float32x4_t dh = left > 0 ? masked(vsubq_f32(load_f32(x + i + LANES, left), vdupq_n_f32(c)),
                                                 first_n(left))
                                        : vdupq_n_f32(0.0f);
        hi = vfmaq_f32(hi, dh, dh);
    }
    return combine_lanes(lo, hi);
}

static float row_max(const float *x, int n) {
    float32x4_t acc = vdupq_n_f32(-INFINITY);
    for (int i = 0; i < n; i += LANES)  // lanes past the end keep acc
        acc = vmaxq_f32(acc, vbslq_f32(first_n(n - i), load_f32(x + i, n - i), acc));
    return vmaxvq_f32(acc);
}

static void layernorm(float *out, const float *x, const float *gamma, const float *beta, int n, float eps) {
    const float mean_1 = row_sum(x, n) / n;
    const float32x4_t mean = vdupq_n_f32(mean_1);
    const float32x4_t inv_std = vdupq_n_f32(1.0f / sqrtf(row_sum_squares(x, n, mean_1) / n + eps));
    for (int i = 0; i < n; i += LANES) {
        float32x4_t d = vmulq_f32(vsubq_f32(load_f32(x + i, n - i), mean), inv_std);
        store_f32(out + i, vfmaq_f32(load_f32(beta + i, n - i), d, load_f32(gamma + i, n - i)), n - i);
    }
}

static void rmsnorm(float *out, const float *x, const float *gamma, int n, float eps) {
    const float32x4_t inv_rms = vdupq_n_f32(1.0f / sqrtf(row_sum_squares(x, n, 0.0f) / n + eps));
    for (int i = 0; i < n; i += LANES)
        store_f32(out + i, vmulq_f32(vmulq_f32(load_f32(x + i, n - i), inv_rms), load_f32(gamma + i, n - i)), n - i);
}

static void rope(float *x, const float *cos, const float *sin, int half) {
    for (int i = 0; i < half; i += LANES) {
        const int n = half - i;
        float32x4_t a = load_f32(x + i, n), b = load_f32(x + half + i, n), c = load_f32(cos + i, n),
                    s = load_f32(sin + i, n);
        store_f32(x + i, vfmaq_f32(vnegq_f32(vmulq_f32(b, s)), a, c), n);  // a·c − b·s, b·s rounded first
        store_f32(x + half + i, vfmaq_f32(vmulq_f32(a, s), b, c), n);
    }
}

static void silu_mul(float *out, const float *gate, const float *up, int n) {
    const float32x4_t one = vdupq_n_f32(1.0f);
    for (int i = 0; i < n; i += LANES) {
        float32x4_t g = load_f32(gate + i, n - i);
        float32x4_t e = exp_ps(vsubq_f32(vdupq_n_f32(0.0f), g));
        store_f32(out + i, vmulq_f32(vdivq_f32(g, vaddq_f32(one, e)), load_f32(up + i, n - i)), n - i);
    }
}

static void softmax(float *x, int n) {
    const float32x4_t max = vdupq_n_f32(row_max(x, n));
    float32x4_t sum[2] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};  // the canonical 8 partial sums, 0–3 and 4–7
    for (int i = 0; i < n; i += LANES) {
        float32x4_t e = masked(exp_ps(vsubq_f32(load_f32(x + i, n - i), max)), first_n(n - i));
        store_f32(x + i, e, n - i);
        sum[i / LANES % 2] = vaddq_f32(sum[i / LANES % 2], e);
    }
    const float32x4_t inv = vdupq_n_f32(1.0f / combine_lanes(sum[0], sum[1]));
    for (int i = 0; i < n; i += LANES) store_f32(x + i, vmulq_f32(load_f32(x + i, n - i), inv), n - i);
}

// 4 vectors of 4 lanes at a time, each lane keeping its max, where it first was, and its min (kernels.h); the last
// n mod 16 values go one at a time.
static RowRange row_range(const float *x, int n) {
    enum { VECTORS = 4 };
    const float32x4_t inf = vdupq_n_f32(INFINITY);
    const int32_t lane_index[LANES] = {0, 1, 2, 3};
    const uint32x4_t lane = vreinterpretq_u32_s32(vld1q_s32(lane_index));
    float32x4_t max[VECTORS], min[VECTORS];
    uint32x4_t arg[VECTORS], bad = vdupq_n_u32(0);
    for (int k = 0; k < VECTORS; k++) max[k] = vdupq_n_f32(-INFINITY), min[k] = inf, arg[k] = vdupq_n_u32(0);
    int i = 0;
    for (; i + VECTORS * LANES <= n; i += VECTORS * LANES)
        for (int k = 0; k < VECTORS; k++) {
            const float32x4_t v = vld1q_f32(x + i + k * LANES);
            const uint32x4_t above = vcgtq_f32(v, max[k]);  // false for NaN
            max[k] = vbslq_f32(above, v, max[k]);
            arg[k] = vbslq_u32(above, vaddq_u32(vdupq_n_u32((uint32_t)(i + k * LANES)), lane), arg[k]);
            min[k] = vbslq_f32(vcltq_f32(v, min[k]), v, min[k]);
            bad = vorrq_u32(bad, vmvnq_u32(vcltq_f32(v, inf)));  // NaN or +inf
        }
    float lane_max[VECTORS * LANES], lane_min[VECTORS * LANES];
    int lane_arg[VECTORS * LANES];
    for (int k = 0; k < VECTORS; k++) {
        vst1q_f32(lane_max + k * LANES, max[k]);
        vst1q_f32(lane_min + k * LANES, min[k]);
        vst1q_s32(lane_arg + k * LANES, vreinterpretq_s32_u32(arg[k]));
    }
    return row_range_of_lanes(lane_max, lane_arg, lane_min, VECTORS * LANES, vmaxvq_u32(bad) != 0, x, i, n);
}

// exp as softmax's, its sum in the canonical 16 partial sums of doubles (scalar.c, exp_sum): d[k] holds sums
// 2k and 2k + 1, so value i of a step of 4 goes to d[i / 2 % 8]; combined (p, p + 4) within each 8, then
// (p, p + 8), (l, l + 2), (l, l + 1).
static double exp_sum(float *out, const float *x, int n, float shift, float divisor) {
    const float32x4_t s = vdupq_n_f32(shift), d = vdupq_n_f32(divisor), minus_inf = vdupq_n_f32(-INFINITY);
    float64x2_t sums[8];
    for (int k = 0; k < 8; k++) sums[k] = vdupq_n_f64(0.0);
    for (int i = 0; i < n; i += LANES) {
        float32x4_t y = vsubq_f32(load_f32(x + i, n - i), s);
        if (divisor != 1.0f) y = vdivq_f32(y, d);  // (dividing by 1 changes no bit)
        const uint32x4_t keep = vandq_u32(first_n(n - i), vmvnq_u32(vceqq_f32(y, minus_inf)));
        const float32x4_t e = masked(exp_ps(y), keep);
        store_f32(out + i, e, n - i);
        const int k = i / 2 % 8;
        sums[k] = vaddq_f64(sums[k], vcvt_f64_f32(vget_low_f32(e)));
        sums[k + 1] = vaddq_f64(sums[k + 1], vcvt_high_f64_f32(e));
    }
    // c[l] = (d[l] + d[l + 4]) + (d[l + 8] + d[l + 12]): c01 holds c[0], c[1]; c23 holds c[2], c[3]
    const float64x2_t c01 = vaddq_f64(vaddq_f64(sums[0], sums[2]), vaddq_f64(sums[4], sums[6])),
                      c23 = vaddq_f64(vaddq_f64(sums[1], sums[3]), vaddq_f64(sums[5], sums[7]));
    const float64x2_t c = vaddq_f64(c01, c23);  // (c0 + c2, c1 + c3)
    return vgetq_lane_f64(c, 0) + vgetq_lane_f64(c, 1);
}

// 4 at a time (2 a register of doubles), the last n mod 4 one at a time.
static void scale_to_doubles(double *out, const float *x, int n, double factor) {
    const float64x2_t f = vdupq_n_f64(factor);
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        const float32x4_t v = vld1q_f32(x + i);
        vst1q_f64(out + i, vmulq_f64(vcvt_f64_f32(vget_low_f32(v)), f));
        vst1q_f64(out + i + 2, vmulq_f64(vcvt_high_f64_f32(v), f));
    }
    for (; i < n; i++) out[i] = x[i] * factor;
}

// Attention, two matrix products, out[g, c] = scale · Σ_{r < len_g} A[g, r] M[r, c]:
//   scores = scale · Q Kᵀ        (A = the n queries over the hd rows of Kᵀ, c along the positions)
//   out    = softmax(scores) V   (A = row g's weights over the rows of V up to its span, c along hd)
// (kernels.h, attention_from_products, says how a tree row's scores become weights).
// A block of COLS registers of columns is loaded once per r for ROWS rows of A (ROWS · COLS independent FMA
// chains, one broadcast per row and r); column blocks are the outer loop, so that the block of M that the first
// ROWS rows read from memory is in cache for the next ones: the key/value head is streamed once for the group.
// A row's sums run over r in order whatever rows share its block (past the block's shortest row each row
// finishes alone), so its result depends on that row alone.
// Lanes past `cols` are zero-filled on load and not stored.
enum { ROWS = 4, COLS = 4 };

static ALWAYS_INLINE int lanes_left(int n) { return n < 0 ? 0 : n; }

// Rows g0 .. g0 + R − 1 of out, columns c .. c + COLS · LANES − 1 (R a constant in each inlined copy: no row is
// computed twice; `full`, a constant too, says every lane is in: plain loads).
static inline __attribute__((always_inline)) void block_times_matrix(int R, float *out, int ld_out, const float *A,
                                                                     int ld_a, const int *len, int len_step, int g0,
                                                                     const float *M, int ld, int c,
                                                                     const int *lanes, bool full, float32x4_t sc) {
    const float *a[ROWS];
    int k[ROWS], common = len[(size_t)g0 * len_step];
    for (int i = 0; i < R; i++) {
        a[i] = A + (size_t)(g0 + i) * ld_a;
        k[i] = len[(size_t)(g0 + i) * len_step];
        common = k[i] < common ? k[i] : common;
    }
    float32x4_t acc[ROWS][COLS];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < COLS; j++) acc[i][j] = vdupq_n_f32(0.0f);
    for (int r = 0; r < common; r++) {
        const float *row = M + (size_t)r * ld + c;
        float32x4_t m[COLS];
        for (int j = 0; j < COLS; j++) m[j] = load_f32(row + j * LANES, full ? LANES : lanes[j]);
        for (int i = 0; i < R; i++) {
            const float32x4_t ar = vdupq_n_f32(a[i][r]);
            for (int j = 0; j < COLS; j++) acc[i][j] = vfmaq_f32(acc[i][j], ar, m[j]);
        }
    }
#pragma GCC unroll 4  // (acc stays in registers only if i is a constant in each copy)
    for (int i = 0; i < R; i++) {
        for (int r = common; r < k[i]; r++) {  // past the block's shortest row, each row alone
            const float32x4_t ar = vdupq_n_f32(a[i][r]);
            const float *row = M + (size_t)r * ld + c;
            for (int j = 0; j < COLS; j++) {
                const float32x4_t mj = load_f32(row + j * LANES, full ? LANES : lanes[j]);
                acc[i][j] = vfmaq_f32(acc[i][j], ar, mj);
            }
        }
        float *o = out + (size_t)(g0 + i) * ld_out + c;
        for (int j = 0; j < COLS; j++) store_f32(o + j * LANES, vmulq_f32(acc[i][j], sc), lanes[j]);
    }
}

// out[g, c] = scale · Σ_{r < len_g} A[g, r] · M[r · ld + c]     for g < n, c < cols; len_g = len[g · len_step]
static void rows_times_matrix(float *out, int ld_out, const float *A, int ld_a, const int *len, int len_step, int n,
                              const float *M, int ld, int cols, float scale) {
    const float32x4_t sc = vdupq_n_f32(scale);
    for (int c = 0; c < cols; c += COLS * LANES) {
        int lanes[COLS];
        for (int j = 0; j < COLS; j++) lanes[j] = lanes_left(cols - c - j * LANES);
        for (int g0 = 0; g0 < n; g0 += ROWS) {
            const int R = n - g0 < ROWS ? n - g0 : ROWS;
            const bool full = cols - c >= COLS * LANES;
#define BLOCK(R, full) block_times_matrix(R, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, full, sc)
            if (full) {
                switch (R) { case 1: BLOCK(1, true); break; case 2: BLOCK(2, true); break;
                             case 3: BLOCK(3, true); break; default: BLOCK(ROWS, true); break; }
            } else {
                switch (R) { case 1: BLOCK(1, false); break; case 2: BLOCK(2, false); break;
                             case 3: BLOCK(3, false); break; default: BLOCK(ROWS, false); break; }
            }
#undef BLOCK
        }
    }
}

static void attention(float *out, int ld_out, const float *q, int ld_q, const int *S, const uint64_t *tree, int n,
                      const float *kt, int ld_k, const float *v, int hd, float scale, float *scores, int ld_s) {
    attention_from_products(rows_times_matrix, softmax, out, ld_out, q, ld_q, S, tree, n, kt, ld_k, v, hd, scale,
                            scores, ld_s);
}

static void add(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += LANES)
        store_f32(out + i, vaddq_f32(load_f32(out + i, n - i), load_f32(x + i, n - i)), n - i);
}

const Kernels kernels_neon = {
    .name = "neon",
    .matmul = {[WEIGHT_F32] = matmul_f32, [WEIGHT_F16] = matmul_f16, [WEIGHT_BF16] = matmul_bf16},
    .matmul_q8 = q8_matmul_neon,
    .matmul_q4 = q4_matmul_neon,
    .matmul_q8_0 = q8_0_matmul_neon,
    .matmul_q4_0 = q4_0_matmul_neon,
    .matmul_q5 = {q5_0_matmul_neon, q5_1_matmul_neon, q4_1_matmul_neon},
    .matmul_k = {q4_k_matmul_neon, q5_k_matmul_neon, q6_k_matmul_neon},
    .quantize_q8 = q8_quantize_rows,
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .silu_mul = silu_mul,
    .gelu_tanh = gelu_tanh,
    .gelu_erf = gelu_erf,
    .softmax = softmax,
    .row_range = row_range,
    .exp_sum = exp_sum,
    .scale_to_doubles = scale_to_doubles,
    .attention = attention,
    .add = add,
};
