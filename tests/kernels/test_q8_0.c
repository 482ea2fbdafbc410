// test_q8_0.c — GGUF's Q8_0, Q4_0 and Q5_0 blocks held as stored (kernels.h, "GGUF's Q8_0 and Q4_0", "GGUF's Q5_0"):
// the packing of a file's rows into q8's, q4's and q5's panels (quants and F16 scale bits unchanged), and every
// variant's matmul_q8_0, matmul_q4_0 and matmul_q5_0 against the reference, bit for bit, on fresh random inputs of
// awkward sizes (quantized_checks.h: at every T and every [j0, j1), so also the batch-invariance test).
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

// A block: F16 d, then 32 int8 quants, 16 bytes of nibbles, or (Q5_0) a u32 of fifth bits and 16 bytes of nibbles.
enum { Q8_0_BYTES = 34, Q4_0_BYTES = 18, Q5_0_BYTES = 22 };

// A Q8_0 block of x [32]: d = max|x| / 127.5 as F16 toward zero, q = round(x / d) clamped to [−128, 127] — so that
// a block whose weight of largest magnitude is negative holds −128, which llama.cpp's own quantizer never writes
// but a file may hold (kernels.h). All zeros: d = 0, q = 0.
static void q8_0_quantize_block(uint8_t *block, const float *x) {
    const float amax = max_magnitude(x, Q8_BLOCK);
    const uint16_t d_bits = amax > 0.0f ? f16_toward_zero(amax / 127.5f) : 0;
    const float d = f16_to_f32(d_bits);
    block[0] = (uint8_t)d_bits, block[1] = (uint8_t)(d_bits >> 8);
    for (int i = 0; i < Q8_BLOCK; i++) {
        const float q = d > 0.0f ? rintf(x[i] / d) : 0.0f;
        block[2 + i] = (uint8_t)(int8_t)(q < -128.0f ? -128.0f : q > 127.0f ? 127.0f : q);
    }
}

// A Q4_0 block of x [32], llama.cpp's rule: v the weight of largest magnitude, d = v / −8 (F16 toward zero),
// u = round(x / d) + 8 clamped to [0, 15]; weight k in the low nibble of byte k, weight k + 16 in its high one.
static void q4_0_quantize_block(uint8_t *block, const float *x) {
    float v = 0.0f;
    for (int i = 0; i < Q4_BLOCK; i++) v = fabsf(x[i]) > fabsf(v) ? x[i] : v;
    const uint16_t d_bits = v != 0.0f ? f16_toward_zero(v / -8.0f) : 0;
    const float d = f16_to_f32(d_bits);
    block[0] = (uint8_t)d_bits, block[1] = (uint8_t)(d_bits >> 8);
    uint8_t u[Q4_BLOCK];
    for (int i = 0; i < Q4_BLOCK; i++) {
        const float q = d != 0.0f ? rintf(x[i] / d) + 8.0f : 8.0f;
        u[i] = (uint8_t)(q < 0.0f ? 0.0f : q > 15.0f ? 15.0f : q);
    }
    for (int k = 0; k < 16; k++) block[2 + k] = (uint8_t)(u[k] | u[k + 16] << 4);
}

// A Q5_0 block of x [32], llama.cpp's rule: v the weight of largest magnitude, d = v / −16 (F16 toward zero),
// q = round(x / d) + 16 clamped to [0, 31]; q's low 4 bits as Q4_0's nibbles, its fifth bit as bit k of the
// little-endian u32 after d.
static void q5_0_quantize_block(uint8_t *block, const float *x) {
    float v = 0.0f;
    for (int i = 0; i < Q8_BLOCK; i++) v = fabsf(x[i]) > fabsf(v) ? x[i] : v;
    const uint16_t d_bits = v != 0.0f ? f16_toward_zero(v / -16.0f) : 0;
    const float d = f16_to_f32(d_bits);
    memset(block, 0, Q5_0_BYTES);
    block[0] = (uint8_t)d_bits, block[1] = (uint8_t)(d_bits >> 8);
    for (int i = 0; i < Q8_BLOCK; i++) {
        const float q = d != 0.0f ? rintf(x[i] / d) + 16.0f : 16.0f;
        const int u = (int)(q < 0.0f ? 0.0f : q > 31.0f ? 31.0f : q);
        block[6 + i % 16] |= (uint8_t)((u & 0xf) << (i < 16 ? 0 : 4));
        block[2 + i / 8] |= (uint8_t)((u >> 4) << i % 8);
    }
}

