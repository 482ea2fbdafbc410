// speculative_support.c — the helpers the tests of speculative decoding share (speculative_support.h).
#include "speculative_support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sampling_reference.h"
#include "tokenizer/tokenizer.h"

// ---- tiny model pairs -----------------------------------------------------------------------------------------

bool quant_runs_here(Quant quant) {
    const Kernels *selected = kernels_select(NULL, 0);  // the variant a model loads (SPECDEC_ISA's, or the best)
    return quant != QUANT_BF16 || (selected && selected->matmul_bf16_dot);
}

void pair_open_quantized(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale, Quant quant) {
    RandomCheckpoint spec = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = vocab_size,
                             .n_positions = n_positions, .scale = scale, .seed = 7};
    RandomCheckpoint draft = spec;
    draft.n_layer = 1;
    model_pair_open(pair, &spec, &draft, vocab_size, threads, quant);
}

void pair_open(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale) {
    pair_open_quantized(pair, vocab_size, n_positions, threads, scale, QUANT_NONE);
}

const RandomCheckpoint QWEN2_TARGET = {.model_type = "qwen2", .n_layer = 3, .n_embd = 32, .n_head = 4,
                                       .n_kv_head = 1, .n_inner = 80, .vocab_size = 97, .n_positions = 128,
                                       .scale = 0.3f, .seed = 7};
const RandomCheckpoint LLAMA_TARGET = {.model_type = "llama", .n_layer = 3, .n_embd = 32, .n_head = 4,
                                       .n_kv_head = 2, .n_inner = 64, .vocab_size = 97, .n_positions = 128,
                                       .untied = true, .scale = 0.3f, .seed = 11};
const RandomCheckpoint QWEN3_DRAFT = {.model_type = "qwen3", .n_layer = 1, .n_embd = 32, .n_head = 2, .n_inner = 48,
                                      .vocab_size = 97, .n_positions = 128, .scale = 0.3f, .seed = 11};

// ---- generation -----------------------------------------------------------------------------------------------

const char *const DRAFT_NAMES[N_DRAFT_KINDS] = {"target-only", "draft model", "lookup", "lookup + draft model"};

int generate_with(ModelPair *pair, DraftKind kind, const int *prompt, int n_prompt, const SpecParams *params,
                  uint64_t seed, int *out, SpecStats *stats, float p_min) {
    SpecParams seeded = *params;
    seeded.seed = seed;
    Drafters drafters;
    Err err;
    int n_out = -1;
    CHECK(drafter_open(&drafters, (DrafterKind)kind, &pair->draft, &seeded, p_min, 1, &err) == 0, "init: %s", err.msg);
    int rc = speculative_generate(&pair->target, drafters.drafter, prompt, n_prompt, &seeded, out, &n_out, stats, &err);
    CHECK(rc == 0, "speculative_generate: %s", err.msg);
    drafter_close(&drafters);
    drafter_close(&drafters);  // safe twice
    return n_out;
}

int generate_p_min(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed,
                   int *out, SpecStats *stats, bool speculative, float p_min) {
    return generate_with(pair, speculative ? DRAFT_MODEL : DRAFT_NONE, prompt, n_prompt, params, seed, out, stats,
                         p_min);
}

int generate(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed, int *out,
             SpecStats *stats, bool speculative) {
    return generate_p_min(pair, prompt, n_prompt, params, seed, out, stats, speculative, 0.0f);
}

int random_prompt(int prompt[8], int trial, int V) {
    const int n_prompt = test_rand_int(2, 8);
    for (int i = 0; i < n_prompt; i++) prompt[i] = trial % 2 ? test_rand_int(0, V - 2) : test_rand_int(0, 5);
    if (trial % 2 == 0) prompt[n_prompt - 1] = prompt[0];
    return n_prompt;
}

// ---- sampled losslessness -------------------------------------------------------------------------------------

enum { N_FIRST = 3, N_CELLS = V_SMALL * V_SMALL * V_SMALL };
#ifdef SPECDEC_DEBUG
enum { N_SAMPLES = 4000 };  // the debug build checks every rollback: a shorter, weaker test
#else
enum { N_SAMPLES = 30000 };
#endif

