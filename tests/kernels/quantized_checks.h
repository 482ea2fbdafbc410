// quantized_checks.h — the checks that the q8 tests (test_q8.c) and the q4 tests (test_q4.c) share, on a
// format described by a QuantFormat: random quantized matrices, the layout's placement of every quant and scale,
// and every variant's matmul against the reference, bit for bit, with the reference itself checked against the
// float product of the unquantized inputs.
#ifndef SPECDEC_QUANTIZED_CHECKS_H
#define SPECDEC_QUANTIZED_CHECKS_H

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_inputs.h"
#include "kernels.h"

// A quantized weight format (kernels.h), as the checks drive it.
typedef struct {
    const char *name;  // "q8", "q4", "q8_0", "q4_0"
    WeightType type;   // which Kernels matmul runs it (quantized_matmul)
    int block_bytes;   // a block's quants in a panel: 16 rows × 32 inputs
    size_t (*matrix_bytes)(int n_out, int n_in);
    size_t (*panel_bytes)(int n_in);
    size_t (*quant_index)(int n_in, int j, int i);  // the byte that holds q[j, i]
    unsigned (*quant_nibbles)(int i);               // which of that byte's nibbles: bit 0 low, bit 1 high
    size_t (*scale_index)(int n_in, int j, int b);  // in uint16_t from the matrix's start
    size_t (*min_index)(int n_in, int j, int b);    // the same for a min (Q5_1, Q4_1), or NULL
    void (*quantize_panel)(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in);
    // The bound on |reference − Σ_i x_i w_i| for one output: x [n_in] one activation row, xq its blocks, w [n_in]
    // weight row j unquantized, wq the quantized matrix, bias the output's bias (0 without).
    double (*reference_bound)(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                              double bias);
    // Or (GGUF's K-quants, which no float quantizer here makes) a random matrix [n_out, n_in] in the format's panels,
    // and in *rows its weights as floats; NULL: random_quantized_matrix from quantize_panel.
    uint8_t *(*random_matrix)(float **rows, int n_out, int n_in);
} QuantFormat;

// A QuantFormat's reference_bound from the weights the matrix holds, ŵ = d_w·q_w (quantized_weight), and x̂ = d_x·q_x:
//     |ref − Σ_i x_i w_i| ≤ Σ_i (|x_i| |w_i − ŵ_i| + |ŵ_i| d_x / 2) + (n_in + 4) · FLT_EPSILON · Σ_i |x_i ŵ_i|
static inline double held_weight_bound(WeightType type, const float *x, const Q8Block *xq, const float *w,
                                       const void *wq, int n_in, int j, double bias) {
    double bound = 0.0, magnitude = fabs(bias);
    for (int i = 0; i < n_in; i++) {
        const double xi = x[i], wi = w[i], w_hat = quantized_weight(wq, type, n_in, j, i);
        magnitude += fabs(xi * w_hat);
        bound += fabs(xi) * fabs(wi - w_hat) + fabs(w_hat) * xq[i / 32].d / 2;
    }
    return bound + (n_in + 4) * FLT_EPSILON * magnitude;
}

static inline MatmulQ8Fn *format_matmul(const QuantFormat *f, const Kernels *k) { return quantized_matmul(k, f->type); }

// The F16 value nearest d toward zero, |d| < 65504: the test quantizers' GGUF scales (kernels.h, "GGUF's Q8_0
// and Q4_0"), as F16 bits. Below F16's smallest normal, 2⁻¹⁴, a subnormal: |d| in steps of 2⁻²⁴.
static inline uint16_t f16_toward_zero(float d) {
    uint32_t bits;
    memcpy(&bits, &d, sizeof bits);
    const uint32_t sign = bits >> 31, exp = bits >> 23 & 0xff, mant = bits & 0x7fffff;
    if (fabsf(d) < 0x1p-14f) return (uint16_t)(sign << 15 | (uint32_t)(fabsf(d) * 0x1p24f));
    return (uint16_t)(sign << 15 | (exp - 112) << 10 | mant >> 13);
}