static void q8_0_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q8_panel_bytes(n_in), Q8_0_BYTES, q8_0_quantize_block,
                        q8_0_pack_row);
}

static void q4_0_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q4_panel_bytes(n_in), Q4_0_BYTES, q4_0_quantize_block,
                        q4_0_pack_row);
}

static void q5_0_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q5_panel_bytes(n_in), Q5_0_BYTES, q5_0_quantize_block,
                        q5_0_pack_row);
}

static unsigned q8_0_nibbles(int i) {
    (void)i;
    return 3;
}

static unsigned q4_0_nibbles(int i) { return i % 32 < 16 ? 1 : 2; }

// The reference against the float product (quantized_checks.h's held_weight_bound).
static double q8_0_reference_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                                   double bias) {
    return held_weight_bound(WEIGHT_Q8_0, x, xq, w, wq, n_in, j, bias);
}

static double q4_0_reference_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                                   double bias) {
    return held_weight_bound(WEIGHT_Q4_0, x, xq, w, wq, n_in, j, bias);
}

static double q5_0_reference_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                                   double bias) {
    return held_weight_bound(WEIGHT_Q5_0, x, xq, w, wq, n_in, j, bias);
}

static const QuantFormat Q8_0 = {.name = "q8_0",
                                 .type = WEIGHT_Q8_0,
                                 .block_bytes = Q8_BLOCK * Q8_PANEL,
                                 .matrix_bytes = q8_matrix_bytes,
                                 .panel_bytes = q8_panel_bytes,
                                 .quant_index = q8_quant_index,
                                 .quant_nibbles = q8_0_nibbles,
                                 .scale_index = q8_scale_index,
                                 .quantize_panel = q8_0_quantize_panel,
                                 .reference_bound = q8_0_reference_bound};

static const QuantFormat Q4_0 = {.name = "q4_0",
                                 .type = WEIGHT_Q4_0,
                                 .block_bytes = Q4_BLOCK * Q4_PANEL / 2,
                                 .matrix_bytes = q4_matrix_bytes,
                                 .panel_bytes = q4_panel_bytes,
                                 .quant_index = q4_quant_index,
                                 .quant_nibbles = q4_0_nibbles,
                                 .scale_index = q4_scale_index,
                                 .quantize_panel = q4_0_quantize_panel,
                                 .reference_bound = q4_0_reference_bound};

// GGUF's Q5_0 in q5's panels (kernels.h): the nibbles as q4's, the fifth bits apart (q5_high_index).
static const QuantFormat Q5_0 = {.name = "q5_0",
                                 .type = WEIGHT_Q5_0,
                                 .block_bytes = Q5_BLOCK_BYTES,
                                 .matrix_bytes = q5_matrix_bytes,
                                 .panel_bytes = q5_panel_bytes,
                                 .quant_index = q5_quant_index,
                                 .quant_nibbles = q4_0_nibbles,
                                 .scale_index = q5_scale_index,
                                 .quantize_panel = q5_0_quantize_panel,
                                 .reference_bound = q5_0_reference_bound};

