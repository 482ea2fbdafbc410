// kernels.h — the hot loops of a transformer, as one table of function pointers per instruction set.
//
// kernels/scalar.c is the reference: plain C, obviously right, the specification every other variant is tested
// against (tests/kernels/test_kernels.c). avx2.c, avx512.c and neon.c implement the same signatures, each compiled with
// its own flags; kernels_select() picks the best one the CPU and OS support, once, at start-up.
//
// Arguments are ordered outputs, inputs, sizes. Weights may be F32, F16 or BF16, with F32 arithmetic; or 8-bit
// or 4-bit (q8, q4, at the end of this file), with integer dot products inside blocks of 32 and F32 between them.
#ifndef SPECDEC_KERNELS_H
#define SPECDEC_KERNELS_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// The float types index Kernels.matmul; WEIGHT_Q8 and WEIGHT_Q4 weights go through Kernels.matmul_q8 and
// matmul_q4, GGUF's blocks as stored (below) through matmul_q8_0, matmul_q4_0, matmul_q5 and matmul_k (their
// activations are quantized to 8 bits too: quantized_matmul).
typedef enum {
    WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_TYPES, WEIGHT_Q8 = WEIGHT_TYPES, WEIGHT_Q4, WEIGHT_Q8_0, WEIGHT_Q4_0,
    WEIGHT_Q5_0, WEIGHT_Q5_1, WEIGHT_Q4_1, WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K
} WeightType;

typedef struct Q8Block Q8Block;

// out[t, j] = bias[j] + Σ_b d_w[j, b] · d_x[t, b] · Σ_{i in block b} q_w[j, i] · q_x[t, i]    for j0 ≤ j < j1
//   out: [T, ld_out]   x: [T, q8_blocks(n_in)] quantized activation rows   W: q8 panels (below), 64-byte aligned
typedef void MatmulQ8Fn(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in, int ld_out,
                        int j0, int j1);

// Batch invariance: every kernel computes row t of its output from row t of its input alone, with the same
// operations in the same order whatever T, j0 and j1 are, so results are bit-identical across batch sizes and
// thread counts.
typedef void MatmulFn(float *out, const float *x, const void *w, const float *bias, int T, int n_in, int ld_x,
                      int ld_out, int j0, int j1);

// out[t, j] = bias[j] + Σ_i x[t, i] · W[j, i] for BF16 weights and activations rounded to BF16 (bf16_round_rows,
// below): every product is exact in F32, and only the sums round.
//   out: [T, ld_out]   x: [T, panel_row_length(n_in)] BF16, in the slice order of the variant's BF16 weights
typedef void MatmulBf16Fn(float *out, const uint16_t *x, const void *w, const float *bias, int T, int n_in,
                          int ld_out, int j0, int j1);

// What sampling reads first from a row of logits (Kernels.row_range).
typedef struct {
    float max, min;  // NaN ignored: −inf and +inf for a row of NaN only
    int argmax;      // the first index holding max (the lowest id wins a tie, as in torch.argmax); 0 when max = −inf
    bool bad;        // a value is NaN or +inf: nothing sensible to sample from
} RowRange;

// How the SIMD variants' row_range ends: their vector lanes each kept a max (the first index of it among the
// indices the lane saw) and a min; their range, then x[from..n) one value at a time, as the scalar loop does — every
// index from `from` on comes after every index a lane saw.
static inline RowRange row_range_of_lanes(const float *max, const int *argmax, const float *min, int lanes, bool bad,
                                          const float *x, int from, int n) {
    RowRange r = {.max = -INFINITY, .min = INFINITY, .argmax = 0, .bad = bad};
    for (int j = 0; j < lanes; j++) {
        if (max[j] > r.max || (max[j] == r.max && argmax[j] < r.argmax)) r.max = max[j], r.argmax = argmax[j];
        if (min[j] < r.min) r.min = min[j];
    }
    for (int i = from; i < n; i++) {
        if (x[i] > r.max) r.max = x[i], r.argmax = i;
        if (x[i] < r.min) r.min = x[i];
        if (!(x[i] < INFINITY)) r.bad = true;
    }
    return r;
}

