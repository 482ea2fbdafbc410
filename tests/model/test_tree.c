// test_tree.c — the forward pass over a token tree (model_forward_tree) and the compaction of its cache rows to
// one path (kv_keep_path).
//
// Batch invariance extends to trees (model.h): every row of a tree forward has the logits, bit for bit, of the
// last token of a chain over its path from the cache — fed onto the same committed rows with model_forward, in
// chunks of up to CHAIN_CHUNK tokens (any chunks give the same bits: test_forward.c). Checked
// on random trees of up to 64 rows (uniform random parents, deep ones, chains, several roots), over a GPT-2 and a
// Llama-family checkpoint with grouped-query attention (and a Qwen3 one: biases, q/k norms), with every kernel
// variant, 1 and 2 threads (every job split), weights as stored and q8.
//
// A tree fed in pieces (model_extend_tree: a drafter's levels) gives the logits and cache rows of the tree fed
// whole. After kv_keep_path of one path, the cache is bit for bit the cache of a chain fed the committed tokens,
// the next forward's logits are the chain's, and the debug build's rollback check (model_check_rollback) passes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "random_checkpoint.h"

enum { N_POSITIONS = 160, VOCAB = 96, CHAIN_CHUNK = 16, MAX_PREFIX = 40, ROUNDS = 24 };

static const RandomCheckpoint SPECS[] = {
    {.model_type = "gpt2", .n_layer = 2, .n_embd = 48, .n_head = 3, .vocab_size = VOCAB, .n_positions = N_POSITIONS,
     .scale = 0.3f, .seed = 5},
    {.model_type = "llama", .n_layer = 2, .n_embd = 64, .n_head = 8, .n_kv_head = 2, .n_inner = 96,
     .vocab_size = VOCAB, .n_positions = N_POSITIONS, .untied = true, .scale = 0.3f, .seed = 6},
    {.model_type = "qwen3", .n_layer = 2, .n_embd = 64, .n_head = 4, .n_kv_head = 2, .n_inner = 96,
     .vocab_size = VOCAB, .n_positions = N_POSITIONS, .bf16 = true, .scale = 0.3f, .seed = 7},
};
enum { N_SPECS = sizeof SPECS / sizeof SPECS[0] };

