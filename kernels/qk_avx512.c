// qk_avx512.c — GGUF's K-quants multiplied as stored (kernels.h, "GGUF's K-quants, as stored") with AVX-512 VNNI,
// on q8's panel walk (panel_walk_avx512.h: one 32-bit lane per weight row of a 16-row K-panel, the weights
// prefetched in the walk's order, decoding's panels in pairs). A block's 8 groups of 16 rows × 4 inputs are
// unpacked once for all the pass's activation rows and multiplied by vpdpbusd (unsigned weights against the signed
// activation bytes): Q4_K's nibbles and Q5_K's bytes are unsigned already; Q6_K's q − 32 has its top bit flipped
// (u = q − 32 + 128), and each half's sum starts at −128 · Σ q_x over that half. The integer sums are exact and the
// float steps are the reference's (qk.c; the walk's k_block_fma), so the result is bit-identical to it.
//
// Compiled with the avx512 variant's flags, the matmuls for VNNI too; dispatch.c gives the avx512 variant AVX2's
// instead where cpuid does not report AVX512_VNNI.
#include "panel_walk_avx512.h"

VNNI void q4_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q4_K), nibbles_unpack, 0,
                WEIGHT_Q4_K);
}

VNNI void q5_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q5_K), bytes_unpack, 0, WEIGHT_Q5_K);
}

VNNI void q6_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, k_block_bytes(WEIGHT_Q6_K), flipped_bytes_unpack, 0,
                WEIGHT_Q6_K);
}
