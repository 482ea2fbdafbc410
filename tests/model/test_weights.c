// test_weights.c — the shipped model pair, weights/pystd/{target,draft}: loads, matches PyTorch, fits the issue.
//
// tests/shipped/<role>.bin (written by tools/export.py when it exports the pair) holds 8 tokens of validation
// text and the logits of every position computed by tools/gpt2_reference.py in F64 from the shipped files, in
// the SDFX format of tests/fixtures/README.md (little-endian):
//
//     "SDFX"  u32 version (1)  u32 T  u32 V  i32 tokens[T]  f32 logits[T][V]
//
// Checked: the C forward pass (all at once and one token at a time) within 1e-4 of the reference, by the measure
// of test_forward.c; the pair's shapes: one vocabulary and one tokenizer, the target's weights over 64 MiB (not
// cache-resident), the draft at most 1/15 of the target's per-token multiply-adds (L·12d² + V·d), every file
// under 100 MB.
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"
#include "sdfx.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "base/threads.h"
#include "tokenizer/tokenizer.h"

#define PAIR_DIR "weights/pystd"
#define SHIPPED_DIR "tests/shipped"


// Reads path; false (and a failed check) if it is missing or malformed.
static bool shipped_expected(Expected *e, const char *path) {
    bool ok = expected_read(e, path);
    CHECK(ok, "%s: missing or not a version 1 SDFX file (regenerate: /usr/bin/python3 tools/export.py)", path);
    return ok;
}

static double max_error(const float *got, const float *want, int T, int V) {
    double max_err = 0;
    for (int t = 0; t < T; t++) {
        const float *a = got + (size_t)t * V, *b = want + (size_t)t * V;
        const double row_max = logit_row_max(b, V);
        for (int j = 0; j < V; j++) {
            double err = logit_error(a[j], b[j], row_max);
            max_err = isnan(err) ? INFINITY : fmax(max_err, err);
        }
    }
    return max_err;
}

static long long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

// Multiply-adds per token outside attention over the cache: L·12d² (blocks) + V·d (the LM head).
static long long cost_per_token(const Config *c) {
    return (long long)c->n_layer * 12 * c->n_embd * c->n_embd + (long long)c->vocab_size * c->n_embd;
}

// One role's model against its fixture, fed all at once and token by token.
static void check_role(const char *role, Config *cfg_out) {
    char dir[128], path[160];
    snprintf(dir, sizeof dir, "%s/%s", PAIR_DIR, role);
    snprintf(path, sizeof path, "%s/%s.bin", SHIPPED_DIR, role);
    Expected e;
    if (!shipped_expected(&e, path)) return;
    Err err = {{0}};
    ThreadPool *pool = pool_create(1, &err);
    Model model;
    KVCache cache;
    bool ok = pool && model_load(&model, dir, pool, &err) == 0;
    CHECK(ok, "%s: cannot load: %s", dir, err.msg);
    if (ok) {
        *cfg_out = model.cfg;
        CHECK(model.cfg.vocab_size == e.V, "%s: V = %d, the fixture says %d", dir, model.cfg.vocab_size, e.V);
        float *logits = malloc(sizeof(float) * e.T * e.V);
        for (int by_one = 0; by_one < 2 && model.cfg.vocab_size == e.V; by_one++) {
            CHECK(model_kv_init(&model, &cache, &err) == 0, "%s: kv cache: %s", dir, err.msg);
            bool fed = true;
            if (by_one) {
                for (int t = 0; t < e.T && fed; t++)
                    fed = model_forward(&model, &cache, e.tokens + t, 1, logits + (size_t)t * e.V, true, &err) == 0;
            } else {
                fed = model_forward(&model, &cache, e.tokens, e.T, logits, true, &err) == 0;
            }
            CHECK(fed, "%s: model_forward failed: %s", dir, err.msg);
            if (fed) {
                double m = max_error(logits, e.logits, e.T, e.V);
                CHECK(m <= LOGIT_TOLERANCE, "%s (%s): max error %.2e > %.0e", dir,
                      by_one ? "token by token" : "at once", m, LOGIT_TOLERANCE);
                printf("    %-22s %-16s max error %.1e\n", dir, by_one ? "token by token" : "all at once", m);
            }
            kv_free(&cache);
        }
        free(logits);
        model_free(&model);
    }
    if (pool) pool_free(pool);
    expected_free(&e);
}

TEST(weights_match_reference) {
    Config target = {0}, draft = {0};
    check_role("target", &target);
    check_role("draft", &draft);
    if (!target.vocab_size || !draft.vocab_size) return;
    CHECK(target.vocab_size == draft.vocab_size, "vocabularies differ: %d vs %d", target.vocab_size,
          draft.vocab_size);
    long long ct = cost_per_token(&target), cd = cost_per_token(&draft);
    CHECK(15 * cd <= ct, "the draft costs %lld multiply-adds per token, over 1/15 of the target's %lld", cd, ct);
    printf("    cost per token: target %lld, draft %lld (1/%.1f)\n", ct, cd, (double)ct / cd);
}

TEST(weights_files) {
    static const char *const files[] = {"config.json", "model.safetensors", "tokenizer.json", "vocab.json",
                                        "merges.txt"};
    for (int r = 0; r < 2; r++) {
        const char *role = r ? "draft" : "target";
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
            char path[160];
            snprintf(path, sizeof path, "%s/%s/%s", PAIR_DIR, role, files[i]);
            long long n = file_size(path);
            CHECK(n > 0 && n < 100000000, "%s: %lld bytes (must exist and be under 100 MB)", path, n);
        }
    }
    long long target_bytes = file_size(PAIR_DIR "/target/model.safetensors");
    CHECK(target_bytes >= 64ll << 20, "the target's weights are %lld bytes, under 64 MiB", target_bytes);
}

// Both folders carry the same tokenizer: same ids for a line of Python, and they decode back to it.
TEST(weights_tokenizers_agree) {
    static const char text[] = "    def __repr__(self):\n        return f'<{type(self).__name__} {self.x!r}>'\n";
    int *ids[2] = {NULL, NULL}, n[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        char dir[64];
        snprintf(dir, sizeof dir, "%s/%s", PAIR_DIR, r ? "draft" : "target");
        Tokenizer tok;
        Err err = {{0}};
        if (tokenizer_load_dir(&tok, dir, &err)) {
            CHECK(false, "%s: %s", dir, err.msg);
            continue;
        }
        CHECK(tokenizer_eot_id(&tok) == tokenizer_vocab_size(&tok) - 1, "%s: <|endoftext|> is not the last id", dir);
        CHECK(tokenizer_encode(&tok, text, strlen(text), false, &ids[r], &n[r], &err) == 0, "%s: %s", dir, err.msg);
        char *back = NULL;
        size_t len = 0;
        if (ids[r] && tokenizer_decode(&tok, ids[r], n[r], &back, &len, &err) == 0) {
            CHECK(len == strlen(text) && memcmp(back, text, len) == 0, "%s: decode(encode(text)) != text", dir);
            free(back);
        }
        CHECK(n[r] > 0 && n[r] < (int)strlen(text) / 2, "%s: %d tokens for %zu bytes", dir, n[r], strlen(text));
        tokenizer_free(&tok);
    }
    CHECK(n[0] == n[1] && ids[0] && ids[1] && memcmp(ids[0], ids[1], sizeof(int) * n[0]) == 0,
          "target and draft tokenize differently");
    free(ids[0]);
    free(ids[1]);
}
