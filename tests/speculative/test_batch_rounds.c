// test_batch_rounds.c — batch.h: generations stepping their rounds together give each the tokens it gets alone.
//
// The oracle is speculative_generate of each request alone (same prompt, parameters, seed and drafter kind). Each
// configuration — greedy and sampled, rejection and coupled, every drafter, chains and trees, penalties, a stop
// callback, target-only — runs requests that arrive at random steps into a batch with fewer places than requests (so places
// are reused), some cancelled partway; every finished request's tokens must equal its tokens alone, and a cancelled
// one's a prefix of them; a finished request sampled under rejection sampling plays the rounds it plays alone (its
// γ planned from the request alone: the same rounds, drafts and plain rounds). Prompts are long enough in some requests that their prefill takes several steps of
// BATCH_PREFILL_CHUNK beside the others' rounds, on a tiny Llama-shaped pair and a GPT-2 pair.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "speculative/batch.h"
#include "speculative_support.h"

enum { REQUESTS = 6, PLACES = 3, MAX_PROMPT = 100, MAX_TOKENS = 20, MAX_ARRIVAL = 6 };

typedef struct {
    const char *name;
    DraftKind kind;
    SpecParams params;
    bool stops;  // a stop callback ends the text after a token id ≥ STOP_FROM
} Case;

enum { STOP_FROM = 80 };
static const Penalties PENALTIES = {.repetition = 1.3f, .presence = 0.5f, .frequency = 0.2f};
static bool stop_at_high_id(void *ctx, int id) {
    (void)ctx;
    return id >= STOP_FROM;
}

typedef struct {
    int prompt[MAX_PROMPT], n_prompt;
    SpecParams params;
    int alone[MAX_TOKENS], n_alone;
    SpecStats alone_stats;
    int out[MAX_TOKENS];
    int arrival, id;            // the step it joins at; its place (−1 before, −2 after)
    int cancel_after;           // leaves after this many steps in the batch, finished or not (0: never)
    int steps;
    Drafters drafters;
} Request;

// A random request under `config`: a prompt of 2..8 ids (random_prompt), or in one of three a long one.
static void request_make(Request *q, const Case *config, int i, int V) {
    int short_prompt[8];
    q->n_prompt = random_prompt(short_prompt, i, V);
    memcpy(q->prompt, short_prompt, sizeof(int) * q->n_prompt);
    if (i % 3 == 2) {  // a prompt of several prefill chunks
        q->n_prompt = test_rand_int(BATCH_PREFILL_CHUNK + 1, MAX_PROMPT);
        for (int t = 0; t < q->n_prompt; t++) q->prompt[t] = test_rand_int(0, V - 2);
    }
    q->params = config->params;
    q->params.seed = test_rand_u64();
    q->params.max_tokens = test_rand_int(4, MAX_TOKENS);
    if (config->stops) q->params.stop = stop_at_high_id;
    q->arrival = test_rand_int(0, MAX_ARRIVAL);
    q->cancel_after = test_rand_int(0, 3) == 0 ? test_rand_int(1, 4) : 0;
    q->id = -1;
    q->steps = 0;
    q->drafters = (Drafters){0};
}

// Whether a's n tokens begin b (n_b of them).
static bool is_prefix(const int *a, int n, const int *b, int n_b) {
    return n <= n_b && memcmp(a, b, sizeof(int) * n) == 0;
}

// Whether a request's rounds are planned from the request alone, whatever the batch (policy.h): rejection sampling
// at a temperature, where γ decides which random numbers its tokens get — then its rounds in the batch are those it
// plays alone, γ for γ (the same rounds, drafts and plain rounds), and its rounds cost the batch what they cost alone.
static bool planned_alone(const SpecParams *params) {
    return params->sampler == SAMPLER_REJECTION && params->sampling.temperature > 0;
}

