// test_batch.c — model_forward_batch: several sequences' rows in one forward, each on its own KV cache.
//
// The oracle is each sequence alone: every sequence of a batch — a prompt, a chain of drafts, a token tree, some
// rows wanting every logit and some only their last — gets bit for bit the logits and the K/V rows that
// model_forward or model_forward_tree gives it on a cache of its own, whatever else is in the batch and whatever
// the thread count. Checked on every family of ../shared/fixtures/hf as stored, in q8 and in q4, on 1 and 2
// threads, with batches large enough that a sequence's rows straddle two of the forward's chunks; rounds roll
// each sequence back as speculative decoding does (a chain truncated, a tree cut to one path), so that stale rows
// past a cache's length are there to be misread. Then the debug build's rollback check over batched rounds: each
// sequence's cache, after each rollback, equals a cache fed only its own committed tokens (a row that read another
// sequence's cache would fail it), and the batch's refusals.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "hf_expected.h"
#include "model/model.h"
#include "random_checkpoint.h"

enum {
    N_SEQ = 5,          // sequences in a batch
    MIN_PROMPT = 14,    // prompts of 14..20 tokens: 5 of them are more rows than a chunk of 64
    MAX_PROMPT = 20,
    MAX_ROWS = 8,       // a round's rows per sequence: a chain of drafts or a tree
    ROUNDS = 3,         // after the prompts: 20 + 3 · 8 = 44 ≤ the smallest fixture's 64 positions
};

typedef struct {
    KVCache alone, batched;  // the same rows, fed alone and in batches
    int tokens[MAX_PROMPT];
    int parent[MAX_ROWS];
    int T;
    bool tree, all_logits;
} Sequence;

// Whether two caches hold the same length and bit-identical K and V in every row [0, len).
static bool same_rows(const KVCache *a, const KVCache *b) {
    if (a->len != b->len) return false;
    for (int layer = 0; layer < a->n_layer; layer++)
        for (int head = 0; head < a->n_head; head++) {
            for (int i = 0; i < a->hd; i++)
                if (memcmp(kv_keys(a, layer, head) + (size_t)i * a->ld_k, kv_keys(b, layer, head) + (size_t)i * b->ld_k,
                           sizeof(float) * a->len))
                    return false;
            if (memcmp(kv_values(a, layer, head), kv_values(b, layer, head), sizeof(float) * a->len * a->hd))
                return false;
        }
    return true;
}

// Feeds q's rows alone onto q->alone; its logits into logits ([T, V] or [V]).
static bool feed_alone(Model *m, Sequence *q, float *logits, const char *what) {
    Err err;
    const int ok = q->tree ? model_forward_tree(m, &q->alone, q->tokens, q->parent, q->T, logits, &err)
                           : model_forward(m, &q->alone, q->tokens, q->T, logits, q->all_logits, &err);
    CHECK(ok == 0, "%s: alone: %s", what, err.msg);
    return ok == 0;
}

// The batch of the sequences in `members` (each one's rows set) against each fed alone: logits and rows.
static void check_batch_round(Model *m, Sequence *seqs, const int *members, int n, const char *what) {
    const int V = m->n_vocab;
    float *batch_logits = malloc(sizeof(float) * N_SEQ * MAX_PROMPT * V), *alone = malloc(sizeof(float) * MAX_PROMPT * V);
    SequenceRows rows[N_SEQ] = {{0}};
    for (int i = 0; i < n; i++) {
        Sequence *q = &seqs[members[i]];
        rows[i] = (SequenceRows){.cache = &q->batched, .tokens = q->tokens, .T = q->T, .all_logits = q->all_logits,
                                 .parent = q->tree ? q->parent : NULL, .base = q->batched.len};
    }
    Err err;
    CHECK(model_forward_batch(m, rows, n, batch_logits, &err) == 0, "%s: batch: %s", what, err.msg);
    size_t at = 0;  // the batch's logits of the sequence
    for (int i = 0; i < n && !test_failures(); i++) {
        Sequence *q = &seqs[members[i]];
        const int out_rows = q->tree || q->all_logits ? q->T : 1;
        if (!feed_alone(m, q, alone, what)) break;
        CHECK(memcmp(alone, batch_logits + at * V, sizeof(float) * out_rows * V) == 0,
              "%s: sequence %d (%d rows, %s) of a batch of %d: logits differ from its own", what, members[i], q->T,
              q->tree ? "a tree" : "a chain", n);
        CHECK(same_rows(&q->alone, &q->batched), "%s: sequence %d's cache rows differ from its own", what,
              members[i]);
        at += out_rows;
    }
    free(batch_logits);
    free(alone);
}

