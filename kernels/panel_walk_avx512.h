// panel_walk_avx512.h — the AVX-512 VNNI walk over weight panels and activation rows that the q8 and q4 matmuls
// share (q8_avx512.c, q4_avx512.c). One register holds 16 weight rows' 4-input groups, as unsigned bytes u;
// vpdpbusd multiplies them by 4 activation bytes broadcast to every lane and adds the 4 products into each row's
// 32-bit sum, so 16 rows' dot products build up side by side, lane by lane, with no horizontal sums. A format
// gives a block's 8 groups as u = q_w + c (UnpackAvx512, inlined where the walk is); Σ u · q_x = Σ q_w · q_x +
// c · Σ q_x, so each block's sum starts at −c · Σ q_x, Q8Block.offset / (128 / c), and is exact. The float steps
// are the reference's, so the result is bit-identical to it.
#ifndef SPECDEC_PANEL_WALK_AVX512_H
#define SPECDEC_PANEL_WALK_AVX512_H

#include <immintrin.h>
#include <string.h>

#include "kernels.h"

// ROWS_PER_PASS activation rows share one pass over a panel (16 were no faster: the sums then spill). The first
// pass prefetches the weights ahead of itself (kernels.h: PREFETCH_L1_AHEAD): without it a pass of 8 rows streams
// a matrix from memory at about half the speed (docs/performance-history.md, "Measurements behind the kernels'
// choices"), in the order the walk reads the quants (kernels.h: PrefetchStream). Prefetching straight on from a
// pass's last blocks asked for the panels' scales and the pass's other panel, and left the first kilobytes of the
// panels read next to the hardware; following the walk's order, q4's T = 1 product from memory ran 1.08–1.23 × as
// fast on one and two Zen 4 cores and q8's 0.99–1.11 ×, and q4 decode in the model 1.13 × on one
// (tools/matmul_ab; docs/performance-history.md, "Prefetching in the walk's order").
//
// Decoding (T = 1) takes whole panels DECODE_PANELS = 2 at a time. With one activation row, a block's 8 vpdpbusd
// are one chain, each waiting for the last; a second panel gives the core a second chain to run beside it, and the
// activation broadcasts serve both. On one Zen 4 core, q4's decode product ran 1.16 × faster, in the L2 and from
// memory; q8's ran 0.98–1.06 × as fast (tools/matmul_ab/run.sh; docs/performance-history.md, "Decoding's panels
// in pairs"). Four at a time were no faster.
enum { ROWS_PER_PASS = 8, DECODE_PANELS = 2, GROUPS = Q8_BLOCK / Q8_GROUP };

#define VNNI __attribute__((target("avx512vnni")))  // the functions that use vpdpbusd

// 4 activation bytes in every 32-bit lane.
static inline __m512i broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return _mm512_set1_epi32(four);
}

// A block's quants q (64-byte aligned) as 8 groups: group g, rows 0..15 × inputs 4g..4g+3, as unsigned bytes.
typedef void UnpackAvx512(__m512i w[GROUPS], const uint8_t *q);

