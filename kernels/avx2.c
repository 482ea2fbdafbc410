// avx2.c — AVX2 + FMA + F16C kernels: 8 floats per register. Compiled with -mavx2 -mfma -mf16c and called only
// when cpuid and XCR0 say the CPU and OS support them (dispatch.c).
//
// AVX2 has masked loads and stores for 32-bit lanes only: the last n % 8 floats of a row go through
// _mm256_maskload_ps / _mm256_maskstore_ps, the last n % 8 weights through a zero-padded copy. Either way the
// tail is the same vector step on zero-filled registers, and nothing past the end of an array is touched.
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

enum { LANES = 8 };

#define ALWAYS_INLINE inline __attribute__((always_inline))

// ---- loads and stores: 8 elements (or the first n < 8, zero-filled) -----------------------------------------

// All ones in lanes k < n (every lane when n ≥ 8): the mask of _mm256_maskload_ps and _mm256_maskstore_ps.
static ALWAYS_INLINE __m256i first_n(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static ALWAYS_INLINE __m256 load_f32(const float *p, int n) {
    return n >= LANES ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, first_n(n));
}

static ALWAYS_INLINE void store_f32(float *p, __m256 v, int n) {
    if (n >= LANES) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, first_n(n), v);
}

// Horizontal sum, maximum and minimum of the 8 lanes, always in the same order: halves, then pairs, then the last two.
static ALWAYS_INLINE float reduce_add(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// reduce_add of each of v[0..7], side by side: lane k of the result is v[k]'s 8 lanes summed by the same tree.
// Each step adds two vectors' lanes at once: (l, l + 4) of v[k] (lower half) and v[k + 4] (upper) by two 128-bit
// permutes; then (l, l + 2) of two such by two shuffles; then (l, l + 1). 21 instructions for the 8 sums where
// reduce_add takes 6 for each.
static ALWAYS_INLINE __m256 reduce_add_8(const __m256 v[8]) {
    __m256 u[4], w[2];
    for (int k = 0; k < 4; k++)  // u[k]: lanes 0–3 (l, l + 4) of v[k], lanes 4–7 of v[k + 4]
        u[k] = _mm256_add_ps(_mm256_permute2f128_ps(v[k], v[k + 4], 0x20),
                             _mm256_permute2f128_ps(v[k], v[k + 4], 0x31));
    for (int k = 0; k < 2; k++)  // w[k]: (l, l + 2) of v[2k], v[2k + 1] in lanes 0–3, of v[2k + 4], v[2k + 5] in 4–7
        w[k] = _mm256_add_ps(_mm256_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(u[2 * k], u[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)),  // (l, l + 1): v[0..7] in order
                         _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

static ALWAYS_INLINE float reduce_max(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

static ALWAYS_INLINE float reduce_min(__m256 v) {
    __m128 s = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_min_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_min_ss(s, _mm_movehdup_ps(s)));
}

// ---- matmul -------------------------------------------------------------------------------------------------
//
// The weights are in the panel layout (kernels.h, Kernels.panels): the 4 rows of a panel alternate in slices of 16
// weights, so that a thread's share of a matrix is one sequential stream, and BF16 slices are in pair order (the
// 32-bit word l of a slice holds its weights l and l + 8): one shift makes a slice's weights 0–7 F32, one mask its
// weights 8–15, two instructions for 16 weights where rows in plain order took a widening shuffle and a shift for
// every 8.
//
// Register blocking: tile_slices multiplies a panel's 4 rows by a tile of TT activation rows, one 16-input slice at
// a time, in two halves (inputs 0–7, then 8–15): the half's TT activation registers are loaded once for the 4 weight
// rows, each weight row's half loaded (and converted) once for the TT activation rows, into 4 · TT running sums. F32
// weights go from memory straight into the FMAs, so a tile is 3 rows (12 sums, 3 activations); BF16 and F16 take a
// register to convert into, so 2 (8 sums, 2 activations, the weights and the mask). A group of tiles — 9 rows for
// F32, 8 otherwise, a verification of up to 7 or 8 drafts — takes one pass over a panel: the tiles take turns every
// TURN_SLICES slices (2 kB of F32 weights, 1 kB of BF16), their sums going to the stack and back, so that the
// weights stream from memory once, at the pace of the arithmetic, and each turn finds them in L1; in a group of more
// than one row, the first tile asks for them PREFETCH_L2_AHEAD ahead into L2, a half-slice's lines as it reads the
// half-slice (a burst of a turn's 32 lines before each turn stalled the core with its fill buffers full: 0.83–0.93 ×
// the time at T = 8, docs/kernels.md). Further groups re-read the panel from the caches.
// (Against rows in plain order and 4 × 2 tiles over the whole row, one thread, a Llama-3.2-1B layer's matrices,
// medians of 7 alternations in one process, T = 1, 2, 4, 8, 16: BF16 1.44, 1.69, 1.77, 1.38, 1.21 × as fast; F32
// 1.05, 1.36, 1.90, 1.30, 1.20 ×; F16 1.33, 1.28, 1.87, 1.47, 1.15 ×; throwaway harness, machine shared with other
// builds.) OpenBLAS's sgemm reads rows, so it no longer takes this variant's prefill:
// this kernel took 0.82 × sgemm's time at T = 16, 1.13 × at T = 64, 1.26 × at T = 128 on a [2048, 2048] matrix.
//
// The canonical order (kernels.h, SUM_LANES): every (t, j) pair sees the same fused multiply-adds in the same order
// (slice by slice, each slice's inputs 0–7 then 8–15, lane l taking inputs l and l + 8) and the same horizontal sum
// per chunk of MATMUL_CHUNK inputs, whatever T, the tile, the group or the split of rows between threads is — and
// whatever the variant.
enum { PANEL = 4, SLICE = 16, MAX_TILE = 3, MAX_TILES = 4, TURN_SLICES = 8, CHUNK_SLICES = MATMUL_CHUNK / SLICE };
_Static_assert(CHUNK_SLICES % TURN_SLICES == 0, "the tiles' turns end at a chunk's end");

// Activation rows a tile takes, and a group: F32 weights go straight from memory into the FMAs, so 12 sums, 3
// activations fit beside them; BF16 and F16 weights take a register to convert into, and the mask.
static ALWAYS_INLINE int tile_rows(WeightType type) { return type == WEIGHT_F32 ? 3 : 2; }
static ALWAYS_INLINE int group_rows(WeightType type) { return type == WEIGHT_F32 ? 9 : 8; }

// Half `h` (0: inputs 0–7, 1: 8–15) of slice k of the panel's row r, as F32.
static ALWAYS_INLINE __m256 slice_half(const uint8_t *panel, WeightType type, int k, int r, int h) {
    const size_t at = ((size_t)k * PANEL + r) * SLICE;  // the slice's first element in the panel
    switch (type) {
    case WEIGHT_BF16: {
        const __m256i pairs = _mm256_loadu_si256((const __m256i *)(panel + 2 * at));
        return _mm256_castsi256_ps(h ? _mm256_and_si256(pairs, _mm256_set1_epi32((int)0xffff0000u))
                                     : _mm256_slli_epi32(pairs, 16));
    }
    case WEIGHT_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(panel + 2 * (at + LANES * h))));
    default: return _mm256_loadu_ps((const float *)panel + at + LANES * h);
    }
}

// v, from here on in a register: an empty asm that claims to change it, so that the compiler cannot fold its load
// into each instruction that reads it. F32's tile fills all 16 registers (12 sums, 3 activations, a weight), and
// GCC, short of one, re-read two of the activations from memory in every FMA: 13 loads for 12 FMAs, not 7.
static ALWAYS_INLINE __m256 in_register(__m256 v) {
    __asm__("" : "+x"(v));
    return v;
}

// sums[r][t] += Σ over slices [k0, k1) of the panel's row r times activation row t < TT (TT a constant where this
// is inlined; the sums in registers meanwhile). `full`: every slice's 16 inputs are below n_in; else the activations
// are read only below n_in (the weights past it are zeros, the activations may be anything). `prefetch`: each
// half-slice also asks for its half of the slice's bytes PREFETCH_L2_AHEAD ahead into L2 (F32: 2 of a slice's 4
// lines; BF16, F16: 1 of 2), so that the requests spread over the turn instead of filling the core's line fill
// buffers in one burst before it (past the matrix's end, a prefetch does nothing).
static ALWAYS_INLINE void tile_slices(__m256 sums[PANEL][MAX_TILE], const float *x, int ld_x, const uint8_t *panel,
                                      WeightType type, int TT, int k0, int k1, bool full, int n_in, bool prefetch) {
    const size_t slice_bytes = (size_t)PANEL * SLICE * (type == WEIGHT_F32 ? 4 : 2);
    __m256 acc[PANEL][MAX_TILE];
    for (int r = 0; r < PANEL; r++)
        for (int t = 0; t < TT; t++) acc[r][t] = sums[r][t];
    for (int k = k0; k < k1; k++)
        for (int h = 0; h < 2; h++) {
            const int i = k * SLICE + h * LANES;
            if (prefetch) {
                const size_t half = slice_bytes / 2, from = (size_t)k * slice_bytes + h * half;  // the half's bytes
                for (size_t at = from; at < from + half; at += 64)
                    _mm_prefetch((const char *)panel + PREFETCH_L2_AHEAD + at, _MM_HINT_T1);
            }
            __m256 xv[MAX_TILE];
            for (int t = 0; t < TT; t++)
                xv[t] = in_register(full ? _mm256_loadu_ps(x + (size_t)t * ld_x + i)
                                         : load_f32(x + (size_t)t * ld_x + i, n_in - i));
            for (int r = 0; r < PANEL; r++) {
                const __m256 wv = slice_half(panel, type, k, r, h);
                for (int t = 0; t < TT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
            }
        }
    for (int r = 0; r < PANEL; r++)
        for (int t = 0; t < TT; t++) sums[r][t] = acc[r][t];
}

// tile_slices for TT ≤ tile_rows(type) rows, TT and `prefetch` constants in each copy (with `prefetch` a variable,
// GCC tested it in every half-slice of every tile).
static ALWAYS_INLINE void tile_of_rows(__m256 sums[PANEL][MAX_TILE], const float *x, int ld_x, const uint8_t *panel,
                                       WeightType type, int TT, int k0, int k1, bool full, int n_in, bool prefetch) {
    switch (TT) {
    case 1: tile_slices(sums, x, ld_x, panel, type, 1, k0, k1, full, n_in, prefetch); break;
    case 2: tile_slices(sums, x, ld_x, panel, type, 2, k0, k1, full, n_in, prefetch); break;
    default: tile_slices(sums, x, ld_x, panel, type, MAX_TILE, k0, k1, full, n_in, prefetch); break;
    }
}

// The tiles of activation rows t < n ≤ group_rows(type) over slices [k0, k1), one after another; with `prefetch`,
// the first tile asks for the slices' lines ahead as it reads them (tile_slices).
static ALWAYS_INLINE void group_slices(__m256 sums[MAX_TILES][PANEL][MAX_TILE], const float *x, int ld_x,
                                       const uint8_t *panel, WeightType type, int n, int k0, int k1, bool full,
                                       int n_in, bool prefetch) {
    const int tile = tile_rows(type);
    for (int t = 0; t < n; t += tile) {
        const float *xt = x + (size_t)t * ld_x;
        const int TT = n - t < tile ? n - t : tile;
        if (prefetch && t == 0) tile_of_rows(sums[t / tile], xt, ld_x, panel, type, TT, k0, k1, full, n_in, true);
        else tile_of_rows(sums[t / tile], xt, ld_x, panel, type, TT, k0, k1, full, n_in, false);
    }
}

// out[t, first + r] for the panel's rows first + r in [j0, j1) and activation rows t < n ≤ group_rows(type).
// A chunk's sums are combined two activation rows at a time, 4 panel rows each, by one reduce_add_8 (lanes 0–3:
// row t's outputs first..first + 3, lanes 4–7: row t + 1's), and added to the chunks' running values, which stay
// here until the last chunk: out is written once, not read back after every chunk (its rows, ld_out apart, then
// slowed the weights' stream). The tiles take turns every `turn` slices (a constant where this is inlined).
static ALWAYS_INLINE void panel_against_group(float *out, const float *x, const uint8_t *panel, WeightType type,
                                              const float *bias, int n, int n_in, int ld_x, int ld_out, int first,
                                              int j0, int j1, bool prefetch, int turn) {
    __m256 sums[MAX_TILES][PANEL][MAX_TILE];
    __m256 totals[(MAX_TILES * MAX_TILE + 1) / 2];  // totals[t / 2]: rows t and t + 1, as reduce_add_8 leaves them
    for (int i = 0; i < (MAX_TILES * MAX_TILE + 1) / 2; i++) totals[i] = _mm256_setzero_ps();  // (set by chunk 0)
    const int whole = n_in / SLICE, slices = (n_in + SLICE - 1) / SLICE, tile = tile_rows(type);
    for (int c0 = 0; c0 < slices; c0 += CHUNK_SLICES) {  // the canonical order's chunks, their values added in turn
        const int c1 = c0 + CHUNK_SLICES < slices ? c0 + CHUNK_SLICES : slices, full_end = c1 < whole ? c1 : whole;
        for (int g = 0; g < MAX_TILES; g++)
            for (int r = 0; r < PANEL; r++)
                for (int t = 0; t < MAX_TILE; t++) sums[g][r][t] = _mm256_setzero_ps();
        for (int k0 = c0; k0 < full_end; k0 += turn) {
            const int k1 = k0 + turn < full_end ? k0 + turn : full_end;
            group_slices(sums, x, ld_x, panel, type, n, k0, k1, true, n_in, prefetch);
        }
        if (full_end < c1) group_slices(sums, x, ld_x, panel, type, n, whole, whole + 1, false, n_in, false);
        for (int t = 0; t < n; t += 2) {
            __m256 pair[8];  // rows t and t + 1 (zeros past n) of the panel's 4 rows
            for (int r = 0; r < PANEL; r++) {
                pair[r] = sums[t / tile][r][t % tile];
                pair[PANEL + r] = t + 1 < n ? sums[(t + 1) / tile][r][(t + 1) % tile] : _mm256_setzero_ps();
            }
            const __m256 chunk = reduce_add_8(pair);
            totals[t / 2] = c0 == 0 ? chunk : _mm256_add_ps(totals[t / 2], chunk);
        }
    }
    for (int t = 0; t < n; t++) {
        float row[PANEL];  // row t's sums for the panel's rows
        _mm_storeu_ps(row, t % 2 ? _mm256_extractf128_ps(totals[t / 2], 1) : _mm256_castps256_ps128(totals[t / 2]));
        for (int r = 0; r < PANEL; r++) {
            const int j = first + r;
            if (j >= j0 && j < j1) out[(size_t)t * ld_out + j] = bias ? row[r] + bias[j] : row[r];
        }
    }
}

// Weight rows j0..j1 panel by panel (a panel's rows outside them computed, not stored), activation rows in groups
// of group_rows(type) (the last smaller when that does not divide T).
static ALWAYS_INLINE void matmul_groups(float *out, const float *x, const void *w, WeightType type, const float *bias,
                                        int T, int n_in, int ld_x, int ld_out, int j0, int j1) {
    const size_t panel_bytes = (size_t)PANEL * panel_row_length(n_in) * (type == WEIGHT_F32 ? 4 : 2);
    for (int p = j0 / PANEL; p * PANEL < j1; p++) {
        const uint8_t *panel = (const uint8_t *)w + (size_t)p * panel_bytes;
        for (int t = 0; t < T; t += group_rows(type)) {
            const int n = T - t < group_rows(type) ? T - t : group_rows(type);
            panel_against_group(out + (size_t)t * ld_out, x + (size_t)t * ld_x, panel, type, bias, n, n_in, ld_x,
                                ld_out, p * PANEL, j0, j1, t == 0 && n > 1, TURN_SLICES);
        }
    }
}

// Decoding (T = 1): panel_against_group with n a constant, its 4 sums in registers through a chunk and no turns to
// take — without the turns' stores and loads of the sums and the general loop's bookkeeping, F32 decoding from
// memory is back to its speed before the canonical order (docs/performance-history.md, "Decoding F32 after the
// canonical order"). A function of its own, so that this copy leaves the compiler's choices in the others alone.
static __attribute__((noinline)) void matmul_one_row(float *out, const float *x, const void *w, WeightType type,
                                                     const float *bias, int n_in, int j0, int j1) {
    const size_t panel_bytes = (size_t)PANEL * panel_row_length(n_in) * (type == WEIGHT_F32 ? 4 : 2);
    for (int p = j0 / PANEL; p * PANEL < j1; p++)
        panel_against_group(out, x, (const uint8_t *)w + (size_t)p * panel_bytes, type, bias, 1, n_in, n_in, 0,
                            p * PANEL, j0, j1, false, CHUNK_SLICES);
}

// F32's groups in a function apart: inlined beside the call to matmul_one_row, GCC allocated their tile of 12 sums
// otherwise and T = 8 read slower; F16's and BF16's read as fast inlined, F16's slower apart (the same section).
static __attribute__((noinline)) void f32_groups_apart(float *out, const float *x, const void *w, const float *bias,
                                                       int T, int n_in, int ld_x, int ld_out, int j0, int j1) {
    matmul_groups(out, x, w, WEIGHT_F32, bias, T, n_in, ld_x, ld_out, j0, j1);
}

static ALWAYS_INLINE void matmul(float *out, const float *x, const void *w, WeightType type, const float *bias,
                                 int T, int n_in, int ld_x, int ld_out, int j0, int j1) {
    if (T == 1) matmul_one_row(out, x, w, type, bias, n_in, j0, j1);
    else if (type == WEIGHT_F32) f32_groups_apart(out, x, w, bias, T, n_in, ld_x, ld_out, j0, j1);
    else matmul_groups(out, x, w, type, bias, T, n_in, ld_x, ld_out, j0, j1);
}

DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)

// ---- elementwise math ---------------------------------------------------------------------------------------

// exp(x) = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 ∈ [−ln2/2, ln2/2]; e^r by its degree-6 Taylor
// polynomial (relative error < 2e-7). AVX2 has no vscalefps: x is clamped to [−87.3, 88] so that n ∈ [−126, 127]
// and 2^n is a normal float. Below −87.3 the result stays at e^−87.3 ≈ 1.2e-38 instead of going subnormal.
// The reference's operations with the same bits, in fewer instructions: n rounded by adding 1.5 · 2^23 (the sum,
// in [2^23, 2^24) where a float's step is 1, rounds to the nearest integer, ties to even as vroundps does, since
// the constant is even; its low bits are n + 2^22), and the product by 2^n made by adding n to the exponent field
// of e^r — exact, since e^r ≥ 1 where n = −126 and e^r ≤ 1 where n = 127, so the result stays normal.
//
// In place, of `count` vectors side by side (a constant: the loops unroll), each step done to all of them before
// the next. One vector's exponential is a chain of 15 dependent steps, some 55 cycles. Written one vector after
// another, the waiting steps of the first vectors fill the out-of-order core's scheduler, which then sees little
// work that is ready: exp_sum ran at about a vector per 13 cycles where its instructions need some 6. In this
// order what the scheduler holds is mostly ready: on a Zen 4, sampling's temperature-1 row of 128256 logits took
// 79–81 µs from the caches where it took 94–117 (performance-history.md, the sixteenth session). 8 vectors at a
// time beat 2, 4, 6, 12 and 16, though their 24 registers spill. The operations, and so the bits, are the same in
// any order.
enum { EXP_GROUP = 8 };
static ALWAYS_INLINE void exp_ps_each(__m256 *x, int count) {  // count ≤ EXP_GROUP
    const __m256 round_by = _mm256_set1_ps(0x1.8p23f);
    __m256 biased[EXP_GROUP], r[EXP_GROUP], p[EXP_GROUP];
    for (int k = 0; k < count; k++) x[k] = _mm256_min_ps(x[k], _mm256_set1_ps(88.0f));
    for (int k = 0; k < count; k++) x[k] = _mm256_max_ps(x[k], _mm256_set1_ps(-87.3f));
    for (int k = 0; k < count; k++) biased[k] = _mm256_mul_ps(x[k], _mm256_set1_ps(1.4426950408889634f));
    for (int k = 0; k < count; k++) biased[k] = _mm256_add_ps(biased[k], round_by);
    for (int k = 0; k < count; k++) r[k] = _mm256_sub_ps(biased[k], round_by);  // n
    for (int k = 0; k < count; k++) p[k] = _mm256_fnmadd_ps(r[k], _mm256_set1_ps(0.693145751953125f), x[k]);
    for (int k = 0; k < count; k++)  // ln 2 in two parts, the first's product exact
        r[k] = _mm256_fnmadd_ps(r[k], _mm256_set1_ps(1.428606765330187e-06f), p[k]);
    for (int k = 0; k < count; k++)
        p[k] = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 720), r[k], _mm256_set1_ps(1.0f / 120));
    for (int k = 0; k < count; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(1.0f / 24));
    for (int k = 0; k < count; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(1.0f / 6));
    for (int k = 0; k < count; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(0.5f));
    for (int k = 0; k < count; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(1.0f));
    for (int k = 0; k < count; k++) p[k] = _mm256_fmadd_ps(p[k], r[k], _mm256_set1_ps(1.0f));
    for (int k = 0; k < count; k++) {
        const __m256i n_in_exponent = _mm256_slli_epi32(_mm256_castps_si256(biased[k]), 23);  // 1.5 · 2^23 shifts out
        x[k] = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p[k]), n_in_exponent));
    }
}

