// threads.c — the thread sweep: for each thread count of --threads-sweep, the target's decode speed and the
// fraction of the read bandwidth it streams at, its verification cost t(T = 8) / t(T = 1) beside the least its
// arithmetic allows (the matmul kernel's pace on weights in L2, floor_init), what one hand-off to the
// pool's threads costs, and what speculative decoding (γ auto) buys over target-only on the held-out prompts,
// greedy and at temperature 1, with the draft on the threads the CLI gives it by default (model/probe.h) and on
// one thread, both unpipelined, and as the CLI runs it by default on that many threads (--pipeline auto: where a CPU
// is spare, the drafting thread runs every draft forward on it, draft_ahead.h) — with where a round's time goes.
//
// The pair stays loaded on the run's pool; a count n limits both models' jobs to n of its threads (max_threads,
// model.h: each job still takes only as many as it pays for), and the read pass runs on a pool of n threads, as do
// the speculative runs (the models lent a pool of n for them, so that a CPU is spare below the machine's count, as
// it is for the CLI's --threads).
// The goal: the speculative speed-up at the machine's full count at least its speed-up at 2 threads.
#include <stdlib.h>
#include <string.h>

#include "base/round_trip.h"
#include "bench.h"
#include "model/probe.h"
#include "speculative/speculative.h"

enum { SWEEP_CONTEXT = 64, VERIFY_T = 8, MAX_COUNTS = 16 };

static const float TEMPERATURES[] = {0.0f, 1.0f};
enum {
    N_TEMPERATURES = sizeof TEMPERATURES / sizeof TEMPERATURES[0],
    // the draft's threads, unpipelined: the CLI's default (the probe's), or 1; then the CLI's default as it runs,
    // --pipeline auto
    DRAFT_DEFAULT = 0, DRAFT_ONE, DRAFT_AUTO, N_DRAFTS,
    N_RUNS = N_TEMPERATURES * (1 + N_DRAFTS),  // per temperature: target-only, then each draft's thread count
};

// Parses "1,2,4" into counts (each in [1, pool]); 0 when list is NULL: 1, 2, 4, ... and the pool's size.
static int parse_counts(const char *list, int pool, int *counts) {
    int n = 0;
    if (!list) {
        for (int c = 1; c < pool && n < MAX_COUNTS - 1; c *= 2) counts[n++] = c;
        counts[n++] = pool;
        return n;
    }
    for (const char *p = list; *p && n < MAX_COUNTS;) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p || c < 1 || c > pool || (*end && *end != ','))
            die("--threads-sweep: expected counts in [1, %d] separated by commas, got \"%s\"", pool, list);
        counts[n++] = (int)c;
        p = *end ? end + 1 : end;
    }
    return n;
}

typedef struct {
    Workload *w;
    int T;
} SweepStep;

static double step_run(void *ctx, int rep) {
    (void)rep;
    SweepStep *s = ctx;
    return forward_seconds(s->w->model, &s->w->cache, s->w->context, s->T, s->w->logits);
}

// One hand-off of a job that does nothing to n threads: pool_run_on(n), waking n − 1 threads and waiting for each,
// or (chunked) pool_run_chunks of as many chunks as a forward's matmul cuts on n threads, the kind of job a
// forward hands off — its threads claim the chunks from one counter and count them done on another.
typedef struct {
    ThreadPool *pool;
    int n;
    bool chunked;
} HandOff;

static void nothing(void *ctx, int thread, int n_threads) { (void)ctx, (void)thread, (void)n_threads; }
static void no_chunk(void *ctx, int chunk, int n_chunks, int thread) {
    (void)ctx, (void)chunk, (void)n_chunks, (void)thread;
}

static double hand_off_run(void *ctx, int rep) {
    (void)rep;
    HandOff *h = ctx;
    const double t0 = now_seconds();
    if (h->chunked)
        pool_run_chunks(h->pool, h->n, POOL_CHUNKS_PER_THREAD * h->n, no_chunk, NULL);
    else
        pool_run_on(h->pool, h->n, nothing, NULL);
    return now_seconds() - t0;
}