// Rows [n_rows ≤ 16, ld] (floats) into one panel as the loader packs a GGUF file's rows (pack_row: q8_0_pack_row,
// q4_0_pack_row), each row first quantized to GGUF blocks of block_bytes by quantize_block(block, x[32]); rows
// n_rows..15 and inputs past n_in are zeros.
static inline void gguf_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in,
                                       size_t panel_bytes, int block_bytes,
                                       void (*quantize_block)(uint8_t *block, const float *x),
                                       void (*pack_row)(uint8_t *panel, int r, const uint8_t *blocks, int n_in)) {
    const int nb = q8_blocks(n_in);
    uint8_t *blocks = calloc((size_t)nb, (size_t)block_bytes);
    memset(panel, 0, panel_bytes);
    for (int r = 0; r < Q8_PANEL; r++) {
        for (int b = 0; b < nb; b++) {
            float x[Q8_BLOCK] = {0};
            for (int i = 0; i < Q8_BLOCK && r < n_rows && b * Q8_BLOCK + i < n_in; i++)
                x[i] = rows[(size_t)r * ld + b * Q8_BLOCK + i];
            quantize_block(blocks + (size_t)b * block_bytes, x);
        }
        pack_row(panel, r, blocks, n_in);
    }
    free(blocks);
}

// A random matrix [n_out, n_in] (row-major floats, a different magnitude per row, row 0's first block all zeros)
// quantized into f's panels, 64-byte aligned.   *rows_out: [n_out, n_in], the floats
static inline uint8_t *random_quantized_matrix(float **rows_out, const QuantFormat *f, int n_out, int n_in) {
    float *rows = malloc(sizeof(float) * (size_t)n_out * n_in);
    for (int j = 0; j < n_out; j++) {
        const float spread = test_rand_uniform(0.01f, 2.0f);
        for (int i = 0; i < n_in; i++)
            rows[(size_t)j * n_in + i] = j == 0 && i < 32 ? 0.0f : test_rand_uniform(-spread, spread);
    }
    void *w = NULL;
    if (posix_memalign(&w, 64, f->matrix_bytes(n_out, n_in))) abort();
    for (int j = 0; j < n_out; j += Q8_PANEL)  // q4's panels have as many rows (kernels.h)
        f->quantize_panel((uint8_t *)w + (size_t)(j / Q8_PANEL) * f->panel_bytes(n_in), rows + (size_t)j * n_in,
                          n_out - j < Q8_PANEL ? n_out - j : Q8_PANEL, n_in, n_in);
    *rows_out = rows;
    return w;
}

// The layout places every quant and every scale once, inside matrix_bytes, none on another; a group of 4 inputs
// of a row is 4 consecutive bytes; a block's 16 rows × 32 inputs are one run of block_bytes.
static inline void check_quantized_layout(const QuantFormat *f) {
    const int shapes[][2] = {{1, 1}, {3, 33}, {16, 32}, {17, 100}, {40, 768}};
    for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
        const int n_out = shapes[c][0], n_in = shapes[c][1], nb = q8_blocks(n_in);
        const size_t size = f->matrix_bytes(n_out, n_in);
        unsigned char *seen = calloc(size, 1);  // bit 0: low nibble taken, bit 1: high nibble, 4: a scale's byte
        for (int j = 0; j < (n_out + 15) / 16 * 16; j++)
            for (int i = 0; i < nb * 32; i++) {
                const size_t at = f->quant_index(n_in, j, i);
                const unsigned nibbles = f->quant_nibbles(i);
                CHECK(at < size && !(seen[at] & nibbles), "%s [%d, %d]: q[%d, %d] at %zu (size %zu)", f->name, n_out,
                      n_in, j, i, at, size);
                if (at < size) seen[at] |= nibbles;
                if (i % 4) CHECK(at == f->quant_index(n_in, j, i - 1) + 1, "%s: q[%d, %d] not after q[%d, %d]",
                                 f->name, j, i, j, i - 1);
                const size_t block = f->quant_index(n_in, j / 16 * 16, i / 32 * 32);
                CHECK(at >= block && at < block + (size_t)f->block_bytes, "%s: q[%d, %d] outside its block", f->name,
                      j, i);
            }
        for (int j = 0; j < (n_out + 15) / 16 * 16; j++)
            for (int b = 0; b < nb; b++) {
                const size_t at = 2 * f->scale_index(n_in, j, b);
                CHECK(at + 1 < size && !seen[at] && !seen[at + 1], "%s [%d, %d]: scale of row %d block %d at %zu",
                      f->name, n_out, n_in, j, b, at);
                if (at + 1 < size) seen[at] = seen[at + 1] = 4;
            }
        free(seen);
    }
}