// Rolls both caches of q back as a round's end does: a chain to its accepted drafts, a tree to one path.
static void roll_back(Sequence *q, int len_before) {
    if (!q->tree) {
        const int keep = len_before + test_rand_int(0, q->T);
        kv_truncate(&q->alone, keep);
        kv_truncate(&q->batched, keep);
        return;
    }
    int rows[MAX_ROWS], n = 0;  // the path to a random row, from the row back to the cache, then reversed
    for (int node = test_rand_int(0, q->T - 1); node >= 0; node = q->parent[node]) rows[n++] = node;
    for (int i = 0; i < n / 2; i++) {
        const int swap = rows[i];
        rows[i] = rows[n - 1 - i];
        rows[n - 1 - i] = swap;
    }
    kv_keep_path(&q->alone, len_before, rows, n);
    kv_keep_path(&q->batched, len_before, rows, n);
}

// One model: the prompts of N_SEQ sequences in one batch, then ROUNDS rounds in which a random subset (in random
// order) feeds a chain or a tree of up to MAX_ROWS rows and rolls back.
static void check_model(Model *m, const char *what) {
    Err err;
    Sequence seqs[N_SEQ];
    const int V = m->cfg.vocab_size;
    for (int i = 0; i < N_SEQ; i++) {
        CHECK(model_kv_init(m, &seqs[i].alone, &err) == 0 && model_kv_init(m, &seqs[i].batched, &err) == 0, "%s",
              err.msg);
        seqs[i].T = test_rand_int(MIN_PROMPT, MAX_PROMPT);
        seqs[i].tree = false;
        seqs[i].all_logits = test_rand_int(0, 1);
        for (int t = 0; t < seqs[i].T; t++) seqs[i].tokens[t] = test_rand_int(0, V - 1);
    }
    int members[N_SEQ];
    for (int i = 0; i < N_SEQ; i++) members[i] = i;
    if (!test_failures()) check_batch_round(m, seqs, members, N_SEQ, what);
    for (int round = 0; round < ROUNDS && !test_failures(); round++) {
        for (int i = N_SEQ - 1; i > 0; i--) {  // a random order, then its first n
            const int j = test_rand_int(0, i), swap = members[i];
            members[i] = members[j];
            members[j] = swap;
        }
        const int n = test_rand_int(1, N_SEQ);
        int len_before[N_SEQ];
        for (int i = 0; i < n; i++) {
            Sequence *q = &seqs[members[i]];
            len_before[i] = q->batched.len;
            q->T = test_rand_int(1, MAX_ROWS);
            q->tree = test_rand_int(0, 1);
            q->all_logits = q->tree || test_rand_int(0, 1);
            for (int t = 0; t < q->T; t++) {
                q->tokens[t] = test_rand_int(0, V - 1);
                q->parent[t] = test_rand_int(-1, t - 1);
            }
        }
        char label[400];
        snprintf(label, sizeof label, "%s, round %d", what, round + 1);
        check_batch_round(m, seqs, members, n, label);
        for (int i = 0; i < n && !test_failures(); i++) roll_back(&seqs[members[i]], len_before[i]);
    }
    for (int i = 0; i < N_SEQ; i++) {
        kv_free(&seqs[i].alone);
        kv_free(&seqs[i].batched);
    }
}

static void check_fixtures(Quant quant) {
    for (int f = 0; f < N_HF_FIXTURES && !test_failures(); f++)
        for (int threads = 1; threads <= 2 && !test_failures(); threads++) {
            char dir[256], what[320];
            snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[f]);
            snprintf(what, sizeof what, "%s (%s, %d thread%s)", HF_FIXTURE_NAMES[f], quant_name(quant), threads,
                     threads > 1 ? "s" : "");
            Err err;
            ThreadPool *pool = pool_create(threads, &err);
            Model m;
            CHECK(pool && model_load_quantized(&m, dir, pool, quant, &err) == 0, "%s: %s", what, err.msg);
            if (test_failures()) break;
            m.work_per_thread = 0;  // every job split over all the threads, small as the model is
            check_model(&m, what);
            model_free(&m);
            pool_free(pool);
        }
}

TEST(batch_forward_each_sequence_as_alone) { check_fixtures(QUANT_NONE); }
TEST(batch_forward_each_sequence_as_alone_q8) { check_fixtures(QUANT_Q8); }
TEST(batch_forward_each_sequence_as_alone_q4) { check_fixtures(QUANT_Q4); }