// A cache line's round trip between two of the pool's threads (base/round_trip.h), ROUND_TRIPS times; the seconds
// of one round trip. It says where the host placed the two cores:
// under 100 ns within one core complex of an EPYC, several times that across two (docs/performance.md).
enum { ROUND_TRIPS = 2000 };

static void ping_pong(void *ctx, int thread, int n_threads) {
    if (n_threads < 2) return;  // a pool of one thread: nobody to answer
    cache_line_round_trips(ctx, thread != 0, 1, ROUND_TRIPS);
}

static double round_trip_run(void *ctx, int rep) {
    (void)rep;
    _Alignas(64) atomic_long line = 0;
    const double t0 = now_seconds();
    pool_run_on(ctx, 2, ping_pong, (void *)&line);
    return (now_seconds() - t0) / ROUND_TRIPS;
}

// ---- the arithmetic's floor of a verification ------------------------------------------------------------------
//
// What the multiply-adds alone allow t(T = VERIFY_T) / t(T = 1): one of the target's matrices — the middle layer's
// MLP up projection (with its gate), in the form and layout the model holds it — cut to its first rows, as many as
// keep each thread's share within FLOOR_BYTES, so that the share stays in L2 over the rounds; multiplied by the
// model's kernel variant on VERIFY_T and on 1 activation rows, timed as the limit suite times its cache-sized W (a
// job of the cut alone on the model's pool, its rows split between as many threads as the table row's count). At
// VERIFY_T rows the arithmetic sets the pace; the model's multiply-adds for VERIFY_T rows at that rate, over the
// measured t(1), is the least ratio any faster weight stream could give, attention, norms, activations and hand-offs
// left out (a forward of VERIFY_T rows does those too, so the true floor is higher).
enum { FLOOR_BYTES = 256 << 10 };

typedef struct {
    Matmul at[2];               // the cut at T = VERIFY_T and at T = 1, on the row's pool
    double multiply_adds;       // of the cut, per activation row
    float *x, *out;             // [VERIFY_T, n_in], [VERIFY_T, rows]
    Q8Block *xq;                // [VERIFY_T, q8_blocks(n_in)]: x quantized, for quantized weights
    uint16_t *xb;               // [VERIFY_T, panel_row_length(n_in)]: x rounded to BF16, under QUANT_BF16
} Floor;

// Bytes of the first `rows` rows of W in its layout (a multiple of 16 rows: whole panels in every layout).
static size_t cut_bytes(const Model *m, const Linear *lin, int rows) {
    if (weight_quantized(lin->type)) return quantized_matrix_bytes(lin->type, rows, lin->n_in);
    const size_t element = lin->type == WEIGHT_F32 ? 4 : 2;
    return weight_elements(m->kernels->panels, rows, lin->n_in) * element;
}

// The matrix cut, and the matmul the model multiplies it by: its WeightType's, or BF16_DOT under QUANT_BF16.
static const Linear *floor_matrix(const Model *m) { return &m->blocks[m->cfg.n_layer / 2].mlp_up; }
static int floor_type(const Model *m) { return m->quant == QUANT_BF16 ? BF16_DOT : (int)floor_matrix(m)->type; }

static void floor_init(Floor *f, const Model *m, ThreadPool *pool, int threads) {
    const Linear *lin = floor_matrix(m);
    const int n_in = lin->n_in, held = lin->n_out - lin->tail_rows;  // W's rows in lin->w
    int share = 16;  // rows a thread, a multiple of pool_share's 16
    while ((share + 16) * threads <= held && cut_bytes(m, lin, share + 16) <= FLOOR_BYTES) share += 16;
    const int rows = share * threads < held ? share * threads : held;  // all of them in a matrix of fewer
    *f = (Floor){.multiply_adds = (double)rows * n_in,
                 .x = malloc(sizeof(float) * VERIFY_T * n_in),
                 .out = malloc(sizeof(float) * VERIFY_T * rows),
                 .xq = malloc(sizeof(Q8Block) * VERIFY_T * q8_blocks(n_in)),
                 .xb = malloc(sizeof(uint16_t) * VERIFY_T * panel_row_length(n_in))};
    if (!f->x || !f->out || !f->xq || !f->xb) die("out of memory");
    for (int i = 0; i < VERIFY_T * n_in; i++) f->x[i] = (float)(i % 17) * 0.1f - 0.8f;
    m->kernels->quantize_q8(f->xq, f->x, VERIFY_T, n_in, n_in);
    bf16_round_rows(f->xb, f->x, VERIFY_T, n_in, n_in, in_pair_order(m->kernels, WEIGHT_BF16));
    for (int i = 0; i < 2; i++)
        f->at[i] = (Matmul){m->kernels, floor_type(m), lin->w, f->x, f->xq, f->xb, f->out, i == 0 ? VERIFY_T : 1,
                            n_in, rows, pool, threads};
}

