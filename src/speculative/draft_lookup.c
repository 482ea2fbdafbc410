// draft_lookup.c — n-gram lookup as drafter (drafter.h): prompt lookup decoding over the committed text.
#include <string.h>

#include "speculative/speculative.h"

// Indexes the n-grams that end at positions indexed + 1 .. n − 1 of the committed tokens context[0..n): each, for
// every length in [n_min, n_max], maps to the position after it (whose token is committed: position < n). A later
// occurrence replaces an earlier one, so a lookup finds the most recent.
static int index_up_to(LookupDrafter *d, const int *context, int n, Err *err) {
    for (int end = d->indexed + 1; end < n; end++)
        for (int len = d->n_min; len <= d->n_max && len <= end; len++)
            if (bytesmap_put(&d->index, context + end - len, sizeof(int) * len, (uint64_t)end))
                return err_fmt(err, "out of memory for the lookup's n-gram index");
    if (n - 1 > d->indexed) d->indexed = n - 1;
    return 0;
}

// The longest n-gram ending the text that occurred before: its length m, and the continuation copies the text from
// the position after that occurrence on. Copying on past the end of the committed text continues with the
// proposal itself (the match's continuation overlaps the suffix: a repeating span is proposed whole).
// The run is a chain of one-hot nodes (the tree's width does not apply: one match, one continuation).
static int lookup_propose(Drafter *self, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                          Err *err) {
    (void)q;  // one-hot: no rows
    LookupDrafter *d = (LookupDrafter *)self;
    tree->n = 0;
    d->last_match = 0;
    if (index_up_to(d, context, n, err)) return -1;
    uint64_t after = 0;
    int len = n - 1 < d->n_max ? n - 1 : d->n_max;
    for (; len >= d->n_min; len--)
        if (bytesmap_get(&d->index, context + n - len, sizeof(int) * len, &after)) break;
    if (len < d->n_min) return 0;
    d->last_match = len;
    for (int i = 0; i < shape.depth; i++) {
        const int from = (int)after + i;  // < n + i: committed, or an earlier token of this proposal
        tree->node[i] = tree_one_hot_child(from < n ? context[from] : tree->node[from - n].token);
        tree->parent[i] = i - 1;
    }
    tree->n = shape.depth;
    return 0;
}

static int lookup_prefill(Drafter *self, const int *context, int n, Err *err) {
    return index_up_to((LookupDrafter *)self, context, n, err);
}

// The index holds committed tokens only, which rounds never take back; a rollback before them (a new text)
// starts the index afresh.
static void lookup_rollback(Drafter *self, int n, const int *path, int n_path) {
    (void)path, (void)n_path;  // nothing cached for the drafts
    LookupDrafter *d = (LookupDrafter *)self;
    if (d->indexed < n) return;
    bytesmap_clear(&d->index);
    d->indexed = 0;
}

int lookup_drafter_init(LookupDrafter *d, int n_min, int n_max, Err *err) {
    if (n_min < 1 || n_max < n_min)
        return err_fmt(err, "lookup: n-gram lengths [%d, %d] are not 1 ≤ min ≤ max", n_min, n_max);
    *d = (LookupDrafter){.base = {.prefill = lookup_prefill, .propose = lookup_propose, .rollback = lookup_rollback,
                                  .has_lookup = true},
                         .n_min = n_min, .n_max = n_max};
    if (bytesmap_init(&d->index)) return err_fmt(err, "out of memory for the lookup's n-gram index");
    return 0;
}

void lookup_drafter_free(LookupDrafter *d) { bytesmap_free(&d->index); }
