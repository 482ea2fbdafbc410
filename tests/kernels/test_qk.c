// test_qk.c — GGUF's quantized blocks (kernels/qk.c) against llama.cpp's own gguf-py: rows of random blocks of each
// type read (random quants and scales, finite half-precision scales), dequantized by gguf.quants.dequantize
// (tests/fixtures/gguf/blocks.bin, tools/make_gguf_fixtures.py), must come out bit for bit the same floats.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "qk.h"

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
    CHECK(types_seen == 5, "%d types in the fixture, expected Q8_0, Q4_0, Q4_K, Q5_K and Q6_K", types_seen);
    fclose(f);
}
