// test_q5.c — GGUF's Q5_0, Q5_1 and Q4_1 blocks held as stored (kernels.h, "GGUF's Q5_0, Q5_1 and Q4_1, as
// stored"): the q5 panels' layout, the packing of a file's rows into them (every weight as llama.cpp dequantizes the
// file's block, bit for bit), and every variant's matmul_q5 against the reference, bit for bit, on fresh random
// inputs at T = 1..17 and at the bounds of the kernels' sums (quantized_checks.h; every [j0, j1), so also the
// batch-invariance test).
//
// `make test-neon` builds this file with kernels/ and the harness alone.
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_inputs.h"
#include "kernels.h"
#include "qk.h"
#include "quantized_checks.h"

// The F16 bits of d at b.
static void put_half(uint8_t *b, uint16_t bits) { b[0] = (uint8_t)bits, b[1] = (uint8_t)(bits >> 8); }

// A block of x [32] of `type` (GGML_Q5_0, Q5_1, Q4_1), llama.cpp's rules: Q5_0 as Q4_0's with 32 levels (v the
// weight of largest magnitude, d = v / −16, q = round(x / d) + 16 clamped to [0, 31]); Q5_1 and Q4_1 d = (max −
// min) / (levels − 1), m = min, q = round((x − m) / d) clamped — d and m F16 toward zero. The nibbles as Q4_0's,
// the fifth bits as bit k of the little-endian u32 before them. All zeros: d = 0, q = 16 (Q5_0) or 0.
static void quantize_block(uint8_t *block, const float *x, uint32_t type) {
    const bool mins = type != GGML_Q5_0, five = type != GGML_Q4_1;
    const int levels = five ? 32 : 16;
    float v = 0.0f, lo = x[0], hi = x[0];
    for (int i = 0; i < Q8_BLOCK; i++) {
        v = fabsf(x[i]) > fabsf(v) ? x[i] : v;
        lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
    }
    const uint16_t d_bits = mins        ? f16_toward_zero((hi - lo) / (float)(levels - 1))
                            : v != 0.0f ? f16_toward_zero(v / -16.0f)
                                        : 0;
    const uint16_t m_bits = f16_toward_zero(lo);
    const float d = f16_to_f32(d_bits), m = mins ? f16_to_f32(m_bits) : 0.0f;
    memset(block, 0, qk_row_bytes(type, Q8_BLOCK));
    put_half(block, d_bits);
    if (mins) put_half(block + 2, m_bits);
    uint8_t *qh = block + (mins ? 4 : 2), *qs = qh + (five ? 4 : 0);
    for (int i = 0; i < Q8_BLOCK; i++) {
        const float q = d != 0.0f ? rintf((x[i] - m) / d) + (mins ? 0.0f : 16.0f) : mins ? 0.0f : 16.0f;
        const int u = (int)(q < 0.0f ? 0.0f : q > (float)(levels - 1) ? (float)(levels - 1) : q);
        qs[i % 16] |= (uint8_t)((u & 0xf) << (i < 16 ? 0 : 4));
        if (five) qh[i / 8] |= (uint8_t)((u >> 4) << i % 8);
    }
}

// The bound on the reference's error (quantized_checks.h's held_weight_bound), plus, for the formats with mins, the
// rounding of the two products each block adds apart: d·Σ q·q_x, as large as Σ |x| |ŵ − m|, and m·Σ q_x.
static double q5_bound(WeightType type, const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in,
                       int j, double bias) {
    double bound = held_weight_bound(type, x, xq, w, wq, n_in, j, bias);
    for (int i = 0; i < n_in && block_mins(type); i++) {
        const double m = f16_to_f32(((const uint16_t *)wq)[q5_min_index(type, n_in, j, i / Q8_BLOCK)]);
        bound += (n_in + 4) * FLT_EPSILON * fabs(x[i]) * (fabs(quantized_weight(wq, type, n_in, j, i) - m) + fabs(m));
    }
    return bound;
}

// Each type's QuantFormat functions, the q5 layout's with the type fixed.
#define Q5_FORMAT(name, TYPE, GGML)                                                                                  \
    static size_t name##_matrix_bytes(int n_out, int n_in) { return quantized_matrix_bytes(TYPE, n_out, n_in); }    \
    static size_t name##_panel_bytes(int n_in) { return q5_panel_bytes(TYPE, n_in); }                               \
    static size_t name##_quant_index(int n_in, int j, int i) { return q5_quant_index(TYPE, n_in, j, i); }          \
    static size_t name##_scale_index(int n_in, int j, int b) { return q5_scale_index(TYPE, n_in, j, b); }          \
    static void name##_block(uint8_t *block, const float *x) { quantize_block(block, x, GGML); }                    \
    static void name##_pack_row(uint8_t *panel, int r, const uint8_t *blocks, int n_in) {                           \
        q5_pack_row(panel, TYPE, r, blocks, n_in);                                                                   \
    }                                                                                                                \
    static void name##_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {            \
        gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q5_panel_bytes(TYPE, n_in),                              \
                            (int)qk_row_bytes(GGML, Q8_BLOCK), name##_block, name##_pack_row);                      \
    }                                                                                                                \
    static double name##_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,  \
                               double bias) {                                                                        \
        return q5_bound(TYPE, x, xq, w, wq, n_in, j, bias);                                                          \
    }