static ALWAYS_INLINE __m256 exp_ps(__m256 x) {
    exp_ps_each(&x, 1);
    return x;
}

static ALWAYS_INLINE __m256 abs_ps(__m256 x) {
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(INT32_MAX)));
}

// tanh(y) = 1 − 2 / (e^{2y} + 1)
static ALWAYS_INLINE __m256 tanh_ps(__m256 y) {
    __m256 e = exp_ps(_mm256_add_ps(y, y));
    __m256 q = _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f)));
    return _mm256_sub_ps(_mm256_set1_ps(1.0f), q);
}

// erf(x) by Abramowitz & Stegun 7.1.26: 1 − (a1 t + … + a5 t⁵) e^{−x²}, t = 1 / (1 + p|x|); |error| ≤ 1.5e-7.
static ALWAYS_INLINE __m256 erf_ps(__m256 x) {
    __m256 ax = abs_ps(x);
    __m256 t = _mm256_div_ps(_mm256_set1_ps(1.0f),
                             _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), ax, _mm256_set1_ps(1.0f)));
    __m256 poly = _mm256_set1_ps(1.061405429f);
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
    poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
    poly = _mm256_mul_ps(poly, t);
    __m256 e = exp_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), ax), ax));
    __m256 y = _mm256_fnmadd_ps(poly, e, _mm256_set1_ps(1.0f));
    __m256i sign = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(INT32_MIN));  // copy the sign of x
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(y), sign));
}