typedef struct {
    const char *name;  // "scalar", "avx2", "avxvnni", "avx512", "neon"

    // out[t, j] = bias[j] + Σ_i x[t, i] · W[j, i]     for t < T and j0 ≤ j < j1 (bias may be NULL)
    //   out: [T, ld_out]   x: [T, ld_x], its first n_in columns   W: [n_out, n_in], 64-byte aligned, of the
    //   indexed WeightType, laid out as `panels` says
    // Each weight row is read from memory once for all T rows of x: verifying γ+1 tokens streams the weights
    // once, like decoding one.
    MatmulFn *matmul[WEIGHT_TYPES];

    // The same for q8 weights (the q8 section below); every variant reads the one q8 layout, and every variant's
    // result is bit-identical to the reference's (q8.c).
    MatmulQ8Fn *matmul_q8;

    // The same for q4 weights (the q4 section below), against the same quantized activations: bit-identical to
    // the reference's (q4.c) in every variant.
    MatmulQ8Fn *matmul_q4;

    // The same for GGUF's Q8_0 and Q4_0 blocks as the file stores them (WEIGHT_Q8_0, WEIGHT_Q4_0, below): q8's and
    // q4's panels whose scales are the file's F16 values; bit-identical to the reference's (q8.c) in every variant.
    MatmulQ8Fn *matmul_q8_0;
    MatmulQ8Fn *matmul_q4_0;

    // The same for GGUF's Q5_0, Q5_1 and Q4_1 blocks as stored (WEIGHT_Q5_0, WEIGHT_Q5_1, WEIGHT_Q4_1, indexed from
    // WEIGHT_Q5_0: the q5 panels below), bit-identical to the reference's (q8.c) in every variant.
    MatmulQ8Fn *matmul_q5[3];

    // The same for GGUF's K-quants as stored (WEIGHT_Q4_K, WEIGHT_Q5_K, WEIGHT_Q6_K, indexed from WEIGHT_Q4_K: the
    // K-panels below); bit-identical to the reference's (kernels/qk.c) in every variant.
    MatmulQ8Fn *matmul_k[3];

    // The same for BF16 weights against activations rounded to BF16 (the model's QUANT_BF16): where the CPU has a
    // BF16 dot-product instruction (AVX512_BF16's vdpbf16ps, 2 multiply-adds per F32 lane), twice the arithmetic
    // of an F32 FMA per instruction, for the rows of a verification or a prompt, whose pace the arithmetic sets.
    // NULL in a variant without one. Batch-invariant as `matmul` is; within the variant's order of sums of the
    // scalar reference (scalar.c).
    MatmulBf16Fn *matmul_bf16_dot;

    // A matmul_q8's input: activation rows x [T, ld_x] (first n_in columns) quantized into out
    // [T, q8_blocks(n_in)], bit-identical to q8_quantize_rows (q8.c).
    void (*quantize_q8)(Q8Block *out, const float *x, int T, int n_in, int ld_x);

    // The layout of W: false, rows one after another (W[j, i] at j·n_in + i); true, panels of 4 rows whose
    // 16-element slices alternate (W[j, i] at panel_index(n_in, j, i)), so that the 4 rows a micro-kernel reads
    // side by side are one sequential stream of memory.
    bool panels;

    // With panels: BF16 slices in pair order (below), which the avx512 and avx2 variants convert without shuffles.
    bool bf16_pairs;

    // out = (x − mean(x)) / √(var(x) + eps) · gamma + beta          out, x, gamma, beta: [n]
    void (*layernorm)(float *out, const float *x, const float *gamma, const float *beta, int n, float eps);

    // out = x / √(mean(x²) + eps) · gamma                                   out, x, gamma: [n]
    void (*rmsnorm)(float *out, const float *x, const float *gamma, int n, float eps);

    // Rotary position embedding of one head, in place, in transformers' rotate-half form: the channel pairs are
    // (i, i + half), each rotated by its angle (cos[i], sin[i]):
    //   x[i]        ← x[i] · cos[i] − x[i + half] · sin[i]
    //   x[i + half] ← x[i + half] · cos[i] + x[i] · sin[i]          x: [2·half]   cos, sin: [half]
    void (*rope)(float *x, const float *cos, const float *sin, int half);

    // SwiGLU's gate: out = SiLU(gate) ⊙ up, SiLU(g) = g / (1 + e^−g)   out, gate, up: [n] (out may be gate)
    void (*silu_mul)(float *out, const float *gate, const float *up, int n);

    // In place, x: [n].  tanh form: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)));  erf form: 0.5x(1 + erf(x/√2))
    void (*gelu_tanh)(float *x, int n);
    void (*gelu_erf)(float *x, int n);

    // In place, x: [n]: x_i = exp(x_i − max x) / Σ_j exp(x_j − max x) (attention's, below, in every variant)
    void (*softmax)(float *x, int n);

    // Sampling's three passes over a row of V logits (src/speculative/sampling.c), V up to 152064 — at every p and q
    // row of a round, on one thread, where a pass in 4-wide generic vectors cost more than some of the forwards:
    //   row_range: the RowRange of x [n], n ≥ 1 — comparisons only, so every variant's is exact;
    //   exp_sum:   out_i = exp((x_i − shift) / divisor), exactly 0 where that quotient is −inf (a masked token,
    //              or one whose distance from the shift overflows), and returns Σ_i out_i added in doubles in the
    //              variant's order. Sampling's softmax with shift = max x and divisor = the temperature: every
    //              exponent ≤ 0. out, x: [n]; exp as accurate as softmax's.
    //   scale_to_doubles: out_i = x_i · factor in doubles (x_i widened exactly, one rounding: every variant's is
    //              exact); the exponentials times 1 / their sum. out, x: [n].
    RowRange (*row_range)(const float *x, int n);
    double (*exp_sum)(float *out, const float *x, int n, float shift, float divisor);
    void (*scale_to_doubles)(double *out, const float *x, int n, double factor);

    // Grouped-query attention (Ainslie et al. 2023): n query rows — the query heads of one key/value group, for
    // each of the T new tokens — attending to that key/value head's cached positions. Row g sees its first S[g]
    // positions and, when `tree` is not NULL, the positions S[g] + j for each bit j set in tree[g] (a node of a
    // token tree sees the committed cache and its ancestors: forward.c; attention_sees below):
    //   out[g] = Σ_{s seen} a_gs V[s],   a_g = softmax(scale · (Σ_i q[g, i] Kᵀ[i, s])_{s seen})
    //   out: [n, ld_out]   q: [n, ld_q]   S, tree: [n]   Kᵀ: [hd, ≥ max span], rows ld_k floats apart
    //   V: [≥ max span, hd]   scores: scratch [n, ld_s], ld_s ≥ max span      (span: attention_span below)
    // The n rows are the rows of two matrix products, Q Kᵀ and A V: each block of Kᵀ and V is read once for all
    // of them, while the block is in cache. The keys come transposed so that the scores are computed along
    // contiguous positions, a vector of positions at a time, with no horizontal sums.
    // Batch invariance: row g's result is a function of q[g] and the keys and values of the positions it sees,
    // in order — bit-identical whatever n and the other rows are, and whether a position is seen as one of the
    // first S[g] or through tree[g]: a row that sees positions 0..9, 12 and 15 gets the bits of a row that sees
    // its first 12 positions, if those hold the same keys and values (a tree node and the last token of a chain
    // over its path). (The SIMD variants: but for the sign of an output that is exactly zero, in a corner that
    // attention_from_products describes.)
    void (*attention)(float *out, int ld_out, const float *q, int ld_q, const int *S, const uint64_t *tree, int n,
                      const float *kt, int ld_k, const float *v, int hd, float scale, float *scores, int ld_s);

    // out += x       out, x: [n]   (the residual connection)
    void (*add)(float *out, const float *x, int n);
} Kernels;

// The row stride, in floats, for a matrix whose rows of n floats a kernel reads side by side (activation rows in
// a matmul, the rows of Kᵀ in attention): whole 64-byte lines, and not a multiple of 4 kB. Rows 4 kB apart share
// the same L1 sets: 8 rows of GPT-2's MLP layer (3072 floats, 12 kB) would compete for 8 of the 12 ways of each
// set they use, the 64 rows of a head's Kᵀ (1024 positions) for 12 ways of one set per line; padded by a line
// (3088, 1040 floats) they spread over all the sets.
static inline size_t row_stride(size_t n) {
    size_t lines = (n + 15) / 16 * 16;
    return lines % 1024 == 0 ? lines + 16 : lines;
}

// The positions an attention row sees (Kernels.attention): its first S, then S + j for each bit j of `tree`;
// its span is one past the last of them.
static inline bool attention_sees(int S, uint64_t tree, int s) {
    return s < S || (s - S < 64 && (tree >> (s - S) & 1));
}

static inline int attention_span(int S, uint64_t tree) { return tree ? S + 64 - __builtin_clzll(tree) : S; }

// The SIMD variants' attention, from their two pieces: rows_times_matrix(out, ld_out, A, ld_a, len, len_step, n,
// M, ld, cols, scale) computes out[g, c] = scale · Σ_{r < len_g} A[g, r] · M[r · ld + c] for g < n, c < cols
// (len_g = len[g · len_step]), each row's sums over r in order; softmax is the variant's.
//   1. scores = scale · Q Kᵀ over every position up to each row's span. A position's score is its own dot
//      product, the same operations whatever lane or block it falls in.
//   2. A tree row's seen scores are gathered into one contiguous row, which the softmax turns into weights as
//      it would the row of a chain over the same positions (its sums do depend on the lanes), and the weights
//      are scattered back to their positions, with 0 at the positions the row does not see.
//   3. out = A V over each row's span: a weight of 0 adds 0 · V[s], which leaves every sum as it is, with one
//      exception: a sum that is still −0 (every product so far underflowed to −0) may become +0, a difference
//      that the next nonzero product erases.
typedef void RowsTimesMatrixFn(float *out, int ld_out, const float *A, int ld_a, const int *len, int len_step, int n,
                               const float *M, int ld, int cols, float scale);

static inline __attribute__((always_inline)) void attention_from_products(
    RowsTimesMatrixFn *rows_times_matrix, void (*softmax)(float *x, int n), float *out, int ld_out, const float *q,
    int ld_q, const int *S, const uint64_t *tree, int n, const float *kt, int ld_k, const float *v, int hd,
    float scale, float *scores, int ld_s) {
    int span[n > 0 ? n : 1], max_span = 0;
    for (int g = 0; g < n; g++) {
        span[g] = attention_span(S[g], tree ? tree[g] : 0);
        max_span = span[g] > max_span ? span[g] : max_span;
    }
    rows_times_matrix(scores, ld_s, q, ld_q, &hd, 0, n, kt, ld_k, max_span, scale);
    for (int g = 0; g < n; g++) {
        float *row = scores + (size_t)g * ld_s;
        if (!tree || !tree[g]) {
            softmax(row, S[g]);
            continue;
        }
        int seen = S[g];  // gather: the j-th seen position past S[g] is at or after S[g] + j
        for (uint64_t bits = tree[g]; bits; bits &= bits - 1) row[seen++] = row[S[g] + __builtin_ctzll(bits)];
        softmax(row, seen);
        for (int s = span[g] - 1; s >= S[g]; s--)  // scatter, from the last: nothing is overwritten before it is read
            row[s] = attention_sees(S[g], tree[g], s) ? row[--seen] : 0.0f;
    }
    rows_times_matrix(out, ld_out, scores, ld_s, span, 1, n, v, hd, hd, 1.0f);  // × 1 is exact
}

