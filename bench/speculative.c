// speculative.c — what speculative decoding buys on held-out prompts, beside what Theorem 3.8 predicts.
//
// For two prompt sets — the held-out one and a copy-heavy one (bench/prompts/copy) — and each temperature (0, 0.7,
// 1.0) every decoding configuration — target-only; the draft model at γ ∈ {1, 2, 3, 4, 6, 8}, heuristic and auto;
// n-gram lookup (--lookup) at γ = 4 and auto; the lookup or the draft model per round (-d … --lookup) at auto — runs once per
// prompt, all on the same prompt and seed within a round; the speed-up on a prompt is target-only's time per token
// over the configuration's in that round. Greedy runs must reproduce
// target-only's output token for token: a mismatch is reported loudly and makes run-bench exit with status 1.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speculative/speculative.h"

static const float TEMPERATURES[] = {0.0f, 0.7f, 1.0f};
static const int GAMMAS[] = {1, 2, 3, 4, 6, 8};
enum {
    N_TEMPERATURES = sizeof TEMPERATURES / sizeof TEMPERATURES[0],
    N_GAMMAS = sizeof GAMMAS / sizeof GAMMAS[0],
    N_MODEL_CONFIGS = 1 + N_GAMMAS + 2,  // target-only, the draft model at the fixed γ's, heuristic, auto
    N_CONFIGS = N_MODEL_CONFIGS + 3,     // and lookup at γ = 4 and auto, lookup + draft model at auto
};


// What every configuration at one temperature shares.
typedef struct {
    Pair *pair;
    const Prompt *prompts;      // [n_prompts]: round r runs prompts[r] with seed r + 1
    int n_prompts, tokens;
    float temperature;
} Setting;

// One decoding configuration, and what its runs produced.
typedef struct {
    const Setting *setting;
    char name[32];              // "target-only", "γ = 4", "heuristic", "auto", "lookup · auto", …
    DrafterKind by;
    bool drafted;
    GammaPolicy policy;
    int gamma;                  // GAMMA_FIXED: γ; GAMMA_HEURISTIC: the start
    SpecStats *stats;           // [n_prompts]
    int *outputs;               // [n_prompts, tokens]
    int *n_out;                 // [n_prompts]
} Decoding;

// i: 0 target-only, then the draft model at GAMMAS, heuristic, auto; then lookup at γ = 4, auto; staged at auto.
static void decoding_init(Decoding *d, const Setting *s, int i) {
    const int n = s->n_prompts;
    static const char *const extra_names[] = {"lookup · γ = 4", "lookup · auto", "lookup + draft · auto"};
    const int extra = i - N_MODEL_CONFIGS;
    const DrafterKind by = i == 0      ? DRAFTER_NONE
                           : extra < 0 ? DRAFTER_MODEL
                           : extra < 2 ? DRAFTER_LOOKUP
                                       : DRAFTER_STAGED;
    *d = (Decoding){s, "", by, i > 0,
                    i <= N_GAMMAS || extra == 0 ? GAMMA_FIXED : i == N_GAMMAS + 1 ? GAMMA_HEURISTIC : GAMMA_AUTO,
                    i > 0 && i <= N_GAMMAS ? GAMMAS[i - 1] : extra == 0 ? 4 : 5, calloc((size_t)n, sizeof(SpecStats)),
                    malloc(sizeof(int) * n * s->tokens), malloc(sizeof(int) * n)};
    if (!d->stats || !d->outputs || !d->n_out) die("out of memory");
    if (!d->drafted) snprintf(d->name, sizeof d->name, "target-only");
    else if (extra >= 0) snprintf(d->name, sizeof d->name, "%s", extra_names[extra]);
    else if (d->policy == GAMMA_FIXED) snprintf(d->name, sizeof d->name, "γ = %d", d->gamma);
    else snprintf(d->name, sizeof d->name, d->policy == GAMMA_HEURISTIC ? "heuristic" : "auto");
}

static void decoding_free(Decoding *d) { free(d->stats), free(d->outputs), free(d->n_out); }

