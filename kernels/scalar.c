// scalar.c — the reference kernels: plain C, one obvious loop per formula. Every SIMD variant is tested against
// these on random inputs (tests/kernels/test_kernels.c), and SPECDEC_ISA=scalar runs the whole model on them.
#include <math.h>
#include <string.h>

#include "kernels.h"

// ---- The canonical order (docs/kernels.md, "One order of arithmetic") --------------------------------------
//
// Every sum of many terms is kept as SUM_LANES = 8 partial sums, term i going to sum i mod 8 in increasing i (so
// that an 8-lane register, two halves of a 16-lane one or two 4-lane ones hold them lane for lane), the terms
// past the end padded with zeros (to a multiple of 16 in a matmul's chunk, of 8 elsewhere); then the 8 sums are
// combined by one tree: (l, l + 4), then (l, l + 2), then (l, l + 1). Exponentials, GELU and SiLU go through one
// polynomial each, written below operation for operation (fmaf where the SIMD variants fuse). This file is that order written out; every SIMD variant reproduces it bit for
// bit (tests/kernels/test_kernels.c compares with memcmp).

// s[0..7] combined by the tree.
static float combine_lanes(const float s[SUM_LANES]) {
    const float u0 = s[0] + s[4], u1 = s[1] + s[5], u2 = s[2] + s[6], u3 = s[3] + s[7];
    return (u0 + u2) + (u1 + u3);
}

// One weight element as a float. Rows are 64-byte aligned, so W is read through its own type.
static float weight_at(const void *w, WeightType type, size_t index) {
    switch (type) {
    case WEIGHT_F16: return f16_to_f32(((const uint16_t *)w)[index]);
    case WEIGHT_BF16: return bf16_to_f32(((const uint16_t *)w)[index]);
    default: return ((const float *)w)[index];
    }
}

// out[t, j] = bias[j] + Σ_i x[t, i] · W[j, i]      out: [T, ld_out]  x: [T, ld_x]  W: [n_out, n_in]
// In the canonical order: the inputs in chunks of MATMUL_CHUNK, each chunk's products fused into the 8 partial
// sums (the chunk padded with zero products to a multiple of 16) and combined; the chunks' values added in turn,
// then the bias.
static void matmul(float *out, const float *x, const void *w, WeightType type, const float *bias, int T,
                   int n_in, int ld_x, int ld_out, int j0, int j1) {
    for (int j = j0; j < j1; j++) {
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * ld_x;
            float total = 0.0f;
            for (int c0 = 0; c0 < n_in; c0 += MATMUL_CHUNK) {
                const int c1 = c0 + MATMUL_CHUNK < n_in ? c0 + MATMUL_CHUNK : n_in;
                const int padded = c0 + panel_row_length(c1 - c0);
                float s[SUM_LANES] = {0};
                for (int i = c0; i < padded; i++) {
                    const float xi = i < c1 ? xt[i] : 0.0f, wi = i < c1 ? weight_at(w, type, (size_t)j * n_in + i) : 0.0f;
                    s[i % SUM_LANES] = fmaf(xi, wi, s[i % SUM_LANES]);
                }
                total = c0 == 0 ? combine_lanes(s) : total + combine_lanes(s);
            }
            out[(size_t)t * ld_out + j] = bias ? total + bias[j] : total;
        }
    }
}

DEFINE_MATMUL_PER_WEIGHT_TYPE(matmul)

// The same for BF16 weights and activations rounded to BF16 (kernels.h: bf16_round_rows), x: [T, ld_x], ld_x =
// panel_row_length(n_in). Products of two BF16 values are exact in F32. Not in the canonical order: vdpbf16ps
// sums each lane's two products in its own way (docs/kernels.md), so this is a reference within a bound only.
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

// Σ_i x_i (squares: Σ_i x_i², each a fused multiply-add), in the canonical order, padded to a multiple of 8.
static float sum_of(const float *x, int n, bool squares) {
    float s[SUM_LANES] = {0};
    for (int i = 0; i < (n + SUM_LANES - 1) / SUM_LANES * SUM_LANES; i++) {
        const float v = i < n ? x[i] : 0.0f;
        s[i % SUM_LANES] = squares ? fmaf(v, v, s[i % SUM_LANES]) : s[i % SUM_LANES] + v;
    }
    return combine_lanes(s);
}

