// test_q8_0.c — GGUF's Q8_0 and Q4_0 blocks held as stored (kernels.h, "GGUF's Q8_0 and Q4_0"): the packing of a
// file's rows into q8's and q4's panels (quants and F16 scale bits unchanged), and every variant's matmul_q8_0 and
// matmul_q4_0 against the reference, bit for bit, on fresh random inputs of awkward sizes (quantized_checks.h: at
// every T and every [j0, j1), so also the batch-invariance test). GGUF's Q5_0, Q5_1 and Q4_1: test_q5.c.
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

// A block: F16 d, then 32 int8 quants or 16 bytes of nibbles.
enum { Q8_0_BYTES = 34, Q4_0_BYTES = 18 };

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

static void q8_0_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q8_panel_bytes(n_in), Q8_0_BYTES, q8_0_quantize_block,
                        q8_0_pack_row);
}

static void q4_0_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in) {
    gguf_quantize_panel(panel, rows, n_rows, ld, n_in, q4_panel_bytes(n_in), Q4_0_BYTES, q4_0_quantize_block,
                        q4_0_pack_row);
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

// The packing: every weight of a file's rows is in the panel what the file's block says, bit for bit
// (quantized_weight against llama.cpp's dequantization of the block, qk_dequantize_row), padding rows all-zero
// blocks; a Q8_0 quant of −128 stays −128.
TEST(kernels_q8_0_q4_0_packing_keeps_the_file_s_blocks) {
    const int n_out = 13, n_in = 96, nb = n_in / 32;
    float *rows = random_floats(n_out * n_in, -1.0f, 1.0f);
    const struct {
        const QuantFormat *f;
        uint32_t ggml;
        void (*quantize_block)(uint8_t *block, const float *x);
    } CASES[] = {{&Q8_0, GGML_Q8_0, q8_0_quantize_block}, {&Q4_0, GGML_Q4_0, q4_0_quantize_block}};
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        const QuantFormat *f = CASES[c].f;
        void *w = NULL;
        if (posix_memalign(&w, 64, f->matrix_bytes(n_out, n_in))) abort();
        f->quantize_panel(w, rows, n_out, n_in, n_in);
        bool saw_low = false;  // Q8_0: q = −128
        for (int j = 0; j < Q8_PANEL; j++)
            for (int b = 0; b < nb; b++) {
                const float zeros[32] = {0};  // padding rows: all-zero blocks
                uint8_t block[Q8_0_BYTES];
                float want[32];
                CASES[c].quantize_block(block, j < n_out ? rows + (size_t)j * n_in + b * 32 : zeros);
                qk_dequantize_row(want, block, CASES[c].ggml, 32);
                for (int i = 0; i < 32; i++) {
                    const float got = quantized_weight(w, f->type, n_in, j, b * 32 + i);
                    CHECK(memcmp(&want[i], &got, sizeof got) == 0, "%s W[%d, %d] = %.9g, the file's %.9g", f->name, j,
                          b * 32 + i, got, want[i]);
                    if (CASES[c].ggml == GGML_Q8_0) saw_low |= block[2 + i] == 0x80;
                }
            }
        CHECK(CASES[c].ggml == GGML_Q4_0 || saw_low, "%s: the ends of its quants not met", f->name);
        free(w);
    }
    free(rows);
}

// The layout the formats share with q8 and q4: every quant and scale placed once.
TEST(kernels_q8_0_q4_0_layout) {
    check_quantized_layout(&Q8_0);
    check_quantized_layout(&Q4_0);
}

// Every variant's matmul_q8_0 and matmul_q4_0 against the reference, bit for bit, and the reference against the
// float product (check_every_quantized_matmul).
TEST(kernels_q8_0_matmul_matches_reference) { check_every_quantized_matmul(&Q8_0); }
TEST(kernels_q4_0_matmul_matches_reference) { check_every_quantized_matmul(&Q4_0); }

// As for q8 and q4 (test_q8.c, test_q4.c), with F16 scales 1.
TEST(kernels_q8_0_q4_0_matmul_at_the_bounds_of_their_sums) {
    check_quantized_matmul_at_bounds(&Q8_0, 0x81, 0x3c00);
    check_quantized_matmul_at_bounds(&Q4_0, 0xff, 0x3c00);
}

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI runs the avx512 variant with AVX2's Q8_0 and Q4_0 matmuls (dispatch.c).
TEST(kernels_q8_0_q4_0_avx512_without_vnni) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    if (strcmp(list[n - 1]->name, "avx512") != 0) return;  // no AVX-512 on this CPU
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(kernels_avx512_for(false, bf16)->matmul_q8_0 == q8_0_matmul_avx2 &&
                  kernels_avx512_for(false, bf16)->matmul_q4_0 == q4_0_matmul_avx2, "bf16=%d: AVX2's matmuls", bf16);
        CHECK(kernels_avx512_for(true, bf16)->matmul_q8_0 == kernels_avx512.matmul_q8_0 &&
                  kernels_avx512_for(true, bf16)->matmul_q4_0 == kernels_avx512.matmul_q4_0,
              "bf16=%d: AVX-512's matmuls", bf16);
    }
    check_quantized_matmul_without_vnni(&Q8_0);
    check_quantized_matmul_without_vnni(&Q4_0);
}
#endif
