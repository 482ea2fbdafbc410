// test_rollback_check.c — model_check_rollback, the check the debug build runs after every KV rollback.
//
// It passes on a cache that was filled the way the scheduler fills one (a prefill, then verification forwards of
// several tokens, each followed by a rollback), leaves that cache as it was, and catches one corrupted key or value
// anywhere in the rows kept, naming the model, the position and the difference. Under avx2, whose OpenBLAS takes
// the 40-row prefill, the check passes only because it feeds the prefill as it was fed: one token at a time gives
// keys that differ in their last bits. (That the scheduler calls it after every rollback in the debug build is
// tested in tests/speculative/test_generation.c.)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "random_checkpoint.h"

enum { N_POSITIONS = 48, VOCAB = 50, PREFILL = 40 };  // a prefill of 40 rows: OpenBLAS's under avx2 (kernels.h)

typedef struct {
    char dir[64];
    ThreadPool *pool;
    Model model;
    KVCache cache;
    int tokens[N_POSITIONS];
} Subject;

// A random 2-block model (F32, so that OpenBLAS may take the prefill) with the kernel variant `isa` (NULL: the
// default); false if this CPU or binary lacks it.
static bool subject_open(Subject *s, const char *isa, int threads) {
    Err err;
    snprintf(s->dir, sizeof s->dir, "/tmp/specdec-rollback-XXXXXX");
    CHECK(mkdtemp(s->dir) != NULL, "mkdtemp");
    RandomCheckpoint spec = {.n_layer = 2, .n_embd = 32, .n_head = 4, .vocab_size = VOCAB, .n_positions = N_POSITIONS,
                             .scale = 0.3f, .seed = 11};
    CHECK(random_checkpoint_write(s->dir, &spec, &err) == 0, "%s", err.msg);
    if (isa) setenv("SPECDEC_ISA", isa, 1);
    s->pool = pool_create(threads, &err);
    bool loaded = model_load(&s->model, s->dir, s->pool, &err) == 0;
    unsetenv("SPECDEC_ISA");
    if (!loaded) {
        CHECK(isa != NULL, "%s", err.msg);  // only a named variant may be missing
        pool_free(s->pool);
        random_checkpoint_remove(s->dir);
        return false;
    }
    CHECK(model_kv_init(&s->model, &s->cache, &err) == 0, "%s", err.msg);
    for (int i = 0; i < N_POSITIONS; i++) s->tokens[i] = test_rand_int(0, VOCAB - 1);
    return true;
}

static void subject_close(Subject *s) {
    kv_free(&s->cache);
    model_free(&s->model);
    pool_free(s->pool);
    random_checkpoint_remove(s->dir);
}

// Fills the cache as speculative decoding does: the prefill in one forward, then rounds that feed the newest
// committed token and up to 4 drafts (random tokens), of which some are kept and the rest rolled back; with
// `check`, the check runs after every rollback, as in the debug build. Returns the committed length; the cache
// holds all but the newest committed token.
static int play_rounds(Subject *s, RollbackCheck *check, int n_prefill, int until, const char *label) {
    Err err;
    float *logits = malloc(sizeof(float) * 5 * VOCAB);
    int n = n_prefill + 1;  // committed tokens
    CHECK(model_forward(&s->model, &s->cache, s->tokens, n_prefill, logits, false, &err) == 0, "%s", err.msg);
    while (n < until && !test_failures()) {
        int k = test_rand_int(0, 4);
        k = n + k <= N_POSITIONS ? k : N_POSITIONS - n;  // the cache holds n − 1, and gets k + 1 more
        CHECK(model_forward(&s->model, &s->cache, s->tokens + n - 1, k + 1, logits, true, &err) == 0, "%s", err.msg);
        n += test_rand_int(1, k + 1);  // the accepted drafts and one more token
        n = n < until ? n : until;
        kv_truncate(&s->cache, n - 1);
        CHECK(!check || model_check_rollback(&s->model, &s->cache, check, s->tokens, n_prefill, "target", &err) == 0,
              "%s, rollback to %d: %s", label, n - 1, err.msg);
    }
    free(logits);
    return n;
}

// A copy of the cache's rows [0, len), [L, H, hd, len] keys then [L, H, len, hd] values, to compare before and after.
static float *kept_rows(const KVCache *c) {
    const size_t per_head = (size_t)c->hd * c->len;
    float *rows = malloc(sizeof(float) * 2 * c->n_layer * c->n_head * per_head + 1), *at = rows;
    for (int l = 0; l < c->n_layer; l++)
        for (int h = 0; h < c->n_head; h++) {
            for (int i = 0; i < c->hd; i++, at += c->len)
                memcpy(at, kv_keys(c, l, h) + (size_t)i * c->ld_k, sizeof(float) * c->len);
            memcpy(at, kv_values(c, l, h), sizeof(float) * per_head);
            at += per_head;
        }
    return rows;
}

