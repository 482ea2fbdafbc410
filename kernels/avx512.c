// avx512.c — AVX-512 (F, BW, DQ, VL) kernels: 16 floats per register. Compiled with -mavx512* and called only
// when cpuid and XCR0 say the CPU and OS support it (dispatch.c).
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

#include "kernels.h"

enum { LANES = 16 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

// ---- loads: 16 elements (or the first n < 16, zero-filled) as floats --------------------------------------

static inline __m512 load_f32(const float *p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }

// F32 or F16 weights (BF16 weights take the pair-order kernels below)
static inline __m512 load_weights(const void *p, WeightType type, __mmask16 m) {
    return type == WEIGHT_F16 ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)) : _mm512_maskz_loadu_ps(m, p);
}

static inline __mmask16 first_n(int n) { return n >= LANES ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

// ---- matmul -------------------------------------------------------------------------------------------------
//
// Register blocking: rows_against_block multiplies the 4 weight rows of a panel by n ≤ 8 activation rows in one
// pass, two weight rows to a register in the canonical order's lanes (below), their 16 running sums in registers.
// Each 16-wide slice of the weight rows is loaded (and converted to F32) once and used for all n activation rows.
// A 4-row weight block is streamed from memory once, its first pass prefetching the weights ahead of it (kernels.h:
// PREFETCH_L1_AHEAD), in one pass for up to 8 activation rows (a verification of γ ≤ 7 drafts); further groups of
// 8 re-read it from L1. block_1x1 takes rows outside whole blocks. The weights are in the panel layout
// (kernels.h): the 4 rows of a block alternate in 64-byte slices, so each thread's share of a matrix is one
// sequential stream of memory rather than four rows side by side, which decoding streams faster than four rows
// from memory and from cache (measured: docs/performance-history.md, "Measurements behind the kernels' choices").
//
// Chunks of the inputs: the sums run over chunks of CHUNK inputs, each chunk's sums added to the output in
// turn. Where the activation rows take at most CACHED_ACTIVATIONS bytes (they then stay in L2, 1–2 MB a core on
// current x86, beside the weights streaming through) each 4-row block goes through its chunks in order, and a
// thread's weights are one sequential stream; where they take more — prefill — the whole matmul goes chunk by
// chunk, so that the activation slices each block reads stay in L1 (one pass over all the weight rows per chunk;
// each weight is still read once), and the prefetches go to the next panels' same chunk. The order of the
// arithmetic is the same either way. Chunking by the whole matmul made verifications of T = 5 and T = 16 faster
// where the activations outgrow L2 (the figures: docs/performance-history.md, "Measurements behind the kernels'
// choices").
//
// Batch invariance: every (t, j) pair sees the fused multiply-adds and the horizontal sums of the canonical order
// (kernels.h), as in every variant, so the result depends neither on T, nor on the tile, nor on the split of rows
// between threads, nor on the variant.

enum {
    CHUNK = MATMUL_CHUNK,             // inputs per chunk (the canonical order's): 8 activation rows are 24 kB
    CACHED_ACTIVATIONS = 512 * 1024,  // activation bytes (T · n_in · 4) beyond which the matmul goes chunk by chunk
    L2_AHEAD_PANELS = 2,              // chunk by chunk, passes prefetch the next panel into L1, this one into L2
};

typedef struct {
    WeightType type;
    size_t elem;             // bytes of one weight
    size_t slice_bytes;      // bytes from a 16-weight slice of a row to the row's next slice (the panel layout)
    size_t panel_bytes;      // bytes of a panel of 4 rows
    size_t l1_ahead, l2_ahead;  // how far past the slice being read the first pass prefetches, into L1 and L2
    bool one_row_prefetches;    // whether a pass of a single activation row prefetches too (prefetch_one_row)
    int n_in, ld_x, ld_out;
    int i0, i1;              // the chunk of the inputs this pass covers: [i0, i1)
    bool first, last;        // the first chunk, the last
} Shape;

// Runs `body` over the full 16-wide slices of the inputs [i0, i1) (mask m all ones), then once over the rest.
#define FOR_EACH_SLICE(i0, i1, ...)                                                                      \
    do {                                                                                                 \
        int i = (i0);                                                                                    \
        for (__mmask16 m = 0xffff; i + LANES <= (i1); i += LANES) __VA_ARGS__;                           \
        if (i < (i1)) {                                                                                  \
            __mmask16 m = first_n((i1) - i);                                                             \
            __VA_ARGS__;                                                                                 \
        }                                                                                                \
    } while (0)

// The sums of the 4 lanes of each 128-bit quarter of q, lanes (l, l+2) then (l, l+1): quarter k's in lane k.
static inline __m128 reduce_quarters(__m512 q) {
    q = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(1, 0, 3, 2)));  // (l, l+2) within each quarter
    q = _mm512_add_ps(q, _mm512_permute_ps(q, _MM_SHUFFLE(2, 3, 0, 1)));  // (l, l+1)
    return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                          0, 0, 0), q));
}

#define FMA(acc, xv, wv) acc = _mm512_fmadd_ps(xv, wv, acc)
// line l of the weights l1_ahead bytes past the slice at i of `panel` into L1, and l2_ahead bytes past it into L2;
// 4 lines hold one slice of 4 F32 rows, or two of 4 BF16 or F16 rows
#define PREFETCH(panel, l)                                                                                       \
    do {                                                                                                         \
        const char *at = (const char *)(panel) + (size_t)(i / LANES) * s->slice_bytes + (l) * 64;                \
        _mm_prefetch(at + s->l1_ahead, _MM_HINT_T0);                                                             \
        _mm_prefetch(at + s->l2_ahead, _MM_HINT_T1);                                                             \
    } while (0)

