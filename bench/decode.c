// decode.c — decoding speed: tokens/s of the target and of the draft, the fraction of the memory bandwidth their
// weights stream at, and c = draft step / target step, the cost ratio of Theorem 3.8; and the cost of turning a
// row of logits into probabilities, which a speculative round pays beside the forwards for every q row it draws
// from and every p row it verifies against.
//
// A decode step is one forward of T = 1 after 64 cached positions. Each round runs a read pass over memory, a
// target step, a draft step, the two samplings and a draw, so the fraction of the bandwidth and c are ratios within
// a round; and a target step after a long context (1024 positions, or the model's last 16 fewer), where attention
// reads every cached position's key and value beside the weights.
#include <stdlib.h>

#include "bench.h"
#include "speculative/sampling.h"

enum { DECODE_CONTEXT = 64, LONG_CONTEXT = 1024 };

static double step_run(void *ctx, int rep) {
    (void)rep;
    Workload *w = ctx;
    return forward_seconds(w->model, &w->cache, w->context, 1, w->logits);
}

// What a round does with one of the target's rows: greedy, its argmax (sampling_greedy: no row is written); at
// temperature 1, its probabilities (sampler_adjust: a softmax).
typedef struct {
    Sampler sampler;
    double *probs;
    const float *logits;
} SamplingRow;

static double sampling_run(void *ctx, int rep) {
    (void)rep;
    SamplingRow *s = ctx;
    const double t0 = now_seconds();
    const bool bad = s->sampler.params.temperature == 0
                         ? sampling_greedy(s->sampler.kernels, s->logits, s->sampler.V) < 0
                         : sampler_adjust(&s->sampler, s->probs, s->logits) != 0;
    if (bad) die("the target's logits hold a NaN or an inf");
    return now_seconds() - t0;
}

// A SamplingRow of `logits` at this temperature (0 or 1) under these kernels, writing into probs [V].
static SamplingRow sampling_row(float temperature, int V, const Kernels *kernels, double *probs, const float *logits) {
    SamplingRow row = {.probs = probs, .logits = logits};
    const SamplingParams params = {.temperature = temperature, .top_k = 0, .top_p = 1.0f};
    Err err;
    if (!probs || sampler_init(&row.sampler, &params, V, kernels, &err)) die("%s", probs ? err.msg : "out of memory");
    return row;
}

// Where a temperature-1 row's time goes: its three passes (sampler_adjust at temperature 1, without top-k, top-p or
// min-p: Kernels.row_range, exp_sum, scale_to_doubles), each called reps times on its own, in that order, medians in
// seconds. exponentials: [V] and probs: [V], as the sampler's.
enum { ROW_PASSES = 3 };
static const char *const row_pass_names[ROW_PASSES] = {"row_range", "exp_sum", "scale_to_doubles"};

static void row_passes(double median[ROW_PASSES], const Kernels *k, const float *logits, int V, float *exponentials,
                       double *probs, double *t, int reps) {
    const float max = k->row_range(logits, V).max;
    const double inv_sum = 1.0 / k->exp_sum(exponentials, logits, V, max, 1.0f);
    for (int pass = 0; pass < ROW_PASSES; pass++) {
        for (int r = 0; r < reps; r++) {
            const double t0 = now_seconds();
            if (pass == 0) (void)k->row_range(logits, V);
            else if (pass == 1) (void)k->exp_sum(exponentials, logits, V, max, 1.0f);
            else k->scale_to_doubles(probs, exponentials, V, inv_sum);
            t[r] = now_seconds() - t0;
        }
        median[pass] = summarize(t, reps).median;
    }
}

