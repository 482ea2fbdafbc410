// test_conversation.c — conversations that keep their caches (conversation.h) and stop hooks (SpecParams.stop), on
// a tiny random pair: each turn prefills only what its ids add to the committed ones; its reply equals a fresh
// run's over the whole conversation (greedy, and sampled under coupling, with every drafter, pipelined and not);
// the logits after a turn equal, bit for bit, those of one fresh forward over the conversation; a stop cuts the
// reply exactly where the hook says, mid-run, and the caches end there (the debug build checks them after every
// rollback).
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model_pair.h"
#include "speculative/conversation.h"

enum { V = 48, N_CTX = 256, MAX_REPLY = 24 };

typedef struct {
    ModelPair models;
    Drafters drafters;
} Pair;

typedef enum { DRAFT_NONE, DRAFT_MODEL, DRAFT_LOOKUP, DRAFT_STAGED, N_KINDS } Kind;
static const char *const KIND_NAMES[] = {"target-only", "draft model", "lookup", "lookup + draft model"};

// A 3-block target and a 1-block draft of the same seed; a low scale makes greedy text repeat, which the lookup
// copies.
static void pair_open(Pair *p) {
    RandomCheckpoint spec = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = V, .n_positions = N_CTX,
                             .scale = 0.5f, .seed = 11};
    RandomCheckpoint draft = spec;
    draft.n_layer = 1;
    // q8: OpenBLAS never takes a q8 matmul, so the forward is batch invariant at every length on every kernel variant
    // (model.h), and a turn's logits can equal a fresh run's bit for bit wherever the test runs.
    model_pair_open(&p->models, &spec, &draft, V, 2, QUANT_Q8);
}

static Drafter *drafter_for(Pair *p, Kind kind, const SpecParams *params) {
    static const DrafterKind kinds[] = {DRAFTER_NONE, DRAFTER_MODEL, DRAFTER_LOOKUP, DRAFTER_STAGED};
    Err err = {""};
    CHECK(drafter_open(&p->drafters, kinds[kind], &p->models.draft, params, 0.0f, 1, &err) == 0, "%s", err.msg);
    return p->drafters.drafter;
}

static void drafter_done(Pair *p) { drafter_close(&p->drafters); }

// A fresh run over ids (its own caches and drafter).
static int fresh_reply(Pair *p, Kind kind, const int *ids, int n, const SpecParams *params, int *out) {
    Pair fresh = *p;
    fresh.drafters = (Drafters){0};
    Drafter *d = drafter_for(&fresh, kind, params);
    SpecStats stats;
    Err err = {""};
    int n_out = 0;
    CHECK(speculative_generate(&p->models.target, d, ids, n, params, out, &n_out, &stats, &err) == 0, "%s", err.msg);
    drafter_done(&fresh);
    return n_out;
}

// Turn k's ids: the last turn's committed ids but their last token (as a template's text after a reply can
// encode its last token otherwise), then new random tokens standing for the template's text and a user message.
static int next_turn(const int *committed, int n_committed, int *ids) {
    int n = n_committed > 1 ? n_committed - 1 : 0;
    if (n) memcpy(ids, committed, (size_t)n * sizeof *ids);
    int extra = test_rand_int(3, 12);
    for (int k = 0; k < extra; k++) ids[n++] = test_rand_int(0, V - 1);
    return n;
}

static void three_turns(Pair *p, Kind kind, const SpecParams *params, const char *what) {
    Conversation c;
    Err err = {""};
    Drafter *d = drafter_for(p, kind, params);
    CHECK(conversation_init(&c, &p->models.target, d, &err) == 0, "%s", err.msg);
    int ids[N_CTX], out[MAX_REPLY], want[MAX_REPLY], n_ids = 0, n_committed = 0;
    for (int turn = 0; turn < 3 && !test_failures(); turn++) {
        n_ids = next_turn(c.committed, n_committed, ids);
        int n_out = 0, reused = 0;
        SpecStats stats;
        CHECK(conversation_reply(&c, ids, n_ids, params, out, &n_out, &stats, &reused, &err) == 0, "%s", err.msg);
        int expect_reused = turn == 0 ? 0 : n_committed - 1;
        CHECK(reused == expect_reused, "%s, turn %d: %d ids reused, wanted %d (the committed but the last)", what,
              turn, reused, expect_reused);
        int n_want = fresh_reply(p, kind, ids, n_ids, params, want);
        CHECK(n_out == n_want && memcmp(out, want, (size_t)n_out * sizeof *out) == 0,
              "%s, turn %d: the reply (%d tokens) differs from a fresh run's (%d)", what, turn, n_out, n_want);
        n_committed = c.n;
        CHECK(n_committed == n_ids + n_out && c.cache.len == n_committed - 1, "%s: committed %d, cache %d", what,
              n_committed, c.cache.len);
    }
    if (test_failures()) {
        conversation_free(&c);
        drafter_done(p);
        return;
    }
    // The logits of the next position: through the conversation's cache, and through one fresh forward.
    float *a = malloc(sizeof(float) * V), *b = malloc(sizeof(float) * V);
    KVCache fresh;
    CHECK(model_kv_init(&p->models.target, &fresh, &err) == 0, "%s", err.msg);
    CHECK(model_forward(&p->models.target, &c.cache, c.committed + c.n - 1, 1, a, false, &err) == 0 &&
              model_forward(&p->models.target, &fresh, c.committed, c.n, b, false, &err) == 0,
          "%s", err.msg);
    CHECK(memcmp(a, b, sizeof(float) * V) == 0, "%s: the logits after 3 turns differ from a fresh run's", what);
    kv_free(&fresh);
    free(a);
    free(b);
    conversation_free(&c);
    drafter_done(p);
}

