// rollback_check.c — the debug build's check of a KV cache after a rollback (model_check_rollback, model.h).
//
// A rollback only moves the cache's length back (kvcache.h). It is right when the rows kept are exactly those a
// forward over the committed tokens writes, and the rows forgotten are never read again. Both are checked against
// a second cache, `fresh`, that only ever receives committed tokens — never a draft, never a rollback:
//   1. every kept K and V row equals fresh's, bit for bit (this also covers a full cache);
//   2. the logits of the next position — the newest committed token fed onto the rolled-back cache, as the next
//      round's forward feeds it — equal fresh's, bit for bit. Beyond 1, this catches a forward that reads stale
//      rows past the cache's length.
// Committed tokens never change (that too is checked), so fresh is extended by the tokens committed since the
// last check, not rebuilt: the same rows as a forward over all of them from scratch, at the cost of one token per
// token generated.
//
// Bit-exact equality is the right test because the forward is batch-invariant (model.h): a position's K, V and
// logits do not depend on how many tokens were fed with it, nor on the thread count. fresh receives the prefill
// as it was fed (one forward of n_prefill tokens), then one token at a time, as plain decoding does. A cache that kv_keep_path compacted
// after a token tree passes as well: a tree row's K and V are those of the chain over its path (model.h), so the
// kept path's rows are the chain's (tests/model/test_tree.c).
//
// Step 2 feeds a token onto the checked cache itself: the forward writes row len, in the region past the length
// that the next forward overwrites anyway, and the length is set back afterwards, so the rows [0, len) and the
// length are as they were.
#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void rollback_check_free(RollbackCheck *check) {
    kv_free(&check->fresh);
    free(check->fed);
    free(check->want);
    free(check->got);
    *check = (RollbackCheck){0};
}

static int rollback_check_init(RollbackCheck *check, Model *model, Err *err) {
    const int V = model->cfg.vocab_size;
    if (model_kv_init(model, &check->fresh, err)) return -1;
    check->fed = malloc(sizeof(int) * model->cfg.n_positions);
    check->want = malloc(sizeof(float) * V);
    check->got = malloc(sizeof(float) * V);
    if (!check->fed || !check->want || !check->got) {
        rollback_check_free(check);
        return err_fmt(err, "rollback check: out of memory");
    }
    return 0;
}

// Feeds `fresh` tokens[0..n): keeps the rows of the committed tokens it already holds (checking that they are still
// the committed ones), then feeds the rest, the prefill in one forward and after it one token at a time.
static int extend_fresh(Model *model, RollbackCheck *check, const int *tokens, int n, int n_prefill,
                        const char *name, Err *err) {
    KVCache *fresh = &check->fresh;
    int keep = fresh->len < n ? fresh->len : n;
    if (keep < n_prefill) keep = 0;  // the prefill is fed whole, or not at all
    for (int pos = 0; pos < keep; pos++)
        if (check->fed[pos] != tokens[pos])
            return err_fmt(err, "rollback check: the %s model's committed token at position %d changed from %d to %d",
                           name, pos, check->fed[pos], tokens[pos]);
    kv_truncate(fresh, keep);
    if (keep == 0 && n_prefill > 0 && model_forward(model, fresh, tokens, n_prefill, check->want, false, err))
        return -1;
    while (fresh->len < n)
        if (model_forward(model, fresh, tokens + fresh->len, 1, check->want, false, err)) return -1;
    memcpy(check->fed, tokens, sizeof(int) * n);
    return 0;
}

// Whether any a[i·stride] and b[i·stride], i < n, differ in their bits, and the largest |difference| (NaN if a
// difference is NaN).
static bool values_differ(const float *a, const float *b, int n, size_t stride, double *max_diff) {
    bool differ = false;
    for (int i = 0; i < n; i++) {
        const float x = a[i * stride], y = b[i * stride];
        if (memcmp(&x, &y, sizeof x) == 0) continue;
        const double d = fabs((double)x - y);
        if (!differ || !(d <= *max_diff)) *max_diff = d;
        differ = true;
    }
    return differ;
}

// Step 1: the first position in [0, len) whose key or value differs from fresh's in some layer and head, reported
// with the largest difference in that row. (First one comparison per row of Kᵀ and per head's values, all
// positions at once; the search position by position only when something differs.)
static int check_rows(const KVCache *cache, const KVCache *fresh, const char *name, Err *err) {
    const size_t len = cache->len, hd = cache->hd;
    bool same = true;
    for (int layer = 0; layer < cache->n_layer; layer++)
        for (int head = 0; head < cache->n_head; head++) {
            for (size_t i = 0; i < hd; i++)
                same &= memcmp(kv_keys(cache, layer, head) + i * cache->ld_k,
                               kv_keys(fresh, layer, head) + i * cache->ld_k, sizeof(float) * len) == 0;
            same &= memcmp(kv_values(cache, layer, head), kv_values(fresh, layer, head), sizeof(float) * len * hd) == 0;
        }
    if (same) return 0;
    for (int pos = 0; pos < cache->len; pos++)
        for (int layer = 0; layer < cache->n_layer; layer++)
            for (int head = 0; head < cache->n_head; head++) {
                double diff = 0;
                const char *what = "key";
                // Kᵀ is [hd, n_ctx]: position pos's key is column pos, one float every ld_k.
                bool differ = values_differ(kv_keys(cache, layer, head) + pos, kv_keys(fresh, layer, head) + pos,
                                            cache->hd, cache->ld_k, &diff);
                if (!differ) {
                    what = "value";
                    const size_t row = (size_t)pos * cache->hd;
                    differ = values_differ(kv_values(cache, layer, head) + row, kv_values(fresh, layer, head) + row,
                                           cache->hd, 1, &diff);
                }
                if (differ)
                    return err_fmt(err, "rollback check: the %s model's cache, rolled back to %d positions, holds a "
                                   "%s at position %d (layer %d, head %d) that differs from a forward over the "
                                   "committed tokens (max |difference| %g)", name, cache->len, what, pos, layer,
                                   head, diff);
            }
    return err_fmt(err, "rollback check: the %s model's cache differs from a forward over the committed tokens", name);
}

int model_check_rollback(Model *model, KVCache *cache, RollbackCheck *check, const int *tokens, int n_prefill,
                         const char *name, Err *err) {
    const int len = cache->len;
    if (n_prefill < 0 || n_prefill > len)
        return err_fmt(err, "rollback check: the %s model's prefill of %d tokens is not within its cache of %d", name,
                       n_prefill, len);
    if (!check->want && rollback_check_init(check, model, err)) return -1;
    if (extend_fresh(model, check, tokens, len, n_prefill, name, err)) return -1;
    if (check_rows(cache, &check->fresh, name, err)) return -1;

    // Step 2, when there is a next position (a full cache is never read again).
    if (len == model->cfg.n_positions) return 0;
    if (model_forward(model, &check->fresh, tokens + len, 1, check->want, false, err)) return -1;
    check->fed[len] = tokens[len];
    if (model_forward(model, cache, tokens + len, 1, check->got, false, err)) return -1;
    kv_truncate(cache, len);
    double diff = 0;
    if (values_differ(check->got, check->want, model->cfg.vocab_size, 1, &diff))
        return err_fmt(err, "rollback check: after the %s model's cache was rolled back to %d positions, the logits of "
                       "position %d differ from a forward over the committed tokens (max |difference| %g)", name, len,
                       len, diff);
    return 0;
}
