// divergence.c — see divergence.h.
#include "divergence.h"

#include <math.h>

static int argmax(const float *x, int V) {
    int best = 0;
    for (int i = 1; i < V; i++) best = x[i] > x[best] ? i : best;
    return best;
}

// log Σ_x exp(x − max): softmax's normaliser, after the maximum is taken out.
static double log_normaliser(const float *x, int V, double max) {
    double sum = 0.0;
    for (int i = 0; i < V; i++) sum += exp(x[i] - max);
    return log(sum);
}

Divergence divergence(const float *a, const float *b, int V) {
    const int ia = argmax(a, V), ib = argmax(b, V);
    const double ma = a[ia], mb = b[ib], la = log_normaliser(a, V, ma), lb = log_normaliser(b, V, mb);
    Divergence d = {0.0, 0.0, ia == ib};
    for (int i = 0; i < V; i++) {
        const double log_p = a[i] - ma - la, log_q = b[i] - mb - lb, p = exp(log_p), q = exp(log_q);
        d.kl += p * (log_p - log_q);
        d.overlap += p < q ? p : q;
    }
    return d;
}
