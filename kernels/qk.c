// qk.c — dequantizing GGUF's quantized blocks (qk.h has the layouts), written from the formats' definitions.
#include "qk.h"

#include <stdbool.h>
#include <stdlib.h>

#include "kernels.h"

static uint16_t half_bits(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

static float half(const uint8_t *p) { return f16_to_f32(half_bits(p)); }

// Q8_0: w = d·q.
static void q8_0_block(float *out, const uint8_t *b) {
    const float d = half(b);
    for (int j = 0; j < 32; j++) out[j] = d * (float)(int8_t)b[2 + j];
}

// Q4_0: w = d·(nibble − 8), low nibbles the first 16 weights.
static void q4_0_block(float *out, const uint8_t *b) {
    const float d = half(b);
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)((b[2 + j] & 0xF) - 8);
        out[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

// Q4_1 (qh NULL), Q5_0 (no min) and Q5_1: q = the nibble of qs (weight j's low, weight j + 16's high) with, for the
// 5-bit types, bit j of the little-endian u32 qh on top; w = d·(q − offset) (Q5_0: offset 16), or d·q + m.
static void low_bits_block(float *out, float d, const float *m, const uint8_t *qh, const uint8_t *qs, int offset) {
    const uint32_t high = qh ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;
    for (int j = 0; j < 32; j++) {
        const int q = (j < 16 ? qs[j] & 0xF : qs[j - 16] >> 4) | (int)(high >> j & 1) << 4;
        out[j] = m ? d * (float)q + *m : d * (float)(q - offset);
    }
}

static void q4_1_block(float *out, const uint8_t *b) {
    const float m = half(b + 2);
    low_bits_block(out, half(b), &m, NULL, b + 4, 0);
}

static void q5_0_block(float *out, const uint8_t *b) { low_bits_block(out, half(b), NULL, b + 2, b + 6, 16); }

static void q5_1_block(float *out, const uint8_t *b) {
    const float m = half(b + 2);
    low_bits_block(out, half(b), &m, b + 4, b + 8, 0);
}

// The 6-bit scale and min of sub-block s (of 8) from a K-block's 12 bytes: s < 4 in the low 6 bits of bytes s and
// s + 4; s ≥ 4 in the nibbles of byte s + 4, their top 2 bits in the top bits of bytes s − 4 (scale) and s (min).
static void scale_min(const uint8_t *scales, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = scales[s] & 63;
        *min = scales[s + 4] & 63;
    } else {
        *scale = (scales[s + 4] & 0xF) | (scales[s - 4] >> 6) << 4;
        *min = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
    }
}

// A K-block's integers and F16 scales, as the format defines them.
typedef struct {
    uint8_t q[256];   // the quants: [0, 15] (Q4_K), [0, 31] (Q5_K), [0, 63] (Q6_K)
    int scale[16];    // per sub-block: 8 of 32 weights (Q4_K, Q5_K, in [0, 63]), 16 of 16 (Q6_K, int8)
    int min[8];       // per sub-block of 32 (Q4_K, Q5_K)
    uint16_t d, dmin; // F16 bits (dmin: Q4_K, Q5_K)
} KBlock;

// Q4_K (qh NULL) and Q5_K: sub-blocks 2i and 2i + 1 share qs[32i .. 32i + 32), low nibbles then high ones; Q5_K's
// fifth bit of weight l of sub-block s is bit s of qh[l].
static void k_block_integers(KBlock *k, const uint8_t *b, const uint8_t *qh, const uint8_t *qs) {
    k->d = half_bits(b), k->dmin = half_bits(b + 2);
    for (int s = 0; s < 8; s++) {
        scale_min(b + 4, s, &k->scale[s], &k->min[s]);
        const uint8_t *q = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++)
            k->q[32 * s + l] = (uint8_t)((s % 2 ? q[l] >> 4 : q[l] & 0xF) | (qh ? (qh[l] >> s & 1) << 4 : 0));
    }
}