// The canonical order of float arithmetic, which every variant reproduces bit for bit (docs/kernels.md, "One
// order of arithmetic"; scalar.c writes it out): a long sum is SUM_LANES partial sums, term i going to sum
// i mod SUM_LANES, combined (l, l + 4), (l, l + 2), (l, l + 1); a matmul's dot product takes its inputs in chunks
// of MATMUL_CHUNK (a multiple of 16), each chunk so summed, the chunks' values added in turn.
enum { SUM_LANES = 8, MATMUL_CHUNK = 768 };

// The panel layout: rows 4p..4p+3 form panel p; in it, slice k (elements 16k..16k+15) of row 4p+r is stored at
// (k·4 + r)·16. Rows are padded with zeros to a multiple of 16 elements and the last panel with zero rows to 4.
// Pair order (BF16 weights where Kernels.bf16_pairs): within its 16 places a slice's element e is at
// 2·(e mod 8) + e / 8 — elements l and l + 8 side by side, in the low and high half of one 32-bit word.
static inline int panel_row_length(int n_in) { return (n_in + 15) / 16 * 16; }

static inline int slice_place(bool pairs, int e) { return pairs ? 2 * (e % 8) + e / 8 : e; }

static inline size_t panel_index(int n_in, bool pairs, int j, int i) {
    return (size_t)(j / 4) * 4 * panel_row_length(n_in) + ((size_t)(i / 16) * 4 + j % 4) * 16 +
           (size_t)slice_place(pairs, i % 16);
}

// Elements of storage a [n_out, n_in] matrix takes in either layout, and the place of W[j, i] in it.
static inline size_t weight_elements(bool panels, int n_out, int n_in) {
    return panels ? (size_t)(n_out + 3) / 4 * 4 * panel_row_length(n_in) : (size_t)n_out * n_in;
}

static inline size_t weight_index(bool panels, bool pairs, int n_in, int j, int i) {
    return panels ? panel_index(n_in, pairs, j, i) : (size_t)j * n_in + i;
}

// Whether variant k stores a matrix of this type in pair order.
static inline bool in_pair_order(const Kernels *k, WeightType type) {
    return k->panels && k->bf16_pairs && type == WEIGHT_BF16;
}

// How far ahead of the weight it is reading the AVX-512 matmuls (and the bench's read pass) ask for the weights
// in software: PREFETCH_L1_AHEAD bytes into L1 and PREFETCH_L2_AHEAD into L2, one sequential stream per thread.
// The hardware's own prefetchers alone leave decoding short of the memory's speed, and asking for the next 4-row
// panel (16–64 kB ahead) is too far: the lines are gone from L1 before use. Distances of 1 to 4 kB into L1 stream
// fastest, within noise of each other (the figures: docs/performance-history.md, "Measurements behind the
// kernels' choices").
enum { PREFETCH_L1_AHEAD = 2048, PREFETCH_L2_AHEAD = 8192 };

// The q8 and q4 walks' prefetches (panel_walk_avx512.h, panel_walk_avx2.h), which follow the order in which a walk
// reads the quants. A pass reads the quants of n_panels panels side by side, block by block; a panel holds its
// blocks' quants and then their scales. Block b of the pass's panel p asks for the lines at p · panel_bytes +
// b · block_bytes from `near` (into L1; the AVX-512 walk only) and from `far` (into L2). Each points into the
// pass's own panels until its distance reaches past their quants, and from block near_past (far_past) on into the
// quants of the panels `next` bytes on, which the walk reads next in the pass's place — not into the panels'
// scales or the pass's other panels. The scales, a line for every two blocks, are not in this stream: each walk
// asks for the next pass's on the side (panel_walk_avx512.h, panel_walk_avx2.h, qk_avx2.c).
typedef struct {
    const char *near, *far;
    int near_past, far_past;
    size_t jump;  // next − the quants' bytes: where the pointers move at their block
} PrefetchStream;

static inline PrefetchStream prefetch_stream(const uint8_t *panel, int nb, int block_bytes, size_t next) {
    const int near_past = nb - PREFETCH_L1_AHEAD / block_bytes, far_past = nb - PREFETCH_L2_AHEAD / block_bytes;
    return (PrefetchStream){.near = (const char *)panel + PREFETCH_L1_AHEAD,
                            .far = (const char *)panel + PREFETCH_L2_AHEAD,
                            .near_past = near_past > 0 ? near_past : 0,
                            .far_past = far_past > 0 ? far_past : 0,
                            .jump = next - (size_t)nb * block_bytes};
}

// Block b's step: the pointers move at their block (b counts up from 0).
static inline void prefetch_stream_at(PrefetchStream *s, int b) {
    if (b == s->near_past) s->near += s->jump;
    if (b == s->far_past) s->far += s->jump;
}

// PASS(n) for n = min(rows, 8) as a constant: the quantized walks' passes over a panel (panel_walk_*.h, qk_*.c),
// each case a copy with n folded in, so that a pass's n sums stay in registers.
#define PASS_WITH_CONSTANT_ROWS(rows, PASS) \
    switch (rows) {                         \
    case 1: PASS(1); break;                 \
    case 2: PASS(2); break;                 \
    case 3: PASS(3); break;                 \
    case 4: PASS(4); break;                 \
    case 5: PASS(5); break;                 \
    case 6: PASS(6); break;                 \
    case 7: PASS(7); break;                 \
    default: PASS(8); break;                \
    }

// Each variant writes one always-inline matmul(out, x, w, type, bias, T, n_in, ld_x, ld_out, j0, j1) and
// instantiates it for the three weight types with this macro (the type then folds to a constant in each copy).
#define DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)                                                                  \
    static void matmul_f32(float *out, const float *x, const void *w, const float *bias, int T, int n_in,      \
                           int ld_x, int ld_out, int j0, int j1) {                                             \
        matmul(out, x, w, WEIGHT_F32, bias, T, n_in, ld_x, ld_out, j0, j1);                                    \
    }                                                                                                          \
    static void matmul_f16(float *out, const float *x, const void *w, const float *bias, int T, int n_in,      \
                           int ld_x, int ld_out, int j0, int j1) {                                             \
        matmul(out, x, w, WEIGHT_F16, bias, T, n_in, ld_x, ld_out, j0, j1);                                    \
    }                                                                                                          \
    static void matmul_bf16(float *out, const float *x, const void *w, const float *bias, int T, int n_in,     \
                            int ld_x, int ld_out, int j0, int j1) {                                            \
        matmul(out, x, w, WEIGHT_BF16, bias, T, n_in, ld_x, ld_out, j0, j1);                                   \
    }

extern const Kernels kernels_scalar;
extern const Kernels kernels_avx2;
extern const Kernels kernels_avx512;
extern const Kernels kernels_neon;

#if defined(__x86_64__)
// The avx512 variant as an AVX-512 CPU with or without AVX512_VNNI and AVX512_BF16 runs it: kernels_avx512 where
// it has both (Zen 4, Sapphire Rapids, Cooper Lake); else a copy with AVX2's q8 and q4 matmuls in place of the VNNI
// ones (Skylake-X) and no matmul_bf16_dot (Skylake-X, Cascade Lake, Ice Lake). kernels_available() lists the one
// for this CPU; tests run all of them on any CPU with AVX512_VNNI and AVX512_BF16.
const Kernels *kernels_avx512_for(bool vnni, bool bf16);