// Adds the sums v of 4 weight rows for one activation row to what earlier chunks left at o, and the bias after the
// last chunk.
static inline void store_4(float *o, __m128 v, const float *bias, const Shape *s) {
    if (!s->first) v = _mm_add_ps(_mm_loadu_ps(o), v);
    if (s->last && bias) v = _mm_add_ps(v, _mm_loadu_ps(bias));
    _mm_storeu_ps(o, v);
}

// ---- Pairs of rows: the canonical order in 16 lanes ----
//
// The canonical order (kernels.h, SUM_LANES) keeps 8 partial sums per output, sum l taking a 16-input slice's
// inputs l and then l + 8. Two weight rows fill a register: lanes 0–7 row r's weights 0–7 (or 8–15), lanes 8–15
// row r + 1's, against the slice's inputs 0–7 (8–15) broadcast to both halves; 2 registers per activation row then
// hold 4 weight rows, so up to 8 activation rows take one pass, their 16 sums in registers.
// BF16 slices are stored in pair order (kernels.h, Kernels.bf16_pairs): 32-bit word l holds weights l (low half)
// and l + 8 (high half), so one aligned 64-byte load brings a slice of two rows, and a shift and a mask, neither a
// shuffle, make F32 weights of it. F32 and F16 slices are plain: each row's slice is loaded (and converted) whole,
// and one vpermt2ps per 16 weights gathers two rows' halves.

// F32 weights l and l + 8 of the slices in w (pair order)
static inline __m512 pair_low(__m512i w) { return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)); }
static inline __m512 pair_high(__m512i w) {
    return _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xffff0000u)));
}

// A slice of two weight rows, in the lanes of the canonical order: low, their weights 0–7 (row r in lanes 0–7,
// row r + 1 in 8–15); high, their weights 8–15. `slice` is row r's slice; row r + 1's follows it.
typedef struct {
    __m512 low, high;
} RowPair;

static inline __attribute__((always_inline)) RowPair row_pair(const uint8_t *slice, const Shape *s) {
    if (s->type == WEIGHT_BF16) {
        const __m512i words = _mm512_load_si512(slice);
        return (RowPair){pair_low(words), pair_high(words)};
    }
    const size_t row_bytes = LANES * s->elem;
    const __m512 r0 = load_weights(slice, s->type, 0xffff), r1 = load_weights(slice + row_bytes, s->type, 0xffff);
    const __m512i low = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    const __m512i high = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    return (RowPair){_mm512_permutex2var_ps(r0, low, r1), _mm512_permutex2var_ps(r0, high, r1)};
}

// x[0..7] (those the mask m keeps, zero elsewhere) in both halves of a register
static inline __m512 eight_twice(const float *x, __mmask8 m) {
    return _mm512_broadcast_f32x8(m == 0xff ? _mm256_loadu_ps(x) : _mm256_maskz_loadu_ps(m, x));
}

// Row sums from pair-order sums: lanes 0–7 of a01 and a23 are weight rows 0 and 2, lanes 8–15 rows 1 and 3. Each
// row's 8 lanes are summed by the canonical tree — (l, l+4), (l, l+2), (l, l+1) — in whichever half they are, so a
// row computed alone (its sums in lanes 0–7) gets the bits it gets in its panel.
static inline __m128 reduce_pairs(__m512 a01, __m512 a23) {
    return reduce_quarters(_mm512_add_ps(_mm512_shuffle_f32x4(a01, a23, _MM_SHUFFLE(2, 0, 2, 0)),   // quarter k:
                                         _mm512_shuffle_f32x4(a01, a23, _MM_SHUFFLE(3, 1, 3, 1))));  // row k's l + l+4
}

// activation row t (if t < n) against the slice's row pairs p01, p23, with the sums a[2t], a[2t + 1]
#define PAIR_ROW(t)                                                                                              \
    if (n > (t)) {                                                                                               \
        const float *xt = x + (size_t)(t) * s->ld_x + i;                                                         \
        const __m512 lo = eight_twice(xt, (__mmask8)m), hi = eight_twice(xt + 8, (__mmask8)(m >> 8));            \
        FMA(a[2 * (t)], lo, p01.low); FMA(a[2 * (t) + 1], lo, p23.low);                                          \
        FMA(a[2 * (t)], hi, p01.high); FMA(a[2 * (t) + 1], hi, p23.high);                                        \
    }

// The 4 weight rows of the panel at w against activation rows t < n ≤ 8 (a constant) over the chunk in s, in one
// pass: a[2t] holds rows 0 and 1 for activation row t, a[2t + 1] rows 2 and 3. The weights stream from memory once
// for the n rows, their first pass prefetching ahead (kernels.h: PREFETCH_L1_AHEAD).
static inline __attribute__((always_inline)) void rows_against_block(float *out, const float *x, const uint8_t *w,
                                                                     const float *bias, const Shape *s,
                                                                     bool prefetch, const int n) {
    __m512 a[16];
    for (int k = 0; k < 16; k++) a[k] = _mm512_setzero_ps();
    FOR_EACH_SLICE(s->i0, s->i1, {
        if (prefetch && (i * s->elem) % 64 == 0) {
            PREFETCH(w, 0); PREFETCH(w, 1); PREFETCH(w, 2); PREFETCH(w, 3);
        }
        const uint8_t *slice = w + (size_t)(i / LANES) * s->slice_bytes;
        const RowPair p01 = row_pair(slice, s), p23 = row_pair(slice + 2 * LANES * s->elem, s);
        PAIR_ROW(0) PAIR_ROW(1) PAIR_ROW(2) PAIR_ROW(3) PAIR_ROW(4) PAIR_ROW(5) PAIR_ROW(6) PAIR_ROW(7)
    });
    for (int t = 0; t < n; t++) store_4(out + (size_t)t * s->ld_out, reduce_pairs(a[2 * t], a[2 * t + 1]), bias, s);
}
#undef PAIR_ROW

