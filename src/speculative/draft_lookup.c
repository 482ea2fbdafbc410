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
// A tree (shape.width > 1): the latest occurrences of the shorter n-grams ending the text are other candidates;
// those whose continuation starts with a token no longer match's does become branches, up to the width, each a
// chain of one-hot nodes copied the same way — in breadth-first order, branch b's node at level l is l·m + b.
static int lookup_propose(Drafter *self, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                          Err *err) {
    (void)q;  // one-hot: no rows
    LookupDrafter *d = (LookupDrafter *)self;
    tree->n = 0;
    d->last_match = 0;
    if (index_up_to(d, context, n, err)) return -1;
    int after[TREE_FIRST_WIDTH_MAX], m = 0;  // the branches' first positions (each < n: committed)
    const int width = shape.width < TREE_FIRST_WIDTH_MAX ? shape.width : TREE_FIRST_WIDTH_MAX;
    for (int len = n - 1 < d->n_max ? n - 1 : d->n_max; len >= d->n_min && m < (width > 1 ? width : 1); len--) {
        uint64_t at;
        if (!bytesmap_get(&d->index, context + n - len, sizeof(int) * len, &at)) continue;
        bool new_token = true;
        for (int b = 0; b < m; b++) new_token &= context[after[b]] != context[at];
        if (!new_token) continue;
        if (m == 0) d->last_match = len;
        after[m++] = (int)at;
    }
    for (int level = 0; level < shape.depth && m > 0; level++)
        for (int b = 0; b < m; b++) {
            const int from = after[b] + level;  // < n + level: committed, or this branch's earlier token
            tree->node[tree->n] = tree_one_hot_child(from < n ? context[from] : tree->node[(from - n) * m + b].token);
            tree->parent[tree->n++] = level == 0 ? -1 : (level - 1) * m + b;
        }
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