// Variant k's matmul against the reference, bit for bit (tolerance 0: kernels.h fixes every float operation and
// its order, and the integer sums are exact), for a random n_out, [j0, j1) and ld_out, with or without bias,
// leaving the rest of out untouched. Since the reference computes each (t, j) from row t and row j alone, this is
// also the batch-invariance test: any T, any split of the rows, the same bits. With k the scalar variant, the
// reference itself against the float product, within f->reference_bound. n_out reaches 81 (six panels) so that
// the AVX-512 walk's pairs of whole panels at T = 1 (panel_walk_avx512.h) meet partial first panels and lone last ones.
static inline void check_quantized_matmul(const QuantFormat *f, const Kernels *k, int T, int n_in, bool with_bias) {
    const int n_out = random_odd(1, 81), ld_out = n_out + test_rand_int(0, 3), nb = q8_blocks(n_in);
    int j0 = 0, j1 = n_out;
    if (test_rand_int(0, 1)) {
        j0 = test_rand_int(0, n_out - 1);
        j1 = test_rand_int(j0 + 1, n_out);
    }
    float *rows, *x = random_floats(T * n_in, -1.0f, 1.0f);
    uint8_t *w = f->random_matrix ? f->random_matrix(&rows, n_out, n_in)
                                  : random_quantized_matrix(&rows, f, n_out, n_in);
    Q8Block *xq = malloc(sizeof(Q8Block) * (size_t)(T * nb));
    q8_quantize_rows(xq, x, T, n_in, n_in);
    float *bias = with_bias ? random_floats(n_out, -1.0f, 1.0f) : NULL;
    float *ref = untouched_floats(T * ld_out), *out = untouched_floats(T * ld_out);
    format_matmul(f, &kernels_scalar)(ref, xq, w, bias, T, n_in, ld_out, j0, j1);
    format_matmul(f, k)(out, xq, w, bias, T, n_in, ld_out, j0, j1);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < ld_out; j++) {
            const float a = out[t * ld_out + j], r = ref[t * ld_out + j];
            if (j < j0 || j >= j1) {
                CHECK(same_bits(a, UNTOUCHED) && same_bits(r, UNTOUCHED), "%s %s T=%d n_in=%d j0=%d j1=%d: wrote "
                      "out[%d, %d]", k->name, f->name, T, n_in, j0, j1, t, j);
                continue;
            }
            CHECK(same_bits(a, r), "%s %s T=%d n_in=%d n_out=%d bias=%d: out[%d, %d] = %.9g, reference %.9g",
                  k->name, f->name, T, n_in, n_out, with_bias, t, j, a, r);
            if (k != &kernels_scalar) continue;
            const float *xt = x + (size_t)t * n_in, *wj = rows + (size_t)j * n_in;
            double exact = bias ? bias[j] : 0.0;
            for (int i = 0; i < n_in; i++) exact += (double)xt[i] * wj[i];
            const double bound = f->reference_bound(xt, xq + (size_t)t * nb, wj, w, n_in, j, bias ? bias[j] : 0.0);
            CHECK(fabs(r - exact) <= bound, "reference %s T=%d n_in=%d: out[%d, %d] = %.9g, exact %.9g (bound %.3g)",
                  f->name, T, n_in, t, j, r, exact, bound);
        }
    free(rows);
    free(x);
    free(w);
    free(xq);
    free(bias);
    free(ref);
    free(out);
}

// Every variant's matmul against the reference, bit for bit, on a matrix w [32, 256] of f's made to put the
// integer products at their largest, against activations +1 or −1 (q_x = ±127) a row, T = 1..16.   label: what w
// holds, for the messages
static inline void check_quantized_matmul_on_extremes(const QuantFormat *f, const void *w, const char *label) {
    enum { N_OUT = 32, N_IN = 256, MAX_T = 16 };
    const int nb = q8_blocks(N_IN);
    float *x = malloc(sizeof(float) * MAX_T * N_IN);
    for (int i = 0; i < MAX_T * N_IN; i++) x[i] = (i / N_IN) % 2 ? -1.0f : 1.0f;
    Q8Block *xq = malloc(sizeof(Q8Block) * MAX_T * (size_t)nb);
    q8_quantize_rows(xq, x, MAX_T, N_IN, N_IN);
    float *ref = malloc(sizeof(float) * MAX_T * N_OUT), *out = malloc(sizeof(float) * MAX_T * N_OUT);
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int T = 1; T <= MAX_T; T++) {
        format_matmul(f, &kernels_scalar)(ref, xq, w, NULL, T, N_IN, N_OUT, 0, N_OUT);
        for (int v = 0; v < n; v++) {
            format_matmul(f, list[v])(out, xq, w, NULL, T, N_IN, N_OUT, 0, N_OUT);
            for (int t = 0; t < T; t++)
                for (int j = 0; j < N_OUT; j++)
                    CHECK(same_bits(out[t * N_OUT + j], ref[t * N_OUT + j]), "%s %s %s T=%d: out[%d, %d] = %.9g, "
                          "reference %.9g", list[v]->name, f->name, label, T, t, j, out[t * N_OUT + j],
                          ref[t * N_OUT + j]);
        }
    }
    free(x);
    free(xq);
    free(ref);
    free(out);
}

