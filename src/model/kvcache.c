#include "model/kvcache.h"

#include "base/pages.h"
#include "kernels.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The cache's memory: anonymous pages, mapped at their first touch. Storing one position writes a key into hd rows
// of Kᵀ, ld_k floats apart, and a value into V. With 4 kB pages that costs a TLB miss per row of Kᵀ on a page of its
// own, and a page fault wherever a store enters a page first (V: every 16 positions with hd = 64, in every head and
// layer) — costly on a virtual machine. In 2 MB huge pages a head's rows share a page and the faults come once per
// 2 MB (docs/performance-history.md, "The key cache in huge pages"); but a huge page is mapped whole at its first
// touch, and position 0 touches every row of Kᵀ and every head's values. So the cache takes huge pages, where the
// kernel allows, when a row of Kᵀ takes about a 4 kB page or less (n_ctx ≤ HUGE_PAGES_MAX_CTX): 4 kB pages would
// map all of Kᵀ at position 0 anyway, and V is no larger. A longer context keeps 4 kB pages and maps what its
// positions use (Llama 3.2 1B at 4096 positions: 32 MB of Kᵀ at position 0, not 256 MB of Kᵀ and V; on this
// project's VM the huge pages' faults added 0.35 s to its first prefill). Arrays under a huge page come from the
// heap (tests open thousands of small caches; a fresh mapping each time costs its faults and unmapping's TLB flush).
// In 4 kB pages a decode step's key stores still miss the TLB and the caches row by row (L · Hkv · hd of them):
// the forward asks for their lines ahead, while the q/k/v projection streams its weights (kv_prefetch_key).
enum { HUGE_PAGE = 2 << 20, HUGE_PAGES_MAX_CTX = 1024 };

static bool in_huge_pages(const KVCache *c, size_t bytes) {
    return c->n_ctx <= HUGE_PAGES_MAX_CTX && bytes >= HUGE_PAGE;
}

static float *cache_array_alloc(const KVCache *c, size_t bytes) {
    return in_huge_pages(c, bytes) ? huge_pages_alloc(bytes) : calloc(bytes, 1);
}

static void cache_array_free(const KVCache *c, float *p, size_t bytes) {
    if (in_huge_pages(c, bytes))
        huge_pages_free(p, bytes);
    else
        free(p);
}

static size_t keys_bytes(const KVCache *c) { return sizeof(float) * c->n_layer * c->n_head * c->hd * c->ld_k; }
static size_t values_bytes(const KVCache *c) { return sizeof(float) * c->n_layer * c->n_head * c->n_ctx * c->hd; }

// An empty cache's shape, nothing allocated.
static KVCache kv_shape(int n_layer, int n_head, int n_ctx, int hd) {
    return (KVCache){.n_layer = n_layer, .n_head = n_head, .n_ctx = n_ctx, .hd = hd, .len = 0,
                     .ld_k = (int)row_stride((size_t)n_ctx)};
}

int kv_init(KVCache *cache, int n_layer, int n_head, int n_ctx, int hd, Err *err) {
    *cache = kv_shape(n_layer, n_head, n_ctx, hd);
    cache->k = cache_array_alloc(cache, keys_bytes(cache));
    cache->v = cache_array_alloc(cache, values_bytes(cache));
    if (!cache->k || !cache->v) {
        kv_free(cache);
        return err_fmt(err, "out of memory for a KV cache of %d layers × %d heads × %d positions × %d floats",
                       n_layer, n_head, n_ctx, hd);
    }
    return 0;
}

size_t kv_bytes(const KVCache *cache) { return keys_bytes(cache) + values_bytes(cache); }

size_t kv_bytes_of(int n_layer, int n_head, int n_ctx, int hd) {
    const KVCache shape = kv_shape(n_layer, n_head, n_ctx, hd);
    return kv_bytes(&shape);
}

void kv_free(KVCache *cache) {
    cache_array_free(cache, cache->k, keys_bytes(cache));
    cache_array_free(cache, cache->v, values_bytes(cache));
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

void kv_store_key(KVCache *cache, int layer, int head, int pos, int i0, int i1, const float *k) {
    float *keys = kv_keys(cache, layer, head);
    for (int i = i0; i < i1; i++) keys[(size_t)i * cache->ld_k + pos] = k[i];
}

void kv_prefetch_key(const KVCache *cache, int layer, int head, int pos, int i0, int i1) {
    const float *keys = kv_keys(cache, layer, head);
    for (int i = i0; i < i1; i++) __builtin_prefetch(keys + (size_t)i * cache->ld_k + pos, 1, 3);
}

void kv_store_value(KVCache *cache, int layer, int head, int pos, int i0, int i1, const float *v) {
    memcpy(kv_values(cache, layer, head) + (size_t)pos * cache->hd + i0, v + i0, sizeof(float) * (i1 - i0));
}
