// test_kernels.c — every SIMD kernel variant this CPU can run, against the scalar reference on fresh random inputs
// of awkward sizes (vector tails, blocking remainders), bit for bit (kernels.h, the canonical order: every kernel
// but matmul_bf16_dot), and the batch-invariance contract of kernels.h: a row's bits do not depend on T, j0 or j1.
//
// The reference itself is checked against the exact value (in doubles, or libm's) within the usual rounding-error
// bounds (Higham, "Accuracy and Stability of Numerical Algorithms", §3.1): a float sum or dot product of n terms
// computed in any order is within γ_n·Σ|terms| of the exact value, γ_n ≈ n·2^-24; two of them, in different
// orders, are within n·FLT_EPSILON·Σ|terms| of each other.
//
// `make test-neon` builds this file with kernels/ and the harness alone: nothing from src/ but headers.
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "kernel_inputs.h"
#include "kernels.h"
#include "qk.h"

static const char *const type_names[WEIGHT_TYPES] = {"F32", "F16", "BF16"};

// ---- inputs -------------------------------------------------------------------------------------------------
//
// Every array is allocated at exactly its size, so that AddressSanitizer sees any access past the end (also in
// kernel_inputs.h).

// W: [n_out, n_in] of `type`, 64-byte aligned as kernels.h requires, magnitudes below 2. F16 weights include
// zeros and subnormals (exponent field 0); BF16 ones span 2^-17 .. 2. posix_memalign rather than aligned_alloc,
// which (in C11, and under AddressSanitizer) wants the size a multiple of 64.
static void *random_weights(WeightType type, int n_out, int n_in) {
    size_t count = (size_t)n_out * n_in;
    void *w = NULL;
    if (posix_memalign(&w, 64, count * (type == WEIGHT_F32 ? 4 : 2))) return NULL;
    for (size_t i = 0; i < count; i++) {
        uint16_t sign = (uint16_t)(test_rand_u64() & 0x8000);
        switch (type) {
        case WEIGHT_F16:
            ((uint16_t *)w)[i] = sign | (uint16_t)(test_rand_int(0, 15) << 10) | (uint16_t)test_rand_int(0, 0x3ff);
            break;
        case WEIGHT_BF16:
            ((uint16_t *)w)[i] = sign | (uint16_t)(test_rand_int(110, 127) << 7) | (uint16_t)test_rand_int(0, 0x7f);
            break;
        default: ((float *)w)[i] = test_rand_uniform(-1.0f, 1.0f); break;
        }
    }
    return w;
}

static float weight_value(const void *w, WeightType type, size_t index) {
    switch (type) {
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)w)[index]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)w)[index]);
    default: return ((const float *)w)[index];
    }
}

// The row-major matrix w [n_out, n_in] in the layout kernel variant k reads (a copy, padding zero-filled).
static void *in_layout(const Kernels *k, WeightType type, const void *w, int n_out, int n_in) {
    const size_t elem = type == WEIGHT_F32 ? 4 : 2, count = weight_elements(k->panels, n_out, n_in);
    void *packed = NULL;
    if (posix_memalign(&packed, 64, count * elem)) return NULL;
    memset(packed, 0, count * elem);
    for (int j = 0; j < n_out; j++)
        for (int i = 0; i < n_in; i++)
            memcpy((uint8_t *)packed + weight_index(k->panels, in_pair_order(k, type), n_in, j, i) * elem,
                   (const uint8_t *)w + ((size_t)j * n_in + i) * elem, elem);
    return packed;
}

// cos and sin under names that the rope test's arrays do not shadow.
static double cos_of(double angle) { return cos(angle); }
static double sin_of(double angle) { return sin(angle); }

// ---- the kernel tables --------------------------------------------------------------------------------------

TEST(kernels_table_complete) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    CHECK(n >= 1 && list[0] == &kernels_scalar, "the scalar reference must come first (n = %d)", n);
    for (int v = 0; v < n; v++) {
        const Kernels *k = list[v];
        for (int type = 0; type < WEIGHT_TYPES; type++)
            CHECK(k->matmul[type], "%s: no matmul for %s", k->name, type_names[type]);
        CHECK(k->matmul_q8 && k->quantize_q8, "%s: no matmul_q8 or quantize_q8", k->name);
        CHECK(k->layernorm && k->rmsnorm && k->rope && k->silu_mul && k->gelu_tanh && k->gelu_erf && k->softmax &&
              k->row_range && k->exp_sum && k->scale_to_doubles && k->attention && k->add,
              "%s: a kernel is missing", k->name);
        for (int u = 0; u < v; u++) CHECK(strcmp(list[u]->name, k->name), "%s listed twice", k->name);
    }
}

TEST(kernels_select_honours_env) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    unsetenv("SPECDEC_ISA");
    CHECK(kernels_select(NULL, 0) == list[n - 1], "without SPECDEC_ISA the best variant, %s, should win",
          list[n - 1]->name);
    for (int v = 0; v < n; v++) {
        setenv("SPECDEC_ISA", list[v]->name, 1);
        const Kernels *k = kernels_select(NULL, 0);
        CHECK(k == list[v], "SPECDEC_ISA=%s selected %s", list[v]->name, k ? k->name : "nothing");
    }
    setenv("SPECDEC_ISA", "scalar", 1);
    CHECK(kernels_select(NULL, 0) == &kernels_scalar, "SPECDEC_ISA=scalar must select the reference");
    // A name this CPU cannot run (issue 48: the reason suggested avx512 on a CPU without it): the reason lists the
    // variants it can run, and no other.
    static const char *const names[] = {"scalar", "avx2", "avx512", "neon", "vax"};
    for (size_t w = 0; w < sizeof names / sizeof *names; w++) {
        bool runs = false;
        for (int v = 0; v < n; v++) runs |= strcmp(list[v]->name, names[w]) == 0;
        if (runs) continue;
        setenv("SPECDEC_ISA", names[w], 1);
        char why[160] = "";
        const Kernels *k = kernels_select(why, sizeof why);
        CHECK(k == NULL, "SPECDEC_ISA=%s selected %s", names[w], k ? k->name : "");
        for (size_t o = 0; o + 1 < sizeof names / sizeof *names; o++) {
            bool available = false;
            for (int v = 0; v < n; v++) available |= strcmp(list[v]->name, names[o]) == 0;
            char listed[16];
            snprintf(listed, sizeof listed, " %s", names[o]);
            CHECK((strstr(why, listed) != NULL) == available, "SPECDEC_ISA=%s: \"%s\" %s %s", names[w], why,
                  available ? "omits" : "suggests", names[o]);
        }
    }
    unsetenv("SPECDEC_ISA");
}

// ---- matmul -------------------------------------------------------------------------------------------------

// Activations x [T, ld_x] (first n_in columns) rounded to BF16 for variant k (in its slice order), as a
// matmul_bf16_dot takes them: [T, panel_row_length(n_in)].
static uint16_t *bf16_rows_for(const Kernels *k, const float *x, int T, int n_in, int ld_x) {
    uint16_t *xb = malloc(sizeof(uint16_t) * (size_t)T * panel_row_length(n_in));
    bf16_round_rows(xb, x, T, n_in, ld_x, in_pair_order(k, WEIGHT_BF16));
    return xb;
}