// out[0, 0] for one weight row and one activation row: its sums fill lanes 0–7, as they do for the first row of a
// pair (a BF16 row's slices are 32 bytes of pair order; an F32 or F16 row's halves go to lanes 0–7 in turn).
static inline __attribute__((always_inline)) void block_1x1(float *out, const float *x, const uint8_t *w,
                                                            const float *bias, const Shape *s) {
    __m512 a = _mm512_setzero_ps();
    FOR_EACH_SLICE(s->i0, s->i1, {
        const uint8_t *slice = w + (size_t)(i / LANES) * s->slice_bytes;
        __m512 low, high;
        if (s->type == WEIGHT_BF16) {
            const __m512i words = _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)slice));
            low = pair_low(words), high = pair_high(words);
        } else {
            low = load_weights(slice, s->type, 0xffff);
            high = _mm512_shuffle_f32x4(low, low, _MM_SHUFFLE(3, 2, 3, 2));  // weights 8–15 in lanes 0–7
        }
        FMA(a, eight_twice(x + i, (__mmask8)m), low);
        FMA(a, eight_twice(x + i + 8, (__mmask8)(m >> 8)), high);
    });
    float v = _mm_cvtss_f32(reduce_pairs(a, a));
    if (!s->first) v = out[0] + v;
    if (s->last && bias) v += bias[0];
    out[0] = v;
}

// The 4 weight rows at w against all T activation rows, over the chunk of inputs in s.
static inline __attribute__((always_inline)) void block_against_rows(float *out, const float *x, const uint8_t *w,
                                                                     const float *bias, int T, bool prefetch,
                                                                     const Shape *s) {
    int t = 0;
    for (; t + 8 <= T; t += 8, prefetch = false)
        rows_against_block(out + (size_t)t * s->ld_out, x + (size_t)t * s->ld_x, w, bias, s, prefetch, 8);
    float *o = out + (size_t)t * s->ld_out;
    const float *xt = x + (size_t)t * s->ld_x;
    switch (T - t) {  // the last T mod 8 rows, with n a constant in each case
    case 1: rows_against_block(o, xt, w, bias, s, prefetch && s->one_row_prefetches, 1); break;
    case 2: rows_against_block(o, xt, w, bias, s, prefetch, 2); break;
    case 3: rows_against_block(o, xt, w, bias, s, prefetch, 3); break;
    case 4: rows_against_block(o, xt, w, bias, s, prefetch, 4); break;
    case 5: rows_against_block(o, xt, w, bias, s, prefetch, 5); break;
    case 6: rows_against_block(o, xt, w, bias, s, prefetch, 6); break;
    case 7: rows_against_block(o, xt, w, bias, s, prefetch, 7); break;
    }
}

// The chunk of `whole`'s inputs that starts at i0 and ends at i0 + CHUNK, or at c1.
static inline Shape chunk_at(const Shape *whole, int i0, int c1) {
    Shape chunk = *whole;
    chunk.i0 = i0;
    chunk.i1 = i0 + CHUNK < c1 ? i0 + CHUNK : c1;
    chunk.first = i0 == 0;
    chunk.last = chunk.i1 == whole->n_in;
    return chunk;
}

// Weight row j alone against all T activation rows, over the inputs [c0, c1), chunk by chunk.
static inline __attribute__((always_inline)) void row_alone(float *out, const float *x, const void *weights,
                                                            const float *bias, int T, int j, const Shape *whole,
                                                            int c0, int c1) {
    const uint8_t *w = (const uint8_t *)weights + (size_t)(j / 4) * whole->panel_bytes +  // row j % 4 of its panel
                       (size_t)(j % 4) * LANES * whole->elem;
    for (int i0 = c0; i0 < c1; i0 += CHUNK) {
        const Shape chunk = chunk_at(whole, i0, c1);
        for (int t = 0; t < T; t++)
            block_1x1(out + (size_t)t * whole->ld_out + j, x + (size_t)t * whole->ld_x, w, bias ? bias + j : NULL,
                      &chunk);
    }
}

// Weight rows [j0, j1) against all T activation rows, over the inputs [c0, c1) (whole chunks), chunk by chunk
// within each panel of 4 rows; rows outside whole panels one at a time. one_chunk (a constant): the inputs are
// a single chunk, `whole`, whose first and last flags are then constants too — the common case (n_in ≤ CHUNK)
// carries no chunk bookkeeping in its loops, which cost decoding a few percent.
static inline __attribute__((always_inline)) void matmul_rows(float *out, const float *x, const void *weights,
                                                              const float *bias, int T, int j0, int j1,
                                                              const Shape *whole, int c0, int c1,
                                                              const bool one_chunk) {
    int j = j0;
    for (; j < j1 && j % 4; j++) row_alone(out, x, weights, bias, T, j, whole, c0, c1);
    for (; j + 4 <= j1; j += 4) {
        const uint8_t *w = (const uint8_t *)weights + (size_t)(j / 4) * whole->panel_bytes;
        const float *b = bias ? bias + j : NULL;
        if (one_chunk) {
            block_against_rows(out + j, x, w, b, T, true, whole);
        } else {
            for (int i0 = c0; i0 < c1; i0 += CHUNK) {
                const Shape chunk = chunk_at(whole, i0, c1);
                block_against_rows(out + j, x, w, b, T, true, &chunk);
            }
        }
    }
    for (; j < j1; j++) row_alone(out, x, weights, bias, T, j, whole, c0, c1);
}

// Whether a pass of one activation row — decoding — prefetches its weights in software (kernels.h:
// PREFETCH_L1_AHEAD). Passes of more rows must: their arithmetic slows the stream, and the hardware's prefetchers
// alone fall behind. One row streams as fast as the memory allows, and there the two kinds of core differ: an
// Intel Xeon's decoding streamed faster with the prefetches, a Zen 4 EPYC's without them, so AMD's cores leave a
// single row to their hardware prefetchers (the figures: docs/performance-history.md, "Measurements behind the
// kernels' choices").
static bool prefetch_one_row(void) { return decode_prefetches_on_this_cpu(); }

