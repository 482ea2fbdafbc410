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
// the position after that occurrence on. For a tree, the latest occurrences of the shorter n-grams ending the text
// are other candidates, each kept whose continuation starts with a token no longer match's does. The positions after
// the occurrences kept, longest match first, go to after[0..k) (k ≤ width), the longest match's length to
// d->last_match (0: none). Returns k, or −1 with err set.
static int find_matches(LookupDrafter *d, const int *context, int n, int width, int *after, Err *err) {
    d->last_match = 0;
    if (index_up_to(d, context, n, err)) return -1;
    int k = 0;
    for (int len = n - 1 < d->n_max ? n - 1 : d->n_max; len >= d->n_min && k < width; len--) {
        uint64_t at;
        if (!bytesmap_get(&d->index, context + n - len, sizeof(int) * len, &at)) continue;
        bool new_token = true;
        for (int b = 0; b < k; b++) new_token &= context[after[b]] != context[at];
        if (!new_token) continue;
        if (k == 0) d->last_match = len;
        after[k++] = (int)at;
    }
    return k;
}

// The continuation from position after (< n) on, GAMMA_MAX tokens: copying on past the end of the committed text
// continues with the copy itself (the match's continuation overlaps the suffix: a repeating span is proposed whole).
static void copy_on(const int *context, int n, int after, int *out) {
    for (int i = 0; i < GAMMA_MAX; i++) {
        const int from = after + i;  // < n + i: committed, or an earlier token of this copy
        out[i] = from < n ? context[from] : out[from - n];
    }
}

int lookup_run(LookupDrafter *d, const int *context, int n, int *run, Err *err) {
    int after;
    const int found = find_matches(d, context, n, 1, &after, err);
    if (found <= 0) return found;
    copy_on(context, n, after, run);
    return GAMMA_MAX;
}

int lookup_take(const DraftRequest *request, DraftReport *report, int m, int n_run, int depth) {
    const int asked = m > 0 ? request->lookup_gamma[m < LOOKUP_MATCH_SLOTS ? m : LOOKUP_MATCH_SLOTS - 1] : 0;
    int k = n_run < asked ? n_run : asked;
    k = k < depth ? k : depth;
    report->match_length = m;
    report->n_run = n_run;
    report->run_proposed = k > 0;
    return k;
}

void lookup_tree(DraftTree *tree, int (*branches)[GAMMA_MAX], int m, int depth) {
    tree->n = 0;
    for (int level = 0; level < depth; level++)
        for (int b = 0; b < m; b++) {
            tree->node[tree->n] = tree_one_hot_child(branches[b][level]);
            tree->parent[tree->n++] = level == 0 ? -1 : (level - 1) * m + b;
        }
}

// The run of the longest match, as much of it as the scheduler asks for its match length (lookup_take); a tree's
// other branches are as deep.
static int lookup_propose(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                          double *q, DraftReport *report, Err *err) {
    (void)q;  // one-hot: no rows
    LookupDrafter *d = (LookupDrafter *)self;
    const TreeShape shape = request->shape;
    *report = (DraftReport){0};
    int after[TREE_FIRST_WIDTH_MAX], branches[TREE_FIRST_WIDTH_MAX][GAMMA_MAX];
    const int width = shape.width < 1 ? 1 : shape.width < TREE_FIRST_WIDTH_MAX ? shape.width : TREE_FIRST_WIDTH_MAX;
    const int m = find_matches(d, context, n, width, after, err);
    if (m < 0) return -1;
    for (int b = 0; b < m; b++) copy_on(context, n, after[b], branches[b]);
    if (m > 0) memcpy(report->run, branches[0], sizeof report->run);
    lookup_tree(tree, branches, m, lookup_take(request, report, d->last_match, m > 0 ? GAMMA_MAX : 0, shape.depth));
    return 0;
}

static int lookup_prefill(Drafter *self, const int *context, int n, Err *err) {
    return index_up_to((LookupDrafter *)self, context, n, err);
}

// The index holds committed tokens only, which rounds never take back. Its n-grams lie in context[0..indexed) and
// point at positions ≤ indexed, so a rollback to n ≥ indexed (a conversation's next turn, which keeps the common
// prefix of its ids) keeps it whole; a rollback further back (a new text) starts it afresh.
static void lookup_rollback(Drafter *self, int n, const int *path, int n_path) {
    (void)path, (void)n_path;  // nothing cached for the drafts
    LookupDrafter *d = (LookupDrafter *)self;
    if (d->indexed <= n) return;
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
