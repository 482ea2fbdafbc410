// sampling_reference.c — see sampling_reference.h.
#include "sampling_reference.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    float logit;
    int id;
} Ranked;

// Ascending: the least likely first; on equal logits the higher id first, so that the lower id ranks as the more
// likely (sampling.h's tie rule).
static int ascending(const void *a, const void *b) {
    const Ranked *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? -1 : 1;
    return y->id - x->id;
}

int reference_adjust(double *probs, const float *logits, int V, const SamplingParams *params, double *margin) {
    if (margin) *margin = INFINITY;
    int finite = 0;
    for (int i = 0; i < V; i++) {
        if (isnan(logits[i]) || logits[i] == INFINITY) return -1;
        finite += logits[i] > -INFINITY;
    }
    if (finite == 0) return -1;
    Ranked *r = malloc(sizeof(Ranked) * V);
    double *w = malloc(sizeof(double) * V);
    for (int i = 0; i < V; i++) r[i] = (Ranked){logits[i], i};
    qsort(r, V, sizeof *r, ascending);  // r[V − 1] is the argmax, the lowest id among equals
    memset(probs, 0, sizeof(double) * V);
    if (params->temperature == 0) {
        probs[r[V - 1].id] = 1.0;
        free(r), free(w);
        return 0;
    }
    // Temperature: w ∝ exp(logit / T), in double.
    const double max = r[V - 1].logit;
    double total = 0;
    for (int i = 0; i < V; i++) total += w[i] = exp(((double)logits[i] - max) / params->temperature);
    for (int i = 0; i < V; i++) w[i] /= total;
    // Min-p (vLLM's, after the temperature): the tokens of probability below min_p times the top one's go.
    int first = 0;  // r[first..V) is what survives
    if (params->min_p > 0) {
        const double threshold = params->min_p * w[r[V - 1].id];
        while (w[r[first].id] < threshold) first++;
        for (int j = 0; j < V && margin; j++)
            if (w[r[j].id] > 0 && r[j].logit != max) *margin = fmin(*margin, fabs(w[r[j].id] / threshold - 1) * 1e-2);
    }
    // Top-k: the ranked tokens from the k-th largest logit up (all ties at the k-th value).
    if (params->top_k > 0 && params->top_k < V) {
        const float kth = r[V - params->top_k].logit;
        while (r[first].logit < kth) first++;
    }
    // Top-p over the survivors renormalised: remove, from the least likely up, while cumulative ≤ 1 − top_p.
    if (params->top_p < 1) {
        double kept = 0, cumulative = 0, worst = INFINITY;
        for (int j = first; j < V; j++) kept += w[r[j].id];
        int cut = first;
        for (int j = first; j < V - 1; j++) {
            cumulative += w[r[j].id] / kept;
            double distance = fabs(cumulative - (1.0 - params->top_p));
            worst = distance < worst ? distance : worst;
            if (cumulative <= 1.0 - params->top_p) cut = j + 1;
        }
        first = cut;
        if (margin) *margin = worst;
    }
    double kept = 0;
    for (int j = first; j < V; j++) kept += w[r[j].id];
    for (int j = first; j < V; j++) probs[r[j].id] = w[r[j].id] / kept;
    free(r), free(w);
    return 0;
}

void reference_penalize(float *logits, int V, const int *tokens, int n, int n_prompt, const Penalties *p) {
    for (int x = 0; x < V; x++) {
        int seen = 0, count = 0;
        for (int i = 0; i < n; i++) {
            seen += tokens[i] == x;
            count += tokens[i] == x && i >= n_prompt;
        }
        if (!seen) continue;
        logits[x] = logits[x] > 0 ? logits[x] / p->repetition : logits[x] * p->repetition;
        logits[x] -= p->frequency * (float)count;
        logits[x] -= count > 0 ? p->presence : 0.0f;
    }
}