// One random case of `k` against the reference: out[t, j] for j in a random [j0, j1) (half the time all of
// [0, n_out)), the rest of each ld_out-wide row untouched; the rows of x are ld_x ≥ n_in apart, with random
// values in between that must not count. `matmul`: the reference's bits, and the reference within the bound of a
// sum of n_in products, plus one rounding for the bias, of the exact value:
//     |ref − exact| ≤ (n_in + 4) · FLT_EPSILON · (Σ_i |x[t, i] · W[j, i]| + |bias[j]|).
// dot: matmul_bf16_dot (BF16 weights) on x rounded to BF16, not in the canonical order (kernels.h): within that
// bound of the reference, over the rounded x (each product of two BF16 values is exact, so only the order of the
// sums differs).
static void check_matmul(const Kernels *k, WeightType type, bool dot, int T, int n_in, bool with_bias) {
    const int n_out = random_odd(1, 19), ld_out = n_out + test_rand_int(0, 3), ld_x = n_in + test_rand_int(0, 20);
    int j0 = 0, j1 = n_out;
    if (test_rand_int(0, 1)) {
        j0 = test_rand_int(0, n_out - 1);
        j1 = test_rand_int(j0 + 1, n_out);
    }
    float *x = random_floats(T * ld_x, -1.0f, 1.0f);
    void *w = random_weights(type, n_out, n_in), *w_k = in_layout(k, type, w, n_out, n_in);
    float *bias = with_bias ? random_floats(n_out, -1.0f, 1.0f) : NULL;
    float *ref = untouched_floats(T * ld_out), *out = untouched_floats(T * ld_out);
    const char *what = dot ? "BF16 dot" : type_names[type];
    if (dot) {
        uint16_t *x_ref = bf16_rows_for(&kernels_scalar, x, T, n_in, ld_x), *x_k = bf16_rows_for(k, x, T, n_in, ld_x);
        kernels_scalar.matmul_bf16_dot(ref, x_ref, w, bias, T, n_in, ld_out, j0, j1);
        k->matmul_bf16_dot(out, x_k, w_k, bias, T, n_in, ld_out, j0, j1);
        free(x_ref), free(x_k);
        for (int i = 0; i < T * ld_x; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));  // the values multiplied
    } else {
        kernels_scalar.matmul[type](ref, x, w, bias, T, n_in, ld_x, ld_out, j0, j1);
        k->matmul[type](out, x, w_k, bias, T, n_in, ld_x, ld_out, j0, j1);
    }
    for (int t = 0; t < T; t++)
        for (int j = 0; j < ld_out; j++) {
            float a = out[t * ld_out + j], b = ref[t * ld_out + j];
            if (j < j0 || j >= j1) {
                CHECK(same_bits(a, UNTOUCHED), "%s %s T=%d n_in=%d j0=%d j1=%d: wrote out[%d, %d] = %g", k->name,
                      what, T, n_in, j0, j1, t, j, a);
                continue;
            }
            double magnitude = bias ? fabs(bias[j]) : 0.0, exact = bias ? bias[j] : 0.0;
            for (int i = 0; i < n_in; i++) {
                const double product = (double)x[t * ld_x + i] * weight_value(w, type, (size_t)j * n_in + i);
                magnitude += fabs(product);
                exact += product;
            }
            double tol = (n_in + 4) * FLT_EPSILON * magnitude;
            CHECK(dot ? fabs(a - b) <= tol : same_bits(a, b) && fabs(b - exact) <= tol,
                  "%s %s T=%d n_in=%d n_out=%d bias=%d: out[%d, %d] = %.9g, reference %.9g, exact %.9g (tol %.3g)",
                  k->name, what, T, n_in, n_out, with_bias, t, j, a, b, exact, tol);
        }
    free(x);
    free(w);
    free(w_k);
    free(bias);
    free(ref);
    free(out);
}

// The panel layout (kernels.h) places every W[j, i] once, inside weight_elements; 16 weights of a row that start
// at a multiple of 16 lie side by side — in order, or in pair order: elements l and l + 8 of the slice in places
// 2l and 2l + 1 — and the 4 rows of a panel alternate slice by slice, so that a panel is one run of memory:
// slice k of row 4p + r starts (4k + r) · 16 weights into the panel.
TEST(kernels_panel_layout) {
    const int shapes[][2] = {{1, 1}, {3, 17}, {4, 16}, {5, 33}, {8, 768}, {13, 100}};
    for (int pairs = 0; pairs < 2; pairs++)
        for (size_t c = 0; c < sizeof shapes / sizeof *shapes; c++) {
            const int n_out = shapes[c][0], n_in = shapes[c][1];
            const size_t size = weight_elements(true, n_out, n_in);
            unsigned char *seen = calloc(size, 1);
            for (int j = 0; j < n_out; j++)
                for (int i = 0; i < n_in; i++) {
                    const size_t at = panel_index(n_in, pairs, j, i);
                    CHECK(at < size && !seen[at], "[%d, %d]: W[%d, %d] at %zu (size %zu) %s", n_out, n_in, j, i, at,
                          size, at < size ? "taken twice" : "outside");
                    if (at < size) seen[at] = 1;
                    const size_t slice =
                        (size_t)(j / 4) * 4 * panel_row_length(n_in) + ((size_t)(i / 16) * 4 + j % 4) * 16;
                    const int e = i % 16, place = pairs ? (e < 8 ? 2 * e : 2 * (e - 8) + 1) : e;
                    CHECK(at == slice + (size_t)place, "[%d, %d]%s: W[%d, %d] at %zu, not %zu", n_out, n_in,
                          pairs ? " in pair order" : "", j, i, at, slice + (size_t)place);
                }
            CHECK(size == (size_t)(n_out + 3) / 4 * 4 * panel_row_length(n_in), "[%d, %d]: %zu elements", n_out,
                  n_in, size);
            free(seen);
        }
#if defined(__x86_64__)
    for (int v = 0; v < 2; v++) {
        const Kernels *k = v ? &kernels_avx512 : &kernels_avx2;
        CHECK(in_pair_order(k, WEIGHT_BF16) && !in_pair_order(k, WEIGHT_F16) && !in_pair_order(k, WEIGHT_F32),
              "%s: pair order is for BF16 alone", k->name);
    }
#endif
}

// Rows that kernels read side by side: whole lines, as few floats of padding as that takes, never 4 kB apart.
TEST(kernels_row_stride) {
    for (size_t n = 1; n <= 5000; n++) {
        const size_t ld = row_stride(n);
        CHECK(ld >= n && ld % 16 == 0 && ld % 1024 != 0 && ld - n < 32, "row_stride(%zu) = %zu", n, ld);
    }
    CHECK(row_stride(3072) == 3088 && row_stride(1024) == 1040 && row_stride(768) == 768, "GPT-2's strides");
}

TEST(kernels_matmul_matches_scalar) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int type = 0; type < WEIGHT_TYPES; type++)
            for (int a = 0; a < N_IN_SIZES; a++)
                for (int b = 0; b < T_SIZES; b++)
                    for (int with_bias = 0; with_bias <= 1; with_bias++)
                        check_matmul(list[v], type, false, T_sizes[b], n_in_sizes[a], with_bias);
    }
}

static void check_rows_identical(const char *what, const Kernels *k, WeightType type, int n_in, const float *got,
                                 const float *want, int rows, int n_out) {
    for (int t = 0; t < rows; t++)
        for (int j = 0; j < n_out; j++)
            CHECK(same_bits(got[t * n_out + j], want[t * n_out + j]),
                  "%s %s n_in=%d, %s: out[%d, %d] = %.9g, with the whole batch %.9g", k->name, type_names[type], n_in,
                  what, t, j, got[t * n_out + j], want[t * n_out + j]);
}

// Rows [t0, t0 + T) of x (rows n_in apart) times W with k's matmul, or (xb not NULL) with its matmul_bf16_dot on
// the same rows of xb, x rounded to BF16 (bf16_rows_for).   out: [T, n_out], columns [j0, j1)
static void matmul_rows_of(const Kernels *k, WeightType type, const float *x, const uint16_t *xb, int t0, int T,
                           const void *w, const float *bias, int n_in, int n_out, float *out, int j0, int j1) {
    if (xb)
        k->matmul_bf16_dot(out, xb + (size_t)t0 * panel_row_length(n_in), w, bias, T, n_in, n_out, j0, j1);
    else
        k->matmul[type](out, x + (size_t)t0 * n_in, w, bias, T, n_in, n_in, n_out, j0, j1);
}