static void gelu_tanh(float *x, int n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __m256 v = load_f32(x + i, n - i);
        __m256 cubic = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), v), _mm256_mul_ps(v, v), v);
        __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), cubic);
        store_f32(x + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, tanh_ps(inner))), n - i);
    }
}

static void gelu_erf(float *x, int n) {
    const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __m256 v = load_f32(x + i, n - i);
        __m256 e = erf_ps(_mm256_mul_ps(v, _mm256_set1_ps(0.7071067811865476f)));
        store_f32(x + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, e)), n - i);
    }
}

// ---- reductions over a row ----------------------------------------------------------------------------------

static float row_sum(const float *x, int n) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += LANES) acc = _mm256_add_ps(acc, load_f32(x + i, n - i));
    return reduce_add(acc);
}

static float row_max(const float *x, int n) {
    __m256 acc = _mm256_set1_ps(-INFINITY);
    for (int i = 0; i < n; i += LANES) {
        __m256 in_row = _mm256_castsi256_ps(first_n(n - i));  // lanes past the end keep acc
        acc = _mm256_max_ps(acc, _mm256_blendv_ps(acc, load_f32(x + i, n - i), in_row));
    }
    return reduce_max(acc);
}

static void layernorm(float *out, const float *x, const float *gamma, const float *beta, int n, float eps) {
    const __m256 mean = _mm256_set1_ps(row_sum(x, n) / n);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += LANES) {
        __m256 in_row = _mm256_castsi256_ps(first_n(n - i));
        __m256 d = _mm256_and_ps(_mm256_sub_ps(load_f32(x + i, n - i), mean), in_row);
        acc = _mm256_fmadd_ps(d, d, acc);
    }
    const __m256 inv_std = _mm256_set1_ps(1.0f / sqrtf(reduce_add(acc) / n + eps));
    for (int i = 0; i < n; i += LANES) {
        __m256 d = _mm256_mul_ps(_mm256_sub_ps(load_f32(x + i, n - i), mean), inv_std);
        store_f32(out + i, _mm256_fmadd_ps(d, load_f32(gamma + i, n - i), load_f32(beta + i, n - i)), n - i);
    }
}