// The packing: every weight of a file's rows is in the panel what the file's block says, bit for bit
// (quantized_weight against llama.cpp's dequantization of the block, qk_dequantize_row), padding rows all-zero
// blocks; a Q8_0 quant of −128 stays −128, and Q5_0's quants reach both ends, 0 and 31.
TEST(kernels_q8_0_q4_0_q5_0_packing_keeps_the_file_s_blocks) {
    const int n_out = 13, n_in = 96, nb = n_in / 32;
    float *rows = random_floats(n_out * n_in, -1.0f, 1.0f);
    const struct {
        const QuantFormat *f;
        uint32_t ggml;
        void (*quantize_block)(uint8_t *block, const float *x);
    } CASES[] = {{&Q8_0, GGML_Q8_0, q8_0_quantize_block}, {&Q4_0, GGML_Q4_0, q4_0_quantize_block},
                 {&Q5_0, GGML_Q5_0, q5_0_quantize_block}};
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        const QuantFormat *f = CASES[c].f;
        void *w = NULL;
        if (posix_memalign(&w, 64, f->matrix_bytes(n_out, n_in))) abort();
        f->quantize_panel(w, rows, n_out, n_in, n_in);
        bool saw_low = false, saw_high = false;  // Q8_0: q = −128; Q5_0: q − 16 = −16 and 15
        for (int j = 0; j < Q8_PANEL; j++)
            for (int b = 0; b < nb; b++) {
                const float zeros[32] = {0};  // padding rows: all-zero blocks
                uint8_t block[Q8_0_BYTES];
                float want[32];
                CASES[c].quantize_block(block, j < n_out ? rows + (size_t)j * n_in + b * 32 : zeros);
                qk_dequantize_row(want, block, CASES[c].ggml, 32);
                const float d = f16_to_f32((uint16_t)(block[0] | block[1] << 8));
                for (int i = 0; i < 32; i++) {
                    const float got = quantized_weight(w, f->type, n_in, j, b * 32 + i);
                    CHECK(memcmp(&want[i], &got, sizeof got) == 0, "%s W[%d, %d] = %.9g, the file's %.9g", f->name, j,
                          b * 32 + i, got, want[i]);
                    if (CASES[c].ggml == GGML_Q8_0) saw_low |= block[2 + i] == 0x80;
                    if (CASES[c].ggml == GGML_Q5_0 && d != 0.0f) {
                        saw_low |= want[i] == -16 * d;
                        saw_high |= want[i] == 15 * d;
                    }
                }
            }
        CHECK(CASES[c].ggml == GGML_Q4_0 || (saw_low && (saw_high || CASES[c].ggml == GGML_Q8_0)),
              "%s: the ends of its quants not met", f->name);
        free(w);
    }
    free(rows);
}

// The layout the formats share with q8 and q4: every quant and scale placed once.
TEST(kernels_q8_0_q4_0_layout) {
    check_quantized_layout(&Q8_0);
    check_quantized_layout(&Q4_0);
}

// The q5 panels (kernels.h): every nibble and scale placed once (check_quantized_layout), and every fifth bit once,
// inside its block's run of Q5_BLOCK_BYTES, in a byte no nibble or scale takes: bit i % 32 / 4 of the byte where a
// q8 group would hold input i % 4 of its row.
TEST(kernels_q5_0_layout) {
    check_quantized_layout(&Q5_0);
    const int shapes[][2] = {{1, 1}, {17, 100}, {40, 768}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const int n_out = shapes[c][0], n_in = shapes[c][1], nb = q8_blocks(n_in), rows = (n_out + 15) / 16 * 16;
        const size_t size = q5_matrix_bytes(n_out, n_in);
        uint8_t *taken = calloc(size, 1);  // the bits of each byte that a fifth bit holds; 0xff: a nibble's or scale's
        for (int j = 0; j < rows; j++)
            for (int i = 0; i < nb * 32; i++) {
                taken[q5_quant_index(n_in, j, i)] = 0xff;
                const size_t scale = 2 * q5_scale_index(n_in, j, i / 32);
                taken[scale] = taken[scale + 1] = 0xff;
            }
        for (int j = 0; j < rows; j++)
            for (int i = 0; i < nb * 32; i++) {
                const size_t at = q5_high_index(n_in, j, i), block = q5_quant_index(n_in, j / 16 * 16, i / 32 * 32);
                const uint8_t bit = (uint8_t)(1u << (i % 32 / 4));
                CHECK(at < size && at >= block && at < block + Q5_BLOCK_BYTES && !(taken[at] & bit),
                      "q5 [%d, %d]: the fifth bit of [%d, %d] at byte %zu bit %d", n_out, n_in, j, i, at, i % 32 / 4);
                if (at < size) taken[at] |= bit;
            }
        free(taken);
    }
}

