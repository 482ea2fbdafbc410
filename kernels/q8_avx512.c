// q8_avx512.c — the q8 matmul (kernels.h) with AVX-512 VNNI: one register holds 16 weight rows' 4-input groups,
// vpdpbusd multiplies them by 4 activation bytes broadcast to every lane and adds the 4 products into each
// row's 32-bit sum. 16 rows' dot products build up side by side, lane by lane: no horizontal sums.
//
// vpdpbusd multiplies unsigned bytes by signed ones. The weights are signed (q ∈ [−127, 127]); flipping their
// top bit gives q + 128 ∈ [1, 255], and Σ (q_w + 128) · q_x = Σ q_w · q_x + 128 · Σ q_x, so each block's sum
// starts at −128 · Σ q_x (Q8Block.offset, a broadcast load) instead of 0. The flip costs one instruction per 64 bytes of weights,
// shared by all activation rows; quantizing the activations to unsigned instead would need Σ q_w per row and
// block, 4 more bytes of weights per block to stream.
//
// Why integer activations: the alternative, the same weights widened to F32 (shifts and a conversion per 16)
// against F32 activations, one FMA per 16 products, measured slower at T = 1 and at T = 8, from cache and from
// memory, quantizing the activations included (docs/performance-history.md, "Measurements behind the kernels'
// choices").
//
// Compiled with the avx512 variant's flags; the matmul alone is compiled for VNNI too (VNNI below), and
// dispatch.c gives the avx512 variant AVX2's q8 matmul instead where cpuid does not report AVX512_VNNI. The
// quantizer needs no VNNI.
#include <immintrin.h>
#include <string.h>

#include "kernels.h"

// ROWS_PER_PASS activation rows share one pass over a panel (16 were no faster: the sums then spill). The first
// pass prefetches the weights ahead of itself (kernels.h: PREFETCH_L1_AHEAD): without it a pass of 8 rows streams
// a matrix from memory at about half the speed (docs/performance-history.md, "Measurements behind the kernels'
// choices").
enum { ROWS_PER_PASS = 8 };

#define VNNI __attribute__((target("avx512vnni")))  // the functions that use vpdpbusd

static inline __m512i broadcast_group(const int8_t *q) {
    int32_t four;
    memcpy(&four, q, sizeof four);
    return _mm512_set1_epi32(four);
}

// The 16 weight rows of `panel` against activation rows t < n ≤ 8 (a constant where this is inlined): their
// float sums over the blocks sit in n registers, the panel's 8 lines of each block in 8 more. Rows of the panel
// outside `rows` are neither stored nor read from bias. `prefetch`: this is the panel's first pass.
//   out: [n, ld_out] from the panel's first row   x: [n, nb]
static inline __attribute__((always_inline)) VNNI void panel_against_rows(float *out, const Q8Block *x,
                                                                          const uint8_t *panel, const float *bias,
                                                                          int nb, int ld_out, __mmask16 rows,
                                                                          bool prefetch, const int n) {
    __m512 acc[ROWS_PER_PASS];
    for (int t = 0; t < n; t++) acc[t] = _mm512_setzero_ps();
    const uint16_t *scales = (const uint16_t *)(panel + (size_t)nb * Q8_BLOCK * Q8_PANEL);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int b = 0; b < nb; b++) {
        const uint8_t *q = panel + (size_t)b * Q8_BLOCK * Q8_PANEL;
        for (int line = 0; line < 8 && prefetch; line++) {  // past the matrix's end, a prefetch does nothing
            _mm_prefetch((const char *)q + PREFETCH_L1_AHEAD + 64 * line, _MM_HINT_T0);
            _mm_prefetch((const char *)q + PREFETCH_L2_AHEAD + 64 * line, _MM_HINT_T1);
        }
        __m512i w[Q8_BLOCK / Q8_GROUP];  // group g: rows 0..15 × inputs 4g..4g+3, as q + 128
        for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++) w[g] = _mm512_xor_si512(_mm512_load_si512(q + 64 * g), flip);
        const __m512 d_w = _mm512_castsi512_ps(  // the 16 rows' BF16 scales as F32
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(scales + b * Q8_PANEL))), 16));
        for (int t = 0; t < n; t++) {
            const Q8Block *xb = &x[(size_t)t * nb + b];
            __m512i isum = _mm512_set1_epi32(xb->offset);
            for (int g = 0; g < Q8_BLOCK / Q8_GROUP; g++)
                isum = _mm512_dpbusd_epi32(isum, w[g], broadcast_group(xb->q + Q8_GROUP * g));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(d_w, _mm512_set1_ps(xb->d)), acc[t]);
        }
    }
    for (int t = 0; t < n; t++) {
        __m512 v = acc[t];
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rows, bias));
        _mm512_mask_storeu_ps(out + (size_t)t * ld_out, rows, v);
    }
}

