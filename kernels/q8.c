// q8.c — the 8-bit weight format (kernels.h, "8-bit weights"): quantizing weight panels at load and activation
// rows before each matmul, and the reference product that every variant's matmul_q8 reproduces bit for bit.
//
// Symmetric absmax quantization per block of 32: d = max|x| / 127, q = round(x / d) ∈ [−127, 127] (the one
// value −128 is left out, so that |q| fits the AVX2 and NEON multiply-adds and negating q never overflows).
#include <math.h>
#include <string.h>

#include "kernels.h"

// round(v) for |v| ≤ 2²², ties to even, in float arithmetic (adding 1.5 · 2²³ leaves no fraction bits), so that
// the loops below vectorize; v is first clamped to [−127, 127] by comparisons that send NaN to −127 (a NaN
// converted to int would be undefined).
static inline int8_t round_to_q(float v) {
    v = v > -127.0f ? v : -127.0f;
    v = v < 127.0f ? v : 127.0f;
    const float magic = 12582912.0f;
    return (int8_t)(int)((v + magic) - magic);
}

// The smallest BF16 value ≥ d (d ≥ 0, finite): a weight block's scale, rounded up so that |w| / scale ≤ 127.
static uint16_t bf16_round_up(float d) {
    uint32_t bits;
    memcpy(&bits, &d, sizeof bits);
    if (bits & 0xffff) bits += 0x10000;
    return (uint16_t)(bits >> 16);
}

void q8_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    const int nb = q8_blocks(n_in);
    memset(panel, 0, q8_panel_bytes(n_in));
    uint16_t *scales = (uint16_t *)(panel + (size_t)nb * Q8_BLOCK * Q8_PANEL);
    for (int r = 0; r < n_rows; r++) {
        const float *row = rows + (size_t)r * ld;
        for (int b = 0; b < nb; b++) {
            const int i0 = b * Q8_BLOCK, i1 = i0 + Q8_BLOCK < n_in ? i0 + Q8_BLOCK : n_in;
            float amax = 0.0f;
            for (int i = i0; i < i1; i++) amax = fabsf(row[i]) > amax ? fabsf(row[i]) : amax;
            const uint16_t scale = bf16_round_up(amax / 127.0f);
            const float d = bf16_to_f32(scale);
            scales[b * Q8_PANEL + r] = scale;
            for (int i = i0; i < i1 && d > 0.0f; i++)
                panel[q8_quant_index(n_in, r, i)] = (uint8_t)round_to_q(row[i] / d);
        }
    }
}

// One block of an activation row, v: [n ≤ 32], zero-padded to 32. Branch-free, so that it vectorizes: a matmul
// quantizes every input row it is given (T · n_in values) on one thread before the threads share the weights.
static void quantize_block(Q8Block *blk, const float *v, int n) {
    float x[Q8_BLOCK] = {0};
    memcpy(x, v, sizeof(float) * (size_t)n);
    float amax = 0.0f;
    for (int i = 0; i < Q8_BLOCK; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    blk->d = amax / 127.0f;
    const float d = blk->d > 0.0f ? blk->d : 1.0f;  // an all-zero block: q = 0 / 1
    int32_t sum = 0;
    for (int i = 0; i < Q8_BLOCK; i++) {
        blk->q[i] = round_to_q(x[i] / d);
        sum += blk->q[i];
    }
    blk->sum = sum;
}

void q8_quantize_rows(Q8Block *out, const float *x, int T, int n_in, int ld_x) {
    const int nb = q8_blocks(n_in);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++) {
            const int n = n_in - b * Q8_BLOCK < Q8_BLOCK ? n_in - b * Q8_BLOCK : Q8_BLOCK;
            quantize_block(&out[(size_t)t * nb + b], x + (size_t)t * ld_x + b * Q8_BLOCK, n);
        }
}

// out[t, j] = bias[j] + Σ_b fl(d_w[j, b] · d_x[t, b]) · Σ_i q_w[j, i] · q_x[t, i], the float sum over blocks in
// block order, each step one fused multiply-add (kernels.h).
void q8_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                         int ld_out, int j0, int j1) {
    const int nb = q8_blocks(n_in);
    const int8_t *quants = w;
    const uint16_t *scales = w;
    for (int j = j0; j < j1; j++)
        for (int t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                int32_t isum = 0;
                for (int i = 0; i < Q8_BLOCK; i++) isum += quants[q8_quant_index(n_in, j, b * Q8_BLOCK + i)] * xb->q[i];
                acc = fmaf((float)isum, bf16_to_f32(scales[q8_scale_index(n_in, j, b)]) * xb->d, acc);
            }
            out[(size_t)t * ld_out + j] = bias ? acc + bias[j] : acc;
        }
}
