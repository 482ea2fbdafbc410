// kvcache.h — the attention keys and values of every position seen so far, for every layer.
//
// Positions are absolute: row p of (layer l, head h) holds the K (and V) of token p. The cache knows how many rows are
// valid (len); a forward pass appends T rows at [len, len + T). Rolling back after a rejected draft is only
// moving len back: kv_truncate(cache, n) is O(1), and the stale rows past n are simply overwritten later. After a
// token tree, kv_keep_path moves the accepted path's rows into place.
#ifndef SPECDEC_KVCACHE_H
#define SPECDEC_KVCACHE_H

#include <stddef.h>

#include "base/error.h"

// Layout: per (layer, head), V is [n_ctx, hd], one row per position, and K is stored transposed, [hd, n_ctx]:
// row i holds dimension i of every position's key, rows ld_k ≥ n_ctx floats apart (row_stride in kernels.h: a
// stride of exactly 1024 floats would put all 64 rows of a GPT-2 head in the same L1 sets). The scores q·K[:, s]
// of all positions are then a vector-matrix product along contiguous positions (no horizontal sums in the SIMD
// kernels), and attention reads one head's keys and values as sequential streams that the T queries of a
// verification pass find in cache.
typedef struct {
    int n_layer;    // L
    int n_head;     // key/value heads: Hkv (grouped-query attention keeps one per group of query heads)
    int n_ctx;      // positions (the model's n_positions)
    int hd;         // head width
    int len;        // valid positions: [0, len)
    int ld_k;       // floats from one row of Kᵀ to the next
    float *k;       // [L, Hkv, hd, ld_k]   (transposed)
    float *v;       // [L, Hkv, n_ctx, hd]
} KVCache;

int kv_init(KVCache *cache, int n_layer, int n_head, int n_ctx, int hd, Err *err);
void kv_free(KVCache *cache);

// The bytes its keys and values take (allocated at kv_init; mapped as positions are written).
size_t kv_bytes(const KVCache *cache);
// ... those kv_init would allocate for this shape.
size_t kv_bytes_of(int n_layer, int n_head, int n_ctx, int hd);

// Keeps positions [0, n) and forgets the rest; n must be in [0, len].
void kv_truncate(KVCache *cache, int n);

// Kᵀ of head `head` in layer `layer`: [hd, n_ctx], rows ld_k floats apart.
static inline float *kv_keys(const KVCache *cache, int layer, int head) {
    return cache->k + ((size_t)layer * cache->n_head + head) * cache->hd * cache->ld_k;
}
// V of head `head` in layer `layer`: [n_ctx, hd].
static inline float *kv_values(const KVCache *cache, int layer, int head) {
    return cache->v + ((size_t)layer * cache->n_head + head) * cache->n_ctx * cache->hd;
}

// After a token tree's T rows were appended at [base, base + T) (model_forward_tree, model_extend_tree): keeps the
// rows base + rows[k], k < n (rows strictly increasing, each < T), at positions base + k, in that order — the
// accepted path — and sets len = base + n. Work ∝ n: a row already in its place is not copied, and the rest are
// never touched.
void kv_keep_path(KVCache *cache, int base, const int *rows, int n);

// Write dimensions [i0, i1) of one head's key or value of position pos (k, v: the head's [hd]).
void kv_store_key(KVCache *cache, int layer, int head, int pos, int i0, int i1, const float *k);
// Asks for the cache lines (and pages) that kv_store_key(cache, layer, head, pos, i0, i1, ·) will write, so that a
// caller can have them come while it does other work: a key's dimensions lie in rows of Kᵀ ld_k floats apart, each
// on a page of its own once a row takes a page, and stores that miss the TLB and the caches wait for them one by one.
void kv_prefetch_key(const KVCache *cache, int layer, int head, int pos, int i0, int i1);
void kv_store_value(KVCache *cache, int layer, int head, int pos, int i0, int i1, const float *v);

#endif
