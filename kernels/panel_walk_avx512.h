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
// A panel's scales (and a K-panel's d and dmin), after its quants, are a second stream that the hardware did not
// keep ahead of: in a Q4_K_M decode on one core, about half of the Q4_K matmul's time samples sat at its loads of
// the scales (perf annotate). So at block b, a panel's first pass also asks for line b of the scales of the panel
// the walk reads next in its place, into L2: a panel's scales are fewer lines than it has blocks, so each pass
// finds its own asked for by the pass before (all but a walk's first). In that decode the Q4_K matmul's time fell
// 10–13 %, Q6_K's 15–17 %, and in a Q4_0 decode Q4_0's 6–7 % (perf record's samples per function, on a machine
// shared with other builds: docs/performance-history.md, "Prefetching the scales").
//
// Decoding (T = 1) takes whole panels DECODE_PANELS = 2 at a time. With one activation row, a block's 8 vpdpbusd
// are one chain, each waiting for the last; a second panel gives the core a second chain to run beside it, and the
// activation broadcasts serve both. On one Zen 4 core, q4's decode product ran 1.16 × faster, in the L2 and from
// memory; q8's ran 0.98–1.06 × as fast (tools/matmul_ab/run.sh; docs/performance-history.md, "Decoding's panels
// in pairs"). Four at a time were no faster. A block's 8 vpdpbusd are also two chains of 4 (groups 0..3 and 4..7,
// their integer sums added, exact): on one Emerald Rapids core the T = 1 products in the L2 then ran 1.05–1.09 × as
// fast in the fastest rounds for q4, Q4_K and Q5_K, q8's 1.02 × (docs/performance-history.md, "Two chains a block
// on an Emerald Rapids Xeon"; tried before on another machine, the same had given 1.00–1.03).
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

// The formats' UnpackAvx512s. q8's and Q8_0's: each 64-byte line of the block is one group, its top bits
// flipped (u = q + 128). q4's, Q4_0's and Q4_K's (and Q6_K's low 4 bits): line l of the block holds groups l (low
// nibbles) and l + 4 (high), as they are. Q5_0's, Q5_1's and Q5_K's: those nibbles, each group's fifth bits shifted
// to bit 4 from the block's last line and or-ed in.
static inline __attribute__((always_inline)) void flipped_bytes_unpack(__m512i w[GROUPS], const uint8_t *q) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int g = 0; g < GROUPS; g++) w[g] = _mm512_xor_si512(_mm512_load_si512(q + 64 * g), flip);
}

static inline __attribute__((always_inline)) void nibbles_unpack(__m512i w[GROUPS], const uint8_t *q) {
    const __m512i nibble = _mm512_set1_epi8(0x0f);
    for (int line = 0; line < GROUPS / 2; line++) {
        const __m512i packed = _mm512_load_si512(q + 64 * line);
        w[line] = _mm512_and_si512(packed, nibble);
        w[line + GROUPS / 2] = _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble);
    }
}

static inline __attribute__((always_inline)) void fifth_bits_unpack(__m512i w[GROUPS], const uint8_t *q) {
    nibbles_unpack(w, q);
    const __m512i high = _mm512_load_si512(q + Q5_NIBBLE_BYTES), fifth = _mm512_set1_epi8(0x10);
    for (int g = 0; g < GROUPS; g++) {  // group g's fifth bits: bit g of each byte, to bit 4
        const __m512i bits = g < 4 ? _mm512_slli_epi16(high, 4 - g) : _mm512_srli_epi16(high, g - 4);
        w[g] = _mm512_ternarylogic_epi32(w[g], bits, fifth, 0xf8);  // w | (bits & fifth)
    }
}

