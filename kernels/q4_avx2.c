// q4_avx2.c — the q4 matmul (kernels.h) with AVX2 and with AVX-VNNI, q8's kernels (q8_avx2.c) with an unpacking step, on the same
// panel walk (panel_walk_avx2.h): a panel's 16 rows as two halves of 8, one 32-bit lane per weight row. Each
// 32-byte half-line holds two groups of 4 inputs in its low and high nibbles, u = q + 8 ∈ [0, 15]; vpmaddubsw
// multiplies them, unsigned, by the signed activation bytes and adds pairs into 16 bits, and a row's pairs of all
// 4 lines of a block add up in 16 bits too (each 16-bit lane ≤ 4 lines · 2 groups · 2 · 15 · 127 = 30480 < 2¹⁵),
// so vpmaddwd by ones widens them into 32 bits once a block, not once a line: a row and line is then 2 multiplies
// and 2 adds, against 3 and 2. Each block's sum gets −8 · Σ q_x (Q8Block.offset / 16), so it is the exact
// Σ q_w · q_x; the float steps are the reference's, so the result is bit-identical to it.
#include "panel_walk_avx2.h"

enum { LINES = Q4_BLOCK * Q4_PANEL / 2 / 64 };

// The walk's BlockSumsAvx2 for q4: each 32-byte half-line is two groups, inputs 4·line.. and 16 + 4·line...
static inline __attribute__((always_inline)) void q4_block_sums(__m256i isum[MAX_ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n) {
    const __m256i ones = _mm256_set1_epi16(1), nibble = _mm256_set1_epi8(0x0f);
    // Row t's 16-bit sums of pairs, each |·| ≤ LINES · 2 · 2 · 15 · 127 = 30480. Added by vpaddsw, which never
    // saturates here, rather than vpaddw: GCC reassociates plain vector adds across the lines and, at 8 rows, then
    // makes every product before adding any, spilling them to the stack; the saturating add it keeps in order.
    __m256i pairs[MAX_ROWS_PER_PASS];
    for (int t = 0; t < n; t++) pairs[t] = _mm256_setzero_si256();
    for (int line = 0; line < LINES; line++) {
        const __m256i packed = _mm256_load_si256((const __m256i *)(q + 64 * line));
        const __m256i low = _mm256_and_si256(packed, nibble);  // inputs 4·line .. 4·line + 3
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);  // 16 more
        for (int t = 0; t < n; t++) {
            const int8_t *xq = x[(size_t)t * nb].q + 4 * line;
            pairs[t] = _mm256_adds_epi16(pairs[t], _mm256_adds_epi16(_mm256_maddubs_epi16(low, broadcast_group(xq)),
                                                                   _mm256_maddubs_epi16(high, broadcast_group(xq + 16))));
        }
    }
    for (int t = 0; t < n; t++)
        isum[t] = _mm256_add_epi32(_mm256_set1_epi32(x[(size_t)t * nb].offset / 16), _mm256_madd_epi16(pairs[t], ones));
}

void q4_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2,
                WEIGHT_Q4, 8, decode_prefetches_into_l1(), q4_block_sums);
}

// GGUF's Q4_0 (kernels.h): the same panels with F16 scales.
void q4_0_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2,
                WEIGHT_Q4_0, 8, decode_prefetches_into_l1(), q4_block_sums);
}

// The walk's BlockSumsAvx2 for q4 with AVX-VNNI: the nibbles u unsigned as they are, into vpdpbusd, from
// −8 · Σ q_x (Q8Block.offset / 16) so that the sum is Σ q_w · q_x.
static inline __attribute__((always_inline)) AVX_VNNI void q4_block_sums_vnni(__m256i isum[MAX_ROWS_PER_PASS],
                                                                              const uint8_t *q, const Q8Block *x,
                                                                              int nb, const int n) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    for (int t = 0; t < n; t++) isum[t] = _mm256_set1_epi32(x[(size_t)t * nb].offset / 16);
    for (int line = 0; line < LINES; line++) {
        const __m256i packed = _mm256_load_si256((const __m256i *)(q + 64 * line));
        const __m256i low = _mm256_and_si256(packed, nibble), high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
        for (int t = 0; t < n; t++) {
            const int8_t *xq = x[(size_t)t * nb].q + 4 * line;
            isum[t] = _mm256_dpbusd_avx_epi32(isum[t], low, broadcast_group(xq));
            isum[t] = _mm256_dpbusd_avx_epi32(isum[t], high, broadcast_group(xq + 16));
        }
    }
}

AVX_VNNI void q4_matmul_avxvnni(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                                int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2,
                WEIGHT_Q4, 8, false, q4_block_sums_vnni);
}

AVX_VNNI void q4_0_matmul_avxvnni(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                                  int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2,
                WEIGHT_Q4_0, 8, false, q4_block_sums_vnni);
}