TEST(conversation_turns_equal_fresh_runs) {
    Pair p = {0};
    pair_open(&p);
    SpecParams greedy = {.sampling = {.top_p = 1.0f}, .max_tokens = MAX_REPLY, .eos_id = -1, .policy = GAMMA_FIXED,
                         .gamma = 4, .seed = 3};
    SpecParams sampled = greedy;
    sampled.sampling = (SamplingParams){.temperature = 0.8f, .top_p = 1.0f};
    sampled.sampler = SAMPLER_COUPLED;
    for (int pipelined = 0; pipelined < 2; pipelined++)  // a chain drafted ahead never outlives its turn
        for (int kind = 0; kind < N_KINDS && !test_failures(); kind++) {
            greedy.pipeline = sampled.pipeline = pipelined ? PIPELINE_ON : PIPELINE_OFF;
            char what[64];
            snprintf(what, sizeof what, "%s, greedy%s", KIND_NAMES[kind], pipelined ? ", pipelined" : "");
            three_turns(&p, (Kind)kind, &greedy, what);
            snprintf(what, sizeof what, "%s, temperature 0.8%s", KIND_NAMES[kind], pipelined ? ", pipelined" : "");
            three_turns(&p, (Kind)kind, &sampled, what);
        }
    model_pair_close(&p.models);
}

// Stops after the k-th committed token.
typedef struct {
    int seen, at;
} StopAfter;

static bool stop_after(void *ctx, int id) {
    (void)id;
    StopAfter *s = ctx;
    return ++s->seen == s->at;
}

TEST(stop_hook_cuts_exactly) {
    Pair p = {0};
    pair_open(&p);
    int prompt[16], full[MAX_REPLY], out[MAX_REPLY];
    for (int i = 0; i < 16; i++) prompt[i] = test_rand_int(0, V - 1);
    for (int kind = 0; kind < N_KINDS && !test_failures(); kind++)
        for (int sampled = 0; sampled < 2; sampled++) {
            SpecParams params = {.sampling = {.top_p = 1.0f}, .max_tokens = MAX_REPLY, .eos_id = -1,
                                 .policy = GAMMA_FIXED, .gamma = 6, .seed = 5};
            if (sampled) {
                params.sampling = (SamplingParams){.temperature = 1.0f, .top_p = 1.0f};
                params.sampler = SAMPLER_COUPLED;
            }
            int n_full = fresh_reply(&p, (Kind)kind, prompt, 16, &params, full);
            StopAfter stop = {.at = test_rand_int(1, n_full)};
            params.stop = stop_after;
            params.stop_ctx = &stop;
            Conversation c;
            Err err = {""};
            int n_out = 0, reused = 0;
            SpecStats stats;
            Drafter *d = drafter_for(&p, (Kind)kind, &params);
            CHECK(conversation_init(&c, &p.models.target, d, &err) == 0 &&
                      conversation_reply(&c, prompt, 16, &params, out, &n_out, &stats, &reused, &err) == 0,
                  "%s", err.msg);
            CHECK(n_out == stop.at && memcmp(out, full, (size_t)n_out * sizeof *out) == 0,
                  "%s%s: stopped at %d tokens, wanted the first %d of the full reply", KIND_NAMES[kind],
                  sampled ? " sampled" : "", n_out, stop.at);
            CHECK(c.cache.len == 16 + n_out - 1, "%s: the cache holds %d tokens, wanted %d", KIND_NAMES[kind],
                  c.cache.len, 16 + n_out - 1);
            conversation_free(&c);
            drafter_done(&p);
        }
    model_pair_close(&p.models);
}