static void check_config(ModelPair *pair, const Case *config) {
    Request q[REQUESTS];
    const int V = pair->target.n_vocab;
    for (int i = 0; i < REQUESTS; i++) {
        request_make(&q[i], config, i, V);
        q[i].n_alone = generate_with(pair, config->kind, q[i].prompt, q[i].n_prompt, &q[i].params, q[i].params.seed,
                                     q[i].alone, &q[i].alone_stats, 0);
    }
    Err err;
    Batch *b = batch_open(&pair->target, PLACES, &err);
    CHECK(b, "%s", err.msg);
    int left = REQUESTS;
    for (int step = 0; left > 0 && b && !test_failures(); step++) {
        for (int i = 0; i < REQUESTS; i++) {  // arrivals, while there are places
            if (q[i].id != -1 || q[i].arrival > step || batch_active(b) == PLACES) continue;
            CHECK(drafter_open(&q[i].drafters, (DrafterKind)config->kind, &pair->draft, &q[i].params, 0, 1, &err) == 0,
                  "%s", err.msg);
            const BatchJob job = {.prompt = q[i].prompt, .n_prompt = q[i].n_prompt, .params = &q[i].params,
                                  .drafter = q[i].drafters.drafter, .out = q[i].out};
            q[i].id = batch_join(b, &job, &err);
            CHECK(q[i].id >= 0, "%s: request %d: %s", config->name, i, err.msg);
        }
        CHECK(batch_step(b, &err) == 0, "%s: step %d: %s", config->name, step, err.msg);
        for (int i = 0; i < REQUESTS; i++) {
            if (q[i].id < 0) continue;
            const BatchState state = batch_state(b, q[i].id);
            const bool cancel = q[i].cancel_after && ++q[i].steps >= q[i].cancel_after;
            if (state != BATCH_DONE && state != BATCH_FAILED && !cancel) continue;
            int n_out;
            SpecStats stats;
            CHECK(batch_leave(b, q[i].id, &n_out, &stats, &err) == 0, "%s: request %d: %s", config->name, i, err.msg);
            if (state != BATCH_DONE) {
                CHECK(is_prefix(q[i].out, n_out, q[i].alone, q[i].n_alone),
                      "%s: request %d cancelled after %d tokens: not a prefix of its tokens alone", config->name, i,
                      n_out);
            } else {
                CHECK(n_out == q[i].n_alone && !memcmp(q[i].out, q[i].alone, sizeof(int) * n_out),
                      "%s: request %d (prompt of %d, joined at step %d): %d tokens in the batch, %d alone, or other "
                      "tokens", config->name, i, q[i].n_prompt, q[i].arrival, n_out, q[i].n_alone);
                const SpecStats *alone = &q[i].alone_stats;
                CHECK(!planned_alone(&q[i].params) || (stats.rounds == alone->rounds &&
                                                       stats.drafted == alone->drafted &&
                                                       stats.plain_rounds == alone->plain_rounds),
                      "%s: request %d: %d rounds, %d drafted, %d plain in the batch; %d, %d, %d alone", config->name,
                      i, stats.rounds, stats.drafted, stats.plain_rounds, alone->rounds, alone->drafted,
                      alone->plain_rounds);
            }
            drafter_close(&q[i].drafters);
            q[i].id = -2;
            left--;
        }
    }
    batch_close(b);  // (after a failure: the requests still in it leave, then their drafters close)
    for (int i = 0; i < REQUESTS; i++) drafter_close(&q[i].drafters);
}

static const Case CONFIGS[] = {
    {"greedy, draft model", DRAFT_MODEL, {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_AUTO,
                                           .eos_id = -1}, false},
    {"sampled, draft model", DRAFT_MODEL, {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_AUTO,
                                            .eos_id = -1}, false},
    {"sampled top-p, coupled, staged", DRAFT_STAGED, {.sampling = {.temperature = 0.8f, .top_p = 0.9f},
                                                      .sampler = SAMPLER_COUPLED, .policy = GAMMA_AUTO, .eos_id = -1},
     false},
    {"sampled, lookup, stop callback", DRAFT_LOOKUP, {.sampling = {.temperature = 1, .top_p = 1},
                                                      .policy = GAMMA_HEURISTIC, .gamma = 3, .eos_id = -1}, true},
    {"greedy, tree of 3", DRAFT_MODEL, {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED,
                                         .gamma = 3, .tree_width = 3, .eos_id = -1}, false},
    {"sampled, tree auto", DRAFT_MODEL, {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_AUTO,
                                          .tree_width = 2, .tree_auto = true, .eos_id = 3}, false},
    {"sampled, penalties, draft model", DRAFT_MODEL, {.sampling = {.temperature = 1, .top_p = 1},
                                                      .policy = GAMMA_AUTO, .penalties = &PENALTIES, .eos_id = -1},
     false},
    {"sampled, target-only", DRAFT_NONE, {.sampling = {.temperature = 1, .top_k = 20, .top_p = 1}, .eos_id = 5},
     false},
};

