// quant.c — the quant suite: 8-bit weights (q8, kernels.h) against the same checkpoints as stored.
//
//   - load time: model_load as stored, and quantizing every matrix to q8 on the way (pair.c times both);
//   - speed: rounds of a read pass, then a decode step (T = 1 after 64 cached positions) and a verification
//     forward (T = 8) of the target in either form: tokens/s, q8 over stored within rounds, the fraction of the
//     read bandwidth the weights stream at, and time(8) / time(1);
//   - accuracy: every held-out prompt fed to both forms, each position's next-token distribution compared: top-1
//     agreement, mean and largest KL(p_stored ‖ p_q8); and with a draft, the acceptance rate
//     α = E[Σ_x min(p(x), q(x))] (Leviathan et al. 2023, §3.1; temperature 1) and its greedy form (the draft's
//     argmax is the target's), for the stored pair, the stored target with the q8 draft (specdec generate's
//     default, drafter.h's DRAFT_QUANT_DEFAULT), and the q8 pair.
#include <stdlib.h>

#include "bench.h"
#include "divergence.h"

enum { QUANT_CONTEXT = 64, VERIFY_T = 8, FEED_CHUNK = 64 };

static void quant_load(Bench *b, Pair *pair, json_t *j) {
    out(b, "### Load\n\nmodel_load, seconds: the checkpoint as stored, and quantized to q8 on the way (the weight "
           "matrices read as floats, 16 rows at a time, and quantized block by block on the pool's threads)\n\n"
           "| model | as stored | q8 | weights as stored | q8 |\n|---|---:|---:|---:|---:|\n");
    const char *names[2] = {"target", "draft"};
    json_t *loads = json_object();
    for (int i = 0; i < (pair->has_draft ? 2 : 1); i++) {
        const double *s = pair->form_load_seconds[i];
        const size_t stored = pair->forms[i][0]->weight_bytes, q8 = pair->forms[i][1]->weight_bytes;
        out(b, "| %s | %.3f | %.3f | %.1f MB | %.1f MB |\n", names[i], s[0], s[1], stored / 1e6, q8 / 1e6);
        json_object_set_new(loads, names[i], json_pack("{s:f, s:f, s:I, s:I}", "stored_s", s[0], "q8_s", s[1],
                                                       "stored_bytes", (json_int_t)stored, "q8_bytes",
                                                       (json_int_t)q8));
    }
    json_object_set_new(j, "load", loads);
}

// Trials: 0 the read pass; then for form k (0 stored, 1 q8) 1 + k a decode step, 3 + k a verification of 8.
static void quant_speed(Bench *b, Pair *pair, Memory *memory, json_t *j) {
    Model **forms = pair->forms[0];
    Workload w[2];
    Forward f[4];
    MemoryPass pass = {memory, MEM_READ, b->pool};
    Trial trials[5] = {{memory_pass, &pass}};
    for (int k = 0; k < 2; k++) {
        workload_init(&w[k], forms[k], QUANT_CONTEXT);
        f[k] = (Forward){&w[k], 1};
        f[2 + k] = (Forward){&w[k], VERIFY_T};
        trials[1 + k] = (Trial){forward_run, &f[k]};
        trials[3 + k] = (Trial){forward_run, &f[2 + k]};
    }
    const int reps = b->opt.reps;
    double *s = malloc(sizeof(double) * 5 * reps);
    measure_rounds(b, "read pass, stored and q8 steps", trials, 5, reps, 0.02, s);
    const double read_bytes = (double)memory_op_bytes(memory, MEM_READ);
    out(b, "\n### Speed\n\nThe target, one forward of T = 1 and of T = %d after %d cached positions; median "
           "[min–max] of %d rounds, each a read pass over %.0f MiB and the four forwards\n\n"
           "| form | weights | ms/token | tokens/s | %% of read bandwidth | T = %d ms | time(%d) / time(1) |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n", VERIFY_T, QUANT_CONTEXT, reps, read_bytes / (1 << 20), VERIFY_T,
        VERIFY_T);
    const char *names[2] = {"as stored", "q8"};
    json_t *speed = json_object();
    for (int k = 0; k < 2; k++) {
        const double *t1 = s + (size_t)(1 + k) * reps, *t8 = s + (size_t)(3 + k) * reps;
        const double bytes = (double)forms[k]->weight_bytes;
        Summary step = summarize(t1, reps), rate = summary_inverse(step, 1);
        Summary fraction = summary_scaled(summarize_ratio(s, t1, reps), bytes / read_bytes);
        Summary verify = summarize(t8, reps), cost = summarize_ratio(t8, t1, reps);
        char c1[64], c2[64], c3[64], c4[64], c5[64];
        out(b, "| %s | %.1f MB | %s | %s | %s | %s | %s |\n", names[k], bytes / 1e6,
            fmt_range(c1, sizeof c1, summary_scaled(step, 1e3), 1, 3), fmt_range(c2, sizeof c2, rate, 1, 0),
            fmt_range(c3, sizeof c3, summary_scaled(fraction, 100), 1, 0),
            fmt_range(c4, sizeof c4, summary_scaled(verify, 1e3), 1, 3), fmt_range(c5, sizeof c5, cost, 1, 2));
        json_object_set_new(speed, k ? "q8" : "stored",
                            json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "weight_bytes", (json_int_t)bytes, "seconds",
                                      summary_json(step), "tokens_per_s", summary_json(rate), "bandwidth_fraction",
                                      summary_json(fraction), "verify_seconds", summary_json(verify),
                                      "verify_cost", summary_json(cost)));
        workload_free(&w[k]);
    }
    Summary speedup = summarize_ratio(s + reps, s + 2 * (size_t)reps, reps);  // stored time / q8 time
    char c1[64];
    out(b, "\nq8 tokens/s over the stored weights' (decode), within rounds: %s\n",
        fmt_range(c1, sizeof c1, speedup, 1, 2));
    json_object_set_new(speed, "q8_speedup", summary_json(speedup));
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