// Batch invariance (kernels.h): the rows of one T-row call, bit for bit, equal the same rows computed one at a
// time, as a sub-batch starting anywhere, and in any split of [0, n_out) into j ranges. dot: of matmul_bf16_dot.
static void check_batch_invariance(const Kernels *k, WeightType type, bool dot, int n_in) {
    const int T = test_rand_int(2, 64), n_out = random_odd(1, 41);  // T > 42 at n_in = 3072: chunk by chunk
    float *x = random_floats(T * n_in, -1.0f, 1.0f), *bias = random_floats(n_out, -1.0f, 1.0f);
    void *rows = random_weights(type, n_out, n_in), *w = in_layout(k, type, rows, n_out, n_in);
    uint16_t *xb = dot ? bf16_rows_for(k, x, T, n_in, n_in) : NULL;
    float *whole = malloc(sizeof(float) * (size_t)(T * n_out)), *part = malloc(sizeof(float) * (size_t)(T * n_out));
    matmul_rows_of(k, type, x, xb, 0, T, w, bias, n_in, n_out, whole, 0, n_out);

    for (int t = 0; t < T; t++) matmul_rows_of(k, type, x, xb, t, 1, w, bias, n_in, n_out, part + t * n_out, 0, n_out);
    check_rows_identical(dot ? "BF16 dot, one row at a time" : "one row at a time", k, type, n_in, part, whole, T,
                         n_out);

    const int t0 = test_rand_int(0, T - 1), t1 = test_rand_int(t0 + 1, T);
    matmul_rows_of(k, type, x, xb, t0, t1 - t0, w, bias, n_in, n_out, part, 0, n_out);
    char what[64];
    snprintf(what, sizeof what, "%srows %d..%d as a batch", dot ? "BF16 dot, " : "", t0, t1);
    check_rows_identical(what, k, type, n_in, part, whole + t0 * n_out, t1 - t0, n_out);

    for (int j0 = 0, j1; j0 < n_out; j0 = j1) {
        j1 = j0 + test_rand_int(1, 7);
        if (j1 > n_out) j1 = n_out;
        matmul_rows_of(k, type, x, xb, 0, T, w, bias, n_in, n_out, part, j0, j1);
    }
    check_rows_identical(dot ? "BF16 dot, columns in random ranges" : "columns in random ranges", k, type, n_in,
                         part, whole, T, n_out);
    free(x);
    free(bias);
    free(rows);
    free(w);
    free(xb);
    free(whole);
    free(part);
}

TEST(kernels_matmul_batch_invariant) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++)
        for (int type = 0; type < WEIGHT_TYPES; type++)
            for (int a = 0; a < N_IN_SIZES; a++) check_batch_invariance(list[v], type, false, n_in_sizes[a]);
}

// ---- BF16 weights against BF16 activations (matmul_bf16_dot) -----------------------------------------------

// f32_to_bf16 rounds to the nearest BF16 value, ties to even; every BF16 value converts to itself; ±inf stay,
// values past the largest finite BF16's halfway point become inf, NaNs stay NaNs.
TEST(kernels_bf16_rounding) {
    const struct { uint32_t in; uint16_t out; } cases[] = {
        {0x3f800000u, 0x3f80}, {0x3f808000u, 0x3f80},  // 1 + 2^-8: a tie, to the even 1
        {0x3f818000u, 0x3f82},                          // 1 + 3·2^-8: a tie, to the even 1 + 2^-6
        {0x3f808001u, 0x3f81}, {0x3f807fffu, 0x3f80},  // just above and below the tie
        {0xbf808001u, 0xbf81}, {0x7f800000u, 0x7f80}, {0xff800000u, 0xff80},
        {0x7f7fffffu, 0x7f80}, {0x00000001u, 0x0000}, {0x00000000u, 0x0000}, {0x80000000u, 0x8000}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        union { uint32_t u; float f; } v = {cases[c].in};
        CHECK(f32_to_bf16(v.f) == cases[c].out, "0x%08x → 0x%04x, expected 0x%04x", cases[c].in, f32_to_bf16(v.f),
              cases[c].out);
    }
    union { uint32_t u; float f; } nan = {0x7f800001u};
    CHECK((f32_to_bf16(nan.f) & 0x7f80) == 0x7f80 && (f32_to_bf16(nan.f) & 0x7f), "a NaN became 0x%04x",
          f32_to_bf16(nan.f));
    for (int i = 0; i < 100000; i++) {
        const float x = test_rand_uniform(-1e4f, 1e4f), r = bf16_to_f32(f32_to_bf16(x));
        CHECK(f32_to_bf16(r) == f32_to_bf16(x), "rounding %g twice differs", x);
        // r's two neighbours in the BF16 encoding; past ±0 the encoding wraps to a NaN, which is never nearer
        // (x can be exactly 0: the draw hits it about once in 170 runs of this loop).
        const float up = bf16_to_f32((uint16_t)(f32_to_bf16(x) + 1)), down = bf16_to_f32((uint16_t)(f32_to_bf16(x) - 1));
        CHECK(!(fabsf(up - x) < fabsf(r - x)) && !(fabsf(down - x) < fabsf(r - x)), "%g rounded to %g, not the nearest",
              x, r);
    }
}

// bf16_round_rows writes each row's rounded values in the slice order asked for, zero-padded to whole slices.
TEST(kernels_bf16_round_rows) {
    const int T = 3, n_in = 37, ld_x = 41, ld = panel_row_length(n_in);
    float *x = random_floats(T * ld_x, -2.0f, 2.0f);
    uint16_t *out = malloc(sizeof(uint16_t) * (size_t)(T * ld));
    for (int pairs = 0; pairs < 2; pairs++) {
        bf16_round_rows(out, x, T, n_in, ld_x, pairs);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < ld; i++) {
                const uint16_t got = out[t * ld + i / 16 * 16 + slice_place(pairs, i % 16)];
                const uint16_t want = i < n_in ? f32_to_bf16(x[t * ld_x + i]) : 0;
                CHECK(got == want, "pairs=%d: element [%d, %d] is 0x%04x, expected 0x%04x", pairs, t, i, got, want);
            }
    }
    free(x);
    free(out);
}

// Every variant with a BF16 dot product against the scalar reference, on the sizes of `matmul`'s test.
TEST(kernels_matmul_bf16_dot_matches_scalar) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    CHECK(kernels_scalar.matmul_bf16_dot, "the scalar reference has no matmul_bf16_dot");
    for (int v = 0; v < n; v++) {
        if (list[v] == &kernels_scalar || !list[v]->matmul_bf16_dot) continue;
        for (int a = 0; a < N_IN_SIZES; a++)
            for (int b = 0; b < T_SIZES; b++)
                for (int with_bias = 0; with_bias <= 1; with_bias++)
                    check_matmul(list[v], WEIGHT_BF16, true, T_sizes[b], n_in_sizes[a], with_bias);
    }
}

// Batch invariance of matmul_bf16_dot, as of `matmul`.
TEST(kernels_matmul_bf16_dot_batch_invariant) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++)
        for (int a = 0; a < N_IN_SIZES && list[v]->matmul_bf16_dot; a++)
            check_batch_invariance(list[v], WEIGHT_BF16, true, n_in_sizes[a]);
}

// ---- row kernels --------------------------------------------------------------------------------------------

static const int row_sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 100, 768, 768 + 5};
enum { ROW_SIZES = sizeof row_sizes / sizeof *row_sizes };

