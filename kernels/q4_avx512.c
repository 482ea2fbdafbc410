// q4_avx512.c — the q4 matmul (kernels.h) with AVX-512 VNNI, q8's kernel (q8_avx512.c) with an unpacking step:
// each 64-byte line of a block's quants holds two of q8's groups (16 rows × 4 inputs), in its low and its high
// nibbles; a mask and a shift give them as bytes u = q + 8 ∈ [0, 15], which vpdpbusd multiplies as unsigned by the
// signed activation bytes. Each block's sum starts at −8 · Σ q_x (Q8Block.offset / 16) instead of 0, so it is
// the exact Σ q_w · q_x; the float steps are the reference's, so the result is bit-identical to it.
//
// Compiled with the avx512 variant's flags, the matmul for VNNI too; dispatch.c gives the avx512 variant AVX2's
// q4 matmul instead where cpuid does not report AVX512_VNNI.
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

// ROWS_PER_PASS activation rows share one pass over a panel, as in q8_avx512.c.
enum { ROWS_PER_PASS = 8, LINES = Q4_BLOCK * Q4_PANEL / 2 / 64, GROUPS = 2 * LINES };

#define VNNI __attribute__((target("avx512vnni")))  // the functions that use vpdpbusd

static inline __m512i broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return _mm512_set1_epi32(four);
}

// The 16 weight rows of `panel` against activation rows t < n ≤ 8 (a constant where this is inlined): their
// float sums over the blocks sit in n registers, the block's 8 unpacked groups in 8 more. Rows outside `rows`
// are neither stored nor read from bias. `prefetch`: this is the panel's first pass.
//   out: [n, ld_out] from the panel's first row   x: [n, nb]
static inline __attribute__((always_inline)) VNNI void panel_against_rows(float *out, const Q8Block *x,
                                                                          const uint8_t *panel, const float *bias,
                                                                          int nb, int ld_out, __mmask16 rows,
                                                                          bool prefetch, const int n) {
    __m512 acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = _mm512_setzero_ps();
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * Q4_BLOCK * Q4_PANEL / 2);
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = panel + (size_t)b * Q4_BLOCK * Q4_PANEL / 2;
        for (int line = 0; line < LINES && prefetch; line++) {  // past the matrix's end, a prefetch does nothing
            _mm_prefetch((const char *)q + PREFETCH_L1_AHEAD + 64 * line, _MM_HINT_T0);
            _mm_prefetch((const char *)q + PREFETCH_L2_AHEAD + 64 * line, _MM_HINT_T1);
        }
        __m512i w[GROUPS];  // group g: rows 0..15 × inputs 4g..4g+3, as u = q + 8
        for (int line = 0; line < LINES; line++) {
            const __m512i packed = _mm512_load_si512(q + 64 * line);
            w[line] = _mm512_and_si512(packed, nibble);
            w[line + LINES] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
        }
        const __m512 d_w = _mm512_castsi512_ps(  // the 16 rows' BF16 scales as F32
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(scales + b * Q4_PANEL))), 16));
        for (int t = 0; t < n; t++) {
            const Q8Block *xb = &x[(size_t)t * nb + b];
            __m512i isum = _mm512_set1_epi32(xb->offset / 16);
            for (int g = 0; g < GROUPS; g++) isum = _mm512_dpbusd_epi32(isum, w[g], broadcast_group(xb->q + 4 * g));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d_w, _mm512_set1_ps(xb->d)), acc[t]);
        }
    }
    for (int t = 0; t < n; t++) {
        __m512 v = acc[t];
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rows, bias));
        _mm512_mask_storeu_ps(out + (size_t)t * ld_out, rows, v);
    }
}

VNNI void q4_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    const int nb = q4_blocks(n_in);
    for (int p = j0 / Q4_PANEL; p * Q4_PANEL < j1; p++) {
        const int first = p * Q4_PANEL;  // rows [first, first + 16), of which [j0, j1) are wanted
        const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < Q4_PANEL ? j1 - first : Q4_PANEL;
        const __mmask16 rows = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * q4_panel_bytes(n_in);
        const float *b = bias ? bias + first : NULL;
        for (int t = 0; t < T; t += ROWS_PER_PASS) {
            float *o = out + (size_t)t * ld_out + first;
            const Q8Block *xt = x + (size_t)t * nb;
            switch (T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS) {  // n a constant in each case
            case 1: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 1); break;
            case 2: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 2); break;
            case 3: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 3); break;
            case 4: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 4); break;
            case 5: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 5); break;
            case 6: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 6); break;
            case 7: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 7); break;
            default: panel_against_rows(o, xt, panel, b, nb, ld_out, rows, t == 0, 8); break;
            }
        }
    }
}