static void floor_free(Floor *f) { free(f->x), free(f->out), free(f->xq), free(f->xb); }

// Where a run's rounds spent their time (SpecStats): the drafter (its forwards, then the sampling of its q rows
// among them), the target's verifications, the target's p rows, the accept rule, the commit with the caches'
// rollback; what decode holds beyond these is the policy and the bookkeeping.
typedef struct {
    double decode, draft, q, target, p, accept, commit;
    int rounds, generated;
    int own_core;  // runs in which the drafting thread ran the draft's forwards on a CPU of its own (0 or 1 a run)
} Split;

// Generation on prompt `rep` (seed rep + 1), target-only or with the draft (γ auto) on draft_threads.
typedef struct {
    Pair *pair;
    const Prompt *prompts;
    int tokens;
    float temperature;
    int draft_threads;          // 0: target-only
    Pipelining pipeline;
    int *outputs;               // [n_prompts, tokens]
    Split *split;               // [n_prompts]: the last run's
} Generation;

static double generation_run(void *ctx, int rep) {
    Generation *g = ctx;
    SpecParams params = {.sampling = {g->temperature, 0, 1.0f}, .seed = (uint64_t)rep + 1, .policy = GAMMA_AUTO,
                         .gamma = 5, .pipeline = g->pipeline, .max_tokens = g->tokens,
                         .eos_id = g->pair->target.cfg.eos_token_id};
    ModelDrafter drafter;
    SpecStats st = {0};
    Err err;
    int n_out;
    const bool drafted = g->draft_threads > 0;
    if (drafted) g->pair->draft.max_threads = g->draft_threads;
    if (drafted && model_drafter_init(&drafter, &g->pair->draft, &params, 0, &err)) die("%s", err.msg);
    if (speculative_generate(&g->pair->target, drafted ? &drafter.base : NULL, g->prompts[rep].ids,
                             g->prompts[rep].n, &params, g->outputs + (size_t)rep * g->tokens, &n_out, &st, &err))
        die("%s: %s", g->prompts[rep].id, err.msg);
    if (drafted) model_drafter_free(&drafter);
    g->split[rep] = (Split){st.decode_seconds, st.draft_seconds, st.q_seconds, st.target_seconds, st.p_seconds,
                            st.accept_seconds, st.commit_seconds, st.rounds, st.generated, st.draft_own_core};
    return st.decode_seconds / (st.generated > 0 ? st.generated : 1);
}