// The target's row again under every variant this CPU runs (SPECDEC_ISA picks the rounds' only), greedy and at
// temperature 1, reps calls each after the rounds (so from the caches): each ISA's figures in one run; then the
// temperature-1 row's passes (row_passes).
static json_t *sampling_by_variant(Bench *b, const float *logits, int V) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    const int reps = b->opt.reps;
    double *probs = malloc(sizeof(double) * V), *t = malloc(sizeof(double) * reps);
    float *exponentials = malloc(sizeof(float) * V);
    if (!probs || !t || !exponentials) die("out of memory");
    json_t *by = json_object();
    out(b, "\nThe same row under each variant, after the rounds (from the caches), µs, greedy / temperature 1:");
    for (int v = 0; v < n; v++) {
        Summary s[2];
        for (int k = 0; k < 2; k++) {
            SamplingRow row = sampling_row((float)k, V, list[v], probs, logits);
            for (int r = 0; r < reps; r++) t[r] = sampling_run(&row, r);
            s[k] = summarize(t, reps);
            sampler_free(&row.sampler);
        }
        char s1[64], s2[64];
        out(b, "%s %s %s / %s", v ? ";" : "", list[v]->name, fmt_range(s1, sizeof s1, summary_scaled(s[0], 1e6), 1, 1),
            fmt_range(s2, sizeof s2, summary_scaled(s[1], 1e6), 1, 1));
        json_object_set_new(by, list[v]->name, json_pack("{s:o, s:o}", "greedy", summary_json(s[0]), "temperature_1",
                                                         summary_json(s[1])));
    }
    out(b, "\nThe temperature-1 row's passes, each alone from the caches, median µs, %s / %s / %s:", row_pass_names[0],
        row_pass_names[1], row_pass_names[2]);
    for (int v = 0; v < n; v++) {
        double passes[ROW_PASSES];
        row_passes(passes, list[v], logits, V, exponentials, probs, t, reps);
        out(b, "%s %s %.1f / %.1f / %.1f", v ? ";" : "", list[v]->name, passes[0] * 1e6, passes[1] * 1e6,
            passes[2] * 1e6);
        json_t *split = json_object();
        for (int pass = 0; pass < ROW_PASSES; pass++)
            json_object_set_new(split, row_pass_names[pass], json_real(passes[pass]));
        json_object_set_new(json_object_get(by, list[v]->name), "temperature_1_passes", split);
    }
    out(b, "\n");
    free(probs), free(t), free(exponentials);
    return by;
}

// A token drawn from the temperature-1 row (sampling_draw at u = 0.5, the CDF's middle): what each draft, each
// resampled or bonus token and each token of target-only sampling costs beyond its row. The row is the one the
// temperature-1 trial adjusts, which measure_rounds' warm-up runs first.
static double draw_run(void *ctx, int rep) {
    (void)rep;
    const SamplingRow *s = ctx;
    const double t0 = now_seconds();
    if (sampling_draw(s->probs, s->sampler.V, 0.5) < 0) die("no token to draw from the target's row");
    return now_seconds() - t0;
}

