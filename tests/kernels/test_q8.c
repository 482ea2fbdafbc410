// test_q8.c — the 8-bit weight format (kernels.h, q8.c): its layout, its quantizers (weights and activations),
// and every variant's matmul_q8 against the reference, bit for bit, on fresh random inputs of awkward sizes
// (quantized_checks.h). Since the reference computes each output from its own row alone, agreeing with it bit for
// bit at every T and every [j0, j1) is also the batch-invariance test.
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
#include "quantized_checks.h"

// A q8 quant fills its byte.
static unsigned q8_nibbles(int i) {
    (void)i;
    return 3;
}

// The reference against the float product: each product x_i w_i is off by at most |x_i| e_w + |w_i| e_x + e_x e_w
// (e = half a quantization step, d / 2), plus float rounding, hence
//     |ref − Σ_i x_i w_i| ≤ Σ_i (|x_i| d_w + |w_i| d_x + d_w d_x / 2) / 2 + (n_in + 4) · FLT_EPSILON · Σ_i |x_i w_i|
static double q8_reference_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                                 double bias) {
    double bound = 0.0, magnitude = fabs(bias);
    for (int i = 0; i < n_in; i++) {
        const double xi = x[i], wi = w[i];
        const double d_w = bf16_to_f32(((const uint16_t *)wq)[q8_scale_index(n_in, j, i / 32)]), d_x = xq[i / 32].d;
        magnitude += fabs(xi * wi);
        bound += (fabs(xi) * d_w + fabs(wi) * d_x + d_w * d_x / 2) / 2;
    }
    return bound + (n_in + 4) * FLT_EPSILON * magnitude;
}

static const QuantFormat Q8 = {.name = "q8",
                               .type = WEIGHT_Q8,
                               .block_bytes = Q8_BLOCK * Q8_PANEL,
                               .matrix_bytes = q8_matrix_bytes,
                               .panel_bytes = q8_panel_bytes,
                               .quant_index = q8_quant_index,
                               .quant_nibbles = q8_nibbles,
                               .scale_index = q8_scale_index,
                               .quantize_panel = q8_quantize_panel,
                               .reference_bound = q8_reference_bound};

// The layout (kernels.h) places every quant and every scale once, inside q8_matrix_bytes, none on another; a
// group of 4 inputs of a row is 4 consecutive bytes; a block's 16 rows × 32 inputs are one 512-byte run.
TEST(kernels_q8_layout) { check_quantized_layout(&Q8); }

// Quantization: every |q| ≤ 127; a weight block's scale is the smallest BF16 value ≥ max|w| / 127 (so within a
// relative 2⁻⁷ of it), an activation block's is max|x| / 127; each value is within half a step of d·q; the
// padding (inputs past n_in, rows past n_out) is zero; an activation block's offset is −128 · Σ q.
TEST(kernels_q8_quantization) {
    const int n_out = 21, n_in = 77, nb = q8_blocks(n_in);
    float *rows;
    uint8_t *w = random_quantized_matrix(&rows, &Q8, n_out, n_in);
    for (int j = 0; j < 32; j++)
        for (int b = 0; b < nb; b++) {
            const float d = bf16_to_f32(((const uint16_t *)w)[q8_scale_index(n_in, j, b)]);
            float amax = 0.0f;
            for (int i = b * 32; i < (b + 1) * 32; i++) {
                const int8_t q = (int8_t)w[q8_quant_index(n_in, j, i)];
                CHECK(q >= -127, "q[%d, %d] = %d", j, i, q);
                if (j >= n_out || i >= n_in) {
                    CHECK(q == 0, "padding q[%d, %d] = %d", j, i, q);
                    continue;
                }
                const float x = rows[(size_t)j * n_in + i];
                amax = fabsf(x) > amax ? fabsf(x) : amax;
                CHECK(fabsf(x - d * q) <= 0.5f * d * (1 + 1e-6f), "W[%d, %d] = %.9g, d·q = %.9g", j, i, x, d * q);
                CHECK(q8_weight(w, n_in, j, i) == d * q, "q8_weight(%d, %d)", j, i);
            }
            CHECK(d >= amax / 127 && d <= amax / 127 * (1 + 1.0f / 128), "row %d block %d: d = %.9g, max|w| = %.9g", j,
                  b, d, amax);
        }
    const int T = 3, ld_x = n_in + 5;
    float *x = random_floats(T * ld_x, -3.0f, 3.0f);
    Q8Block *xq = malloc(sizeof(Q8Block) * (size_t)(T * nb));
    q8_quantize_rows(xq, x, T, n_in, ld_x);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++) {
            const Q8Block *blk = &xq[t * nb + b];
            int32_t sum = 0;
            float amax = 0.0f;
            for (int k = 0; k < 32; k++) {
                const int i = b * 32 + k;
                sum += blk->q[k];
                CHECK(blk->q[k] >= -127, "x q = %d", blk->q[k]);
                if (i >= n_in) {
                    CHECK(blk->q[k] == 0, "padding x[%d, %d] = %d", t, i, blk->q[k]);
                    continue;
                }
                amax = fabsf(x[t * ld_x + i]) > amax ? fabsf(x[t * ld_x + i]) : amax;
                CHECK(fabsf(x[t * ld_x + i] - blk->d * blk->q[k]) <= 0.5f * blk->d * (1 + 1e-6f), "x[%d, %d] = %.9g, "
                      "d·q = %.9g", t, i, x[t * ld_x + i], blk->d * blk->q[k]);
            }
            CHECK(blk->d == amax / 127 && blk->offset == -128 * sum, "x row %d block %d: d %.9g (max %.9g), offset "
                  "%d (Σq %d)", t, b, blk->d, amax, blk->offset, sum);
        }
    free(rows);
    free(w);
    free(x);
    free(xq);
}

