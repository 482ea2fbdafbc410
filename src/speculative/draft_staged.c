// draft_staged.c — lookup and the draft model (drafter.h): per round, the lookup's run or the draft model's drafts.
#include "speculative/speculative.h"

// The lookup goes first: a match of at least min_match tokens whose run the scheduler asks for (Drafter.lookup_gamma)
// gives a run of one-hot drafts; otherwise the draft model drafts, up to the γ the scheduler planned for its drafts
// (Drafter.model_gamma). Which tokens come from where depends on the committed text and the scheduler's choice
// before the round only.
static int staged_propose(Drafter *self, const int *context, int n, int gamma, int *draft, double *q, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    const int n_run = lookup_run(d->lookup, context, n, self->run, err);
    if (n_run < 0) return -1;
    const int m = d->lookup->last_match >= d->min_match ? d->lookup->last_match : 0;
    int k = self->n_one_hot = lookup_take(self, m, m > 0 ? n_run : 0, gamma, draft);
    if (k > 0) return k;
    k = model_drafter_extend(d->model, context, n, 0, gamma < self->model_gamma ? gamma : self->model_gamma, draft,
                             q, err);
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
                                  .check_rollback = staged_check, .has_lookup = true, .model_gamma = GAMMA_MAX,
                                  .step_cost = model->base.step_cost},
                         .lookup = lookup, .model = model, .min_match = min_match};
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) d->base.lookup_gamma[m] = GAMMA_MAX;  // every run, till told
}
