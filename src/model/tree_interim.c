// tree_interim.c — INTERIM, until the treefwd branch lands: chains only. Removed at merge.
#include "model/tree_interim.h"

#include <string.h>

int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err) {
    for (int i = 0; i < T; i++)
        if (parent[i] != i - 1) return err_fmt(err, "interim: trees need the treefwd branch");
    return model_forward(model, cache, tokens, T, logits, true, err);
}

void kv_keep_path(KVCache *cache, int base, const int *rows, int n) {
    for (int j = 0; j < n; j++) {
        const int from = base + rows[j], to = base + j;
        if (from == to) continue;
        for (int l = 0; l < cache->n_layer; l++)
            for (int h = 0; h < cache->n_head; h++) {
                float *keys = kv_keys(cache, l, h), *values = kv_values(cache, l, h);
                for (int i = 0; i < cache->hd; i++) keys[(size_t)i * cache->ld_k + to] = keys[(size_t)i * cache->ld_k + from];
                memcpy(values + (size_t)to * cache->hd, values + (size_t)from * cache->hd, sizeof(float) * cache->hd);
            }
    }
    cache->len = base + n;
}