// The machine's side of one thread count: the read pass, T = 1 and T = VERIFY_T steps, the arithmetic's floor, a
// hand-off; one table row.
static json_t *machine_row(Bench *b, Pair *pair, Memory *memory, Workload *w, int count, int draft_default) {
    const int reps = b->opt.reps;
    Err err;
    ThreadPool *pool = pool_create(count, &err);
    if (!pool) die("%s", err.msg);
    MemoryPass pass = {memory, MEM_READ, pool};
    SweepStep one = {w, 1}, verify = {w, VERIFY_T};
    Floor floor;  // on the model's pool, as its jobs run
    floor_init(&floor, &pair->target, b->pool, count);
    HandOff hand_off = {b->pool, count, false}, chunked = {b->pool, count, true};
    enum { READ, ONE, VERIFY, FLOOR_T, FLOOR_1, HAND_OFF, CHUNKED, ROUND_TRIP, N_TRIALS };
    Trial trials[N_TRIALS] = {{memory_pass, &pass},         {step_run, &one},       {step_run, &verify},
                              {matmul_run, &floor.at[0]},   {matmul_run, &floor.at[1]},
                              {hand_off_run, &hand_off},    {hand_off_run, &chunked}, {round_trip_run, b->pool}};
    const int n_trials = count >= 2 ? N_TRIALS : ROUND_TRIP;  // the round trip needs two threads
    double *seconds = malloc(sizeof(double) * N_TRIALS * reps);
    if (!seconds) die("out of memory");
    char label[80];
    snprintf(label, sizeof label, "%d threads: read pass, T = 1, T = %d, in-L2 matmuls, hand-offs", count, VERIFY_T);
    measure_rounds(b, label, trials, n_trials, reps, 0.02, seconds);
    pool_free(pool);
    // Then as many T = 1 steps with the pool's tally on: the jobs handed off a step, and the caller's wait at their
    // ends as a share of the steps' time.
    PoolTally tally = {0};
    double stepped = 0;
    pool_tally(w->model->pool, &tally);
    for (int rep = 0; rep < reps; rep++) stepped += step_run(&one, rep);
    pool_tally(w->model->pool, NULL);
    const double jobs = (double)tally.jobs / reps, waiting = tally.waiting_seconds / stepped;
    const double read_bytes = (double)memory_op_bytes(memory, MEM_READ), bytes = (double)pair->target.weight_bytes;
    Summary rate = summary_inverse(summarize(seconds + ONE * reps, reps), 1);
    Summary read_rate = summary_inverse(summarize(seconds + READ * reps, reps), read_bytes / 1e9);
    Summary fraction =
        summary_scaled(summarize_ratio(seconds + READ * reps, seconds + ONE * reps, reps), bytes / read_bytes);
    Summary cost = summarize_ratio(seconds + VERIFY * reps, seconds + ONE * reps, reps);
    // the model's VERIFY_T rows of multiply-adds at the cut's pace, over t(1), round by round
    const double model_over_cut = model_matrix_multiply_adds(&pair->target) / floor.multiply_adds;
    Summary least =
        summary_scaled(summarize_ratio(seconds + FLOOR_T * reps, seconds + ONE * reps, reps), model_over_cut);
    const double flops = 2 * floor.multiply_adds;  // of one activation row through the cut
    Summary gflops_t = summary_inverse(summarize(seconds + FLOOR_T * reps, reps), VERIFY_T * flops / 1e9);
    Summary gflops_1 = summary_inverse(summarize(seconds + FLOOR_1 * reps, reps), flops / 1e9);
    Summary hand = summary_scaled(summarize(seconds + HAND_OFF * reps, reps), 1e6);
    Summary hand_chunked = summary_scaled(summarize(seconds + CHUNKED * reps, reps), 1e6);
    const bool paired = n_trials == N_TRIALS;
    Summary trip = paired ? summary_scaled(summarize(seconds + ROUND_TRIP * reps, reps), 1e9) : (Summary){0};
    free(seconds);
    char c0[64], c1[64], c2[64], c3[64], c4[64], c5[64], c6[64] = "—", c7[64];
    if (paired) fmt_range(c6, sizeof c6, trip, 1, 0);
    out(b, "| %d | %s | %s | %s | %s | %s | %s (%.0f, %.0f) | %s | %s | %.0f | %.1f%% | %d |\n", count,
        fmt_range(c0, sizeof c0, read_rate, 1, 1), c6, fmt_range(c1, sizeof c1, rate, 1, 0),
        fmt_range(c2, sizeof c2, summary_scaled(fraction, 100), 1, 0), fmt_range(c3, sizeof c3, cost, 1, 2),
        fmt_range(c7, sizeof c7, least, 1, 2), gflops_t.median, gflops_1.median, fmt_range(c4, sizeof c4, hand, 1, 1),
        fmt_range(c5, sizeof c5, hand_chunked, 1, 1), jobs, 100 * waiting, draft_default);
    json_t *row = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:f, s:f, s:i}", "threads", count, "read_gb_per_s",
                            summary_json(read_rate), "target_tokens_per_s", summary_json(rate), "bandwidth_fraction",
                            summary_json(fraction), "verify_cost_t8_t1", summary_json(cost), "hand_off_us",
                            summary_json(hand), "chunked_hand_off_us", summary_json(hand_chunked), "jobs_per_step",
                            jobs, "waiting_at_jobs_ends", waiting, "draft_threads_default", draft_default);
    json_object_set_new(row, "arithmetic_floor",
                        json_pack("{s:o, s:s, s:i, s:i, s:o, s:o}", "least_t8_t1", summary_json(least), "form",
                                  matmul_type_name(floor.at[0].type), "rows", floor.at[0].n_out, "n_in",
                                  floor.at[0].n_in, "gflops_t8", summary_json(gflops_t), "gflops_t1",
                                  summary_json(gflops_1)));
    if (paired) json_object_set_new(row, "round_trip_ns", summary_json(trip));
    floor_free(&floor);
    return row;
}

