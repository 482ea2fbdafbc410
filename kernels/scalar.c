// scalar.c — the reference kernels: plain C, one obvious loop per formula. Every SIMD variant is tested against
// these on random inputs (tests/kernels/test_kernels.c), and SPECDEC_ISA=scalar runs the whole model on them.
#include <math.h>
#include <string.h>

#include "kernels.h"

// One weight element as a float. Rows are 64-byte aligned, so W is read through its own type.
static float weight_at(const void *w, WeightType type, size_t index) {
    switch (type) {
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)w)[index]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)w)[index]);
    default: return ((const float *)w)[index];
    }
}

// out[t, j] = bias[j] + Σ_i x[t, i] · W[j, i]      out: [T, ld_out]  x: [T, ld_x]  W: [n_out, n_in]
static void matmul(float *out, const float *x, const void *w, WeightType type, const float *bias, int T,
                   int n_in, int ld_x, int ld_out, int j0, int j1) {
    for (int j = j0; j < j1; j++) {
        for (int t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int i = 0; i < n_in; i++) sum += x[(size_t)t * ld_x + i] * weight_at(w, type, (size_t)j * n_in + i);
            out[(size_t)t * ld_out + j] = bias ? sum + bias[j] : sum;
        }
    }
}

DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)

// The same for BF16 weights and activations rounded to BF16 (kernels.h: bf16_round_rows), x: [T, ld_x], ld_x =
// panel_row_length(n_in). Products of two BF16 values are exact in F32.
static void matmul_bf16_dot(float *out, const uint16_t *x, const void *w, const float *bias, int T, int n_in,
                            int ld_out, int j0, int j1) {
    const uint16_t *wb = w;
    const size_t ld_x = (size_t)panel_row_length(n_in);
    for (int j = j0; j < j1; j++) {
        for (int t = 0; t < T; t++) {
            float sum = 0.0f;
            for (int i = 0; i < n_in; i++) sum += bf16_to_f32(x[t * ld_x + i]) * bf16_to_f32(wb[(size_t)j * n_in + i]);
            out[(size_t)t * ld_out + j] = bias ? sum + bias[j] : sum;
        }
    }
}

// LayerNorm (Ba et al. 2016) over one row: out = (x − μ) / √(σ² + eps) · γ + β
static void layernorm(float *out, const float *x, const float *gamma, const float *beta, int n, float eps) {
    float mean = 0.0f;
    for (int i = 0; i < n; i++) mean += x[i];
    mean /= n;
    float var = 0.0f;
    for (int i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
    var /= n;
    float inv_std = 1.0f / sqrtf(var + eps);
    for (int i = 0; i < n; i++) out[i] = (x[i] - mean) * inv_std * gamma[i] + beta[i];
}

// RMSNorm (Zhang & Sennrich 2019) over one row: out = x / √(mean(x²) + eps) · γ
static void rmsnorm(float *out, const float *x, const float *gamma, int n, float eps) {
    float sum_sq = 0.0f;
    for (int i = 0; i < n; i++) sum_sq += x[i] * x[i];
    float inv_rms = 1.0f / sqrtf(sum_sq / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv_rms * gamma[i];
}

// Rotary embedding (Su et al. 2021, eq. 34) in the rotate-half layout: pair (i, i + half) turned by angle_i.
static void rope(float *x, const float *cos, const float *sin, int half) {
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        x[i] = a * cos[i] - b * sin[i];
        x[i + half] = b * cos[i] + a * sin[i];
    }
}

// SwiGLU (Shazeer 2020): SiLU(g) · u, SiLU(g) = g σ(g) = g / (1 + e^−g)
static void silu_mul(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

// GELU (Hendrycks & Gimpel 2016), tanh approximation: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
static void gelu_tanh(float *x, int n) {
    const float sqrt_2_over_pi = 0.7978845608028654f;
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + tanhf(sqrt_2_over_pi * (x[i] + 0.044715f * x[i] * x[i] * x[i])));
}

// GELU, exact: x Φ(x) = 0.5x(1 + erf(x/√2))
static void gelu_erf(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.7071067811865476f));
}

// softmax(x)_i = exp(x_i − m) / Σ_j exp(x_j − m), m = max x (subtracting m changes nothing but overflow)
static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    for (int i = 0; i < n; i++) x[i] /= sum;
}

static RowRange row_range(const float *x, int n) {
    RowRange r = {.max = -INFINITY, .min = INFINITY, .argmax = 0, .bad = false};
    for (int i = 0; i < n; i++) {
        if (x[i] > r.max) r.max = x[i], r.argmax = i;  // strictly greater: the first of equal values stays
        if (x[i] < r.min) r.min = x[i];
        if (!(x[i] < INFINITY)) r.bad = true;  // NaN compares false, +inf is not below itself
    }
    return r;
}

// expf(−inf) = 0 exactly, as the contract asks.
static double exp_sum(float *out, const float *x, int n, float shift, float divisor) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += out[i] = expf((x[i] - shift) / divisor);
    return sum;
}

// Scaled dot-product attention (Vaswani et al. 2017, eq. 1) for n queries sharing one key/value head, one row
// after another, row g over the positions it sees (its first S[g], then S[g] + j for each bit j of tree[g]), in
// order:
//   out[g] = Σ_{s seen} a_s V[s],  a = softmax(scale · q[g]·K[s])      (K given transposed: K[s, i] = kt[i · ld_k + s])
static void attention(float *out, int ld_out, const float *q, int ld_q, const int *S, const uint64_t *tree, int n,
                      const float *kt, int ld_k, const float *v, int hd, float scale, float *scores, int ld_s) {
    (void)ld_s;  // one row of scores at a time, the seen positions' side by side
    for (int g = 0; g < n; g++) {
        const float *qg = q + (size_t)g * ld_q;
        float *og = out + (size_t)g * ld_out;
        const uint64_t bits = tree ? tree[g] : 0;
        const int span = attention_span(S[g], bits);
        int seen = 0;
        for (int s = 0; s < span; s++) {
            if (!attention_sees(S[g], bits, s)) continue;
            float dot = 0.0f;
            for (int i = 0; i < hd; i++) dot += qg[i] * kt[(size_t)i * ld_k + s];
            scores[seen++] = dot * scale;
        }
        softmax(scores, seen);
        memset(og, 0, sizeof(float) * hd);
        for (int s = 0, j = 0; s < span; s++) {
            if (!attention_sees(S[g], bits, s)) continue;
            for (int i = 0; i < hd; i++) og[i] += scores[j] * v[(size_t)s * hd + i];
            j++;
        }
    }
}

static void add(float *out, const float *x, int n) {
    for (int i = 0; i < n; i++) out[i] += x[i];
}

const Kernels kernels_scalar = {
    .name = "scalar",
    .matmul = {[WEIGHT_F32] = matmul_f32, [WEIGHT_F16] = matmul_f16, [WEIGHT_BF16] = matmul_bf16},
    .matmul_bf16_dot = matmul_bf16_dot,
    .matmul_q8 = q8_matmul_reference,
    .matmul_q4 = q4_matmul_reference,
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
    .attention = attention,
    .add = add,
    // The reference stays plain C all the way (SPECDEC_ISA=scalar runs the whole model on it).
    .blas_min_rows = 0,
};