// Whether a pass of one activation row (decoding) asks for its weights in software beyond what it asks for
// everywhere: on Intel's cores, not on AMD's, whose hardware prefetchers alone streamed a single row as fast or
// faster (avx512.c's float matmuls, prefetch_one_row; plain AVX2's q4, Q4_0 and K-quants into L1,
// panel_walk_avx2.h's decode_prefetches_into_l1). The one place the kernels ask the CPU's vendor. A choice of speed
// only: the same sums in the same order either way.
static inline bool decode_prefetches_on_this_cpu(void) { return !__builtin_cpu_is("amd"); }
#endif

// The variants built into this binary that this CPU and OS can run, best last; *count receives their number.
const Kernels *const *kernels_available(int *count);

// The best available variant, or the one $SPECDEC_ISA names (scalar, avx2, avxvnni, avx512, neon). NULL if
// $SPECDEC_ISA names a variant this binary or CPU lacks; why (why_size bytes, unless NULL) then names those it
// has, and no other.
const Kernels *kernels_select(char *why, size_t why_size);

// Scalar conversions of one element (the SIMD files convert in bulk, to the same values).
static inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);           // inf, nan
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);    // normal: rebias 15 → 127
    } else if (mant == 0) {
        bits = sign;                                         // ±0
    } else {                                                 // subnormal: normalise
        int e = -1;
        do { mant <<= 1; e++; } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    union { uint32_t u; float f; } v = {bits};
    return v.f;
}

static inline float bf16_to_f32(uint16_t b) {
    union { uint32_t u; float f; } v = {(uint32_t)b << 16};
    return v.f;
}

// F32 to BF16, rounded to nearest, ties to even (a NaN stays a NaN, made quiet): the BF16 value nearest x.
static inline uint16_t f32_to_bf16(float x) {
    union { float f; uint32_t u; } v = {x};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(v.u >> 16 | 0x40);
    return (uint16_t)((v.u + 0x7fffu + (v.u >> 16 & 1)) >> 16);
}

// A matmul_bf16_dot's input: activation rows x [T, ld_x] (first n_in columns) rounded to BF16 into
// out [T, panel_row_length(n_in)], zero-padded, each 16-element slice in pair order if `pairs` (kernels.h's
// slice_place; Kernels.bf16_pairs), so that it lines up with the slices of the weights. T · n_in conversions
// for the T · n_in · n_out multiply-adds of the matmul: plain C, which the compiler vectorizes a slice at a time
// in this form (0.7 ns an element in a throwaway loop here, against 2.1 with the index computed per element:
// Llama-3.2-1B's verification of T = 8 rounds 1.8 M of them).
static inline void bf16_round_rows(uint16_t *out, const float *x, int T, int n_in, int ld_x, bool pairs) {
    const int ld_out = panel_row_length(n_in);
    for (int t = 0; t < T; t++) {
        const float *row = x + (size_t)t * ld_x;
        uint16_t *o = out + (size_t)t * ld_out;
        for (int i0 = 0; i0 < ld_out; i0 += 16) {
            uint16_t rounded[16];
            for (int e = 0; e < 16; e++) rounded[e] = i0 + e < n_in ? f32_to_bf16(row[i0 + e]) : 0;
            for (int e = 0; e < 16; e++) o[i0 + slice_place(pairs, e)] = rounded[e];
        }
    }
}

// ---- 8-bit weights (q8) -------------------------------------------------------------------------------------
//
// A weight matrix [n_out, n_in] is quantized at load, block by block: each row's blocks of Q8_BLOCK = 32 inputs
// (zero-padded at the end) become 32 integers q ∈ [−127, 127] and one scale d, W[j, i] ≈ d · q (q8.c). A matmul
// quantizes its activation rows the same way (Q8Block, with F32 scales), so that each block's dot product is one
// of integers, exact, in 32 bits:
//     Σ_i x_i W[j, i] ≈ Σ_b d_x[b] · d_w[j, b] · Σ_{i in b} q_x[i] · q_w[j, i]
// and only the sum over blocks is in floats: per block, s = d_w · d_x (one rounding), then acc = fma(isum, s, acc)
// in block order, then + bias. Every variant does exactly these float operations in this order, so all variants
// agree bit for bit with the reference and a row's result depends on nothing but that row (batch invariance).
//
// The layout, shared by every variant: panels of Q8_PANEL = 16 rows (the last padded with zero rows). A panel
// holds, for each block b of the inputs, 512 bytes of quants — 8 groups of 4 inputs, each group 16 rows × 4
// bytes, so that one 64-byte line is one AVX-512 register of 16 rows' 4-input dot products (vpdpbusd) — and
// then the blocks' scales, 16 BF16 values per block (a scale rounded up to BF16 keeps every |q| ≤ 127 and F32's
// range: F16 would make the scales of small weights subnormal). Weights take 1 + 2/32 bytes each.
enum { Q8_BLOCK = 32, Q8_PANEL = 16, Q8_GROUP = 4 };

// One block of a quantized activation row: x[i] ≈ d · q[i].
struct Q8Block {
    float d;
    int32_t offset;  // −128 · Σ q[i]: what a kernel whose weights are offset to unsigned (q + 128) takes back
    int8_t q[Q8_BLOCK];
};

static inline int q8_blocks(int n_in) { return (n_in + Q8_BLOCK - 1) / Q8_BLOCK; }

#if defined(__SSE2__)
#include <emmintrin.h>

// Σ q over the block's first 16 inputs (GGUF's Q6_K scales each half of a block on its own: kernels/qk_*.c): the
// bytes' sums of absolute differences from −128, less 16 · 128.
static inline int32_t q8_low_half_sum(const Q8Block *xb) {
    const __m128i bytes = _mm_xor_si128(_mm_loadu_si128((const __m128i *)xb->q), _mm_set1_epi8((char)0x80));
    const __m128i sums = _mm_sad_epu8(bytes, _mm_setzero_si128());  // 8 bytes' sum in each 64-bit half
    return _mm_cvtsi128_si32(_mm_add_epi64(sums, _mm_unpackhi_epi64(sums, sums))) - 16 * 128;
}
#endif

// max_i |x_i| over n floats, as the largest of their bit patterns without the sign (the order of non-negative
// floats; an integer maximum vectorizes where a float one does not). A NaN is the largest of all. The quantizers'
// (q8.c, q4.c).
static inline float max_magnitude(const float *x, int n) {
    int32_t largest = 0;
    for (int i = 0; i < n; i++) {
        int32_t bits;
        memcpy(&bits, &x[i], sizeof bits);
        bits &= 0x7fffffff;
        largest = bits > largest ? bits : largest;
    }
    float m;
    memcpy(&m, &largest, sizeof m);
    return m;
}

// Bytes of one panel: the quants of every block, then their scales, rounded up to whole lines.
static inline size_t q8_panel_bytes(int n_in) {
    return ((size_t)q8_blocks(n_in) * (Q8_BLOCK * Q8_PANEL + 2 * Q8_PANEL) + 63) / 64 * 64;
}

static inline size_t q8_matrix_bytes(int n_out, int n_in) {
    return (size_t)(n_out + Q8_PANEL - 1) / Q8_PANEL * q8_panel_bytes(n_in);
}

// The byte of q_w[j, i] and the scale of row j's block b, within the matrix.
static inline size_t q8_quant_index(int n_in, int j, int i) {
    return (size_t)(j / Q8_PANEL) * q8_panel_bytes(n_in) + (size_t)(i / Q8_BLOCK) * Q8_BLOCK * Q8_PANEL +
           (size_t)(i % Q8_BLOCK / Q8_GROUP) * Q8_GROUP * Q8_PANEL + (size_t)(j % Q8_PANEL) * Q8_GROUP + i % Q8_GROUP;
}

static inline size_t q8_scale_index(int n_in, int j, int b) {  // in uint16_t from the matrix's start
    return ((size_t)(j / Q8_PANEL) * q8_panel_bytes(n_in) + (size_t)q8_blocks(n_in) * Q8_BLOCK * Q8_PANEL) / 2 +
           (size_t)b * Q8_PANEL + j % Q8_PANEL;
}

