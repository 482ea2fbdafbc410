// test_qk.c — GGUF's quantized blocks (kernels/qk.c) against llama.cpp's own gguf-py: rows of random blocks of each
// type read (random quants and scales, finite half-precision scales), dequantized by gguf.quants.dequantize
// (tests/fixtures/gguf/blocks.bin, tools/make_gguf_fixtures.py), must come out bit for bit the same floats. Then
// the K-quants held as stored (kernels.h, "GGUF's K-quants, as stored"): their K-panels keep every weight of the
// file, and every variant's K matmuls agree with the reference bit for bit on random blocks.
//
// `make test-neon` builds this file with kernels/ and the harness alone.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qk.h"
#include "quantized_checks.h"

static uint32_t read_u32(FILE *f) {
    uint8_t b[4] = {0};
    if (fread(b, 1, 4, f) != 4) return 0;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

TEST(qk_dequantizes_as_gguf_py) {
    FILE *f = fopen("tests/fixtures/gguf/blocks.bin", "rb");
    char magic[4] = {0};
    CHECK(f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "QKFX", 4) == 0 && read_u32(f) == 1,
          "tests/fixtures/gguf/blocks.bin: missing or not version 1");
    if (test_failures()) return;
    const uint32_t rows = read_u32(f);
    int types_seen = 0;
    for (uint32_t r = 0; r < rows; r++) {
        const uint32_t type = read_u32(f), n = read_u32(f);
        CHECK(qk_reads(type) && n > 0 && n <= 1024, "row %u: type %u, %u weights", r, type, n);
        if (test_failures()) break;
        const size_t bytes = qk_row_bytes(type, n);
        uint8_t *blocks = malloc(bytes);
        float *want = malloc(sizeof(float) * n), *got = malloc(sizeof(float) * n);
        CHECK(fread(blocks, 1, bytes, f) == bytes && fread(want, sizeof(float), n, f) == n, "row %u truncated", r);
        qk_dequantize_row(got, blocks, type, n);
        for (uint32_t i = 0; i < n && !test_failures(); i++)
            CHECK(memcmp(&got[i], &want[i], sizeof(float)) == 0, "type %u weight %u: %.9g, gguf-py %.9g", type, i,
                  got[i], want[i]);
        types_seen++;
        free(blocks);
        free(want);
        free(got);
    }
    CHECK(types_seen == 8, "%d types in the fixture, expected Q8_0, Q4_0, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1 and Q4_1",
          types_seen);
    fclose(f);
}

// ---- K-panels: GGUF's K-quants held as stored (kernels.h) ------------------------------------------------------

static const WeightType K_TYPES[] = {WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K};
static const uint32_t K_GGML[] = {GGML_Q4_K, GGML_Q5_K, GGML_Q6_K};

// A random row of n_in / 256 blocks of ggml type `type` (every byte random, but the F16 d and dmin: finite, of
// magnitude 2⁻¹⁰ to 2⁻⁷, either sign).
static void random_k_row(uint8_t *blocks, uint32_t type, int n_in) {
    const size_t bytes = qk_row_bytes(type, 256);
    for (int s = 0; s < n_in / 256; s++) {
        uint8_t *b = blocks + bytes * (size_t)s;
        for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)test_rand_int(0, 255);
        for (int k = 0; k < 2; k++) {  // Q4_K, Q5_K: d, dmin at 0 and 2; Q6_K: d at 208
            uint8_t *half = type == GGML_Q6_K ? b + 208 : b + 2 * k;
            const uint16_t bits =
                (uint16_t)(test_rand_int(0, 1) << 15 | test_rand_int(5, 8) << 10 | test_rand_int(0, 1023));
            half[0] = (uint8_t)bits, half[1] = (uint8_t)(bits >> 8);
        }
    }
}

// A random K-panel matrix [n_out, n_in] of `type` (the K format's index k) and, in *rows_out, its weights as
// qk_dequantize_row gives them.
static uint8_t *random_k_matrix(float **rows_out, int k, int n_out, int n_in) {
    const size_t row_bytes = qk_row_bytes(K_GGML[k], (size_t)n_in);
    uint8_t *blocks = malloc(row_bytes);
    float *rows = malloc(sizeof(float) * (size_t)n_out * n_in);
    void *w = NULL;
    if (posix_memalign(&w, 64, quantized_matrix_bytes(K_TYPES[k], n_out, n_in))) abort();
    memset(w, 0, quantized_matrix_bytes(K_TYPES[k], n_out, n_in));
    const size_t panel_bytes = k_panel_bytes(K_TYPES[k], n_in);
    for (int j = 0; j < n_out; j++) {
        random_k_row(blocks, K_GGML[k], n_in);
        qk_dequantize_row(rows + (size_t)j * n_in, blocks, K_GGML[k], (size_t)n_in);
        k_pack_row((uint8_t *)w + (size_t)(j / 16) * panel_bytes, K_TYPES[k], j % 16, blocks, n_in);
    }
    free(blocks);
    *rows_out = rows;
    return w;
}

static uint8_t *random_q4_k(float **rows, int n_out, int n_in) { return random_k_matrix(rows, 0, n_out, n_in); }
static uint8_t *random_q5_k(float **rows, int n_out, int n_in) { return random_k_matrix(rows, 1, n_out, n_in); }
static uint8_t *random_q6_k(float **rows, int n_out, int n_in) { return random_k_matrix(rows, 2, n_out, n_in); }