// The reference's distribution after seq[0..n), n_prompt of them the prompt, from the target's logits there:
// penalised (reference_penalize) when params asks for penalties, then adjusted (reference_adjust).
static void reference_p(double *p, float *logits, const int *seq, int n, int n_prompt, const SpecParams *params) {
    if (params->penalties) reference_penalize(logits, V_SMALL, seq, n, n_prompt, params->penalties);
    reference_adjust(p, logits, V_SMALL, &params->sampling, NULL);
}

// The target's exact joint distribution of the first 3 tokens after the prompt, by enumeration: P(a, b, c) =
// p(a | prompt) p(b | prompt, a) p(c | prompt, a, b), each the reference's p (reference_p: the penalties, then
// temperature / min-p / top-k / top-p).
void exact_joint(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, double *joint) {
    Err err;
    float logits[V_SMALL];
    double p1[V_SMALL], p2[V_SMALL], p3[V_SMALL];
    int seq[16];
    memcpy(seq, prompt, sizeof(int) * n_prompt);
    KVCache cache;
    CHECK(model_kv_init(&pair->target, &cache, &err) == 0, "kv");
    CHECK(model_forward(&pair->target, &cache, seq, n_prompt, logits, false, &err) == 0, "%s", err.msg);
    reference_p(p1, logits, seq, n_prompt, n_prompt, params);
    for (int a = 0; a < V_SMALL; a++) {
        kv_truncate(&cache, n_prompt);
        CHECK(model_forward(&pair->target, &cache, &a, 1, logits, false, &err) == 0, "%s", err.msg);
        seq[n_prompt] = a;
        reference_p(p2, logits, seq, n_prompt + 1, n_prompt, params);
        for (int b = 0; b < V_SMALL; b++) {
            kv_truncate(&cache, n_prompt + 1);
            CHECK(model_forward(&pair->target, &cache, &b, 1, logits, false, &err) == 0, "%s", err.msg);
            seq[n_prompt + 1] = b;
            reference_p(p3, logits, seq, n_prompt + 2, n_prompt, params);
            for (int c = 0; c < V_SMALL; c++) joint[(a * V_SMALL + b) * V_SMALL + c] = p1[a] * p2[b] * p3[c];
        }
    }
    kv_free(&cache);
}

