// q8.c — the 8-bit weight format (kernels.h, "8-bit weights"): quantizing weight panels at load and activation
// rows before each matmul, and the reference product that every variant's matmul_q8 reproduces bit for bit.
//
// Symmetric absmax quantization per block of 32: d = max|x| / 127, q = round(x / d) ∈ [−127, 127] (the one
// value −128 is left out, so that |q| fits the AVX2 and NEON multiply-adds and negating q never overflows). An
// all-zero block has d = 0 and q = 0.
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "qk.h"

// round(v), ties to even, clamped to [−127, 127], in arithmetic that vectorizes and has no undefined case:
// adding 1.5 · 2²³ leaves round(v) in the low bits of the sum's mantissa (exactly, for |v| ≤ 2²²), read off as
// the difference of the bit patterns (taken modulo 2³²); a larger |v|, an infinity or a NaN gives a difference
// outside [−127, 127] that the clamp sends to a bound. (A NaN converted to int would be undefined.)
static const float ROUNDING = 12582912.0f;  // 1.5 · 2²³, bit pattern 0x4b400000

static inline int8_t round_to_q(float v) {
    const float sum = v + ROUNDING;
    uint32_t bits;
    memcpy(&bits, &sum, sizeof bits);
    int32_t q = (int32_t)(bits - 0x4b400000u);
    q = q > -127 ? q : -127;
    return (int8_t)(q < 127 ? q : 127);
}

// The smallest BF16 value ≥ d (d ≥ 0): a weight block's scale, rounded up so that |w| / scale ≤ 127.
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
            const uint16_t scale = bf16_round_up(max_magnitude(row + i0, i1 - i0) / 127.0f);
            const float d = bf16_to_f32(scale) > 0.0f ? bf16_to_f32(scale) : 1.0f;  // all zeros: q = 0 / 1
            scales[b * Q8_PANEL + r] = scale;
            int8_t q[Q8_BLOCK] = {0};
            for (int i = i0; i < i1; i++) q[i - i0] = round_to_q(row[i] / d);
            for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++)  // the 4 inputs of a group lie side by side
                memcpy(panel + q8_quant_index(n_in, r, i0 + g * Q8_GROUP), q + g * Q8_GROUP, Q8_GROUP);
        }
    }
}

// One block of an activation row, v: [n ≤ 32], zero-padded to 32. Branch-free, so that it vectorizes: a matmul
// quantizes every input row it is given (T · n_in values) on one thread before the threads share the weights.
static void quantize_block(Q8Block *blk, const float *v, int n) {
    float x[Q8_BLOCK] = {0};
    memcpy(x, v, sizeof(float) * (size_t)n);
    blk->d = max_magnitude(x, Q8_BLOCK) / 127.0f;
    const float d = blk->d > 0.0f ? blk->d : 1.0f;  // an all-zero block: q = 0 / 1
    int32_t sum = 0;
    for (int i = 0; i < Q8_BLOCK; i++) {
        blk->q[i] = round_to_q(x[i] / d);
        sum += blk->q[i];
    }
    blk->offset = -128 * sum;
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
// block order, each step one fused multiply-add (kernels.h); for Q5_1 and Q4_1 (w = d·q + m) each block's second
// step adds m_w[j, b] · fl(d_x[t, b] · Σ_i q_x[t, i]), by one more. The formats differ only in where q_w and d_w lie
// and in d_w's type (BF16, or F16 for GGUF's blocks).
void quantized_matmul_reference(float *out, const Q8Block *x, const void *w, WeightType type, const float *bias,
                                int T, int n_in, int ld_out, int j0, int j1) {
    const int nb = q8_blocks(n_in);
    const uint16_t *scales = w;
    for (int j = j0; j < j1; j++)
        for (int t = 0; t < T; t++) {
            float acc = 0.0f;
            for (int b = 0; b < nb; b++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                int32_t isum = 0;
                for (int i = b * Q8_BLOCK; i < (b + 1) * Q8_BLOCK; i++)
                    isum += scaled_quant(w, type, n_in, j, i) * xb->q[i % Q8_BLOCK];
                const uint16_t d_w = scales[scaled_scale_index(type, n_in, j, b)];
                acc = fmaf((float)isum, (f16_scales(type) ? f16_to_f32(d_w) : bf16_to_f32(d_w)) * xb->d, acc);
                if (block_mins(type))  // Σ q_x = offset / −128
                    acc = fmaf(f16_to_f32(scales[q5_min_index(type, n_in, j, b)]), xb->d * (float)(xb->offset / -128),
                               acc);
            }
            out[(size_t)t * ld_out + j] = bias ? acc + bias[j] : acc;
        }
}

void q8_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                         int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q8, bias, T, n_in, ld_out, j0, j1);
}