static void rmsnorm(float *out, const float *x, const float *gamma, int n, float eps) {
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n; i += LANES) {
        __m256 v = load_f32(x + i, n - i);  // zero past the end
        acc = _mm256_fmadd_ps(v, v, acc);
    }
    const __m256 inv_rms = _mm256_set1_ps(1.0f / sqrtf(reduce_add(acc) / n + eps));
    for (int i = 0; i < n; i += LANES)
        store_f32(out + i, _mm256_mul_ps(_mm256_mul_ps(load_f32(x + i, n - i), inv_rms), load_f32(gamma + i, n - i)),
                  n - i);
}

static void rope(float *x, const float *cos, const float *sin, int half) {
    for (int i = 0; i < half; i += LANES) {
        const int n = half - i;
        __m256 a = load_f32(x + i, n), b = load_f32(x + half + i, n), c = load_f32(cos + i, n),
               s = load_f32(sin + i, n);
        store_f32(x + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)), n);
        store_f32(x + half + i, _mm256_fmadd_ps(b, c, _mm256_mul_ps(a, s)), n);
    }
}

static void silu_mul(float *out, const float *gate, const float *up, int n) {
    const __m256 one = _mm256_set1_ps(1.0f);
    for (int i = 0; i < n; i += LANES) {
        __m256 g = load_f32(gate + i, n - i);
        __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
        store_f32(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), load_f32(up + i, n - i)), n - i);
    }
}