TEST(batch_rounds_each_as_alone_llama) {
    ModelPair pair;
    RandomCheckpoint target = LLAMA_TARGET, draft = QWEN3_DRAFT;
    target.n_positions = draft.n_positions = 256;
    model_pair_open(&pair, &target, &draft, target.vocab_size, 2, QUANT_NONE);
    for (size_t c = 0; c < sizeof CONFIGS / sizeof CONFIGS[0] && !test_failures(); c++) check_config(&pair, &CONFIGS[c]);
    model_pair_close(&pair);
}

TEST(batch_rounds_each_as_alone_gpt2_q8) {
    ModelPair pair;
    pair_open_quantized(&pair, 97, 256, 1, 0.3f, QUANT_Q8);
    for (size_t c = 0; c < sizeof CONFIGS / sizeof CONFIGS[0] && !test_failures(); c++) check_config(&pair, &CONFIGS[c]);
    model_pair_close(&pair);
}

// ---- single cases: a sequence in a batch beside others, its tokens alone ------------------------------------------

typedef struct {
    int prompt[MAX_PROMPT], n_prompt;
    int alone[MAX_TOKENS], n_alone;
    int out[MAX_TOKENS];
    int id;                     // its place
    Drafters drafters;          // the draft model's drafter, unless it joined with another
} Sequence;

// The sequence's tokens alone by the draft model, then it joins with that drafter — or `drafter`, where not NULL.
static void join(Batch *b, ModelPair *pair, Sequence *x, const SpecParams *params, Drafter *drafter) {
    Err err;
    SpecStats stats;
    x->n_alone = generate_with(pair, DRAFT_MODEL, x->prompt, x->n_prompt, params, params->seed, x->alone, &stats, 0);
    if (!drafter) {
        CHECK(drafter_open(&x->drafters, DRAFTER_MODEL, &pair->draft, params, 0, 1, &err) == 0, "%s", err.msg);
        drafter = x->drafters.drafter;
    }
    const BatchJob job = {.prompt = x->prompt, .n_prompt = x->n_prompt, .params = params, .drafter = drafter,
                          .out = x->out};
    CHECK((x->id = batch_join(b, &job, &err)) >= 0, "%s", err.msg);
}

// The sequence leaves, finished: its tokens must be those it gets alone. Returns its statistics.
static SpecStats leave_as_alone(Batch *b, Sequence *x, const char *name) {
    int n_out;
    SpecStats stats = {0};
    Err err;
    CHECK(batch_state(b, x->id) == BATCH_DONE, "%s: not done", name);
    CHECK(batch_leave(b, x->id, &n_out, &stats, &err) == 0, "%s: %s", name, err.msg);
    CHECK(n_out == x->n_alone && !memcmp(x->out, x->alone, sizeof(int) * n_out),
          "%s: other tokens in the batch than alone", name);
    drafter_close(&x->drafters);
    return stats;
}

static void run_to_the_end(Batch *b) {
    Err err;
    while (batch_active(b) > 0 && !test_failures()) CHECK(batch_step(b, &err) == 0, "%s", err.msg);
}

static void open_llama_pair(ModelPair *pair) {
    RandomCheckpoint target = LLAMA_TARGET, draft = QWEN3_DRAFT;
    target.n_positions = draft.n_positions = 256;
    model_pair_open(pair, &target, &draft, target.vocab_size, 2, QUANT_NONE);
}

