// panel_walk_avx2.h — the AVX2 walk over weight panels and activation rows that the q8 and q4 matmuls share
// (q8_avx2.c, q4_avx2.c), with plain AVX2's integer products or AVX-VNNI's: a panel's 16 rows as two halves of 8,
// one 32-bit lane per weight row, up to `per_pass` activation rows against a half in one pass over its blocks, or,
// decoding (one row), both halves in one pass. A format gives each block's exact integer sums (BlockSumsAvx2,
// inlined where the walk is); the walk does the reference's float steps around them, one fused multiply-add per
// block by fl(d_w · d_x), so the result is bit-identical to the reference's.
//
// The register blocking: a block's quants for a half are 8 groups of 32 bytes (8 rows × 4 inputs); each group is
// loaded (and unpacked) once and multiplied into the integer sums of all the pass's activation rows, each row's
// 4 bytes broadcast to the 8 lanes, so the 8 rows' dot products build up lane by lane with no horizontal sum. The
// pass keeps an integer sum and a float sum per activation row (2 · per_pass registers; at 8 rows the float sums,
// touched once a block, are the ones the compiler keeps in L1) beside the group and its broadcast.
#ifndef SPECDEC_PANEL_WALK_AVX2_H
#define SPECDEC_PANEL_WALK_AVX2_H

#include <immintrin.h>
#include <string.h>

#include "kernels.h"

// MAX_ROWS_PER_PASS bounds the rows of one pass; each matmul picks its own (a constant). 8 for every one: each group
// then unpacked once for twice the rows, and a verification of 8 one pass over each half (q8 with AVX2, T = 8
// 1.09 ×, T = 16 1.13 × as fast as with 4 a pass; with AVX-VNNI, T = 8 ran in 0.86 × the time: one thread, a
// Llama-3.2-1B layer, throwaway in-process harness, machine shared with other builds; q4 with AVX2, since its
// pairs add up in 16 bits over a block, T = 8 1.02 × as fast as with 4: docs/performance-history.md).
enum { HALF = 8, MAX_ROWS_PER_PASS = 8 };

// 4 activation bytes in every 32-bit lane.
static inline __m256i broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return _mm256_set1_epi32(four);
}

// isum[t], lane r = Σ_i q_w[r, i] · q_x[t, i] over one block, exact, for the half's rows r < 8 and activation
// rows t < n ≤ MAX_ROWS_PER_PASS (a constant where it is inlined).
//   q: the block's quants from the half's first row   x: row t's block at x[t · nb]
typedef void BlockSumsAvx2(__m256i isum[MAX_ROWS_PER_PASS], const uint8_t *q, const Q8Block *x, int nb, int n);

// out[t · ld_out + r] = acc[t] lane r (+ bias[r]) for activation rows t < n, in the lanes of `rows` only: a half's
// results, as the q8, q4 and K-panel walks end.
static inline void store_half(float *out, const __m256 *acc, const float *bias, __m256i rows, int ld_out, int n) {
    for (int t = 0; t < n; t++) {
        __m256 v = acc[t];
        if (bias) v = _mm256_add_ps(v, _mm256_maskload_ps(bias, rows));
        _mm256_maskstore_ps(out + (size_t)t * ld_out, rows, v);
    }
}

// The lanes of half h of panel p that [j0, j1) wants: lane r is row 16p + 8h + r.
static inline __m256i half_rows(int p, int h, int j0, int j1) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int first = p * Q8_PANEL + h * HALF;
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(j1 - first), lane),
                            _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(j0 - first - 1)));
}

// Whether decoding (one activation row) q4, Q4_0 and the K-quants with plain AVX2 asks for the quants
// PREFETCH_L1_AHEAD ahead into L1 as well, as q8's decode always does: not on AMD's cores, where q4 so asked ran
// 0.96–0.99 × as fast (one Zen 4 thread: halves_against_rows, below), but on Intel's. On an Emerald Rapids core, q4's decode product
// stalled on the first load of each of a block's lines (perf annotate: a third of its samples just after them);
// with the ask those samples went to the prefetches, as in the read pass, and the products of 16 Llama-3.2-1B layers
// took 0.96–0.97 of the on-CPU time for q4, Q5_K and Q6_K (docs/performance-history.md, "q4's and the K-quants'
// decode prefetched into L1 on an Intel core"). A choice of speed only: the same sums in the same order either way.
static inline bool decode_prefetches_into_l1(void) { return decode_prefetches_on_this_cpu(); }