static void softmax(float *x, int n) {
    const __m256 max = _mm256_set1_ps(row_max(x, n));
    __m256 sum = _mm256_setzero_ps();
    for (int i = 0; i < n; i += LANES) {
        __m256 in_row = _mm256_castsi256_ps(first_n(n - i));
        __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(load_f32(x + i, n - i), max)), in_row);
        store_f32(x + i, e, n - i);
        sum = _mm256_add_ps(sum, e);
    }
    const __m256 inv = _mm256_set1_ps(1.0f / reduce_add(sum));
    for (int i = 0; i < n; i += LANES) store_f32(x + i, _mm256_mul_ps(load_f32(x + i, n - i), inv), n - i);
}

// The first i in [0, n) with x[i] == value, 32 values a step (n when there is none).
static int first_equal(const float *x, int n, float value) {
    enum { VECTORS = 4 };
    const __m256 v = _mm256_set1_ps(value);
    int i = 0;
    for (; i + VECTORS * LANES <= n; i += VECTORS * LANES) {
        unsigned hits = 0;  // bit k · 8 + l: x[i + k · 8 + l] == value
        for (int k = 0; k < VECTORS; k++)
            hits |= (unsigned)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i + k * LANES), v, _CMP_EQ_OQ))
                    << (k * LANES);
        if (hits) return i + __builtin_ctz(hits);
    }
    while (i < n && x[i] != value) i++;
    return i;
}

