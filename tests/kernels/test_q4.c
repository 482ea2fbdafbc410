// test_q4.c — the 4-bit weight format (kernels.h, q4.c): its layout, its quantizer, and every variant's
// matmul_q4 against the reference, bit for bit, on fresh random inputs of awkward sizes. As for q8
// (test_kernels.c), the reference computes each output from its own row alone, so agreeing with it bit for bit
// at every T and every [j0, j1) is also the batch-invariance test.
//
// `make test-neon` builds this file with kernels/ and the harness alone.
#include <float.h>
#include <math.h>
#include <stdio.h>

#include "harness.h"
#include "kernel_inputs.h"
#include "kernels.h"

// A random matrix [n_out, n_in] (row-major floats, a different magnitude per row, row 0's first block all zeros)
// quantized into q4 panels.
static uint8_t *q4_random_matrix(float **rows_out, int n_out, int n_in) {
    float *rows = malloc(sizeof(float) * (size_t)n_out * n_in);
    for (int j = 0; j < n_out; j++) {
        const float spread = test_rand_uniform(0.01f, 2.0f);
        for (int i = 0; i < n_in; i++)
            rows[(size_t)j * n_in + i] = j == 0 && i < 32 ? 0.0f : test_rand_uniform(-spread, spread);
    }
    void *w = NULL;
    if (posix_memalign(&w, 64, q4_matrix_bytes(n_out, n_in))) abort();
    for (int j = 0; j < n_out; j += Q4_PANEL)
        q4_quantize_panel((uint8_t *)w + (size_t)(j / Q4_PANEL) * q4_panel_bytes(n_in), rows + (size_t)j * n_in,
                          n_out - j < Q4_PANEL ? n_out - j : Q4_PANEL, n_in, n_in);
    *rows_out = rows;
    return w;
}

// The layout places every nibble and every scale once, inside q4_matrix_bytes, none on another; a group of 4
// inputs of a row is 4 consecutive bytes; a block's 16 rows × 32 inputs are one 256-byte run.
TEST(kernels_q4_layout) {
    const int shapes[][2] = {{1, 1}, {3, 33}, {16, 32}, {17, 100}, {40, 768}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const int n_out = shapes[c][0], n_in = shapes[c][1], nb = q4_blocks(n_in);
        const size_t size = q4_matrix_bytes(n_out, n_in);
        unsigned char *seen = calloc(size, 1);  // bit 0: low nibble taken, bit 1: high nibble, 4: a scale's byte
        for (int j = 0; j < (n_out + 15) / 16 * 16; j++)
            for (int i = 0; i < nb * Q4_BLOCK; i++) {
                const size_t at = q4_quant_index(n_in, j, i);
                const unsigned nibble = i % 32 < 16 ? 1 : 2;
                CHECK(at < size && !(seen[at] & nibble), "[%d, %d]: u[%d, %d] at %zu (size %zu)", n_out, n_in, j, i,
                      at, size);
                if (at < size) seen[at] |= nibble;
                if (i % 4) CHECK(at == q4_quant_index(n_in, j, i - 1) + 1, "u[%d, %d] not after u[%d, %d]", j, i, j,
                                 i - 1);
                const size_t block = q4_quant_index(n_in, j / 16 * 16, i / 32 * 32);
                CHECK(at >= block && at < block + 256, "u[%d, %d] outside its block", j, i);
            }
        for (int j = 0; j < (n_out + 15) / 16 * 16; j++)
            for (int b = 0; b < nb; b++) {
                const size_t at = 2 * q4_scale_index(n_in, j, b);
                CHECK(at + 1 < size && !seen[at] && !seen[at + 1], "[%d, %d]: scale of row %d block %d at %zu",
                      n_out, n_in, j, b, at);
                if (at + 1 < size) seen[at] = seen[at + 1] = 4;
            }
        free(seen);
    }
}

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
    uint8_t *w = q4_random_matrix(&rows, n_out, n_in);
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