static const char *const VARIANTS[] = {"scalar", "avx2", "avx512", "neon"};
enum { N_VARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

typedef struct {
    ThreadPool *pool;
    Model model;
    KVCache cache;
    int threads;    // the tree forwards' (the chains to compare with run on one: thread invariance is checked too)
    char what[96];  // "llama, avx2, 2 threads, q8": for messages
} Subject;

// The checkpoint in dir with kernel variant isa, on `threads` threads, quantized as `quant` says; false if this
// CPU or binary lacks the variant.
static bool subject_open(Subject *s, const char *dir, const char *model_type, const char *isa, int threads,
                         Quant quant) {
    Err err;
    *s = (Subject){0};
    snprintf(s->what, sizeof s->what, "%s, %s, %d thread%s%s", model_type, isa, threads, threads > 1 ? "s" : "",
             quant == QUANT_Q8 ? ", q8" : "");
    setenv("SPECDEC_ISA", isa, 1);
    s->pool = pool_create(threads, &err);
    const bool loaded = s->pool && model_load_quantized(&s->model, dir, s->pool, quant, &err) == 0;
    unsetenv("SPECDEC_ISA");
    if (!loaded) {
        CHECK(strcmp(isa, "scalar") != 0, "%s: %s", s->what, err.msg);  // only a SIMD variant may be missing
        if (s->pool) pool_free(s->pool);
        return false;
    }
    s->model.work_per_thread = 0;  // every job split over all the threads, small as the model is
    s->threads = threads;
    CHECK(model_kv_init(&s->model, &s->cache, &err) == 0, "%s", err.msg);
    return true;
}

static void subject_close(Subject *s) {
    kv_free(&s->cache);
    model_free(&s->model);
    pool_free(s->pool);
}

static void random_tokens(int *tokens, int n) {
    for (int i = 0; i < n; i++) tokens[i] = test_rand_int(0, VOCAB - 1);
}

// Random parents for T rows: shape 0, each row after a uniformly random earlier row or the cache (bushy); 1, after
// the row before it 4 times in 5 (deep: long leading chains, then branches); 2, a chain; 3, every row after the
// cache (T roots).
static void random_tree(int *parent, int T, int shape) {
    for (int i = 0; i < T; i++) {
        switch (shape) {
        case 0: parent[i] = test_rand_int(-1, i - 1); break;
        case 1: parent[i] = test_rand_int(0, 4) ? i - 1 : test_rand_int(-1, i - 1); break;
        case 2: parent[i] = i - 1; break;
        default: parent[i] = -1; break;
        }
    }
}

// Row i's path from the cache, rows in increasing order, into rows; returns its length, depth(i) + 1.
static int path_of(const int *parent, int i, int *rows) {
    int n = 0;
    for (int r = i; r >= 0; r = parent[r]) n++;
    for (int r = i, k = n - 1; r >= 0; r = parent[r]) rows[k--] = r;
    return n;
}

// Feeds tokens[0..n) onto the cache as a chain, in chunks of up to CHAIN_CHUNK, on one thread (a hand-off to a
// second thread costs more than these tiny forwards, ms on a loaded machine); the last token's logits in logits
// (n ≥ 1).
static bool feed_chain(Subject *s, const int *tokens, int n, float *logits) {
    Err err;
    s->model.max_threads = 1;
    int done = 0;
    while (done < n) {
        const int k = n - done < CHAIN_CHUNK ? n - done : CHAIN_CHUNK;
        if (model_forward(&s->model, &s->cache, tokens + done, k, logits, false, &err)) {
            CHECK(false, "%s: model_forward: %s", s->what, err.msg);
            break;
        }
        done += k;
    }
    s->model.max_threads = s->threads;
    return done == n;
}

// The committed prefix tokens[0..P) (0 ≤ P ≤ MAX_PREFIX) in an empty cache, fed in one forward on one thread (the
// prefill: a cache to compare with must be fed it the same way, since OpenBLAS may take a long one, and its
// results depend on how the columns are split between threads).
static bool fill_prefix(Subject *s, const int *prefix, int P) {
    Err err;
    float *logits = malloc(sizeof(float) * VOCAB);
    kv_truncate(&s->cache, 0);
    s->model.max_threads = 1;
    const bool ok = P == 0 || model_forward(&s->model, &s->cache, prefix, P, logits, false, &err) == 0;
    s->model.max_threads = s->threads;
    CHECK(ok, "%s: prefill: %s", s->what, err.msg);
    free(logits);
    return ok;
}

// The chains over every row's path, into chain [T, V]: the rows visited depth first, so that the cache holds
// the path of the row's parent, written by the chains before, when the row's own token is fed onto it; one row
// in four (and every root) has its whole path fed anew, in chunks of CHAIN_CHUNK. A chain over a path then has
// been fed in pieces of every size, which batch invariance makes all the same.
static bool chains_under(Subject *s, int P, const int *tokens, const int *parent, int T, int row, float *chain) {
    int path[TREE_MAX_ROWS], path_tokens[TREE_MAX_ROWS];
    const int n = path_of(parent, row, path);
    kv_truncate(&s->cache, P + n - 1);  // the parent's path
    bool ok;
    if (n == 1 || test_rand_int(0, 3) == 0) {
        for (int k = 0; k < n; k++) path_tokens[k] = tokens[path[k]];
        kv_truncate(&s->cache, P);
        ok = feed_chain(s, path_tokens, n, chain + (size_t)row * VOCAB);
    } else {
        ok = feed_chain(s, &tokens[row], 1, chain + (size_t)row * VOCAB);
    }
    for (int child = row + 1; child < T && ok; child++)
        if (parent[child] == row) ok = chains_under(s, P, tokens, parent, T, child, chain);
    return ok;
}

// One random tree of T rows and shape `shape` after a random committed prefix: every row's logits against the
// chain over its path.
static void check_tree_against_chains(Subject *s, int T, int shape) {
    int prefix[MAX_PREFIX], parent[TREE_MAX_ROWS], tokens[TREE_MAX_ROWS];
    const int P = test_rand_int(0, 3) ? test_rand_int(1, MAX_PREFIX) : 0;
    float *logits = malloc(sizeof(float) * TREE_MAX_ROWS * VOCAB);
    float *chain = malloc(sizeof(float) * TREE_MAX_ROWS * VOCAB);
    Err err;
    random_tree(parent, T, shape);
    random_tokens(tokens, T);
    random_tokens(prefix, P);
    if (fill_prefix(s, prefix, P)) {
        CHECK(model_forward_tree(&s->model, &s->cache, tokens, parent, T, logits, &err) == 0, "%s: %s", s->what,
              err.msg);
        CHECK(s->cache.len == P + T, "%s: the cache holds %d rows after a tree of %d on %d", s->what, s->cache.len,
              T, P);
        bool ok = true;
        for (int root = 0; root < T && ok; root++)
            if (parent[root] == -1) ok = chains_under(s, P, tokens, parent, T, root, chain);
        for (int i = 0; i < T && ok; i++) {
            int depth = 0;
            for (int r = parent[i]; r >= 0; r = parent[r]) depth++;
            CHECK(memcmp(chain + (size_t)i * VOCAB, logits + (size_t)i * VOCAB, sizeof(float) * VOCAB) == 0,
                  "%s: tree of %d rows (shape %d) after %d positions: row %d (depth %d) differs from the chain over "
                  "its path", s->what, T, shape, P, i, depth);
        }
    }
    free(logits);
    free(chain);
}

// Whether the rows [0, len) of two caches are bit-identical, keys and values, in every layer and head.
static bool same_rows(const KVCache *a, const KVCache *b, int len) {
    bool same = true;
    for (int l = 0; l < a->n_layer; l++)
        for (int h = 0; h < a->n_head; h++) {
            for (int i = 0; i < a->hd; i++)
                same &= memcmp(kv_keys(a, l, h) + (size_t)i * a->ld_k, kv_keys(b, l, h) + (size_t)i * b->ld_k,
                               sizeof(float) * len) == 0;
            same &= memcmp(kv_values(a, l, h), kv_values(b, l, h), sizeof(float) * len * a->hd) == 0;
        }
    return same;
}

// A random tree fed whole (model_forward_tree), then again in random consecutive pieces (model_extend_tree), after
// the same committed prefix: the same logits and cache rows, bit for bit.
static void check_tree_grown_in_pieces(Subject *s, int T, int shape) {
    int prefix[MAX_PREFIX], parent[TREE_MAX_ROWS], tokens[TREE_MAX_ROWS];
    const int P = test_rand_int(0, MAX_PREFIX);
    float *whole = malloc(sizeof(float) * TREE_MAX_ROWS * VOCAB);
    float *pieces = malloc(sizeof(float) * TREE_MAX_ROWS * VOCAB);
    KVCache whole_cache;
    Err err;
    random_tree(parent, T, shape);
    random_tokens(tokens, T);
    random_tokens(prefix, P);
    CHECK(model_kv_init(&s->model, &whole_cache, &err) == 0, "%s", err.msg);
    if (fill_prefix(s, prefix, P)) {
        CHECK(model_forward_tree(&s->model, &s->cache, tokens, parent, T, whole, &err) == 0, "%s: %s", s->what,
              err.msg);
        KVCache fed_whole = s->cache;  // keep its rows: the pieces go to a second cache
        s->cache = whole_cache;
        whole_cache = fed_whole;
        if (fill_prefix(s, prefix, P)) {
            for (int done = 0, n; done < T; done += n) {
                n = test_rand_int(1, T - done);
                float *rows = pieces + (size_t)done * VOCAB;
                CHECK(model_extend_tree(&s->model, &s->cache, P, tokens + done, parent, n, rows, &err) == 0, "%s: %s",
                      s->what, err.msg);
            }
            CHECK(memcmp(whole, pieces, sizeof(float) * T * VOCAB) == 0 && s->cache.len == P + T &&
                      same_rows(&s->cache, &whole_cache, P + T),
                  "%s: a tree of %d rows (shape %d) after %d positions, fed in pieces, differs from the tree fed whole",
                  s->what, T, shape, P);
        }
    }
    kv_free(&whole_cache);
    free(whole);
    free(pieces);
}

// A random checkpoint of SPECS[m] written into a fresh folder; dir is a "/tmp/specdec-tree-XXXXXX" buffer.
static void write_spec(char *dir, int m) {
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    Err err;
    CHECK(random_checkpoint_write(dir, &SPECS[m], &err) == 0, "%s", err.msg);
}

TEST(tree_rows_equal_chains_over_their_paths) {
    for (int m = 0; m < N_SPECS; m++) {
        char dir[] = "/tmp/specdec-tree-XXXXXX";
        write_spec(dir, m);
        for (int v = 0; v < N_VARIANTS; v++)
            for (int threads = 1; threads <= 2; threads++)
                for (int q8 = 0; q8 <= 1; q8++) {
                    Subject s;
                    if (!subject_open(&s, dir, SPECS[m].model_type, VARIANTS[v], threads, q8 ? QUANT_Q8 : QUANT_NONE))
                        continue;
                    check_tree_against_chains(&s, TREE_MAX_ROWS, test_rand_int(0, 1));
                    for (int shape = 0; shape < 4; shape++) check_tree_against_chains(&s, test_rand_int(1, 24), shape);
                    check_tree_grown_in_pieces(&s, test_rand_int(1, TREE_MAX_ROWS), test_rand_int(0, 3));
                    subject_close(&s);
                }
        random_checkpoint_remove(dir);
    }
}

// Rounds as speculative decoding over trees plays them. The cache holds every committed token but the newest; a
// round feeds a tree whose row 0 is the newest committed token and whose other rows descend from it (random
// shapes), keeps the path of a random row (row 0 alone one round in five: every draft rejected) with
// kv_keep_path, and commits the path's tokens and one more (the correction or bonus token). After each round: the
// cache's rows against a chain fed the committed tokens, the logits of the next position (the newest token fed
// onto both, then rolled back), and the rollback check.
static void check_keep_path_rounds(Subject *s, const char *dir, const RandomCheckpoint *spec) {
    Subject chain;
    if (!subject_open(&chain, dir, spec->model_type, s->model.kernels->name, 1, s->model.quant)) return;
    int committed[N_POSITIONS], parent[TREE_MAX_ROWS], tokens[TREE_MAX_ROWS], rows[TREE_MAX_ROWS];
    float *logits = malloc(sizeof(float) * TREE_MAX_ROWS * VOCAB), *want = malloc(sizeof(float) * VOCAB),
          *got = malloc(sizeof(float) * VOCAB);
    const int P = test_rand_int(1, MAX_PREFIX);
    RollbackCheck check = {0};
    Err err;
    random_tokens(committed, P + 1);  // the prefill, and the first token the model itself would have produced
    if (fill_prefix(s, committed, P) && fill_prefix(&chain, committed, P)) {
        for (int round = 0; round < ROUNDS && !test_failures(); round++) {
            const int base = s->cache.len, T = test_rand_int(1, 16);
            if (base + T + 2 > N_POSITIONS) break;
            random_tree(parent + 1, T - 1, round % 4);
            parent[0] = -1;
            for (int i = 1; i < T; i++) parent[i] = parent[i] + 1;  // −1 becomes row 0: one root
            tokens[0] = committed[base];
            random_tokens(tokens + 1, T - 1);
            CHECK(model_forward_tree(&s->model, &s->cache, tokens, parent, T, logits, &err) == 0, "%s", err.msg);
            const int n = path_of(parent, round % 5 == 4 ? 0 : test_rand_int(0, T - 1), rows);
            kv_keep_path(&s->cache, base, rows, n);
            CHECK(s->cache.len == base + n, "%s: kv_keep_path of %d rows left %d, expected %d", s->what, n,
                  s->cache.len, base + n);
            for (int k = 1; k < n; k++) committed[base + k] = tokens[rows[k]];
            committed[base + n] = test_rand_int(0, VOCAB - 1);
            if (!feed_chain(&chain, committed + base, n, want)) break;
            CHECK(same_rows(&s->cache, &chain.cache, s->cache.len),
                  "%s, round %d: after kv_keep_path of %d of %d rows, the cache differs from a chain's", s->what,
                  round, n, T);
            if (!feed_chain(s, committed + base + n, 1, got) || !feed_chain(&chain, committed + base + n, 1, want))
                break;
            kv_truncate(&s->cache, base + n);
            kv_truncate(&chain.cache, base + n);
            CHECK(memcmp(got, want, sizeof(float) * VOCAB) == 0, "%s, round %d: the next position's logits differ "
                  "from a chain's after kv_keep_path", s->what, round);
            s->model.max_threads = 1;  // (its forwards: as feed_chain's)
            CHECK(model_check_rollback(&s->model, &s->cache, &check, committed, P, "target", &err) == 0,
                  "%s, round %d: %s", s->what, round, err.msg);
            s->model.max_threads = s->threads;
        }
    }
    rollback_check_free(&check);
    free(logits);
    free(want);
    free(got);
    subject_close(&chain);
}

TEST(tree_keep_path_equals_a_chain) {
    for (int m = 0; m < N_SPECS; m++) {
        char dir[] = "/tmp/specdec-tree-XXXXXX";
        write_spec(dir, m);
        for (int v = 0; v < N_VARIANTS; v++)
            for (int q8 = 0; q8 <= 1; q8++) {
                Subject s;
                if (!subject_open(&s, dir, SPECS[m].model_type, VARIANTS[v], 2 - q8, q8 ? QUANT_Q8 : QUANT_NONE))
                    continue;
                check_keep_path_rounds(&s, dir, &SPECS[m]);
                subject_close(&s);
            }
        random_checkpoint_remove(dir);
    }
}

// kv_keep_path moves exactly the rows named, in every layer and head, keys and values, and leaves the rows
// before base alone: a cache of distinct values, before and after.
TEST(tree_keep_path_moves_the_rows_named) {
    Err err;
    KVCache c;
    CHECK(kv_init(&c, 2, 3, 40, 5, &err) == 0, "%s", err.msg);
    const int base = 7, T = 12, cases[][5] = {{0, 1, 2, -1}, {0, 1, 4, 9, 11}, {3, 5, -1}, {11, -1}, {-1}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int n = 0;
        while (n < 5 && cases[k][n] >= 0) n++;
        for (int l = 0; l < 2; l++)  // value of (layer, head, position, dimension), keys then values negated
            for (int h = 0; h < 3; h++)
                for (int p = 0; p < base + T; p++)
                    for (int i = 0; i < 5; i++) {
                        kv_keys(&c, l, h)[(size_t)i * c.ld_k + p] = (float)(((l * 3 + h) * 100 + p) * 10 + i);
                        kv_values(&c, l, h)[(size_t)p * 5 + i] = -(float)(((l * 3 + h) * 100 + p) * 10 + i);
                    }
        c.len = base + T;
        kv_keep_path(&c, base, cases[k], n);
        CHECK(c.len == base + n, "case %zu: len %d, expected %d", k, c.len, base + n);
        for (int l = 0; l < 2; l++)
            for (int h = 0; h < 3; h++)
                for (int p = 0; p < base + n; p++)
                    for (int i = 0; i < 5; i++) {
                        const int from = p < base ? p : base + cases[k][p - base];
                        const float want = (float)(((l * 3 + h) * 100 + from) * 10 + i);
                        CHECK(kv_keys(&c, l, h)[(size_t)i * c.ld_k + p] == want &&
                                  kv_values(&c, l, h)[(size_t)p * 5 + i] == -want,
                              "case %zu: layer %d head %d position %d dimension %d is not row %d's", k, l, h, p, i,
                              from);
                    }
    }
    kv_free(&c);
}

// Bad trees are refused with an error naming what is wrong; the cache is left as it was.
TEST(tree_forward_refuses_bad_trees) {
    char dir[] = "/tmp/specdec-tree-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    Err err;
    RandomCheckpoint spec = SPECS[1];
    spec.n_positions = 70;
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    Subject s;
    if (subject_open(&s, dir, spec.model_type, "scalar", 1, QUANT_NONE)) {
        int parent[TREE_MAX_ROWS + 1], tokens[TREE_MAX_ROWS + 1] = {0};
        float *logits = malloc(sizeof(float) * (TREE_MAX_ROWS + 1) * VOCAB);
        random_tree(parent, TREE_MAX_ROWS + 1, 0);
        const struct { int T, row, parent, token, len; const char *says; } bad[] = {
            {TREE_MAX_ROWS + 1, 0, -1, 0, 0, "more than TREE_MAX_ROWS"},
            {0, 0, -1, 0, 0, "no tokens"},
            {5, 3, 3, 0, 0, "row 3 follows row 3, outside [-1, 3)"},
            {5, 2, -2, 0, 0, "row 2 follows row -2"},
            {5, 4, 0, VOCAB, 0, "outside the vocabulary"},
            {8, 0, -1, 0, 63, "context full"},
        };
        for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
            int p[TREE_MAX_ROWS + 1], t[TREE_MAX_ROWS + 1];
            memcpy(p, parent, sizeof p);
            memcpy(t, tokens, sizeof t);
            p[bad[k].row] = bad[k].parent;
            t[bad[k].row] = bad[k].token;
            s.cache.len = bad[k].len;
            CHECK(model_forward_tree(&s.model, &s.cache, t, p, bad[k].T, logits, &err) == -1 &&
                      strstr(err.msg, bad[k].says) && s.cache.len == bad[k].len,
                  "case %zu: expected an error saying \"%s\", got \"%s\" (cache length %d)", k, bad[k].says,
                  err.msg, s.cache.len);
        }
        // A tree grown past the cache's rows or past TREE_MAX_ROWS in all.
        s.cache.len = 10;
        CHECK(model_extend_tree(&s.model, &s.cache, 11, tokens, parent, 1, logits, &err) == -1 &&
                  strstr(err.msg, "first row 11 is outside the cache's 10 rows") && s.cache.len == 10,
              "a tree from row 11 of 10: \"%s\"", err.msg);
        CHECK(model_extend_tree(&s.model, &s.cache, 0, tokens, parent, TREE_MAX_ROWS - 9, logits, &err) == -1 &&
                  strstr(err.msg, "more than TREE_MAX_ROWS") && s.cache.len == 10,
              "a tree of 10 + %d rows: \"%s\"", TREE_MAX_ROWS - 9, err.msg);
        free(logits);
        subject_close(&s);
    }
    random_checkpoint_remove(dir);
}
