// qk_avx512.c — GGUF's K-quants multiplied as stored (kernels.h, "GGUF's K-quants, as stored") with AVX-512 VNNI:
// one 32-bit lane per weight row of a 16-row K-panel, as q8's walk (panel_walk_avx512.h) has them. A block's 8
// groups of 16 rows × 4 inputs are unpacked once for all the pass's activation rows and multiplied by vpdpbusd
// (unsigned weights against the signed activation bytes): Q4_K's nibbles and Q5_K's bytes are unsigned already;
// Q6_K's q − 32 has its top bit flipped (u = q − 32 + 128), and each half's sum starts at −128 · Σ q_x over that
// half. The integer sums are exact and the float steps are the reference's (qk.c), so the result is bit-identical
// to it.
//
// Compiled with the avx512 variant's flags, the matmuls for VNNI too; dispatch.c gives the avx512 variant AVX2's
// instead where cpuid does not report AVX512_VNNI.
#include "panel_walk_avx512.h"

// A block's 8 groups as unsigned bytes (group g: rows × inputs 4g..4g+3).
static inline __attribute__((always_inline)) void k_unpack(__m512i w[GROUPS], const uint8_t *q, const WeightType type) {
    const __m512i nibble = _mm512_set1_epi8(0x0f), flip = _mm512_set1_epi8((char)0x80);
    for (int line = 0; line < GROUPS / 2 && type == WEIGHT_Q4_K; line++) {  // line l: groups l and l + 4
        const __m512i packed = _mm512_load_si512(q + 64 * line);
        w[line] = _mm512_and_si512(packed, nibble);
        w[line + GROUPS / 2] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    }
    for (int g = 0; g < GROUPS && type != WEIGHT_Q4_K; g++) {
        const __m512i bytes = _mm512_load_si512(q + 64 * g);
        w[g] = type == WEIGHT_Q6_K ? _mm512_xor_si512(bytes, flip) : bytes;
    }
}

// Σ over groups [g0, g1) of w · (row's activation bytes), into sum.
static inline __attribute__((always_inline)) VNNI __m512i group_sums(__m512i sum, const __m512i w[GROUPS],
                                                                     const int8_t *q_x, int g0, int g1) {
    for (int g = g0; g < g1; g++) sum = _mm512_dpbusd_epi32(sum, w[g], broadcast_group(q_x + Q8_GROUP * g));
    return sum;
}

// The panel's 16 rows against activation rows t < n ≤ ROWS_PER_PASS (a constant where this is inlined); lanes
// outside `rows` are neither stored nor read from bias.   out: [n, ld_out] from the panel's first row   x: [n, nb]
static inline __attribute__((always_inline)) VNNI void k_panel_against_rows(float *out, const Q8Block *x,
                                                                            const uint8_t *panel, const float *bias,
                                                                            int n_in, int ld_out, __mmask16 rows,
                                                                            const int n, const WeightType type) {
    const int nb = q8_blocks(n_in);
    __m512 acc[ROWS_PER_PASS], d = _mm512_setzero_ps(), dmin = _mm512_setzero_ps();
    for (int t = 0; t < n; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        if (b % K_BLOCKS == 0) {  // the super-block's F16 d and dmin of the 16 rows
            const uint8_t *super = panel + k_super_offset(type, n_in, 0, b / K_BLOCKS);
            d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)super));
            dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(super + 32)));
        }
        __m512i w[GROUPS];
        k_unpack(w, panel + (size_t)b * k_block_bytes(type), type);
        const __m512i pairs =  // row r's two scale bytes in lane r's low 16 bits
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(panel + k_scale_offset(type, n_in, 0, b))));
        for (int t = 0; t < n; t++) {
            const Q8Block *xb = &x[(size_t)t * nb + b];
            const __m512 d_x = _mm512_set1_ps(xb->d);
            if (type == WEIGHT_Q6_K) {
                int32_t low_x = 0;  // Σ q_x over inputs 0..15; the other half's is −offset / 128 − low_x
                for (int i = 0; i < 16; i++) low_x += xb->q[i];
                const __m512i low = group_sums(_mm512_set1_epi32(-128 * low_x), w, xb->q, 0, GROUPS / 2);
                const __m512i high = group_sums(_mm512_set1_epi32(xb->offset + 128 * low_x), w, xb->q, GROUPS / 2,
                                                GROUPS);
                const __m512i scale_low = _mm512_srai_epi32(_mm512_slli_epi32(pairs, 24), 24),
                              scale_high = _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 24);
                const __m512i P = _mm512_add_epi32(_mm512_mullo_epi32(low, scale_low),
                                                   _mm512_mullo_epi32(high, scale_high));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(d, d_x), acc[t]);
                continue;
            }
            const __m512i scale = _mm512_and_si512(pairs, _mm512_set1_epi32(0xff)), min = _mm512_srli_epi32(pairs, 8);
            const __m512i P = _mm512_mullo_epi32(group_sums(_mm512_setzero_si512(), w, xb->q, 0, GROUPS), scale);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(P), _mm512_mul_ps(d, d_x), acc[t]);
            const __m512i minus_m_x = _mm512_mullo_epi32(min, _mm512_set1_epi32(xb->offset / 128));  // −m · Σ q_x
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(minus_m_x), _mm512_mul_ps(dmin, d_x), acc[t]);
        }
    }
    for (int t = 0; t < n; t++) {
        __m512 v = acc[t];
        if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rows, bias));
        _mm512_mask_storeu_ps(out + (size_t)t * ld_out, rows, v);
    }
}

// MatmulQ8Fn over K-panels of `type`, ROWS_PER_PASS activation rows a pass over each panel.
static inline __attribute__((always_inline)) VNNI void k_walk(float *out, const Q8Block *x, const void *w,
                                                              const float *bias, int T, int n_in, int ld_out, int j0,
                                                              int j1, const WeightType type) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const int first = p * Q8_PANEL;  // rows [first, first + 16), of which [j0, j1) are wanted
        const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < Q8_PANEL ? j1 - first : Q8_PANEL;
        const __mmask16 rows = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * k_panel_bytes(type, n_in);
        const float *b = bias ? bias + first : NULL;
        for (int t = 0; t < T; t += ROWS_PER_PASS) {
            float *o = out + (size_t)t * ld_out + first;
            const Q8Block *xt = x + (size_t)t * nb;
#define PASS(n) k_panel_against_rows(o, xt, panel, b, n_in, ld_out, rows, n, type)
            PASS_WITH_CONSTANT_ROWS(T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS, PASS)
#undef PASS
        }
    }
}

VNNI void q4_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q4_K);
}

VNNI void q5_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q5_K);
}

VNNI void q6_k_matmul_avx512(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,
                             int ld_out, int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q6_K);
}