static inline __attribute__((always_inline)) void matmul(float *out, const float *x, const void *weights,
                                                         WeightType type, const float *bias, int T, int n_in,
                                                         int ld_x, int ld_out, int j0, int j1) {
    // Decoding F32 and F16 weights without prefetches (AMD's cores): AVX2's kernel, the same bits (the canonical
    // order), whose 4 rows × 8 lanes take a slice without the shuffle that gathers two rows into a register here;
    // on a Zen 4 EPYC it streamed F32 from memory faster than this file's (docs/performance-history.md, "Decoding
    // F32 after the canonical order").
    if (T == 1 && type != WEIGHT_BF16 && !prefetch_one_row())
        return kernels_avx2.matmul[type](out, x, weights, bias, T, n_in, ld_x, ld_out, j0, j1);
    const size_t elem = type == WEIGHT_F32 ? 4 : 2;
    Shape whole = {.type = type, .elem = elem, .slice_bytes = 4 * LANES * elem,
                   .panel_bytes = 4 * (size_t)panel_row_length(n_in) * elem,
                   .l1_ahead = PREFETCH_L1_AHEAD, .l2_ahead = PREFETCH_L2_AHEAD,
                   .one_row_prefetches = prefetch_one_row(),
                   .n_in = n_in, .ld_x = ld_x, .ld_out = ld_out, .i0 = 0, .i1 = n_in, .first = true, .last = true};
    if (n_in <= CHUNK) {
        matmul_rows(out, x, weights, bias, T, j0, j1, &whole, 0, n_in, true);
    } else if ((size_t)T * n_in * sizeof(float) <= CACHED_ACTIVATIONS) {
        matmul_rows(out, x, weights, bias, T, j0, j1, &whole, 0, n_in, false);
    } else {  // chunk by chunk: the weights read next are the same chunk of the next panel, not the bytes that follow
        whole.l1_ahead = whole.panel_bytes, whole.l2_ahead = L2_AHEAD_PANELS * whole.panel_bytes;
        for (int i0 = 0; i0 < n_in; i0 += CHUNK)
            matmul_rows(out, x, weights, bias, T, j0, j1, &whole, i0, i0 + CHUNK < n_in ? i0 + CHUNK : n_in,
                        false);
    }
}

DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)

// ---- BF16 weights against BF16 activations (Kernels.matmul_bf16_dot) ----
//
// vdpbf16ps (AVX512_BF16) multiplies the two BF16 halves of each 32-bit word of its two operands and adds both
// products to that word's F32 lane. The weights are in pair order, as for `matmul` above: in a 64-byte slice of
// two rows, lanes 0–7 are row r's words (weights l and l + 8), lanes 8–15 row r + 1's. The activations come
// rounded to BF16 in the same pair order (bf16_round_rows), 8 words a slice, broadcast to both halves of a
// register, and meet them lane for lane: one instruction does the 32 multiply-adds that pairs_against_block does
// with two conversions and two FMAs, and Zen 4 issues it as fast as an FMA (one 512-bit instruction a cycle, 116
// G multiply-adds a second per core here against 58). The running sums and their reduction are
// pairs_against_block's, so each output's bits depend on its own rows alone (batch invariance). Products of two
// BF16 values are exact in F32; the instruction takes BF16 subnormals (below 1.2e-38) as zero and sums each lane
// in its own order, which the scalar reference matches within the usual bound of a reordered sum.
#define DOT_TARGET __attribute__((target("avx512bf16")))

// the 8 pair words of an activation slice, in both halves of a register
static inline DOT_TARGET __m512bh words_twice(const uint16_t *slice) {
    return (__m512bh)_mm512_broadcast_i32x8(_mm256_loadu_si256((const __m256i *)slice));
}

#define DOT_ROW(t)                                                                                               \
    if (n > (t)) {                                                                                               \
        const __m512bh xv = words_twice(x + (size_t)(t) * ld_x + (size_t)k * LANES);                             \
        a[2 * (t)] = _mm512_dpbf16_ps(a[2 * (t)], xv, w01);                                                      \
        a[2 * (t) + 1] = _mm512_dpbf16_ps(a[2 * (t) + 1], xv, w23);                                              \
    }

// The 4 weight rows of the panel at w against activation rows t < n ≤ 8 (a constant), over all `slices` slices;
// a[2t] holds rows 0 and 1 for activation row t, a[2t + 1] rows 2 and 3 (as in pairs_against_block).
static inline DOT_TARGET __attribute__((always_inline)) void dot_against_block(float *out, int ld_out,
                                                                               const uint16_t *x, size_t ld_x,
                                                                               const uint8_t *w, int slices,
                                                                               const float *bias, bool prefetch,
                                                                               const int n) {
    __m512 a[16];
    for (int k = 0; k < 16; k++) a[k] = _mm512_setzero_ps();
    for (int k = 0; k < slices; k++) {
        const uint8_t *slice = w + (size_t)k * 2 * 64;  // two lines: rows 0 and 1, rows 2 and 3
        if (prefetch) {
            _mm_prefetch((const char *)slice + PREFETCH_L1_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)slice + 64 + PREFETCH_L1_AHEAD, _MM_HINT_T0);
            _mm_prefetch((const char *)slice + PREFETCH_L2_AHEAD, _MM_HINT_T1);
            _mm_prefetch((const char *)slice + 64 + PREFETCH_L2_AHEAD, _MM_HINT_T1);
        }
        const __m512bh w01 = (__m512bh)_mm512_load_si512(slice), w23 = (__m512bh)_mm512_load_si512(slice + 64);
        DOT_ROW(0) DOT_ROW(1) DOT_ROW(2) DOT_ROW(3) DOT_ROW(4) DOT_ROW(5) DOT_ROW(6) DOT_ROW(7)
    }
    for (int t = 0; t < n; t++) {
        __m128 v = reduce_pairs(a[2 * t], a[2 * t + 1]);
        _mm_storeu_ps(out + (size_t)t * ld_out, bias ? _mm_add_ps(v, _mm_loadu_ps(bias)) : v);
    }
}
#undef DOT_ROW