// Two passes, each of a few instructions a vector where one pass that kept each lane's argmax took nine. First the
// extremes, 4 vectors of 8 lanes at a time: vmaxps and vminps keep a lane's earlier value on a tie and skip a NaN,
// as the reference's strict comparisons do; NaN and +inf flagged. Then the first index holding the max, which
// sets the max's bits too (of the values equal to it only +0 and −0 differ, and the reference keeps the first); a
// min of zero is likewise the first zero's.
static RowRange row_range(const float *x, int n) {
    enum { VECTORS = 4 };
    const __m256 inf = _mm256_set1_ps(INFINITY);
    __m256 max[VECTORS], min[VECTORS], bad = _mm256_setzero_ps();
    for (int k = 0; k < VECTORS; k++) max[k] = _mm256_set1_ps(-INFINITY), min[k] = inf;
    int i = 0;
    for (; i + VECTORS * LANES <= n; i += VECTORS * LANES)
        for (int k = 0; k < VECTORS; k++) {
            const __m256 v = _mm256_loadu_ps(x + i + k * LANES);
            max[k] = _mm256_max_ps(v, max[k]);  // max[k] where v is NaN or equal
            min[k] = _mm256_min_ps(v, min[k]);
            bad = _mm256_or_ps(bad, _mm256_cmp_ps(v, inf, _CMP_NLT_UQ));  // NaN or +inf
        }
    for (int k = 1; k < VECTORS; k++) max[0] = _mm256_max_ps(max[k], max[0]), min[0] = _mm256_min_ps(min[k], min[0]);
    RowRange r = {.max = reduce_max(max[0]), .min = reduce_min(min[0]), .argmax = 0,
                  .bad = _mm256_movemask_ps(bad) != 0};
    for (; i < n; i++) {
        if (x[i] > r.max) r.max = x[i];
        if (x[i] < r.min) r.min = x[i];
        if (!(x[i] < INFINITY)) r.bad = true;
    }
    if (r.max > -INFINITY) {
        r.argmax = first_equal(x, n, r.max);
        r.max = x[r.argmax];
    }
    if (r.min == 0.0f) r.min = x[first_equal(x, n, 0.0f)];
    return r;
}