// out = (x − μ)/σ · γ + β: the reference's bits; the reference against the exact value (in doubles). The means
// differ by at most (n + 2)·FLT_EPSILON·mean|x|; the variance, a sum of squares, changes only to second order with
// μ, and its rounding is a relative (n + 4)·FLT_EPSILON; so
//     |ref − exact| ≤ |γ_i|/σ · FLT_EPSILON · ((n + 2)·mean|x| + (n + 8)·|x_i − μ|) + 2·FLT_EPSILON·(|ref| + |β_i|)
TEST(kernels_layernorm_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int n = row_sizes[s];
            const float offset = test_rand_uniform(-1.0f, 1.0f), spread = test_rand_uniform(0.5f, 2.0f);
            float *x = random_floats(n, offset - spread, offset + spread);
            float *gamma = random_floats(n, -2.0f, 2.0f), *beta = random_floats(n, -1.0f, 1.0f);
            float *ref = untouched_floats(n), *out = untouched_floats(n);
            kernels_scalar.layernorm(ref, x, gamma, beta, n, 1e-5f);
            list[v]->layernorm(out, x, gamma, beta, n, 1e-5f);
            double mean = 0.0, mean_abs = 0.0, var = 0.0;
            for (int i = 0; i < n; i++) {
                mean += x[i] / n;
                mean_abs += fabs(x[i]) / n;
            }
            for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean) / n;
            const double inv_std = 1.0 / sqrt(var + 1e-5);
            for (int i = 0; i < n; i++) {
                double spread_error = (n + 2) * mean_abs + (n + 8) * fabs(x[i] - mean);
                double tol = fabs(gamma[i]) * inv_std * FLT_EPSILON * spread_error +
                             2 * FLT_EPSILON * (fabs(ref[i]) + fabs(beta[i]));
                const double exact = (x[i] - mean) * inv_std * gamma[i] + beta[i];
                CHECK(same_bits(out[i], ref[i]) && fabs(ref[i] - exact) <= tol,
                      "%s n=%d: out[%d] = %.9g, reference %.9g, exact %.9g (tol %.3g)", list[v]->name, n, i, out[i],
                      ref[i], exact, tol);
            }
            free(x);
            free(gamma);
            free(beta);
            free(ref);
            free(out);
        }
    }
}

// out = x / rms(x) · γ: the reference's bits; the reference against the exact value. The sum of squares (n
// terms) is within a relative n·FLT_EPSILON, which moves 1/rms by half that; the two products round twice more:
//     |ref − exact| ≤ (n/2 + 4) · FLT_EPSILON · |x_i γ_i| / rms
TEST(kernels_rmsnorm_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int n = row_sizes[s];
            const float spread = test_rand_uniform(0.01f, 100.0f);
            float *x = random_floats(n, -spread, spread), *gamma = random_floats(n, -2.0f, 2.0f);
            float *ref = untouched_floats(n), *out = untouched_floats(n);
            kernels_scalar.rmsnorm(ref, x, gamma, n, 1e-6f);
            list[v]->rmsnorm(out, x, gamma, n, 1e-6f);
            double sum_sq = 0.0;
            for (int i = 0; i < n; i++) sum_sq += (double)x[i] * x[i];
            const double inv_rms = 1.0 / sqrt(sum_sq / n + 1e-6);
            for (int i = 0; i < n; i++) {
                double tol = (n / 2.0 + 4) * FLT_EPSILON * fabs((double)x[i] * gamma[i]) * inv_rms;
                const double exact = (double)x[i] * inv_rms * gamma[i];
                CHECK(same_bits(out[i], ref[i]) && fabs(ref[i] - exact) <= tol,
                      "%s n=%d: out[%d] = %.9g, reference %.9g, exact %.9g (tol %.3g)", list[v]->name, n, i, out[i],
                      ref[i], exact, tol);
            }
            free(x);
            free(gamma);
            free(ref);
            free(out);
        }
    }
}

// Each rotated channel is a·c − b·s (or b·c + a·s): the reference's bits, and the reference, two products and a
// sum, within FLT_EPSILON·(|a·c| + |b·s|) of the exact value.
TEST(kernels_rope_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int half = row_sizes[s];
            float *x = random_floats(2 * half, -4.0f, 4.0f), *cos = malloc(sizeof(float) * half),
                  *sin = malloc(sizeof(float) * half);
            for (int i = 0; i < half; i++) {
                double angle = test_rand_uniform(-100.0f, 100.0f);
                cos[i] = (float)cos_of(angle);
                sin[i] = (float)sin_of(angle);
            }
            float *ref = malloc(sizeof(float) * 2 * half), *out = malloc(sizeof(float) * 2 * half);
            memcpy(ref, x, sizeof(float) * 2 * half);
            memcpy(out, x, sizeof(float) * 2 * half);
            kernels_scalar.rope(ref, cos, sin, half);
            list[v]->rope(out, cos, sin, half);
            for (int i = 0; i < half; i++) {
                const double a = x[i], b = x[i + half];
                const double want[2] = {a * cos[i] - b * sin[i], b * cos[i] + a * sin[i]};
                const double tol[2] = {2 * FLT_EPSILON * (fabs(a * cos[i]) + fabs(b * sin[i])),
                                       2 * FLT_EPSILON * (fabs(b * cos[i]) + fabs(a * sin[i]))};
                for (int c = 0; c < 2; c++) {
                    const int at = i + c * half;
                    CHECK(same_bits(out[at], ref[at]) && fabs(ref[at] - want[c]) <= tol[c] / 2,
                          "%s half=%d: x[%d] = %.9g, reference %.9g, exact %.9g (tol %.3g)", list[v]->name, half, at,
                          out[at], ref[at], want[c], tol[c]);
                }
            }
            free(x);
            free(cos);
            free(sin);
            free(ref);
            free(out);
        }
    }
}

// SiLU(g)·u with g ∈ [−100, 100]: the reference's bits; the reference against libm's expf: the canonical exp is
// accurate to 2e-7 relative, then an add, a division and a product round once each; far below 0 it stops at e^88
// where expf goes on, so
//     |ref − libm| ≤ 1e-6 · |libm| + 1e-30
TEST(kernels_silu_mul_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int n = row_sizes[s];
            const float range = test_rand_int(0, 1) ? 8.0f : 100.0f;
            float *gate = random_floats(n, -range, range), *up = random_floats(n, -3.0f, 3.0f);
            float *ref = untouched_floats(n), *out = malloc(sizeof(float) * n);
            memcpy(out, gate, sizeof(float) * n);
            kernels_scalar.silu_mul(ref, gate, up, n);
            list[v]->silu_mul(out, out, up, n);  // in place, as the forward pass calls it
            for (int i = 0; i < n; i++) {
                const float libm = gate[i] / (1.0f + expf(-gate[i])) * up[i];
                CHECK(same_bits(out[i], ref[i]) && fabsf(ref[i] - libm) <= 1e-6f * fabsf(libm) + 1e-30f,
                      "%s n=%d: silu(%.9g)·%.9g = %.9g, reference %.9g, libm %.9g", list[v]->name, n, gate[i], up[i],
                      out[i], ref[i], libm);
            }
            free(gate);
            free(up);
            free(ref);
            free(out);
        }
    }
}

