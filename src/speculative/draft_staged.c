// draft_staged.c — lookup, then the draft model (drafter.h): a lookup run of up to γ tokens, extended by the draft.
#include "speculative/speculative.h"

// Round by round the lookup goes first: a match of at least min_match tokens gives a run of one-hot drafts, and
// the draft model drafts on after it up to γ (reading the run in the batch that catches it up); no match, and the
// draft model drafts alone, up to the γ the scheduler planned for its drafts (Drafter.model_gamma) — as it does
// when the scheduler asks for the model alone (Drafter.use_lookup). Which
// tokens come from where depends on the committed text and the scheduler's choice before the round only.
static int staged_propose(Drafter *self, const int *context, int n, int gamma, int *draft, double *q, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    int k = self->use_lookup ? d->lookup->base.propose(&d->lookup->base, context, n, gamma, draft, q, err) : 0;
    if (k < 0) return -1;
    if (d->lookup->last_match < d->min_match || !self->use_lookup) k = 0;
    self->n_one_hot = k;
    if (k == 0 && self->use_lookup) gamma = gamma < self->model_gamma ? gamma : self->model_gamma;  // no match
    if (k < gamma) k = model_drafter_extend(d->model, context, n, k, gamma, draft, q, err);
    self->calls = d->model->base.calls;
    return k;
}

static int staged_prefill(Drafter *self, const int *context, int n, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    if (d->lookup->base.prefill(&d->lookup->base, context, n, err)) return -1;
    return d->model->base.prefill(&d->model->base, context, n, err);
}

static void staged_rollback(Drafter *self, int n) {
    StagedDrafter *d = (StagedDrafter *)self;
    d->lookup->base.rollback(&d->lookup->base, n);
    d->model->base.rollback(&d->model->base, n);
}

static int staged_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    return d->model->base.check_rollback(&d->model->base, context, n_prefill, err);
}

void staged_drafter_init(StagedDrafter *d, LookupDrafter *lookup, ModelDrafter *model, int min_match) {
    *d = (StagedDrafter){.base = {.prefill = staged_prefill, .propose = staged_propose, .rollback = staged_rollback,
                                  .check_rollback = staged_check, .has_lookup = true, .use_lookup = true,
                                  .model_gamma = GAMMA_MAX, .step_cost = model->base.step_cost},
                         .lookup = lookup, .model = model, .min_match = min_match};
}