// Every variant's matmul_q4 against the reference, bit for bit (tolerance 0), for random T, [j0, j1) and ld_out,
// with and without bias, leaving the rest of out untouched. The reference itself is checked against the float
// product of the unquantized x and W: with w_hat = d_w·q_w and x̂ = d_x·q_x,
//     |ref − Σ_i x_i w_i| ≤ Σ_i (|x_i| |w_i − ŵ_i| + |ŵ_i| d_x / 2) + (n_in + 4) · FLT_EPSILON · Σ_i |x_i ŵ_i|
static void check_matmul_q4(const Kernels *k, int T, int n_in, bool with_bias) {
    const int n_out = random_odd(1, 41), ld_out = n_out + test_rand_int(0, 3), nb = q4_blocks(n_in);
    int j0 = 0, j1 = n_out;
    if (test_rand_int(0, 1)) {
        j0 = test_rand_int(0, n_out - 1);
        j1 = test_rand_int(j0 + 1, n_out);
    }
    float *rows, *x = random_floats(T * n_in, -1.0f, 1.0f);
    uint8_t *w = q4_random_matrix(&rows, n_out, n_in);
    Q8Block *xq = malloc(sizeof(Q8Block) * (size_t)(T * nb));
    q8_quantize_rows(xq, x, T, n_in, n_in);
    float *bias = with_bias ? random_floats(n_out, -1.0f, 1.0f) : NULL;
    float *ref = untouched_floats(T * ld_out), *out = untouched_floats(T * ld_out);
    kernels_scalar.matmul_q4(ref, xq, w, bias, T, n_in, ld_out, j0, j1);
    k->matmul_q4(out, xq, w, bias, T, n_in, ld_out, j0, j1);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < ld_out; j++) {
            const float a = out[t * ld_out + j], r = ref[t * ld_out + j];
            if (j < j0 || j >= j1) {
                CHECK(same_bits(a, UNTOUCHED) && same_bits(r, UNTOUCHED), "%s q4 T=%d n_in=%d j0=%d j1=%d: wrote "
                      "out[%d, %d]", k->name, T, n_in, j0, j1, t, j);
                continue;
            }
            CHECK(same_bits(a, r), "%s q4 T=%d n_in=%d n_out=%d bias=%d: out[%d, %d] = %.9g, reference %.9g", k->name,
                  T, n_in, n_out, with_bias, t, j, a, r);
            if (k != &kernels_scalar) continue;
            double exact = bias ? bias[j] : 0.0, bound = 0.0, magnitude = bias ? fabs(bias[j]) : 0.0;
            for (int i = 0; i < n_in; i++) {
                const double xi = x[t * n_in + i], wi = rows[(size_t)j * n_in + i], w_hat = q4_weight(w, n_in, j, i);
                exact += xi * wi;
                magnitude += fabs(xi * w_hat);
                bound += fabs(xi) * fabs(wi - w_hat) + fabs(w_hat) * xq[t * nb + i / 32].d / 2;
            }
            bound += (n_in + 4) * FLT_EPSILON * magnitude;
            CHECK(fabs(r - exact) <= bound, "reference q4 T=%d n_in=%d: out[%d, %d] = %.9g, exact %.9g (bound %.3g)",
                  T, n_in, t, j, r, exact, bound);
        }
    free(rows);
    free(x);
    free(w);
    free(xq);
    free(bias);
    free(ref);
    free(out);
}

TEST(kernels_q4_matmul_matches_reference) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        CHECK(list[v]->matmul_q4, "%s: no matmul_q4", list[v]->name);
        for (int a = 0; a < N_IN_SIZES; a++)
            for (int b = 0; b < T_SIZES; b++)
                for (int with_bias = 0; with_bias <= 1; with_bias++)
                    if (list[v] != &kernels_scalar || b % 4 == 0)  // the reference against the float product
                        check_matmul_q4(list[v], T_sizes[b], n_in_sizes[a], with_bias);
    }
}

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
    for (int a = 0; a < N_IN_SIZES; a++)
        for (int b = 0; b < T_SIZES; b++) check_matmul_q4(kernels_avx512_for(false, false), T_sizes[b], n_in_sizes[a],
                                                         b % 2 == 1);
}
#endif