static double q4_k_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                           double bias) {
    return held_weight_bound(WEIGHT_Q4_K, x, xq, w, wq, n_in, j, bias);
}
static double q5_k_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                           double bias) {
    return held_weight_bound(WEIGHT_Q5_K, x, xq, w, wq, n_in, j, bias);
}
static double q6_k_bound(const float *x, const Q8Block *xq, const float *w, const void *wq, int n_in, int j,
                           double bias) {
    return held_weight_bound(WEIGHT_Q6_K, x, xq, w, wq, n_in, j, bias);
}

static const QuantFormat K_FORMATS[] = {
    {.name = "q4_k", .type = WEIGHT_Q4_K, .random_matrix = random_q4_k, .reference_bound = q4_k_bound},
    {.name = "q5_k", .type = WEIGHT_Q5_K, .random_matrix = random_q5_k, .reference_bound = q5_k_bound},
    {.name = "q6_k", .type = WEIGHT_Q6_K, .random_matrix = random_q6_k, .reference_bound = q6_k_bound},
};

// The packing keeps each block as the file holds it: every weight of a K-panel (k_weight, as the embeddings read
// it) is bit for bit what llama.cpp's dequantization gives the file's row (qk_dequantize_row), and the padding rows
// of the last panel hold nothing (zeros).
TEST(qk_k_panels_keep_the_file_s_blocks) {
    for (int k = 0; k < 3; k++) {
        const int n_out = 19, n_in = 512;
        float *rows;
        uint8_t *w = random_k_matrix(&rows, k, n_out, n_in);
        for (int j = 0; j < 32; j++)
            for (int i = 0; i < n_in; i++) {
                const float got = quantized_weight(w, K_TYPES[k], n_in, j, i);
                const float want = j < n_out ? rows[(size_t)j * n_in + i] : 0.0f;
                CHECK(memcmp(&got, &want, sizeof got) == 0 || (j >= n_out && got == 0.0f), "%s W[%d, %d] = %.9g, the "
                      "file's %.9g", K_FORMATS[k].name, j, i, got, want);
                if (test_failures()) break;
            }
        free(rows);
        free(w);
    }
}

// The K-panels take the file's bytes (Q4_K 144, Q5_K 176, Q6_K 210 a row of 256 weights: the 6-bit scales and
// mins kept in 12 bytes, Q5_K's fifth bits in one, no dmin for Q6_K), but for the panel's padding to whole lines
// of 64 bytes.
TEST(qk_k_panels_take_the_file_s_bytes) {
    for (int k = 0; k < 3; k++)
        for (int n_in = K_SUPER; n_in <= 8192; n_in *= 2) {
            const size_t file = Q8_PANEL * qk_row_bytes(K_GGML[k], (size_t)n_in);
            CHECK(k_panel_bytes(K_TYPES[k], n_in) == (file + 63) / 64 * 64, "%s n_in=%d: a panel of %zu bytes, the "
                  "file's 16 rows %zu", K_FORMATS[k].name, n_in, k_panel_bytes(K_TYPES[k], n_in), file);
        }
}

// Every variant's K matmuls against the reference, bit for bit, where the integers are largest: every quant byte of
// the file's blocks 0x00 or 0xff (Q4_K q 0 or 15, Q5_K 0 or 31, Q6_K q − 32 = −32 or 31), every 6-bit scale and
// min 63 (their 12 bytes 0xff: the top 2 bits of each set) or every Q6_K scale −128, d and dmin 1, against
// activations ±1 (q_x = ±127): AVX2's pairs of groups in 16 bits reach 4 · 63 · 127 < 2¹⁵ (Q6_K), and every block's
// scale and min takes its top bits from the super-block's.
TEST(qk_k_matmul_at_the_bounds_of_their_sums) {
    enum { N_OUT = 32, N_IN = 256 };
    uint8_t blocks[210];
    for (int k = 0; k < 3; k++)
        for (int quant = 0x00; quant <= 0xff; quant += 0xff) {
            memset(blocks, quant, sizeof blocks);
            if (K_GGML[k] == GGML_Q6_K) {
                memset(blocks + 192, 0x80, 16);
                blocks[208] = 0x00, blocks[209] = 0x3c;  // d = 1
            } else {
                memset(blocks + 4, 0xff, 12);
                blocks[0] = blocks[2] = 0x00, blocks[1] = blocks[3] = 0x3c;  // d = dmin = 1
            }
            uint8_t *w = aligned_alloc(64, quantized_matrix_bytes(K_TYPES[k], N_OUT, N_IN));
            for (int j = 0; j < N_OUT; j++)
                k_pack_row(w + (size_t)(j / Q8_PANEL) * k_panel_bytes(K_TYPES[k], N_IN), K_TYPES[k], j % Q8_PANEL,
                           blocks, N_IN);
            char label[32];
            snprintf(label, sizeof label, "quant bytes 0x%02x", quant);
            check_quantized_matmul_on_extremes(&K_FORMATS[k], w, label);
            free(w);
        }
}

// Every variant's K matmuls against the reference, bit for bit (at every T, every [j0, j1): also the
// batch-invariance test), and the reference against the float product (check_every_quantized_matmul).
TEST(qk_k_matmul_matches_reference) {
    for (int k = 0; k < 3; k++) check_every_quantized_matmul(&K_FORMATS[k]);
}

#if defined(__x86_64__)
// An AVX-512 CPU without AVX512_VNNI runs the avx512 variant with AVX2's K matmuls (dispatch.c).
TEST(qk_k_matmul_avx512_without_vnni) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    if (strcmp(list[n - 1]->name, "avx512") != 0) return;  // no AVX-512 on this CPU
    for (int k = 0; k < 3; k++) {
        CHECK(kernels_avx512_for(false, false)->matmul_k[k] == kernels_avx2.matmul_k[k], "%s", K_FORMATS[k].name);
        check_quantized_matmul_without_vnni(&K_FORMATS[k]);
    }
}
#endif
