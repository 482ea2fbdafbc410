// draft_model.c — a small model as drafter (drafter.h).
#include <stdlib.h>
#include <string.h>

#include "speculative/speculative.h"

static int max_width(const SpecParams *params) { return params->tree_width > 1 ? params->tree_width : 1; }

// Adds a node to the tree.
static void add_node(DraftTree *tree, int token, int parent, int q_row, bool without_replacement) {
    const int i = tree->n++;
    tree->token[i] = token, tree->parent[i] = parent, tree->q_row[i] = q_row;
    tree->without_replacement[i] = without_replacement;
}

// The first level the model draws: `width` children of `parent` from q_row (the draft's q at `position`), as the
// scheduler's accept rule expects them drawn (tree.h). One child is today's chain draft: x ~ q by spec_draw.
// INTERIM until treeaccept lands: greedy top-W by logit only.
static int draw_first_level(ModelDrafter *d, DraftTree *tree, const float *logits, const double *q, int q_row,
                            int parent, int width, int position, Err *err) {
    const int V = d->model->n_vocab;
    if (width == 1) {
        add_node(tree, spec_draw(d->params, q, V, position, DRAW_DRAFT), parent, q_row, false);
        return 0;
    }
    if (d->params->sampling.temperature > 0) return err_fmt(err, "interim: sampled trees need treeaccept");
    int chosen[TREE_FIRST_WIDTH_MAX];
    for (int k = 0; k < width; k++) {
        int best = -1;
        for (int x = 0; x < V; x++) {
            bool taken = false;
            for (int j = 0; j < k; j++) taken |= chosen[j] == x;
            if (!taken && (best < 0 || logits[x] > logits[best])) best = x;
        }
        chosen[k] = best;
        add_node(tree, best, parent, -1, false);
    }
    return 0;
}

// Level by level: the first forward feeds, in one batch, every token the draft has not read yet — the committed
// tokens since its last use (the whole prompt at first; after plain rounds, all they committed; after a fully
// accepted round, the last draft and the bonus token) and the given ones — and its last row gives the q of the
// first drawn level. Each later level's forward gives the q of every branch's next token: a chain feeds its newest
// token; a tree feeds every node drawn so far again, under the tree mask, after cutting the cache back to the
// committed text and the given tokens (node i at row base + i either way: the nodes are in breadth-first order).
// The deepest level is never fed, since the next round may not keep it.
int model_drafter_extend(ModelDrafter *d, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                         Err *err) {
    const int V = d->model->n_vocab, n_ctx = d->model->cfg.n_positions, n_given = tree->n;
    const int width = shape.width < max_width(d->params) ? shape.width : max_width(d->params);
    int n_feed = 0, q_rows = 0;
    for (int pos = d->cache.len; pos < n + n_given; pos++)
        d->feed[n_feed++] = pos < n ? context[pos] : tree->token[pos - n];
    d->first_position = n;
    if (n_given >= shape.depth || d->cache.len + n_feed > n_ctx) return 0;
    if (model_forward(d->model, &d->cache, d->feed, n_feed, d->logits, false, err)) return -1;
    d->base.calls++;
    int frontier = n_given - 1, n_frontier = 1;  // the nodes of the level just drawn (−1: the newest token)
    for (int level = n_given; level < shape.depth; level++) {
        if (level > n_given && width == 1) {  // a chain: its newest token
            if (d->cache.len + 1 > n_ctx) break;
            if (model_forward(d->model, &d->cache, &tree->token[frontier], 1, d->logits, false, err)) return -1;
            d->base.calls++;
        } else if (level > n_given) {  // a tree: every node drawn so far
            const int rows = tree->n - n_given;
            kv_truncate(&d->cache, n + n_given);
            if (d->cache.len + rows > n_ctx) break;
            int parent[TREE_MAX_NODES];
            for (int i = 0; i < rows; i++)
                parent[i] = tree->parent[n_given + i] < n_given ? -1 : tree->parent[n_given + i] - n_given;
            if (model_forward_tree(d->model, &d->cache, tree->token + n_given, parent, rows, d->logits, err))
                return -1;
            d->base.calls++;
        }
        const int from = tree->n;  // the nodes this level adds
        for (int f = 0; f < n_frontier; f++) {
            const int node = frontier < 0 ? -1 : frontier + f;
            const float *logits = d->logits + (size_t)(level == n_given ? 0 : width == 1 ? 0 : node - n_given) * V;
            if (d->p_min > 0 && sampling_top_probability(logits, V) < d->p_min) continue;  // the draft is unsure
            double *q_row = q + (size_t)q_rows * V;
            if (sampler_adjust(&d->sampler, q_row, logits))
                return err_fmt(err, "the draft model produced a NaN or infinite logit at position %d",
                               n + level - 1);
            if (level == n_given) {
                if (draw_first_level(d, tree, logits, q_row, q_rows, node, width, n + level, err)) return -1;
            } else add_node(tree, spec_draw(d->params, q_row, V, n + level, DRAW_DRAFT), node, q_rows, false);
            q_rows++;
        }
        if (tree->n == from) break;
        frontier = from, n_frontier = tree->n - from;
    }
    return 0;
}

static int model_propose(Drafter *self, const int *context, int n, TreeShape shape, DraftTree *tree, double *q,
                         Err *err) {
    tree->n = 0;
    return model_drafter_extend((ModelDrafter *)self, context, n, shape, tree, q, err);
}

static int model_prefill(Drafter *self, const int *context, int n, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (n <= d->cache.len) return 0;
    return model_forward(d->model, &d->cache, context + d->cache.len, n - d->cache.len, d->logits, false, err);
}

// The accepted path's rows that were fed (the deepest level never is) move to base, base + 1, ... (a chain's are
// there already); then everything from position n on is forgotten.
static void model_rollback(Drafter *self, int n, const int *path, int n_path) {
    ModelDrafter *d = (ModelDrafter *)self;
    int kept = 0;
    while (kept < n_path && d->first_position + path[kept] < d->cache.len) kept++;
    if (kept > 0) kv_keep_path(&d->cache, d->first_position, path, kept);
    if (d->cache.len > n) kv_truncate(&d->cache, n);
}

static int model_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    return model_check_rollback(d->model, &d->cache, &d->check, context, n_prefill, "draft", err);
}

int model_drafter_init(ModelDrafter *d, Model *draft, const SpecParams *params, float p_min, Err *err) {
    *d = (ModelDrafter){.base = {.prefill = model_prefill, .propose = model_propose, .rollback = model_rollback,
                                 .check_rollback = model_check, .step_cost = spec_forward_cost(draft, 1)},
                        .model = draft, .params = params, .p_min = p_min, .max_width = max_width(params)};
    const int rows = d->max_width == 1 ? 1 : d->max_width * GAMMA_MAX;
    d->logits = malloc(sizeof(float) * (rows < TREE_MAX_NODES ? rows : TREE_MAX_NODES) * draft->n_vocab);
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
