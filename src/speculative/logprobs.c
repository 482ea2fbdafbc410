// logprobs.c — a token's log-probability from a row of raw logits (logprobs.h).
#include "speculative/logprobs.h"

#include <float.h>
#include <math.h>

#include "model/model.h"

// log Σ_y exp(l_y − m) for the row's largest logit m, summed from y = 0 up.
static double log_partition(const float *logits, int V, float m) {
    double sum = 0.0;
    for (int y = 0; y < V; y++) sum += exp((double)logits[y] - m);
    return log(sum);
}

// l_x − m − log Z as a float, no lower than −FLT_MAX (JSON has no −inf; only logits a float's range apart reach it).
static float log_softmax_at(float logit, float m, double log_z) {
    const double value = (double)logit - m - log_z;
    return value < -FLT_MAX ? -FLT_MAX : (float)value;
}

void logprobs_of_row(TokenLogprobs *out, const float *logits, int V, int token, int n_top) {
    int best;
    model_top_logits(&best, logits, V, 1);
    const float m = logits[best];
    const double log_z = log_partition(logits, V, m);
    out->token = token;
    out->logprob = log_softmax_at(logits[token], m, log_z);
    n_top = n_top < LOGPROBS_TOP_MAX ? n_top : LOGPROBS_TOP_MAX;
    out->n_top = n_top > 0 ? model_top_logits(out->top, logits, V, n_top) : 0;
    for (int k = 0; k < out->n_top; k++) out->top_logprob[k] = log_softmax_at(logits[out->top[k]], m, log_z);
}