// Generates for prompt `rep` (a Trial); returns seconds per generated token.
static double decoding_run(void *ctx, int rep) {
    Decoding *d = ctx;
    const Setting *s = d->setting;
    const Prompt *prompt = &s->prompts[rep];
    SpecParams params = {.sampling = {s->temperature, 0, 1.0f}, .seed = (uint64_t)rep + 1, .policy = d->policy,
                         .gamma = d->gamma, .max_tokens = s->tokens, .eos_id = s->pair->target.cfg.eos_token_id};
    Drafters drafters;
    Err err;
    if (drafter_open(&drafters, d->by, &s->pair->draft, &params, 0, LOOKUP_STAGED_MIN_MATCH, &err)) die("%s", err.msg);
    SpecStats *st = &d->stats[rep];
    if (speculative_generate(&s->pair->target, drafters.drafter, prompt->ids, prompt->n, &params,
                             d->outputs + (size_t)rep * s->tokens, &d->n_out[rep], st, &err))
        die("%s: %s", prompt->id, err.msg);
    drafter_close(&drafters);
    return st->decode_seconds / (st->generated > 0 ? st->generated : 1);
}

// Runs pooled over the prompts.
typedef struct {
    double generated, rounds, drafted, accepted, sum_min_pq, n_min_pq, draft_calls, expected_tokens;
    double decode_seconds, target_seconds, draft_seconds;  // all rounds; in verify (or decode) forwards; in drafting
} Totals;

static void add_totals(Totals *t, const Decoding *d) {
    for (int r = 0; r < d->setting->n_prompts; r++) {
        const SpecStats *s = &d->stats[r];
        t->generated += s->generated, t->rounds += s->rounds, t->drafted += s->drafted, t->accepted += s->accepted;
        t->sum_min_pq += s->sum_min_pq, t->n_min_pq += s->n_min_pq, t->draft_calls += s->draft_calls;
        t->expected_tokens += s->expected_tokens;
        t->decode_seconds += s->decode_seconds, t->target_seconds += s->target_seconds;
        t->draft_seconds += s->draft_seconds;
    }
}

static double ratio_or_zero(double num, double den) { return den > 0 ? num / den : 0; }

// α = mean Σ min(p, q), and c = draft step / target step (target_step: target-only's seconds per forward).
static double totals_alpha(const Totals *t) { return ratio_or_zero(t->sum_min_pq, t->n_min_pq); }
static double totals_c(const Totals *t, double target_step) {
    return ratio_or_zero(ratio_or_zero(t->draft_seconds, t->draft_calls), target_step);
}

// Greedy: the prompts on which d's output differs from target-only's, each reported on stderr.
static int count_mismatches(Bench *b, const Decoding *d, const Decoding *plain) {
    const Setting *s = d->setting;
    int mismatches = 0;
    for (int r = 0; r < s->n_prompts; r++) {
        const int *x = d->outputs + (size_t)r * s->tokens, *y = plain->outputs + (size_t)r * s->tokens;
        int n = d->n_out[r] < plain->n_out[r] ? d->n_out[r] : plain->n_out[r], at = 0;
        while (at < n && x[at] == y[at]) at++;
        if (at == n && d->n_out[r] == plain->n_out[r]) continue;
        mismatches++;
        b->failed = true;
        fprintf(stderr, "run-bench: MISMATCH: greedy %s on prompt %s differs from target-only at token %d "
                        "(lengths %d and %d)\n", d->name, s->prompts[r].id, at, d->n_out[r], plain->n_out[r]);
    }
    return mismatches;
}

