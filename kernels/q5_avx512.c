// q5_avx512.c — GGUF's Q5_0, Q5_1 and Q4_1 multiplied as stored (kernels.h, "GGUF's Q5_0, Q5_1 and Q4_1, as
// stored") with AVX-512 VNNI, on q8's panel walk (panel_walk_avx512.h: one 32-bit lane per weight row of a 16-row
// q5 panel). A block's 8 groups are unpacked once for all the pass's activation rows — the nibbles as q4's, and for
// Q5_0 and Q5_1 each group's fifth bits shifted to bit 4 from the block's last line and or-ed in, u = q — and
// multiplied by vpdpbusd, unsigned, against the signed activation bytes. Q5_0's block sums start at −16 · Σ q_x
// (Q8Block.offset / 8), the exact Σ (q − 16) · q_x; Q5_1's and Q4_1's at 0. The float steps are the walk's, the
// reference's (q8.c; the mins' too), so the result is bit-identical to it.
//
// Compiled with the avx512 variant's flags, the matmuls for VNNI too; dispatch.c gives the avx512 variant AVX2's
// instead where cpuid does not report AVX512_VNNI.
#include "panel_walk_avx512.h"

VNNI void q5_0_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q5_block_bytes(WEIGHT_Q5_0), fifth_bits_unpack, 8,
                WEIGHT_Q5_0);
}

VNNI void q5_1_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q5_block_bytes(WEIGHT_Q5_1), fifth_bits_unpack, 0,
                WEIGHT_Q5_1);
}

VNNI void q4_1_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q5_block_bytes(WEIGHT_Q4_1), nibbles_unpack, 0,
                WEIGHT_Q4_1);
}
