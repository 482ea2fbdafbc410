// trees.c — draft trees against the single chain (issue 17): by width and depth, tokens per target call, the
// expected tokens per call from the measured per-level acceptance (the theory column), and the speed-up over the
// chain of the same depth, beside the measured verification cost t(T) / t(1) that decides whether a tree pays.
//
// On the held-out prompts at temperatures 0 and 1, every configuration — target-only; the chain (width 1) and trees
// of widths 2, 3 and 4 at depths 2, 4 and 6; the chain under γ auto and --tree (the policy's width and depth) —
// runs once per prompt, all on the same prompt and seed within a round (measure_rounds). Tokens per target call do
// not depend on the machine's load; the speed-ups are ratios within a round. Greedy runs must reproduce
// target-only's output: a mismatch is reported and makes run-bench exit with status 1.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speculative/speculative.h"

static const float TEMPERATURES[] = {0.0f, 1.0f};
static const int DEPTHS[] = {2, 4, 6};
static const int VERIFY_T[] = {1, 4, 8, 13, 16};
enum {
    N_TEMPERATURES = sizeof TEMPERATURES / sizeof TEMPERATURES[0],
    N_DEPTHS = sizeof DEPTHS / sizeof DEPTHS[0],
    N_VERIFY = sizeof VERIFY_T / sizeof VERIFY_T[0],
    N_WIDTHS = 4,                                   // 1 (the chain) to 4
    N_CONFIGS = 1 + N_DEPTHS * N_WIDTHS + 2,        // target-only; width × depth; chain auto, --tree
    VERIFY_CONTEXT = 64,
};

typedef struct {
    Pair *pair;
    const Prompt *prompts;      // round r runs prompts[r] with seed r + 1
    int n_prompts, tokens;
    float temperature;
} Setting;

// One configuration and what its runs produced.
typedef struct {
    const Setting *setting;
    char name[32];
    bool drafted, tree_auto;
    int width, depth;           // depth 0: γ auto
    SpecStats *stats;           // [n_prompts]
    int *outputs, *n_out;       // [n_prompts, tokens], [n_prompts]
} TreeConfig;

// i: 0 target-only; 1 + N_WIDTHS·d + (w − 1): width w at DEPTHS[d]; then the chain at γ auto, and --tree.
static void config_init(TreeConfig *c, const Setting *s, int i) {
    const int grid = i - 1, n = s->n_prompts;
    *c = (TreeConfig){.setting = s, .drafted = i > 0, .width = 1};
    if (i > 0 && grid < N_DEPTHS * N_WIDTHS) c->width = 1 + grid % N_WIDTHS, c->depth = DEPTHS[grid / N_WIDTHS];
    c->tree_auto = i == N_CONFIGS - 1;
    if (c->tree_auto) c->width = TREE_FIRST_WIDTH_MAX;
    if (i == 0) snprintf(c->name, sizeof c->name, "target-only");
    else if (c->tree_auto) snprintf(c->name, sizeof c->name, "--tree (auto)");
    else if (c->depth == 0) snprintf(c->name, sizeof c->name, "chain, γ auto");
    else if (c->width == 1) snprintf(c->name, sizeof c->name, "chain, γ = %d", c->depth);
    else snprintf(c->name, sizeof c->name, "width %d, depth %d", c->width, c->depth);
    c->stats = calloc((size_t)n, sizeof(SpecStats));
    c->outputs = malloc(sizeof(int) * n * s->tokens);
    c->n_out = malloc(sizeof(int) * n);
    if (!c->stats || !c->outputs || !c->n_out) die("out of memory");
}

static void config_free(TreeConfig *c) { free(c->stats), free(c->outputs), free(c->n_out); }

// Generates for prompt `rep` (a Trial); returns seconds per generated token.
static double config_run(void *ctx, int rep) {
    TreeConfig *c = ctx;
    const Setting *s = c->setting;
    const Prompt *prompt = &s->prompts[rep];
    SpecParams params = {.sampling = {s->temperature, 0, 1.0f}, .seed = (uint64_t)rep + 1,
                         .policy = c->depth ? GAMMA_FIXED : GAMMA_AUTO, .gamma = c->depth, .tree_width = c->width,
                         .tree_auto = c->tree_auto, .max_tokens = s->tokens,
                         .eos_id = s->pair->target.cfg.eos_token_id};
    ModelDrafter model = {0};
    Err err;
    if (c->drafted && model_drafter_init(&model, &s->pair->draft, &params, 0, &err)) die("%s", err.msg);
    SpecStats *st = &c->stats[rep];
    if (speculative_generate(&s->pair->target, c->drafted ? &model.base : NULL, prompt->ids, prompt->n, &params,
                             c->outputs + (size_t)rep * s->tokens, &c->n_out[rep], st, &err))
        die("%s: %s", prompt->id, err.msg);
    if (model.logits) model_drafter_free(&model);
    return st->decode_seconds / (st->generated > 0 ? st->generated : 1);
}

