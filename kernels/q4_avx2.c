// q4_avx2.c — the q4 matmul (kernels.h) with AVX2, q8's kernel (q8_avx2.c) with an unpacking step: a panel's 16
// rows as two halves of 8, one 32-bit lane per weight row. Each 32-byte half-line holds two groups of 4 inputs
// in its low and high nibbles, u = q + 8 ∈ [0, 15]; vpmaddubsw multiplies them, unsigned, by the signed
// activation bytes and adds pairs into 16 bits (two groups' pairs together ≤ 4 · 15 · 127 < 2¹⁵), vpmaddwd by
// ones adds those into 32 bits. Each block's sum starts at −8 · Σ q_x (Q8Block.offset / 16), so it is the exact
// Σ q_w · q_x; the float steps are the reference's, so the result is bit-identical to it.
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

enum { HALF = 8, ROWS_PER_PASS = 4, LINES = Q4_BLOCK * Q4_PANEL / 2 / 64 };

static inline __m256i broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return _mm256_set1_epi32(four);
}

// Half h (rows 8h..8h+7) of the panel against activation rows t < n ≤ 4 (a constant where this is inlined);
// lanes outside `rows` are neither stored nor read from bias.   out: [n, ld_out] from the half's first row
static inline __attribute__((always_inline)) void half_against_rows(float *out, const Q8Block *x,
                                                                    const uint8_t *panel, const float *bias, int nb,
                                                                    int ld_out, int h, __m256i rows, const int n) {
    __m256 acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = _mm256_setzero_ps();
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * Q4_BLOCK * Q4_PANEL / 2);
    const __m256i ones = _mm256_set1_epi16(1), nibble = _mm256_set1_epi8(0x0f);
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = panel + (size_t)b * Q4_BLOCK * Q4_PANEL / 2 + h * HALF * 4;
        const __m256 d_w = _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(scales + b * Q4_PANEL + h * HALF))), 16));
        __m256i isum[ROWS_PER_PASS];
        for (int t = 0; t < n; t++) isum[t] = _mm256_set1_epi32(x[(size_t)t * nb + b].offset / 16);
        for (int line = 0; line < LINES; line++) {
            const __m256i packed = _mm256_load_si256((const __m256i *)(q + 64 * line));
            const __m256i low = _mm256_and_si256(packed, nibble);  // inputs 4·line .. 4·line + 3
            const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);  // 16 more
            for (int t = 0; t < n; t++) {
                const int8_t *xq = x[(size_t)t * nb + b].q + 4 * line;
                const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(low, broadcast_group(xq)),
                                                       _mm256_maddubs_epi16(high, broadcast_group(xq + 16)));
                isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, ones));
            }
        }
        for (int t = 0; t < n; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]),
                                     _mm256_mul_ps(d_w, _mm256_set1_ps(x[(size_t)t * nb + b].d)), acc[t]);
    }
    for (int t = 0; t < n; t++) {
        __m256 v = acc[t];
        if (bias) v = _mm256_add_ps(v, _mm256_maskload_ps(bias, rows));
        _mm256_maskstore_ps(out + (size_t)t * ld_out, rows, v);
    }
}

void q4_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    const int nb = q4_blocks(n_in);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int p = j0 / Q4_PANEL; p * Q4_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * q4_panel_bytes(n_in);
        for (int h = 0; h < 2; h++) {
            const int first = p * Q4_PANEL + h * HALF;  // rows [first, first + 8), of which [j0, j1) are wanted
            if (first + HALF <= j0 || first >= j1) continue;
            const __m256i rows = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(j1 - first), lane),
                                                  _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(j0 - first - 1)));
            const float *b = bias ? bias + first : NULL;
            for (int t = 0; t < T; t += ROWS_PER_PASS) {
                float *o = out + (size_t)t * ld_out + first;
                const Q8Block *xt = x + (size_t)t * nb;
                switch (T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS) {  // n a constant in each case
                case 1: half_against_rows(o, xt, panel, b, nb, ld_out, h, rows, 1); break;
                case 2: half_against_rows(o, xt, panel, b, nb, ld_out, h, rows, 2); break;
                case 3: half_against_rows(o, xt, panel, b, nb, ld_out, h, rows, 3); break;
                default: half_against_rows(o, xt, panel, b, nb, ld_out, h, rows, 4); break;
                }
            }
        }
    }
}