// The 16 · n_panels weight rows of n_panels ≤ DECODE_PANELS consecutive panels (`panel`, then `panel` +
// panel_bytes, ...) against activation rows t < n ≤ 8 (n and n_panels constants where this is inlined; several
// panels only with one row, where the registers allow it): their float sums over the blocks sit in n · n_panels
// registers, a block's 8 groups in 8 more. Rows outside `rows` (the first panel's; the others are always whole)
// are neither stored nor read from bias. `prefetch`: this is the panels' first pass. `block_bytes`: a block's
// quants in a panel; `offset_divisor`: 128 / c; `f16`: the scales are F16 (GGUF's blocks), else BF16.
//   out: [n, ld_out] from the first panel's first row   x: [n, nb]
static inline __attribute__((always_inline)) VNNI void panels_against_rows(
    float *out, const Q8Block *x, const uint8_t *panel, size_t panel_bytes, const float *bias, int nb, int ld_out,
    __mmask16 rows, bool prefetch, const int n, const int n_panels, const int block_bytes, UnpackAvx512 *unpack,
    const int offset_divisor, const bool f16) {
    __m512 acc[DECODE_PANELS][ROWS_PER_PASS];
    for (int p = 0; p < n_panels; p++)
        for (int t = 0; t < n; t++) acc[p][t] = _mm512_setzero_ps();
    const size_t quant_bytes = (size_t)nb * block_bytes;
    PrefetchStream ahead = prefetch_stream(panel, nb, block_bytes, (size_t)n_panels * panel_bytes);
    for (int b = 0; b < nb; b++) {
        const size_t at = (size_t)b * block_bytes;
        if (prefetch) prefetch_stream_at(&ahead, b);
        for (int p = 0; p < n_panels; p++) {
            const uint8_t *q = panel + p * panel_bytes + at;
            const uint16_t *scales = (const uint16_t *)(panel + p * panel_bytes + quant_bytes);
            for (int line = 0; line < block_bytes / 64 && prefetch; line++) {  // past the end, a prefetch does nothing
                _mm_prefetch(ahead.near + p * panel_bytes + at + 64 * line, _MM_HINT_T0);
                _mm_prefetch(ahead.far + p * panel_bytes + at + 64 * line, _MM_HINT_T1);
            }
            __m512i w[GROUPS];
            unpack(w, q);
            const __m256i scales_16 =  // the 16 rows' scales, then as F32 (from F16 or BF16: exact either way)
                _mm256_loadu_si256((const __m256i *)(scales + b * Q8_PANEL));
            const __m512 d_w = f16 ? _mm512_cvtph_ps(scales_16)
                                   : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(scales_16), 16));
            for (int t = 0; t < n; t++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                __m512i isum = _mm512_set1_epi32(xb->offset / offset_divisor);
                for (int g = 0; g < GROUPS; g++)
                    isum = _mm512_dpbusd_epi32(isum, w[g], broadcast_group(xb->q + Q8_GROUP * g));
                const __m512 d = _mm512_mul_ps(d_w, _mm512_set1_ps(xb->d));
                acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[p][t]);
            }
        }
    }
    for (int p = 0; p < n_panels; p++) {
        const __mmask16 kept = p == 0 ? rows : 0xffff;
        for (int t = 0; t < n; t++) {
            __m512 v = acc[p][t];
            if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(kept, bias + p * Q8_PANEL));
            _mm512_mask_storeu_ps(out + (size_t)t * ld_out + p * Q8_PANEL, kept, v);
        }
    }
}

// The matmul of MatmulQ8Fn over panels of `panel_bytes`, with panels_against_rows's format arguments.
static inline __attribute__((always_inline)) VNNI void walk_panels(float *out, const Q8Block *x, const void *w,
                                                                   const float *bias, int T, int n_in, int ld_out,
                                                                   int j0, int j1, size_t panel_bytes,
                                                                   const int block_bytes, UnpackAvx512 *unpack,
                                                                   const int offset_divisor, const bool f16) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const int first = p * Q8_PANEL;  // rows [first, first + 16), of which [j0, j1) are wanted
        const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < Q8_PANEL ? j1 - first : Q8_PANEL;
        const __mmask16 rows = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * panel_bytes;
        const float *b = bias ? bias + first : NULL;
        if (T == 1 && first + DECODE_PANELS * Q8_PANEL <= j1) {  // decoding: whole panels, several a pass
            panels_against_rows(out + first, x, panel, panel_bytes, b, nb, ld_out, rows, true, 1, DECODE_PANELS,
                                block_bytes, unpack, offset_divisor, f16);
            p += DECODE_PANELS - 1;
            continue;
        }
        for (int t = 0; t < T; t += ROWS_PER_PASS) {
            float *o = out + (size_t)t * ld_out + first;
            const Q8Block *xt = x + (size_t)t * nb;
            const bool prefetch = t == 0;
#define PASS(n) panels_against_rows(o, xt, panel, panel_bytes, b, nb, ld_out, rows, prefetch, n, 1, block_bytes, \
                                    unpack, offset_divisor, f16)
            PASS_WITH_CONSTANT_ROWS(T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS, PASS)
#undef PASS
        }
    }
}

#endif