// Σ of the prompts' splits.
static Split split_total(const Split *split, int n) {
    Split t = {0};
    for (int i = 0; i < n; i++) {
        t.decode += split[i].decode, t.draft += split[i].draft, t.q += split[i].q, t.target += split[i].target;
        t.p += split[i].p, t.accept += split[i].accept, t.commit += split[i].commit;
        t.rounds += split[i].rounds, t.generated += split[i].generated, t.own_core += split[i].own_core;
    }
    return t;
}

// The scheduler's own share of a run's time: everything but the forwards.
static double own_share(const Split *t) { return (t->decode - (t->draft - t->q) - t->target) / t->decode; }

// The speculative runs at one thread count (every temperature: target-only, the draft on its default threads and
// on one, and the CLI's default, pipeline auto), one row per drafted run, on a pool of `count` threads lent to both
// models; the greedy ones must reproduce target-only's tokens.
static json_t *speculative_rows(Bench *b, Pair *pair, const Prompt *prompts, int n_prompts, int count,
                                int draft_default) {
    const int tokens = b->opt.tokens;
    Generation g[N_RUNS];
    Trial runs[N_RUNS];
    int *outputs = malloc(sizeof(int) * N_RUNS * n_prompts * tokens);
    Split *split = calloc((size_t)N_RUNS * n_prompts, sizeof(Split));
    double *seconds = malloc(sizeof(double) * N_RUNS * n_prompts);  // per token, [run, prompt]
    if (!outputs || !split || !seconds) die("out of memory");
    const int draft_threads[1 + N_DRAFTS] = {0, draft_default, 1, draft_default};
    for (int i = 0; i < N_RUNS; i++) {
        const int run = i % (1 + N_DRAFTS);
        g[i] = (Generation){pair, prompts, tokens, TEMPERATURES[i / (1 + N_DRAFTS)], draft_threads[run],
                            run == 1 + DRAFT_AUTO ? PIPELINE_AUTO : PIPELINE_OFF,
                            outputs + (size_t)i * n_prompts * tokens, split + (size_t)i * n_prompts};
        runs[i] = (Trial){generation_run, &g[i]};
    }
    char label[64];
    snprintf(label, sizeof label, "%d threads: target-only and speculative, T = 0 and 1", count);
    Err err;
    ThreadPool *pool = pool_create(count, &err), *own = pair->target.pool;
    if (!pool) die("%s", err.msg);
    pair->target.pool = pair->draft.pool = pool;
    measure_rounds(b, label, runs, N_RUNS, n_prompts, 0, seconds);
    pair->target.pool = pair->draft.pool = own;
    pool_free(pool);
    json_t *rows = json_array();
    for (int i = 0; i < N_RUNS; i++) {
        if (g[i].draft_threads == 0) continue;
        const int plain = i - i % (1 + N_DRAFTS);
        if (g[i].temperature == 0 && memcmp(g[plain].outputs, g[i].outputs, sizeof(int) * n_prompts * tokens)) {
            b->failed = true;
            fprintf(stderr, "run-bench: MISMATCH: greedy speculative output differs from target-only at %d threads "
                            "(draft on %d)\n", count, g[i].draft_threads);
        }
        Summary speedup = summarize_ratio(seconds + (size_t)plain * n_prompts, seconds + (size_t)i * n_prompts,
                                          n_prompts);
        const Split t = split_total(g[i].split, n_prompts), p = split_total(g[plain].split, n_prompts);
        const double ms = 1e3 / (t.rounds > 0 ? t.rounds : 1);  // per round
        const double other = t.decode - t.draft - t.target - t.p - t.accept - t.commit;
        char c1[64];
        const int run = i % (1 + N_DRAFTS);
        const char *how = run == 1 + DRAFT_AUTO ? (t.own_core == n_prompts ? "auto, own core: "
                                                    : t.own_core > 0         ? "auto, partly own core: "
                                                                             : "auto, unpipelined: ")
                          : run == 1 + DRAFT_DEFAULT ? "default: "
                                                     : "";
        out(b, "| %d | %g | %s%d | %s | %.2f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %.0f%% | %.0f%% |\n",
            count, g[i].temperature, how, g[i].draft_threads,
            fmt_range(c1, sizeof c1, speedup, 1, 2), (double)t.generated / (t.rounds > 0 ? t.rounds : 1),
            (t.draft - t.q) * ms, t.q * ms, t.target * ms, t.p * ms, t.accept * ms, t.commit * ms, other * ms,
            100 * own_share(&t), 100 * own_share(&p));
        json_t *row = json_pack("{s:i, s:f, s:i, s:b, s:s, s:i, s:o, s:i, s:i}", "threads", count, "temperature",
                                g[i].temperature, "draft_threads", g[i].draft_threads, "default",
                                run != 1 + DRAFT_ONE, "pipeline", run == 1 + DRAFT_AUTO ? "auto" : "off",
                                "draft_own_core_runs", t.own_core, "speedup", summary_json(speedup), "rounds",
                                t.rounds, "generated", t.generated);
        json_object_set_new(row, "seconds", json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "decode", t.decode,
                                                      "draft", t.draft, "q_rows", t.q, "verify", t.target, "p_rows",
                                                      t.p, "accept", t.accept, "commit", t.commit));
        json_object_set_new(row, "target_only_seconds", json_pack("{s:f, s:f, s:f}", "decode", p.decode, "verify",
                                                                  p.target, "p_rows", p.p));
        json_array_append_new(rows, row);
    }
    free(outputs), free(split), free(seconds);
    return rows;
}

