// quant.c — the quant suite: 8-bit and 4-bit weights (q8, q4, kernels.h) against the same checkpoints as stored.
//
//   - load time: model_load as stored, and quantizing every matrix to q8 and to q4 on the way (pair.c times each);
//   - speed: rounds of a read pass, then a decode step (T = 1 after 64 cached positions) and a verification
//     forward (T = 8) of the target in each form: tokens/s, the ratios of q8 over stored and q4 over q8 within
//     rounds (the forms alternate), the fraction of the read bandwidth the weights stream at, time(8) / time(1);
//   - accuracy: every held-out prompt fed to each form, each position's next-token distribution compared with
//     the stored form's: top-1 agreement, mean and largest KL(p_stored ‖ p_quantized); and with a draft, the
//     acceptance rate α = E[Σ_x min(p(x), q(x))] (Leviathan et al. 2023, §3.1; temperature 1) and its greedy form
//     (the draft's argmax is the target's), for the stored pair, the stored target with the q8 draft (specdec
//     generate's default, drafter.h's DRAFT_QUANT_DEFAULT) and with the q4 draft, the q8 pair and the q4 pair.
#include <stdlib.h>

#include "bench.h"
#include "divergence.h"

enum { QUANT_CONTEXT = 64, VERIFY_T = 8, FEED_CHUNK = 64 };

static const char *const FORM_NAMES[N_FORMS] = {"as stored", "q8", "q4"};
static const char *const FORM_KEYS[N_FORMS] = {"stored", "q8", "q4"};

static void quant_load(Bench *b, Pair *pair, json_t *j) {
    out(b, "### Load\n\nmodel_load, seconds: the checkpoint as stored, and quantized to q8 and to q4 on the way (the "
           "weight matrices read as floats, 16 rows at a time, and quantized block by block on the pool's threads)"
           "\n\n| model | as stored | q8 | q4 | weights as stored | q8 | q4 |\n|---|---:|---:|---:|---:|---:|---:|\n");
    const char *names[2] = {"target", "draft"};
    json_t *loads = json_object();
    for (int i = 0; i < (pair->has_draft ? 2 : 1); i++) {
        const double *s = pair->form_load_seconds[i];
        size_t bytes[N_FORMS];
        for (int f = 0; f < N_FORMS; f++) bytes[f] = pair->forms[i][f]->weight_bytes;
        out(b, "| %s | %.3f | %.3f | %.3f | %.1f MB | %.1f MB | %.1f MB |\n", names[i], s[0], s[1], s[2],
            bytes[0] / 1e6, bytes[1] / 1e6, bytes[2] / 1e6);
        json_t *model = json_object();
        for (int f = 0; f < N_FORMS; f++)
            json_object_set_new(model, FORM_KEYS[f], json_pack("{s:f, s:I}", "seconds", s[f], "bytes",
                                                                (json_int_t)bytes[f]));
        json_object_set_new(loads, names[i], model);
    }
    json_object_set_new(j, "load", loads);
}

