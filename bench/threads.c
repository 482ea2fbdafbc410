// threads.c — the thread sweep: for each thread count of --threads-sweep, the target's decode speed and the
// fraction of the read bandwidth it streams at, its verification cost t(T = 8) / t(T = 1), and what speculative
// decoding (greedy, γ auto) buys over target-only on the held-out prompts.
//
// The pair stays loaded on the run's pool; a count n limits both models' jobs to n of its threads (max_threads,
// model.h: each job still takes only as many as it pays for), and the read pass runs on a pool of n threads.
// The goal: the speculative speed-up at the machine's full count at least its speed-up at 2 threads.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speculative/speculative.h"

enum { SWEEP_CONTEXT = 64, VERIFY_T = 8, MAX_COUNTS = 16 };

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

// Greedy generation on prompt `rep`, with or without the draft (γ auto): seconds per generated token.
typedef struct {
    Pair *pair;
    const Prompt *prompts;
    int tokens;
    bool drafted;
    int *outputs;               // [n_prompts, tokens]
} Generation;

static double generation_run(void *ctx, int rep) {
    Generation *g = ctx;
    SpecParams params = {.sampling = {0.0f, 0, 1.0f}, .seed = 1, .policy = GAMMA_AUTO, .gamma = 5,
                         .max_tokens = g->tokens, .eos_id = g->pair->target.cfg.eos_token_id};
    ModelDrafter drafter;
    SpecStats st = {0};
    Err err;
    int n_out;
    if (g->drafted && model_drafter_init(&drafter, &g->pair->draft, &params, 0, &err)) die("%s", err.msg);
    if (speculative_generate(&g->pair->target, g->drafted ? &drafter.base : NULL, g->prompts[rep].ids,
                             g->prompts[rep].n, &params, g->outputs + (size_t)rep * g->tokens, &n_out, &st, &err))
        die("%s: %s", g->prompts[rep].id, err.msg);
    if (g->drafted) model_drafter_free(&drafter);
    return st.decode_seconds / (st.generated > 0 ? st.generated : 1);
}

void suite_threads(Bench *b, Pair *pair, Memory *memory, const char *sweep) {
    int counts[MAX_COUNTS];
    const int n_counts = parse_counts(sweep, pool_size(b->pool), counts), reps = b->opt.reps;
    int n_prompts = 0;
    Prompt *prompts = NULL;
    if (pair->has_draft) prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, b->opt.tokens + 1, &n_prompts);
    suite_begin(b, "threads", n_counts * (pair->has_draft ? 2 : 1));
    out(b, "## Threads\n\nPer thread count: the target's decode step (T = 1 after %d cached positions) and its "
        "fraction of the read bandwidth on as many threads, the verification cost t(T = %d) / t(T = 1), median "
        "[min–max] of %d rounds; speculative decoding (greedy, γ auto, the draft on as many threads) against "
        "target-only on %d held-out prompts of %d tokens: speed-up median [min–max] over the prompts.\n\n"
        "| threads | target tokens/s | %% of read bandwidth | T = %d / T = 1 | speculative speed-up |\n"
        "|---:|---:|---:|---:|---:|\n", SWEEP_CONTEXT, VERIFY_T, reps, n_prompts, b->opt.tokens, VERIFY_T);
    const double read_bytes = (double)memory_op_bytes(memory, MEM_READ), bytes = (double)pair->target.weight_bytes;
    double *seconds = malloc(sizeof(double) * 3 * reps);
    double *plain = malloc(sizeof(double) * 2 * (n_prompts + 1));
    int *outputs = malloc(sizeof(int) * 2 * (n_prompts + 1) * b->opt.tokens);
    if (!seconds || !plain || !outputs) die("out of memory");
    json_t *rows = json_array();
    Workload w;
    workload_init(&w, &pair->target, SWEEP_CONTEXT);
    for (int i = 0; i < n_counts; i++) {
        Err err;
        ThreadPool *pool = pool_create(counts[i], &err);
        if (!pool) die("%s", err.msg);
        pair->target.max_threads = pair->draft.max_threads = counts[i];
        MemoryPass pass = {memory, MEM_READ, pool};
        SweepStep one = {&w, 1}, verify = {&w, VERIFY_T};
        Trial trials[3] = {{memory_pass, &pass}, {step_run, &one}, {step_run, &verify}};
        char label[64];
        snprintf(label, sizeof label, "%d threads: read pass, T = 1, T = %d", counts[i], VERIFY_T);
        measure_rounds(b, label, trials, 3, reps, 0.02, seconds);
        pool_free(pool);
        Summary rate = summary_inverse(summarize(seconds + reps, reps), 1);
        Summary fraction = summary_scaled(summarize_ratio(seconds, seconds + reps, reps), bytes / read_bytes);
        Summary cost = summarize_ratio(seconds + 2 * reps, seconds + reps, reps);
        char c1[64], c2[64], c3[64], c4[64] = "–";
        json_t *row = json_pack("{s:i, s:o, s:o, s:o}", "threads", counts[i], "target_tokens_per_s",
                                summary_json(rate), "bandwidth_fraction", summary_json(fraction),
                                "verify_cost_t8_t1", summary_json(cost));
        if (n_prompts > 0) {
            Generation g[2] = {{pair, prompts, b->opt.tokens, false, outputs},
                               {pair, prompts, b->opt.tokens, true, outputs + (size_t)n_prompts * b->opt.tokens}};
            Trial runs[2] = {{generation_run, &g[0]}, {generation_run, &g[1]}};
            snprintf(label, sizeof label, "%d threads: target-only, speculative", counts[i]);
            measure_rounds(b, label, runs, 2, n_prompts, 0, plain);
            if (memcmp(g[0].outputs, g[1].outputs, sizeof(int) * n_prompts * b->opt.tokens) != 0) {
                b->failed = true;
                fprintf(stderr, "run-bench: MISMATCH: greedy speculative output differs from target-only at %d "
                                "threads\n", counts[i]);
            }
            Summary speedup = summarize_ratio(plain, plain + n_prompts, n_prompts);
            fmt_range(c4, sizeof c4, speedup, 1, 2);
            json_object_set_new(row, "speculative_speedup", summary_json(speedup));
        }
        out(b, "| %d | %s | %s | %s | %s |\n", counts[i], fmt_range(c1, sizeof c1, rate, 1, 0),
            fmt_range(c2, sizeof c2, summary_scaled(fraction, 100), 1, 0), fmt_range(c3, sizeof c3, cost, 1, 2), c4);
        json_array_append_new(rows, row);
    }
    pair->target.max_threads = pair->draft.max_threads = pool_size(b->pool);
    workload_free(&w);
    free(seconds), free(plain), free(outputs);
    if (prompts) prompts_free(prompts, n_prompts);
    suite_end(b, json_pack("{s:i, s:i, s:o}", "context", SWEEP_CONTEXT, "verify_t", VERIFY_T, "counts", rows));
}
