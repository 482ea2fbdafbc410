// qk_avx2.c — GGUF's K-quants multiplied as stored (kernels.h, "GGUF's K-quants, as stored") with AVX2: a K-panel's 16
// rows as two halves of 8, one 32-bit lane per weight row, as q8's walk (panel_walk_avx2.h) has them. A block's 8
// groups of 8 rows × 4 inputs are unpacked (Q5_K's and Q6_K's low 4 bits as Q4_K's nibbles, Q5_K's fifth bits and
// Q6_K's top 2 bits shifted in from their lines) once for all the pass's activation rows. The quants are prefetched as
// q8's walk prefetches them, and a panel's first pass asks for the scales of the next panel as AVX-512's walk does
// (panel_walk_avx512.h): in a Q4_K_M decode on one core, the Q4_K matmul's time fell 22–26 %, Q6_K's 13–19 % (perf
// record's samples, machine shared: docs/performance-history.md, "Prefetching the scales"); decoding, into L1 as
// well where decode_prefetches_into_l1 says (panel_walk_avx2.h: Intel's cores). vpmaddubsw multiplies the
// unsigned quants (Q4_K's q ∈ [0, 15], Q5_K's [0, 31], Q6_K's [0, 63]) by the signed activation bytes into pairs of 16
// bits, two groups' pairs are added, and vpmaddwd by ones adds those into 32 bits; a Q6_K half's sum starts at −32 · Σ
// q_x over that half (its weights are q − 32). The integer sums are exact and the float steps are the reference's
// (kernels.h; qk.c), so the result is bit-identical to it. Decoding (one activation row) takes both halves of a panel
// in one pass, as q8's walk does: Q4_K's decode from memory on one thread streamed at 0.70 of the read pass with one
// half a pass (the second re-reading the panel from the caches), at 0.87–0.88 so
// (docs/performance-history.md, "Q4_K's decode in one pass over a panel on plain AVX2").
#include "panel_walk_avx2.h"

enum { GROUPS = Q8_BLOCK / Q8_GROUP, ROWS_PER_PASS = 8 };

// sum + Σ over groups [g0, g1) (an even count) of the half's w · (row's activation bytes), exact, in 32-bit lanes:
// two groups' pairs added in 16 bits first (at most 4 · 63 · 128 < 2¹⁵).
static inline __attribute__((always_inline)) __m256i group_sums(__m256i sum, const __m256i w[GROUPS],
                                                                const int8_t *q_x, int g0, int g1) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int g = g0; g < g1; g += 2) {
        const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(w[g], broadcast_group(q_x + Q8_GROUP * g)),
                                               _mm256_maddubs_epi16(w[g + 1], broadcast_group(q_x + Q8_GROUP * (g + 1))));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, ones));
    }
    return sum;
}

// A block's integer scales of a half's 8 rows, one 32-bit lane a row: Q4_K's and Q5_K's sc, and m in *second;
// Q6_K's sc_lo, and sc_hi in *second.   scales: the block's, from the half's first row; tops: the half's rows' top
// bits of the super-block (Q4_K, Q5_K); c: the block's place in the super-block
static inline __attribute__((always_inline)) __m256i k_half_scales(__m256i *second, const uint8_t *scales,
                                                                   __m256i tops, int c, const WeightType type) {
    if (type == WEIGHT_Q6_K) {  // row r's two scale bytes in lane r's low 16 bits
        const __m256i pairs = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)scales));
        *second = _mm256_srai_epi32(_mm256_slli_epi32(pairs, 16), 24);
        return _mm256_srai_epi32(_mm256_slli_epi32(pairs, 24), 24);
    }
    // row r's low 4 bits of sc and m in lane r's low byte, its top 2 bits of each at bits 0..3 of `shifted`
    const __m256i low = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)scales)), top = _mm256_set1_epi32(0x30);
    const __m256i shifted = _mm256_srl_epi32(tops, _mm_cvtsi32_si128(4 * c));
    *second = _mm256_or_si256(_mm256_srli_epi32(low, 4), _mm256_and_si256(_mm256_slli_epi32(shifted, 2), top));
    return _mm256_or_si256(_mm256_and_si256(low, _mm256_set1_epi32(0xf)),
                           _mm256_and_si256(_mm256_slli_epi32(shifted, 4), top));
}

