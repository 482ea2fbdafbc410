// probe.c — the thread count of a model's fastest decode steps (see probe.h).
#include "model/probe.h"

#include <stdlib.h>

#include "base/clock.h"

enum { PROBE_CONTEXT = 16, PROBE_STEPS = 8, PROBE_ROUNDS = 7, PROBE_MAX_COUNTS = 32 };

int probe_choose_threads(const int *counts, const double *median_seconds, int n) {
    int chosen = 0;
    for (int i = 1; i < n; i++)
        if (median_seconds[i] <= PROBE_MARGIN * median_seconds[chosen]) chosen = i;
    return counts[chosen];
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The median of v[0..n), n odd, reordering v.
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

// Seconds of `steps` decode steps of m after `context` cached positions, on m->max_threads.
static double steps_seconds(Model *m, KVCache *cache, const int *tokens, int context, int steps, float *logits,
                            Err *err, int *rc) {
    const double t0 = now_seconds();
    for (int t = 0; t < steps && *rc == 0; t++)
        *rc = model_forward(m, cache, tokens + context + t, 1, logits, false, err);
    const double seconds = now_seconds() - t0;
    kv_truncate(cache, context);
    return seconds;
}

int probe_fastest_threads(Model *m, double *median_seconds, Err *err) {
    const int most = m->max_threads;
    int counts[PROBE_MAX_COUNTS], n = 0;
    for (int c = 1; c < most && n < PROBE_MAX_COUNTS - 1; c *= 2) counts[n++] = c;
    counts[n++] = most;
    double seconds[PROBE_MAX_COUNTS][PROBE_ROUNDS], medians[PROBE_MAX_COUNTS];
    int tokens[PROBE_CONTEXT + PROBE_STEPS];
    for (int i = 0; i < PROBE_CONTEXT + PROBE_STEPS; i++) tokens[i] = i % m->n_vocab;
    KVCache cache;
    float *logits = malloc(sizeof(float) * m->cfg.vocab_size);
    if (!logits) return err_fmt(err, "out of memory timing the model's steps");
    if (model_kv_init(m, &cache, err)) return free(logits), -1;
    // (a context shorter than the probe's, --ctx's say, starts it at position 0 and takes what steps fit)
    const int context = m->cfg.n_positions >= PROBE_CONTEXT + PROBE_STEPS ? PROBE_CONTEXT : 0;
    const int steps = m->cfg.n_positions - context < PROBE_STEPS ? m->cfg.n_positions - context : PROBE_STEPS;
    int rc = context ? model_forward(m, &cache, tokens, context, logits, false, err) : 0;
    for (int r = 0; r < PROBE_ROUNDS && rc == 0; r++)
        for (int k = 0; k < n && rc == 0; k++) {
            const int i = (k + r) % n;  // rotated: drift and order hit every count alike
            m->max_threads = counts[i];
            seconds[i][r] = steps_seconds(m, &cache, tokens, context, steps, logits, err, &rc);
        }
    m->max_threads = most;
    kv_free(&cache);
    free(logits);
    if (rc) return -1;
    for (int i = 0; i < n; i++) medians[i] = median(seconds[i], PROBE_ROUNDS);
    const int chosen = probe_choose_threads(counts, medians, n);
    for (int i = 0; i < n && median_seconds; i++)
        if (counts[i] == chosen) *median_seconds = steps > 0 ? medians[i] / steps : 0.0;
    return chosen;
}