// Weight row j alone (row j % 4 of its panel, whose 32-byte slices fill lanes 0–7 as the first row of a pair
// does) against all T activation rows.
static DOT_TARGET void dot_row_alone(float *out, int ld_out, const uint16_t *x, size_t ld_x, const uint8_t *w_row,
                                     int slices, const float *bias, int T) {
    for (int t = 0; t < T; t++) {
        __m512 a = _mm512_setzero_ps();
        for (int k = 0; k < slices; k++) {
            const __m512i wr = _mm512_zextsi256_si512(_mm256_load_si256((const __m256i *)(w_row + (size_t)k * 128)));
            a = _mm512_dpbf16_ps(a, words_twice(x + (size_t)t * ld_x + (size_t)k * LANES), (__m512bh)wr);
        }
        const float v = _mm_cvtss_f32(reduce_pairs(a, a));
        out[(size_t)t * ld_out] = bias ? v + bias[0] : v;
    }
}

// out[t, j] for j0 ≤ j < j1: each 4-row panel streamed once for up to 8 activation rows (its first pass
// prefetching ahead, as `matmul` does), further groups of 8 re-reading it from cache; rows outside whole panels
// alone.
static DOT_TARGET void matmul_bf16_dot(float *out, const uint16_t *x, const void *weights, const float *bias, int T,
                                       int n_in, int ld_out, int j0, int j1) {
    const size_t ld_x = (size_t)panel_row_length(n_in), panel_bytes = 4 * ld_x * 2;
    const int slices = (int)ld_x / LANES;
    const bool one_row_prefetches = prefetch_one_row();
    for (int j = j0; j < j1;) {
        const uint8_t *w = (const uint8_t *)weights + (size_t)(j / 4) * panel_bytes;
        const float *b = bias ? bias + j : NULL;
        if (j % 4 || j + 4 > j1) {  // row j % 4 of its panel
            dot_row_alone(out + j, ld_out, x, ld_x, w + (size_t)(j % 4) * 32, slices, b, T);
            j++;
            continue;
        }
        bool prefetch = true;
        int t = 0;
        for (; t + 8 <= T; t += 8, prefetch = false)
            dot_against_block(out + (size_t)t * ld_out + j, ld_out, x + t * ld_x, ld_x, w, slices, b, prefetch, 8);
        float *o = out + (size_t)t * ld_out + j;
        const uint16_t *xt = x + t * ld_x;
        switch (T - t) {  // the last T mod 8 rows, with n a constant in each case
        case 1: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch && one_row_prefetches, 1); break;
        case 2: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 2); break;
        case 3: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 3); break;
        case 4: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 4); break;
        case 5: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 5); break;
        case 6: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 6); break;
        case 7: dot_against_block(o, ld_out, xt, ld_x, w, slices, b, prefetch, 7); break;
        }
        j += 4;
    }
}

// ---- elementwise math ---------------------------------------------------------------------------------------

// exp(x) = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 ∈ [−ln2/2, ln2/2]; e^r by its degree-6 Taylor
// polynomial (relative error < 2e-7): the canonical exponential (scalar.c, exp_canonical), operation for
// operation. x is clamped to [−87.3, 88] so that n ∈ [−126, 127] and 2^n is a normal float, built by writing
// n + 127 into the exponent field.
// In place, of `count` vectors side by side (a constant), each step done to all of them before the next, so that
// the out-of-order core's scheduler holds work that is ready (avx2.c's exp_ps_each says why it pays; here less:
// exp_sum took 42 µs a row of 128256 where it took 46, on a Zen 4 whose 512-bit instructions take two turns).
enum { EXP_GROUP = 8 };
static ALWAYS_INLINE void exp_ps_each(__m512 *x, int count) {  // count ≤ EXP_GROUP
    __m512 n[EXP_GROUP], r[EXP_GROUP], p[EXP_GROUP];
    for (int k = 0; k < count; k++) x[k] = _mm512_min_ps(x[k], _mm512_set1_ps(88.0f));
    for (int k = 0; k < count; k++) x[k] = _mm512_max_ps(x[k], _mm512_set1_ps(-87.3f));
    for (int k = 0; k < count; k++) n[k] = _mm512_mul_ps(x[k], _mm512_set1_ps(1.4426950408889634f));
    for (int k = 0; k < count; k++) n[k] = _mm512_roundscale_ps(n[k], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    for (int k = 0; k < count; k++) p[k] = _mm512_fnmadd_ps(n[k], _mm512_set1_ps(0.693145751953125f), x[k]);
    for (int k = 0; k < count; k++)  // ln 2 in two parts, the first's product exact
        r[k] = _mm512_fnmadd_ps(n[k], _mm512_set1_ps(1.428606765330187e-06f), p[k]);
    for (int k = 0; k < count; k++)
        p[k] = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 720), r[k], _mm512_set1_ps(1.0f / 120));
    for (int k = 0; k < count; k++) p[k] = _mm512_fmadd_ps(p[k], r[k], _mm512_set1_ps(1.0f / 24));
    for (int k = 0; k < count; k++) p[k] = _mm512_fmadd_ps(p[k], r[k], _mm512_set1_ps(1.0f / 6));
    for (int k = 0; k < count; k++) p[k] = _mm512_fmadd_ps(p[k], r[k], _mm512_set1_ps(0.5f));
    for (int k = 0; k < count; k++) p[k] = _mm512_fmadd_ps(p[k], r[k], _mm512_set1_ps(1.0f));
    for (int k = 0; k < count; k++) p[k] = _mm512_fmadd_ps(p[k], r[k], _mm512_set1_ps(1.0f));
    for (int k = 0; k < count; k++) {
        const __m512i two_n = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n[k]), _mm512_set1_epi32(127)), 23);
        x[k] = _mm512_mul_ps(p[k], _mm512_castsi512_ps(two_n));
    }
}