// The rollback check over batched rounds: N_SEQ sequences of a random Llama-shaped model (grouped-query attention,
// rotary positions) prefill in one batch, then play rounds as speculative decoding does — each feeds its newest
// committed token and up to 4 drafts (random tokens), all in one batch, keeps some and rolls back the rest — and
// after every rollback each sequence's cache passes model_check_rollback against a cache fed only its own committed
// tokens: no row of it was written or read for another sequence.
TEST(batch_forward_rollback_check_per_sequence) {
    enum { POSITIONS = 48, VOCAB = 50, PREFILL = 12, DRAFTS = 4 };
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/specdec-batch-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    const RandomCheckpoint spec = {.model_type = "llama", .n_layer = 2, .n_embd = 32, .n_head = 4, .n_kv_head = 2,
                                   .vocab_size = VOCAB, .n_positions = POSITIONS, .scale = 0.3f, .seed = 5};
    Err err;
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    ThreadPool *pool = pool_create(2, &err);
    Model m;
    CHECK(pool && model_load(&m, dir, pool, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    KVCache caches[N_SEQ];
    RollbackCheck checks[N_SEQ];
    memset(checks, 0, sizeof checks);
    int tokens[N_SEQ][POSITIONS], committed[N_SEQ];
    SequenceRows rows[N_SEQ];
    float *logits = malloc(sizeof(float) * N_SEQ * (DRAFTS + 1) * VOCAB);
    for (int i = 0; i < N_SEQ; i++) {
        CHECK(model_kv_init(&m, &caches[i], &err) == 0, "%s", err.msg);
        for (int p = 0; p < POSITIONS; p++) tokens[i][p] = test_rand_int(0, VOCAB - 1);
        committed[i] = PREFILL + 1;  // the prompt and the token sampled after it
        rows[i] = (SequenceRows){.cache = &caches[i], .tokens = tokens[i], .T = PREFILL};
    }
    CHECK(model_forward_batch(&m, rows, N_SEQ, logits, &err) == 0, "prefill: %s", err.msg);
    for (int round = 0; !test_failures(); round++) {
        int n = 0;  // the sequences with room for another round
        for (int i = 0; i < N_SEQ; i++) {
            const int room = POSITIONS - committed[i];  // the cache holds committed − 1 and gets k + 1 more
            if (room < 1) continue;
            const int k = test_rand_int(0, room - 1 < DRAFTS ? room - 1 : DRAFTS);
            rows[n++] = (SequenceRows){.cache = &caches[i], .tokens = tokens[i] + committed[i] - 1, .T = k + 1,
                                       .all_logits = true};
        }
        if (n == 0) break;
        CHECK(model_forward_batch(&m, rows, n, logits, &err) == 0, "round %d: %s", round, err.msg);
        for (int r = 0; r < n && !test_failures(); r++) {
            const int i = (int)(rows[r].cache - caches);
            committed[i] += test_rand_int(1, rows[r].T);  // the accepted drafts and one more token
            kv_truncate(&caches[i], committed[i] - 1);
            char name[32];
            snprintf(name, sizeof name, "target (sequence %d)", i);
            CHECK(model_check_rollback(&m, &caches[i], &checks[i], tokens[i], PREFILL, name, &err) == 0,
                  "round %d: %s", round, err.msg);
        }
    }
    for (int i = 0; i < N_SEQ; i++) {
        rollback_check_free(&checks[i]);
        kv_free(&caches[i]);
    }
    free(logits);
    model_free(&m);
    pool_free(pool);
    random_checkpoint_remove(dir);
}

// A batch that cannot run feeds nothing: two sequences sharing a cache, and one sequence's bad rows (named by its
// place in the batch) beside good ones leave every cache as it was.
TEST(batch_forward_refusals) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[0]);
    Err err;
    ThreadPool *pool = pool_create(1, &err);
    Model m;
    CHECK(pool && model_load(&m, dir, pool, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    KVCache a, b;
    CHECK(model_kv_init(&m, &a, &err) == 0 && model_kv_init(&m, &b, &err) == 0, "%s", err.msg);
    float *logits = malloc(sizeof(float) * 4 * m.n_vocab);
    const int tokens[] = {1, 2, 3}, bad[] = {1, m.cfg.vocab_size}, parent[] = {-1, 5};
    struct {
        SequenceRows second;
        const char *says;
    } cases[] = {
        {{.cache = &a, .tokens = tokens, .T = 1}, "sequences 0 and 1 of the batch share one KV cache"},
        {{.cache = &b, .tokens = bad, .T = 2}, "sequence 1 of the batch: token id"},
        {{.cache = &b, .tokens = tokens, .T = 0}, "sequence 1 of the batch: no tokens"},
        {{.cache = &b, .tokens = tokens, .T = 2, .parent = parent}, "sequence 1 of the batch: token tree: row 1 follows"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const SequenceRows rows[] = {{.cache = &a, .tokens = tokens, .T = 3}, cases[k].second};
        CHECK(model_forward_batch(&m, rows, 2, logits, &err) == -1 && strstr(err.msg, cases[k].says) &&
                  a.len == 0 && b.len == 0,
              "case %zu: expected an error saying \"%s\", got \"%s\" (lengths %d, %d)", k, cases[k].says, err.msg,
              a.len, b.len);
    }
    CHECK(model_forward_batch(&m, NULL, 0, logits, &err) == -1 && strstr(err.msg, "no sequences"), "%s", err.msg);
    free(logits);
    kv_free(&a);
    kv_free(&b);
    model_free(&m);
    pool_free(pool);
}