// Quantizes rows [n_rows ≤ 16, ld] (floats) into one panel (q8_panel_bytes(n_in)); rows n_rows..15 become zeros.
void q8_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in);

// Quantizes activation rows x [T, ld_x] (first n_in columns) into out [T, q8_blocks(n_in)]: the reference of
// Kernels.quantize_q8.
void q8_quantize_rows(Q8Block *out, const float *x, int T, int n_in, int ld_x);
void q8_quantize_rows_avx512(Q8Block *out, const float *x, int T, int n_in, int ld_x);

// d · q of W[j, i] in a quantized matrix (the embedding lookup of a tied q8 head).
static inline float q8_weight(const void *w, int n_in, int j, int i) {
    const int8_t q = ((const int8_t *)w)[q8_quant_index(n_in, j, i)];
    return (float)q * bf16_to_f32(((const uint16_t *)w)[q8_scale_index(n_in, j, i / Q8_BLOCK)]);
}

// The reference product (q8.c): the scalar variant's matmul_q8, and the specification of the others.
MatmulQ8Fn q8_matmul_reference;
// The same for any quantized type (weight_quantized: q8, q4 below, Q8_0 and Q4_0 at the end of this file):
// q8_matmul_reference and the others are this with their type.
void quantized_matmul_reference(float *out, const Q8Block *x, const void *w, WeightType type, const float *bias,
                                int T, int n_in, int ld_out, int j0, int j1);
MatmulQ8Fn q8_matmul_avx2;
MatmulQ8Fn q8_matmul_avxvnni;  // AVX2's with AVX-VNNI's vpdpbusd: the avxvnni variant's (dispatch.c)
MatmulQ8Fn q8_matmul_avx512;
MatmulQ8Fn q8_matmul_neon;

// ---- 4-bit weights (q4) -------------------------------------------------------------------------------------
//
// Blocks of Q4_BLOCK = 32 inputs of a row, each 32 integers q ∈ [−8, 7] and one BF16 scale d, W[j, i] ≈ d · q:
// llama.cpp's Q4_0 in substance (a symmetric 16-level grid per 32 weights, 4.5 bits a weight), with q4.c's
// quantizer choosing d among a few candidates for the least squared error. Why not super-blocks of 256 with
// scales and minimums (Q4_K, also 4.5 bits): their 256 divides neither the shipped target's width (384) nor
// Qwen2.5-0.5B's (896), and this format's product is q8's with one unpacking step, one exact integer sum and
// one fused multiply-add per block; against it, a Q4_K-like grid left 30% less squared error on the shipped
// target's matrices it fits (docs/quantization.md). BF16 scales as q8's (the rounded scale is the one the
// quants are chosen for). The product is q8's, against the same Q8Block activations:
//     Σ_i x_i W[j, i] ≈ Σ_b fl(d_w[j, b] · d_x[t, b]) · Σ_{i in b} q_w[j, i] · q_x[t, i]
// an exact integer sum per block, then acc = fma(isum, s, acc) in block order, then + bias, so every variant is
// bit-identical to the reference (q4.c) and batch-invariant.
//
// The layout, shared by every variant: panels of Q4_PANEL = 16 rows. For each block b of the inputs, 256 bytes
// of quants: 4 lines, line r holding rows 0..15 × 4 bytes, whose low nibbles are row l's inputs 4r..4r+3 and
// high nibbles its inputs 16 + 4r..16 + 4r + 3, each stored as u = q + 8 ∈ [0, 15]. One line masked and shifted
// gives the two 64-byte groups of q8's layout (16 rows × 4 inputs), so the kernels are q8's with an unpacking
// step, and vpdpbusd takes u unsigned as it is: Σ u · q_x = Σ q_w · q_x + 8 · Σ q_x, which starts each block's
// sum at −8 · Σ q_x = Q8Block.offset / 16. Then the blocks' scales, 16 BF16 values per block.
enum { Q4_BLOCK = 32, Q4_PANEL = 16 };
// q8's rows and blocks, so that one walk over panels (kernels/panel_walk_*.h) serves both formats' matmuls.
_Static_assert((int)Q4_BLOCK == (int)Q8_BLOCK && (int)Q4_PANEL == (int)Q8_PANEL, "q4 panels have q8's shape");

static inline int q4_blocks(int n_in) { return (n_in + Q4_BLOCK - 1) / Q4_BLOCK; }

// Bytes of one panel (quants of every block, then their scales, rounded up to whole lines) and of a matrix.
static inline size_t q4_panel_bytes(int n_in) {
    return ((size_t)q4_blocks(n_in) * (Q4_BLOCK * Q4_PANEL / 2 + 2 * Q4_PANEL) + 63) / 64 * 64;
}

static inline size_t q4_matrix_bytes(int n_out, int n_in) {
    return (size_t)(n_out + Q4_PANEL - 1) / Q4_PANEL * q4_panel_bytes(n_in);
}

// The byte that holds u_w[j, i] (in its low nibble if i % 32 < 16, else its high one), and the scale of row j's
// block b (in uint16_t from the matrix's start).
static inline size_t q4_quant_index(int n_in, int j, int i) {
    const int k = i % Q4_BLOCK % 16;
    return (size_t)(j / Q4_PANEL) * q4_panel_bytes(n_in) + (size_t)(i / Q4_BLOCK) * (Q4_BLOCK * Q4_PANEL / 2) +
           (size_t)(k / 4) * 64 + (size_t)(j % Q4_PANEL) * 4 + k % 4;
}

static inline size_t q4_scale_index(int n_in, int j, int b) {
    return ((size_t)(j / Q4_PANEL) * q4_panel_bytes(n_in) + (size_t)q4_blocks(n_in) * (Q4_BLOCK * Q4_PANEL / 2)) / 2 +
           (size_t)b * Q4_PANEL + j % Q4_PANEL;
}

// q_w[j, i] ∈ [−8, 7], from its nibble.
static inline int q4_quant(const void *w, int n_in, int j, int i) {
    const uint8_t byte = ((const uint8_t *)w)[q4_quant_index(n_in, j, i)];
    return (i % Q4_BLOCK < 16 ? byte & 0xf : byte >> 4) - 8;
}

// d · q of W[j, i] in a q4 matrix: the value the matmuls multiply (the tests compare it with the weight).
static inline float q4_weight(const void *w, int n_in, int j, int i) {
    return (float)q4_quant(w, n_in, j, i) * bf16_to_f32(((const uint16_t *)w)[q4_scale_index(n_in, j, i / Q4_BLOCK)]);
}

// Quantizes rows [n_rows ≤ 16, ld] (floats) into one panel (q4_panel_bytes(n_in)); rows n_rows..15 become zeros.
void q4_quantize_panel(uint8_t *panel, const float *rows, int n_rows, int ld, int n_in);

// The reference product (q4.c): the scalar variant's matmul_q4, and the specification of the others.
MatmulQ8Fn q4_matmul_reference;
MatmulQ8Fn q4_matmul_avx2;
MatmulQ8Fn q4_matmul_avxvnni;
MatmulQ8Fn q4_matmul_avx512;
MatmulQ8Fn q4_matmul_neon;

// ---- GGUF's Q8_0 and Q4_0, as stored ------------------------------------------------------------------------
//
// A GGUF Q8_0 block (qk.h) is 32 weights w = d·q, q int8, d an F16; a Q4_0 block is 32 weights w = d·(u − 8), u
// a nibble, the block's weights k and k + 16 sharing byte k. Those are q8's and q4's blocks (q4's nibbles even
// pair the same inputs), with F16 scales instead of BF16 ones, so a loaded GGUF matrix is repacked into q8's or
// q4's panels with the file's quants and the file's F16 scale bits, unchanged (q8_0_pack_row, q4_0_pack_row),
// and multiplied by the q8 and q4 walks with the scales widened from F16 instead of from BF16 — exact either way,
// so the float steps stay the reference's: fl(d_w · d_x), then one fused multiply-add per block. A Q8_0 quant may
// be −128 (llama.cpp's quantizer writes [−127, 127], another writer need not): AVX2's and NEON's pairs of
// products then reach 2 · 128 · 127 < 2¹⁵ still, and AVX-512's flip gives u = 0.
// The panels take the file's bytes a weight (34 and 18 per 32), padding aside.

