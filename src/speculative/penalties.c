// penalties.c — see penalties.h.
#include "speculative/penalties.h"

#include <math.h>
#include <stdlib.h>

const Penalties PENALTIES_OFF = {.repetition = 1.0f, .presence = 0.0f, .frequency = 0.0f};

int penalties_check(const Penalties *p, Err *err) {
    if (!(p->repetition > 0.0f && p->repetition < INFINITY))
        return err_fmt(err, "sampling: the repetition penalty must be a finite number > 0 (1 = off), got %g",
                       p->repetition);
    if (!isfinite(p->presence)) return err_fmt(err, "sampling: the presence penalty must be finite, got %g", p->presence);
    if (!isfinite(p->frequency))
        return err_fmt(err, "sampling: the frequency penalty must be finite, got %g", p->frequency);
    return 0;
}

bool penalties_on(const Penalties *p) { return p->repetition != 1.0f || p->presence != 0.0f || p->frequency != 0.0f; }

int penalizer_init(Penalizer *z, const Penalties *params, int V, Err *err) {
    *z = (Penalizer){.params = *params, .V = V};
    if (penalties_check(params, err)) return -1;
    z->count = calloc((size_t)V, sizeof *z->count);
    z->seen = calloc((size_t)V, sizeof *z->seen);
    if (!z->count || !z->seen) {
        penalizer_free(z);
        return err_fmt(err, "sampling: out of memory for the penalties' scratch of %d tokens", V);
    }
    return 0;
}

void penalizer_free(Penalizer *z) {
    free(z->count);
    free(z->seen);
    z->count = NULL;
    z->seen = NULL;
}

// The history's i-th token (the context's, then the path's): an id of these logits, or −1.
static int history_token(const Penalizer *z, const History *h, int i) {
    const int x = i < h->n ? h->context[i] : h->path[i - h->n];
    return x >= 0 && x < z->V ? x : -1;
}

// One token's logit under the penalties (penalties.h, steps 1–3, in vLLM's order), given its count in the output.
static float penalised(const Penalties *p, float logit, int count) {
    logit = logit > 0.0f ? logit / p->repetition : logit * p->repetition;
    logit -= p->frequency * (float)count;
    if (count > 0) logit -= p->presence;
    return logit;
}

void penalize(Penalizer *z, float *logits, const History *h) {
    const int n = h->n + h->n_path;
    for (int i = h->n_prompt; i < n; i++) {  // each token's occurrences in the output
        const int x = history_token(z, h, i);
        if (x >= 0) z->count[x]++;
    }
    for (int i = 0; i < n; i++) {  // each token of the history penalised once
        const int x = history_token(z, h, i);
        if (x < 0 || z->seen[x]) continue;
        logits[x] = penalised(&z->params, logits[x], z->count[x]);
        z->seen[x] = 1;
    }
    for (int i = 0; i < n; i++) {  // the scratch cleared for the next call
        const int x = history_token(z, h, i);
        if (x < 0) continue;
        z->count[x] = 0;
        z->seen[x] = 0;
    }
}