// Prints d's row of the table and returns its JSON.   seconds, plain_seconds: [n_prompts], per token
// target_step: target-only's forward; plain_token: target-only's seconds per token, its sampling included.
static json_t *decoding_report(Bench *b, const Decoding *d, const Decoding *plain, const double *seconds,
                               const double *plain_seconds, double target_step, double plain_token) {
    const Setting *s = d->setting;
    const int n = s->n_prompts;
    const bool greedy = s->temperature == 0;
    Totals t = {0};
    add_totals(&t, d);
    Summary rate = summary_inverse(summarize(seconds, n), 1), speedup = summarize_ratio(plain_seconds, seconds, n);
    double alpha = totals_alpha(&t), cost = totals_c(&t, target_step), gamma = ratio_or_zero(t.drafted, t.rounds);
    double theorem = d->drafted ? spec_predicted_speedup(alpha, gamma, cost) : 1;
    // The measured-cost prediction: what the rounds played should yield given α, at the cost of their forwards.
    double predicted = ratio_or_zero(t.expected_tokens * plain_token, t.target_seconds + t.draft_seconds);
    double pooled = ratio_or_zero(plain_token, ratio_or_zero(t.decode_seconds, t.generated));
    double acceptance = ratio_or_zero(t.accepted, t.drafted), per_call = ratio_or_zero(t.generated, t.rounds);
    const double in_target = ratio_or_zero(t.target_seconds, t.decode_seconds);
    const double in_draft = ratio_or_zero(t.draft_seconds, t.decode_seconds);
    char c1[64], c2[64];
    out(b, "| %s | %s | %s |", d->name, fmt_range(c1, sizeof c1, rate, 1, 0), fmt_range(c2, sizeof c2, speedup, 1, 2));
    if (d->drafted)
        out(b, " %.2f | %.2f | %.2f | %.2f | %.3f | %.3f | %.2f | %.2f | %.3f |", pooled, predicted, pooled / predicted,
            theorem, acceptance, alpha, per_call, gamma, cost);
    else out(b, " %.2f | | | | | | %.2f | | |", pooled, per_call);
    out(b, " %.0f · %.0f · %.0f |", 100 * in_target, 100 * in_draft, 100 * (1 - in_target - in_draft));
    int mismatches = greedy && d->drafted ? count_mismatches(b, d, plain) : 0;
    if (greedy) out(b, " %s |", !d->drafted ? "" : mismatches ? "**NO**" : "yes");
    out(b, "\n");
    static const char *policies[] = {[GAMMA_FIXED] = "fixed", [GAMMA_HEURISTIC] = "heuristic", [GAMMA_AUTO] = "auto"};
    json_t *row = json_pack("{s:s, s:s, s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:f, s:f, s:f}", "name", d->name, "policy",
                            d->drafted ? policies[d->policy] : "none", "tokens_per_s", summary_json(rate), "speedup",
                            summary_json(speedup), "seconds_per_token", summaries_json(seconds, n),
                            "predicted_speedup", predicted, "acceptance", acceptance, "alpha", alpha,
                            "tokens_per_target_call", per_call, "mean_gamma", gamma, "c", cost, "generated",
                            t.generated);
    json_object_set_new(row, "pooled_speedup", json_real(pooled));
    json_object_set_new(row, "theorem_3_8_speedup", json_real(theorem));
    json_object_set_new(row, "time_share", json_pack("{s:f, s:f, s:f}", "target", in_target, "draft", in_draft,
                                                     "other", 1 - in_target - in_draft));
    if (d->drafted && d->policy == GAMMA_FIXED) json_object_set_new(row, "gamma", json_integer(d->gamma));
    if (greedy && d->drafted) json_object_set_new(row, "greedy_mismatches", json_integer(mismatches));
    return row;
}

// The α at which the fixed γ's, at the costs measured for them here, would reach `goal`: the least α with
// E[tokens | α, γ] ≥ goal · (seconds per round) / (target-only's seconds per token) for some γ (bisection; E
// grows with α). Returns 0 if no γ can (goal beyond γ + 1 tokens per round); *best_gamma gets the γ.
static double alpha_needed(const Decoding *fixed, double plain_token, double goal, int *best_gamma) {
    double best = 0;
    *best_gamma = 0;
    for (int i = 0; i < N_GAMMAS; i++) {
        Totals t = {0};
        add_totals(&t, &fixed[i]);
        const double tokens = goal * ratio_or_zero(t.decode_seconds, t.rounds) / plain_token;
        if (t.rounds == 0 || tokens > fixed[i].gamma + 1) continue;
        double lo = 0, hi = 1;
        for (int step = 0; step < 50; step++) {
            const double mid = (lo + hi) / 2;
            *(spec_expected_tokens(mid, fixed[i].gamma) < tokens ? &lo : &hi) = mid;
        }
        if (!*best_gamma || hi < best) best = hi, *best_gamma = fixed[i].gamma;
    }
    return best;
}