// The pair of open_llama_pair and a batch of `capacity` sequences on its target; NULL (a failed check) where the
// batch did not open.
static Batch *open_pair_and_batch(ModelPair *pair, int capacity) {
    open_llama_pair(pair);
    Err err;
    Batch *b = batch_open(&pair->target, capacity, &err);
    CHECK(b, "%s", err.msg);
    return b;
}

static const SpecParams GREEDY_CHAINS_OF_3 = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED,
                                              .gamma = 3, .eos_id = -1, .max_tokens = 12};

// The draft model's forwards are batched: SEQUENCES requests joining together, each drafting a chain of 3 in every
// round (greedy, fixed γ, so every round of every sequence makes 3 draft forwards), share each level's forward — the
// batch runs as many draft forwards as its longest-running sequence makes, not their sum — and each gets its tokens
// alone. And batch_times counts what the steps carried: each sequence once a step (its prefill's and its rounds'),
// its prompt's rows but the newest among the prompts' rows, and its rounds' rows (a chain of γ drafts: γ + 1).
TEST(batch_draft_forwards_are_one_per_level) {
    enum { SEQUENCES = 3 };
    ModelPair pair;
    Batch *b = open_pair_and_batch(&pair, SEQUENCES);
    Sequence x[SEQUENCES] = {0};
    for (int i = 0; i < SEQUENCES && b; i++) {
        x[i].n_prompt = random_prompt(x[i].prompt, i, pair.target.n_vocab);
        join(b, &pair, &x[i], &GREEDY_CHAINS_OF_3, NULL);
    }
    if (b) run_to_the_end(b);
    int most = 0, sum = 0;
    long sequences = 0, prompt_rows = 0, round_rows = 0;  // what batch_times should count
    for (int i = 0; i < SEQUENCES && b && !test_failures(); i++) {
        const SpecStats stats = leave_as_alone(b, &x[i], "a sequence");
        CHECK(stats.draft_calls > 0 && stats.draft_calls % 3 == 0, "sequence %d: %d draft forwards, not 3 a round",
              i, stats.draft_calls);
        most = stats.draft_calls > most ? stats.draft_calls : most;
        sum += stats.draft_calls;
        sequences += stats.rounds + (x[i].n_prompt - 1 + BATCH_PREFILL_CHUNK - 1) / BATCH_PREFILL_CHUNK;
        prompt_rows += x[i].n_prompt - 1;
        round_rows += stats.drafted + stats.rounds;
    }
    if (b && !test_failures()) {
        const BatchTimes t = batch_times(b);
        CHECK(t.sequences == sequences && t.prefill_rows == prompt_rows && t.rows == prompt_rows + round_rows,
              "batch_times counted %ld sequences in its steps, %ld rows of which %ld prompts'; the sequences had "
              "%ld, %ld and %ld", t.sequences, t.rows, t.prefill_rows, sequences, prompt_rows + round_rows,
              prompt_rows);
    }
    if (b && !test_failures()) {
        const int forwards = batch_draft_forwards(b);
        printf("    draft forwards: %d in the batch for %d in its sequences' rounds (the longest's %d)\n", forwards,
               sum, most);
        CHECK(forwards == most && forwards < sum, "%d draft forwards in the batch; the sequences made %d, at most %d",
              forwards, sum, most);
    }
    batch_close(b);
    for (int i = 0; i < SEQUENCES; i++) drafter_close(&x[i].drafters);
    model_pair_close(&pair);
}