// ---- quantizing the activations ----------------------------------------------------------------------------
//
// q8_quantize_rows (q8.c) two registers at a time, with the same operations: max|x| as the largest bit pattern
// without the sign, d = max / 127, x / d plus 1.5 · 2²³ read off as bits and clamped to [−127, 127].
void q8_quantize_rows_avx512(Q8Block *out, const float *x, int T, int n_in, int ld_x) {
    const int nb = q8_blocks(n_in);
    const __m512i low = _mm512_set1_epi32(-127), high = _mm512_set1_epi32(127), magnitude = _mm512_set1_epi32(0x7fffffff);
    const __m512 rounding = _mm512_set1_ps(12582912.0f);
    const __m512i rounding_bits = _mm512_set1_epi32(0x4b400000);
    for (int t = 0; t < T; t++)
        for (int b = 0; b < nb; b++) {
            const float *v = x + (size_t)t * ld_x + b * Q8_BLOCK;
            const int n = n_in - b * Q8_BLOCK;
            const __mmask16 m0 = n >= 16 ? 0xffff : (__mmask16)((1u << n) - 1);
            const __mmask16 m1 = n >= 32 ? 0xffff : n <= 16 ? 0 : (__mmask16)((1u << (n - 16)) - 1);
            const __m512 x0 = _mm512_maskz_loadu_ps(m0, v), x1 = _mm512_maskz_loadu_ps(m1, v + 16);
            const int32_t largest = _mm512_reduce_max_epi32(_mm512_max_epi32(
                _mm512_and_si512(_mm512_castps_si512(x0), magnitude), _mm512_and_si512(_mm512_castps_si512(x1), magnitude)));
            float amax;
            memcpy(&amax, &largest, sizeof amax);
            Q8Block *blk = &out[(size_t)t * nb + b];
            blk->d = amax / 127.0f;
            const __m512 d = _mm512_set1_ps(blk->d > 0.0f ? blk->d : 1.0f);
#define ROUND_CLAMP(v) _mm512_min_epi32(_mm512_max_epi32(_mm512_sub_epi32(_mm512_castps_si512( \
                           _mm512_add_ps(_mm512_div_ps(v, d), rounding)), rounding_bits), low), high)
            const __m512i q0 = ROUND_CLAMP(x0), q1 = ROUND_CLAMP(x1);
#undef ROUND_CLAMP
            _mm_storeu_si128((__m128i *)blk->q, _mm512_cvtepi32_epi8(q0));
            _mm_storeu_si128((__m128i *)(blk->q + 16), _mm512_cvtepi32_epi8(q1));
            blk->offset = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
        }
}

// ---- the matmul ---------------------------------------------------------------------------------------------

VNNI void q8_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const int first = p * Q8_PANEL;  // rows [first, first + 16), of which [j0, j1) are wanted
        const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < Q8_PANEL ? j1 - first : Q8_PANEL;
        const __mmask16 rows = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * q8_panel_bytes(n_in);
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