// Runs every configuration at one temperature; prints its table and returns its JSON.
static json_t *bench_temperature(Bench *b, const Setting *s) {
    const int n = s->n_prompts;
    Decoding decodings[N_CONFIGS];
    Trial trials[N_CONFIGS];
    for (int i = 0; i < N_CONFIGS; i++) decoding_init(&decodings[i], s, i), trials[i] = (Trial){decoding_run, &decodings[i]};
    char label[64];
    snprintf(label, sizeof label, "temperature %.1f, %d prompts", s->temperature, n);
    double *seconds = malloc(sizeof(double) * N_CONFIGS * n);  // per token, [N_CONFIGS, n]
    measure_rounds(b, label, trials, N_CONFIGS, n, 0, seconds);

    Totals plain = {0}, fixed = {0};  // target-only; the fixed γ's pooled (α and c of the theoretical curve)
    add_totals(&plain, &decodings[0]);
    for (int i = 1; i <= N_GAMMAS; i++) add_totals(&fixed, &decodings[i]);
    const double target_step = ratio_or_zero(plain.target_seconds, plain.rounds);
    const double plain_token = ratio_or_zero(plain.decode_seconds, plain.generated);
    const bool greedy = s->temperature == 0;
    out(b, "\n### Temperature %.1f%s\n\n| decoding | tokens/s | speed-up | pooled | predicted | pooled / predicted | "
        "Thm 3.8 | acceptance | α | tokens / target call | mean γ | c | time %%: target · draft · rest |%s\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|%s\n", s->temperature,
        greedy ? " (greedy)" : "", greedy ? " same output |" : "", greedy ? "---|" : "");
    json_t *rows = json_array();
    for (int i = 0; i < N_CONFIGS; i++)
        json_array_append_new(rows, decoding_report(b, &decodings[i], &decodings[0], seconds + (size_t)i * n, seconds,
                                                    target_step, plain_token));
    const double alpha = totals_alpha(&fixed), cost = totals_c(&fixed, target_step);
    out(b, "\nPooled over the fixed γ's: α = %.3f, c = %.3f; target-only step %.3f ms\n", alpha, cost,
        target_step * 1e3);
    static const double GOALS[] = {1.8, 2.5};  // the speed-ups asked for at temperature 1 and when greedy
    json_t *needed = json_object();
    out(b, "\nα the fixed γ's would need, at the costs measured here for each (its round time, sampling "
        "included), to reach a speed-up of");
    for (int g = 0; g < 2; g++) {
        int gamma;
        const double a = alpha_needed(decodings + 1, plain_token, GOALS[g], &gamma);
        char key[16];
        snprintf(key, sizeof key, "%.1f", GOALS[g]);
        if (gamma) out(b, "%s %.1f×: %.3f (γ = %d)", g ? ";" : "", GOALS[g], a, gamma);
        else out(b, "%s %.1f×: none reaches it", g ? ";" : "", GOALS[g]);
        json_object_set_new(needed, key, gamma ? json_pack("{s:f, s:i}", "alpha", a, "gamma", gamma) : json_null());
    }
    out(b, ". Measured α: %.3f.\n", alpha);
    for (int i = 0; i < N_CONFIGS; i++) decoding_free(&decodings[i]);
    free(seconds);
    return json_pack("{s:f, s:f, s:f, s:f, s:o, s:o}", "temperature", s->temperature, "alpha", alpha, "c", cost,
                     "target_step_seconds", target_step, "alpha_needed", needed, "configs", rows);
}

// Runs every temperature on one prompt set; prints its section and returns its JSON.
static json_t *bench_prompt_set(Bench *b, Pair *pair, const char *folder, const char *title) {
    int n_prompts;
    Prompt *prompts = prompts_load(pair, folder, b->opt.prompts, b->opt.tokens + 1, &n_prompts);
    double prompt_tokens = 0;
    for (int i = 0; i < n_prompts; i++) prompt_tokens += prompts[i].n;
    out(b, "\n## %s\n\n%d prompts from %s (%.0f tokens on average%s), %d new tokens each.\n", title, n_prompts, folder,
        prompt_tokens / n_prompts, pair->has_tok ? "" : "; their bytes as token ids: the random pair has no tokenizer",
        b->opt.tokens);
    json_t *temps = json_array();
    for (int t = 0; t < N_TEMPERATURES; t++) {
        Setting s = {pair, prompts, n_prompts, b->opt.tokens, TEMPERATURES[t]};
        json_array_append_new(temps, bench_temperature(b, &s));
    }
    json_t *ids = json_array();
    for (int i = 0; i < n_prompts; i++) json_array_append_new(ids, json_string(prompts[i].id));
    prompts_free(prompts, n_prompts);
    return json_pack("{s:s, s:o, s:o}", "folder", folder, "prompts", ids, "temperatures", temps);
}

