// qk_avx512.c — GGUF's K-quants multiplied as stored (kernels.h, "GGUF's K-quants, as stored") with AVX-512 VNNI,
// on q8's panel walk (panel_walk_avx512.h: one 32-bit lane per weight row of a 16-row K-panel, the weights
// prefetched in the walk's order, decoding's panels in pairs). A block's 8 groups of 16 rows × 4 inputs are
// unpacked once for all the pass's activation rows and multiplied by vpdpbusd (unsigned weights against the signed
// activation bytes): Q4_K's nibbles are unsigned already, Q5_K's fifth bits are or-ed in as Q5_0's (the walk's
// fifth_bits_unpack); Q6_K's low 4 bits are Q4_K's nibbles,
// its top 2 bits shifted into place from their lines and or-ed in, u = q ∈ [0, 63], and each half's sum starts at
// −32 · Σ q_x over that half. The integer sums are exact and the float steps are the reference's (qk.c; the walk's
// k_block_fma), so the result is bit-identical to it.
//
// Compiled with the avx512 variant's flags, the matmuls for VNNI too; dispatch.c gives the avx512 variant AVX2's
// instead where cpuid does not report AVX512_VNNI.
#include "panel_walk_avx512.h"

// The walk's UnpackAvx512 for Q6_K: the nibbles as Q4_K's, then group g's top 2 bits, bits 2 · (g % 4) of line
// g / 4 of the block's last 128 bytes, moved to bits 4 and 5.
static inline __attribute__((always_inline)) void q6_k_unpack(__m512i w[GROUPS], const uint8_t *q) {
    nibbles_unpack(w, q);
    const __m512i top = _mm512_set1_epi8(0x30);
    for (int g = 0; g < GROUPS; g++) {
        const __m512i line = _mm512_load_si512(q + Q8_BLOCK * Q8_PANEL / 2 + 64 * (g / 4));
        const int c = g % 4;
        const __m512i bits = c < 2 ? _mm512_slli_epi16(line, 4 - 2 * c) : _mm512_srli_epi16(line, 2 * c - 4);
        w[g] = _mm512_ternarylogic_epi32(w[g], bits, top, 0xf8);  // w | (bits & top)
    }
}

VNNI void q4_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q4_K), nibbles_unpack, 0,
                WEIGHT_Q4_K);
}

VNNI void q5_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q5_K), fifth_bits_unpack, 0,
                WEIGHT_Q5_K);
}

VNNI void q6_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q6_K), q6_k_unpack, 0,
                WEIGHT_Q6_K);
}