// Samples N_SAMPLES speculative generations (fixed seeds 1..N, so the test is deterministic) and compares the
// counts of their first 3 tokens with the exact joint distribution. Cells expected fewer than 5 times are pooled.
// The draft model drafts after the prompt {1, 3}; the lookup drafters after {1, 3, 1, 3}, whose repeat they copy
// (a lookup tree after {1, 3, 2, 3, 1, 3}) — the staged one, pipelined, after {1, 3}, where the lookup finds no
// match and the draft model drafts (and drafts ahead).
void check_sampled_with(ModelPair *pair, DraftKind kind, const SpecParams *base, const char *label) {
    // (a lookup tree's branches need matches that continue differently: "1 3" before 2, "3" before 1)
    const int repeat[] = {1, 3, 1, 3}, branching[] = {1, 3, 2, 3, 1, 3};
    const bool branches = kind == DRAFT_LOOKUP && base->tree_width > 1;
    const bool model_first = kind == DRAFT_MODEL || (kind == DRAFT_STAGED && base->pipeline == PIPELINE_ON);
    const int *prompt = branches ? branching : repeat;
    int n_prompt = model_first ? 2 : 4;
    if (branches) n_prompt = 6;
    double joint[N_CELLS];
    exact_joint(pair, prompt, n_prompt, base, joint);
    static int counts[N_CELLS];
    memset(counts, 0, sizeof counts);
    SpecParams params = *base;
    params.eos_id = -1;
    int drafted = 0, accepted = 0, siblings = 0, ahead = 0;
    enum { MOST_TOKENS = 16 };
    if (params.max_tokens < N_FIRST || params.max_tokens > MOST_TOKENS) {
        CHECK(false, "%s: max_tokens %d, not 3 to %d", label, params.max_tokens, MOST_TOKENS);
        return;
    }
    for (int s = 1; s <= N_SAMPLES; s++) {
        int out[MOST_TOKENS];
        SpecStats stats;
        if (generate_with(pair, kind, prompt, n_prompt, &params, (uint64_t)s, out, &stats, 0) != params.max_tokens)
            return;
        if (out[0] >= V_SMALL || out[1] >= V_SMALL || out[2] >= V_SMALL) {
            CHECK(false, "%s: an id outside the shared vocabulary of %d: %d %d %d", label, V_SMALL, out[0], out[1],
                  out[2]);
            return;
        }
        counts[(out[0] * V_SMALL + out[1]) * V_SMALL + out[2]]++;
        drafted += stats.drafted;
        accepted += stats.accepted;
        siblings += stats.sibling_accepted;
        ahead += stats.ahead_rounds;
    }
    double chi2 = 0, pooled_expect = 0, pooled_count = 0;
    int cells = 0;
    for (int i = 0; i < N_CELLS; i++) {
        double e = joint[i] * N_SAMPLES;
        if (e == 0) CHECK(counts[i] == 0, "%s: impossible sequence %d drawn %d times", label, i, counts[i]);
        if (e < 5) {
            pooled_expect += e, pooled_count += counts[i];
            continue;
        }
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (pooled_expect > 0) chi2 += (pooled_count - pooled_expect) * (pooled_count - pooled_expect) / pooled_expect, cells++;
    double critical = chi_square_critical(cells - 1);
    printf("    %-22s chi2 = %6.1f over %3d cells (critical %.1f at 1e-4); %d of %d drafts accepted", label, chi2,
           cells, critical, accepted, drafted);
    printf(params.pipeline == PIPELINE_ON ? ", %d rounds drafted ahead\n" : "\n", ahead);
    CHECK(chi2 < critical, "%s: chi-square %.1f exceeds %.1f: the output is not the target's distribution", label,
          chi2, critical);
    CHECK(accepted > 0 && accepted < drafted, "%s: both paths exercised (%d of %d accepted)", label, accepted, drafted);
    CHECK(params.tree_width <= 1 || siblings > 0, "%s: no child after a rejected sibling was ever kept", label);
    CHECK(params.pipeline != PIPELINE_ON || ahead > 0, "%s: no round took drafts drafted ahead", label);
}

void check_sampled_on_width(ModelPair *pair, DraftKind kind, const SamplingParams *sp, SpecSampler sampler, int width,
                            const char *label) {
    const SpecParams params = {.sampling = *sp, .sampler = sampler, .policy = GAMMA_FIXED, .gamma = 3,
                               .tree_width = width, .max_tokens = N_FIRST};
    check_sampled_with(pair, kind, &params, label);
}

// ---- the shipped pair ----------------------------------------------------------------------------------------

void on_shipped_pair(const char *const *prompts, int n_prompts, int n_tokens,
                     void (*check)(ShippedCase *c, void *ctx), void *ctx) {
    Err err;
    Tokenizer tok;
    CHECK(tokenizer_load_dir(&tok, "weights/pystd/target", &err) == 0, "%s", err.msg);
    for (int threads = 1; threads <= 2 && !test_failures(); threads++) {
        ModelPair pair = {.pool = pool_create(threads, &err)};
        CHECK(model_load(&pair.target, "weights/pystd/target", pair.pool, &err) == 0, "%s", err.msg);
        CHECK(model_load(&pair.draft, "weights/pystd/draft", pair.pool, &err) == 0, "%s", err.msg);
        for (int p = 0; p < n_prompts && !test_failures(); p++) {
            int *prompt, n_prompt, expect[32];
            CHECK(tokenizer_encode(&tok, prompts[p], strlen(prompts[p]), false, &prompt, &n_prompt, &err) == 0, "%s",
                  err.msg);
            ShippedCase c = {.pair = &pair, .prompt = prompt, .n_prompt = n_prompt, .p = p, .threads = threads,
                             .expect = expect,
                             .params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = n_tokens,
                                        .eos_id = -1}};
            SpecStats stats;
            c.n_expect = generate(&pair, prompt, n_prompt, &c.params, 1, expect, &stats, false);
            check(&c, ctx);
            free(prompt);
        }
        model_free(&pair.target);
        model_free(&pair.draft);
        pool_free(pair.pool);
    }
    tokenizer_free(&tok);
}