// Pooled over the prompts: tokens per target call, and the tokens per call that the measured per-level acceptance
// predicts — Σ over rounds of spec_expected_tokens_by_level at the round's depth, per round.
typedef struct {
    double generated, rounds, drafted, sibling_accepted, decode_seconds;
    double per_call, theory, accept[GAMMA_MAX + 1];
} Pooled;

static Pooled pool_config(const TreeConfig *c) {
    Pooled p = {0};
    double reached[GAMMA_MAX + 1] = {0}, kept[GAMMA_MAX + 1] = {0}, by_depth[GAMMA_MAX + 1] = {0};
    for (int r = 0; r < c->setting->n_prompts; r++) {
        const SpecStats *s = &c->stats[r];
        p.generated += s->generated, p.rounds += s->rounds, p.drafted += s->drafted;
        p.sibling_accepted += s->sibling_accepted, p.decode_seconds += s->decode_seconds;
        for (int l = 0; l <= GAMMA_MAX; l++)
            reached[l] += s->level_reached[l], kept[l] += s->level_kept[l], by_depth[l] += s->rounds_by_depth[l];
    }
    for (int l = 1; l <= GAMMA_MAX; l++) p.accept[l] = reached[l] > 0 ? kept[l] / reached[l] : 0;
    for (int depth = 0; depth <= GAMMA_MAX; depth++)
        p.theory += by_depth[depth] * spec_expected_tokens_by_level(p.accept, depth);
    p.theory = p.rounds > 0 ? p.theory / p.rounds : 0;
    p.per_call = p.rounds > 0 ? p.generated / p.rounds : 0;
    return p;
}

// Greedy: the prompts on which c's output differs from target-only's, each reported on stderr.
static int count_mismatches(Bench *b, const TreeConfig *c, const TreeConfig *plain) {
    const Setting *s = c->setting;
    int mismatches = 0;
    for (int r = 0; r < s->n_prompts; r++) {
        const int *x = c->outputs + (size_t)r * s->tokens, *y = plain->outputs + (size_t)r * s->tokens;
        if (c->n_out[r] == plain->n_out[r] && memcmp(x, y, sizeof(int) * c->n_out[r]) == 0) continue;
        mismatches++;
        b->failed = true;
        fprintf(stderr, "run-bench: MISMATCH: greedy %s on prompt %s differs from target-only\n", c->name,
                s->prompts[r].id);
    }
    return mismatches;
}

// The chain of c's depth (c itself for a chain; target-only's index 0 for the auto rows, which have none).
static int chain_of(const TreeConfig *c) {
    for (int d = 0; d < N_DEPTHS; d++)
        if (c->depth == DEPTHS[d] && !c->tree_auto) return 1 + N_WIDTHS * d;
    return N_CONFIGS - 2;  // the auto rows: against the chain under γ auto
}

static json_t *bench_temperature(Bench *b, const Setting *s) {
    const int n = s->n_prompts;
    TreeConfig configs[N_CONFIGS];
    Trial trials[N_CONFIGS];
    for (int i = 0; i < N_CONFIGS; i++) config_init(&configs[i], s, i), trials[i] = (Trial){config_run, &configs[i]};
    char label[64];
    snprintf(label, sizeof label, "trees, temperature %.1f", s->temperature);
    double *seconds = malloc(sizeof(double) * N_CONFIGS * n);  // per token, [N_CONFIGS, n]
    measure_rounds(b, label, trials, N_CONFIGS, n, 0, seconds);
    const bool greedy = s->temperature == 0;
    out(b, "\n### Temperature %.1f%s\n\n| drafts | tokens / target call | theory | / the chain's | a_1 · a_2 · a_3 | "
        "kept after a rejected sibling | nodes / call | speed-up | speed-up over the chain |%s\n"
        "|---|---:|---:|---:|---|---:|---:|---:|---:|%s\n", s->temperature, greedy ? " (greedy)" : "",
        greedy ? " same output |" : "", greedy ? "---|" : "");
    json_t *rows = json_array();
    for (int i = 0; i < N_CONFIGS; i++) {
        const TreeConfig *c = &configs[i];
        const Pooled p = pool_config(c), chain = pool_config(&configs[chain_of(c)]);
        Summary speedup = summarize_ratio(seconds, seconds + (size_t)i * n, n);
        Summary over_chain = summarize_ratio(seconds + (size_t)chain_of(c) * n, seconds + (size_t)i * n, n);
        char c1[64], c2[64];
        const double vs_chain = chain.per_call > 0 ? p.per_call / chain.per_call : 0;
        out(b, "| %s | %.3f | %.3f | %.3f | %.2f · %.2f · %.2f | %.0f | %.1f | %s | %s |", c->name, p.per_call,
            p.theory, vs_chain, p.accept[1], p.accept[2], p.accept[3], p.sibling_accepted,
            p.rounds > 0 ? p.drafted / p.rounds : 0, fmt_range(c1, sizeof c1, speedup, 1, 2),
            c->drafted ? fmt_range(c2, sizeof c2, over_chain, 1, 2) : "");
        const int mismatches = greedy && c->drafted ? count_mismatches(b, c, &configs[0]) : 0;
        if (greedy) out(b, " %s |", !c->drafted ? "" : mismatches ? "**NO**" : "yes");
        out(b, "\n");
        json_t *row = json_pack("{s:s, s:i, s:i, s:b, s:f, s:f, s:f, s:f, s:o, s:o}", "name", c->name, "width",
                                c->width, "depth", c->depth, "tree_auto", c->tree_auto, "tokens_per_target_call",
                                p.per_call, "theory_tokens_per_call", p.theory, "per_call_over_chain", vs_chain,
                                "sibling_accepted", p.sibling_accepted, "speedup", summary_json(speedup),
                                "speedup_over_chain", summary_json(over_chain));
        if (greedy && c->drafted) json_object_set_new(row, "greedy_mismatches", json_integer(mismatches));
        json_array_append_new(rows, row);
    }
    for (int i = 0; i < N_CONFIGS; i++) config_free(&configs[i]);
    free(seconds);
    return json_pack("{s:f, s:o}", "temperature", s->temperature, "configs", rows);
}

