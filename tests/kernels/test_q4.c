// test_q4.c — the 4-bit weight format (kernels.h, q4.c): its layout, its quantizer, and every variant's
// matmul_q4 against the reference, bit for bit, on fresh random inputs of awkward sizes. As for q8
// (test_q8.c), the reference computes each output from its own row alone, so agreeing with it bit for bit
// at every T and every [j0, j1) is also the batch-invariance test.
//
// `make test-neon` builds this file with kernels/ and the harness alone.
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "harness.h"
#include "kernel_inputs.h"
#include "kernels.h"
#include "quantized_checks.h"

// A q4 quant is the low nibble of its byte for inputs 0..15 of a block, the high one for 16..31.
static unsigned q4_nibbles(int i) { return i % 32 < 16 ? 1 : 2; }

// The reference against the float product (quantized_checks.h's held_weight_bound).
static double q4_reference_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                                 double bias) {
    return held_weight_bound(WEIGHT_Q4, x, xq, w, wq, n_in, j, bias);
}

static const QuantFormat Q4 = {.name = "q4",
                               .type = WEIGHT_Q4,
                               .block_bytes = Q4_BLOCK * Q4_PANEL / 2,
                               .matrix_bytes = q4_matrix_bytes,
                               .panel_bytes = q4_panel_bytes,
                               .quant_index = q4_quant_index,
                               .quant_nibbles = q4_nibbles,
                               .scale_index = q4_scale_index,
                               .quantize_panel = q4_quantize_panel,
                               .reference_bound = q4_reference_bound};

// The layout places every nibble and every scale once, inside q4_matrix_bytes, none on another; a group of 4
// inputs of a row is 4 consecutive bytes; a block's 16 rows × 32 inputs are one 256-byte run.
TEST(kernels_q4_layout) { check_quantized_layout(&Q4); }

// Σ (x − d·q)² over a block for llama.cpp's Q4_0 rule with a BF16 scale: d = v / −8 (v the block's value of
// largest magnitude), q = round(x / d) clamped to [−8, 7]. The quantizer tries this grid among others.
static double plain_q4_error(const float *x, int n) {
    float v = 0.0f;
    for (int i = 0; i < n; i++) v = fabsf(x[i]) > fabsf(v) ? x[i] : v;
    if (v == 0.0f) return 0.0;
    const float d = bf16_to_f32(f32_to_bf16(v / -8.0f));
    double error = 0.0;
    for (int i = 0; i < n; i++) {
        float q = rintf(x[i] * (1.0f / d));
        q = q < -8.0f ? -8.0f : q > 7.0f ? 7.0f : q;
        error += (double)(x[i] - d * q) * (x[i] - d * q);
    }
    return error;
}

// Quantization: every quant of a real weight lies in [−8, 7] and q4_weight gives d·q; padding (inputs past n_in,
// rows past n_out) and an all-zero block are q = 0; each block's squared error is at most that of Q4_0's rule.
TEST(kernels_q4_quantization) {
    const int n_out = 21, n_in = 77, nb = q4_blocks(n_in);
    float *rows;
    uint8_t *w = random_quantized_matrix(&rows, &Q4, n_out, n_in);
    for (int j = 0; j < 32; j++)
        for (int b = 0; b < nb; b++) {
            const float d = bf16_to_f32(((const uint16_t *)w)[q4_scale_index(n_in, j, b)]);
            const int n = n_in - b * 32 < 32 ? n_in - b * 32 : 32;
            double error = 0.0;
            for (int i = b * 32; i < (b + 1) * 32; i++) {
                const int q = q4_quant(w, n_in, j, i);
                CHECK(q >= -8 && q <= 7, "q[%d, %d] = %d", j, i, q);
                if (j >= n_out || i >= n_in || (j == 0 && i < 32)) {
                    CHECK(q == 0, "padding or zero q[%d, %d] = %d", j, i, q);
                    continue;
                }
                const float x = rows[(size_t)j * n_in + i];
                error += (double)(x - d * q) * (x - d * q);
                CHECK(q4_weight(w, n_in, j, i) == d * q, "q4_weight(%d, %d)", j, i);
            }
            if (j < n_out) {
                const double plain = plain_q4_error(rows + (size_t)j * n_in + b * 32, n);
                CHECK(error <= plain * (1 + 1e-5), "row %d block %d: squared error %.9g, Q4_0's rule %.9g", j, b,
                      error, plain);
            }
        }
    free(rows);
    free(w);
}

// A weight row whose values are NaN or infinite quantizes without undefined behaviour, to quants in [−8, 7].
TEST(kernels_q4_quantization_of_garbage) {
    const int n_in = 64;
    float rows[2 * 64];
    for (int i = 0; i < 2 * n_in; i++) rows[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -FLT_MAX;
    void *w = NULL;
    if (posix_memalign(&w, 64, q4_matrix_bytes(2, n_in))) abort();
    q4_quantize_panel(w, rows, 2, n_in, n_in);
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < n_in; i++) CHECK(q4_quant(w, n_in, j, i) >= -8 && q4_quant(w, n_in, j, i) <= 7, "q");
    free(w);
}

// Every variant's matmul_q4 against the reference, bit for bit, and the reference against the float product
// (check_every_quantized_matmul).
TEST(kernels_q4_matmul_matches_reference) { check_every_quantized_matmul(&Q4); }

// Nibbles 15 against activations ±127: a block's 16-bit sums at their largest (quantized_checks.h). Scales: BF16 1.
TEST(kernels_q4_matmul_at_the_bounds_of_its_sums) { check_quantized_matmul_at_bounds(&Q4, 0xff, 0x3f80); }

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI runs the avx512 variant with AVX2's q4 matmul (dispatch.c): checked on any
// AVX-512 CPU, that table's entry and its results.
TEST(kernels_q4_avx512_without_vnni) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    if (strcmp(list[n - 1]->name, "avx512") != 0) return;  // no AVX-512 on this CPU
    for (int bf16 = 0; bf16 < 2; bf16++) {
        CHECK(kernels_avx512_for(false, bf16)->matmul_q4 == q4_matmul_avx2, "bf16=%d: the q4 matmul", bf16);
        CHECK(kernels_avx512_for(true, bf16)->matmul_q4 == kernels_avx512.matmul_q4, "bf16=%d: the q4 matmul", bf16);
    }
    check_quantized_matmul_without_vnni(&Q4);
}
#endif