// Every variant's matmul against the reference, bit for bit, where the integer products are largest: every quant
// byte of the matrix `quant` (q8: 0x81, q = −127; q4: 0xff, both nibbles u = 15, q = 7), every scale (and min) 1, every
// activation +1 or −1 (q_x = ±127), T = 1..16. The AVX2 kernels hold sums of products in 16 bits (vpmaddubsw's
// pairs; q8: a pair, 2 · 127 · 127 = 32258; q4: two groups' pairs, 4 · 15 · 127 = 7620, all below 2¹⁵): these
// inputs make every such sum its largest, with both signs, in every block.
static inline void check_quantized_matmul_at_bounds(const QuantFormat *f, uint8_t quant, uint16_t one) {
    enum { N_OUT = 32, N_IN = 256 };
    const int nb = q8_blocks(N_IN);
    uint8_t *w = aligned_alloc(64, f->matrix_bytes(N_OUT, N_IN));
    memset(w, quant, f->matrix_bytes(N_OUT, N_IN));
    for (int j = 0; j < N_OUT; j++)
        for (int b = 0; b < nb; b++) {
            ((uint16_t *)w)[f->scale_index(N_IN, j, b)] = one;
            if (f->min_index) ((uint16_t *)w)[f->min_index(N_IN, j, b)] = one;
        }
    char label[32];
    snprintf(label, sizeof label, "quants 0x%02x", quant);
    check_quantized_matmul_on_extremes(f, w, label);
    free(w);
}

// The a-th n_in a format is checked at: n_in_sizes[a], or for a K-quant (rows of whole 256-weight super-blocks)
// that rounded up to a multiple of 256 — 0 where that repeats the one before or passes 1024 (one super-block and
// four are checked: the test stays fast).
static inline int format_n_in(const QuantFormat *f, int a) {
    if (!k_quant(f->type)) return n_in_sizes[a];
    const int n_in = (n_in_sizes[a] + K_SUPER - 1) / K_SUPER * K_SUPER;
    return n_in > 1024 || (a > 0 && n_in == (n_in_sizes[a - 1] + K_SUPER - 1) / K_SUPER * K_SUPER) ? 0 : n_in;
}

// check_quantized_matmul for every variant this CPU runs, every n_in (format_n_in) and T of T_sizes, with and without
// bias; the scalar variant (the reference against the float product) at every fourth T.
static inline void check_every_quantized_matmul(const QuantFormat *f) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        CHECK(format_matmul(f, list[v]), "%s: no matmul_%s", list[v]->name, f->name);
        for (int a = 0; a < N_IN_SIZES; a++)
            for (int b = 0; b < T_SIZES && format_n_in(f, a); b++)
                for (int with_bias = 0; with_bias <= 1; with_bias++)
                    if (list[v] != &kernels_scalar || b % 4 == 0)
                        check_quantized_matmul(f, list[v], T_sizes[b], format_n_in(f, a), with_bias);
    }
}

#if defined(__x86_64__)
// check_quantized_matmul for the avx512 variant as a CPU without AVX512_VNNI runs it (AVX2's matmul, dispatch.c), every
// n_in and T, with bias at every other T.
static inline void check_quantized_matmul_without_vnni(const QuantFormat *f) {
    for (int a = 0; a < N_IN_SIZES; a++)
        for (int b = 0; b < T_SIZES && format_n_in(f, a); b++)
            check_quantized_matmul(f, kernels_avx512_for(false, false), T_sizes[b], format_n_in(f, a), b % 2 == 1);
}
#endif

#endif