static void quant_accuracy(Bench *b, Pair *pair, json_t *j) {
    int n_prompts;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, 0, &n_prompts);
    const int n_models = pair->has_draft ? 4 : 2, V = pair->target.n_vocab;
    Model *models[4] = {pair->forms[0][0], pair->forms[0][1], pair->forms[1][0], pair->forms[1][1]};
    KVCache caches[4];
    float *logits[4];
    int longest = 0;
    for (int i = 0; i < n_prompts; i++) longest = prompts[i].n > longest ? prompts[i].n : longest;
    for (int m = 0; m < n_models; m++) {
        Err err;
        if (model_kv_init(models[m], &caches[m], &err)) die("%s", err.msg);
        if (!(logits[m] = malloc(sizeof(float) * (size_t)longest * V))) die("out of memory for logits");
    }
    // The pairs compared, as indices into models: (target, draft) both stored, stored with q8, both q8.
    enum { N_PAIRS = 3 };
    static const int pairs[N_PAIRS][2] = {{0, 2}, {0, 3}, {1, 3}};
    static const char *const pair_names[N_PAIRS] = {"as stored", "target as stored, draft q8", "q8"};
    long positions = 0, top1 = 0, greedy[N_PAIRS] = {0};
    double kl_sum = 0.0, kl_max = 0.0, alpha[N_PAIRS] = {0.0};
    for (int p = 0; p < n_prompts; p++) {
        progress_show(&b->progress, "accuracy", (double)p / n_prompts);
        for (int m = 0; m < n_models; m++) feed_all(models[m], &caches[m], prompts[p].ids, prompts[p].n, logits[m]);
        for (int t = 0; t < prompts[p].n; t++, positions++) {
            const size_t at = (size_t)t * V;
            Divergence d = divergence(logits[0] + at, logits[1] + at, V);
            kl_sum += d.kl;
            kl_max = d.kl > kl_max ? d.kl : kl_max;
            top1 += d.same_argmax;
            for (int k = 0; k < N_PAIRS && pair->has_draft; k++) {
                Divergence pq = divergence(logits[pairs[k][0]] + at, logits[pairs[k][1]] + at, V);
                alpha[k] += pq.overlap;
                greedy[k] += pq.same_argmax;
            }
        }
    }
    const double n = (double)positions;
    out(b, "\n### Accuracy\n\nThe %d held-out prompts of bench/prompts (%ld positions), each fed whole to the "
           "target as stored and in q8; every position's next-token distribution compared\n\n"
           "| top-1 agreement | mean KL(p_stored ‖ p_q8) | largest KL |\n|---:|---:|---:|\n"
           "| %.2f%% | %.5f | %.4f |\n", n_prompts, positions, 100.0 * top1 / n, kl_sum / n, kl_max);
    json_t *acc = json_pack("{s:i, s:I, s:f, s:f, s:f}", "prompts", n_prompts, "positions", (json_int_t)positions,
                            "top1_agreement", top1 / n, "mean_kl", kl_sum / n, "max_kl", kl_max);
    if (pair->has_draft) {
        out(b, "\nThe pair's acceptance on the same positions: α = mean Σ_x min(p(x), q(x)) (temperature 1), and "
               "greedy (the draft's argmax is the target's); the difference from the stored pair's\n\n"
               "| pair | α | greedy α | α − stored | greedy α − stored |\n|---|---:|---:|---:|---:|\n");
        for (int k = 0; k < N_PAIRS; k++)
            out(b, "| %s | %.4f | %.4f | %+.4f | %+.4f |\n", pair_names[k], alpha[k] / n, greedy[k] / n,
                (alpha[k] - alpha[0]) / n, (double)(greedy[k] - greedy[0]) / n);
        json_object_set_new(acc, "acceptance",
                            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f}", "stored", alpha[0] / n, "q8_draft",
                                      alpha[1] / n, "q8", alpha[2] / n, "greedy_stored", greedy[0] / n,
                                      "greedy_q8_draft", greedy[1] / n, "greedy_q8", greedy[2] / n));
    }
    json_object_set_new(j, "accuracy", acc);
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
