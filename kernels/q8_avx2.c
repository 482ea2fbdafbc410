// q8_avx2.c — the q8 matmul (kernels.h) with AVX2, and with AVX-VNNI, on the panel walk of panel_walk_avx2.h: a
// panel's 16 rows as two halves of 8, one 32-bit lane per weight row. AVX2 has no vpdpbusd; vpmaddubsw multiplies unsigned by signed
// bytes and adds pairs into 16 bits, so the signs move onto the activations: |q_w| · (q_x · sign q_w) = q_w · q_x,
// a pair of them at most 2 · 127 · 127 < 2¹⁵, and vpmaddwd by ones adds the pairs into 32 bits. The block's
// integer sum is exact and the float steps are the reference's, so the result is bit-identical to it.
// AVX-VNNI's vpdpbusd does those four steps in one for a row (unsigned weights, as AVX-512's walk takes them).
#include "panel_walk_avx2.h"

// The walk's BlockSumsAvx2 for q8: each 32-byte half-line is one group, 8 rows × 4 inputs.
static inline __attribute__((always_inline)) void q8_block_sums(__m256i isum[MAX_ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < n; t++) isum[t] = _mm256_setzero_si256();
    for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++) {
        const __m256i wq = _mm256_load_si256((const __m256i *)(q + 64 * g)), magnitude = _mm256_abs_epi8(wq);
        for (int t = 0; t < n; t++) {
            const __m256i signed_x = _mm256_sign_epi8(broadcast_group(x[(size_t)t * nb].q + Q8_GROUP * g), wq);
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, signed_x), ones));
        }
    }
}

void q8_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                    int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q8_panel_bytes(n_in), Q8_BLOCK * Q8_PANEL,
                WEIGHT_Q8, 8, true, q8_block_sums);
}

// GGUF's Q8_0 (kernels.h): the same panels with F16 scales.
void q8_0_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q8_panel_bytes(n_in), Q8_BLOCK * Q8_PANEL,
                WEIGHT_Q8_0, 8, true, q8_block_sums);
}

// The walk's BlockSumsAvx2 for q8 with AVX-VNNI: each 32-byte half-line, its top bits flipped (u = q + 128), against
// each row's 4 bytes by vpdpbusd, from −128 · Σ q_x (Q8Block.offset) so that the sum is Σ q_w · q_x.
static inline __attribute__((always_inline)) AVX_VNNI void q8_block_sums_vnni(__m256i isum[MAX_ROWS_PER_PASS],
                                                                              const uint8_t *q, const Q8Block *x,
                                                                              int nb, const int n) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int t = 0; t < n; t++) isum[t] = _mm256_set1_epi32(x[(size_t)t * nb].offset);
    for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++) {
        const __m256i u = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(q + 64 * g)), flip);
        for (int t = 0; t < n; t++)
            isum[t] = _mm256_dpbusd_avx_epi32(isum[t], u, broadcast_group(x[(size_t)t * nb].q + Q8_GROUP * g));
    }
}

AVX_VNNI void q8_matmul_avxvnni(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                                int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q8_panel_bytes(n_in), Q8_BLOCK * Q8_PANEL,
                WEIGHT_Q8, 8, false, q8_block_sums_vnni);
}

AVX_VNNI void q8_0_matmul_avxvnni(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                                  int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q8_panel_bytes(n_in), Q8_BLOCK * Q8_PANEL,
                WEIGHT_Q8_0, 8, false, q8_block_sums_vnni);
}
