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

VNNI void q4_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, Q4_BLOCK * Q4_PANEL / 2, nibbles_unpack, 16,
                WEIGHT_Q4);
}

// GGUF's Q4_0 (kernels.h): the same panels with F16 scales.
VNNI void q4_0_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, Q4_BLOCK * Q4_PANEL / 2, nibbles_unpack, 16,
                WEIGHT_Q4_0);
}