// A sequence whose prompt takes two prefill chunks leaves (its client gone) after the first, while it is still
// prefilling: it leaves with no tokens, its place is free — the next sequence to join takes it — and the sequences
// beside it, one running before it joined and the one after it, get their tokens alone.
TEST(batch_sequence_leaves_while_prefilling) {
    ModelPair pair;
    Batch *b = open_pair_and_batch(&pair, 2);
    Sequence running = {0}, leaving = {.n_prompt = MAX_PROMPT}, next = {0};
    running.n_prompt = random_prompt(running.prompt, 1, pair.target.n_vocab);
    next.n_prompt = random_prompt(next.prompt, 2, pair.target.n_vocab);
    for (int t = 0; t < leaving.n_prompt; t++) leaving.prompt[t] = test_rand_int(0, pair.target.n_vocab - 2);
    Err err;
    if (b) {
        join(b, &pair, &running, &GREEDY_CHAINS_OF_3, NULL);
        CHECK(batch_step(b, &err) == 0, "%s", err.msg);
        join(b, &pair, &leaving, &GREEDY_CHAINS_OF_3, NULL);
        CHECK(batch_step(b, &err) == 0, "%s", err.msg);
        CHECK(batch_state(b, leaving.id) == BATCH_PREFILLING, "a prompt of %d tokens prefilled in one step",
              MAX_PROMPT);
        int n_out;
        SpecStats stats;
        CHECK(batch_leave(b, leaving.id, &n_out, &stats, &err) == 0 && n_out == 0, "leaving while prefilling: %d "
              "tokens (%s)", n_out, err.msg);
        drafter_close(&leaving.drafters);
        CHECK(batch_active(b) == 1 && batch_state(b, leaving.id) == BATCH_FREE, "its place is not free");
        join(b, &pair, &next, &GREEDY_CHAINS_OF_3, NULL);
        CHECK(next.id == leaving.id, "the next sequence took place %d, not the one left free (%d)", next.id,
              leaving.id);
        run_to_the_end(b);
        if (!test_failures()) leave_as_alone(b, &running, "the sequence running before");
        if (!test_failures()) leave_as_alone(b, &next, "the sequence that joined after");
    }
    batch_close(b);
    drafter_close(&running.drafters);
    drafter_close(&next.drafters);
    model_pair_close(&pair);
}

// Prompts that join together are prefilled one after the other, BATCH_PREFILL_CHUNK rows a step in all, the
// earliest joined first (share_prefill, batch.c): three plain sequences of 100-token prompts (99 rows each to feed)
// joining at once take 64 + 35 rows (the first's prompt in after two steps), 29 + 64 + 6 (the second's after four),
// 58 + 41 (the third's after five) — the first to join runs from its third step on, beside the others' chunks —
// and each gets its tokens alone. Each one's prefill time (SpecStats.prefill_seconds, the server's prefill_ms) runs
// from its join to the step that fed its prompt's end, whole: it holds every target forward of those steps — the
// third's the three it waited through unfed too, not only the two that carried its rows.
TEST(batch_prefills_in_the_order_sequences_joined) {
    enum { SEQUENCES = 3, PROMPT = 100, STEPS = 5 };
    static const int running_after[SEQUENCES] = {2, 4, STEPS};  // the steps each prompt takes to be in
    static const SpecParams PLAIN = {.sampling = {.top_p = 1}, .eos_id = -1, .max_tokens = 6};
    ModelPair pair;
    Batch *b = open_pair_and_batch(&pair, SEQUENCES);
    Sequence x[SEQUENCES] = {0};
    Err err;
    for (int i = 0; i < SEQUENCES && b; i++) {
        x[i].n_prompt = PROMPT;
        for (int t = 0; t < PROMPT; t++) x[i].prompt[t] = test_rand_int(0, pair.target.n_vocab - 2);
        SpecStats stats;
        x[i].n_alone = generate_with(&pair, DRAFT_NONE, x[i].prompt, PROMPT, &PLAIN, 0, x[i].alone, &stats, 0);
        const BatchJob job = {.prompt = x[i].prompt, .n_prompt = PROMPT, .params = &PLAIN, .out = x[i].out};
        CHECK((x[i].id = batch_join(b, &job, &err)) >= 0, "%s", err.msg);
    }
    double forwards_through[STEPS + 1] = {0};  // [step]: the seconds of the target's forwards of steps 1 to step
    for (int step = 1; step <= STEPS && b && !test_failures(); step++) {
        const long prompt_rows = batch_times(b).prefill_rows;
        CHECK(batch_step(b, &err) == 0, "%s", err.msg);
        forwards_through[step] = batch_times(b).target_seconds;
        CHECK(batch_times(b).prefill_rows - prompt_rows == (step < STEPS ? BATCH_PREFILL_CHUNK : 41),
              "step %d fed %ld prompt rows", step, batch_times(b).prefill_rows - prompt_rows);
        for (int i = 0; i < SEQUENCES; i++)
            CHECK((batch_state(b, x[i].id) == BATCH_PREFILLING) == (step < running_after[i]),
                  "after step %d, sequence %d (joined %d-th) is %s", step, i, i + 1,
                  batch_state(b, x[i].id) == BATCH_PREFILLING ? "prefilling" : "past its prefill");
    }
    if (b) run_to_the_end(b);
    for (int i = 0; i < SEQUENCES && b && !test_failures(); i++) {
        const SpecStats stats = leave_as_alone(b, &x[i], "a plain sequence");
        CHECK(stats.prefill_seconds >= forwards_through[running_after[i]],
              "sequence %d (joined %d-th): a prefill of %g s, less than the %g s of its %d steps' target forwards", i,
              i + 1, stats.prefill_seconds, forwards_through[running_after[i]], running_after[i]);
    }
    batch_close(b);
    model_pair_close(&pair);
}