// t(T) / t(1) of the target after VERIFY_CONTEXT cached positions, T in VERIFY_T, every T once per round.
static json_t *verify_cost(Bench *b, Pair *pair, double *t16) {
    Workload w;
    workload_init(&w, &pair->target, VERIFY_CONTEXT);
    Forward forwards[N_VERIFY];
    Trial trials[N_VERIFY];
    for (int t = 0; t < N_VERIFY; t++)
        forwards[t] = (Forward){&w, VERIFY_T[t]}, trials[t] = (Trial){forward_run, &forwards[t]};
    const int reps = b->opt.reps;
    double *seconds = malloc(sizeof(double) * N_VERIFY * reps);
    measure_rounds(b, "trees: verification cost", trials, N_VERIFY, reps, 0.05, seconds);
    out(b, "Verification cost of the target, time(T) / time(1) after %d cached positions (median [min–max] of %d "
        "rounds):", VERIFY_CONTEXT, reps);
    json_t *curve = json_array();
    for (int t = 0; t < N_VERIFY; t++) {
        const Summary ratio = summarize_ratio(seconds + (size_t)t * reps, seconds, reps);
        char c1[64];
        out(b, "%s T = %d: %s", t ? ";" : "", VERIFY_T[t], fmt_range(c1, sizeof c1, ratio, 1, 2));
        json_array_append_new(curve, json_pack("{s:i, s:o}", "T", VERIFY_T[t], "ratio", summary_json(ratio)));
        if (VERIFY_T[t] == 16) *t16 = ratio.median;
    }
    out(b, ".\n");
    free(seconds);
    workload_free(&w);
    return curve;
}

void suite_trees(Bench *b, Pair *pair) {
    if (!pair->has_draft) {
        out(b, "## Draft trees\n\nNot run: no draft model (-d DIR).\n\n");
        return;
    }
    suite_begin(b, "trees", 1 + N_TEMPERATURES);
    int n_prompts;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.prompts, b->opt.tokens + 1, &n_prompts);
    out(b, "## Draft trees\n\n%d held-out prompts of %s, %d new tokens each, %d threads, rejection sampling. A tree "
        "of width W and depth D: W children of the first level, each continued as a chain (W·D nodes, verified in "
        "one forward of W·D + 1 tokens). Tokens / target call pooled over the prompts; theory = the tokens per call "
        "the measured per-level acceptance a_l (kept / reached at level l) gives, Σ over rounds of 1 + a_1 + a_1 a_2 "
        "+ … up to the round's depth; / the chain's = tokens per call over the chain's at the same depth (the auto "
        "rows: over the chain under γ auto); speed-up over target-only and over that chain: median [min–max] of the "
        "per-prompt ratios of time per token, within rounds.\n\n", n_prompts, PROMPTS_HELD_OUT, b->opt.tokens,
        pool_size(b->pool));
    double t16 = 0;
    json_t *curve = verify_cost(b, pair, &t16);
    json_t *temps = json_array();
    for (int t = 0; t < N_TEMPERATURES; t++) {
        Setting s = {pair, prompts, n_prompts, b->opt.tokens, TEMPERATURES[t]};
        json_array_append_new(temps, bench_temperature(b, &s));
    }
    prompts_free(prompts, n_prompts);
    suite_end(b, json_pack("{s:i, s:o, s:f, s:o}", "tokens", b->opt.tokens, "verify_cost", curve, "t16_over_t1", t16,
                           "temperatures", temps));
}
