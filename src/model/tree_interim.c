// tree_interim.c — INTERIM, until the treefwd branch lands: a slow reference tree forward (each row a T = 1
// forward in a scratch cache holding the committed rows and the row's ancestors). Removed at merge.
#include "model/tree_interim.h"

#include <string.h>

static void copy_row(KVCache *dst, int to, const KVCache *src, int from) {
    for (int l = 0; l < src->n_layer; l++)
        for (int h = 0; h < src->n_head; h++) {
            const float *sk = kv_keys(src, l, h), *sv = kv_values(src, l, h);
            float *dk = kv_keys(dst, l, h), *dv = kv_values(dst, l, h);
            for (int i = 0; i < src->hd; i++) dk[(size_t)i * dst->ld_k + to] = sk[(size_t)i * src->ld_k + from];
            memcpy(dv + (size_t)to * dst->hd, sv + (size_t)from * src->hd, sizeof(float) * src->hd);
        }
}

int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err) {
    bool chain = true;
    for (int i = 0; i < T; i++) chain &= parent[i] == i - 1;
    if (chain) return model_forward(model, cache, tokens, T, logits, true, err);
    KVCache scratch;
    if (model_kv_init(model, &scratch, err)) return -1;
    const int len = cache->len, V = model->n_vocab;
    for (int p = 0; p < len; p++) copy_row(&scratch, p, cache, p);
    int rc = 0;
    for (int i = 0; i < T && rc == 0; i++) {
        int path[64], d = 0;
        for (int a = parent[i]; a >= 0; a = parent[a]) path[d++] = a;
        scratch.len = len;
        for (int j = d - 1; j >= 0; j--) copy_row(&scratch, scratch.len++, cache, len + path[j]);
        rc = model_forward(model, &scratch, &tokens[i], 1, logits + (size_t)i * V, false, err);
        copy_row(cache, len + i, &scratch, len + d);
    }
    cache->len = len + T;
    kv_free(&scratch);
    return rc;
}

void kv_keep_path(KVCache *cache, int base, const int *rows, int n) {
    for (int j = 0; j < n; j++)
        if (rows[j] != j) copy_row(cache, base + j, cache, base + rows[j]);
    cache->len = base + n;
}
