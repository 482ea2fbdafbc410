// batch.c — plain decoding of 1, 2, 4 and 8 sequences at once in one batch (speculative/batch.h), in process: the
// target alone, its step over N sequences reading the weights once, beside the read pass's bound of N tokens per
// read of the weights. Issue 50's memory-bound yardstick, `-m random:llama-3.2-1b --quant q8` (make bench runs it):
// 4 sequences' aggregate tokens/s ≥ 3× one's, 8 ≥ 4×.
//
// Each sequence's cache holds DECODE_CONTEXT positions, prefilled once (workload_init); each call cuts them back,
// joins N sequences whose prompts are in their caches but the newest token (so none prefills), and runs the batch
// to its end: DECODE_STEPS steps, each committing one token of every sequence.
#include <stdlib.h>

#include "bench.h"
#include "speculative/batch.h"

enum { DECODE_CONTEXT = 32, DECODE_STEPS = 8, DECODE_COUNTS = 4, DECODE_MAX = 8 };  // sequences: 1, 2, 4, 8

typedef struct {
    Workload *caches;       // [DECODE_MAX]
    int sequences;
} BatchedDecode;

// One call: seconds per committed token of the N sequences' DECODE_STEPS steps.
static double batched_decode_run(void *ctx, int rep) {
    (void)rep;
    const BatchedDecode *d = ctx;
    Model *target = d->caches[0].model;
    int prompt[DECODE_CONTEXT + 1], out[DECODE_MAX][DECODE_STEPS];
    pattern_tokens(prompt, DECODE_CONTEXT + 1, 0, target->n_vocab);  // what the caches hold, and the newest token
    const SpecParams params = {.max_tokens = DECODE_STEPS, .policy = GAMMA_FIXED, .gamma = 1, .eos_id = -1,
                               .sampling = {.top_p = 1}};
    Err err;
    Batch *b = batch_open(target, d->sequences, &err);
    if (!b) die("%s", err.msg);
    for (int k = 0; k < d->sequences; k++) {
        kv_truncate(&d->caches[k].cache, DECODE_CONTEXT);
        const BatchJob job = {.prompt = prompt, .n_prompt = DECODE_CONTEXT + 1, .params = &params,
                              .cache = &d->caches[k].cache, .out = out[k]};
        if (batch_join(b, &job, &err) < 0) die("%s", err.msg);
    }
    const double t0 = now_seconds();
    while (batch_active(b) > 0)
        if (batch_step(b, &err)) die("%s", err.msg);
    const double seconds = now_seconds() - t0;
    for (int k = 0; k < d->sequences; k++) {
        int n_out;
        SpecStats stats;
        if (batch_leave(b, k, &n_out, &stats, &err) || n_out != DECODE_STEPS)
            die("a sequence of the batch committed %d tokens of %d", n_out, DECODE_STEPS);
    }
    batch_close(b);
    return seconds / (d->sequences * DECODE_STEPS);
}

void suite_batch(Bench *b, Pair *pair) {
    suite_begin(b, "batch", 2);
    double gbs;
    const double read_seconds = weights_read_seconds(b, &pair->target, &gbs);
    Workload caches[DECODE_MAX];
    for (int k = 0; k < DECODE_MAX; k++) workload_init(&caches[k], &pair->target, DECODE_CONTEXT);
    const int reps = b->opt.reps;
    double *seconds = malloc(sizeof(double) * DECODE_COUNTS * reps);  // [DECODE_COUNTS, reps]
    BatchedDecode decodes[DECODE_COUNTS] = {{caches, 1}, {caches, 2}, {caches, 4}, {caches, 8}};
    const Trial trials[DECODE_COUNTS] = {{batched_decode_run, &decodes[0]}, {batched_decode_run, &decodes[1]},
                                         {batched_decode_run, &decodes[2]}, {batched_decode_run, &decodes[3]}};
    measure_rounds(b, "sequences at once", trials, DECODE_COUNTS, reps, 0, seconds);
    out(b, "## Sequences decoding at once in one batch\n\nThe target alone, greedy, each of N sequences one token a "
        "step after %d cached positions, %d steps a sample; %d rounds, medians [min–max]; × one sequence: within "
        "each round. The read pass: the target's %.0f MB of weights read in %.2f ms at %.1f GB/s, the least time "
        "of a step — N sequences commit at most N tokens in it\n\n| sequences | aggregate tokens/s | × one sequence "
        "| read pass's bound | of the bound |\n|---:|---:|---:|---:|---:|\n", DECODE_CONTEXT, DECODE_STEPS, reps,
        pair->target.weight_bytes / 1e6, read_seconds * 1e3, gbs);
    json_t *rows = json_array();
    for (int i = 0; i < DECODE_COUNTS; i++) {
        const int n = decodes[i].sequences;
        const Summary rate = summary_inverse(summarize(seconds + (size_t)i * reps, reps), 1);
        const Summary over_one = summarize_ratio(seconds, seconds + (size_t)i * reps, reps);
        const double bound = n / read_seconds;
        char x[64], y[64];
        out(b, "| %d | %s | %s | %.0f | %.0f%% |\n", n, fmt_range(x, sizeof x, rate, 1, 1),
            fmt_range(y, sizeof y, over_one, 1, 2), bound, 100 * rate.median / bound);
        json_array_append_new(rows, json_pack("{s:i, s:o, s:o, s:f}", "sequences", n, "tokens_per_s",
                                              summary_json(rate), "over_one", summary_json(over_one),
                                              "read_bound_tokens_per_s", bound));
    }
    for (int k = 0; k < DECODE_MAX; k++) workload_free(&caches[k]);
    free(seconds);
    suite_end(b, json_pack("{s:o, s:f, s:f}", "rows", rows, "weights_read_s", read_seconds, "read_gbs", gbs));
}