// Halves h0 .. h0 + halves − 1 (halves 1 or 2; rows 8h..8h+7 each) of panel p against activation rows t < n ≤
// MAX_ROWS_PER_PASS, block by block, each half its own sums; lanes outside [j0, j1) are neither stored nor read
// from bias. Both halves in one pass is for decoding (n = 1): each 64-byte line is then read once, whole, and a
// core has two independent chains of float steps; with more rows a pass takes one half, whose sums fill the
// registers. `block_bytes`: a block's quants in the panel; `type`: the panels' (their scales F16 for GGUF's blocks,
// else BF16; Q5_1's and Q4_1's mins, after the scales, one more fused multiply-add a block: kernels.h).
// `prefetch`: this is the panel's first pass, which asks for the weights PREFETCH_L2_AHEAD ahead of itself into
// L2, in the walk's order (kernels.h: PrefetchStream; the next panel is `panel_bytes` on); a second pass finds
// them in the caches. On one Zen 4 core q4's decode product from memory ran 1.15 × as fast with it, and 0.93–0.96
// × in the L2; asking for them into L1 as well cost 0.91–0.94 × in the L2 and gained nothing more
// (docs/performance-history.md, "Prefetching in the walk's order"). At block b it also asks for line b of the next
// panel's scales, into L2, as AVX-512's walk does: in a Q4_0 decode on one thread, 43 % of the Q4_0 matmul's
// samples fell just after its load of a block's scales (perf annotate); with the ask, that matmul's samples fell
// to 0.78–0.90 of before, Q8_0's unchanged (docs/performance-history.md, "Where a decode step's time goes").
// `into_l1` (decoding q8 with plain AVX2, q4 where decode_prefetches_into_l1 says): the pass also asks for the
// weights PREFETCH_L1_AHEAD ahead into L1. Under perf, q8's decode stalled on the first load of each of a block's 8 lines; with the ask it streamed at
// 0.84–0.86 of the read pass where it streamed at 0.80–0.81, while q4 and AVX-VNNI's q8, asked the same way, ran
// 0.96–0.99 × as fast (one Zen 4 thread, 16 Llama-3.2-1B layers: docs/performance-history.md, "q8's decode
// prefetched into L1 on plain AVX2").
//   out: [n, ld_out] from the panel's first row   bias: from the panel's first row, or NULL
static inline __attribute__((always_inline)) void halves_against_rows(float *out, const Q8Block *x,
                                                                      const uint8_t *panel, size_t panel_bytes,
                                                                      const float *bias, int nb, int ld_out, int p,
                                                                      int j0, int j1, int h0, const int halves,
                                                                      bool prefetch, const bool into_l1,
                                                                      const int n, const int block_bytes,
                                                                      const WeightType type,
                                                                      BlockSumsAvx2 *block_sums) {
    __m256 acc[2][MAX_ROWS_PER_PASS];
    for (int k = 0; k < halves; k++)
        for (int t = 0; t < n; t++) acc[k][t] = _mm256_setzero_ps();
    const size_t quant_bytes = (size_t)nb * block_bytes, scale_lines = (panel_bytes - quant_bytes) / 64;
    const uint16_t *scales = (const uint16_t *)(panel + quant_bytes);
    PrefetchStream ahead = prefetch_stream(panel, nb, block_bytes, panel_bytes);
    for (int b = 0; b < nb; b++) {
        if (prefetch) {
            prefetch_stream_at(&ahead, b);
            for (int line = 0; line < block_bytes / 64; line++)  // past the end, a prefetch does nothing
                _mm_prefetch(ahead.far + (size_t)b * block_bytes + 64 * line, _MM_HINT_T1);
            for (int line = 0; into_l1 && line < block_bytes / 64; line++)
                _mm_prefetch(ahead.near + (size_t)b * block_bytes + 64 * line, _MM_HINT_T0);
            if ((size_t)b < scale_lines)  // line b of the next panel's scales, as AVX-512's walk asks for them
                _mm_prefetch((const char *)panel + panel_bytes + quant_bytes + 64 * (size_t)b, _MM_HINT_T1);
        }
        for (int k = 0; k < halves; k++) {
            const int h = h0 + k;
            const __m128i scales_16 = _mm_loadu_si128((const __m128i *)(scales + b * Q8_PANEL + h * HALF));
            const __m256 d_w = f16_scales(type)  // F16 or BF16 widened: exact either way
                                   ? _mm256_cvtph_ps(scales_16)
                                   : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(scales_16), 16));
            __m256i isum[MAX_ROWS_PER_PASS];
            block_sums(isum, panel + (size_t)b * block_bytes + h * HALF * 4, x + b, nb, n);
            for (int t = 0; t < n; t++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                acc[k][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(d_w, _mm256_set1_ps(xb->d)),
                                            acc[k][t]);
                if (block_mins(type))  // + m · fl(d_x · Σ q_x), the mins F16 after the scales
                    acc[k][t] = _mm256_fmadd_ps(
                        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + (nb + b) * Q8_PANEL + h * HALF))),
                        _mm256_set1_ps(xb->d * (float)(xb->offset / -128)), acc[k][t]);
            }
        }
    }
    for (int k = 0; k < halves; k++) {
        const int h = h0 + k;
        store_half(out + h * HALF, acc[k], bias ? bias + h * HALF : NULL, half_rows(p, h, j0, j1), ld_out, n);
    }
}