// Trials: 0 the read pass; then for form f 1 + f a decode step, 1 + N_FORMS + f a verification of 8.
static void quant_speed(Bench *b, Pair *pair, Memory *memory, json_t *j) {
    Model **forms = pair->forms[0];
    enum { TRIALS = 1 + 2 * N_FORMS };
    Workload w[N_FORMS];
    Forward f[2 * N_FORMS];
    MemoryPass pass = {memory, MEM_READ, b->pool};
    Trial trials[TRIALS] = {{memory_pass, &pass}};
    for (int k = 0; k < N_FORMS; k++) {
        workload_init(&w[k], forms[k], QUANT_CONTEXT);
        f[k] = (Forward){&w[k], 1};
        f[N_FORMS + k] = (Forward){&w[k], VERIFY_T};
        trials[1 + k] = (Trial){forward_run, &f[k]};
        trials[1 + N_FORMS + k] = (Trial){forward_run, &f[N_FORMS + k]};
    }
    const int reps = b->opt.reps;
    double *s = malloc(sizeof(double) * TRIALS * reps);
    measure_rounds(b, "read pass, stored, q8 and q4 steps", trials, TRIALS, reps, 0.02, s);
    const double read_bytes = (double)memory_op_bytes(memory, MEM_READ);
    out(b, "\n### Speed\n\nThe target, one forward of T = 1 and of T = %d after %d cached positions; median "
           "[min–max] of %d rounds, each a read pass over %.0f MiB and the six forwards\n\n"
           "| form | weights | ms/token | tokens/s | %% of read bandwidth | T = %d ms | time(%d) / time(1) |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n", VERIFY_T, QUANT_CONTEXT, reps, read_bytes / (1 << 20), VERIFY_T,
        VERIFY_T);
    json_t *speed = json_object();
    for (int k = 0; k < N_FORMS; k++) {
        const double *t1 = s + (size_t)(1 + k) * reps, *t8 = s + (size_t)(1 + N_FORMS + k) * reps;
        const double bytes = (double)forms[k]->weight_bytes;
        Summary step = summarize(t1, reps), rate = summary_inverse(step, 1);
        Summary fraction = summary_scaled(summarize_ratio(s, t1, reps), bytes / read_bytes);
        Summary verify = summarize(t8, reps), cost = summarize_ratio(t8, t1, reps);
        char c1[64], c2[64], c3[64], c4[64], c5[64];
        out(b, "| %s | %.1f MB | %s | %s | %s | %s | %s |\n", FORM_NAMES[k], bytes / 1e6,
            fmt_range(c1, sizeof c1, summary_scaled(step, 1e3), 1, 3), fmt_range(c2, sizeof c2, rate, 1, 0),
            fmt_range(c3, sizeof c3, summary_scaled(fraction, 100), 1, 0),
            fmt_range(c4, sizeof c4, summary_scaled(verify, 1e3), 1, 3), fmt_range(c5, sizeof c5, cost, 1, 2));
        json_object_set_new(speed, FORM_KEYS[k],
                            json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "weight_bytes", (json_int_t)bytes, "seconds",
                                      summary_json(step), "tokens_per_s", summary_json(rate), "bandwidth_fraction",
                                      summary_json(fraction), "verify_seconds", summary_json(verify),
                                      "verify_cost", summary_json(cost)));
        workload_free(&w[k]);
    }
    // Time over time, round by round: stored / q8 is q8's tokens/s over the stored weights', q8 / q4 q4's over q8's.
    Summary q8_speedup = summarize_ratio(s + reps, s + 2 * (size_t)reps, reps);
    Summary q4_speedup = summarize_ratio(s + 2 * (size_t)reps, s + 3 * (size_t)reps, reps);
    char c1[64], c2[64];
    out(b, "\nDecode tokens/s, within rounds: q8 over the stored weights' %s; q4 over q8's %s\n",
        fmt_range(c1, sizeof c1, q8_speedup, 1, 2), fmt_range(c2, sizeof c2, q4_speedup, 1, 2));
    json_object_set_new(speed, "q8_speedup", summary_json(q8_speedup));
    json_object_set_new(speed, "q4_over_q8", summary_json(q4_speedup));
    json_object_set_new(j, "speed", speed);
    free(s);
}

// Feeds tokens[0, n) to m from an empty cache, FEED_CHUNK at a time, writing every position's logits: [n, V].
static void feed_all(Model *m, KVCache *cache, const int *tokens, int n, float *logits) {
    Err err;
    kv_truncate(cache, 0);
    for (int done = 0; done < n; done += FEED_CHUNK) {
        const int T = n - done < FEED_CHUNK ? n - done : FEED_CHUNK;
        if (model_forward(m, cache, tokens + done, T, logits + (size_t)done * m->n_vocab, true, &err))
            die("%s", err.msg);
    }
}

// The pairs compared, as indices into Tally's models (target forms 0..2, draft forms 3..5): both stored, the
// stored target with the q8 draft and with the q4 draft, both q8, both q4.
enum { N_PAIRS = 5 };
static const int PAIRS[N_PAIRS][2] = {{0, 3}, {0, 4}, {0, 5}, {1, 4}, {2, 5}};
static const char *const PAIR_NAMES[N_PAIRS] = {"as stored", "target as stored, draft q8",
                                                "target as stored, draft q4", "q8", "q4"};
static const char *const PAIR_KEYS[N_PAIRS] = {"stored", "q8_draft", "q4_draft", "q8", "q4"};

typedef struct {
    long positions, top1[N_FORMS], greedy[N_PAIRS];
    double kl_sum[N_FORMS], kl_max[N_FORMS], alpha[N_PAIRS];
} Tally;