void suite_decode(Bench *b, Pair *pair, Memory *memory) {
    suite_begin(b, "decode", 1);
    static const char *names[2] = {"target", "draft"};
    Model *models[2] = {&pair->target, &pair->draft};
    const int n_models = pair->has_draft ? 2 : 1, reps = b->opt.reps;
    MemoryPass pass = {memory, MEM_READ, b->pool};
    Workload steps[2], long_step;
    Trial trials[7] = {{memory_pass, &pass}};
    for (int i = 0; i < n_models; i++) {
        workload_init(&steps[i], models[i], DECODE_CONTEXT);
        trials[1 + i] = (Trial){step_run, &steps[i]};
    }
    const int P = pair->target.cfg.n_positions, fits = P - 16 > DECODE_CONTEXT ? P - 16 : DECODE_CONTEXT,
              long_context = fits < LONG_CONTEXT ? fits : LONG_CONTEXT;  // never shorter than DECODE_CONTEXT
    workload_init(&long_step, &pair->target, long_context);
    SamplingRow rows[2];  // greedy, temperature 1
    const int V = pair->target.n_vocab;
    for (int k = 0; k < 2; k++) {
        rows[k] = sampling_row((float)k, V, b->kernels, malloc(sizeof(double) * V), steps[0].logits);
        trials[1 + n_models + k] = (Trial){sampling_run, &rows[k]};
    }
    trials[1 + n_models + 2] = (Trial){draw_run, &rows[1]};
    trials[1 + n_models + 3] = (Trial){step_run, &long_step};
    const int n_trials = 1 + n_models + 4;
    double *seconds = malloc(sizeof(double) * n_trials * reps);  // [read, target, (draft,) greedy, T = 1, draw,
                                                                 //  target after the long context][reps]
    measure_rounds(b, "read pass, target step, draft step, sampling, long context", trials, n_trials, reps, 0.02,
                   seconds);

    const double read_bytes = (double)memory_op_bytes(memory, MEM_READ);
    Summary bandwidth = summary_inverse(summarize(seconds, reps), read_bytes / 1e9);
    out(b, "## Decode\n\nOne forward of T = 1 after %d cached positions, %d threads, %s kernels; median [min–max] "
        "of %d rounds, each a read pass over %.0f MiB (%.1f GB/s median), a target step, a draft step and the two "
        "samplings and the draw below\n\n",
        DECODE_CONTEXT, pool_size(b->pool), b->kernels->name, reps, read_bytes / (1 << 20), bandwidth.median);
    out(b, "| model | weights | ms/token | tokens/s | weights streamed | %% of read bandwidth |\n"
           "|---|---:|---:|---:|---:|---:|\n");
    json_t *j = json_pack("{s:i, s:o}", "context", DECODE_CONTEXT, "read_gbs", summary_json(bandwidth));
    bool in_cache = false;
    for (int i = 0; i < n_models; i++) {
        const double *t = seconds + (size_t)(i + 1) * reps, bytes = (double)models[i]->weight_bytes;
        Summary step = summarize(t, reps);
        Summary rate = summary_inverse(step, 1), gbs = summary_inverse(step, bytes / 1e9);
        Summary fraction = summary_scaled(summarize_ratio(seconds, t, reps), bytes / read_bytes);
        char c1[64], c2[64], c3[64], c4[64];
        out(b, "| %s | %.1f MB | %s | %s | %s GB/s | %s |\n", names[i], bytes / 1e6,
            fmt_range(c1, sizeof c1, summary_scaled(step, 1e3), 1, 3), fmt_range(c2, sizeof c2, rate, 1, 0),
            fmt_range(c3, sizeof c3, gbs, 1, 1), fmt_range(c4, sizeof c4, summary_scaled(fraction, 100), 1, 0));
        json_object_set_new(j, names[i],
                            json_pack("{s:I, s:o, s:o, s:o, s:o}", "weight_bytes", (json_int_t)bytes, "seconds",
                                      summary_json(step), "tokens_per_s", summary_json(rate), "weights_gbs",
                                      summary_json(gbs), "bandwidth_fraction", summary_json(fraction)));
        in_cache |= bytes < l3_bytes();
    }
    if (in_cache)
        out(b, "\nWeights smaller than the %.0f MiB L3 cache are read partly from it, not from memory: they can "
               "stream faster than the read bandwidth.\n", l3_bytes() / 1048576.0);
    if (pair->has_draft) {
        Summary c = summarize_ratio(seconds + 2 * (size_t)reps, seconds + reps, reps);
        char c1[64];
        out(b, "\nc = draft step / target step, within rounds: %s\n", fmt_range(c1, sizeof c1, c, 1, 3));
        json_object_set_new(j, "c", summary_json(c));
    }
    const Summary draw = summarize(seconds + (size_t)(1 + n_models + 2) * reps, reps);
    Summary sampling[2];
    for (int k = 0; k < 2; k++) {
        sampling[k] = summarize(seconds + (size_t)(1 + n_models + k) * reps, reps);
        sampler_free(&rows[k].sampler);
        free(rows[k].probs);
    }
    char s1[64], s2[64], s3[64];
    out(b, "\nOne row of the target's %d logits, as a speculative round reads each q row a draft is drawn from and "
           "each p row a draft is checked against, µs: greedy, its argmax (sampling_greedy) %s; temperature 1, its "
           "probabilities (sampler_adjust) %s; a token drawn from the temperature-1 row (sampling_draw at u = 0.5) "
           "%s\n", V,
        fmt_range(s1, sizeof s1, summary_scaled(sampling[0], 1e6), 1, 1),
        fmt_range(s2, sizeof s2, summary_scaled(sampling[1], 1e6), 1, 1),
        fmt_range(s3, sizeof s3, summary_scaled(draw, 1e6), 1, 1));
    json_object_set_new(j, "sampling_seconds", json_pack("{s:o, s:o, s:o}", "greedy", summary_json(sampling[0]),
                                                         "temperature_1", summary_json(sampling[1]), "draw",
                                                         summary_json(draw)));
    json_object_set_new(j, "sampling_by_variant", sampling_by_variant(b, steps[0].logits, V));
    const Config *c = &pair->target.cfg;
    const double *at_long = seconds + (size_t)(1 + n_models + 3) * reps,
                 kv_mb = 2.0 * c->n_layer * c->n_kv_head * c->head_dim * long_context * sizeof(float) / 1e6;
    const Summary long_step_s = summarize(at_long, reps), growth = summarize_ratio(at_long, seconds + reps, reps);
    out(b, "\nThe target's step after %d cached positions (its attention reads their keys and values, %.1f MB, "
           "beside the weights), ms: %s, %s times the step after %d\n", long_context, kv_mb,
        fmt_range(s1, sizeof s1, summary_scaled(long_step_s, 1e3), 1, 3), fmt_range(s2, sizeof s2, growth, 1, 2),
        DECODE_CONTEXT);
    json_object_set_new(j, "long_context", json_pack("{s:i, s:f, s:o, s:o}", "context", long_context, "kv_mb", kv_mb,
                                                     "seconds", summary_json(long_step_s), "growth",
                                                     summary_json(growth)));
    for (int i = 0; i < n_models; i++) workload_free(&steps[i]);
    workload_free(&long_step);
    free(seconds);
    suite_end(b, j);
}