// GELU on x ∈ [−10, 10]: the reference's bits; the reference against libm's tanhf and erff: the canonical tanh,
// erf and exp are accurate to a few 1e-7 absolute, and 0.5x scales that. The worst seen on a dense grid of
// [−10, 10] is 1.6e-7 · (1 + |x|); allowed:
//     |ref − libm| ≤ 4e-7 · (1 + |x|)
static void check_gelu(bool erf_form) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int n = row_sizes[s];
            float *x = random_floats(n, -10.0f, 10.0f);
            float *ref = malloc(sizeof(float) * (size_t)n), *out = malloc(sizeof(float) * (size_t)n);
            memcpy(ref, x, sizeof(float) * (size_t)n);
            memcpy(out, x, sizeof(float) * (size_t)n);
            (erf_form ? kernels_scalar.gelu_erf : kernels_scalar.gelu_tanh)(ref, n);
            (erf_form ? list[v]->gelu_erf : list[v]->gelu_tanh)(out, n);
            for (int i = 0; i < n; i++) {
                const float libm = erf_form ? 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f))
                                            : 0.5f * x[i] * (1.0f + tanhf(0.7978845608028654f *
                                                                          (x[i] + 0.044715f * x[i] * x[i] * x[i])));
                CHECK(same_bits(out[i], ref[i]) && fabs(ref[i] - libm) <= 4e-7 * (1 + fabs(x[i])),
                      "%s n=%d: gelu(%.9g) = %.9g, reference %.9g, libm %.9g", list[v]->name, n, x[i], out[i], ref[i],
                      libm);
            }
            free(x);
            free(ref);
            free(out);
        }
    }
}

TEST(kernels_gelu_tanh_matches_scalar) { check_gelu(false); }
TEST(kernels_gelu_erf_matches_scalar) { check_gelu(true); }

// softmax: the reference's bits, and Σ out is 1 to within 2n·FLT_EPSILON + 1e-6 (the canonical exp is accurate
// to a relative 4e-7, the sum of n positive terms to n·FLT_EPSILON).
// The regimes: ordinary logits; huge ones, most of whose exponentials underflow; rows far above or below 0, which
// overflow or underflow unless the maximum is subtracted first; a row of equal values.
static const char *const softmax_regimes[] = {"x in [-10, 10]", "x in [-1e4, 1e4]", "x in 5e3 + [-5, 5]",
                                              "x in -5e3 + [-5, 5]", "all equal"};
enum { SOFTMAX_REGIMES = sizeof softmax_regimes / sizeof *softmax_regimes };

static float *softmax_input(int regime, int n) {
    switch (regime) {
    case 0: return random_floats(n, -10.0f, 10.0f);
    case 1: return random_floats(n, -1e4f, 1e4f);
    case 2: return random_floats(n, 5e3f - 5.0f, 5e3f + 5.0f);
    case 3: return random_floats(n, -5e3f - 5.0f, -5e3f + 5.0f);
    default: {
        float *x = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) x[i] = -3.25f;
        return x;
    }
    }
}

TEST(kernels_softmax_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    static const int extra_sizes[] = {1000, 4097};
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES + 2; s++) {
            const int n = s < ROW_SIZES ? row_sizes[s] : extra_sizes[s - ROW_SIZES];
            for (int regime = 0; regime < SOFTMAX_REGIMES; regime++) {
                float *ref = softmax_input(regime, n), *out = malloc(sizeof(float) * (size_t)n);
                memcpy(out, ref, sizeof(float) * (size_t)n);
                kernels_scalar.softmax(ref, n);
                list[v]->softmax(out, n);
                double sum = 0.0;
                for (int i = 0; i < n; i++) {
                    CHECK(same_bits(out[i], ref[i]), "%s n=%d, %s: out[%d] = %.9g, reference %.9g", list[v]->name,
                          n, softmax_regimes[regime], i, out[i], ref[i]);
                    sum += out[i];
                }
                CHECK(fabs(sum - 1.0) <= 2 * n * FLT_EPSILON + 1e-6, "%s n=%d, %s: Σ out = %.9g", list[v]->name, n,
                      softmax_regimes[regime], sum);
                if (n == 1) CHECK(out[0] == 1.0f, "%s, %s: softmax of one value = %.9g", list[v]->name,
                                  softmax_regimes[regime], out[0]);
                free(ref);
                free(out);
            }
        }
    }
}

// ---- sampling's row passes ----------------------------------------------------------------------------------

// row_range compares only, so every variant's is the reference's exactly: rows of every length to 300 and of the
// vocabularies' (8192, 128256 + 3), of few distinct values (ties everywhere: the first wins), with NaN, +inf and
// −inf now and then, one row of NaN only and one of −inf only.
TEST(kernels_row_range_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    enum { N_MAX = 128256 + 3 };
    float *x = malloc(sizeof(float) * N_MAX);
    CHECK(x != NULL, "out of memory");
    for (int trial = 0; trial < 340 && !test_failures(); trial++) {
        const int n = trial < 300 ? trial + 1 : trial < 320 ? 8192 : trial < 330 ? N_MAX : test_rand_int(1, 200);
        const int kind = trial % 5;  // 0, 1: plain; 2: NaN; 3: ±inf; 4: all one non-finite value (trials ≥ 330)
        for (int i = 0; i < n; i++) x[i] = (float)test_rand_int(-20, 20) / 4.0f;
        if (kind == 2) x[test_rand_int(0, n - 1)] = NAN;
        if (kind == 3) x[test_rand_int(0, n - 1)] = test_rand_int(0, 1) ? INFINITY : -INFINITY;
        if (kind == 4 && trial >= 330)
            for (int i = 0; i < n; i++) x[i] = trial % 2 ? NAN : -INFINITY;
        const RowRange want = kernels_scalar.row_range(x, n);
        for (int v = 0; v < n_variants; v++) {
            const RowRange got = list[v]->row_range(x, n);
            const bool same_max = memcmp(&got.max, &want.max, sizeof want.max) == 0;
            const bool same_min = memcmp(&got.min, &want.min, sizeof want.min) == 0;
            CHECK(same_max && same_min && got.argmax == want.argmax && got.bad == want.bad,
                  "%s n=%d: max %g at %d, min %g, bad %d; the reference's %g at %d, %g, %d", list[v]->name, n, got.max,
                  got.argmax, got.min, got.bad, want.max, want.argmax, want.min, want.bad);
        }
    }
    free(x);
}

// exp_sum: each exponential and the sum with the reference's bits, exactly 0 where (x − shift) / divisor is −inf
// — a masked logit, or one whose distance from the shift overflows — and the reference's exponentials within a
// relative 1e-6 of libm's expf (1e-37 absolute where the canonical exp stops at ~1e-38). Shifts at the row's max
// as sampling uses it, and temperatures 1 (no division) and others.
TEST(kernels_exp_sum_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    enum { N_MAX = 8192 + 5 };
    float *x = malloc(sizeof(float) * N_MAX), *want = malloc(sizeof(float) * N_MAX);
    float *got = malloc(sizeof(float) * N_MAX);
    CHECK(x && want && got, "out of memory");
    for (int trial = 0; trial < 200 && !test_failures(); trial++) {
        const int n = trial < 150 ? trial + 1 : test_rand_int(1, N_MAX);
        const float divisor = trial % 2 ? 1.0f : test_rand_uniform(0.05f, 3.0f);
        for (int i = 0; i < n; i++) x[i] = test_rand_uniform(-30.0f, 30.0f);
        if (trial % 3 == 0 && n > 1) x[test_rand_int(0, n - 1)] = -INFINITY;  // (a row of one −inf has no max)
        if (trial % 7 == 0 && n > 1) x[0] = 3e38f, x[n - 1] = -3e38f;  // x − shift overflows to −inf
        const float shift = kernels_scalar.row_range(x, n).max;
        const double want_sum = kernels_scalar.exp_sum(want, x, n, shift, divisor);
        for (int v = 0; v < n_variants; v++) {
            const double got_sum = list[v]->exp_sum(got, x, n, shift, divisor);
            for (int i = 0; i < n; i++) {
                const float y = (x[i] - shift) / divisor, libm = expf(y);
                CHECK(same_bits(got[i], want[i]) &&
                          (y == -INFINITY ? want[i] == 0.0f : fabsf(want[i] - libm) <= 1e-6f * libm + 1e-37f),
                      "%s n=%d, T=%g: exp of %.9g = %.9g, the reference's %.9g, libm's %.9g", list[v]->name, n,
                      divisor, y, got[i], want[i], libm);
            }
            CHECK(memcmp(&got_sum, &want_sum, sizeof got_sum) == 0, "%s n=%d: sum %.17g, the reference's %.17g",
                  list[v]->name, n, got_sum, want_sum);
        }
    }
    free(x), free(want), free(got);
}

