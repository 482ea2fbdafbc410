// draft_staged.c — lookup and the draft model (drafter.h): per round, the lookup's run or the draft model's drafts.
#include <string.h>

#include "speculative/speculative.h"

// The lookup goes first: a match of at least min_match tokens whose run the scheduler asks for
// (DraftRequest.lookup_gamma) gives a chain of one-hot drafts; otherwise the draft model drafts, up to the depth the
// scheduler planned for its drafts (DraftRequest.model_gamma) — a tree when shape.width > 1, its forwards named in
// *forward (Drafter.begin) and resumed by staged_resume. Which tokens come from where depends on the committed text
// and the scheduler's choice before the round only. The report is the lookup's (its run, proposed or not) with the
// model's forwards.
static int staged_begin(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                        double *q, DraftReport *report, DraftForward *forward, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    DraftReport run = {0};
    const int n_run = lookup_run(d->lookup, context, n, run.run, err);
    if (n_run < 0) return -1;
    const int m = d->lookup->last_match >= d->min_match ? d->lookup->last_match : 0;
    const int k = lookup_take(request, &run, m, m > 0 ? n_run : 0, request->shape.depth);
    lookup_tree(tree, &run.run, 1, k);
    d->ran_lookup = k > 0;
    *forward = (DraftForward){0};
    if (k > 0) {
        *report = run;
        return 0;
    }
    DraftRequest model = *request;
    model.shape.depth = model.shape.depth < request->model_gamma ? model.shape.depth : request->model_gamma;
    if (d->model->base.begin(&d->model->base, context, n, &model, tree, q, report, forward, err)) return -1;
    // The model's report (its forwards add up as they are resumed) with the lookup's run, found and not proposed.
    memcpy(report->run, run.run, sizeof run.run);
    report->n_run = run.n_run;
    report->match_length = run.match_length;
    report->run_proposed = false;
    return 0;
}

static int staged_resume(Drafter *self, DraftForward *forward, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    return d->model->base.resume(&d->model->base, forward, err);
}

static int staged_prefill(Drafter *self, const int *context, int n, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    if (d->lookup->base.prefill(&d->lookup->base, context, n, err)) return -1;
    return d->model->base.prefill(&d->model->base, context, n, err);
}

// Only after a round of the model's drafts (the scheduler asks for no other): the model drafts ahead. The next
// round takes its chain only if the lookup proposes no run there.
static int staged_draft_ahead(Drafter *self, const int *context, int n, int depth, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    return d->model->base.draft_ahead(&d->model->base, context, n, depth, err);
}

static void staged_rollback(Drafter *self, int n, const int *path, int n_path) {
    StagedDrafter *d = (StagedDrafter *)self;
    d->lookup->base.rollback(&d->lookup->base, n, path, n_path);
    if (d->ran_lookup) n_path = 0;  // the round's nodes were the lookup's: the draft model cached none of them
    d->model->base.rollback(&d->model->base, n, path, n_path);
}

static int staged_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    StagedDrafter *d = (StagedDrafter *)self;
    return d->model->base.check_rollback(&d->model->base, context, n_prefill, err);
}

void staged_drafter_init(StagedDrafter *d, LookupDrafter *lookup, ModelDrafter *model, int min_match) {
    *d = (StagedDrafter){.base = {.prefill = staged_prefill, .propose = drafter_propose_by_steps,
                                  .begin = staged_begin, .resume = staged_resume, .rollback = staged_rollback,
                                  .draft_ahead = staged_draft_ahead, .check_rollback = staged_check, .has_lookup = true,
                                  .step_cost = model->base.step_cost, .row_cost = model->base.row_cost},
                         .lookup = lookup, .model = model, .min_match = min_match};
}