void suite_threads(Bench *b, Pair *pair, Memory *memory, const char *sweep) {
    int counts[MAX_COUNTS], defaults[MAX_COUNTS];
    const int n_counts = parse_counts(sweep, pool_size(b->pool), counts), reps = b->opt.reps;
    int n_prompts = 0;
    Prompt *prompts = NULL;
    if (pair->has_draft) prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, b->opt.tokens + 1, &n_prompts);
    suite_begin(b, "threads", n_counts * (n_prompts > 0 ? 2 : 1));
    for (int i = 0; i < n_counts; i++) {  // the CLI's default --draft-threads at each count, probed before any run
        Err err;
        pair->draft.max_threads = counts[i];
        defaults[i] = pair->has_draft ? probe_fastest_threads(&pair->draft, NULL, &err) : 0;
        if (defaults[i] < 0) die("%s", err.msg);
    }
    out(b, "## Threads\n\nPer thread count: the rate at which that many threads read %.0f MB (the read pass), the "
        "target's decode step (T = 1 after %d cached positions) and its "
        "fraction of the read bandwidth on as many threads, the verification cost t(T = %d) / t(T = 1), one hand-off "
        "to that many of the pool's threads of a job that does nothing (a job of every thread, pool_run_on; and a "
        "chunked one of %d chunks a thread, the kind a forward hands off), median [min–max] of %d rounds; the jobs a "
        "T = 1 step hands off to the pool and the share of its time the calling thread waits at their ends, after "
        "its own part, for the other threads' last chunks (base/threads.h, pool_tally; the mean of %d more steps); "
        "and the draft's threads the CLI chooses by default (model/probe.h). Where two threads read at far less than "
        "twice one thread's rate and a round trip is short, their cores share a path to memory (one core complex of "
        "the host, on a virtual machine whose host may move them during a run: docs/performance.md): two-thread "
        "figures compare only beside the same read rate.\n\n"
        "| threads | read GB/s | round trip ns | target tokens/s | %% of read bandwidth | T = %d / T = 1 | "
        "the arithmetic's least T = %d / T = 1 (in-L2 GFLOP/s at T = %d, 1)¹ | hand-off µs | chunked µs | "
        "jobs a step | waiting at jobs' ends | default draft threads |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", memory_op_bytes(memory, MEM_READ) / 1e6,
        SWEEP_CONTEXT, VERIFY_T, POOL_CHUNKS_PER_THREAD, reps, reps, VERIFY_T, VERIFY_T, VERIFY_T);
    json_t *rows = json_array(), *spec = json_array();
    Workload w;
    workload_init(&w, &pair->target, SWEEP_CONTEXT);
    for (int i = 0; i < n_counts; i++) {
        pair->target.max_threads = counts[i];
        json_array_append_new(rows, machine_row(b, pair, memory, &w, counts[i], defaults[i]));
    }
    const Linear *cut = floor_matrix(&pair->target);
    out(b, "\n¹ What the multiply-adds alone allow: layer %d's MLP up projection [%d, %d] as the model holds it (%s), "
        "cut to its first rows so that each thread's share (at least 16 rows) stays within %d KiB, in L2, multiplied "
        "by the %s kernel on that many threads with T = %d and 1 activation rows, timed in the same rounds as the "
        "steps (GFLOP/s: 2 · T · the cut's multiply-adds over the median time); the model's %.1f M multiply-adds a "
        "row for %d rows at the cut's T = %d pace, over t(1), round by round: the least t(%d) / t(1) that a weight "
        "stream as fast as L2 could give. Attention, the norms, activations and hand-offs are left out, and a "
        "forward of %d rows does them too: the true floor is higher (docs/performance.md).\n",
        pair->target.cfg.n_layer / 2, cut->n_out, cut->n_in, matmul_type_name(floor_type(&pair->target)),
        FLOOR_BYTES >> 10, pair->target.kernels->name, VERIFY_T,
        model_matrix_multiply_adds(&pair->target) / 1e6, VERIFY_T, VERIFY_T, VERIFY_T, VERIFY_T);
    if (n_prompts > 0) {
        out(b, "\nSpeculative decoding (γ auto; the draft on the CLI's default threads and on one, unpipelined; and the "
            "CLI's default, --pipeline auto, which where a CPU is spare runs every draft forward on it: 'own core') "
            "against target-only "
            "on %d held-out prompts of %d tokens (seed = the prompt's index + 1): speed-up median [min–max] over the "
            "prompts; tokens per round; a round's time in ms — the draft's forwards, the sampling of its q rows, the "
            "target's verification, the sampling of its p rows, the accept rule, the commit with the caches' "
            "rollback, and the rest (the policy, bookkeeping) — and the share of the time outside the forwards, "
            "beside target-only's (its sampling and bookkeeping). The pool's hand-offs are inside the forwards: "
            "one costs what the table above says.\n\n"
            "| threads | temperature | draft threads | speed-up | tokens/round | draft | q rows | verify | p rows | "
            "accept | commit | rest | outside forwards | target-only's |\n"
            "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n", n_prompts, b->opt.tokens);
        for (int i = 0; i < n_counts; i++) {
            pair->target.max_threads = counts[i];
            json_t *more = speculative_rows(b, pair, prompts, n_prompts, counts[i], defaults[i]);
            json_array_extend(spec, more);
            json_decref(more);
        }
    }
    pair->target.max_threads = pair->draft.max_threads = pool_size(b->pool);
    workload_free(&w);
    if (prompts) prompts_free(prompts, n_prompts);
    suite_end(b, json_pack("{s:i, s:i, s:o, s:o}", "context", SWEEP_CONTEXT, "verify_t", VERIFY_T, "counts", rows,
                           "speculative", spec));
}