static inline __m512 exp_ps(__m512 x) {
    exp_ps_each(&x, 1);
    return x;
}

// tanh(y) = 1 − 2 / (e^{2y} + 1)
static inline __m512 tanh_ps(__m512 y) {
    __m512 e = exp_ps(_mm512_add_ps(y, y));
    return _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
}

// erf(x) by Abramowitz & Stegun 7.1.26: 1 − (a1 t + … + a5 t⁵) e^{−x²}, t = 1 / (1 + p|x|); |error| ≤ 1.5e-7.
static inline __m512 erf_ps(__m512 x) {
    __m512 ax = _mm512_abs_ps(x);
    __m512 t = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), ax, _mm512_set1_ps(1.0f)));
    __m512 poly = _mm512_set1_ps(1.061405429f);
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
    poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
    poly = _mm512_mul_ps(poly, t);
    __m512 y = _mm512_fnmadd_ps(poly, exp_ps(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), ax), ax)), _mm512_set1_ps(1.0f));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y),  // copy the sign of x
                                               _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
}

static void gelu_tanh(float *x, int n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        __m512 v = load_f32(x + i, m);
        __m512 inner = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f),
                                     _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), v), _mm512_mul_ps(v, v), v));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, tanh_ps(inner))));
    }
}

static void gelu_erf(float *x, int n) {
    const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        __m512 v = load_f32(x + i, m);
        __m512 e = erf_ps(_mm512_mul_ps(v, _mm512_set1_ps(0.7071067811865476f)));
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, e)));
    }
}

// ---- reductions over a row ----------------------------------------------------------------------------------
//
// In the canonical order (kernels.h, SUM_LANES): 8 partial sums, so 8 lanes at a time (the first n < 8 of them,
// zero-filled, at the end), combined (l, l+4), (l, l+2), (l, l+1). Rows of a norm are a few thousand floats: the
// narrower step costs little beside the matmuls.

static inline __m256 load_8(const float *p, int n) {
    return _mm256_maskz_loadu_ps(n >= 8 ? (__mmask8)0xff : (__mmask8)((1u << n) - 1), p);
}

static inline float reduce_8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

static float row_sum(const float *x, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) acc = _mm256_add_ps(acc, load_8(x + i, n - i));
    return reduce_8(acc);
}

// Σ (x_i − c)², each a fused multiply-add (c = 0: Σ x_i²)
static float row_sum_squares(const float *x, int n, float c) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) {
        const __mmask8 m = n - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (n - i)) - 1);
        const __m256 d = _mm256_maskz_sub_ps(m, load_8(x + i, n - i), _mm256_set1_ps(c));
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    return reduce_8(acc);
}

static float row_max(const float *x, int n) {
    __m512 acc = _mm512_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        acc = _mm512_mask_max_ps(acc, m, acc, _mm512_maskz_loadu_ps(m, x + i));
    }
    return _mm512_reduce_max_ps(acc);
}

static void layernorm(float *out, const float *x, const float *gamma, const float *beta, int n, float eps) {
    const float mean_1 = row_sum(x, n) / n;
    const __m512 mean = _mm512_set1_ps(mean_1);
    const __m512 inv_std = _mm512_set1_ps(1.0f / sqrtf(row_sum_squares(x, n, mean_1) / n + eps));
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        __m512 d = _mm512_mul_ps(_mm512_sub_ps(load_f32(x + i, m), mean), inv_std);
        _mm512_mask_storeu_ps(out + i, m, _mm512_fmadd_ps(d, load_f32(gamma + i, m), load_f32(beta + i, m)));
    }
}

static void rmsnorm(float *out, const float *x, const float *gamma, int n, float eps) {
    const __m512 inv_rms = _mm512_set1_ps(1.0f / sqrtf(row_sum_squares(x, n, 0.0f) / n + eps));
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_mul_ps(load_f32(x + i, m), inv_rms), load_f32(gamma + i, m)));
    }
}

static void rope(float *x, const float *cos, const float *sin, int half) {
    for (int i = 0; i < half; i += LANES) {
        __mmask16 m = first_n(half - i);
        __m512 a = load_f32(x + i, m), b = load_f32(x + half + i, m), c = load_f32(cos + i, m),
               s = load_f32(sin + i, m);
        _mm512_mask_storeu_ps(x + i, m, _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s)));
        _mm512_mask_storeu_ps(x + half + i, m, _mm512_fmadd_ps(b, c, _mm512_mul_ps(a, s)));
    }
}

static void silu_mul(float *out, const float *gate, const float *up, int n) {
    const __m512 one = _mm512_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        __m512 g = load_f32(gate + i, m);
        __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(one, e)), load_f32(up + i, m)));
    }
}

static void softmax(float *x, int n) {
    const __m512 max = _mm512_set1_ps(row_max(x, n));
    __m256 sum = _mm256_setzero_ps();  // the canonical 8 partial sums: each 16's low half, then its high half
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        __m512 e = _mm512_maskz_mov_ps(m, exp_ps(_mm512_sub_ps(load_f32(x + i, m), max)));
        _mm512_mask_storeu_ps(x + i, m, e);
        sum = _mm256_add_ps(sum, _mm512_castps512_ps256(e));
        if (i + 8 < n) sum = _mm256_add_ps(sum, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
    }
    const __m512 inv = _mm512_set1_ps(1.0f / reduce_8(sum));
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(load_f32(x + i, m), inv));
    }
}