// Every variant's matmul_q8_0 and matmul_q4_0 against the reference, bit for bit, and the reference against the
// float product (check_every_quantized_matmul).
TEST(kernels_q8_0_matmul_matches_reference) { check_every_quantized_matmul(&Q8_0); }
TEST(kernels_q4_0_matmul_matches_reference) { check_every_quantized_matmul(&Q4_0); }

// matmul_q5_0 so, and every T = 1..17 at three widths (the AVX2 and AVX-512 walks' passes of 8 rows, and AVX-512's
// pairs of panels at T = 1, meet every remainder).
TEST(kernels_q5_0_matmul_matches_reference) {
    check_every_quantized_matmul(&Q5_0);
    int n;
    const Kernels *const *list = kernels_available(&n);
    static const int N_IN[] = {33, 100, 2 * 768 + 5};
    for (int v = 0; v < n; v++)
        for (int a = 0; a < 3; a++)
            for (int T = 1; T <= 17; T++) check_quantized_matmul(&Q5_0, list[v], T, N_IN[a], T % 2 == 1);
}

// As for q8 and q4 (test_q8.c, test_q4.c), with F16 scales 1; Q5_0 with every bit of its quants 0 (q − 16 = −16, its
// weight of largest magnitude) and with every bit 1 (u = 31, vpmaddubsw's largest unsigned factor).
TEST(kernels_q8_0_q4_0_q5_0_matmul_at_the_bounds_of_their_sums) {
    check_quantized_matmul_at_bounds(&Q8_0, 0x81, 0x3c00);
    check_quantized_matmul_at_bounds(&Q4_0, 0xff, 0x3c00);
    check_quantized_matmul_at_bounds(&Q5_0, 0x00, 0x3c00);
    check_quantized_matmul_at_bounds(&Q5_0, 0xff, 0x3c00);
}

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI runs the avx512 variant with AVX2's Q8_0, Q4_0 and Q5_0 matmuls (dispatch.c).
TEST(kernels_q8_0_q4_0_q5_0_avx512_without_vnni) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    if (strcmp(list[n - 1]->name, "avx512") != 0) return;  // no AVX-512 on this CPU
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(kernels_avx512_for(false, bf16)->matmul_q8_0 == q8_0_matmul_avx2 &&
                  kernels_avx512_for(false, bf16)->matmul_q4_0 == q4_0_matmul_avx2 &&
                  kernels_avx512_for(false, bf16)->matmul_q5_0 == q5_0_matmul_avx2, "bf16=%d: AVX2's matmuls", bf16);
        CHECK(kernels_avx512_for(true, bf16)->matmul_q8_0 == kernels_avx512.matmul_q8_0 &&
                  kernels_avx512_for(true, bf16)->matmul_q4_0 == kernels_avx512.matmul_q4_0 &&
                  kernels_avx512_for(true, bf16)->matmul_q5_0 == kernels_avx512.matmul_q5_0,
              "bf16=%d: AVX-512's matmuls", bf16);
    }
    check_quantized_matmul_without_vnni(&Q8_0);
    check_quantized_matmul_without_vnni(&Q4_0);
    check_quantized_matmul_without_vnni(&Q5_0);
}
#endif
