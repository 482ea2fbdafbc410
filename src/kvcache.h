// kvcache.h — the attention keys and values of every position seen so far, for every layer.
//
// Positions are absolute: row p of layer l holds the K (and V) of token p. The cache knows how many rows are
// valid (len); a forward pass appends T rows at [len, len + T). Rolling back after a rejected draft is only
// moving len back: kv_truncate(cache, n) is O(1), and the stale rows past n are simply overwritten later.
#ifndef SPECDEC_KVCACHE_H
#define SPECDEC_KVCACHE_H

#include <stddef.h>

#include "error.h"

typedef struct {
    int n_layer;    // L
    int n_ctx;      // rows per layer (the model's n_positions)
    int d;          // width of one K or V row (n_embd = H · head_dim)
    int len;        // valid rows: positions [0, len)
    float *k;       // [L, n_ctx, d]
    float *v;       // [L, n_ctx, d]
} KVCache;

int kv_init(KVCache *cache, int n_layer, int n_ctx, int d, Err *err);
void kv_free(KVCache *cache);

// Keeps positions [0, n) and forgets the rest; n must be in [0, len].
void kv_truncate(KVCache *cache, int n);

// Row `pos` of layer `layer`: [d] floats.
static inline float *kv_k(const KVCache *cache, int layer, int pos) {
    return cache->k + ((size_t)layer * cache->n_ctx + pos) * cache->d;
}
static inline float *kv_v(const KVCache *cache, int layer, int pos) {
    return cache->v + ((size_t)layer * cache->n_ctx + pos) * cache->d;
}

#endif