// Halves h0 .. h0 + halves − 1 (halves 1 or 2; rows 8h..8h+7 each) of the K-panel against activation rows t < n ≤
// ROWS_PER_PASS (a constant where this is inlined), each half its own sums; lanes outside rows[k] (half h0 + k's)
// are neither stored nor read from bias. Both halves in one pass is for decoding (n = 1), as in q8's walk: each
// line of the panel is then read once, and a core has two independent chains of float steps. `prefetch`: the
// panel's first pass, which asks for the quants ahead of itself into L2, and into L1 as well where `into_l1` says.
//   out, bias: from the panel's first row; out [n, ld_out]
static inline __attribute__((always_inline)) void k_halves_against_rows(float *out, const Q8Block *x,
                                                                        const uint8_t *panel, const float *bias,
                                                                        int n_in, int ld_out, int h0,
                                                                        const int halves, const __m256i rows[2],
                                                                        bool prefetch, bool into_l1, const int n,
                                                                        const WeightType type) {
    const int nb = q8_blocks(n_in);
    const __m256i nibble = _mm256_set1_epi8(0x0f), top = _mm256_set1_epi8(0x30), fifth = _mm256_set1_epi8(0x10);
    __m256 acc[2][ROWS_PER_PASS], d[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, dmin[2] = {d[0], d[1]};
    __m256i tops[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};  // Q4_K, Q5_K: the super-block's top bits
    for (int k = 0; k < halves; k++)
        for (int t = 0; t < n; t++) acc[k][t] = _mm256_setzero_ps();
    PrefetchStream ahead = prefetch_stream(panel, nb, k_block_bytes(type), k_panel_bytes(type, n_in));
    const size_t quant_bytes = (size_t)nb * k_block_bytes(type),
                 scale_lines = (k_panel_bytes(type, n_in) - quant_bytes) / 64;
    for (int b = 0; b < nb; b++) {
        if (prefetch) {
            prefetch_stream_at(&ahead, b);
            for (int line = 0; line < k_block_bytes(type) / 64; line++)  // past the end, a prefetch does nothing
                _mm_prefetch(ahead.far + (size_t)b * k_block_bytes(type) + 64 * line, _MM_HINT_T1);
            for (int line = 0; into_l1 && line < k_block_bytes(type) / 64; line++)
                _mm_prefetch(ahead.near + (size_t)b * k_block_bytes(type) + 64 * line, _MM_HINT_T0);
            if ((size_t)b < scale_lines)  // line b of the next panel's scales, as AVX-512's walk asks for them
                _mm_prefetch((const char *)panel + k_panel_bytes(type, n_in) + quant_bytes + 64 * (size_t)b,
                             _MM_HINT_T1);
        }
        for (int k = 0; k < halves; k++) {
            const int h = h0 + k;
            if (b % K_BLOCKS == 0) {  // the super-block's F16 d and dmin of the half's rows, and their top bits
                const uint8_t *super = panel + k_super_offset(type, n_in, h * HALF, b / K_BLOCKS);
                d[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)super));
                if (type != WEIGHT_Q6_K) {
                    dmin[k] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(super + 32)));
                    tops[k] = _mm256_loadu_si256(
                        (const __m256i *)(panel + k_tops_offset(type, n_in, h * HALF, b / K_BLOCKS)));
                }
            }
            const uint8_t *q = panel + (size_t)b * k_block_bytes(type) + h * HALF * 4;
            __m256i w[GROUPS];  // group g: the half's rows × inputs 4g..4g+3
            for (int line = 0; line < GROUPS / 2; line++) {  // line l: groups l and l + 4
                const __m256i packed = _mm256_loadu_si256((const __m256i *)(q + 64 * line));
                w[line] = _mm256_and_si256(packed, nibble);
                w[line + GROUPS / 2] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
            }
            for (int g = 0; g < GROUPS && type == WEIGHT_Q5_K; g++) {  // group g's fifth bits: bit g of the bytes
                const __m256i line = _mm256_loadu_si256((const __m256i *)(q + Q8_BLOCK * Q8_PANEL / 2));  // to bit 4
                const __m256i bits = g < 4 ? _mm256_slli_epi16(line, 4 - g) : _mm256_srli_epi16(line, g - 4);
                w[g] = _mm256_or_si256(w[g], _mm256_and_si256(bits, fifth));
            }
            for (int g = 0; g < GROUPS && type == WEIGHT_Q6_K; g++) {  // group g's top 2 bits: bits 2 · (g % 4) of
                const int c = g % 4;                                   // line g / 4 of the last 128 bytes, to 4 and 5
                const __m256i line = _mm256_loadu_si256((const __m256i *)(q + Q8_BLOCK * Q8_PANEL / 2 + 64 * (g / 4)));
                const __m256i bits = c < 2 ? _mm256_slli_epi16(line, 4 - 2 * c) : _mm256_srli_epi16(line, 2 * c - 4);
                w[g] = _mm256_or_si256(w[g], _mm256_and_si256(bits, top));
            }
            // d·sc (Q6_K: d·sc_lo, then d·sc_hi) and −dmin·m, exact, for all the pass's activation rows
            __m256i second_int;
            const __m256i first_int = k_half_scales(&second_int, panel + k_scale_offset(type, n_in, h * HALF, b),
                                                    tops[k], b % K_BLOCKS, type);
            const __m256 d_scale = _mm256_mul_ps(d[k], _mm256_cvtepi32_ps(first_int)),
                         second = _mm256_cvtepi32_ps(second_int);
            const __m256 d_scale_high = _mm256_mul_ps(d[k], second),
                         minus_dmin_min = _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(dmin[k], second));
            for (int t = 0; t < n; t++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                const __m256 d_x = _mm256_set1_ps(xb->d);
                if (type == WEIGHT_Q6_K) {
                    const int32_t low_x = q8_low_half_sum(xb);  // the other half's: −offset / 128 − low_x
                    const __m256i low = group_sums(_mm256_set1_epi32(-32 * low_x), w, xb->q, 0, GROUPS / 2),
                                  high = group_sums(_mm256_set1_epi32(xb->offset / 4 + 32 * low_x), w, xb->q,
                                                    GROUPS / 2, GROUPS);
                    acc[k][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(low), _mm256_mul_ps(d_scale, d_x), acc[k][t]);
                    acc[k][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(high), _mm256_mul_ps(d_scale_high, d_x), acc[k][t]);
                    continue;
                }
                acc[k][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(group_sums(_mm256_setzero_si256(), w, xb->q, 0, GROUPS)),
                                         _mm256_mul_ps(d_scale, d_x), acc[k][t]);
                acc[k][t] = _mm256_fmadd_ps(minus_dmin_min, _mm256_set1_ps(xb->d * (float)(xb->offset / -128)),
                                            acc[k][t]);
            }
        }
    }
    for (int k = 0; k < halves; k++) {
        const int h = h0 + k;
        store_half(out + h * HALF, acc[k], bias ? bias + h * HALF : NULL, rows[k], ld_out, n);
    }
}