TEST(rollback_check_passes_and_leaves_the_cache_as_it_was) {
    const char *variants[] = {NULL, "scalar", "avx2", "avx512"};
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++)
        for (int threads = 1; threads <= 2; threads++) {
            Subject s;
            if (!subject_open(&s, variants[v], threads)) continue;
            char label[64];
            // A long prefill (OpenBLAS's, where the variant hands it over), and a short one up to a full cache.
            const int prefills[] = {PREFILL, 3};
            for (int i = 0; i < 2; i++) {
                snprintf(label, sizeof label, "%s, %d threads, prefill %d", variants[v] ? variants[v] : "default",
                         threads, prefills[i]);
                RollbackCheck check = {0};
                kv_truncate(&s.cache, 0);
                play_rounds(&s, &check, prefills[i], i == 0 ? PREFILL + 6 : N_POSITIONS + 1, label);
                // Once more on the final cache: the rows kept and the length are as they were (rows past the length
                // may have been written).
                const int len = s.cache.len;
                float *before = kept_rows(&s.cache);
                Err err;
                CHECK(model_check_rollback(&s.model, &s.cache, &check, s.tokens, prefills[i], "target", &err) == 0,
                      "%s, again: %s", label, err.msg);
                float *after = kept_rows(&s.cache);
                CHECK(s.cache.len == len && memcmp(before, after, sizeof(float) * 2 * s.cache.n_layer *
                                                                      s.cache.n_head * s.cache.hd * len) == 0,
                      "%s: the check changed the cache (length %d, now %d)", label, len, s.cache.len);
                free(before);
                free(after);
                rollback_check_free(&check);
            }
            subject_close(&s);
        }
}

// The cached key (or value) of position pos, dimension dim, in one layer and head.
static float *cached_value(KVCache *cache, bool key, int layer, int head, int pos, int dim) {
    return key ? kv_keys(cache, layer, head) + (size_t)dim * cache->ld_k + pos
               : kv_values(cache, layer, head) + (size_t)pos * cache->hd + dim;
}

TEST(rollback_check_catches_a_corrupted_value) {
    Subject s;
    subject_open(&s, NULL, 1);
    RollbackCheck check = {0};
    Err err;
    play_rounds(&s, &check, 5, 30, "before the corruption");
    const int len = s.cache.len;
    for (int trial = 0; trial < 8; trial++) {
        const bool key = trial % 2 == 0;
        const int layer = test_rand_int(0, s.cache.n_layer - 1), head = test_rand_int(0, s.cache.n_head - 1);
        const int pos = trial < 2 ? len - 1 : test_rand_int(0, len - 1), dim = test_rand_int(0, s.cache.hd - 1);
        float *value = cached_value(&s.cache, key, layer, head, pos, dim), saved = *value;
        *value += trial < 4 ? 0.5f : 1e-3f * (saved != 0 ? saved : 1);
        CHECK(model_check_rollback(&s.model, &s.cache, &check, s.tokens, 5, "target", &err) == -1,
              "a corrupted %s at position %d (layer %d, head %d) went unnoticed", key ? "key" : "value", pos, layer,
              head);
        char position[32];
        snprintf(position, sizeof position, "position %d ", pos);
        CHECK(strstr(err.msg, "target model") && strstr(err.msg, position) && strstr(err.msg, key ? "key" : "value") &&
                  strstr(err.msg, "max |difference|"),
              "the message should name the model, the position, key or value and the difference: \"%s\"", err.msg);
        *value = saved;
    }
    CHECK(model_check_rollback(&s.model, &s.cache, &check, s.tokens, 5, "target", &err) == 0, "restored: %s",
          err.msg);
    // A row past the length is forgotten: what it holds does not matter.
    *cached_value(&s.cache, true, 0, 0, len + 1, 0) += 1.0f;
    CHECK(model_check_rollback(&s.model, &s.cache, &check, s.tokens, 5, "target", &err) == 0, "a stale row: %s",
          err.msg);
    // A committed token is never replaced.
    s.tokens[2] = (s.tokens[2] + 1) % VOCAB;
    CHECK(model_check_rollback(&s.model, &s.cache, &check, s.tokens, 5, "target", &err) == -1 &&
              strstr(err.msg, "committed token at position 2 changed"),
          "a changed committed token: \"%s\"", err.msg);
    rollback_check_free(&check);
    subject_close(&s);
}
