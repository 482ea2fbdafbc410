#include "speculative/sampling.h"

#include "kernels.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum { LANES = 8 };  // independent running sums / maxima: 8 dependency chains in flight instead of one

// Lane j scans logits j, j + 8, j + 16, ...; the first maximum of each lane is kept, then the lowest index
// among the lanes' maxima wins.
int sampling_argmax(const float *logits, int V) {
    float best_value[LANES];
    int best[LANES];
    for (int j = 0; j < LANES; j++) best_value[j] = -INFINITY, best[j] = V;
    int i = 0;
    for (; i + LANES <= V; i += LANES)
        for (int j = 0; j < LANES; j++)
            if (logits[i + j] > best_value[j]) best_value[j] = logits[i + j], best[j] = i + j;
    for (; i < V; i++)
        if (logits[i] > best_value[0]) best_value[0] = logits[i], best[0] = i;
    int winner = 0;
    for (int j = 1; j < LANES; j++)
        if (best_value[j] > best_value[winner] || (best_value[j] == best_value[winner] && best[j] < best[winner]))
            winner = j;
    return best[winner] < V ? best[winner] : 0;  // every logit −inf: index 0, as a plain scan would give
}

double sampling_sum(const double *x, int n) {
    double part[LANES] = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) part[j] += x[i + j];
    for (; i < n; i++) part[0] += x[i];
    return ((part[0] + part[4]) + (part[1] + part[5])) + ((part[2] + part[6]) + (part[3] + part[7]));
}

// A token and its probability, sorted most likely first (the lower id first on a tie).
typedef struct {
    double p;
    int id;
} Candidate;

static int by_probability_desc(const void *a, const void *b) {
    const Candidate *x = a, *y = b;
    if (x->p != y->p) return x->p < y->p ? 1 : -1;
    return x->id - y->id;
}

double sampling_top_probability(const float *logits, int V) {
    const float max = logits[sampling_argmax(logits, V)];
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += expf(logits[i] - max);
    return 1.0 / sum;
}

int sampling_adjust(double *probs, const float *logits, int V, const SamplingParams *params) {
    // NaN compares false both ways, so it is caught as "not below +inf".
    int bad = 0;
    for (int i = 0; i < V; i++) bad |= !(logits[i] < INFINITY);
    if (bad) return -1;
    if (params->temperature <= 0.0f) {  // the one-hot limit
        memset(probs, 0, sizeof(double) * V);
        probs[sampling_argmax(logits, V)] = 1.0;
        return 0;
    }
    const char *why;
    const Kernels *k = kernels_select(&why);
    float *scaled = malloc(sizeof(float) * (size_t)V);
    if (!scaled) abort();
    const float inv_t = 1.0f / params->temperature;
    for (int i = 0; i < V; i++) scaled[i] = logits[i] * inv_t;
    (k ? k : &kernels_scalar)->softmax(scaled, V);
    for (int i = 0; i < V; i++) probs[i] = scaled[i];
    const double inv_sum = 1.0 / sampling_sum(probs, V);
    for (int i = 0; i < V; i++) probs[i] *= inv_sum;
    free(scaled);
    if ((params->top_k <= 0 || params->top_k >= V) && params->top_p >= 1.0f) return 0;

    // Candidates in descending order; keep a prefix of them (top-k, then top-p over what top-k kept, as
    // transformers' warpers do). With top-p alone, only tokens of probability ≥ ε = (1 − top_p) / 2V can be in the
    // nucleus — the others hold less than V·ε = (1 − top_p) / 2 of the mass — so only those are sorted.
    const bool top_k = params->top_k > 0 && params->top_k < V;
    const double smallest = top_k ? 0.0 : (1.0 - params->top_p) / (2.0 * V);
    Candidate *c = malloc(sizeof(Candidate) * (size_t)V);
    if (!c) abort();
    int n_c = 0;
    for (int i = 0; i < V; i++)
        if (probs[i] >= smallest) c[n_c++] = (Candidate){probs[i], i};
    qsort(c, (size_t)n_c, sizeof *c, by_probability_desc);
    int keep = n_c;
    if (top_k && params->top_k < n_c) {
        keep = params->top_k;
        while (keep < n_c && c[keep].p == c[keep - 1].p) keep++;  // ties at the k-th value stay
    }
    double kept = 0.0;
    for (int n = 0; n < keep; n++) kept += c[n].p;
    if (params->top_p < 1.0f) {
        double mass = 0.0, target = params->top_p * kept;
        int n = 0;
        while (n < keep && mass < target) mass += c[n++].p;
        keep = n;
        kept = mass;
    }
    memset(probs, 0, sizeof(double) * V);
    for (int n = 0; n < keep; n++) probs[c[n].id] = c[n].p / kept;
    free(c);
    return 0;
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(Rng *rng, uint64_t seed) {
    for (int i = 0; i < 4; i++) {  // splitmix64
        uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        rng->s[i] = z ^ (z >> 31);
    }
}

uint64_t rng_next(Rng *rng) {
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double rng_uniform(Rng *rng) { return (double)(rng_next(rng) >> 11) * 0x1.0p-53; }

int sampling_draw(const double *probs, int V, double u) {
    double target = u * sampling_sum(probs, V), cumulative = 0.0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (probs[i] <= 0.0) continue;
        cumulative += probs[i];
        last = i;
        if (target < cumulative) return i;
    }
    return last;  // rounding left u·total at the very top
}