// GGUF's K-quants (kernels.h, "GGUF's K-quants, as stored") on the same walk: a block's float steps, per weight
// row, from its integer sums and its K-panel's scales. Their unpacking gives u = q (Q4_K, Q5_K; Q6_K's q ∈ [0, 63],
// whose weight is q − 32), so a Q6_K half's sum starts at −32 · Σ q_x over that half.
typedef struct {
    __m512 d, dmin;               // the super-block's, F16 widened
    __m512i tops;                 // Q4_K, Q5_K: the super-block's top 2 bits of each block's sc and m, per row
    __m512 d_scale, d_scale_high; // per row: Q4_K, Q5_K d·sc (d_scale_high unused); Q6_K d·sc_lo and d·sc_hi
    __m512 minus_dmin_min;        // Q4_K, Q5_K: −dmin·m
} KScales;

// Block b's scales of the K-panel at `panel` (rows of nb blocks); d, dmin and the top bits only read at a
// super-block's start.
static inline __attribute__((always_inline)) void k_scales_at(KScales *k, const uint8_t *panel, int nb, int b,
                                                              const WeightType type) {
    const int n_in = nb * Q8_BLOCK;
    if (b % K_BLOCKS == 0) {
        const uint8_t *super = panel + k_super_offset(type, n_in, 0, b / K_BLOCKS);
        k->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)super));
        if (type != WEIGHT_Q6_K) {
            k->dmin = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(super + 32)));
            k->tops = _mm512_loadu_si512(panel + k_tops_offset(type, n_in, 0, b / K_BLOCKS));
        }
    }
    const uint8_t *scales = panel + k_scale_offset(type, n_in, 0, b);
    if (type == WEIGHT_Q6_K) {
        const __m512i pairs =  // row r's two scale bytes in lane r's low 16 bits
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)scales));
        k->d_scale = _mm512_mul_ps(k->d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pairs, 24), 24)));
        k->d_scale_high =
            _mm512_mul_ps(k->d, _mm512_cvtepi32_ps(_mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 24)));
        return;
    }
    // row r's low 4 bits of sc and m in lane r's low byte; its top 2 bits of each, at bits 0..3 of `tops`
    const __m512i low = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)scales)), top = _mm512_set1_epi32(0x30);
    const __m512i tops = _mm512_srl_epi32(k->tops, _mm_cvtsi32_si128(4 * (b % K_BLOCKS)));
    const __m512i sc = _mm512_ternarylogic_epi32(_mm512_and_si512(low, _mm512_set1_epi32(0xf)),
                                                 _mm512_slli_epi32(tops, 4), top, 0xf8);  // a | (b & c)
    const __m512i m = _mm512_ternarylogic_epi32(_mm512_srli_epi32(low, 4), _mm512_slli_epi32(tops, 2), top, 0xf8);
    k->d_scale = _mm512_mul_ps(k->d, _mm512_cvtepi32_ps(sc));
    k->minus_dmin_min = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(k->dmin, _mm512_cvtepi32_ps(m)));
}

// acc + one activation block's part of the K-panel rows' dot products, in the reference's float steps (qk.c):
// acc = fma(Σ, fl(d·sc · d_x)) (Q6_K: each half's), then for Q4_K and Q5_K acc = fma(−dmin·m, fl(d_x · Σ q_x)).
static inline __attribute__((always_inline)) VNNI __m512 k_block_fma(__m512 acc, const __m512i w[GROUPS],
                                                                     const KScales *k, const Q8Block *xb,
                                                                     const WeightType type) {
    const __m512 d_x = _mm512_set1_ps(xb->d);
    if (type == WEIGHT_Q6_K) {
        const int32_t low_x = q8_low_half_sum(xb);  // the other half's: −offset / 128 − low_x
        __m512i low = _mm512_set1_epi32(-32 * low_x), high = _mm512_set1_epi32(xb->offset / 4 + 32 * low_x);
        for (int g = 0; g < GROUPS / 2; g++) {
            low = _mm512_dpbusd_epi32(low, w[g], broadcast_group(xb->q + Q8_GROUP * g));
            high = _mm512_dpbusd_epi32(high, w[g + GROUPS / 2], broadcast_group(xb->q + 16 + Q8_GROUP * g));
        }
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(low), _mm512_mul_ps(k->d_scale, d_x), acc);
        return _mm512_fmadd_ps(_mm512_cvtepi32_ps(high), _mm512_mul_ps(k->d_scale_high, d_x), acc);
    }
    __m512i low = _mm512_setzero_si512(), high = low;  // groups 0..3 and 4..7, two chains, added (exact)
    for (int g = 0; g < GROUPS / 2; g++) {
        low = _mm512_dpbusd_epi32(low, w[g], broadcast_group(xb->q + Q8_GROUP * g));
        high = _mm512_dpbusd_epi32(high, w[g + GROUPS / 2], broadcast_group(xb->q + Q8_GROUP * (g + GROUPS / 2)));
    }
    const __m512i sum = _mm512_add_epi32(low, high);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(k->d_scale, d_x), acc);
    return _mm512_fmadd_ps(k->minus_dmin_min, _mm512_set1_ps(xb->d * (float)(xb->offset / -128)), acc);
}