void q8_0_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q8_0, bias, T, n_in, ld_out, j0, j1);
}

void q4_0_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q4_0, bias, T, n_in, ld_out, j0, j1);
}

void q5_0_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q5_0, bias, T, n_in, ld_out, j0, j1);
}

void q5_1_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q5_1, bias, T, n_in, ld_out, j0, j1);
}

void q4_1_matmul_reference(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    quantized_matmul_reference(out, x, w, WEIGHT_Q4_1, bias, T, n_in, ld_out, j0, j1);
}

// ---- GGUF's Q8_0, Q4_0, Q5_0, Q5_1 and Q4_1 blocks into panels (kernels.h) ----------------------------------

// A block: its F16 scale, then its quants.
enum { Q8_0_BYTES = 2 + Q8_BLOCK, Q4_0_BYTES = 2 + Q4_BLOCK / 2 };

void q8_0_pack_row(uint8_t *panel, int r, const uint8_t *blocks, int n_in) {
    uint16_t *scales = (uint16_t *)panel;
    for (int b = 0; b < q8_blocks(n_in); b++) {
        const uint8_t *block = blocks + (size_t)b * Q8_0_BYTES;
        scales[q8_scale_index(n_in, r, b)] = (uint16_t)(block[0] | block[1] << 8);
        for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++)  // each group of 4 inputs is 4 consecutive bytes
            memcpy(panel + q8_quant_index(n_in, r, b * Q8_BLOCK + g * Q8_GROUP), block + 2 + g * Q8_GROUP, Q8_GROUP);
    }
}

// A Q4_0 block's nibbles (qk.h) at `nibbles`, or a Q5_0 block's, into row r of the panel's block whose nibbles
// begin at `block` (q4's layout, which the q5 panels share): bytes 4l..4l+3 hold inputs 4l.. in their low nibbles
// and 16 + 4l.. in their high ones, as line l of the panel's block holds them for row r.
static void nibbles_into_panel(uint8_t *block, int r, const uint8_t *nibbles) {
    for (int l = 0; l < 4; l++) memcpy(block + 64 * l + 4 * r, nibbles + 4 * l, 4);
}

void q4_0_pack_row(uint8_t *panel, int r, const uint8_t *blocks, int n_in) {
    uint16_t *scales = (uint16_t *)panel;
    for (int b = 0; b < q4_blocks(n_in); b++) {
        const uint8_t *block = blocks + (size_t)b * Q4_0_BYTES;
        scales[q4_scale_index(n_in, r, b)] = (uint16_t)(block[0] | block[1] << 8);
        nibbles_into_panel(panel + q4_quant_index(n_in, 0, b * Q4_BLOCK), r, block + 2);
    }
}

// A Q5_0 block (qk.h): F16 d, a little-endian u32 whose bit i is input i's fifth bit, 16 bytes of nibbles; Q5_1:
// F16 d and m, then Q5_0's; Q4_1: F16 d and m, then the nibbles. The fifth bits go to the block's last line, input
// 4g + k's to bit g of byte 4r + k (kernels.h).
void q5_pack_row(uint8_t *panel, WeightType type, int r, const uint8_t *blocks, int n_in) {
    const uint32_t ggml = type == WEIGHT_Q5_0 ? GGML_Q5_0 : type == WEIGHT_Q5_1 ? GGML_Q5_1 : GGML_Q4_1;
    const size_t block_bytes = qk_row_bytes(ggml, Q8_BLOCK);
    const int halves = block_mins(type) ? 2 : 1;  // the F16 values before the quants: d (and m)
    uint16_t *scales = (uint16_t *)panel;
    for (int b = 0; b < q8_blocks(n_in); b++) {
        const uint8_t *block = blocks + (size_t)b * block_bytes, *qh = block + 2 * halves;  // (Q5_0, Q5_1)
        scales[q5_scale_index(type, n_in, r, b)] = (uint16_t)(block[0] | block[1] << 8);
        if (block_mins(type)) scales[q5_min_index(type, n_in, r, b)] = (uint16_t)(block[2] | block[3] << 8);
        const uint8_t *nibbles = block + 2 * halves + (fifth_bits(type) ? 4 : 0);
        nibbles_into_panel(panel + q5_quant_index(type, n_in, 0, b * Q8_BLOCK), r, nibbles);
        if (!fifth_bits(type)) continue;
        uint8_t *high = panel + q5_high_index(type, n_in, r, b * Q8_BLOCK);
        for (int k = 0; k < Q8_GROUP; k++) {  // input 4g + k's bit: bit 4 · (g % 2) + k of qh[g / 2]
            high[k] = 0;
            for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++)
                high[k] |= (uint8_t)((qh[g / 2] >> (4 * (g % 2) + k) & 1) << g);
        }
    }
}