// scale_to_doubles: the reference's bits exactly (one rounding of the exact product), on rows of every length to
// 100 and of Llama-3's vocabulary + 3, exponentials as exp_sum leaves them (0 and tiny ones among them) and factors
// as 1 / their sum.
TEST(kernels_scale_to_doubles_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    enum { N_MAX = 128256 + 3 };
    float *x = malloc(sizeof(float) * N_MAX);
    double *want = malloc(sizeof(double) * N_MAX), *got = malloc(sizeof(double) * N_MAX);
    CHECK(x && want && got, "out of memory");
    for (int trial = 0; trial < 110 && !test_failures(); trial++) {
        const int n = trial < 100 ? trial + 1 : N_MAX - test_rand_int(0, 3);
        for (int i = 0; i < n; i++) x[i] = test_rand_int(0, 9) ? expf(test_rand_uniform(-90.0f, 0.0f)) : 0.0f;
        const double factor = 1.0 / (test_rand_uniform(1.0f, 1000.0f) + (double)test_rand_uniform(0.0f, 1e-6f));
        kernels_scalar.scale_to_doubles(want, x, n, factor);
        for (int v = 0; v < n_variants; v++) {
            list[v]->scale_to_doubles(got, x, n, factor);
            for (int i = 0; i < n; i++)
                CHECK(memcmp(&got[i], &want[i], sizeof *got) == 0 && want[i] == (double)x[i] * factor,
                      "%s n=%d: %.9g times %.17g = %.17g, the reference's %.17g", list[v]->name, n, x[i], factor,
                      got[i], want[i]);
        }
    }
    free(x), free(want), free(got);
}

// Attention for n query rows sharing one key/value head, row g over the positions it sees — its first S[g], and
// S[g] + j for each bit j of tree[g] when tree is not NULL: out[g] = Σ_s a_s V[s], a = softmax(scale · q[g]·K[s])
// over those, K given transposed with a row pitch ld_k ≥ the largest span (as in the KV cache, whose rows are
// n_positions long). The reference's bits; and per row the reference's scores differ from the exact ones by at most
// δ = hd·FLT_EPSILON·scale·max_s Σ_i |q_i K[s, i]|, which moves every a_s by a relative 2δ at most; softmax adds
// (1e-6 + m·FLT_EPSILON) (m the positions seen) and the weighted sum of m rows m·FLT_EPSILON more, so
//     |ref_i − exact_i| ≤ (2δ + 1e-6 + 2m·FLT_EPSILON) · Σ_s a_s |V[s, i]|
// Batch invariance, bit for bit: each row computed alone equals the same row computed among the n; and a row with
// tree bits equals the row of a chain that sees the same keys and values as its first m positions (the seen
// columns of Kᵀ and rows of V gathered side by side).
static void check_attention(const Kernels *k, int n, const int *S, const uint64_t *tree, int hd) {
    int max_span = 0;
    for (int g = 0; g < n; g++) {
        const int span = attention_span(S[g], tree ? tree[g] : 0);
        max_span = span > max_span ? span : max_span;
    }
    const int ld_k = max_span + test_rand_int(0, 9), ld_q = hd + test_rand_int(0, 3),
              ld_s = max_span + test_rand_int(0, 5);
    const float scale = 1.0f / sqrtf((float)hd);
    float *q = random_floats(n * ld_q, -3.0f, 3.0f), *keys_t = random_floats(hd * ld_k, -1.0f, 1.0f);
    float *values = random_floats(max_span * hd, -1.0f, 1.0f);
    float *scores = malloc(sizeof(float) * (size_t)n * ld_s), *ref = malloc(sizeof(float) * (size_t)n * hd);
    float *out = malloc(sizeof(float) * (size_t)n * hd), *alone = malloc(sizeof(float) * (size_t)hd);
    float *seen_keys_t = malloc(sizeof(float) * (size_t)hd * ld_k);
    float *seen_values = malloc(sizeof(float) * (size_t)max_span * hd);
    kernels_scalar.attention(ref, hd, q, ld_q, S, tree, n, keys_t, ld_k, values, hd, scale, scores, ld_s);
    k->attention(out, hd, q, ld_q, S, tree, n, keys_t, ld_k, values, hd, scale, scores, ld_s);

    double *a = malloc(sizeof(double) * (size_t)max_span);
    for (int g = 0; g < n; g++) {
        const float *qg = q + (size_t)g * ld_q;
        const uint64_t bits = tree ? tree[g] : 0;
        const int span = attention_span(S[g], bits);
        int m = 0;  // positions seen; the m-th is gathered into column / row m of seen_keys_t / seen_values
        double max_score = -INFINITY, sum = 0.0, delta = 0.0;
        for (int s = 0; s < span; s++) {
            if (!attention_sees(S[g], bits, s)) continue;
            double dot = 0.0, magnitude = 0.0;
            for (int i = 0; i < hd; i++) {
                dot += (double)qg[i] * keys_t[(size_t)i * ld_k + s];
                magnitude += fabs((double)qg[i] * keys_t[(size_t)i * ld_k + s]);
                seen_keys_t[(size_t)i * ld_k + m] = keys_t[(size_t)i * ld_k + s];
            }
            memcpy(seen_values + (size_t)m * hd, values + (size_t)s * hd, sizeof(float) * hd);
            a[m] = dot * scale;
            max_score = fmax(max_score, a[m]);
            delta = fmax(delta, hd * FLT_EPSILON * scale * magnitude);
            m++;
        }
        for (int j = 0; j < m; j++) {
            a[j] = exp(a[j] - max_score);
            sum += a[j];
        }
        for (int i = 0; i < hd; i++) {
            double weighted = 0.0, exact = 0.0;
            for (int j = 0; j < m; j++) {
                weighted += a[j] / sum * fabs(seen_values[(size_t)j * hd + i]);
                exact += a[j] / sum * seen_values[(size_t)j * hd + i];
            }
            double tol = (2 * delta + 1e-6 + 2 * m * FLT_EPSILON) * weighted;
            const float o = out[(size_t)g * hd + i], r = ref[(size_t)g * hd + i];
            CHECK(same_bits(o, r) && fabs(r - exact) <= tol,
                  "%s n=%d row %d S=%d tree=%#llx hd=%d ld_k=%d: out[%d] = %.9g, reference %.9g, exact %.9g "
                  "(tol %.3g)", k->name, n, g, S[g], (unsigned long long)bits, hd, ld_k, i, o, r, exact, tol);
        }
        k->attention(alone, hd, qg, ld_q, &S[g], tree ? &bits : NULL, 1, keys_t, ld_k, values, hd, scale, scores, ld_s);
        CHECK(memcmp(alone, out + (size_t)g * hd, sizeof(float) * hd) == 0,
              "%s n=%d row %d S=%d hd=%d: the row alone differs from the row among %d", k->name, n, g, S[g], hd, n);
        if (!bits) continue;
        k->attention(alone, hd, qg, ld_q, &m, NULL, 1, seen_keys_t, ld_k, seen_values, hd, scale, scores, ld_s);
        CHECK(memcmp(alone, out + (size_t)g * hd, sizeof(float) * hd) == 0,
              "%s n=%d row %d S=%d tree=%#llx hd=%d: differs from the chain row over the same %d positions", k->name,
              n, g, S[g], (unsigned long long)bits, hd, m);
    }
    free(q);
    free(keys_t);
    free(values);
    free(scores);
    free(ref);
    free(out);
    free(alone);
    free(seen_keys_t);
    free(seen_values);
    free(a);
}

