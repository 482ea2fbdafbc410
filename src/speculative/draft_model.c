// draft_model.c — a small model as drafter (drafter.h).
#include <stdlib.h>
#include <string.h>

#include "speculative/speculative.h"

// Drafts x_{g+1}..x_k one token at a time after the committed tokens and the g given ones: q_i = adjust(draft
// logits), x_i ~ q_i, drawn for its position n + i − 1 by the scheduler's rule. The first forward feeds, in one
// batch, every token the draft has not read yet: the committed tokens since its last use (the whole prompt at
// first; after plain rounds, all they committed; after a fully accepted round, x_γ and the bonus token) and the
// given ones. x_k itself is never fed, since the next round may not keep it.
int model_drafter_extend(ModelDrafter *d, const int *context, int n, int n_given, int gamma, int *draft, double *q,
                         Err *err) {
    const int V = d->model->n_vocab, n_ctx = d->model->cfg.n_positions;
    int n_feed = 0;
    for (int pos = d->cache.len; pos < n + n_given; pos++) d->feed[n_feed++] = pos < n ? context[pos] : draft[pos - n];
    const int *feed = d->feed;
    int k = n_given;
    for (; k < gamma && d->cache.len + n_feed <= n_ctx; k++) {
        if (model_forward(d->model, &d->cache, feed, n_feed, d->logits, false, err)) return -1;
        d->base.calls++;
        if (d->p_min > 0 && sampling_top_probability(d->logits, V) < d->p_min) break;  // the draft is unsure
        double *q_k = q + (size_t)k * V;
        if (sampler_adjust(&d->sampler, q_k, d->logits))
            return err_fmt(err, "the draft model produced a NaN or infinite logit at position %d", d->cache.len - 1);
        draft[k] = spec_draw(d->params, q_k, V, n + k, DRAW_DRAFT);
        feed = &draft[k];
        n_feed = 1;
    }
    return k;
}

static int model_propose(Drafter *self, const int *context, int n, int gamma, int *draft, double *q, Err *err) {
    self->n_one_hot = 0;
    return model_drafter_extend((ModelDrafter *)self, context, n, 0, gamma, draft, q, err);
}

static int model_prefill(Drafter *self, const int *context, int n, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (n <= d->cache.len) return 0;
    return model_forward(d->model, &d->cache, context + d->cache.len, n - d->cache.len, d->logits, false, err);
}

static void model_rollback(Drafter *self, int n) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (d->cache.len > n) kv_truncate(&d->cache, n);
}

static int model_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    return model_check_rollback(d->model, &d->cache, &d->check, context, n_prefill, "draft", err);
}

int model_drafter_init(ModelDrafter *d, Model *draft, const SpecParams *params, float p_min, Err *err) {
    *d = (ModelDrafter){.base = {.prefill = model_prefill, .propose = model_propose, .rollback = model_rollback,
                                 .check_rollback = model_check, .step_cost = spec_forward_cost(draft, 1)},
                        .model = draft, .params = params, .p_min = p_min};
    d->logits = malloc(sizeof(float) * draft->n_vocab);
    d->feed = malloc(sizeof(int) * draft->cfg.n_positions);
    if (!d->logits || !d->feed) return err_fmt(err, "out of memory for the draft's logits");
    if (sampler_init(&d->sampler, &params->sampling, draft->n_vocab, draft->kernels, err)) return -1;
    return model_kv_init(draft, &d->cache, err);
}

void model_drafter_free(ModelDrafter *d) {
    sampler_free(&d->sampler);
    kv_free(&d->cache);
    rollback_check_free(&d->check);
    free(d->logits);
    free(d->feed);
    d->logits = NULL;
    d->feed = NULL;
}