Q5_FORMAT(q5_0, WEIGHT_Q5_0, GGML_Q5_0)
Q5_FORMAT(q5_1, WEIGHT_Q5_1, GGML_Q5_1)
Q5_FORMAT(q4_1, WEIGHT_Q4_1, GGML_Q4_1)

static size_t q5_1_min_index(int n_in, int j, int b) { return q5_min_index(WEIGHT_Q5_1, n_in, j, b); }
static size_t q4_1_min_index(int n_in, int j, int b) { return q5_min_index(WEIGHT_Q4_1, n_in, j, b); }

static unsigned nibbles(int i) { return i % 32 < 16 ? 1 : 2; }

#define FORMAT(NAME, fn, TYPE, MIN_INDEX)                                                                          \
    {.name = NAME, .type = TYPE, .block_bytes = Q5_NIBBLE_BYTES, .matrix_bytes = fn##_matrix_bytes,              \
     .panel_bytes = fn##_panel_bytes, .quant_index = fn##_quant_index, .quant_nibbles = nibbles,                \
     .scale_index = fn##_scale_index, .min_index = MIN_INDEX, .quantize_panel = fn##_quantize_panel,            \
     .reference_bound = fn##_bound}

static const QuantFormat FORMATS[] = {FORMAT("q5_0", q5_0, WEIGHT_Q5_0, NULL),
                                      FORMAT("q5_1", q5_1, WEIGHT_Q5_1, q5_1_min_index),
                                      FORMAT("q4_1", q4_1, WEIGHT_Q4_1, q4_1_min_index)};
enum { N_FORMATS = sizeof FORMATS / sizeof *FORMATS };

static uint32_t ggml_of(WeightType type) {
    return type == WEIGHT_Q5_0 ? GGML_Q5_0 : type == WEIGHT_Q5_1 ? GGML_Q5_1 : GGML_Q4_1;
}

// The packing: every weight of a file's rows is in the panel what llama.cpp's dequantization of the file's block
// says (qk_dequantize_row; Q5_1's and Q4_1's fl(fl(d·q) + m)), bit for bit; padding rows all-zero blocks; the
// quants reach both ends of their range.
TEST(kernels_q5_packing_keeps_the_file_s_blocks) {
    const int n_out = 13, n_in = 96, nb = n_in / 32;
    float *rows = random_floats(n_out * n_in, -1.0f, 1.0f);
    for (int c = 0; c < N_FORMATS; c++) {
        const QuantFormat *f = &FORMATS[c];
        void *w = NULL;
        if (posix_memalign(&w, 64, f->matrix_bytes(n_out, n_in))) abort();
        f->quantize_panel(w, rows, n_out, n_in, n_in);
        const int top = fifth_bits(f->type) ? 31 : 15;
        bool saw_low = false, saw_high = false;
        for (int j = 0; j < Q8_PANEL; j++)
            for (int b = 0; b < nb; b++) {
                const float zeros[32] = {0};  // padding rows: all-zero blocks
                uint8_t block[24];
                float want[32];
                quantize_block(block, j < n_out ? rows + (size_t)j * n_in + b * 32 : zeros, ggml_of(f->type));
                qk_dequantize_row(want, block, ggml_of(f->type), 32);
                for (int i = 0; i < 32; i++) {
                    const float got = quantized_weight(w, f->type, n_in, j, b * 32 + i);
                    CHECK(memcmp(&want[i], &got, sizeof got) == 0, "%s W[%d, %d] = %.9g, the file's %.9g", f->name, j,
                          b * 32 + i, got, want[i]);
                    const int q = q5_quant(w, f->type, n_in, j, b * 32 + i) + (f->type == WEIGHT_Q5_0 ? 16 : 0);
                    saw_low |= j < n_out && q == 0, saw_high |= q == top;
                }
            }
        CHECK(saw_low && saw_high, "%s: the ends of its quants not met", f->name);
        free(w);
    }
    free(rows);
}

// The q5 panels: every nibble and scale placed once (check_quantized_layout), and every fifth bit and min once,
// inside the matrix, in a byte no nibble or scale takes: a fifth bit inside its block's run of quants, at bit
// i % 32 / 4 of the byte where a q8 group would hold input i % 4 of its row.
TEST(kernels_q5_layout) {
    for (int c = 0; c < N_FORMATS; c++) {
        const QuantFormat *f = &FORMATS[c];
        check_quantized_layout(f);
        const int shapes[][2] = {{1, 1}, {17, 100}, {40, 768}};
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
            const int n_out = shapes[s][0], n_in = shapes[s][1], nb = q8_blocks(n_in), rows = (n_out + 15) / 16 * 16;
            const size_t size = f->matrix_bytes(n_out, n_in);
            uint8_t *taken = calloc(size, 1);  // the bits a fifth bit holds; 0xff: a nibble's, scale's or min's
            for (int j = 0; j < rows; j++)
                for (int i = 0; i < nb * 32; i++) {
                    taken[f->quant_index(n_in, j, i)] = 0xff;
                    const size_t scale = 2 * f->scale_index(n_in, j, i / 32);
                    taken[scale] = taken[scale + 1] = 0xff;
                }
            for (int j = 0; j < rows && f->min_index; j++)
                for (int b = 0; b < nb; b++) {
                    const size_t at = 2 * f->min_index(n_in, j, b);
                    CHECK(at + 1 < size && !taken[at] && !taken[at + 1],
                          "%s [%d, %d]: the min of row %d block %d at %zu", f->name, n_out, n_in, j, b, at);
                    if (at + 1 < size) taken[at] = taken[at + 1] = 0xff;
                }
            for (int j = 0; j < rows && fifth_bits(f->type); j++)
                for (int i = 0; i < nb * 32; i++) {
                    const size_t at = q5_high_index(f->type, n_in, j, i),
                                 block = f->quant_index(n_in, j / 16 * 16, i / 32 * 32),
                                 end = block + (size_t)q5_block_bytes(f->type);
                    const uint8_t bit = (uint8_t)(1u << (i % 32 / 4));
                    CHECK(at < size && at >= block && at < end && !(taken[at] & bit),
                          "%s [%d, %d]: the fifth bit of [%d, %d] at byte %zu bit %d", f->name, n_out, n_in, j, i, at,
                          i % 32 / 4);
                    if (at < size) taken[at] |= bit;
                }
            free(taken);
        }
    }
}