// The depths a sequence's rounds drafted, in order (SpecParams.on_round).
typedef struct {
    int gamma[MAX_TOKENS], n;
} Depths;

static void note_depth(void *ctx, const RoundOutcome *round) {
    Depths *d = ctx;
    if (d->n < MAX_TOKENS) d->gamma[d->n++] = round->gamma;
}

// A greedy sequence (γ auto, the draft model) on x's prompt runs to its end while, at every step, a plain sequence
// joins whose prompt is prefilled in that step, `neighbour` tokens of it, and leaves after it. Returns the depths
// of the sequence's rounds; its tokens must be those it gets alone.
static Depths depths_beside_prefills(ModelPair *pair, Sequence x, const int *neighbour_prompt, int neighbour) {
    const SpecParams neighbour_params = {.sampling = {.top_p = 1}, .eos_id = -1, .max_tokens = 1};
    Depths depths = {0};
    SpecParams params = {.sampling = {.top_p = 1}, .policy = GAMMA_AUTO, .eos_id = -1, .max_tokens = MAX_TOKENS,
                         .on_round = note_depth, .ctx = &depths};
    Err err;
    Batch *b = batch_open(&pair->target, 2, &err);
    CHECK(b, "%s", err.msg);
    if (b) {
        join(b, pair, &x, &params, NULL);
        depths.n = 0;  // (the rounds alone, which join played, are not the batch's)
        while (batch_state(b, x.id) != BATCH_DONE && !test_failures()) {
            int out[1], n_out;
            const BatchJob job = {.prompt = neighbour_prompt, .n_prompt = neighbour + 1, .params = &neighbour_params,
                                  .out = out};
            const int id = batch_join(b, &job, &err);
            CHECK(id >= 0 && batch_state(b, id) == BATCH_PREFILLING, "the neighbour: %s", err.msg);
            CHECK(batch_step(b, &err) == 0, "%s", err.msg);
            SpecStats stats;
            CHECK(id < 0 || batch_leave(b, id, &n_out, &stats, &err) == 0, "the neighbour: %s", err.msg);
        }
        if (!test_failures()) leave_as_alone(b, &x, "the greedy sequence");
    }
    batch_close(b);
    drafter_close(&x.drafters);
    return depths;
}

// A greedy sequence's plan in a batch (rate_batch; planned with the cost model here: every step carries a prefill
// chunk, and the batch times only steps of rounds alone) leaves a prefill chunk's rows out: work the batch does
// whatever γ is. Beside a neighbour prefilling 1 token every step and beside one prefilling
// BATCH_PREFILL_CHUNK, its rounds draft the same depths, round by round.
TEST(batch_plan_leaves_prefill_rows_out) {
    ModelPair pair;
    open_llama_pair(&pair);
    int prompt[BATCH_PREFILL_CHUNK + 1];
    for (int t = 0; t <= BATCH_PREFILL_CHUNK; t++) prompt[t] = test_rand_int(0, pair.target.n_vocab - 2);
    Sequence x = {0};
    x.n_prompt = random_prompt(x.prompt, 4, pair.target.n_vocab);
    const Depths one = depths_beside_prefills(&pair, x, prompt, 1);
    const Depths chunk = depths_beside_prefills(&pair, x, prompt, BATCH_PREFILL_CHUNK);
    printf("    depths beside a 1-token prefill and a %d-token one:", BATCH_PREFILL_CHUNK);
    for (int i = 0; i < one.n; i++) printf(" %d", one.gamma[i]);
    printf(" |");
    for (int i = 0; i < chunk.n; i++) printf(" %d", chunk.gamma[i]);
    printf("\n");
    CHECK(one.n > 0 && one.n == chunk.n && !memcmp(one.gamma, chunk.gamma, sizeof(int) * one.n),
          "%d rounds beside 1-token prefills, %d beside %d-token ones, or their depths differ", one.n, chunk.n,
          BATCH_PREFILL_CHUNK);
    model_pair_close(&pair);
}

