#include "speculative/sampling.h"

#include "kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = 8 };  // independent running sums: 8 dependency chains in flight instead of one

int sampling_greedy(const Kernels *kernels, const float *logits, int V) {
    const RowRange range = kernels->row_range(logits, V);
    if (range.bad || !(range.max > -INFINITY)) return -1;  // NaN, +inf, or every logit −inf
    return range.argmax;
}

// The 8 lanes' partial sums added in one fixed tree.
static double lanes_total(const double *part) {
    return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

double sampling_sum(const double *x, int n) {
    double part[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) part[j] += x[i + j];
    for (; i < n; i++) part[0] += x[i];
    return lanes_total(part);
}

double sampling_top_probability(const Kernels *kernels, const float *logits, int V, float *scratch) {
    return 1.0 / kernels->exp_sum(scratch, logits, V, kernels->row_range(logits, V).max, 1.0f);
}

// ---- the adjusted distribution ----------------------------------------------------------------------------

// A token that top-k / top-p may keep; they rank the tokens by logit, the lower id first on a tie.
struct SamplingCandidate {
    double p;
    float logit;
    int id;
};

static int by_rank(const void *a, const void *b) {
    const SamplingCandidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id - y->id;
}

// Whether top-k (a k below V) and top-p (below 1) cut anything: each needs its scratch only then.
static bool cuts_top_k(const SamplingParams *params, int V) { return params->top_k > 0 && params->top_k < V; }
static bool cuts_top_p(const SamplingParams *params) { return params->top_p < 1.0f; }

int sampler_init(Sampler *s, const SamplingParams *params, int V, const Kernels *kernels, Err *err) {
    *s = (Sampler){.params = *params, .V = V, .kernels = kernels};
    if (!(params->temperature >= 0.0f && params->temperature < INFINITY))
        return err_fmt(err, "sampling: the temperature must be a finite number >= 0, got %g", params->temperature);
    if (params->top_k < 0) return err_fmt(err, "sampling: top-k must be >= 0 (0 = off), got %d", params->top_k);
    if (!(params->top_p > 0.0f && params->top_p <= 1.0f))
        return err_fmt(err, "sampling: top-p must be in (0, 1] (1 = off), got %g", params->top_p);
    if (!(params->min_p >= 0.0f && params->min_p <= 1.0f))
        return err_fmt(err, "sampling: min-p must be in [0, 1] (0 = off), got %g", params->min_p);
    if (V < 1) return err_fmt(err, "sampling: the vocabulary is empty");
    // The scratch these settings use, and no more: greedy adjusting uses none (a sampler per thread adds up).
    const bool sampled = params->temperature > 0.0f, top_k = sampled && cuts_top_k(params, V);
    const bool ranked = top_k || (sampled && cuts_top_p(params));
    if (sampled) s->exponentials = malloc(sizeof(float) * (size_t)V);
    if (top_k) s->selection = malloc(sizeof(float) * (size_t)V);
    if (ranked) s->candidates = malloc(sizeof(SamplingCandidate) * (size_t)V);
    if ((sampled && !s->exponentials) || (top_k && !s->selection) || (ranked && !s->candidates)) {
        sampler_free(s);
        return err_fmt(err, "sampling: out of memory for the scratch of %d tokens", V);
    }
    return 0;
}

void sampler_free(Sampler *s) {
    free(s->exponentials);
    free(s->selection);
    free(s->candidates);
    s->exponentials = s->selection = NULL;
    s->candidates = NULL;
}

static void swap_floats(float *a, float *b) {
    float t = *a;
    *a = *b;
    *b = t;
}

// The k-th largest of x[0..n), 1 ≤ k ≤ n, reordering x: quickselect (Hoare 1961) with a three-way partition
// (Dijkstra's Dutch national flag), so that runs of equal values — ties, an all-equal row — cost one pass.
static float kth_largest(float *x, int n, int k) {
    int lo = 0, hi = n;  // the k-th largest is in x[lo..hi)
    for (;;) {
        const float pivot = x[lo + (hi - lo) / 2];
        int above = lo, i = lo, below = hi;  // x[lo..above) > pivot, x[above..i) == pivot, x[below..hi) < pivot
        while (i < below) {
            if (x[i] > pivot) swap_floats(&x[above++], &x[i++]);
            else if (x[i] < pivot) swap_floats(&x[i], &x[--below]);
            else i++;
        }
        if (k - 1 < above) hi = above;
        else if (k - 1 < below) return pivot;
        else lo = below;
    }
}

// The tokens of logit ≥ threshold, ranked (by_rank) into s->candidates; returns how many.
static int rank_candidates(Sampler *s, const double *probs, const float *logits, double threshold) {
    int n = 0;
    for (int i = 0; i < s->V; i++)
        if (logits[i] >= threshold) s->candidates[n++] = (SamplingCandidate){probs[i], logits[i], i};
    qsort(s->candidates, (size_t)n, sizeof *s->candidates, by_rank);
    return n;
}

// 1b. Min-p: the tokens of probability below `threshold` get 0, the others are renormalised. (Those removed are the
// least likely: top-k and top-p, which rank by logit, find them last, and keep them with probability 0.)
static void keep_likely(double *probs, int V, double threshold) {
    for (int i = 0; i < V; i++)
        if (probs[i] < threshold) probs[i] = 0.0;
    const double inv_kept = 1.0 / sampling_sum(probs, V);
    for (int i = 0; i < V; i++) probs[i] *= inv_kept;
}

int sampler_adjust(Sampler *s, double *probs, const float *logits) {
    const int V = s->V;
    const SamplingParams *params = &s->params;
    if (params->temperature <= 0.0f) {  // the one-hot limit
        const int token = sampling_greedy(s->kernels, logits, V);
        if (token < 0) return -1;
        memset(probs, 0, sizeof(double) * V);
        probs[token] = 1.0;
        return 0;
    }
    const RowRange range = s->kernels->row_range(logits, V);
    const float max = range.max;
    if (range.bad || !(max > -INFINITY)) return -1;  // NaN, +inf, or every logit −inf
    // 1. Temperature: p_i = e_i / Σ_j e_j, e_i = exp((logit_i − max) / T), the exponentials in floats (the kernel's
    // exp: approximate) and their sum and the quotients in doubles. (logit − max) / T ≤ 0 cannot overflow upwards,
    // and an exponent of −inf (a masked token, or one so far below the max that the difference overflows) gets
    // exactly 0.
    const float t = params->temperature;
    const double inv_sum = 1.0 / s->kernels->exp_sum(s->exponentials, logits, V, max, t);
    s->kernels->scale_to_doubles(probs, s->exponentials, V, inv_sum);
    if (params->min_p > 0.0f) keep_likely(probs, V, params->min_p * probs[range.argmax]);
    const bool top_k = cuts_top_k(params, V), top_p = cuts_top_p(params);
    if (!top_k && !top_p) return 0;

    // 2. Top-k: the candidates are the tokens of logit ≥ the k-th largest.
    // 3. Top-p alone: only tokens of probability ≥ ε = (1 − top_p) / 2V can be in the nucleus (the others hold
    // less than V·ε = (1 − top_p) / 2 of the mass, so the tokens above them already pass top_p): p ≥ ε means
    // (logit − max) / T ≥ log(ε / p_max), and a little slack (e^−0.01) covers the kernel's rounding. Should the
    // candidates still fall short of top_p (rounding, top_p within ~1e-7 of 1), every token is ranked.
    int n;
    if (top_k) {
        memcpy(s->selection, logits, sizeof(float) * V);
        n = rank_candidates(s, probs, logits, kth_largest(s->selection, V, params->top_k));
    } else {
        const double p_max = probs[range.argmax];
        n = rank_candidates(s, probs, logits, max + t * (log((1.0 - params->top_p) / (2.0 * V) / p_max) - 0.01));
    }
    const SamplingCandidate *c = s->candidates;
    double kept = 1.0;  // the mass top-p renormalises over: all of it, or what top-k kept
    if (top_k) {
        kept = 0.0;
        for (int i = 0; i < n; i++) kept += c[i].p;
    }
    int keep = n;
    if (top_p) {
        const double target = params->top_p * kept;
        double before = 0.0;  // the mass ranked before candidate `keep`
        for (keep = 0; keep < n && before < target; keep++) before += c[keep].p;
        if (before < target && !top_k && n < V) {
            n = rank_candidates(s, probs, logits, -INFINITY);
            for (keep = 0, before = 0.0; keep < n && before < target; keep++) before += c[keep].p;
        }
        kept = before;
    }
    memset(probs, 0, sizeof(double) * V);
    for (int i = 0; i < keep; i++) probs[c[i].id] = c[i].p / kept;
    return 0;
}

// ---- random numbers ----------------------------------------------------------------------------------------

static const uint64_t GOLDEN_GAMMA = 0x9E3779B97F4A7C15ULL;  // 2^64 / φ, SplitMix64's increment

// SplitMix64's finaliser (a variant of MurmurHash3's fmix64): a bijection of 64-bit words that avalanches.
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t position_key(uint64_t seed, uint64_t position) { return mix64(seed + GOLDEN_GAMMA * (position + 1)); }

static uint64_t stream_bits(uint64_t key, uint64_t stream) { return mix64(key + GOLDEN_GAMMA * (stream + 1)); }

uint64_t random_bits(uint64_t seed, uint64_t position, uint64_t stream) {
    return stream_bits(position_key(seed, position), stream);
}

double random_uniform(uint64_t seed, uint64_t position, uint64_t stream) {
    return (double)(random_bits(seed, position, stream) >> 11) * 0x1.0p-53;
}

static double open_uniform(uint64_t bits) { return ((double)(bits >> 11) + 0.5) * 0x1.0p-53; }

double random_open_uniform(uint64_t seed, uint64_t position, uint64_t stream) {
    return open_uniform(random_bits(seed, position, stream));
}

// A token loses the race when E_x / p(x) ≥ the best so far; as E_x = −log U_x ≥ 1 − U_x, it surely loses when
// (1 − U_x) ≥ best · p(x), which costs no logarithm. The factor (1 + 2^−40) keeps that test on the safe side of
// the rounding in −log and the division, so the skipped tokens are exactly ones the full race would not pick:
// the result is that of computing every E_x / p(x). Most tokens are skipped once a likely token has run.
int sampling_gumbel_max(const double *probs, int V, uint64_t seed, uint64_t position) {
    const uint64_t key = position_key(seed, position);
    const double margin = 1.0 + 0x1.0p-40;
    double best_time = INFINITY;
    int best = -1;
    for (int x = 0; x < V; x++) {
        if (!(probs[x] > 0.0)) continue;
        const double u = open_uniform(stream_bits(key, (uint64_t)x));
        if (1.0 - u >= best_time * probs[x] * margin) continue;
        const double time = -log(u) / probs[x];
        if (time < best_time) best_time = time, best = x;
    }
    return best;
}

// The CDF by blocks, so that the one chain of dependent additions a draw needs is short: a block's mass is
// sampling_sum's 8 lanes over its DRAW_BLOCK tokens (or more, so that there are at most DRAW_BLOCKS of them), the
// total is the blocks' masses added in order, the walk adds them again until u·total falls inside a block, and only
// that block is walked token by token, from the mass before it. One token after another all the way (V dependent
// additions: 56 µs at V = 128256) gave the same tokens but where u·total lies within rounding of a boundary. Should
// rounding leave u·total past the end of its block's walk, the next blocks are walked; past everything, the last
// token of positive probability is drawn.
enum { DRAW_BLOCK = 64, DRAW_BLOCKS = 4096 };

int sampling_draw(const double *probs, int V, double u) {
    const int block = V <= DRAW_BLOCK * DRAW_BLOCKS ? DRAW_BLOCK : (V + DRAW_BLOCKS - 1) / DRAW_BLOCKS;
    const int n_blocks = (V + block - 1) / block;
    double mass[DRAW_BLOCKS], total = 0.0;
    for (int b = 0; b < n_blocks; b++) {
        const int begin = b * block, n = V - begin < block ? V - begin : block;
        total += mass[b] = sampling_sum(probs + begin, n);
    }
    const double target = u * total;
    double before = 0.0;  // the mass of the blocks before block b
    for (int b = 0; b < n_blocks; b++) {
        if (target < before + mass[b]) {
            const int end = (b + 1) * block < V ? (b + 1) * block : V;
            double cumulative = before;
            for (int i = b * block; i < end; i++) {
                if (probs[i] <= 0.0) continue;
                cumulative += probs[i];
                if (target < cumulative) return i;
            }
        }
        before += mass[b];
    }
    int last = V - 1;  // rounding left u·total at the very top
    while (last > 0 && !(probs[last] > 0.0)) last--;
    return last;
}