// Q6_K: in each half of 128 weights, l < 32, the weights l, l + 32, l + 64, l + 96 take the low nibble of ql[l], of
// ql[l + 32], the high nibble of ql[l], of ql[l + 32], and bits 0–1, 2–3, 4–5, 6–7 of qh[l]; weight n's scale is
// scales[n / 16].
static void q6_k_block_integers(KBlock *k, const uint8_t *b) {
    const uint8_t *ql = b, *qh = b + 128;
    for (int h = 0; h < 2; h++, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const int q[4] = {(ql[l] & 0xF) | (qh[l] & 3) << 4, (ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4,
                              (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4, (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4};
            for (int c = 0; c < 4; c++) k->q[128 * h + 32 * c + l] = (uint8_t)q[c];
        }
    for (int s = 0; s < 16; s++) k->scale[s] = (int8_t)b[192 + s];
    k->d = half_bits(b + 208), k->dmin = 0;
}

// The K-block of `type` (GGML_Q4_K, Q5_K, Q6_K) at b.
static void k_block_read(KBlock *k, uint32_t type, const uint8_t *b) {
    if (type == GGML_Q6_K) q6_k_block_integers(k, b);
    else k_block_integers(k, b, type == GGML_Q5_K ? b + 16 : NULL, b + (type == GGML_Q5_K ? 48 : 16));
}

// out [256]: Q4_K and Q5_K w = (d·scale_s)·q − dmin·min_s; Q6_K w = (d·scale)·(q − 32).
static void k_block_dequantize(float *out, uint32_t type, const uint8_t *b) {
    KBlock k;
    k_block_read(&k, type, b);
    const float d = f16_to_f32(k.d), dmin = f16_to_f32(k.dmin);
    for (int n = 0; n < 256; n++)
        out[n] = type == GGML_Q6_K ? d * (float)k.scale[n / 16] * (float)(k.q[n] - 32)
                                   : d * (float)k.scale[n / 32] * (float)k.q[n] - dmin * (float)k.min[n / 32];
}

int qk_reads(uint32_t type) {
    return type == GGML_Q8_0 || type == GGML_Q4_0 || type == GGML_Q4_1 || type == GGML_Q5_0 || type == GGML_Q5_1 ||
           type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
}

size_t qk_row_bytes(uint32_t type, size_t n) {
    switch (type) {
    case GGML_Q8_0: return n / 32 * 34;
    case GGML_Q4_0: return n / 32 * 18;
    case GGML_Q4_1: return n / 32 * 20;
    case GGML_Q5_0: return n / 32 * 22;
    case GGML_Q5_1: return n / 32 * 24;
    case GGML_Q4_K: return n / 256 * 144;
    case GGML_Q5_K: return n / 256 * 176;
    case GGML_Q6_K: return n / 256 * 210;
    }
    abort();
}

void qk_dequantize_row(float *out, const uint8_t *blocks, uint32_t type, size_t n) {
    // the blocks of 32 weights, by type
    static void (*const block_32[])(float *out, const uint8_t *b) = {
        [GGML_Q4_0] = q4_0_block, [GGML_Q4_1] = q4_1_block, [GGML_Q5_0] = q5_0_block, [GGML_Q5_1] = q5_1_block,
        [GGML_Q8_0] = q8_0_block,
    };
    if (!qk_reads(type)) abort();  // a caller that did not check qk_reads
    const bool k = type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
    const size_t weights = k ? 256 : 32, bytes = qk_row_bytes(type, weights);
    for (size_t i = 0; i < n / weights; i++) {
        if (k) k_block_dequantize(out + weights * i, type, blocks + bytes * i);
        else block_32[type](out + weights * i, blocks + bytes * i);
    }
}

// ---- K-panels (kernels.h, "GGUF's K-quants, as stored") ----------------------------------------------------

static uint32_t ggml_type_of(WeightType type) {
    return type == WEIGHT_Q4_K ? GGML_Q4_K : type == WEIGHT_Q5_K ? GGML_Q5_K : GGML_Q6_K;
}

void k_pack_row(uint8_t *panel, WeightType type, int r, const uint8_t *blocks, int n_in) {
    const uint32_t ggml = ggml_type_of(type);
    for (int s = 0; s < n_in / K_SUPER; s++) {
        KBlock k;
        k_block_read(&k, ggml, blocks + qk_row_bytes(ggml, K_SUPER) * (size_t)s);
        uint8_t *super = panel + k_super_offset(type, n_in, r, s);
        super[0] = (uint8_t)k.d, super[1] = (uint8_t)(k.d >> 8);
        uint32_t tops = 0;  // Q4_K, Q5_K: each block's top 2 bits of sc and m
        for (int c = 0; c < K_BLOCKS; c++) {
            const int b = s * K_BLOCKS + c;
            const uint8_t *q = k.q + 32 * c;
            uint8_t *scales = panel + k_scale_offset(type, n_in, r, b);
            if (type == WEIGHT_Q6_K) {
                scales[0] = (uint8_t)k.scale[2 * c], scales[1] = (uint8_t)k.scale[2 * c + 1];
            } else {
                scales[0] = (uint8_t)((k.scale[c] & 0xf) | (k.min[c] & 0xf) << 4);
                tops |= (uint32_t)(k.scale[c] >> 4 | k.min[c] >> 4 << 2) << 4 * c;
            }
            for (int l = 0; l < 16; l++)  // Q4_K's q, Q5_K's and Q6_K's low 4 bits
                panel[k_quant_offset(type, r, b * 32 + l)] = (uint8_t)((q[l] & 0xf) | (q[l + 16] & 0xf) << 4);
            for (int l = 0; l < 32 && type != WEIGHT_Q4_K; l += type == WEIGHT_Q6_K ? 16 : 32)  // the top bits
                for (int m = 0; m < Q8_GROUP; m++) {  // of inputs l + m + 4g at bits k_high_shift of one byte
                    uint8_t high = 0;
                    for (int g = 0; g < (type == WEIGHT_Q6_K ? 4 : 8); g++)
                        high |= (uint8_t)(q[l + m + 4 * g] >> 4 << k_high_shift(type, l + m + 4 * g));
                    panel[k_high_offset(type, r, b * 32 + l + m)] = high;
                }
        }
        if (type == WEIGHT_Q6_K) continue;
        super[32] = (uint8_t)k.dmin, super[33] = (uint8_t)(k.dmin >> 8);
        uint8_t *t = panel + k_tops_offset(type, n_in, r, s);
        for (int byte = 0; byte < 4; byte++) t[byte] = (uint8_t)(tops >> 8 * byte);
    }
}

// The reference product (kernels.h): per block, acc = fma(Σ, fl(d·sc · d_x), acc) (Q6_K: each half's), and for Q4_K
// and Q5_K acc = fma(−dmin·m, fl(d_x · Σ q_x), acc); then + bias.
static void k_matmul_reference(float *out, const Q8Block *x, const void *w, WeightType type, const float *bias, int T,
                               int n_in, int ld_out, int j0, int j1) {
    const int nb = q8_blocks(n_in);
    const size_t panel_bytes = k_panel_bytes(type, n_in);
    for (int j = j0; j < j1; j++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)(j / Q8_PANEL) * panel_bytes;
        const int r = j % Q8_PANEL;
        for (int t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                int scales[2];  // (sc, m) or (sc_lo, sc_hi)
                k_row_scales(scales, panel, type, n_in, r, b);
                const uint8_t *super = panel + k_super_offset(type, n_in, r, b / K_BLOCKS);
                int32_t half_sums[2] = {0, 0}, x_sum = 0;  // Σ q_w · q_x over inputs 0..15 and 16..31; Σ q_x
                for (int i = 0; i < Q8_BLOCK; i++) {
                    const int q = k_quant_at(panel, type, r, b * Q8_BLOCK + i);
                    half_sums[i / 16] += q * xb->q[i];
                    x_sum += xb->q[i];
                }
                const float d = f16_to_f32(half_bits(super));
                if (type == WEIGHT_Q6_K) {
                    acc = fmaf((float)half_sums[0], d * (float)scales[0] * xb->d, acc);
                    acc = fmaf((float)half_sums[1], d * (float)scales[1] * xb->d, acc);
                    continue;
                }
                acc = fmaf((float)(half_sums[0] + half_sums[1]), d * (float)scales[0] * xb->d, acc);
                acc = fmaf(-(f16_to_f32(half_bits(super + 32)) * (float)scales[1]), xb->d * (float)x_sum, acc);
            }
            out[(size_t)t * ld_out + j] = bias ? acc + bias[j] : acc;
        }
    }
}

void q4_k_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    k_matmul_reference(out, x, w, WEIGHT_Q4_K, bias, T, n_in, ld_out, j0, j1);
}

void q5_k_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    k_matmul_reference(out, x, w, WEIGHT_Q5_K, bias, T, n_in, ld_out, j0, j1);
}

void q6_k_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    k_matmul_reference(out, x, w, WEIGHT_Q6_K, bias, T, n_in, ld_out, j0, j1);
}