// Each prompt of the useless-draft table runs this many times in turn with target-only: a run of 48 tokens takes
// ~50 ms, and two threads' speed moves by up to 1.5–2× as the host places them on one core complex or on two
// (docs/performance-history.md), which in one run against one made a prompt read 0.67× whatever auto decided.
enum { USELESS_RUNS = 3 };

// decoding_run on prompt rep mod the prompt count: USELESS_RUNS rounds over the prompts.
static double decoding_run_again(void *ctx, int rep) {
    Decoding *d = ctx;
    return decoding_run(d, rep % d->setting->n_prompts);
}

// Per prompt, the least of its runs' times.   best: [n]   seconds: [USELESS_RUNS, n]
static void least_of_runs(double *best, const double *seconds, int n) {
    for (int p = 0; p < n; p++) {
        best[p] = seconds[p];
        for (int run = 1; run < USELESS_RUNS; run++)
            best[p] = seconds[run * n + p] < best[p] ? seconds[run * n + p] : best[p];
    }
}

// Σ over the prompts of their tokens' time at the least of their runs' time per token.
static double pooled_seconds(const Decoding *d, const double *best) {
    double sum = 0;
    for (int p = 0; p < d->setting->n_prompts; p++) sum += best[p] * d->stats[p].generated;
    return sum;
}

// The target with a useless draft (pair_open_useless_draft) on the held-out prompts, greedy and at temperature 1:
// target-only against --gamma auto, which should find the drafts rejected and fall back to plain decoding at a cost
// of a few percent at most. Speed = target-only's time per token over auto's, per prompt (each configuration's least
// of USELESS_RUNS runs) and pooled; the slowest prompt named.
static json_t *bench_useless_draft(Bench *b, Pair *pair) {
    Pair useless = *pair;  // the target, the prompts' tokenizer; the draft replaced
    pair_open_useless_draft(pair, b, &useless.draft);
    int n;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, b->opt.tokens + 1, &n);
    out(b, "\n## A useless draft\n\nThe target with a draft of random weights over its vocabulary (the draft's "
        "shape, GPT-2's layout, another seed), on %d held-out prompts: target-only against --gamma auto, run in "
        "turn on each prompt with the same seed, %d times; each prompt's time is the least of its runs' (a run is short, "
        "and the speed of two threads moves with where the host places them). Speed = target-only's time per token "
        "over auto's: median [min–max] over the prompts, and pooled; the slowest prompt; the rounds of each prompt's "
        "last run.\n\n| temperature | target-only tokens/s | auto tokens/s | speed | pooled | slowest prompt | "
        "plain rounds | drafted | accepted |\n|---:|---:|---:|---:|---:|---|---:|---:|---:|\n", n, USELESS_RUNS);
    json_t *rows = json_array();
    static const float temperatures[] = {0.0f, 1.0f};
    for (int t = 0; t < 2; t++) {
        const Setting s = {&useless, prompts, n, b->opt.tokens, temperatures[t]};
        Decoding d[2];
        decoding_init(&d[0], &s, 0);                  // target-only
        decoding_init(&d[1], &s, N_MODEL_CONFIGS - 1);  // the draft model, auto
        const Trial trials[2] = {{decoding_run_again, &d[0]}, {decoding_run_again, &d[1]}};
        const int runs = USELESS_RUNS * n;
        double *seconds = malloc(sizeof(double) * 2 * runs);  // per token, [target-only, auto][runs]
        double *best[2] = {malloc(sizeof(double) * n), malloc(sizeof(double) * n)};  // [target-only, auto][n]
        if (!seconds || !best[0] || !best[1]) die("out of memory");
        char label[64];
        snprintf(label, sizeof label, "a useless draft, temperature %.1f", s.temperature);
        measure_rounds(b, label, trials, 2, runs, 0, seconds);
        for (int i = 0; i < 2; i++) least_of_runs(best[i], seconds + (size_t)i * runs, n);
        Totals plain = {0}, automatic = {0};
        add_totals(&plain, &d[0]);
        add_totals(&automatic, &d[1]);
        const Summary speed = summarize_ratio(best[0], best[1], n);
        const double pooled = ratio_or_zero(pooled_seconds(&d[0], best[0]) / plain.generated,
                                            pooled_seconds(&d[1], best[1]) / automatic.generated);
        int plain_rounds = 0, slowest = 0;
        for (int r = 0; r < n; r++) {
            plain_rounds += d[1].stats[r].plain_rounds;
            if (best[0][r] / best[1][r] < best[0][slowest] / best[1][slowest]) slowest = r;
        }
        char c1[64], c2[64], c3[64];
        out(b, "| %.1f | %s | %s | %s | %.3f | %s, %.3f | %d of %.0f | %.0f | %.0f |\n", s.temperature,
            fmt_range(c1, sizeof c1, summary_inverse(summarize(best[0], n), 1), 1, 0),
            fmt_range(c2, sizeof c2, summary_inverse(summarize(best[1], n), 1), 1, 0),
            fmt_range(c3, sizeof c3, speed, 1, 3), pooled, prompts[slowest].id, best[0][slowest] / best[1][slowest],
            plain_rounds, automatic.rounds, automatic.drafted, automatic.accepted);
        json_array_append_new(rows, json_pack("{s:f, s:o, s:f, s:s, s:i, s:f, s:f, s:f}", "temperature",
                                              s.temperature, "speed", summary_json(speed), "pooled", pooled,
                                              "slowest_prompt", prompts[slowest].id, "plain_rounds", plain_rounds,
                                              "rounds", automatic.rounds, "drafted", automatic.drafted, "accepted",
                                              automatic.accepted));
        for (int i = 0; i < 2; i++) decoding_free(&d[i]), free(best[i]);
        free(seconds);
    }
    prompts_free(prompts, n);
    model_free(&useless.draft);
    return rows;
}