// One row over S = 1..17 and random lengths up to 300; groups of 2..11 rows with random lengths, and with the
// consecutive lengths of a verification (pos0 + t + 1 for each of T tokens, each head of a group).
TEST(kernels_attention_matches_scalar) {
    static const int head_dims[] = {1, 7, 32, 64, 80, 128};
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int h = 0; h < (int)(sizeof head_dims / sizeof *head_dims); h++) {
            const int hd = head_dims[h];
            for (int S = 1; S <= 17; S++) check_attention(list[v], 1, &S, NULL, hd);
            for (int r = 0; r < 6; r++) {
                int S = test_rand_int(18, 300);
                check_attention(list[v], 1, &S, NULL, hd);
            }
            for (int r = 0; r < 6; r++) {
                int S[16], rows = test_rand_int(2, 11);
                for (int g = 0; g < rows; g++) S[g] = test_rand_int(1, 300);
                check_attention(list[v], rows, S, NULL, hd);
            }
            for (int group = 1; group <= 7; group += 3) {  // T = 3 tokens at positions pos0 .. pos0 + 2
                int S[21], pos0 = test_rand_int(0, 200);
                for (int g = 0; g < 3 * group; g++) S[g] = pos0 + g / group + 1;
                check_attention(list[v], 3 * group, S, NULL, hd);
            }
        }
    }
}

// A random 64-bit mask with each bit set with probability density (0 < density ≤ 1).
static uint64_t random_bits(double density) {
    uint64_t bits = 0;
    for (int j = 0; j < 64; j++) bits |= (uint64_t)(test_rand_uniform(0.0f, 1.0f) < density) << j;
    return bits;
}

// Rows with tree bits, every variant (the scalar reference too: a row with tree bits against its chain row):
// single rows with random masks of every density, some with S = 0; blocks of 2..16 rows mixing masks and none;
// and the rows of a token tree's verification as forward.c passes them — T nodes with random parents after pos0
// cached positions, each node's path from the cache as its first S = pos0 + (leading run of rows 0..m−1) and the
// rest of its path as bits, for each head of a group.
TEST(kernels_attention_tree_matches_scalar) {
    static const int head_dims[] = {1, 7, 32, 64, 80, 128};
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        for (int h = 0; h < (int)(sizeof head_dims / sizeof *head_dims); h++) {
            const int hd = head_dims[h];
            for (int r = 0; r < 8; r++) {
                int S = r < 2 ? 0 : test_rand_int(1, 300);
                uint64_t bits = random_bits(r % 4 == 0 ? 0.05 : r % 4 == 1 ? 0.5 : 0.95) | (uint64_t)(S == 0);
                check_attention(list[v], 1, &S, &bits, hd);
            }
            for (int r = 0; r < 4; r++) {
                int S[16], rows = test_rand_int(2, 16);
                uint64_t bits[16];
                for (int g = 0; g < rows; g++) {
                    S[g] = test_rand_int(1, 300);
                    bits[g] = test_rand_int(0, 2) ? random_bits(test_rand_uniform(0.0f, 1.0f)) : 0;
                }
                check_attention(list[v], rows, S, bits, hd);
            }
            for (int group = 1; group <= 4; group += 3) {  // the nodes t0, t0 + 1, ... of a tree of T
                const int T = test_rand_int(2, 64), pos0 = test_rand_int(0, 200), t0 = test_rand_int(0, T - 1);
                const int rows = (T - t0 < 16 / group ? T - t0 : 16 / group) * group;
                int S[16];
                uint64_t path[64], bits[16];
                for (int t = 0; t < T; t++) {
                    const int parent = test_rand_int(-1, t - 1);
                    path[t] = (parent < 0 ? 0 : path[parent]) | (uint64_t)1 << t;
                }
                for (int g = 0; g < rows; g++) {
                    const uint64_t p = path[t0 + g / group];
                    const int leading = p == UINT64_MAX ? 64 : __builtin_ctzll(~p);
                    S[g] = pos0 + leading;
                    bits[g] = leading == 64 ? 0 : p >> leading;
                }
                check_attention(list[v], rows, S, bits, hd);
            }
        }
    }
}

// out += x rounds once either way: bit-identical.
TEST(kernels_add_matches_scalar) {
    int n_variants;
    const Kernels *const *list = kernels_available(&n_variants);
    for (int v = 0; v < n_variants; v++) {
        if (list[v] == &kernels_scalar) continue;
        for (int s = 0; s < ROW_SIZES; s++) {
            const int n = row_sizes[s];
            float *x = random_floats(n, -100.0f, 100.0f), *ref = random_floats(n, -100.0f, 100.0f);
            float *out = malloc(sizeof(float) * (size_t)n);
            memcpy(out, ref, sizeof(float) * (size_t)n);
            kernels_scalar.add(ref, x, n);
            list[v]->add(out, x, n);
            for (int i = 0; i < n; i++)
                CHECK(same_bits(out[i], ref[i]), "%s n=%d: out[%d] = %.9g, reference %.9g", list[v]->name, n, i,
                      out[i], ref[i]);
            free(x);
            free(ref);
            free(out);
        }
    }
}

// ---- one fingerprint on every machine -----------------------------------------------------------------------
//
// The canonical order leaves nothing to the machine: the scalar reference is plain C whose every operation is
// correctly rounded (fmaf, sqrtf, division; no libm approximations), so it gives the same bits on any IEEE machine,
// and every variant gives the reference's. So fixed inputs (a fixed xorshift stream, not the test seed) through
// every kernel of the table give one hash on x86-64 and on AArch64: KERNELS_FINGERPRINT, printed by this test
// on x86-64 and checked there for every variant and under qemu for neon and scalar (`make test-neon`).
static const uint64_t KERNELS_FINGERPRINT = 0x3f836ec0dd9fab4eull;

typedef struct {
    uint64_t state, hash;
} Fingerprint;

static uint32_t fixed_bits(Fingerprint *f) {  // xorshift64*, the top 24 bits
    f->state ^= f->state >> 12, f->state ^= f->state << 25, f->state ^= f->state >> 27;
    return (uint32_t)((f->state * 0x2545f4914f6cdd1dull) >> 40);
}

static float fixed_uniform(Fingerprint *f, float lo, float hi) {
    return lo + (hi - lo) * (float)fixed_bits(f) / 16777216.0f;
}

static float *fixed_floats(Fingerprint *f, int n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = fixed_uniform(f, lo, hi);
    return x;
}

static void hash_bytes(Fingerprint *f, const void *p, size_t n) {  // FNV-1a
    for (size_t i = 0; i < n; i++) f->hash = (f->hash ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
}

// A row of n_in weights in GGUF blocks of ggml type `type` (Q8_0, Q4_0, Q4_K, Q5_K, Q6_K) from the fixed stream:
// every byte random but the F16 scales (d, and dmin where the format has one): finite, of magnitude 2⁻¹⁰ to 2⁻⁷,
// either sign.
static void fixed_gguf_row(Fingerprint *f, uint8_t *blocks, uint32_t type, int n_in) {
    const bool k_quant = type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
    const int weights = k_quant ? K_SUPER : Q8_BLOCK;  // a block's
    const size_t bytes = qk_row_bytes(type, (size_t)weights);
    for (int s = 0; s < n_in / weights; s++) {
        uint8_t *b = blocks + bytes * (size_t)s;
        for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)fixed_bits(f);
        const bool two = type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q5_1 || type == GGML_Q4_1;
        for (int h = 0; h < (two ? 2 : 1); h++) {  // d at 0 (Q6_K: 208), dmin or m at 2
            uint8_t *half = type == GGML_Q6_K ? b + 208 : b + 2 * h;
            const uint32_t r = fixed_bits(f);
            const uint16_t bits = (uint16_t)((r >> 23) << 15 | (5 + (r >> 10) % 4) << 10 | (r & 1023));
            half[0] = (uint8_t)bits, half[1] = (uint8_t)(bits >> 8);
        }
    }
}