// Every variant's matmul_q5 against the reference, bit for bit, and the reference against the float product, at
// every T = 1..17 (the AVX2 and AVX-512 walks' passes of 8 rows, and AVX-512's pairs of panels at T = 1, meet every
// remainder) and two widths, with and without bias.
TEST(kernels_q5_matmul_matches_reference) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    static const int N_IN[] = {33, 2 * 768 + 5};
    for (int c = 0; c < N_FORMATS; c++)
        for (int v = 0; v < n; v++) {
            CHECK(format_matmul(&FORMATS[c], list[v]), "%s: no matmul for %s", list[v]->name, FORMATS[c].name);
            for (int a = 0; a < 2 && format_matmul(&FORMATS[c], list[v]); a++)
                for (int T = 1; T <= 17; T++) check_quantized_matmul(&FORMATS[c], list[v], T, N_IN[a], (T + a) % 2);
        }
}

// At the bounds of the kernels' sums (test_q8.c, test_q4.c), scales and mins 1: every bit of the quants 0 (Q5_0's
// q − 16 = −16, its weight of largest magnitude) and every bit 1 (u = 31 or 15, vpmaddubsw's largest unsigned
// factor).
TEST(kernels_q5_matmul_at_the_bounds_of_their_sums) {
    for (int c = 0; c < N_FORMATS; c++) {
        check_quantized_matmul_at_bounds(&FORMATS[c], 0x00, 0x3c00);
        check_quantized_matmul_at_bounds(&FORMATS[c], 0xff, 0x3c00);
    }
}

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI runs the avx512 variant with AVX2's q5 matmuls (dispatch.c).
TEST(kernels_q5_avx512_without_vnni) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    if (strcmp(list[n - 1]->name, "avx512") != 0) return;  // no AVX-512 on this CPU
    for (int c = 0; c < N_FORMATS; c++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            const int i = FORMATS[c].type - WEIGHT_Q5_0;
            CHECK(kernels_avx512_for(false, bf16)->matmul_q5[i] == kernels_avx2.matmul_q5[i] &&
                      kernels_avx512_for(true, bf16)->matmul_q5[i] == kernels_avx512.matmul_q5[i],
                  "%s bf16=%d: not AVX2's matmul without VNNI, AVX-512's with it", FORMATS[c].name, bf16);
        }
    for (int c = 0; c < N_FORMATS; c++)
        for (int T = 1; T <= 9; T++)
            check_quantized_matmul(&FORMATS[c], kernels_avx512_for(false, false), T, 100, T % 2);
}
#endif