// exp_sum over one group of EXP_GROUP vectors, x[0..64): the exponentials stored, and added as doubles into the
// low and high 4-lane sums of the 16 canonical partial sums (the even vectors' into sums[0] and sums[1], the odd
// ones' into sums[2] and sums[3]).
static ALWAYS_INLINE void exp_sum_group(float *out, const float *x, __m256 shift, __m256 divisor, bool divide,
                                        __m256d sums[4]) {
    __m256 e[EXP_GROUP], keep[EXP_GROUP];
    for (int k = 0; k < EXP_GROUP; k++) {
        e[k] = _mm256_sub_ps(_mm256_loadu_ps(x + k * LANES), shift);
        if (divide) e[k] = _mm256_div_ps(e[k], divisor);
        keep[k] = _mm256_cmp_ps(e[k], _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ);  // exp(−inf) = 0 exactly
    }
    exp_ps_each(e, EXP_GROUP);
    for (int k = 0; k < EXP_GROUP; k++) {
        e[k] = _mm256_and_ps(e[k], keep[k]);
        _mm256_storeu_ps(out + k * LANES, e[k]);
        __m256d *pair = &sums[2 * (k % 2)];
        pair[0] = _mm256_add_pd(pair[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e[k])));
        pair[1] = _mm256_add_pd(pair[1], _mm256_cvtps_pd(_mm256_extractf128_ps(e[k], 1)));
    }
}

// exp as softmax's, its sum in four 4-lane vectors of doubles (the canonical 16 partial sums, scalar.c's exp_sum),
// a group of vectors at a time; the last n mod 64 values through a copy padded with −inf, whose exponentials are
// exactly 0 and add nothing (the divisor, a temperature, is > 0). `divide` (a constant in each copy): the divisor
// is not 1, whose division changes no bit and is skipped.
static ALWAYS_INLINE double exp_sum_of(float *out, const float *x, int n, float shift, float divisor, bool divide) {
    const __m256 s = _mm256_set1_ps(shift), d = _mm256_set1_ps(divisor);
    __m256d sums[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int i = 0;
    for (; i + EXP_GROUP * LANES <= n; i += EXP_GROUP * LANES) exp_sum_group(out + i, x + i, s, d, divide, sums);
    if (i < n) {
        float last_x[EXP_GROUP * LANES], last_out[EXP_GROUP * LANES];
        for (int k = 0; k < EXP_GROUP * LANES; k++) last_x[k] = i + k < n ? x[i + k] : -INFINITY;
        exp_sum_group(last_out, last_x, s, d, divide, sums);
        memcpy(out + i, last_out, sizeof(float) * (n - i));
    }
    double lanes[4];
    _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(sums[0], sums[1]), _mm256_add_pd(sums[2], sums[3])));
    return (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
}

static double exp_sum(float *out, const float *x, int n, float shift, float divisor) {
    return divisor == 1.0f ? exp_sum_of(out, x, n, shift, divisor, false) : exp_sum_of(out, x, n, shift, divisor, true);
}

// 8 at a time (4 a register of doubles), the last n mod 8 one at a time.
static void scale_to_doubles(double *out, const float *x, int n, double factor) {
    const __m256d f = _mm256_set1_pd(factor);
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        const __m256 v = _mm256_loadu_ps(x + i);
        _mm256_storeu_pd(out + i, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), f));
        _mm256_storeu_pd(out + i + 4, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), f));
    }
    for (; i < n; i++) out[i] = x[i] * factor;
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
enum { ROWS = 4, COLS = 3 };

static ALWAYS_INLINE int lanes_left(int n) { return n < 0 ? 0 : n; }

