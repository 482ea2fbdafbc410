// kernels.h — the hot loops of a transformer, as one table of function pointers per instruction set.
//
// kernels/scalar.c is the reference: plain C, obviously right, the specification every other variant is tested
// against (tests/kernels/test_kernels.c). avx2.c, avx512.c and neon.c implement the same signatures, each compiled with
// its own flags; kernels_select() picks the best one the CPU and OS support, once, at start-up.
//
// Arguments are ordered outputs, inputs, sizes. Weights may be F32, F16 or BF16; arithmetic is always F32.
#ifndef SPECDEC_KERNELS_H
#define SPECDEC_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { WEIGHT_F32, WEIGHT_F16, WEIGHT_BF16, WEIGHT_TYPES } WeightType;

// Batch invariance: every kernel computes row t of its output from row t of its input alone, with the same
// operations in the same order whatever T, j0 and j1 are, so results are bit-identical across batch sizes and
// thread counts.
typedef void MatmulFn(float *out, const float *x, const void *w, const float *bias, int T, int n_in, int ld_x,
                      int ld_out, int j0, int j1);

typedef struct {
    const char *name;  // "scalar", "avx2", "avx512", "neon"

    // out[t, j] = bias[j] + Σ_i x[t, i] · W[j, i]     for t < T and j0 ≤ j < j1 (bias may be NULL)
    //   out: [T, ld_out]   x: [T, ld_x], its first n_in columns   W: [n_out, n_in], 64-byte aligned, of the
    //   indexed WeightType, laid out as `panels` says
    // Each weight row is read from memory once for all T rows of x: verifying γ+1 tokens streams the weights
    // once, like decoding one.
    MatmulFn *matmul[WEIGHT_TYPES];

    // The layout of W: false, rows one after another (W[j, i] at j·n_in + i); true, panels of 4 rows whose
    // 16-element slices alternate (W[j, i] at panel_index(n_in, j, i)), so that the 4 rows a micro-kernel reads
    // side by side are one sequential stream of memory.
    bool panels;

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

    // In place, x: [n]: x_i = exp(x_i − max x) / Σ_j exp(x_j − max x)
    void (*softmax)(float *x, int n);

    // One query head attending over S cached positions (causal masking is the caller's choice of S):
    //   out = Σ_s a_s V[s],   a = softmax(scale · (Σ_i q_i Kᵀ[i, s])_s)
    //   out, q: [hd]   Kᵀ: [hd, S], rows ld_k floats apart   V: [S, hd]   scores: scratch [S]
    // The keys come transposed so that the S scores are computed along contiguous positions, a vector of
    // positions at a time, with no horizontal sums.
    void (*attention)(float *out, const float *q, const float *kt, int ld_k, const float *v, float *scores, int S,
                      int hd, float scale);

    // out += x       out, x: [n]   (the residual connection)
    void (*add)(float *out, const float *x, int n);

    // F32 matmuls of at least this many activation rows go to OpenBLAS's sgemm instead, where it is faster than
    // `matmul` (the crossover that make bench measures); 0 = never.
    int blas_min_rows;
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

// The panel layout: rows 4p..4p+3 form panel p; in it, slice k (elements 16k..16k+15) of row 4p+r is stored at
// (k·4 + r)·16. Rows are padded with zeros to a multiple of 16 elements and the last panel with zero rows to 4.
static inline int panel_row_length(int n_in) { return (n_in + 15) / 16 * 16; }

static inline size_t panel_index(int n_in, int j, int i) {
    return (size_t)(j / 4) * 4 * panel_row_length(n_in) + ((size_t)(i / 16) * 4 + j % 4) * 16 + i % 16;
}

// Elements of storage a [n_out, n_in] matrix takes in either layout, and the place of W[j, i] in it.
static inline size_t weight_elements(bool panels, int n_out, int n_in) {
    return panels ? (size_t)(n_out + 3) / 4 * 4 * panel_row_length(n_in) : (size_t)n_out * n_in;
}

static inline size_t weight_index(bool panels, int n_in, int j, int i) {
    return panels ? panel_index(n_in, j, i) : (size_t)j * n_in + i;
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

// The variants built into this binary that this CPU and OS can run, best last; *count receives their number.
const Kernels *const *kernels_available(int *count);

// The best available variant, or the one $SPECDEC_ISA names (scalar, avx2, avx512, neon). NULL if
// $SPECDEC_ISA names a variant this binary or CPU lacks; *why then says which.
const Kernels *kernels_select(const char **why);

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

#endif