// LayerNorm (Ba et al. 2016) over one row: out = (x − μ) / √(σ² + eps) · γ + β
static void layernorm(float *out, const float *x, const float *gamma, const float *beta, int n, float eps) {
    const float mean = sum_of(x, n, false) / n;
    float s[SUM_LANES] = {0};  // Σ (x − μ)², padded as sum_of is
    for (int i = 0; i < (n + SUM_LANES - 1) / SUM_LANES * SUM_LANES; i++) {
        const float d = i < n ? x[i] - mean : 0.0f;
        s[i % SUM_LANES] = fmaf(d, d, s[i % SUM_LANES]);
    }
    const float inv_std = 1.0f / sqrtf(combine_lanes(s) / n + eps);
    for (int i = 0; i < n; i++) out[i] = fmaf((x[i] - mean) * inv_std, gamma[i], beta[i]);
}

// RMSNorm (Zhang & Sennrich 2019) over one row: out = x / √(mean(x²) + eps) · γ
static void rmsnorm(float *out, const float *x, const float *gamma, int n, float eps) {
    const float inv_rms = 1.0f / sqrtf(sum_of(x, n, true) / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv_rms * gamma[i];
}

// Rotary embedding (Su et al. 2021, eq. 34) in the rotate-half layout: pair (i, i + half) turned by angle_i.
static void rope(float *x, const float *cos, const float *sin, int half) {
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        x[i] = fmaf(a, cos[i], -(b * sin[i]));
        x[i + half] = fmaf(b, cos[i], a * sin[i]);
    }
}