// ---- a model drafter that counts what the scheduler asks of it ------------------------------------------------

// A model drafter (stepped by the batch: begin, resume) that counts its prefills and the scheduler's checks, and
// corrupts one cached value of its draft cache after its corrupt_after-th rollback (0: never).
typedef struct {
    Drafter base;
    ModelDrafter inner;
    int prefills, rollbacks, checks, corrupt_after;
} Corrupter;

static int corrupter_prefill(Drafter *self, const int *context, int n, Err *err) {
    Corrupter *c = (Corrupter *)self;
    c->prefills++;
    return c->inner.base.prefill(&c->inner.base, context, n, err);
}

static int corrupter_begin(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                           double *q, DraftReport *report, DraftForward *forward, Err *err) {
    Corrupter *c = (Corrupter *)self;
    return c->inner.base.begin(&c->inner.base, context, n, request, tree, q, report, forward, err);
}

static int corrupter_resume(Drafter *self, DraftForward *forward, Err *err) {
    Corrupter *c = (Corrupter *)self;
    return c->inner.base.resume(&c->inner.base, forward, err);
}

static void corrupter_rollback(Drafter *self, int n, const int *path, int n_path) {
    Corrupter *c = (Corrupter *)self;
    c->inner.base.rollback(&c->inner.base, n, path, n_path);
    if (++c->rollbacks != c->corrupt_after) return;
    KVCache *cache = &c->inner.cache;
    kv_values(cache, 0, 0)[(size_t)(cache->len - 1) * cache->hd] += 0.5f;
}

static int corrupter_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    Corrupter *c = (Corrupter *)self;
    c->checks++;
    return c->inner.base.check_rollback(&c->inner.base, context, n_prefill, err);
}

static Corrupter corrupter(const SpecParams *params, int corrupt_after, ModelPair *pair) {
    Corrupter c = {.base = {.prefill = corrupter_prefill, .propose = drafter_propose_by_steps,
                            .begin = corrupter_begin, .resume = corrupter_resume, .rollback = corrupter_rollback,
                            .check_rollback = corrupter_check},
                   .corrupt_after = corrupt_after};
    Err err;
    CHECK(model_drafter_init(&c.inner, &pair->draft, params, 0, &err) == 0, "%s", err.msg);
    c.base.step_cost = c.inner.base.step_cost, c.base.row_cost = c.inner.base.row_cost;
    return c;
}

// ---- the drafters' prompts ---------------------------------------------------------------------------------------

