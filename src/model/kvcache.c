#include "model/kvcache.h"

#include "kernels.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kv_init(KVCache *cache, int n_layer, int n_head, int n_ctx, int hd, Err *err) {
    const int ld_k = (int)row_stride((size_t)n_ctx);
    size_t n_k = (size_t)n_layer * n_head * hd * ld_k, n_v = (size_t)n_layer * n_head * n_ctx * hd;
    // calloc'd pages are mapped lazily: a cache costs memory only for the positions actually used.
    *cache = (KVCache){.n_layer = n_layer, .n_head = n_head, .n_ctx = n_ctx, .hd = hd, .len = 0, .ld_k = ld_k,
                       .k = calloc(n_k, sizeof(float)), .v = calloc(n_v, sizeof(float))};
    if (!cache->k || !cache->v) {
        kv_free(cache);
        return err_fmt(err, "out of memory for a KV cache of %d layers × %d heads × %d positions × %d floats",
                       n_layer, n_head, n_ctx, hd);
    }
    return 0;
}

void kv_free(KVCache *cache) {
    free(cache->k);
    free(cache->v);
    cache->k = cache->v = NULL;
    cache->len = 0;
}

void kv_truncate(KVCache *cache, int n) {
    if (n < 0 || n > cache->len) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "kv_truncate: length %d outside [0, %d]\n", n, cache->len);
        abort();
    }
    cache->len = n;
}

void kv_keep_path(KVCache *cache, int base, const int *rows, int n) {
    bool ok = base >= 0 && n >= 0 && base + n <= cache->len;
    for (int k = 0; k < n && ok; k++)
        ok = (k == 0 ? rows[k] >= 0 : rows[k] > rows[k - 1]) && base + rows[k] < cache->len;
    if (!ok) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "kv_keep_path: rows after %d are not %d increasing rows below the cache's length %d\n", base,
                n, cache->len);
        abort();
    }
    int first = 0;  // rows[k] ≥ k; the leading rows with rows[k] = k are in place already
    while (first < n && rows[first] == first) first++;
    // Row k comes from row rows[k] > k, and every row it comes from lies past every row written before it.
    for (int layer = 0; layer < cache->n_layer; layer++)
        for (int head = 0; head < cache->n_head; head++) {
            float *keys = kv_keys(cache, layer, head), *values = kv_values(cache, layer, head);
            for (int k = first; k < n; k++) {
                const size_t to = (size_t)base + k, from = (size_t)base + rows[k], ld_k = cache->ld_k;
                for (int i = 0; i < cache->hd; i++) keys[i * ld_k + to] = keys[i * ld_k + from];  // Kᵀ: a column
                memcpy(values + to * cache->hd, values + from * cache->hd, sizeof(float) * cache->hd);
            }
        }
    cache->len = base + n;
}

void kv_store(KVCache *cache, int layer, int head, int pos, const float *k, const float *v) {
    float *keys = kv_keys(cache, layer, head);
    for (int i = 0; i < cache->hd; i++) keys[(size_t)i * cache->ld_k + pos] = k[i];
    memcpy(kv_values(cache, layer, head) + (size_t)pos * cache->hd, v, sizeof(float) * cache->hd);
}