// The 16 · n_panels weight rows of n_panels ≤ DECODE_PANELS consecutive panels (`panel`, then `panel` +
// panel_bytes, ...) against activation rows t < n ≤ 8 (n and n_panels constants where this is inlined; several
// panels only with one row, where the registers allow it): their float sums over the blocks sit in n · n_panels
// registers, a block's 8 groups in 8 more. Rows outside `rows` (the first panel's; the others are always whole)
// are neither stored nor read from bias. `prefetch`: this is the panels' first pass. `block_bytes`: a block's
// quants in a panel; `offset_divisor`: 128 / c, or 0 for c = 0; `type`: the panels' (q8's, q4's or q5's, their
// scales F16 for GGUF's blocks, else BF16, Q5_1's and Q4_1's mins one more fused multiply-add a block: kernels.h; or
// a K-quant's, whose block steps are k_block_fma's).
//   out: [n, ld_out] from the first panel's first row   x: [n, nb]
static inline __attribute__((always_inline)) VNNI void panels_against_rows(
    float *out, const Q8Block *x, const uint8_t *panel, size_t panel_bytes, const float *bias, int nb, int ld_out,
    __mmask16 rows, bool prefetch, const int n, const int n_panels, const int block_bytes, UnpackAvx512 *unpack,
    const int offset_divisor, const WeightType type) {
    __m512 acc[DECODE_PANELS][ROWS_PER_PASS];
    KScales k[DECODE_PANELS];  // K-quants' (d and dmin set at each super-block's start)
    for (int p = 0; p < n_panels; p++) {
        k[p].d = k[p].dmin = _mm512_setzero_ps();
        k[p].tops = _mm512_setzero_si512();
        for (int t = 0; t < n; t++) acc[p][t] = _mm512_setzero_ps();
    }
    const size_t quant_bytes = (size_t)nb * block_bytes, scale_lines = (panel_bytes - quant_bytes) / 64;
    PrefetchStream ahead = prefetch_stream(panel, nb, block_bytes, (size_t)n_panels * panel_bytes);
    for (int b = 0; b < nb; b++) {
        const size_t at = (size_t)b * block_bytes;
        if (prefetch) prefetch_stream_at(&ahead, b);
        for (int p = 0; p < n_panels; p++) {
            const uint8_t *q = panel + p * panel_bytes + at;
            for (int line = 0; line < block_bytes / 64 && prefetch; line++) {  // past the end, a prefetch does nothing
                _mm_prefetch(ahead.near + p * panel_bytes + at + 64 * line, _MM_HINT_T0);
                _mm_prefetch(ahead.far + p * panel_bytes + at + 64 * line, _MM_HINT_T1);
            }
            if (prefetch && (size_t)b < scale_lines)  // line b of the scales of the next pass's panel p
                _mm_prefetch((const char *)panel + (n_panels + p) * panel_bytes + quant_bytes + 64 * (size_t)b,
                             _MM_HINT_T1);
            __m512i w[GROUPS];
            unpack(w, q);
            if (k_quant(type)) {
                k_scales_at(&k[p], panel + p * panel_bytes, nb, b, type);
#pragma GCC unroll 8  // the sums stay in registers (left to itself, GCC kept Q6_K's in memory)
                for (int t = 0; t < n; t++) acc[p][t] = k_block_fma(acc[p][t], w, &k[p], &x[(size_t)t * nb + b], type);
                continue;
            }
            const uint16_t *scales = (const uint16_t *)(panel + p * panel_bytes + quant_bytes);
            const __m256i scales_16 =  // the 16 rows' scales, then as F32 (from F16 or BF16: exact either way)
                _mm256_loadu_si256((const __m256i *)(scales + b * Q8_PANEL));
            const __m512 d_w = f16_scales(type)
                                   ? _mm512_cvtph_ps(scales_16)
                                   : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(scales_16), 16));
            const __m256i mins_16 =  // Q5_1's and Q4_1's mins, F16 after the scales
                block_mins(type) ? _mm256_loadu_si256((const __m256i *)(scales + (nb + b) * Q8_PANEL))
                                 : _mm256_setzero_si256();
            const __m512 m_w = _mm512_cvtph_ps(mins_16);
            for (int t = 0; t < n; t++) {
                const Q8Block *xb = &x[(size_t)t * nb + b];
                __m512i isum = _mm512_set1_epi32(offset_divisor ? xb->offset / offset_divisor : 0),
                        high = _mm512_setzero_si512();  // groups 0..3 and 4..7, two chains, added (exact)
                for (int g = 0; g < GROUPS / 2; g++) {
                    isum = _mm512_dpbusd_epi32(isum, w[g], broadcast_group(xb->q + Q8_GROUP * g));
                    high = _mm512_dpbusd_epi32(high, w[g + GROUPS / 2],
                                               broadcast_group(xb->q + Q8_GROUP * (g + GROUPS / 2)));
                }
                isum = _mm512_add_epi32(isum, high);
                const __m512 d = _mm512_mul_ps(d_w, _mm512_set1_ps(xb->d));
                acc[p][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), d, acc[p][t]);
                if (block_mins(type))  // + m · fl(d_x · Σ q_x)
                    acc[p][t] = _mm512_fmadd_ps(m_w, _mm512_set1_ps(xb->d * (float)(xb->offset / -128)), acc[p][t]);
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

// The matmul of MatmulQ8Fn over panels of `type` (quantized_panel_bytes), with panels_against_rows's format
// arguments.
static inline __attribute__((always_inline)) VNNI void walk_panels(float *out, const Q8Block *x, const void *w,
                                                                   const float *bias, int T, int n_in, int ld_out,
                                                                   int j0, int j1, const int block_bytes,
                                                                   UnpackAvx512 *unpack, const int offset_divisor,
                                                                   const WeightType type) {
    const int nb = q8_blocks(n_in);
    const size_t panel_bytes = quantized_panel_bytes(type, n_in);
    for (int p = j0 / Q8_PANEL; p * Q8_PANEL < j1; p++) {
        const int first = p * Q8_PANEL;  // rows [first, first + 16), of which [j0, j1) are wanted
        const int lo = j0 > first ? j0 - first : 0, hi = j1 - first < Q8_PANEL ? j1 - first : Q8_PANEL;
        const __mmask16 rows = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * panel_bytes;
        const float *b = bias ? bias + first : NULL;
        if (T == 1 && first + DECODE_PANELS * Q8_PANEL <= j1) {  // decoding: whole panels, several a pass
            panels_against_rows(out + first, x, panel, panel_bytes, b, nb, ld_out, rows, true, 1, DECODE_PANELS,
                                block_bytes, unpack, offset_divisor, type);
            p += DECODE_PANELS - 1;
            continue;
        }
        for (int t = 0; t < T; t += ROWS_PER_PASS) {
            float *o = out + (size_t)t * ld_out + first;
            const Q8Block *xt = x + (size_t)t * nb;
            const bool prefetch = t == 0;
#define PASS(n) panels_against_rows(o, xt, panel, panel_bytes, b, nb, ld_out, rows, prefetch, n, 1, block_bytes, \
                                    unpack, offset_divisor, type)
            PASS_WITH_CONSTANT_ROWS(T - t < ROWS_PER_PASS ? T - t : ROWS_PER_PASS, PASS)
#undef PASS
        }
    }
}

#endif