// Whether `type` is one of the 8-bit-activation formats (q8, q4, Q8_0, Q4_0, Q5_0, Q5_1, Q4_1, the K-quants), and the
// matmul of variant k for it.
static inline bool weight_quantized(WeightType type) { return type >= WEIGHT_Q8; }

static inline MatmulQ8Fn *quantized_matmul(const Kernels *k, WeightType type) {
    switch (type) {
    case WEIGHT_Q8: return k->matmul_q8;
    case WEIGHT_Q4: return k->matmul_q4;
    case WEIGHT_Q8_0: return k->matmul_q8_0;
    case WEIGHT_Q4_0: return k->matmul_q4_0;
    case WEIGHT_Q5_0: case WEIGHT_Q5_1: case WEIGHT_Q4_1: return k->matmul_q5[type - WEIGHT_Q5_0];
    default: return k->matmul_k[type - WEIGHT_Q4_K];
    }
}

// Whether a matrix of quantized `type` is held in q4's panels (else q8's), and whether its scales are F16 (else
// BF16).
static inline bool in_q4_panels(WeightType type) { return type == WEIGHT_Q4 || type == WEIGHT_Q4_0; }
static inline bool f16_scales(WeightType type) {
    return type == WEIGHT_Q8_0 || type == WEIGHT_Q4_0 || type == WEIGHT_Q5_0 || type == WEIGHT_Q5_1 ||
           type == WEIGHT_Q4_1;
}

// Whether a matrix of quantized `type` is held in q5's panels (GGUF's Q5_0, Q5_1 and Q4_1, below); whether its
// blocks have a fifth bit (Q5_0, Q5_1), and a min (Q5_1, Q4_1: w = d·q + m).
static inline bool in_q5_panels(WeightType type) {
    return type == WEIGHT_Q5_0 || type == WEIGHT_Q5_1 || type == WEIGHT_Q4_1;
}
static inline bool fifth_bits(WeightType type) { return type == WEIGHT_Q5_0 || type == WEIGHT_Q5_1; }
static inline bool block_mins(WeightType type) { return type == WEIGHT_Q5_1 || type == WEIGHT_Q4_1; }

// Whether `type` is a K-quant (K-panels, below).
static inline bool k_quant(WeightType type) { return type >= WEIGHT_Q4_K; }

static inline size_t k_panel_bytes(WeightType type, int n_in);
static inline float k_weight(const void *w, WeightType type, int n_in, int j, int i);
static inline size_t q5_panel_bytes(WeightType type, int n_in);
static inline size_t q5_scale_index(WeightType type, int n_in, int j, int b);
static inline size_t q5_min_index(WeightType type, int n_in, int j, int b);
static inline int q5_quant(const void *w, WeightType type, int n_in, int j, int i);

// Bytes of one panel of a quantized matrix, and of the matrix.
static inline size_t quantized_panel_bytes(WeightType type, int n_in) {
    if (in_q5_panels(type)) return q5_panel_bytes(type, n_in);
    return k_quant(type) ? k_panel_bytes(type, n_in) : in_q4_panels(type) ? q4_panel_bytes(n_in) : q8_panel_bytes(n_in);
}

static inline size_t quantized_matrix_bytes(WeightType type, int n_out, int n_in) {
    return (size_t)(n_out + Q8_PANEL - 1) / Q8_PANEL * quantized_panel_bytes(type, n_in);
}

// In the panels of q8, q4, Q8_0, Q4_0, Q5_0, Q5_1 or Q4_1 (one scale per row and block, w = d·q, and for Q5_1 and
// Q4_1 a min, w = d·q + m): the integer q of W[j, i], and the place of row j's scale of block b (in uint16_t from
// the matrix's start).
static inline int scaled_quant(const void *w, WeightType type, int n_in, int j, int i) {
    if (in_q5_panels(type)) return q5_quant(w, type, n_in, j, i);
    return in_q4_panels(type) ? q4_quant(w, n_in, j, i) : ((const int8_t *)w)[q8_quant_index(n_in, j, i)];
}

static inline size_t scaled_scale_index(WeightType type, int n_in, int j, int b) {
    if (in_q5_panels(type)) return q5_scale_index(type, n_in, j, b);
    return in_q4_panels(type) ? q4_scale_index(n_in, j, b) : q8_scale_index(n_in, j, b);
}

// W[j, i] as the matmuls take it, in a quantized matrix of any type (an embedding row's lookup); Q5_1's and Q4_1's
// as llama.cpp's dequantize_row_* rounds them, fl(fl(d·q) + m).
static inline float quantized_weight(const void *w, WeightType type, int n_in, int j, int i) {
    if (k_quant(type)) return k_weight(w, type, n_in, j, i);
    const uint16_t *scales = w, d = scales[scaled_scale_index(type, n_in, j, i / Q8_BLOCK)];
    const float dq = (float)scaled_quant(w, type, n_in, j, i) * (f16_scales(type) ? f16_to_f32(d) : bf16_to_f32(d));
    return block_mins(type) ? dq + f16_to_f32(scales[q5_min_index(type, n_in, j, i / Q8_BLOCK)]) : dq;
}

// Row r (< 16) of a panel (q8_panel_bytes(n_in), q4_panel_bytes(n_in)) from one GGUF row of q8_blocks(n_in) Q8_0
// or Q4_0 blocks, its quants and F16 scale bits copied unchanged (a GGUF row is whole blocks: the loader's n_in is
// a multiple of 32).
void q8_0_pack_row(uint8_t *panel, int r, const uint8_t *blocks, int n_in);
void q4_0_pack_row(uint8_t *panel, int r, const uint8_t *blocks, int n_in);

// The reference products (q8.c) and each variant's.
MatmulQ8Fn q8_0_matmul_reference, q8_0_matmul_avx2, q8_0_matmul_avxvnni, q8_0_matmul_avx512, q8_0_matmul_neon;
MatmulQ8Fn q4_0_matmul_reference, q4_0_matmul_avx2, q4_0_matmul_avxvnni, q4_0_matmul_avx512, q4_0_matmul_neon;

