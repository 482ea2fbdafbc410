// q8_avx512.c — the q8 matmul (kernels.h) with AVX-512 VNNI, on the panel walk of panel_walk_avx512.h, and the
// activations' quantizer.
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
#include "panel_walk_avx512.h"

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

VNNI void q8_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                           int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, Q8_BLOCK * Q8_PANEL, flipped_bytes_unpack, 1, WEIGHT_Q8);
}

// GGUF's Q8_0 (kernels.h): the same panels with F16 scales.
VNNI void q8_0_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, Q8_BLOCK * Q8_PANEL, flipped_bytes_unpack, 1,
                WEIGHT_Q8_0);
}