// 4 vectors of 16 lanes at a time, each lane keeping its max, where it first was, and its min (kernels.h); the
// last n mod 64 values go one at a time.
static RowRange row_range(const float *x, int n) {
    enum { VECTORS = 4 };
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512 max[VECTORS], min[VECTORS];
    __m512i arg[VECTORS];
    __mmask16 bad = 0;
    for (int k = 0; k < VECTORS; k++) max[k] = _mm512_set1_ps(-INFINITY), min[k] = inf, arg[k] = _mm512_setzero_si512();
    int i = 0;
    for (; i + VECTORS * LANES <= n; i += VECTORS * LANES)
        for (int k = 0; k < VECTORS; k++) {
            const __m512 v = _mm512_loadu_ps(x + i + k * LANES);
            const __mmask16 above = _mm512_cmp_ps_mask(v, max[k], _CMP_GT_OQ);  // false for NaN
            max[k] = _mm512_mask_mov_ps(max[k], above, v);
            arg[k] = _mm512_mask_mov_epi32(arg[k], above, _mm512_add_epi32(_mm512_set1_epi32(i + k * LANES), lane));
            min[k] = _mm512_mask_mov_ps(min[k], _mm512_cmp_ps_mask(v, min[k], _CMP_LT_OQ), v);
            bad |= _mm512_cmp_ps_mask(v, inf, _CMP_NLT_UQ);  // NaN or +inf
        }
    float lane_max[VECTORS * LANES], lane_min[VECTORS * LANES];
    int lane_arg[VECTORS * LANES];
    for (int k = 0; k < VECTORS; k++) {
        _mm512_storeu_ps(lane_max + k * LANES, max[k]);
        _mm512_storeu_ps(lane_min + k * LANES, min[k]);
        _mm512_storeu_si512(lane_arg + k * LANES, arg[k]);
    }
    return row_range_of_lanes(lane_max, lane_arg, lane_min, VECTORS * LANES, bad != 0, x, i, n);
}

// exp as softmax's, its sum in two 8-lane vectors of doubles (the low and the high half of each 16: the canonical
// 16 partial sums, scalar.c's exp_sum), combined (p, p + 4) within each 8, then (p, p + 8), (l, l + 2), (l, l + 1).
// A group of EXP_GROUP vectors at a time, their exponentials side by side; the last n mod 128 one vector at a time,
// masked.
static ALWAYS_INLINE void exp_sum_group(float *out, const float *x, int n, int count, __m512 shift, __m512 divisor,
                                        bool divide, __m512d *low, __m512d *high) {
    const __m512 minus_inf = _mm512_set1_ps(-INFINITY);
    __m512 e[EXP_GROUP];
    __mmask16 in_row[EXP_GROUP], keep[EXP_GROUP];
    for (int k = 0; k < count; k++) {
        in_row[k] = first_n(n - k * LANES);
        e[k] = _mm512_sub_ps(load_f32(x + k * LANES, in_row[k]), shift);
        if (divide) e[k] = _mm512_div_ps(e[k], divisor);
        keep[k] = in_row[k] & _mm512_cmp_ps_mask(e[k], minus_inf, _CMP_NEQ_UQ);
    }
    exp_ps_each(e, count);
    for (int k = 0; k < count; k++) {
        e[k] = _mm512_maskz_mov_ps(keep[k], e[k]);
        _mm512_mask_storeu_ps(out + k * LANES, in_row[k], e[k]);
        *low = _mm512_add_pd(*low, _mm512_cvtps_pd(_mm512_castps512_ps256(e[k])));
        const __m256 high_half = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e[k]), 1));
        *high = _mm512_add_pd(*high, _mm512_cvtps_pd(high_half));
    }
}

static double exp_sum(float *out, const float *x, int n, float shift, float divisor) {
    const __m512 s = _mm512_set1_ps(shift), d = _mm512_set1_ps(divisor);
    const bool divide = divisor != 1.0f;  // (dividing by 1 changes no bit)
    __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
    int i = 0;
    for (; i + EXP_GROUP * LANES <= n; i += EXP_GROUP * LANES)
        exp_sum_group(out + i, x + i, n - i, EXP_GROUP, s, d, divide, &low, &high);
    for (; i < n; i += LANES) exp_sum_group(out + i, x + i, n - i, 1, s, d, divide, &low, &high);
    const __m256d low4 = _mm256_add_pd(_mm512_castpd512_pd256(low), _mm512_extractf64x4_pd(low, 1)),
                  high4 = _mm256_add_pd(_mm512_castpd512_pd256(high), _mm512_extractf64x4_pd(high, 1));
    double c[4];
    _mm256_storeu_pd(c, _mm256_add_pd(low4, high4));
    return (c[0] + c[2]) + (c[1] + c[3]);
}

// 16 at a time (8 a register of doubles), the last n mod 16 masked.
static void scale_to_doubles(double *out, const float *x, int n, double factor) {
    const __m512d f = _mm512_set1_pd(factor);
    for (int i = 0; i < n; i += LANES) {
        const __mmask16 m = first_n(n - i);
        const __m512 v = load_f32(x + i, m);
        const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
        _mm512_mask_storeu_pd(out + i, (__mmask8)m, _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), f));
        _mm512_mask_storeu_pd(out + i + 8, (__mmask8)(m >> 8), _mm512_mul_pd(_mm512_cvtps_pd(high), f));
    }
}

// Attention, two matrix products, out[g, c] = scale · Σ_{r < len_g} A[g, r] M[r, c]:
//   scores = scale · Q Kᵀ        (A = the n queries over the hd rows of Kᵀ, c along the positions)
//   out    = softmax(scores) V   (A = row g's weights over the rows of V up to its span, c along hd)
// (kernels.h, attention_from_products, says how a tree row's scores become weights).
// A block of COLS registers of columns is loaded once per r for ROWS rows of A (ROWS · COLS independent FMA
// chains, one broadcast per row and r); column blocks are the outer loop, so that the block of M that the first
// ROWS rows read from memory is in cache for the next ones: the key/value head is streamed once for the group.
// A row's sums run over r in order whatever rows share its block (past the block's shortest row each row
// finishes alone), so its result depends on that row alone.
// Each row of M is read a block at a time, and Kᵀ has hd rows: more streams than the hardware prefetcher follows. So
// the loads of a block prefetch the same row's next block — past a row's last, what follows it: in A·V with hd =
// 64, V's next row, which helped too (a prefetch is only a hint, wherever it points). Attention over a
// Llama-3.2-1B-shaped cache of 1000 positions took half the time (docs/performance-history.md, "Prefetching the
// next block of keys").
// Lanes past `cols` are masked off; a mask of none leaves memory untouched.
enum { ROWS = 4, COLS = 4 };