void suite_speculative(Bench *b, Pair *pair) {
    if (!pair->has_draft) {
        out(b, "## Speculative decoding\n\nNot run: no draft model (-d DIR).\n\n");
        return;
    }
    suite_begin(b, "speculative", 2 * N_TEMPERATURES + 2);
    out(b, "## Speculative decoding\n\nTwo prompt sets: the held-out prompts of bench/prompts, and a copy-heavy set "
        "(bench/prompts/copy: code whose continuation repeats earlier lines — a function followed by the start of its "
        "edited copy, repeated test blocks, argument lists), %d threads. Per temperature, every configuration runs on "
        "each prompt with the same seed, in rounds; tokens/s (generation only: the prompt's prefill is not counted) "
        "and speed-up (over target-only in the same round) are median [min–max] over the prompts. Pooled over the "
        "prompts: speed-up (total time per token of target-only over this configuration's); predicted = Σ_rounds "
        "E[tokens | α, γ] · (target-only's time per token) / (time in target and draft forwards), the measured-cost "
        "form of Theorem 3.8, so pooled / predicted is what the scheduler's own work (sampling, acceptance) and luck "
        "in the accepts leave of it; Thm 3.8 = (1 − α^(γ+1)) / ((1 − α)(γc + 1)), the paper's form, which takes "
        "verifying γ + 1 tokens to cost one step; acceptance = accepted / drafted; α = mean Σ min(p, q) (p(x) for a "
        "lookup's one-hot q); c = draft step (its sampling included) / target-only step. Time: the shares spent in "
        "target forwards (verification), in drafting, and in the rest (the target's sampling and the acceptance "
        "rule).\n", pool_size(b->pool));
    json_t *held_out = bench_prompt_set(b, pair, PROMPTS_HELD_OUT, "Held-out prompts");
    json_t *copy = bench_prompt_set(b, pair, PROMPTS_COPY, "Copy-heavy prompts");
    json_t *useless = bench_useless_draft(b, pair);
    suite_end(b, json_pack("{s:i, s:o, s:o, s:o}", "tokens", b->opt.tokens, "held_out", held_out, "copy_heavy", copy,
                           "useless_draft", useless));
}
