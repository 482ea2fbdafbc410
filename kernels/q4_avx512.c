// q4_avx512.c — the q4 matmul (kernels.h) with AVX-512 VNNI, q8's kernel (q8_avx512.c) with an unpacking step, on
// the same panel walk (panel_walk_avx512.h): each 64-byte line of a block's quants holds two of q8's groups
// (16 rows × 4 inputs), in its low and its high nibbles; a mask and a shift give them as bytes u = q + 8 ∈ [0, 15],
// which vpdpbusd multiplies as unsigned by the signed activation bytes. Each block's sum starts at −8 · Σ q_x
// (Q8Block.offset / 16) instead of 0, so it is the exact Σ q_w · q_x; the float steps are the reference's, so the
// result is bit-identical to it.
//
// Compiled with the avx512 variant's flags, the matmul for VNNI too; dispatch.c gives the avx512 variant AVX2's
// q4 matmul instead where cpuid does not report AVX512_VNNI.
#include "panel_walk_avx512.h"

enum { LINES = Q4_BLOCK * Q4_PANEL / 2 / 64 };

// The walk's UnpackAvx512 for q4: line l of the block holds groups l (low nibbles) and l + 4 (high), as q + 8.
static inline __attribute__((always_inline)) void q4_unpack(__m512i w[GROUPS], const uint8_t *q) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (int line = 0; line < LINES; line++) {
        const __m512i packed = _mm512_load_si512(q + 64 * line);
        w[line] = _mm512_and_si512(packed, nibble);
        w[line + LINES] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    }
}

VNNI void q4_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2, q4_unpack,
                16, false);
}

// GGUF's Q4_0 (kernels.h): the same panels with F16 scales.
VNNI void q4_0_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q4_panel_bytes(n_in), Q4_BLOCK * Q4_PANEL / 2, q4_unpack,
                16, true);
}