static inline __mmask16 lanes_left(int n) { return n <= 0 ? 0 : first_n(n); }

// Rows g0 .. g0 + R − 1 of out, columns c .. c + COLS · LANES − 1 (R a constant in each inlined copy: no row is
// computed twice).
static inline __attribute__((always_inline)) void block_times_matrix(int R, float *out, int ld_out, const float *A,
                                                                     int ld_a, const int *len, int len_step, int g0,
                                                                     const float *M, int ld, int c,
                                                                     const __mmask16 *lanes, __m512 sc) {
    const float *a[ROWS];
    int k[ROWS], common = len[(size_t)g0 * len_step];
    for (int i = 0; i < R; i++) {
        a[i] = A + (size_t)(g0 + i) * ld_a;
        k[i] = len[(size_t)(g0 + i) * len_step];
        common = k[i] < common ? k[i] : common;
    }
    __m512 acc[ROWS][COLS];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < COLS; j++) acc[i][j] = _mm512_setzero_ps();
    for (int r = 0; r < common; r++) {
        const float *row = M + (size_t)r * ld + c;
        __m512 m[COLS];
        for (int j = 0; j < COLS; j++)  // the next block's, while this one is computed (see above)
            _mm_prefetch((const char *)(row + (COLS + j) * LANES), _MM_HINT_T0);
        for (int j = 0; j < COLS; j++) m[j] = load_f32(row + j * LANES, lanes[j]);
        for (int i = 0; i < R; i++) {
            const __m512 ar = _mm512_set1_ps(a[i][r]);
            for (int j = 0; j < COLS; j++) acc[i][j] = _mm512_fmadd_ps(ar, m[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4  // (acc stays in registers only if i is a constant in each copy)
    for (int i = 0; i < R; i++) {
        for (int r = common; r < k[i]; r++) {  // past the block's shortest row, each row alone
            const __m512 ar = _mm512_set1_ps(a[i][r]);
            const float *row = M + (size_t)r * ld + c;
            for (int j = 0; j < COLS; j++) {
                const __m512 mj = load_f32(row + j * LANES, lanes[j]);
                acc[i][j] = _mm512_fmadd_ps(ar, mj, acc[i][j]);
            }
        }
        float *o = out + (size_t)(g0 + i) * ld_out + c;
        for (int j = 0; j < COLS; j++) _mm512_mask_storeu_ps(o + j * LANES, lanes[j], _mm512_mul_ps(acc[i][j], sc));
    }
}

// out[g, c] = scale · Σ_{r < len_g} A[g, r] · M[r · ld + c]     for g < n, c < cols; len_g = len[g · len_step]
static void rows_times_matrix(float *out, int ld_out, const float *A, int ld_a, const int *len, int len_step, int n,
                              const float *M, int ld, int cols, float scale) {
    const __m512 sc = _mm512_set1_ps(scale);
    for (int c = 0; c < cols; c += COLS * LANES) {
        __mmask16 lanes[COLS];
        for (int j = 0; j < COLS; j++) lanes[j] = lanes_left(cols - c - j * LANES);
        for (int g0 = 0; g0 < n; g0 += ROWS) {
            switch (n - g0 < ROWS ? n - g0 : ROWS) {
            case 1: block_times_matrix(1, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, sc); break;
            case 2: block_times_matrix(2, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, sc); break;
            case 3: block_times_matrix(3, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, sc); break;
            default: block_times_matrix(ROWS, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, sc); break;
            }
        }
    }
}

static void attention(float *out, int ld_out, const float *q, int ld_q, const int *S, const uint64_t *tree, int n,
                      const float *kt, int ld_k, const float *v, int hd, float scale, float *scores, int ld_s) {
    attention_from_products(rows_times_matrix, softmax, out, ld_out, q, ld_q, S, tree, n, kt, ld_k, v, hd, scale,
                            scores, ld_s);
}

static void add(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += LANES) {
        __mmask16 m = first_n(n - i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(load_f32(out + i, m), load_f32(x + i, m)));
    }
}

const Kernels kernels_avx512 = {
    .name = "avx512",
    .matmul = {[WEIGHT_F32] = matmul_f32, [WEIGHT_F16] = matmul_f16, [WEIGHT_BF16] = matmul_bf16},
    .matmul_bf16_dot = matmul_bf16_dot,  // (dispatch.c drops it on a CPU without AVX512_BF16)
    .matmul_q8 = q8_matmul_avx512,
    .matmul_q4 = q4_matmul_avx512,
    .matmul_q8_0 = q8_0_matmul_avx512,
    .matmul_q4_0 = q4_0_matmul_avx512,
    .matmul_q5 = {q5_0_matmul_avx512, q5_1_matmul_avx512, q4_1_matmul_avx512},
    .matmul_k = {q4_k_matmul_avx512, q5_k_matmul_avx512, q6_k_matmul_avx512},
    .quantize_q8 = q8_quantize_rows_avx512,
    .panels = true,
    .bf16_pairs = true,
    .layernorm = layernorm,
    .rmsnorm = rmsnorm,
    .rope = rope,
    .silu_mul = silu_mul,
    .gelu_tanh = gelu_tanh,
    .gelu_erf = gelu_erf,
    .softmax = softmax,
    .row_range = row_range,
    .exp_sum = exp_sum,
    .scale_to_doubles = scale_to_doubles,
    .attention = attention,
    .add = add,
};
