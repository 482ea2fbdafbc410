// draft_staged.c — lookup, then the draft model (drafter.h): a lookup run of up to γ tokens, extended by the draft.
#include "speculative/speculative.h"

// Round by round the lookup goes first: a match of at least min_match tokens gives a run of one-hot drafts, and
// the draft model drafts on after it up to γ (reading the run in the batch that catches it up); no match, and the
// draft model drafts alone, up to the γ the scheduler planned for its drafts (Drafter.model_gamma) — as it does
// when the scheduler asks for the model alone (Drafter.use_lookup). Which
// tokens come from where depends on the committed text and the scheduler's choice before the round only.
static int staged_propose(Drafter *self, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                          Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    tree->n = 0;
    const TreeShape run = {shape.depth, 1};  // the lookup's run is a chain, the model's tree hangs below it
    if (self->use_lookup && d->lookup->base.propose(&d->lookup->base, context, n, run, tree, q, err)) return -1;
    if (d->lookup->last_match < d->min_match || !self->use_lookup) tree->n = 0;
    if (tree->n == 0 && self->use_lookup)  // no match
        shape.depth = shape.depth < self->model_gamma ? shape.depth : self->model_gamma;
    const int rc = model_drafter_extend(d->model, context, n, shape, tree, q, err);  // (nothing, past the depth)
    self->calls = d->model->base.calls;
    return rc;
}

static int staged_prefill(Drafter *self, const int *context, int n, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    if (d->lookup->base.prefill(&d->lookup->base, context, n, err)) return -1;
    return d->model->base.prefill(&d->model->base, context, n, err);
}

static void staged_rollback(Drafter *self, int n, const int *path, int n_path) {
    StagedDrafter *d = (StagedDrafter *)self;
    d->lookup->base.rollback(&d->lookup->base, n, path, n_path);
    d->model->base.rollback(&d->model->base, n, path, n_path);
}

static int staged_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    return d->model->base.check_rollback(&d->model->base, context, n_prefill, err);
}

void staged_drafter_init(StagedDrafter *d, LookupDrafter *lookup, ModelDrafter *model, int min_match) {
    *d = (StagedDrafter){.base = {.prefill = staged_prefill, .propose = staged_propose, .rollback = staged_rollback,
                                  .check_rollback = staged_check, .has_lookup = true, .use_lookup = true,
                                  .model_gamma = GAMMA_MAX, .step_cost = model->base.step_cost,
                                  .row_cost = model->base.row_cost},
                         .lookup = lookup, .model = model, .min_match = min_match};
}