// MatmulQ8Fn over K-panels of `type`, ROWS_PER_PASS activation rows a pass over each half.
static inline __attribute__((always_inline)) void k_walk(float *out, const Q8Block *x, const void *w,
                                                         const float *bias, int T, int n_in, int ld_out, int j0,
                                                         int j1, const WeightType type) {
    const int nb = q8_blocks(n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * k_panel_bytes(type, n_in);
        float *o = out + (size_t)p * Q8_PANEL;
        const float *b = bias ? bias + (size_t)p * Q8_PANEL : NULL;
        // the halves [h0, h_end) that hold rows of [j0, j1), and their lanes
        const int h0 = j0 > p * Q8_PANEL + HALF - 1 ? 1 : 0, h_end = j1 > p * Q8_PANEL + HALF ? 2 : 1;
        const __m256i rows[2] = {half_rows(p, 0, j0, j1), half_rows(p, 1, j0, j1)};
        if (T == 1 && h_end - h0 == 2) {
            k_halves_against_rows(o, x, panel, b, n_in, ld_out, 0, 2, rows, true, decode_prefetches_into_l1(), 1,
                                  type);
            continue;
        }
        for (int h = h0; h < h_end; h++) {
            for (int t = 0; t < T; t += ROWS_PER_PASS) {
                const bool prefetch = t == 0 && h == h0;  // the panel's first pass
#define PASS(n) k_halves_against_rows(o + (size_t)t * ld_out, x + (size_t)t * nb, panel, b, n_in, ld_out, h, 1, \
                                      rows + h, prefetch, false, n, type)
                PASS_WITH_CONSTANT_ROWS(T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS, PASS)
#undef PASS
            }
        }
    }
}

void q4_k_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q4_K);
}

void q5_k_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q5_K);
}

void q6_k_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                      int j0, int j1) {
    k_walk(out, x, w, bias, T, n_in, ld_out, j0, j1, WEIGHT_Q6_K);
}