// Sequences that start together, sampled under rejection sampling and greedy, each drafting every round: no drafter
// prefills its prompt alone — each reads it in its first draft forward, the batch's first level forward carrying
// every prompt that finished in the same step (one a long prompt of two prefill chunks, which joins the others'
// rounds a step later) — and each gets its tokens alone, bit for bit (its q rows are those of a prefill, since a
// row of the draft's forward does not depend on the rows beside it). In the debug build every rollback of the
// drafts' caches is checked against a forward over the committed tokens, the prompt fed one token at a time.
TEST(batch_drafters_read_their_prompts_in_shared_forwards) {
    enum { SEQUENCES = 3, LONG = 2 };
    static const SpecParams SAMPLED = {.sampling = {.temperature = 0.8, .top_p = 1}, .policy = GAMMA_FIXED,
                                       .gamma = 3, .eos_id = -1, .max_tokens = 12};
    const SpecParams *params[] = {&SAMPLED, &GREEDY_CHAINS_OF_3};
    for (int p = 0; p < 2 && !test_failures(); p++) {
        ModelPair pair;
        Batch *b = open_pair_and_batch(&pair, SEQUENCES);
        Sequence x[SEQUENCES] = {0};
        Corrupter c[SEQUENCES];
        SpecParams seeded[SEQUENCES];
        for (int i = 0; i < SEQUENCES && b; i++) {
            seeded[i] = *params[p];
            seeded[i].seed = test_rand_u64();
            c[i] = corrupter(&seeded[i], 0, &pair);
            x[i].n_prompt = random_prompt(x[i].prompt, i, pair.target.n_vocab);
            if (i == LONG) {
                x[i].n_prompt = BATCH_PREFILL_CHUNK + 10;
                for (int t = 0; t < x[i].n_prompt; t++) x[i].prompt[t] = test_rand_int(0, pair.target.n_vocab - 2);
            }
            join(b, &pair, &x[i], &seeded[i], &c[i].base);
        }
        if (b) run_to_the_end(b);
        for (int i = 0; i < SEQUENCES && b && !test_failures(); i++) {
            const SpecStats stats = leave_as_alone(b, &x[i], p == 0 ? "a sampled sequence" : "a greedy sequence");
            CHECK(c[i].prefills == 0 && stats.draft_calls > 0, "sequence %d: %d prefills of its drafter alone, %d "
                  "draft forwards", i, c[i].prefills, stats.draft_calls);
        }
        batch_close(b);
        for (int i = 0; i < SEQUENCES; i++) model_drafter_free(&c[i].inner);
        model_pair_close(&pair);
    }
}

// ---- the debug build's rollback check in a batch ---------------------------------------------------------------

// Three sequences draft together (their draft forwards batched) and each cache is checked after each rollback, the
// target's and the draft's: in the debug build, a check per round of each sequence, and one corrupted value in one
// sequence's draft cache fails that sequence alone, with the check's message, while the others finish as alone. The
// release build checks nothing.
TEST(batch_debug_build_checks_every_sequences_rollbacks) {
    enum { SEQUENCES = 3, CORRUPTED = 1 };
    ModelPair pair;
    Batch *b = open_pair_and_batch(&pair, SEQUENCES);
    Sequence x[SEQUENCES] = {0};
    Corrupter c[SEQUENCES];
    for (int i = 0; i < SEQUENCES && b; i++) {
        c[i] = corrupter(&GREEDY_CHAINS_OF_3, i == CORRUPTED ? 2 : 0, &pair);
        x[i].n_prompt = random_prompt(x[i].prompt, i, pair.target.n_vocab);
        join(b, &pair, &x[i], &GREEDY_CHAINS_OF_3, &c[i].base);
    }
    if (b) run_to_the_end(b);
    for (int i = 0; i < SEQUENCES && b && !test_failures(); i++) {
#ifdef SPECDEC_DEBUG
        if (i == CORRUPTED) {
            int n_out;
            SpecStats stats;
            Err err;
            CHECK(batch_state(b, x[i].id) == BATCH_FAILED && batch_leave(b, x[i].id, &n_out, &stats, &err) == -1,
                  "a corrupted draft cache in a batch went unnoticed");
            CHECK(c[i].checks == 2 && strstr(err.msg, "draft model") && strstr(err.msg, "value at position"),
                  "%d checks; message: %s", c[i].checks, err.msg);
            continue;
        }
        const SpecStats stats = leave_as_alone(b, &x[i], "a sequence beside the corrupted one");
        CHECK(c[i].checks == stats.rounds, "%d rounds, %d checks of the draft", stats.rounds, c[i].checks);
#else
        leave_as_alone(b, &x[i], "a sequence");
        CHECK(c[i].checks == 0, "the release build checked %d rollbacks", c[i].checks);
#endif
    }
    batch_close(b);
    for (int i = 0; i < SEQUENCES && b; i++) model_drafter_free(&c[i].inner);
    model_pair_close(&pair);
}