// Every position of one prompt, its logits from each model (logits[m]: [n, V]), into the tally.
static void tally_prompt(Tally *y, float *const *logits, int n, int V, bool has_draft) {
    for (int t = 0; t < n; t++, y->positions++) {
        const size_t at = (size_t)t * V;
        for (int f = 1; f < N_FORMS; f++) {
            Divergence d = divergence(logits[0] + at, logits[f] + at, V);
            y->kl_sum[f] += d.kl;
            y->kl_max[f] = d.kl > y->kl_max[f] ? d.kl : y->kl_max[f];
            y->top1[f] += d.same_argmax;
        }
        for (int k = 0; k < N_PAIRS && has_draft; k++) {
            Divergence pq = divergence(logits[PAIRS[k][0]] + at, logits[PAIRS[k][1]] + at, V);
            y->alpha[k] += pq.overlap;
            y->greedy[k] += pq.same_argmax;
        }
    }
}

static json_t *report_accuracy(Bench *b, const Tally *y, int n_prompts, bool has_draft) {
    const double n = (double)y->positions;
    out(b, "\n### Accuracy\n\nThe %d held-out prompts of bench/prompts (%ld positions), each fed whole to the "
           "target in each form; every position's next-token distribution compared with the stored weights'\n\n"
           "| form | top-1 agreement | mean KL(p_stored ‖ p_form) | largest KL |\n|---|---:|---:|---:|\n",
        n_prompts, y->positions);
    json_t *acc = json_pack("{s:i, s:I}", "prompts", n_prompts, "positions", (json_int_t)y->positions);
    for (int f = 1; f < N_FORMS; f++) {
        out(b, "| %s | %.2f%% | %.5f | %.4f |\n", FORM_NAMES[f], 100.0 * y->top1[f] / n, y->kl_sum[f] / n,
            y->kl_max[f]);
        json_object_set_new(acc, FORM_KEYS[f], json_pack("{s:f, s:f, s:f}", "top1_agreement", y->top1[f] / n,
                                                         "mean_kl", y->kl_sum[f] / n, "max_kl", y->kl_max[f]));
    }
    if (!has_draft) return acc;
    out(b, "\nThe pair's acceptance on the same positions: α = mean Σ_x min(p(x), q(x)) (temperature 1), and "
           "greedy (the draft's argmax is the target's); the difference from the stored pair's\n\n"
           "| pair | α | greedy α | α − stored | greedy α − stored |\n|---|---:|---:|---:|---:|\n");
    json_t *acceptance = json_object();
    for (int k = 0; k < N_PAIRS; k++) {
        out(b, "| %s | %.4f | %.4f | %+.4f | %+.4f |\n", PAIR_NAMES[k], y->alpha[k] / n, y->greedy[k] / n,
            (y->alpha[k] - y->alpha[0]) / n, (double)(y->greedy[k] - y->greedy[0]) / n);
        json_object_set_new(acceptance, PAIR_KEYS[k], json_pack("{s:f, s:f}", "alpha", y->alpha[k] / n, "greedy",
                                                                y->greedy[k] / n));
    }
    json_object_set_new(acc, "acceptance", acceptance);
    return acc;
}

static void quant_accuracy(Bench *b, Pair *pair, json_t *j) {
    int n_prompts;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, 0, &n_prompts);
    const int n_models = (pair->has_draft ? 2 : 1) * N_FORMS, V = pair->target.n_vocab;
    Model *models[2 * N_FORMS];
    KVCache caches[2 * N_FORMS];
    float *logits[2 * N_FORMS];
    int longest = 0;
    for (int i = 0; i < n_prompts; i++) longest = prompts[i].n > longest ? prompts[i].n : longest;
    for (int m = 0; m < n_models; m++) {
        Err err;
        models[m] = pair->forms[m / N_FORMS][m % N_FORMS];
        if (model_kv_init(models[m], &caches[m], &err)) die("%s", err.msg);
        if (!(logits[m] = malloc(sizeof(float) * (size_t)longest * V))) die("out of memory for logits");
    }
    Tally y = {0};
    for (int p = 0; p < n_prompts; p++) {
        progress_show(&b->progress, "accuracy", (double)p / n_prompts);
        for (int m = 0; m < n_models; m++) feed_all(models[m], &caches[m], prompts[p].ids, prompts[p].n, logits[m]);
        tally_prompt(&y, logits, prompts[p].n, V, pair->has_draft);
    }
    json_object_set_new(j, "accuracy", report_accuracy(b, &y, n_prompts, pair->has_draft));
    for (int m = 0; m < n_models; m++) kv_free(&caches[m]), free(logits[m]);
    prompts_free(prompts, n_prompts);
}

void suite_quant(Bench *b, Pair *pair, Memory *memory) {
    suite_begin(b, "quant", 2);
    json_t *j = json_object();
    out(b, "## Quant\n\n");
    quant_load(b, pair, j);
    quant_speed(b, pair, memory, j);
    quant_accuracy(b, pair, j);
    suite_end(b, j);
}
