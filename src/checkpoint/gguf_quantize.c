// gguf_quantize.c — ggml's reference quantizers, step for step (see gguf_quantize.h).
#include "checkpoint/gguf_quantize.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "qk.h"

// Below this magnitude a group is all zeros (ggml's GROUP_MAX_EPS).
#define GROUP_MAX_EPS 1e-15f

uint16_t f32_to_f16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    const uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
    const uint32_t magnitude = u & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00;                      // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00;                     // ≥ 65520 rounds to infinity
    if (magnitude >= 0x38800000u) {                                         // normal: ≥ 2^−14
        const uint32_t rounded = magnitude + 0xfffu + (magnitude >> 13 & 1); // to nearest even at bit 13
        return sign | (uint16_t)((rounded - (112u << 23)) >> 13);           // exponent rebias 127 → 15
    }
    return sign | (uint16_t)rintf(fabsf(x) * 16777216.0f);                  // subnormal: multiples of 2^−24
}

// Round to nearest, ties to even, for |v| < 2^22 (ggml's nearest_int).
static int nearest_int(float v) { return (int)rintf(v); }

static int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static void put_f16(uint8_t *at, float v) {
    const uint16_t h = f32_to_f16(v);
    at[0] = (uint8_t)h, at[1] = (uint8_t)(h >> 8);
}

static float get_f16(const uint8_t *at) {
    // (the half's value as ggml's GGML_FP16_TO_FP32 gives it; exact)
    const uint16_t h = (uint16_t)(at[0] | at[1] << 8);
    const uint32_t e = h >> 10 & 0x1f, m = h & 0x3ff;
    const float magnitude = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), (int)e - 25);
    return h & 0x8000 ? -magnitude : magnitude;
}

// ---- Q8_0 and Q4_0: one scale per 32 weights ------------------------------------------------------------------

// block: d (f16), q[32] int8.   x: [32]
static void quantize_q8_0(uint8_t *block, const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float d = amax / 127, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(block, d);
    for (int j = 0; j < 32; j++) block[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
}

// block: d (f16), qs[16]: weight j in the low nibble of qs[j], weight j + 16 in the high one.   x: [32]
static void quantize_q4_0(uint8_t *block, const float *x) {
    float amax = 0.0f, max = 0.0f;  // the weight of largest magnitude, its sign kept
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) amax = fabsf(x[j]), max = x[j];
    const float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(block, d);
    for (int j = 0; j < 16; j++) {
        const int low = (int)(x[j] * id + 8.5f), high = (int)(x[j + 16] * id + 8.5f);  // truncated, as ggml's cast
        block[2 + j] = (uint8_t)((low < 15 ? low : 15) | (high < 15 ? high : 15) << 4);
    }
}