// exp(x) = 2^n · e^r with n = round(x / ln 2), r = x − n ln 2 ∈ [−ln2/2, ln2/2] (ln 2 in two parts, the first's
// product with n exact); e^r by its degree-6 Taylor polynomial in Horner's form (relative error < 2e-7). x is
// clamped to [−87.3, 88] so that n ∈ [−126, 127] and 2^n is a normal float, built by writing n + 127 into the
// exponent field: below −87.3 the result stays at e^−87.3 ≈ 1.2e-38 instead of going subnormal. The SIMD
// variants' exp_ps, operation for operation.
static float exp_canonical(float x) {
    x = fmaxf(fminf(x, 88.0f), -87.3f);
    const float n = nearbyintf(x * 1.4426950408889634f);
    float r = fmaf(-n, 0.693145751953125f, x);
    r = fmaf(-n, 1.428606765330187e-06f, r);
    float p = 1.0f / 720;
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    const uint32_t two_n_bits = (uint32_t)((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &two_n_bits, sizeof two_n);
    return p * two_n;
}

// tanh(y) = 1 − 2 / (e^{2y} + 1)
static float tanh_canonical(float y) { return 1.0f - 2.0f / (exp_canonical(y + y) + 1.0f); }

// erf(x) by Abramowitz & Stegun 7.1.26: 1 − (a1 t + … + a5 t⁵) e^{−x²}, t = 1 / (1 + p|x|); |error| ≤ 1.5e-7;
// the sign bit of x or-ed into the result's (as the SIMD variants do: near 0 the sum is −1e-9 or so, which stays
// negative).
static float erf_canonical(float x) {
    const float ax = fabsf(x), t = 1.0f / fmaf(0.3275911f, ax, 1.0f);
    float poly = 1.061405429f;
    poly = fmaf(poly, t, -1.453152027f);
    poly = fmaf(poly, t, 1.421413741f);
    poly = fmaf(poly, t, -0.284496736f);
    poly = fmaf(poly, t, 0.254829592f);
    poly = poly * t;
    const float y = fmaf(-poly, exp_canonical((0.0f - ax) * ax), 1.0f);
    uint32_t y_bits, x_bits;
    memcpy(&y_bits, &y, sizeof y);
    memcpy(&x_bits, &x, sizeof x);
    y_bits |= x_bits & 0x80000000u;
    float signed_y;
    memcpy(&signed_y, &y_bits, sizeof signed_y);
    return signed_y;
}

// SwiGLU (Shazeer 2020): SiLU(g) · u, SiLU(g) = g σ(g) = g / (1 + e^−g)
static void silu_mul(float *out, const float *gate, const float *up, int n) {
    for (int i = 0; i < n; i++) out[i] = gate[i] / (1.0f + exp_canonical(0.0f - gate[i])) * up[i];
}

// GELU (Hendrycks & Gimpel 2016), tanh approximation: 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
static void gelu_tanh(float *x, int n) {
    for (int i = 0; i < n; i++) {
        const float v = x[i], inner = 0.7978845608028654f * fmaf(0.044715f * v, v * v, v);
        x[i] = 0.5f * v * (1.0f + tanh_canonical(inner));
    }
}

// GELU, exact: x Φ(x) = 0.5x(1 + erf(x/√2))
static void gelu_erf(float *x, int n) {
    for (int i = 0; i < n; i++) x[i] = 0.5f * x[i] * (1.0f + erf_canonical(x[i] * 0.7071067811865476f));
}

// softmax(x)_i = exp(x_i − m) / Σ_j exp(x_j − m), m = max x (subtracting m changes nothing but overflow); the
// division as a product by 1 / Σ.
static void softmax(float *x, int n) {
    float max = x[0];
    for (int i = 1; i < n; i++) max = x[i] > max ? x[i] : max;
    for (int i = 0; i < n; i++) x[i] = exp_canonical(x[i] - max);
    const float inv = 1.0f / sum_of(x, n, false);
    for (int i = 0; i < n; i++) x[i] *= inv;
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

// out_i = exp_canonical((x_i − shift) / divisor), 0 exactly where the quotient is −inf; the sum of the out_i in
// doubles as 16 partial sums, out_i going to sum i mod 16, combined (p, p + 4) within each 8, then (p, p + 8),
// then (l, l + 2) and (l, l + 1): the order of the SIMD variants' double lanes.
static double exp_sum(float *out, const float *x, int n, float shift, float divisor) {
    double d[16] = {0};
    for (int i = 0; i < n; i++) {
        const float y = divisor == 1.0f ? x[i] - shift : (x[i] - shift) / divisor;  // (÷ 1 changes no bit)
        out[i] = y == -INFINITY ? 0.0f : exp_canonical(y);
        d[i % 16] += out[i];
    }
    double c[4];
    for (int l = 0; l < 4; l++) c[l] = (d[l] + d[l + 4]) + (d[l + 8] + d[l + 12]);
    return (c[0] + c[2]) + (c[1] + c[3]);
}

static void scale_to_doubles(double *out, const float *x, int n, double factor) {
    for (int i = 0; i < n; i++) out[i] = x[i] * factor;
}

// Scaled dot-product attention (Vaswani et al. 2017, eq. 1) for n queries sharing one key/value head, one row
// after another, row g over the positions it sees (its first S[g], then S[g] + j for each bit j of tree[g]), in
// order:
//   out[g] = Σ_{s seen} a_s V[s],  a = softmax(scale · q[g]·K[s])      (K given transposed: K[s, i] = kt[i · ld_k + s])
// In the canonical order: a score is its dot product fused in order of i, times scale; out[g] fuses a_s V[s] in
// order of s over the whole span, a position the row does not see with a weight of 0 (as the SIMD variants do).
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
            for (int i = 0; i < hd; i++) dot = fmaf(qg[i], kt[(size_t)i * ld_k + s], dot);
            scores[seen++] = dot * scale;
        }
        softmax(scores, seen);
        memset(og, 0, sizeof(float) * hd);
        for (int s = 0, j = 0; s < span; s++) {
            const float a = attention_sees(S[g], bits, s) ? scores[j++] : 0.0f;
            for (int i = 0; i < hd; i++) og[i] = fmaf(a, v[(size_t)s * hd + i], og[i]);
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
    .matmul_q8_0 = q8_0_matmul_reference,
    .matmul_q4_0 = q4_0_matmul_reference,
    .matmul_q5 = {q5_0_matmul_reference, q5_1_matmul_reference, q4_1_matmul_reference},
    .matmul_k = {q4_k_matmul_reference, q5_k_matmul_reference, q6_k_matmul_reference},
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