// ---- GGUF's Q5_0, Q5_1 and Q4_1, as stored ---------------------------------------------------------------------
//
// A Q5_0 block (qk.h) is 32 weights w = d·(q − 16), q ∈ [0, 31] of 5 bits — a nibble, weights k and k + 16
// sharing byte k as in Q4_0, and a fifth bit — under an F16 d; a Q5_1 block's w = d·q + m, with an F16 min m too
// (llama-quantize's Q5_K_M fallback), and a Q4_1 block's the same with 4-bit q ∈ [0, 15] (what a Q4_0 file made with
// an importance matrix holds). Their panels, the q5 panels, hold the file's bits, as many bytes per 32 weights as
// the file (22, 24, 20; padding aside), where before Q5_0 took Q8_0's panels' 34 bytes and Q5_1 and Q4_1 were
// quantized again to q8. For each block b of 32 inputs: the 16 rows' nibbles as q4's panels lay them out (256 bytes:
// line l holds row r's inputs 4l..4l+3 in its low nibbles and 16 + 4l..16 + 4l + 3 in its high ones), then (Q5_0,
// Q5_1) their fifth bits in one line of 64 bytes laid out as a q8 group (16 rows × 4 bytes): byte 4r + k holds in
// bit g the fifth bit of row r's input 4g + k, g < 8. So group g's fifth bits are that line shifted left by 4 − g
// bits (right by g − 4) and masked to bit 4 (shifts of at most 4 bits in 16-bit lanes bring each byte's bit 4 from
// its own byte), or-ed into the group's nibbles: u = q, unsigned, as vpdpbusd and vpmaddubsw take it. After the
// blocks' quants, each block's 16 F16 scales d, as q4's; then (Q5_1, Q4_1) each block's 16 F16 mins m.
//
// The products, as Q8_0's and the K-quants' (kernels.h above, below): Q5_0's block sum Σ (q − 16) · q_x starts at
// −16 · Σ q_x (Q8Block.offset / 8), Σ u · q_x = Σ (q − 16) · q_x + 16 · Σ q_x, and its float steps are Q8_0's,
// fl(d · d_x) and one fused multiply-add per block (Q5_0 held in Q8_0's panels with q − 16 as its quants gave the
// same bits). Q5_1's and Q4_1's, exactly in integers, are d·d_x · Σ q·q_x + m · (d_x · Σ q_x); the float steps are
// acc = fma(Σ q·q_x, fl(d · d_x), acc), then acc = fma(m, fl(d_x · Σ q_x), acc), as the K-quants' mins.
enum { Q5_NIBBLE_BYTES = Q8_BLOCK * Q8_PANEL / 2 };

// A block's quants in a q5 panel: the nibbles, then the fifth bits.
static inline int q5_block_bytes(WeightType type) { return Q5_NIBBLE_BYTES + (fifth_bits(type) ? 64 : 0); }

static inline size_t q5_panel_bytes(WeightType type, int n_in) {
    const size_t per_block = (size_t)q5_block_bytes(type) + 2 * Q8_PANEL * (block_mins(type) ? 2 : 1);
    return ((size_t)q8_blocks(n_in) * per_block + 63) / 64 * 64;
}

// The byte that holds row j's nibble of input i (its low nibble if i % 32 < 16, else its high one), the byte that
// holds its fifth bit (bit i % 32 / 4), and the scale and the min of row j's block b (in uint16_t from the matrix's
// start), in a q5 matrix of `type`.
static inline size_t q5_block_at(WeightType type, int n_in, int j, int i) {
    return (size_t)(j / Q8_PANEL) * q5_panel_bytes(type, n_in) + (size_t)(i / Q8_BLOCK) * q5_block_bytes(type);
}

static inline size_t q5_quant_index(WeightType type, int n_in, int j, int i) {
    const int k = i % Q8_BLOCK % 16;
    return q5_block_at(type, n_in, j, i) + (size_t)(k / 4) * 64 + (size_t)(j % Q8_PANEL) * 4 + k % 4;
}

static inline size_t q5_high_index(WeightType type, int n_in, int j, int i) {
    return q5_block_at(type, n_in, j, i) + Q5_NIBBLE_BYTES + (size_t)(j % Q8_PANEL) * 4 + i % 4;
}

static inline size_t q5_scale_index(WeightType type, int n_in, int j, int b) {
    return ((size_t)(j / Q8_PANEL) * q5_panel_bytes(type, n_in) + (size_t)q8_blocks(n_in) * q5_block_bytes(type)) / 2 +
           (size_t)b * Q8_PANEL + j % Q8_PANEL;
}

static inline size_t q5_min_index(WeightType type, int n_in, int j, int b) {
    return q5_scale_index(type, n_in, j, b) + (size_t)q8_blocks(n_in) * Q8_PANEL;
}

// The integer weight of W[j, i]: Q5_0's q − 16 ∈ [−16, 15], Q5_1's q ∈ [0, 31], Q4_1's q ∈ [0, 15].
static inline int q5_quant(const void *w, WeightType type, int n_in, int j, int i) {
    const uint8_t *bytes = w, nibbles = bytes[q5_quant_index(type, n_in, j, i)];
    const int low = i % Q8_BLOCK < 16 ? nibbles & 0xf : nibbles >> 4;
    if (!fifth_bits(type)) return low;
    const int q = low | (bytes[q5_high_index(type, n_in, j, i)] >> (i % Q8_BLOCK / 4) & 1) << 4;
    return type == WEIGHT_Q5_0 ? q - 16 : q;
}

// Row r (< 16) of a q5 panel of `type` from one GGUF row of q8_blocks(n_in) blocks of it, their bits and F16
// scales (and mins) as the file holds them (n_in a multiple of 32).
void q5_pack_row(uint8_t *panel, WeightType type, int r, const uint8_t *blocks, int n_in);

// The reference products (q8.c) and each variant's.
MatmulQ8Fn q5_0_matmul_reference, q5_0_matmul_avx2, q5_0_matmul_avxvnni, q5_0_matmul_avx512, q5_0_matmul_neon;
MatmulQ8Fn q5_1_matmul_reference, q5_1_matmul_avx2, q5_1_matmul_avxvnni, q5_1_matmul_avx512, q5_1_matmul_neon;
MatmulQ8Fn q4_1_matmul_reference, q4_1_matmul_avx2, q4_1_matmul_avxvnni, q4_1_matmul_avx512, q4_1_matmul_neon;

// ---- GGUF's K-quants, as stored ---------------------------------------------------------------------------
//
// Q4_K, Q5_K and Q6_K (qk.h) hold super-blocks of 256 weights: F16 d (and dmin), and integer scales per sub-block —
// Q4_K and Q5_K a 6-bit scale sc and min m per 32 weights, w = (d·sc)·q − dmin·m with q ∈ [0, 15] or [0, 31];
// Q6_K an int8 scale per 16, w = (d·sc)·(q − 32), q ∈ [0, 63]. A 32-weight block of q8's activations (Q8Block)
// meets one sub-block of Q4_K or Q5_K, two of Q6_K, so its part of a dot product is, exactly in integers,
//     Q4_K, Q5_K:  (d·sc)·d_x · Σ q·q_x  −  (dmin·m) · (d_x · Σ q_x)
//     Q6_K:        (d·sc_lo)·d_x · Σ_lo (q − 32)·q_x  +  (d·sc_hi)·d_x · Σ_hi (q − 32)·q_x   (lo, hi: inputs 0..15, 16..31)
// with the integer sums exact (|Σ| < 2²⁴, so their conversions to F32 are exact too) and d·sc, dmin·m exact in F32
// (an F16 times at most 8 bits). The float steps, per block in block order, are: acc = fma(Σ, fl(d·sc · d_x), acc)
// (Q6_K: for the low half, then the high one), then for Q4_K and Q5_K acc = fma(−dmin·m, fl(d_x · Σ q_x), acc);
// then + bias. d·sc and dmin·m are a block's for all activation rows, d_x · Σ q_x an activation row's for all
// weight rows, so a row and block costs the variants one multiply and one or two fused multiply-adds, as q8's do.
// Every variant does these in this order, so it is bit-identical to the reference (qk.c) and batch-invariant.
//
// The K-panels, shared by every variant: 16 rows, as q8's. First, for each 32-input block b, the rows' quants: Q4_K in
// q4's layout (256 bytes, inputs k and k + 16 in the low and high nibbles of one byte) as q ∈ [0, 15]; Q5_K's q ∈ [0,
// 31] as its low 4 bits in q4's layout, then its fifth bits in one line of 64 bytes as the q5 panels lay them out (byte
// 4r + k holds in bit g the fifth bit of row r's input 4g + k: 320 bytes); Q6_K's q ∈ [0, 63] as its low 4 bits in q4's
// layout, then its top 2 bits in 128 bytes, two lines of 64 laid out as a q8 group's: line h holds inputs 16h..16h +
// 15, the 2 bits of the input of group 4h + c at bits 2c, 2c + 1 of the byte where the group's line would hold it (384
// bytes, three quarters of q8's). Then each block's 16 rows' integer scales: Q4_K and Q5_K one byte a row, the low 4
// bits of sc in its low nibble and of m in its high one; Q6_K two bytes a row, (sc_lo, sc_hi) signed. Then each
// super-block's 16 rows' F16 d, and for Q4_K and Q5_K their F16 dmin, then 4 bytes a row (a little-endian u32) with the
// top 2 bits of its 8 blocks' sc and m: block c's sc at bits 4c and 4c + 1, its m at 4c + 2 and 4c + 3. So a row's
// scales and mins take the file's 12 bytes a super-block, laid out for 16 rows at once, and the K-panels the file's
// bytes a weight (Q4_K 144, Q5_K 176, Q6_K 210 per 256), padding aside. Rows of n_in, a multiple of 256.
enum { K_SUPER = 256, K_BLOCKS = K_SUPER / Q8_BLOCK };