// block: d (f16), qh[4]: bit j of the little-endian u32 the fifth bit of weight j; qs[16] as Q4_0's.   x: [32]
static void quantize_q5_0(uint8_t *block, const float *x) {
    float amax = 0.0f, max = 0.0f;  // the weight of largest magnitude, its sign kept
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float d = max / -16, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(block, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        int low = (int)(x[j] * id + 16.5f), high = (int)(x[j + 16] * id + 16.5f);  // truncated, as ggml's cast
        low = low < 31 ? low : 31;
        high = high < 31 ? high : 31;
        block[6 + j] = (uint8_t)((low & 0xf) | (high & 0xf) << 4);
        qh |= (uint32_t)(low >> 4) << j | (uint32_t)(high >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++) block[2 + k] = (uint8_t)(qh >> 8 * k);
}

// block: d, m (f16), qh[4], qs[16] as Q5_0's; weight = d·q + m.   x: [32]
static void quantize_q5_1(uint8_t *block, const float *x) {
    float min = x[0], max = x[0];
    for (int j = 1; j < 32; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_f16(block, d);
    put_f16(block + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const int low = (uint8_t)((x[j] - min) * id + 0.5f), high = (uint8_t)((x[j + 16] - min) * id + 0.5f);
        block[8 + j] = (uint8_t)((low & 0xf) | (high & 0xf) << 4);
        qh |= (uint32_t)(low >> 4 & 1) << j | (uint32_t)(high >> 4 & 1) << (j + 16);
    }
    for (int k = 0; k < 4; k++) block[4 + k] = (uint8_t)(qh >> 8 * k);
}

// ---- Q6_K: 16 scales of 16 weights under one d -----------------------------------------------------------------

// The codes x[i] ≈ scale·(L[i] − 32), L in [0, 63], for the scale among 19 trials around −32/max (max: the weight
// of largest magnitude) that best fits x in least squares weighted by x²; returns that scale (ggml's make_qx_quants
// with nmax 32, rmse_type 1).   x, L: [16]
static float q6_group_scale(const float *x, uint8_t *L) {
    const int n = 16, nmax = 32;
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float scale = 0.0f, best = 0.0f;
    for (int trial = 0; trial <= 18; trial++) {  // trial 0: −nmax/max; then −(nmax + 0.1·k)/max, k = −9..9, k ≠ 0
        const int k = trial - 10 + (trial >= 10);
        const float iscale = trial == 0 ? (float)-nmax / max : -((float)nmax + 0.1f * (float)k) / max;
        float sumlx = 0.0f, suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            const float l = (float)clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1), w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        const bool better = trial == 0 || (suml2 > 0.0f && sumlx * sumlx > best * suml2);
        if (!better) continue;
        for (int i = 0; i < n; i++) L[i] = (uint8_t)(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
        scale = trial == 0 && suml2 == 0.0f ? 0.0f : sumlx / suml2;
        best = scale * sumlx;
    }
    return scale;
}

// block: ql[128], qh[64], scales[16] int8, d (f16).   x: [256]
static void quantize_q6_k(uint8_t *block, const float *x) {
    uint8_t L[256], *ql = block, *qh = block + 128;
    int8_t *scales = (int8_t *)(block + 192);
    float group_scale[16], max_scale = 0.0f, max_abs_scale = 0.0f;
    for (int g = 0; g < 16; g++) {
        group_scale[g] = q6_group_scale(x + 16 * g, L + 16 * g);
        if (fabsf(group_scale[g]) > max_abs_scale) max_abs_scale = fabsf(group_scale[g]), max_scale = group_scale[g];
    }
    if (max_abs_scale < GROUP_MAX_EPS) {
        memset(block, 0, 210);
        return;
    }
    const float iscale = -128.0f / max_scale;
    put_f16(block + 208, 1 / iscale);
    for (int g = 0; g < 16; g++) {
        const int s = nearest_int(iscale * group_scale[g]);
        scales[g] = (int8_t)(s < 127 ? s : 127);
    }
    for (int g = 0; g < 16; g++) {
        const float d = get_f16(block + 208) * (float)scales[g];
        if (d == 0.0f) continue;  // (the group keeps make_qx_quants' codes)
        for (int i = 0; i < 16; i++) L[16 * g + i] = (uint8_t)(clamp_int(nearest_int(x[16 * g + i] / d), -32, 31) + 32);
    }
    for (int half = 0; half < 2; half++, ql += 64, qh += 32) {  // qk.h's Q6_K layout
        const uint8_t *q = L + 128 * half;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((q[l] & 0xf) | (q[l + 64] & 0xf) << 4);
            ql[l + 32] = (uint8_t)((q[l + 32] & 0xf) | (q[l + 96] & 0xf) << 4);
            qh[l] = (uint8_t)(q[l] >> 4 | (q[l + 32] >> 4) << 2 | (q[l + 64] >> 4) << 4 | (q[l + 96] >> 4) << 6);
        }
    }
}

// ---- Q4_K and Q5_K: 8 (scale, min) pairs of 32 weights under d and dmin ----------------------------------------

// Codes x[i] ≈ scale·L[i] − min, L in [0, nmax], min ≥ 0: from the range [min(x, 0), max(x)], then trial inverse
// scales (nmax + rmin + 0.1·k)/range, k = 0..steps, each with scale and min by weighted least squares (min clipped
// at 0), the one of least weighted squared error kept (ggml's make_qkx2_quants with rdelta 0.1: Q4_K's nmax 15,
// rmin −1, 20 steps; Q5_K's nmax 31, rmin −0.5, 15 steps).   x, w, L: [32]
static float k_group_scale(const float *x, const float *w, uint8_t *L, float *the_min, int nmax, float rmin,
                           int steps) {
    const int n = 32;
    float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min), scale = 1 / iscale, best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
        const float diff = scale * (float)L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (int step = 0; step <= steps; step++) {
        iscale = (rmin + 0.1f * (float)step + (float)nmax) / (max - min);
        uint8_t trial[32];
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            trial[i] = (uint8_t)clamp_int(nearest_int(iscale * (x[i] - min)), 0, nmax);
            const float l = (float)trial[i];
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D, this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) this_min = 0, this_scale = sum_xl / sum_l2;
        float error = 0.0f;
        for (int i = 0; i < n; i++) {
            const float diff = this_scale * (float)trial[i] + this_min - x[i];
            error += w[i] * (diff * diff);
        }
        if (error < best_error) {
            memcpy(L, trial, (size_t)n);
            best_error = error, scale = this_scale, min = this_min;
        }
    }
    *the_min = -min;
    return scale;
}