// Rows g0 .. g0 + R − 1 of out, columns c .. c + COLS · LANES − 1 (R a constant in each inlined copy: no row is
// computed twice; `full`, a constant too, says every lane is in: plain loads).
static inline __attribute__((always_inline)) void block_times_matrix(int R, float *out, int ld_out, const float *A,
                                                                     int ld_a, const int *len, int len_step, int g0,
                                                                     const float *M, int ld, int c,
                                                                     const int *lanes, bool full, __m256 sc) {
    const float *a[ROWS];
    int k[ROWS], common = len[(size_t)g0 * len_step];
    for (int i = 0; i < R; i++) {
        a[i] = A + (size_t)(g0 + i) * ld_a;
        k[i] = len[(size_t)(g0 + i) * len_step];
        common = k[i] < common ? k[i] : common;
    }
    __m256 acc[ROWS][COLS];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < COLS; j++) acc[i][j] = _mm256_setzero_ps();
    for (int r = 0; r < common; r++) {
        const float *row = M + (size_t)r * ld + c;
        __m256 m[COLS];
        for (int j = 0; j < COLS; j++)  // the next block's, while this one is computed (see above)
            _mm_prefetch((const char *)(row + (COLS + j) * LANES), _MM_HINT_T0);
        for (int j = 0; j < COLS; j++) m[j] = load_f32(row + j * LANES, full ? LANES : lanes[j]);
        for (int i = 0; i < R; i++) {
            const __m256 ar = _mm256_set1_ps(a[i][r]);
            for (int j = 0; j < COLS; j++) acc[i][j] = _mm256_fmadd_ps(ar, m[j], acc[i][j]);
        }
    }
#pragma GCC unroll 4  // (acc stays in registers only if i is a constant in each copy)
    for (int i = 0; i < R; i++) {
        for (int r = common; r < k[i]; r++) {  // past the block's shortest row, each row alone
            const __m256 ar = _mm256_set1_ps(a[i][r]);
            const float *row = M + (size_t)r * ld + c;
            for (int j = 0; j < COLS; j++) {
                const __m256 mj = load_f32(row + j * LANES, full ? LANES : lanes[j]);
                acc[i][j] = _mm256_fmadd_ps(ar, mj, acc[i][j]);
            }
        }
        float *o = out + (size_t)(g0 + i) * ld_out + c;
        for (int j = 0; j < COLS; j++) store_f32(o + j * LANES, _mm256_mul_ps(acc[i][j], sc), lanes[j]);
    }
}

// out[g, c] = scale · Σ_{r < len_g} A[g, r] · M[r · ld + c]     for g < n, c < cols; len_g = len[g · len_step]
static void rows_times_matrix(float *out, int ld_out, const float *A, int ld_a, const int *len, int len_step, int n,
                              const float *M, int ld, int cols, float scale) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int c = 0; c < cols; c += COLS * LANES) {
        int lanes[COLS];
        for (int j = 0; j < COLS; j++) lanes[j] = lanes_left(cols - c - j * LANES);
        for (int g0 = 0; g0 < n; g0 += ROWS) {
            const int R = n - g0 < ROWS ? n - g0 : ROWS;
            const bool full = cols - c >= COLS * LANES;
#define BLOCK(R, full) block_times_matrix(R, out, ld_out, A, ld_a, len, len_step, g0, M, ld, c, lanes, full, sc)
            if (full) {
                switch (R) { case 1: BLOCK(1, true); break; case 2: BLOCK(2, true); break;
                             case 3: BLOCK(3, true); break; default: BLOCK(ROWS, true); break; }
            } else {
                switch (R) { case 1: BLOCK(1, false); break; case 2: BLOCK(2, false); break;
                             case 3: BLOCK(3, false); break; default: BLOCK(ROWS, false); break; }
            }
#undef BLOCK
        }
    }
}

static void attention(float *out, int ld_out, const float *q, int ld_q, const int *S, const uint64_t *tree, int n,
                      const float *kt, int ld_k, const float *v, int hd, float scale, float *scores, int ld_s) {
    attention_from_products(rows_times_matrix, softmax, out, ld_out, q, ld_q, S, tree, n, kt, ld_k, v, hd, scale,
                            scores, ld_s);
}

static void add(float *out, const float *x, int n) {
    for (int i = 0; i < n; i += LANES)
        store_f32(out + i, _mm256_add_ps(load_f32(out + i, n - i), load_f32(x + i, n - i)), n - i);
}

const Kernels kernels_avx2 = {
    .name = "avx2",
    .matmul = {[WEIGHT_F32] = matmul_f32, [WEIGHT_F16] = matmul_f16, [WEIGHT_BF16] = matmul_bf16},
    .matmul_q8 = q8_matmul_avx2,
    .matmul_q4 = q4_matmul_avx2,
    .matmul_q8_0 = q8_0_matmul_avx2,
    .matmul_q4_0 = q4_0_matmul_avx2,
    .matmul_q5 = {q5_0_matmul_avx2, q5_1_matmul_avx2, q4_1_matmul_avx2},
    .matmul_k = {q4_k_matmul_avx2, q5_k_matmul_avx2, q6_k_matmul_avx2},
    .panels = true,
    .bf16_pairs = true,
    .quantize_q8 = q8_quantize_rows,
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