// A block's quants in a K-panel; a block's integer scales and a super-block's F16 scales and top bits, per row.
static inline int k_block_bytes(WeightType type) {
    return Q8_BLOCK * Q8_PANEL / 2 + (type == WEIGHT_Q5_K ? 64 : type == WEIGHT_Q6_K ? 128 : 0);
}

static inline int k_scale_bytes(WeightType type) { return type == WEIGHT_Q6_K ? 2 : 1; }

static inline int k_super_bytes(WeightType type) { return type == WEIGHT_Q6_K ? 2 : 8; }

static inline size_t k_panel_bytes(WeightType type, int n_in) {
    const size_t nb = (size_t)q8_blocks(n_in);
    return (nb * ((size_t)k_block_bytes(type) + (size_t)k_scale_bytes(type) * Q8_PANEL) +
            nb / K_BLOCKS * (size_t)k_super_bytes(type) * Q8_PANEL + 63) / 64 * 64;
}

// Where row j's (j < 16: in panel 0) quant of input i, scales of block b, F16 d of super-block s and (Q4_K, Q5_K)
// that super-block's top bits lie, in bytes from the panel's start (the low 4 bits of a quant in the byte's low
// nibble if i % 32 < 16, else the high one; Q5_K's fifth bit and Q6_K's top 2 bits at k_high_offset, from bit
// k_high_shift; dmin 32 bytes after d).
static inline size_t k_quant_offset(WeightType type, int j, int i) {
    return (size_t)(i / Q8_BLOCK) * k_block_bytes(type) + q4_quant_index(Q8_BLOCK, j, i % Q8_BLOCK);
}

static inline size_t k_high_offset(WeightType type, int j, int i) {
    const size_t line = (size_t)(i / Q8_BLOCK) * k_block_bytes(type) + Q8_BLOCK * Q8_PANEL / 2 +
                        (type == WEIGHT_Q6_K ? (size_t)(i % Q8_BLOCK / 16) * 64 : 0);
    return line + (size_t)j * Q8_GROUP + i % Q8_GROUP;
}

static inline int k_high_shift(WeightType type, int i) {
    return type == WEIGHT_Q6_K ? 2 * (i % 16 / 4) : i % Q8_BLOCK / 4;
}

// The integer quant of row j's (j < 16) input i in a K-panel, as the matmuls multiply it: Q4_K q ∈ [0, 15], Q5_K
// q ∈ [0, 31], Q6_K q − 32 ∈ [−32, 31].
static inline int k_quant_at(const uint8_t *panel, WeightType type, int j, int i) {
    const uint8_t byte = panel[k_quant_offset(type, j, i)];
    const int low = i % Q8_BLOCK < 16 ? byte & 0xf : byte >> 4;
    if (type == WEIGHT_Q4_K) return low;
    const int high = panel[k_high_offset(type, j, i)] >> k_high_shift(type, i);
    return type == WEIGHT_Q5_K ? low | (high & 1) << 4 : (low | (high & 3) << 4) - 32;
}

static inline size_t k_scale_offset(WeightType type, int n_in, int j, int b) {
    return (size_t)q8_blocks(n_in) * k_block_bytes(type) + ((size_t)b * Q8_PANEL + (size_t)j) * k_scale_bytes(type);
}

static inline size_t k_super_offset(WeightType type, int n_in, int j, int s) {
    const size_t nb = (size_t)q8_blocks(n_in);
    return nb * ((size_t)k_block_bytes(type) + (size_t)k_scale_bytes(type) * Q8_PANEL) +
           (size_t)s * k_super_bytes(type) * Q8_PANEL + (size_t)j * 2;
}

static inline size_t k_tops_offset(WeightType type, int n_in, int j, int s) {
    return k_super_offset(type, n_in, 0, s) + 4 * Q8_PANEL + (size_t)j * 4;
}

// Row j's (j < 16) integer scales of block b in a K-panel: Q4_K's and Q5_K's (sc, m) ∈ [0, 63], each its low 4
// bits or-ed with its top 2 from the super-block's u32; Q6_K's (sc_lo, sc_hi) ∈ [−128, 127].
static inline void k_row_scales(int scales[2], const uint8_t *panel, WeightType type, int n_in, int j, int b) {
    const uint8_t *low = panel + k_scale_offset(type, n_in, j, b);
    if (type == WEIGHT_Q6_K) {
        scales[0] = (int8_t)low[0], scales[1] = (int8_t)low[1];
        return;
    }
    const uint8_t *t = panel + k_tops_offset(type, n_in, j, b / K_BLOCKS);
    const uint32_t tops = ((uint32_t)t[0] | (uint32_t)t[1] << 8 | (uint32_t)t[2] << 16 | (uint32_t)t[3] << 24) >>
                          4 * (b % K_BLOCKS);
    scales[0] = (low[0] & 0xf) | (int)(tops & 3) << 4;
    scales[1] = low[0] >> 4 | (int)(tops >> 2 & 3) << 4;
}

// W[j, i] of a K-panel matrix, as llama.cpp's dequantize_row_* rounds it (qk.c): fl(fl(d·sc)·q − fl(dmin·m)).
static inline float k_weight(const void *w, WeightType type, int n_in, int j, int i) {
    const uint8_t *panel = (const uint8_t *)w + (size_t)(j / Q8_PANEL) * k_panel_bytes(type, n_in);
    const int r = j % Q8_PANEL, b = i / Q8_BLOCK;
    int scales[2];
    k_row_scales(scales, panel, type, n_in, r, b);
    const uint8_t *super = panel + k_super_offset(type, n_in, r, b / K_BLOCKS);
    const float d = f16_to_f32((uint16_t)(super[0] | super[1] << 8));
    const int q = k_quant_at(panel, type, r, i);
    if (type == WEIGHT_Q6_K) return d * (float)scales[i % Q8_BLOCK < 16 ? 0 : 1] * (float)q;
    const float dmin = f16_to_f32((uint16_t)(super[32] | super[33] << 8));
    return d * (float)scales[0] * (float)q - dmin * (float)scales[1];
}

// Rows r (< 16) of a K-panel from one GGUF row of n_in / 256 blocks of `type` (WEIGHT_Q4_K, Q5_K, Q6_K): quants,
// integer scales and F16 d and dmin, each as the file holds it (qk.c).
void k_pack_row(uint8_t *panel, WeightType type, int r, const uint8_t *blocks, int n_in);

// The reference product (qk.c) for each K type, and each variant's.
MatmulQ8Fn q4_k_matmul_reference, q5_k_matmul_reference, q6_k_matmul_reference;
MatmulQ8Fn q4_k_matmul_avx2, q5_k_matmul_avx2, q6_k_matmul_avx2;
MatmulQ8Fn q4_k_matmul_avx512, q5_k_matmul_avx512, q6_k_matmul_avx512;
MatmulQ8Fn q4_k_matmul_neon, q5_k_matmul_neon, q6_k_matmul_neon;

#endif