// Sub-block j's 6-bit scale and min in a Q4_K or Q5_K block's scales[12] (qk.h).
static void k_scale_min(const uint8_t *s, int j, int *scale, int *min) {
    if (j < 4) {
        *scale = s[j] & 63, *min = s[j + 4] & 63;
    } else {
        *scale = (s[j + 4] & 0xf) | (s[j - 4] >> 6) << 4;
        *min = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
    }
}

// The head of a Q4_K or Q5_K block — d, dmin (f16), scales[12] — for x, and the codes L[256] in [0, nmax] under the
// scales as stored (nmax 15, rmin −1, 20 steps for Q4_K; 31, −0.5, 15 for Q5_K).   x: [256]
static void quantize_k_head(uint8_t *block, uint8_t *L, const float *x, int nmax, float rmin, int steps) {
    uint8_t *s = block + 4;
    float scales[8], mins[8], max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        const float *xj = x + 32 * j;
        float sum_x2 = 0.0f, w[32];
        for (int l = 0; l < 32; l++) sum_x2 += xj[l] * xj[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(xj[l]);
        scales[j] = k_group_scale(xj, w, L + 32 * j, &mins[j], nmax, rmin, steps);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]), lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63, lm = lm < 63 ? lm : 63;
        if (j < 4) {
            s[j] = ls, s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xf) | (lm & 0xf) << 4);
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    put_f16(block, max_scale / 63.0f);
    put_f16(block + 2, max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k_scale_min(s, j, &sc, &m);
        const float d = get_f16(block) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = get_f16(block + 2) * (float)m;
        for (int l = 0; l < 32; l++)
            L[32 * j + l] = (uint8_t)clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax);
    }
}

// block: d, dmin (f16), scales[12], qs[128].   x: [256]
static void quantize_q4_k(uint8_t *block, const float *x) {
    uint8_t L[256], *qs = block + 16;
    quantize_k_head(block, L, x, 15, -1.0f, 20);
    for (int j = 0; j < 256; j += 64, qs += 32)  // sub-blocks 2i and 2i + 1: low nibbles, then high ones
        for (int l = 0; l < 32; l++) qs[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
}

// block: d, dmin (f16), scales[12], qh[32], qs[128]: Q4_K's nibbles, and the fifth bit of sub-block i's weight l
// as bit i of qh[l].   x: [256]
static void quantize_q5_k(uint8_t *block, const float *x) {
    uint8_t L[256], *qh = block + 16, *qs = block + 48;
    quantize_k_head(block, L, x, 31, -0.5f, 15);
    memset(qh, 0, 32);
    for (int j = 0; j < 256; j += 64, qs += 32)
        for (int l = 0; l < 32; l++) {
            const int low = L[j + l], high = L[j + l + 32], i = j / 32;
            qs[l] = (uint8_t)((low & 0xf) | (high & 0xf) << 4);
            qh[l] |= (uint8_t)((low >> 4) << i | (high >> 4) << (i + 1));
        }
}

// Each type's quantizer of one block, and the weights a block holds.
static const struct {
    uint32_t type;
    void (*quantize)(uint8_t *block, const float *x);
    size_t weights;
} QUANTIZERS[] = {{GGML_Q8_0, quantize_q8_0, 32}, {GGML_Q4_0, quantize_q4_0, 32}, {GGML_Q5_0, quantize_q5_0, 32},
                  {GGML_Q5_1, quantize_q5_1, 32}, {GGML_Q4_K, quantize_q4_k, 256}, {GGML_Q5_K, quantize_q5_k, 256},
                  {GGML_Q6_K, quantize_q6_k, 256}};
enum { N_QUANTIZERS = sizeof QUANTIZERS / sizeof *QUANTIZERS };

int gguf_quantizes(uint32_t type) {
    for (int i = 0; i < N_QUANTIZERS; i++)
        if (QUANTIZERS[i].type == type) return 1;
    return 0;
}

void gguf_quantize_row(uint8_t *out, const float *x, uint32_t type, size_t n) {
    for (int i = 0; i < N_QUANTIZERS; i++) {
        if (QUANTIZERS[i].type != type) continue;
        const size_t block = QUANTIZERS[i].weights, bytes = qk_row_bytes(type, block);
        for (size_t b = 0; b < n / block; b++, out += bytes, x += block) QUANTIZERS[i].quantize(out, x);
    }
}