// GGUF's blocks as stored (kernels.h): a matrix [n_out ≤ 16, n_in] of each of Q8_0, Q4_0, Q5_0, Q5_1, Q4_1, Q4_K,
// Q5_K and Q6_K from the fixed stream, packed as the loader packs it, times x's rows quantized; the outputs hashed in
// turn.
static void fingerprint_gguf_blocks(Fingerprint *f, const Kernels *k, const float *x, const float *bias, int T,
                                    int n_in, int ld_x, int n_out, float *out) {
    static const WeightType types[] = {WEIGHT_Q8_0, WEIGHT_Q4_0, WEIGHT_Q5_0, WEIGHT_Q5_1,
                                       WEIGHT_Q4_1, WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K};
    static const uint32_t ggml[] = {GGML_Q8_0, GGML_Q4_0, GGML_Q5_0, GGML_Q5_1,
                                    GGML_Q4_1, GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};
    Q8Block *xq = malloc(sizeof(Q8Block) * (size_t)T * q8_blocks(n_in));
    k->quantize_q8(xq, x, T, n_in, ld_x);
    for (size_t c = 0; c < sizeof types / sizeof *types; c++) {
        const size_t bytes = quantized_matrix_bytes(types[c], n_out, n_in);
        uint8_t *panel = NULL, *blocks = malloc(qk_row_bytes(ggml[c], (size_t)n_in));
        if (posix_memalign((void **)&panel, 64, bytes)) abort();
        memset(panel, 0, bytes);
        for (int r = 0; r < n_out; r++) {
            fixed_gguf_row(f, blocks, ggml[c], n_in);
            if (k_quant(types[c])) k_pack_row(panel, types[c], r, blocks, n_in);
            else if (in_q5_panels(types[c])) q5_pack_row(panel, types[c], r, blocks, n_in);
            else (types[c] == WEIGHT_Q8_0 ? q8_0_pack_row : q4_0_pack_row)(panel, r, blocks, n_in);
        }
        quantized_matmul(k, types[c])(out, xq, panel, bias, T, n_in, n_out, 0, n_out);
        hash_bytes(f, out, sizeof(float) * (size_t)T * n_out);
        free(panel), free(blocks);
    }
    free(xq);
}

// Every kernel of k on fixed inputs, their outputs hashed in turn (matmul_bf16_dot excepted: kernels.h).
static uint64_t kernels_fingerprint(const Kernels *k) {
    Fingerprint f = {.state = 0x9e3779b97f4a7c15ull, .hash = 0xcbf29ce484222325ull};
    enum { T = 3, N_IN = 800, N_OUT = 9, N = 203, HD = 24, SPAN = 70 };
    float *x = fixed_floats(&f, T * N_IN, -1.0f, 1.0f), *bias = fixed_floats(&f, N_OUT, -1.0f, 1.0f);
    float out[T * N_OUT];
    for (int type = 0; type < WEIGHT_TYPES; type++) {
        void *w = NULL;
        if (posix_memalign(&w, 64, (size_t)N_OUT * N_IN * 4)) return 0;
        for (int i = 0; i < N_OUT * N_IN; i++) {
            const float v = fixed_uniform(&f, -1.0f, 1.0f);
            if (type == WEIGHT_F32) ((float *)w)[i] = v;
            else if (type == WEIGHT_BF16) ((uint16_t *)w)[i] = f32_to_bf16(v);
            else ((uint16_t *)w)[i] = (uint16_t)((v < 0) << 15 | (int)(fabsf(v) * 1023) % 1024 | 13 << 10);
        }
        void *w_k = in_layout(k, type, w, N_OUT, N_IN);
        k->matmul[type](out, x, w_k, bias, T, N_IN, N_IN, N_OUT, 0, N_OUT);
        hash_bytes(&f, out, sizeof out);
        free(w), free(w_k);
    }
    float *rows = fixed_floats(&f, 16 * N_IN, -1.0f, 1.0f);
    for (int quantized = 0; quantized < 2; quantized++) {  // q8, q4: one layout for every variant
        const size_t bytes = quantized ? q4_matrix_bytes(N_OUT, N_IN) : q8_matrix_bytes(N_OUT, N_IN);
        uint8_t *panel = NULL;
        if (posix_memalign((void **)&panel, 64, bytes)) return 0;
        (quantized ? q4_quantize_panel : q8_quantize_panel)(panel, rows, N_OUT, N_IN, N_IN);
        Q8Block *xq = malloc(sizeof(Q8Block) * T * q8_blocks(N_IN));
        k->quantize_q8(xq, x, T, N_IN, N_IN);
        (quantized ? k->matmul_q4 : k->matmul_q8)(out, xq, panel, bias, T, N_IN, N_OUT, 0, N_OUT);
        hash_bytes(&f, out, sizeof out);
        free(panel), free(xq);
    }
    fingerprint_gguf_blocks(&f, k, x, bias, T, 2 * K_SUPER, N_IN, N_OUT, out);
    float *a = fixed_floats(&f, N, -6.0f, 6.0f), *b = fixed_floats(&f, N, -2.0f, 2.0f);
    float *c = fixed_floats(&f, N, -1.0f, 1.0f), *y = malloc(sizeof(float) * N);
    k->layernorm(y, a, b, c, N, 1e-5f), hash_bytes(&f, y, sizeof(float) * N);
    k->rmsnorm(y, a, b, N, 1e-6f), hash_bytes(&f, y, sizeof(float) * N);
    memcpy(y, a, sizeof(float) * N), k->rope(y, b, c, N / 2), hash_bytes(&f, y, sizeof(float) * N);
    k->silu_mul(y, a, b, N), hash_bytes(&f, y, sizeof(float) * N);
    memcpy(y, a, sizeof(float) * N), k->gelu_tanh(y, N), hash_bytes(&f, y, sizeof(float) * N);
    memcpy(y, a, sizeof(float) * N), k->gelu_erf(y, N), hash_bytes(&f, y, sizeof(float) * N);
    memcpy(y, a, sizeof(float) * N), k->softmax(y, N), hash_bytes(&f, y, sizeof(float) * N);
    const double sum = k->exp_sum(y, a, N, 6.0f, 0.7f);
    hash_bytes(&f, y, sizeof(float) * N), hash_bytes(&f, &sum, sizeof sum);
    float *q = fixed_floats(&f, 2 * HD, -3.0f, 3.0f), *kt = fixed_floats(&f, HD * SPAN, -1.0f, 1.0f);
    float *v = fixed_floats(&f, SPAN * HD, -1.0f, 1.0f), scores[2 * SPAN], att[2 * HD];
    const int S[2] = {SPAN, 40};
    const uint64_t tree[2] = {0, 0x2d};
    k->attention(att, HD, q, HD, S, tree, 2, kt, SPAN, v, HD, 0.2f, scores, SPAN), hash_bytes(&f, att, sizeof att);
    free(x), free(bias), free(rows), free(a), free(b), free(c), free(y), free(q), free(kt), free(v);
    return f.hash;
}

TEST(kernels_fingerprint_same_on_every_machine) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int v = 0; v < n; v++) {
        const uint64_t got = kernels_fingerprint(list[v]);
        CHECK(got == KERNELS_FINGERPRINT, "%s: fingerprint %#018llx, not %#018llx", list[v]->name,
              (unsigned long long)got, (unsigned long long)KERNELS_FINGERPRINT);
    }
}
