// drafter.c — opening and closing a run's drafter (drafter.h): the one place that assembles them.
#include "speculative/speculative.h"

int draft_tree_path(const DraftTree *tree, int node, int *path) {
    int depth = 0;
    for (int i = node; i >= 0; i = tree->parent[i]) depth++;
    for (int i = node, at = depth; i >= 0; i = tree->parent[i]) path[--at] = tree->node[i].token;
    return depth;
}

int drafter_propose_by_steps(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                             double *q, DraftReport *report, Err *err) {
    DraftForward forward;
    if (self->begin(self, context, n, request, tree, q, report, &forward, err)) return -1;
    while (forward.rows.T > 0)
        if (model_forward_batch(forward.model, &forward.rows, 1, forward.logits, err) ||
            self->resume(self, &forward, err))
            return -1;
    return 0;
}

DrafterKind drafter_kind(bool draft_model, bool lookup) {
    if (draft_model && lookup) return DRAFTER_STAGED;
    if (lookup) return DRAFTER_LOOKUP;
    return draft_model ? DRAFTER_MODEL : DRAFTER_NONE;
}

const char *drafter_kind_name(DrafterKind kind) {
    static const char *const names[] = {[DRAFTER_NONE] = NULL, [DRAFTER_MODEL] = "draft model",
                                        [DRAFTER_LOOKUP] = "lookup", [DRAFTER_STAGED] = "draft model and lookup"};
    return names[kind];
}

int drafter_open(Drafters *d, DrafterKind kind, Model *draft, const SpecParams *params, float p_min, int min_match,
                 Err *err) {
    *d = (Drafters){0};
    if (kind == DRAFTER_MODEL || kind == DRAFTER_STAGED) {
        d->model_open = true;  // model_drafter_init zeroes it first: freeing it is safe whatever fails after
        if (model_drafter_init(&d->model, draft, params, p_min, err)) return -1;
    }
    if (kind == DRAFTER_LOOKUP || kind == DRAFTER_STAGED) {
        d->lookup_open = true;
        if (lookup_drafter_init(&d->lookup, LOOKUP_N_MIN, LOOKUP_N_MAX, err)) return -1;
    }
    if (kind == DRAFTER_STAGED) staged_drafter_init(&d->staged, &d->lookup, &d->model, min_match);
    Drafter *const opened[] = {[DRAFTER_NONE] = NULL, [DRAFTER_MODEL] = &d->model.base,
                               [DRAFTER_LOOKUP] = &d->lookup.base, [DRAFTER_STAGED] = &d->staged.base};
    d->drafter = opened[kind];
    return 0;
}

void drafter_close(Drafters *d) {
    if (d->model_open) model_drafter_free(&d->model);
    if (d->lookup_open) lookup_drafter_free(&d->lookup);
    d->model_open = d->lookup_open = false;
    d->drafter = NULL;
}