// The matmul of MatmulQ8Fn over panels of `panel_bytes` of `type`, each block's quants `block_bytes` of them, up to
// `per_pass` ≤ MAX_ROWS_PER_PASS activation rows a pass (a constant where this is inlined); a single row (decoding)
// takes both halves of a panel in one pass, prefetched into L1 too where `decode_into_l1` says so.
static inline __attribute__((always_inline)) void walk_panels(float *out, const Q8Block *x, const void *w,
                                                              const float *bias, int T, int n_in, int ld_out, int j0,
                                                              int j1, size_t panel_bytes, const int block_bytes,
                                                              const WeightType type, const int per_pass,
                                                              const bool decode_into_l1, BlockSumsAvx2 *block_sums) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * panel_bytes;
        float *o = out + (size_t)p * Q8_PANEL;
        const float *b = bias ? bias + (size_t)p * Q8_PANEL : NULL;
        // the halves [h0, h_end) that hold rows of [j0, j1)
        const int h0 = j0 > p * Q8_PANEL + HALF - 1 ? 1 : 0, h_end = j1 > p * Q8_PANEL + HALF ? 2 : 1;
        if (T == 1 && h_end - h0 == 2) {
            halves_against_rows(o, x, panel, panel_bytes, b, nb, ld_out, p, j0, j1, 0, 2, true, decode_into_l1, 1,
                                block_bytes, type, block_sums);
            continue;
        }
        for (int h = h0; h < h_end; h++)
            for (int t = 0; t < T; t += per_pass) {
                const bool prefetch = t == 0 && h == h0;  // the panel's first pass
#define PASS(n) halves_against_rows(o + (size_t)t * ld_out, x + (size_t)t * nb, panel, panel_bytes, b, nb, ld_out, p, \
                                    j0, j1, h, 1, prefetch, false, n, block_bytes, type, block_sums)
                PASS_WITH_CONSTANT_ROWS(T - t < per_pass ? T - t : per_pass, PASS)
#undef PASS
            }
    }
}

// AVX-VNNI (Alder Lake and later Intel cores, Zen 5): vpdpbusd on 256-bit registers, VEX-encoded, so a CPU with
// AVX2 but no AVX-512 runs it. The functions that use it are compiled for it alone (the avxvnni variant, dispatch.c).
#define AVX_VNNI __attribute__((target("avxvnni")))

#endif