// Every variant's quantize_q8 against the reference q8_quantize_rows, bit for bit: rows of random magnitudes
// (one with an all-zero block, one with a NaN or an infinity), every width of n_in_sizes, rows ld_x apart.
TEST(kernels_q8_quantize_matches_reference) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++)
        for (int a = 0; a < N_IN_SIZES; a++) {
            const int n_in = n_in_sizes[a], T = test_rand_int(1, 9), ld_x = n_in + test_rand_int(0, 20);
            const int nb = q8_blocks(n_in);
            float *x = random_floats(T * ld_x, -1.0f, 1.0f);
            for (int t = 0; t < T; t++) {
                const float scale = test_rand_uniform(1e-3f, 1e3f);
                for (int i = 0; i < n_in; i++) x[t * ld_x + i] *= t == 0 && i < 32 ? 0.0f : scale;
            }
            x[(T - 1) * ld_x + n_in / 2] = test_rand_int(0, 1) ? NAN : -INFINITY;  // garbage in: the same garbage out
            Q8Block *ref = malloc(sizeof(Q8Block) * (size_t)(T * nb)), *got = malloc(sizeof(Q8Block) * (size_t)(T * nb));
            q8_quantize_rows(ref, x, T, n_in, ld_x);
            list[v]->quantize_q8(got, x, T, n_in, ld_x);
            for (int k = 0; k < T * nb; k++)
                CHECK(memcmp(&ref[k], &got[k], sizeof(Q8Block)) == 0, "%s n_in=%d: block %d of row %d differs (d %.9g "
                      "vs %.9g, offset %d vs %d)", list[v]->name, n_in, k % nb, k / nb, got[k].d, ref[k].d,
                      got[k].offset, ref[k].offset);
            free(x);
            free(ref);
            free(got);
        }
}

// Every variant's matmul_q8 against the reference, bit for bit, and the reference against the float product
// (check_every_quantized_matmul).
TEST(kernels_q8_matmul_matches_reference) { check_every_quantized_matmul(&Q8); }

// Quants −127 against activations ±127: vpmaddubsw's largest pairs (quantized_checks.h). Scales: BF16 1.
TEST(kernels_q8_matmul_at_the_bounds_of_its_sums) { check_quantized_matmul_at_bounds(&Q8, 0x81, 0x3f80); }

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI (Skylake-X) still runs the avx512 variant, with AVX2's q8 matmul in place of
// the VNNI one; one without AVX512_BF16 (Skylake-X, Cascade Lake, Ice Lake) runs it with no matmul_bf16_dot
// (dispatch.c). Those tables are checked on any AVX-512 CPU: kernels_avx512's in every other entry, AVX2's q8
// matmul bit-identical to the reference there too; and the variant listed for this CPU is one of them.
TEST(kernels_avx512_for_each_cpu) {
    int n;
    const Kernels *const *list = kernels_available(&n), *best = list[n - 1];
    if (strcmp(best->name, "avx512") != 0) return;  // no AVX-512 on this CPU: none of the tables can run
    bool listed = false;
    for (int vnni = 0; vnni < 2; vnni++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            const Kernels *k = kernels_avx512_for(vnni, bf16);
            listed |= k == best;
            CHECK(strcmp(k->name, "avx512") == 0 && k->quantize_q8 == kernels_avx512.quantize_q8 &&
                      k->panels == kernels_avx512.panels && k->bf16_pairs == kernels_avx512.bf16_pairs &&
                      k->attention == kernels_avx512.attention,
                  "the table for vnni=%d bf16=%d differs from kernels_avx512 in more than it lacks", vnni, bf16);
            CHECK(k->matmul_q8 == (vnni ? kernels_avx512.matmul_q8 : q8_matmul_avx2), "vnni=%d: the q8 matmul", vnni);
            CHECK(k->matmul_bf16_dot == (bf16 ? kernels_avx512.matmul_bf16_dot : NULL), "bf16=%d: matmul_bf16_dot",
                  bf16);
            for (int type = 0; type < WEIGHT_TYPES; type++)
                CHECK(k->matmul[type] == kernels_avx512.matmul[type], "matmul[%d] differs", type);
        }
    CHECK(listed, "the avx512 variant listed is none of the tables");
    check_quantized_matmul_without_vnni(&Q8);
}
#endif

#if defined(__x86_64__)
// The avxvnni variant (dispatch.c) is the avx2 table with AVX-VNNI's quantized matmuls, which the matmul tests above
// hold bit for bit to the reference wherever the CPU has AVX-VNNI; every other entry must be avx2's.
TEST(kernels_avxvnni_is_avx2_with_vnni_products) {
    int n;
    const Kernels *const *list = kernels_available(&n), *vnni = NULL;
    for (int v = 0; v < n; v++)
        if (strcmp(list[v]->name, "avxvnni") == 0) vnni = list[v];
    if (!vnni) return;  // no AVX-VNNI on this CPU
    Kernels expected = kernels_avx2;
    expected.name = vnni->name;
    expected.matmul_q8 = q8_matmul_avxvnni;
    expected.matmul_q4 = q4_matmul_avxvnni;
    expected.matmul_q8_0 = q8_0_matmul_avxvnni;
    expected.matmul_q4_0 = q4_0_matmul_avxvnni;
    expected.matmul_q5[0] = q5_0_matmul_avxvnni;
    expected.matmul_q5[1] = q5_1_matmul_avxvnni;
    expected.matmul_q5[2] = q4_1_matmul_avxvnni;
    CHECK(memcmp(&expected, vnni, sizeof expected) == 0, "the avxvnni table differs from avx2's in more than its "
          "quantized matmuls");
}
#endif
