// test_speculative.c — speculative decoding is lossless.
//
//   - exactly: the accept / resample step, enumerated over the draft's choice, gives P(output = x) = p(x);
//   - greedy: speculative output equals target-only output token for token, for any γ and thread count, with
//     the weights as stored, quantized to q8, and in BF16 arithmetic (where the CPU has a BF16 dot product);
//   - sampled: the joint distribution of the first 3 tokens over many seeds matches the target's exact
//     distribution (a chi-square test), at temperature 1 and with top-k / top-p, for both samplers; the expected
//     distribution comes from the independent reference (tests/support/sampling_reference.c), not from sampling.c;
//   - coupled: speculative output equals target-only output with the same seed, token for token, for any γ,
//     policy, thread count and sampling setting;
//   - reproducible: the same seed gives the same tokens with γ auto, for both samplers, at 1 and 2 threads;
//   - the edge cases: end-of-text inside a draft, -n reached mid-round, the context limit;
//   - the trace names an accepted end-of-text draft as such, and the debug build checks every rollback.
//
// The models are tiny random GPT-2s, and pairs of the Llama family (one with embedding tables padded to different
// sizes), written at test time (random_checkpoint.h). A draft with the target's seed and fewer layers shares the
// target's embeddings and first blocks, so it agrees with the target often but not always — both the accept and
// the resample paths are exercised.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "model_pair.h"
#include "random_checkpoint.h"
#include "sampling_reference.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

// ---- the accept / resample step, exactly --------------------------------------------------------------------

// P(output = x) when the draft proposes y ~ q and the target holds p (Leviathan et al., Appendix A.1):
//   P(x) = q(x) min(1, p(x)/q(x)) + Σ_y q(y) (1 − min(1, p(y)/q(y))) · residual(x)
static void output_distribution(double *out, const double *p, const double *q, int V) {
    double residual[64], reject = 0.0;
    spec_residual(residual, p, q, V);
    for (int y = 0; y < V; y++) reject += q[y] * (1.0 - spec_accept_probability(p[y], q[y]));
    for (int x = 0; x < V; x++) out[x] = q[x] * spec_accept_probability(p[x], q[x]) + reject * residual[x];
}

static void check_lossless_step(const double *p, const double *q, int V, const char *label) {
    double out[64];
    output_distribution(out, p, q, V);
    for (int x = 0; x < V; x++)
        CHECK(fabs(out[x] - p[x]) <= 1e-12, "%s: P(output = %d) = %.17g, target p = %.17g", label, x, out[x], p[x]);
}

TEST(speculative_accept_resample_is_exact) {
    // The example. Its p sums to 1.1, so it is normalised first: the rule needs a distribution.
    double q1[] = {0.3, 0.4, 0.1, 0.2}, p1[] = {0.5 / 1.1, 0.2 / 1.1, 0.1 / 1.1, 0.3 / 1.1};
    check_lossless_step(p1, q1, 4, "issue example");
    double same[] = {0.25, 0.25, 0.5};
    check_lossless_step(same, same, 3, "p == q (zero residual)");
    double p3[] = {0.0, 0.0, 1.0}, q3[] = {0.5, 0.5, 0.0};
    check_lossless_step(p3, q3, 3, "disjoint supports");
    double onehot[] = {0.0, 1.0, 0.0, 0.0}, p4[] = {0.1, 0.6, 0.2, 0.1};
    check_lossless_step(p4, onehot, 4, "deterministic drafter (one-hot q)");
    for (int trial = 0; trial < 200; trial++) {  // random p and q, some with zeros
        double p[64], q[64], sp = 0, sq = 0;
        int V = test_rand_int(2, 64);
        for (int i = 0; i < V; i++) {
            p[i] = test_rand_int(0, 3) ? test_rand_uniform(0, 1) : 0.0;
            q[i] = test_rand_int(0, 3) ? test_rand_uniform(0, 1) : 0.0;
        }
        p[0] += 0.1, q[V - 1] += 0.1;
        for (int i = 0; i < V; i++) sp += p[i], sq += q[i];
        for (int i = 0; i < V; i++) p[i] /= sp, q[i] /= sq;
        check_lossless_step(p, q, V, "random");
    }
}

// ---- tiny model pairs -----------------------------------------------------------------------------------------

// Whether this CPU's kernels run `quant`: QUANT_BF16 needs a BF16 dot product (model.h).
static bool quant_runs_here(Quant quant) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    return quant != QUANT_BF16 || list[n - 1]->matmul_bf16_dot;
}

// A target of 3 blocks and a draft of 1 block with the same seed and vocabulary, their matrices held as `quant`
// says.
static void pair_open_quantized(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale,
                                Quant quant) {
    RandomCheckpoint spec = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = vocab_size,
                             .n_positions = n_positions, .scale = scale, .seed = 7};
    RandomCheckpoint draft = spec;
    draft.n_layer = 1;
    model_pair_open(pair, &spec, &draft, vocab_size, threads, quant);
}

static void pair_open(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale) {
    pair_open_quantized(pair, vocab_size, n_positions, threads, scale, QUANT_NONE);
}

// The drafters under test: the draft model, n-gram lookup, and both (staged; here taking every match, a
// single token's too, so that lookup and model tokens mix in rounds on the tiny models).
typedef enum {
    DRAFT_NONE = DRAFTER_NONE, DRAFT_MODEL = DRAFTER_MODEL, DRAFT_LOOKUP = DRAFTER_LOOKUP, DRAFT_STAGED = DRAFTER_STAGED,
    N_DRAFT_KINDS
} DraftKind;
static const char *const DRAFT_NAMES[] = {"target-only", "draft model", "lookup", "lookup + draft model"};

// Generates with the pair by one of the drafters (the draft stopping below top probability p_min), or the target
// alone.
static int generate_with(ModelPair *pair, DraftKind kind, const int *prompt, int n_prompt, const SpecParams *params,
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

static int generate_p_min(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed,
                          int *out, SpecStats *stats, bool speculative, float p_min) {
    return generate_with(pair, speculative ? DRAFT_MODEL : DRAFT_NONE, prompt, n_prompt, params, seed, out, stats,
                         p_min);
}

static int generate(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed, int *out,
                    SpecStats *stats, bool speculative) {
    return generate_p_min(pair, prompt, n_prompt, params, seed, out, stats, speculative, 0.0f);
}

// ---- greedy identity ------------------------------------------------------------------------------------------

// A random prompt of 2 to 8 ids into prompt[8]: any ids below V − 1 on odd trials; on even ones ids 0..5 ending in
// the first (repetitive text). Returns its length.
static int random_prompt(int prompt[8], int trial, int V) {
    const int n_prompt = test_rand_int(2, 8);
    for (int i = 0; i < n_prompt; i++) prompt[i] = trial % 2 ? test_rand_int(0, V - 2) : test_rand_int(0, 5);
    if (trial % 2 == 0) prompt[n_prompt - 1] = prompt[0];
    return n_prompt;
}

// Greedy speculative output equals the target's own, token for token, for every drafter and combination and every
// γ policy; with both_paths, the accept and the reject path are both taken by each drafter. Every id lies in the
// models' (shared) vocabulary. Lookup proposals need repeats: every other prompt is drawn from 6 ids and ends with
// its first id, so that lookup proposes at once, and the tiny models' greedy loops supply more. Those loops are
// often one id repeated (the q8 Qwen2 pair answers 40 or 6 to almost any prompt), which lookup always guesses
// right: its reject path rests on the prompt's repeats (without the closing repeat 2 seeds in 121 gave it none;
// with it 0 in 300).
static void check_greedy_on(ModelPair *pair, const char *label, bool both_paths) {
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_AUTO,
                                    GAMMA_HEURISTIC};
    const int gammas[] = {1, 2, 3, 4, 8, 0, 5};
    const int V = pair->target.n_vocab;
    int accepted[N_DRAFT_KINDS] = {0}, drafted[N_DRAFT_KINDS] = {0};
    for (int trial = 0; trial < 6; trial++) {
        int prompt[8], n_prompt = random_prompt(prompt, trial, V);
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 40, .eos_id = -1};
        int expect[40], got[40];
        SpecStats stats;
        int n_expect = generate(pair, prompt, n_prompt, &params, 1, expect, &stats, false);
        for (int i = 0; i < n_expect; i++) CHECK(expect[i] < V, "%s: id %d outside the shared %d", label, expect[i], V);
        for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
            for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++) {
                params.policy = policies[g];
                params.gamma = gammas[g];
                int n_got = generate_with(pair, kind, prompt, n_prompt, &params, 1 + trial, got, &stats, 0);
                CHECK(n_got == n_expect && memcmp(got, expect, sizeof(int) * n_got) == 0,
                      "%s, %s, policy %d, gamma %d: speculative output differs from the target's", label,
                      DRAFT_NAMES[kind], policies[g], gammas[g]);
                accepted[kind] += stats.accepted;
                drafted[kind] += stats.drafted;
                if (kind == DRAFT_LOOKUP)
                    CHECK(stats.one_hot_drafted == stats.drafted && stats.draft_calls == 0, "lookup: %d of %d drafts "
                          "one-hot, %d forwards", stats.one_hot_drafted, stats.drafted, stats.draft_calls);
            }
    }
    for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
        CHECK(!both_paths || (accepted[kind] > 0 && accepted[kind] < drafted[kind]), "%s, %s: both paths exercised: "
              "%d of %d drafts accepted", label, DRAFT_NAMES[kind], accepted[kind], drafted[kind]);
}

TEST(speculative_greedy_equals_target) {
    const char *labels[] = {"GPT-2, 1 thread", "GPT-2, 2 threads", "GPT-2 q8, 1 thread", "GPT-2 q8, 2 threads"};
    for (int run = 0; run < 4; run++) {  // 1 and 2 threads, weights as stored and in q8
        ModelPair pair;
        pair_open_quantized(&pair, 97, 128, 1 + run % 2, 0.3f, run < 2 ? QUANT_NONE : QUANT_Q8);
        check_greedy_on(&pair, labels[run], true);
        model_pair_close(&pair);
    }
}

// Pairs of the Llama family (random weights, tiny shapes): a Qwen2 target with its q/k/v biases and one key/value
// head, and a one-block draft of it; a Llama target with grouped-query attention and a Qwen3 draft; and a pair
// whose embedding tables are padded to different sizes (101 and 99 rows) around a shared vocabulary of 97 ids.
static const RandomCheckpoint QWEN2_TARGET = {.model_type = "qwen2", .n_layer = 3, .n_embd = 32, .n_head = 4,
                                              .n_kv_head = 1, .n_inner = 80, .vocab_size = 97, .n_positions = 128,
                                              .scale = 0.3f, .seed = 7};
static const RandomCheckpoint LLAMA_TARGET = {.model_type = "llama", .n_layer = 3, .n_embd = 32, .n_head = 4,
                                              .n_kv_head = 2, .n_inner = 64, .vocab_size = 97, .n_positions = 128,
                                              .untied = true, .scale = 0.3f, .seed = 11};

// The three pairs with their matrices as stored, quantized to q8 (stacked q/k/v and gate/up matrices whose
// 16-row panels straddle the parts, tied and untied heads, and q8 heads limited to the shared ids), in BF16
// arithmetic, and quantized to q4 (the same panels in 4 bits).
TEST(speculative_greedy_equals_target_llama_family) {
    for (Quant quant = QUANT_NONE; quant <= QUANT_Q4; quant++) {
        if (!quant_runs_here(quant)) continue;
        char q[16] = "";
        if (quant != QUANT_NONE) snprintf(q, sizeof q, " (%s)", quant_name(quant));
        char label[96];
        RandomCheckpoint target = QWEN2_TARGET, draft = QWEN2_TARGET;
        draft.n_layer = 1;
        ModelPair pair;
        model_pair_open(&pair, &target, &draft, 97, 2, quant);
        snprintf(label, sizeof label, "qwen2 pair%s", q);
        check_greedy_on(&pair, label, true);
        model_pair_close(&pair);

        // Models of different families agree by chance only, which greedy decoding may never meet: identity alone.
        target = LLAMA_TARGET;
        draft = (RandomCheckpoint){.model_type = "qwen3", .n_layer = 1, .n_embd = 32, .n_head = 2, .n_inner = 48,
                                   .vocab_size = 97, .n_positions = 128, .scale = 0.3f, .seed = 11};
        model_pair_open(&pair, &target, &draft, 97, 1, quant);
        snprintf(label, sizeof label, "llama target, qwen3 draft%s", q);
        check_greedy_on(&pair, label, false);
        model_pair_close(&pair);

        target = QWEN2_TARGET, draft = QWEN2_TARGET;
        target.vocab_size = 101;
        draft.vocab_size = 99;
        draft.n_layer = 1;
        model_pair_open(&pair, &target, &draft, 97, 2, quant);
        CHECK(pair.target.n_vocab == 97 && pair.draft.n_vocab == 97, "padded pair: %d and %d logits",
              pair.target.n_vocab, pair.draft.n_vocab);
        snprintf(label, sizeof label, "padded vocabularies 101 / 99%s", q);
        check_greedy_on(&pair, label, true);
        model_pair_close(&pair);
    }
}

// ---- sampled losslessness -------------------------------------------------------------------------------------

enum { V_SMALL = 5, N_FIRST = 3, N_CELLS = V_SMALL * V_SMALL * V_SMALL };
#ifdef SPECDEC_DEBUG
enum { N_SAMPLES = 4000 };  // the debug build checks every rollback: a shorter, weaker test
#else
enum { N_SAMPLES = 30000 };
#endif

// The target's exact joint distribution of the first 3 tokens after the prompt, by enumeration: P(a, b, c) =
// p(a | prompt) p(b | prompt, a) p(c | prompt, a, b), each the adjusted (temperature / top-k / top-p) p of the
// reference.
static void exact_joint(ModelPair *pair, const int *prompt, int n_prompt, const SamplingParams *sp, double *joint) {
    Err err;
    float logits[V_SMALL];
    double p1[V_SMALL], p2[V_SMALL], p3[V_SMALL];
    int seq[16];
    memcpy(seq, prompt, sizeof(int) * n_prompt);
    KVCache cache;
    CHECK(model_kv_init(&pair->target, &cache, &err) == 0, "kv");
    CHECK(model_forward(&pair->target, &cache, seq, n_prompt, logits, false, &err) == 0, "%s", err.msg);
    reference_adjust(p1, logits, V_SMALL, sp, NULL);
    for (int a = 0; a < V_SMALL; a++) {
        kv_truncate(&cache, n_prompt);
        CHECK(model_forward(&pair->target, &cache, &a, 1, logits, false, &err) == 0, "%s", err.msg);
        reference_adjust(p2, logits, V_SMALL, sp, NULL);
        for (int b = 0; b < V_SMALL; b++) {
            kv_truncate(&cache, n_prompt + 1);
            CHECK(model_forward(&pair->target, &cache, &b, 1, logits, false, &err) == 0, "%s", err.msg);
            reference_adjust(p3, logits, V_SMALL, sp, NULL);
            for (int c = 0; c < V_SMALL; c++) joint[(a * V_SMALL + b) * V_SMALL + c] = p1[a] * p2[b] * p3[c];
        }
    }
    kv_free(&cache);
}

// Samples N_SAMPLES speculative generations (fixed seeds 1..N, so the test is deterministic) and compares the
// counts of the first 3 tokens with the exact joint distribution. Cells expected fewer than 5 times are pooled.
// False-alarm rate of a correct implementation: 1e-4 per call.
// The draft model drafts after the prompt {1, 3}; the lookup drafters after {1, 3, 1, 3}, whose repeat they copy
// (a lookup tree after {1, 3, 2, 3, 1, 3}).
static void check_sampled_on_width(ModelPair *pair, DraftKind kind, const SamplingParams *sp, SpecSampler sampler,
                                   int width, const char *label) {
    // (a lookup tree's branches need matches that continue differently: "1 3" before 2, "3" before 1)
    const int repeat[] = {1, 3, 1, 3}, branching[] = {1, 3, 2, 3, 1, 3};
    const bool branches = kind == DRAFT_LOOKUP && width > 1;
    const int *prompt = branches ? branching : repeat, n_prompt = branches ? 6 : kind == DRAFT_MODEL ? 2 : 4;
    double joint[N_CELLS];
    exact_joint(pair, prompt, n_prompt, sp, joint);
    static int counts[N_CELLS];
    memset(counts, 0, sizeof counts);
    SpecParams params = {.sampling = *sp, .sampler = sampler, .policy = GAMMA_FIXED, .gamma = 3,
                         .tree_width = width, .max_tokens = N_FIRST, .eos_id = -1};
    int drafted = 0, accepted = 0, siblings = 0;
    for (int s = 1; s <= N_SAMPLES; s++) {
        int out[N_FIRST];
        SpecStats stats;
        if (generate_with(pair, kind, prompt, n_prompt, &params, (uint64_t)s, out, &stats, 0) != N_FIRST) return;
        if (out[0] >= V_SMALL || out[1] >= V_SMALL || out[2] >= V_SMALL) {
            CHECK(false, "%s: an id outside the shared vocabulary of %d: %d %d %d", label, V_SMALL, out[0], out[1],
                  out[2]);
            return;
        }
        counts[(out[0] * V_SMALL + out[1]) * V_SMALL + out[2]]++;
        drafted += stats.drafted;
        accepted += stats.accepted;
        siblings += stats.sibling_accepted;
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
    printf("    %-22s chi2 = %6.1f over %3d cells (critical %.1f at 1e-4); %d of %d drafts accepted\n", label, chi2,
           cells, critical, accepted, drafted);
    CHECK(chi2 < critical, "%s: chi-square %.1f exceeds %.1f: the output is not the target's distribution", label,
          chi2, critical);
    CHECK(accepted > 0 && accepted < drafted, "%s: both paths exercised (%d of %d accepted)", label, accepted, drafted);
    CHECK(width <= 1 || siblings > 0, "%s: no child after a rejected sibling was ever kept", label);
}

static void check_sampled_on(ModelPair *pair, DraftKind kind, const SamplingParams *sp, SpecSampler sampler,
                             const char *label) {
    check_sampled_on_width(pair, kind, sp, sampler, 1, label);
}

static void check_sampled_distribution_of(DraftKind kind, const SamplingParams *sp, SpecSampler sampler,
                                          const char *label) {
    ModelPair pair;
    pair_open(&pair, V_SMALL, 32, 1, 0.3f);
    check_sampled_on(&pair, kind, sp, sampler, label);
    model_pair_close(&pair);
}

static void check_sampled_distribution(const SamplingParams *sp, SpecSampler sampler, const char *label) {
    check_sampled_distribution_of(DRAFT_MODEL, sp, sampler, label);
}

TEST(speculative_sampling_matches_target_temperature_1) {
    check_sampled_distribution(&(SamplingParams){.temperature = 1.0f, .top_p = 1.0f}, SAMPLER_REJECTION,
                               "temperature 1");
}

TEST(speculative_sampling_matches_target_top_k) {
    check_sampled_distribution(&(SamplingParams){.temperature = 1.0f, .top_k = 3, .top_p = 1.0f}, SAMPLER_REJECTION,
                               "top-k 3");
}

TEST(speculative_sampling_matches_target_top_p) {
    check_sampled_distribution(&(SamplingParams){.temperature = 0.7f, .top_p = 0.8f}, SAMPLER_REJECTION,
                               "temperature 0.7, top-p 0.8");
}

TEST(speculative_coupled_sampling_matches_target) {
    check_sampled_distribution(&(SamplingParams){.temperature = 1.0f, .top_p = 1.0f}, SAMPLER_COUPLED,
                               "coupled, temperature 1");
#ifndef SPECDEC_DEBUG  // the debug build's suite runs under the sanitizers: one chi-square for coupling is enough
    check_sampled_distribution(&(SamplingParams){.temperature = 0.7f, .top_k = 4, .top_p = 0.9f}, SAMPLER_COUPLED,
                               "coupled, top-k 4, top-p 0.9");
#endif
}

// Lookup's one-hot q and the staged mix of one-hot and sampled drafts, under both accept rules.
TEST(speculative_lookup_sampling_matches_target) {
    const SamplingParams t1 = {.temperature = 1.0f, .top_p = 1.0f}, filtered = {.temperature = 0.7f, .top_k = 4,
                                                                                .top_p = 0.9f};
    check_sampled_distribution_of(DRAFT_LOOKUP, &t1, SAMPLER_REJECTION, "lookup, temperature 1");
    check_sampled_distribution_of(DRAFT_STAGED, &t1, SAMPLER_REJECTION, "staged, temperature 1");
    check_sampled_distribution_of(DRAFT_LOOKUP, &t1, SAMPLER_COUPLED, "lookup, coupled");
    check_sampled_distribution_of(DRAFT_STAGED, &t1, SAMPLER_COUPLED, "staged, coupled");
#ifndef SPECDEC_DEBUG  // the sanitizer suite: one chi-square per drafter and rule is enough
    check_sampled_distribution_of(DRAFT_LOOKUP, &filtered, SAMPLER_REJECTION, "lookup, top-k 4, top-p 0.9");
    check_sampled_distribution_of(DRAFT_STAGED, &filtered, SAMPLER_REJECTION, "staged, top-k 4, top-p 0.9");
#else
    (void)filtered;
#endif
}

// ---- coupled: the target's tokens whatever the drafter ---------------------------------------------------------

// Under SAMPLER_COUPLED the accept rule never changes the target's token: speculative output equals target-only
// output with the same seed, token for token, for every γ, policy and thread count (and the tokens do not depend
// on the thread count either).
TEST(speculative_coupled_equals_target_only) {
    const SamplingParams settings[] = {{1.0f, 0, 1.0f}, {1.0f, 5, 1.0f}, {1.0f, 0, 0.8f}, {0.7f, 10, 0.9f}};
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_AUTO, GAMMA_HEURISTIC};
    const int gammas[] = {1, 2, 4, 7, 0, 5};
    enum { N_SETTINGS = 4, N_SEEDS = 3, N_TOKENS = 30 };
    static int first_threads[N_SETTINGS][N_SEEDS][N_TOKENS];
    for (int threads = 1; threads <= 2; threads++) {
        ModelPair pair;
        pair_open(&pair, 97, 128, threads, 0.3f);
        int accepted[N_DRAFT_KINDS] = {0}, drafted[N_DRAFT_KINDS] = {0};
        for (int s = 0; s < N_SETTINGS; s++)
            for (int seed = 0; seed < N_SEEDS; seed++) {
                const int prompt[] = {3 + seed, 14, 15, 92, 3 + seed, 14};  // a repeat, for the lookup
                SpecParams params = {.sampling = settings[s], .sampler = SAMPLER_COUPLED, .max_tokens = N_TOKENS,
                                     .eos_id = -1};
                int expect[N_TOKENS], got[N_TOKENS];
                SpecStats stats;
                const uint64_t key = test_rand_u64();
                CHECK(generate(&pair, prompt, 6, &params, key, expect, &stats, false) == N_TOKENS, "target-only");
                for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
                    for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++) {
                        params.policy = policies[g];
                        params.gamma = gammas[g];
                        int n_got = generate_with(&pair, kind, prompt, 6, &params, key, got, &stats, 0);
                        CHECK(n_got == N_TOKENS && memcmp(got, expect, sizeof got) == 0, "%s, threads %d, setting %d, "
                              "policy %d, gamma %d: coupled output differs from target-only's", DRAFT_NAMES[kind],
                              threads, s, policies[g], gammas[g]);
                        accepted[kind] += stats.accepted;
                        drafted[kind] += stats.drafted;
                    }
                // The same seed (not `key`) at both thread counts: the same tokens.
                generate(&pair, prompt, 6, &params, 1000 + seed, got, &stats, true);
                if (threads == 1) memcpy(first_threads[s][seed], got, sizeof got);
                else CHECK(memcmp(first_threads[s][seed], got, sizeof got) == 0, "setting %d: 1, 2 threads differ", s);
            }
        for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
            CHECK(accepted[kind] > 0 && accepted[kind] < drafted[kind], "%s: both paths exercised: %d of %d drafts "
                  "accepted", DRAFT_NAMES[kind], accepted[kind], drafted[kind]);
        model_pair_close(&pair);
    }
}

// The same seed gives the same tokens with γ auto, whose measured timings differ from run to run: under
// rejection sampling at temperature > 0 it plans with the cost model (the same γ's, round for round, at one
// target thread count: runs 0 and 2 on 1 thread, 1 and 3 on 2 — run 3 with the draft on 1 of them, as
// --draft-threads 1 would, which the plan does not read), under coupling the output does not depend on γ at all
// (every run the same, whatever the threads).
TEST(speculative_seed_reproducible_with_gamma_auto) {
    enum { N_TOKENS = 40 };
    const SpecSampler samplers[] = {SAMPLER_REJECTION, SAMPLER_COUPLED};
    for (int k = 0; k < 2; k++) {
        int first[2][N_TOKENS], got[N_TOKENS];  // run 0's and run 1's
        SpecStats first_stats[2] = {{0}}, stats;
        for (int run = 0; run < 4; run++) {
            const int threads = 1 + run % 2, same = samplers[k] == SAMPLER_REJECTION ? run % 2 : 0;
            ModelPair pair;
            pair_open(&pair, 97, 128, threads, 0.3f);
            if (run == 3) pair.draft.max_threads = 1;
            const int prompt[] = {2, 7, 1, 8};
            SpecParams params = {.sampling = {0.7f, 0, 0.95f}, .sampler = samplers[k], .policy = GAMMA_AUTO,
                                 .max_tokens = N_TOKENS, .eos_id = -1};
            const bool first_run = run == same;  // the first of those it must equal
            int n = generate(&pair, prompt, 4, &params, 42, first_run ? first[same] : got,
                             first_run ? &first_stats[same] : &stats, true);
            CHECK(n == N_TOKENS, "generated %d", n);
            if (!first_run) {
                CHECK(memcmp(first[same], got, sizeof got) == 0, "sampler %d, run %d (%d threads): other tokens", k,
                      run, threads);
                if (samplers[k] == SAMPLER_REJECTION)
                    CHECK(stats.rounds == first_stats[same].rounds && stats.drafted == first_stats[same].drafted,
                          "run %d: %d rounds, %d drafted; run %d: %d, %d", run, stats.rounds, stats.drafted, same,
                          first_stats[same].rounds, first_stats[same].drafted);
            }
            model_pair_close(&pair);
        }
        CHECK(first_stats[0].drafted > 0, "sampler %d: auto drafted nothing", k);
    }
}

// The cost model of γ auto under rejection sampling: the weights' bytes once, over threads^0.72, plus per token 2
// FLOPs per matrix weight (V·d for the LM head, 12·L·d² for the blocks: qkv 3d², projection d², MLP 2·4d²) at 4
// FLOPs per byte, over the threads; a row of V logits to probabilities 10 bytes a token.
TEST(speculative_forward_cost_model) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const Model *models[] = {&pair.target, &pair.draft};
    for (int m = 0; m < 2; m++) {
        const Config *c = &models[m]->cfg;
        CHECK(c->n_inner == 0 || c->n_inner == 4 * c->n_embd, "the random checkpoints have F = 4d");
        const double per_token = 2.0 * ((double)c->vocab_size * c->n_embd + 12.0 * c->n_layer * c->n_embd * c->n_embd);
        CHECK(model_matrix_multiply_adds(models[m]) == per_token / 2, "model %d: %.0f multiply-adds a token", m,
              model_matrix_multiply_adds(models[m]));
        for (int T = 1; T <= 17; T += 8)
            for (int n = 1; n <= 16; n *= 4) {
                const double want = models[m]->weight_bytes / pow(n, 0.72) + T * per_token / (4.0 * n);
                CHECK(fabs(spec_forward_cost(models[m], T, n) - want) < 1e-6 * want, "model %d, T %d, %d threads: "
                      "cost %.1f, want %.1f", m, T, n, spec_forward_cost(models[m], T, n), want);
            }
    }
    CHECK(spec_forward_cost(&pair.draft, 1, 1) < spec_forward_cost(&pair.target, 1, 1), "the 1-block draft is cheaper");
    CHECK(spec_row_cost(97) == 970.0, "a row of 97 logits: %g", spec_row_cost(97));
    model_pair_close(&pair);
}

// ---- the lookup drafter ---------------------------------------------------------------------------------------

// Longest match first, its latest occurrence, copying on through the proposal itself; nothing without a match; a
// rollback before the indexed text starts afresh.
TEST(speculative_lookup_proposes_the_latest_longest_match) {
    LookupDrafter d;
    Err err;
    CHECK(lookup_drafter_init(&d, 1, 4, &err) == 0, "%s", err.msg);
    DraftTree tree;
    DraftReport report;
    DraftRequest every_run = {.shape = {4, 3}};  // the whole run, for a match of any length
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) every_run.lookup_gamma[m] = GAMMA_MAX;
    int draft[8];
    const int text[] = {1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3};  // "1 2 3" ends the text and occurred twice before
    CHECK(d.base.propose(&d.base, text, 12, &every_run, &tree, NULL, &report, &err) == 0 && tree.n == 4 &&
          d.last_match == 3, "match %d", d.last_match);
    bool chain = true;  // of one-hot nodes, whatever the width asked
    for (int i = 0; i < tree.n; i++) chain &= tree.parent[i] == i - 1 && !tree.node[i].q, draft[i] = tree.node[i].token;
    CHECK(draft[0] == 7 && draft[1] == 5 && draft[2] == 1 && draft[3] == 2 && chain,
          "the latest occurrence's continuation: %d %d %d %d", draft[0], draft[1], draft[2], draft[3]);
    const int none[] = {1, 2, 3};
    d.base.rollback(&d.base, 0, NULL, 0);
    every_run.shape = (TreeShape){4, 1};
    CHECK(d.base.propose(&d.base, none, 3, &every_run, &tree, NULL, &report, &err) == 0 && tree.n == 0,
          "no match, no draft");
    const int repeat[] = {4, 5, 4, 5};  // the continuation runs into the text's end and copies the proposal on
    d.base.rollback(&d.base, 0, NULL, 0);
    every_run.shape = (TreeShape){5, 1};
    CHECK(d.base.propose(&d.base, repeat, 4, &every_run, &tree, NULL, &report, &err) == 0 && tree.n == 5, "repeat");
    for (int i = 0; i < tree.n; i++) draft[i] = tree.node[i].token;
    CHECK(draft[0] == 4 && draft[1] == 5 && draft[2] == 4 && draft[3] == 5 && draft[4] == 4, "the repeat copied on");
    // A tree: the shorter matches whose continuations start otherwise are branches — "3" last occurred before 9
    // in {…, 3, 9, 1, 2, 3} (the longest, "1 2 3", before 7 in the first text); breadth-first, each a chain.
    const int branching[] = {1, 2, 3, 7, 5, 3, 9, 1, 2, 3};
    d.base.rollback(&d.base, 0, NULL, 0);
    every_run.shape = (TreeShape){2, 3};
    CHECK(d.base.propose(&d.base, branching, 10, &every_run, &tree, NULL, &report, &err) == 0 && tree.n == 4 &&
          d.last_match == 3, "%d nodes, match %d", tree.n, d.last_match);
    CHECK(tree.node[0].token == 7 && tree.node[1].token == 9 && tree.node[2].token == 5 && tree.node[3].token == 1 &&
          tree.parent[0] == -1 && tree.parent[1] == -1 && tree.parent[2] == 0 && tree.parent[3] == 1,
          "branches: %d %d %d %d", tree.node[0].token, tree.node[1].token, tree.node[2].token, tree.node[3].token);
    CHECK(report.calls == 0 && d.base.step_cost == 0, "a lookup makes no forward");
    lookup_drafter_free(&d);
}

// The staged drafter proposes, per round, the lookup's run — a chain, whatever the width asked — or, when the
// scheduler asks for none of the run (DraftRequest.lookup_gamma), the draft model's drafts: a tree of the width asked.
TEST(speculative_staged_proposes_the_run_or_the_models_tree) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const SpecParams params = {.sampling = {.temperature = 1, .top_p = 1}, .tree_width = 3, .seed = 1};
    ModelDrafter model;
    LookupDrafter lookup;
    StagedDrafter staged;
    Err err;
    CHECK(model_drafter_init(&model, &pair.draft, &params, 0.0f, &err) == 0, "%s", err.msg);
    CHECK(lookup_drafter_init(&lookup, LOOKUP_N_MIN, LOOKUP_N_MAX, &err) == 0, "%s", err.msg);
    staged_drafter_init(&staged, &lookup, &model, 1);
    const int text[] = {1, 2, 3, 7, 5, 3, 9, 1, 2, 3};  // "1 2 3" before 7; "3" before 9: a lookup tree's branches
    static double q[TREE_MAX_NODES * 97];
    DraftTree tree;
    DraftReport report;
    DraftRequest request = {.shape = {2, 3}, .model_gamma = GAMMA_MAX};
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) request.lookup_gamma[m] = GAMMA_MAX;
    CHECK(staged.base.propose(&staged.base, text, 10, &request, &tree, q, &report, &err) == 0 && tree.n == 2 &&
              tree.node[0].token == 7 && tree.node[1].token == 5 && tree.parent[1] == 0 && !tree.node[1].q &&
              report.run_proposed && report.calls == 0,
          "the run, as a chain: %d nodes", tree.n);
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) request.lookup_gamma[m] = 0;
    CHECK(staged.base.propose(&staged.base, text, 10, &request, &tree, q, &report, &err) == 0 && tree.n == 6 &&
              tree.parent[2] == -1 && tree.parent[3] == 0 && tree.node[0].q && !report.run_proposed &&
              report.n_run == GAMMA_MAX && report.calls == 2,
          "the model's tree of width 3: %d nodes, %d forwards", tree.n, report.calls);
    model_drafter_free(&model);
    lookup_drafter_free(&lookup);
    model_pair_close(&pair);
}

// ---- a useless draft ------------------------------------------------------------------------------------------

// A draft of another seed, greedy: its drafts are (nearly) never the target's, and γ auto falls back to plain
// decoding. Keeping the draft in sync then costs no forward per plain token: the draft reads the tokens committed
// meanwhile in the first forward of its next proposal, so its forwards are exactly the tokens it drafted.
TEST(speculative_auto_falls_back_without_draft_forwards) {
    RandomCheckpoint target = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = 97, .n_positions = 256,
                               .scale = 0.3f, .seed = 7};
    RandomCheckpoint draft = target;
    draft.n_layer = 1;
    draft.seed = 1234;
    ModelPair pair;
    model_pair_open(&pair, &target, &draft, 97, 1, QUANT_NONE);
    const int prompt[] = {3, 1, 4, 1, 5};
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = 200,
                         .eos_id = -1};
    int expect[200], got[200];
    SpecStats stats;
    generate(&pair, prompt, 5, &params, 1, expect, &stats, false);
    CHECK(generate(&pair, prompt, 5, &params, 1, got, &stats, true) == 200 && memcmp(got, expect, sizeof got) == 0,
          "greedy output");
    printf("    %d rounds, %d plain; %d drafted, %d accepted; %d draft forwards\n", stats.rounds, stats.plain_rounds,
           stats.drafted, stats.accepted, stats.draft_calls);
    CHECK(stats.draft_calls == stats.drafted, "%d draft forwards for %d drafted tokens", stats.draft_calls,
          stats.drafted);
    CHECK(stats.plain_rounds > stats.rounds / 2, "auto fell back to plain decoding in %d of %d rounds",
          stats.plain_rounds, stats.rounds);
    CHECK(stats.accepted * 4 < stats.drafted, "the draft is useless: %d of %d accepted", stats.accepted,
          stats.drafted);
    model_pair_close(&pair);
}

// A pair of the Llama family (a Llama target with grouped-query attention, a Qwen3 draft) whose embedding tables
// are padded to different sizes around the shared 5 ids: the target has 8 rows, the draft 6; ids 5..7 are never
// sampled, and the output is the target's distribution over the shared ids, under both samplers.
// The same in BF16 arithmetic, with the rejection rule.
TEST(speculative_sampling_matches_target_llama_family) {
    RandomCheckpoint target = LLAMA_TARGET;
    target.vocab_size = 8;
    RandomCheckpoint draft = {.model_type = "qwen3", .n_layer = 1, .n_embd = 32, .n_head = 2, .n_inner = 48,
                              .vocab_size = 6, .n_positions = 32, .scale = 0.3f, .seed = 11};
    ModelPair pair;
    model_pair_open(&pair, &target, &draft, V_SMALL, 1, QUANT_NONE);
    const SamplingParams sp = {.temperature = 0.8f, .top_p = 0.9f};
    check_sampled_on(&pair, DRAFT_MODEL, &sp, SAMPLER_REJECTION, "padded llama/qwen3 8 / 6");
#ifndef SPECDEC_DEBUG  // the debug build's suite runs under the sanitizers: the rejection rule's test is enough
    check_sampled_on(&pair, DRAFT_MODEL, &sp, SAMPLER_COUPLED, "coupled, padded 8 / 6");
#endif
    model_pair_close(&pair);
    if (!quant_runs_here(QUANT_BF16)) return;
    model_pair_open(&pair, &target, &draft, V_SMALL, 1, QUANT_BF16);
    check_sampled_on(&pair, DRAFT_MODEL, &sp, SAMPLER_REJECTION, "padded llama/qwen3 8 / 6, bf16");
    model_pair_close(&pair);
}

// ---- edge cases -----------------------------------------------------------------------------------------------

TEST(speculative_stops_at_limits) {
    ModelPair pair;
    pair_open(&pair, 97, 24, 1, 0.3f);
    const int prompt[] = {5, 6, 7};
    int full[64], out[64];
    SpecStats stats;
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 8,
                         .max_tokens = 64, .eos_id = -1};
    // The context limit: 24 positions, 3 in the prompt, so at most 22 new tokens (the last one needs no forward).
    int n_full = generate(&pair, prompt, 3, &params, 1, full, &stats, true);
    CHECK(n_full == 24 - 3 + 1, "generated %d tokens in a context of 24 after a prompt of 3", n_full);
    int n_plain = generate(&pair, prompt, 3, &params, 1, out, &stats, false);
    CHECK(n_plain == n_full && memcmp(out, full, sizeof(int) * n_full) == 0, "same tokens up to the context limit");
    // -n reached mid-round: never more than asked, and the same tokens — with a chain, and with trees of width 3
    // (24 nodes at γ = 8), which narrow to what the context has left near its end.
    for (int width = 1; width <= 3; width += 2) {
        params.tree_width = width;
        for (int n = 1; n <= 11; n += 5) {
            params.max_tokens = n;
            CHECK(generate(&pair, prompt, 3, &params, 1, out, &stats, true) == n &&
                  memcmp(out, full, sizeof(int) * n) == 0, "width %d, max_tokens %d", width, n);
        }
        params.max_tokens = 64;
        CHECK(generate(&pair, prompt, 3, &params, 1, out, &stats, true) == n_full &&
              memcmp(out, full, sizeof(int) * n_full) == 0, "width %d: the same tokens up to the context limit", width);
    }
    params.tree_width = 1;
    // End-of-text inside a draft: generation stops before it, and it is not emitted.
    params.max_tokens = 64;
    params.eos_id = full[6];
    int first = 0;
    while (full[first] != params.eos_id) first++;
    CHECK(generate(&pair, prompt, 3, &params, 1, out, &stats, true) == first, "stops at the first end-of-text");
    // A list of end-of-sequence ids (Llama 3's generation_config.json has three): the first of any of them stops.
    const int eos_list[] = {full[9], full[4]};
    params = (SpecParams){.sampling = params.sampling, .policy = GAMMA_FIXED, .gamma = 8, .max_tokens = 64,
                          .eos_id = -1, .eos_ids = eos_list, .n_eos = 2};
    for (first = 0; full[first] != eos_list[0] && full[first] != eos_list[1];) first++;
    CHECK(generate(&pair, prompt, 3, &params, 1, out, &stats, true) == first, "stops at the first of a list");
    model_pair_close(&pair);
}

// ---- the debug build's rollback check ---------------------------------------------------------------------------

// A model drafter that counts the scheduler's rollbacks and checks, and can corrupt one cached value of its draft
// after a given rollback, or change a key bias of the target after a given proposal. The scheduler's target cache
// is its own, out of a test's reach; changing the target's weights between two rounds corrupts it as surely: the
// next verification writes the newest committed token's row with the new weights, and the check computed that
// row's key with the old ones.
typedef struct {
    Drafter base;
    ModelDrafter inner;
    int rollbacks, checks, proposals;
    int corrupt_after;      // rollback after which one draft value is corrupted (0: never)
    Model *target;
    int perturb_after;      // proposal after which the target's first key bias changes (0: never)
} Meddler;

static int meddler_prefill(Drafter *self, const int *context, int n, Err *err) {
    Meddler *m = (Meddler *)self;
    return m->inner.base.prefill(&m->inner.base, context, n, err);
}

static int meddler_propose(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                           double *q, DraftReport *report, Err *err) {
    Meddler *m = (Meddler *)self;
    int rc = m->inner.base.propose(&m->inner.base, context, n, request, tree, q, report, err);
    if (++m->proposals == m->perturb_after) {
        const int d = m->target->cfg.n_embd;
        ((float *)m->target->blocks[0].attn_qkv.bias)[d] += 0.5f;  // the key bias of layer 0, head 0, dimension 0
    }
    return rc;
}

static void meddler_rollback(Drafter *self, int n, const int *path, int n_path) {
    Meddler *m = (Meddler *)self;
    m->inner.base.rollback(&m->inner.base, n, path, n_path);
    if (++m->rollbacks == m->corrupt_after) {
        KVCache *c = &m->inner.cache;
        kv_values(c, c->n_layer - 1, c->n_head - 1)[(size_t)(c->len - 1) * c->hd] += 0.5f;
    }
}

static int meddler_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    Meddler *m = (Meddler *)self;
    m->checks++;
    return m->inner.base.check_rollback(&m->inner.base, context, n_prefill, err);
}

// Runs the pair with a meddler; returns speculative_generate's status (err set on failure).
static int generate_meddled(ModelPair *pair, Meddler *m, SpecStats *stats, Err *err) {
    const int prompt[] = {3, 1, 4, 1, 5};
    SpecParams params = {.sampling = {.temperature = 1.0f, .top_p = 1}, .seed = 9, .policy = GAMMA_FIXED,
                         .gamma = 3, .max_tokens = 24, .eos_id = -1};
    m->base = (Drafter){.prefill = meddler_prefill, .propose = meddler_propose, .rollback = meddler_rollback,
                        .check_rollback = meddler_check};
    m->target = &pair->target;
    CHECK(model_drafter_init(&m->inner, &pair->draft, &params, 0.0f, err) == 0, "%s", err->msg);
    int out[24], n_out;
    int rc = speculative_generate(&pair->target, &m->base, prompt, 5, &params, out, &n_out, stats, err);
    model_drafter_free(&m->inner);
    return rc;
}

TEST(speculative_debug_build_checks_every_rollback) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    Err err;
    SpecStats stats;
    Meddler m = {0};
    CHECK(generate_meddled(&pair, &m, &stats, &err) == 0, "%s", err.msg);
#ifdef SPECDEC_DEBUG
    CHECK(m.checks == stats.rounds && m.rollbacks == stats.rounds, "%d rounds, %d rollbacks, %d checks of the draft",
          stats.rounds, m.rollbacks, m.checks);
    // One corrupted value in the draft's cache, after its 3rd rollback: the check right after it stops the run.
    m = (Meddler){.corrupt_after = 3};
    CHECK(generate_meddled(&pair, &m, &stats, &err) == -1 && m.checks == 3, "a corrupted draft cache went unnoticed "
          "(%d checks)", m.checks);
    CHECK(strstr(err.msg, "draft model") && strstr(err.msg, "value at position") && strstr(err.msg, "max |difference|"),
          "message: %s", err.msg);
    // The target's weights changed after the 2nd proposal: the target's check after that round stops the run.
    m = (Meddler){.perturb_after = 2};
    CHECK(generate_meddled(&pair, &m, &stats, &err) == -1 && m.rollbacks == 2, "a corrupted target cache went "
          "unnoticed (%d rollbacks)", m.rollbacks);
    CHECK(strstr(err.msg, "target model") && strstr(err.msg, "key at position") && strstr(err.msg, "max |difference|"),
          "message: %s", err.msg);
#else
    CHECK(m.checks == 0, "the release build checked %d rollbacks", m.checks);
    printf("    release build: no rollback is checked (the debug build's checks are tested with make BUILD=debug)\n");
#endif
    model_pair_close(&pair);
}

// The trace names the token that ended each round. An accepted draft that is the end-of-text token ends the
// generation: the trace reports it as an accepted draft, not the bonus token drawn after it (never used).
TEST(speculative_trace_reports_an_accepted_end_of_text) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const int prompt[] = {5, 6, 7};
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 4,
                         .max_tokens = 30, .eos_id = -1};
    int full[30], out[30], n_out;
    SpecStats stats;
    const int n_full = generate(&pair, prompt, 3, &params, 1, full, &stats, false);
    // The target as its own draft accepts every draft: round r emits tokens 5r..5r+3 as drafts, 5r+4 as the
    // bonus. The end-of-text id: a token whose first occurrence is a draft.
    int first = -1;
    for (int j = 0; j < n_full - 5 && first < 0; j++) {
        int at = 0;
        while (full[at] != full[j]) at++;
        if (at % 5 != 4) first = at;
    }
    CHECK(first >= 0, "no token of the greedy output falls on a draft");
    params.eos_id = full[first];
    params.trace = tmpfile();
    params.seed = 1;
    ModelDrafter self;
    Err err;
    CHECK(model_drafter_init(&self, &pair.target, &params, 0.0f, &err) == 0, "%s", err.msg);
    CHECK(speculative_generate(&pair.target, &self.base, prompt, 3, &params, out, &n_out, &stats, &err) == 0,
          "%s", err.msg);
    model_drafter_free(&self);
    CHECK(n_out == first && stats.accepted == stats.drafted, "%d tokens before the end-of-text at %d; %d of %d "
          "drafts accepted", n_out, first, stats.accepted, stats.drafted);
    char line[4096] = "", last[4096] = "", want[64];
    rewind(params.trace);
    while (fgets(line, sizeof line, params.trace)) strcpy(last, line);
    fclose(params.trace);
    snprintf(want, sizeof want, "\"token\": %d, \"kind\": \"accepted\"", params.eos_id);
    CHECK(strstr(last, want), "the last round ended at the accepted end-of-text %d: \"%s\"", params.eos_id, last);
    model_pair_close(&pair);
}

TEST(speculative_predicted_speedup) {
    // Theorem 3.8 at its corners: α = 0 gains nothing and pays γc; α → 1 gains γ + 1.
    CHECK(fabs(spec_predicted_speedup(0.0, 4, 0.1) - 1.0 / 1.4) < 1e-12, "alpha 0");
    CHECK(fabs(spec_predicted_speedup(1.0, 4, 0.0) - 5.0) < 1e-12, "alpha 1");
    CHECK(fabs(spec_predicted_speedup(0.8, 3, 0.05) - (1 - pow(0.8, 4)) / (0.2 * 1.15)) < 1e-12, "alpha 0.8");
}

// E[tokens per round] (equation 1) at its corners, and the run's accounting: the rounds' expected tokens lie
// between one and γ + 1 per round, and the time in forwards is part of the generation's time.
TEST(speculative_expected_tokens_and_accounting) {
    CHECK(fabs(spec_expected_tokens(0.0, 4) - 1.0) < 1e-12, "alpha 0: the target's own token only");
    CHECK(fabs(spec_expected_tokens(1.0, 4) - 5.0) < 1e-12, "alpha 1: every draft and the bonus");
    CHECK(fabs(spec_expected_tokens(0.5, 2) - 1.75) < 1e-12, "alpha 0.5, gamma 2: 1 + 0.5 + 0.25");
    ModelPair pair;
    pair_open(&pair, 97, 128, 1, 0.3f);
    int prompt[] = {3, 1, 4, 1, 5}, out[40];
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 3,
                         .max_tokens = 40, .eos_id = -1};
    SpecStats stats;
    generate(&pair, prompt, 5, &params, 1, out, &stats, true);
    CHECK(stats.expected_tokens >= stats.rounds && stats.expected_tokens <= 4.0 * stats.rounds,
          "expected tokens %.3f for %d rounds of gamma <= 3", stats.expected_tokens, stats.rounds);
    CHECK(stats.prefill_seconds > 0 && stats.decode_seconds > 0, "prefill %g s, decode %g s", stats.prefill_seconds,
          stats.decode_seconds);
    CHECK(stats.target_seconds + stats.draft_seconds <= stats.decode_seconds,
          "forwards %g s + %g s within the generation's %g s", stats.target_seconds, stats.draft_seconds,
          stats.decode_seconds);
    model_pair_close(&pair);
}

TEST(speculative_draft_p_min_stops_drafting) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const int prompt[] = {3, 1, 4};
    int plain[30], out[30];
    SpecStats stats, some;
    SpecParams params = {.sampling = {.temperature = 1.0f, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 4,
                         .max_tokens = 30, .eos_id = -1};
    generate_p_min(&pair, prompt, 3, &params, 5, out, &some, true, 0.05f);
    // No draft distribution at temperature 1 is one-hot: with p_min = 1 nothing is drafted, every round is plain.
    generate_p_min(&pair, prompt, 3, &params, 5, out, &stats, true, 1.0f);
    CHECK(stats.drafted == 0 && stats.rounds == 30, "p_min 1: %d drafted in %d rounds", stats.drafted, stats.rounds);
    CHECK(some.drafted > 0 && some.drafted < 4 * some.rounds, "p_min 0.05: %d drafted in %d rounds", some.drafted,
          some.rounds);
    // Greedy: drafting stops early, and the output is still the target's.
    params.sampling.temperature = 0;
    generate(&pair, prompt, 3, &params, 5, plain, &stats, false);
    generate_p_min(&pair, prompt, 3, &params, 5, out, &stats, true, 0.5f);
    CHECK(memcmp(plain, out, sizeof plain) == 0, "greedy output with p_min");
    CHECK(stats.drafted < 4 * stats.rounds, "greedy with p_min 0.5: %d drafted in %d rounds", stats.drafted,
          stats.rounds);
    model_pair_close(&pair);
}

// ---- the shipped pair ----------------------------------------------------------------------------------------

// The shipped pair's greedy target-only output on each prompt, at 1 and 2 threads, handed to a check that runs
// speculative configurations against it (the tests below).
typedef struct {
    ModelPair *pair;
    const int *prompt;
    int n_prompt, p, threads;     // the prompt's index, the thread count
    const int *expect;            // target-only's output [n_expect]
    int n_expect;
    SpecParams params;            // greedy, n_tokens
} ShippedCase;

static void on_shipped_pair(const char *const *prompts, int n_prompts, int n_tokens, void (*check)(ShippedCase *c,
                            void *ctx), void *ctx) {
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

// Chains: γ fixed at 1, 2, 3, 4, 8, and auto.
static void check_chains_on_shipped_pair(ShippedCase *c, void *ctx) {
    (void)ctx;
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_AUTO};
    const int gammas[] = {1, 2, 3, 4, 8, 0};
    for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++) {
        c->params.policy = policies[g];
        c->params.gamma = gammas[g];
        int got[32];
        SpecStats stats;
        int n_got = generate(c->pair, c->prompt, c->n_prompt, &c->params, 1, got, &stats, true);
        CHECK(n_got == c->n_expect && memcmp(got, c->expect, sizeof(int) * n_got) == 0,
              "prompt %d, threads %d, gamma %d (policy %d): speculative output differs from the target's", c->p,
              c->threads, gammas[g], policies[g]);
    }
}

TEST(speculative_greedy_equals_target_on_shipped_pair) {
    // Held-out prompts × γ × thread counts (fewer in the debug build, which checks every rollback).
    static const char *const prompts[] = {
        "def fibonacci(n):",
        "class Stack:\n    def __init__(self):",
        "import os\n\n\ndef list_files(path):",
        "    def __repr__(self):",
    };
#ifdef SPECDEC_DEBUG
    const int n_prompts = 1, n_tokens = 12;
#else
    const int n_prompts = 4, n_tokens = 32;
#endif
    on_shipped_pair(prompts, n_prompts, n_tokens, check_chains_on_shipped_pair, NULL);
}

// ---- draft trees ----------------------------------------------------------------------------------------------

// Greedy output with a draft tree equals the target's own for every width (the chain's, width 1, is checked above),
// with the draft model, the lookup (shorter matches as branches), and the two staged, at fixed depths, γ auto, and
// with the policy choosing the width (--tree). With siblings, a child kept after its first sibling was rejected — a
// branch that paid — is seen at least once over the runs.
static void check_tree_greedy_on(ModelPair *pair, const char *label, bool siblings) {
#ifdef SPECDEC_DEBUG  // the sanitizer suite checks every rollback: fewer prompts and policies, widths 2, 4, --tree
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_AUTO};
    const int gammas[] = {3, 0}, n_trials = 2, width_step = 2;
#else
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_AUTO, GAMMA_HEURISTIC};
    const int gammas[] = {1, 3, 8, 0, 5}, n_trials = 4, width_step = 1;
#endif
    const int V = pair->target.n_vocab;
    int sibling_accepted = 0;
    for (int trial = 0; trial < n_trials; trial++) {
        int prompt[8], n_prompt = random_prompt(prompt, trial, V);
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 40, .eos_id = -1};
        int expect[40], got[40];
        SpecStats stats;
        const int n_expect = generate(pair, prompt, n_prompt, &params, 1, expect, &stats, false);
        for (int width = 2; width <= TREE_FIRST_WIDTH_MAX + 1; width += width_step)  // the last: --tree, up to 4
            for (DraftKind kind = DRAFT_MODEL; kind <= DRAFT_STAGED; kind++)
                for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++) {
                    params.policy = policies[g];
                    params.gamma = gammas[g];
                    params.tree_auto = width > TREE_FIRST_WIDTH_MAX;
                    params.tree_width = params.tree_auto ? TREE_FIRST_WIDTH_MAX : width;
                    const int n_got = generate_with(pair, kind, prompt, n_prompt, &params, 1 + trial, got, &stats, 0);
                    CHECK(n_got == n_expect && memcmp(got, expect, sizeof(int) * n_got) == 0, "%s, %s, width %d%s, "
                          "policy %d, gamma %d: tree output differs from the target's", label, DRAFT_NAMES[kind],
                          params.tree_width, params.tree_auto ? " (--tree)" : "", policies[g], gammas[g]);
                    sibling_accepted += stats.sibling_accepted;
                }
    }
    CHECK(!siblings || sibling_accepted > 0, "%s: no child after a rejected sibling was ever kept", label);
}

TEST(speculative_tree_greedy_equals_target) {
    const char *labels[] = {"GPT-2, 1 thread", "GPT-2, 2 threads", "GPT-2 q8, 1 thread", "GPT-2 q8, 2 threads"};
    for (int run = 0; run < 4; run++) {
        ModelPair pair;
        pair_open_quantized(&pair, 97, 128, 1 + run % 2, 0.3f, run < 2 ? QUANT_NONE : QUANT_Q8);
        check_tree_greedy_on(&pair, labels[run], true);
        model_pair_close(&pair);
    }
    for (Quant quant = QUANT_NONE; quant <= QUANT_Q4; quant++) {  // the Llama family, 2 and 1 threads
        if (!quant_runs_here(quant)) continue;
        char label[96];
        RandomCheckpoint target = QWEN2_TARGET, draft = QWEN2_TARGET;
        draft.n_layer = 1;
        ModelPair pair;
        model_pair_open(&pair, &target, &draft, 97, 2, quant);
        snprintf(label, sizeof label, "qwen2 pair (%s)", quant_name(quant));
        check_tree_greedy_on(&pair, label, false);
        model_pair_close(&pair);
        target = LLAMA_TARGET;
        draft = (RandomCheckpoint){.model_type = "qwen3", .n_layer = 1, .n_embd = 32, .n_head = 2, .n_inner = 48,
                                   .vocab_size = 97, .n_positions = 128, .scale = 0.3f, .seed = 11};
        model_pair_open(&pair, &target, &draft, 97, 1, quant);
        snprintf(label, sizeof label, "llama target, qwen3 draft (%s)", quant_name(quant));
        check_tree_greedy_on(&pair, label, false);
        model_pair_close(&pair);
    }
}

// Sampled output with a tree of width 3 has the target's distribution (the chi-square test above), under both
// rules: recursive rejection sampling over children drawn without replacement, and coupling.
TEST(speculative_tree_sampling_matches_target) {
    const SamplingParams settings[] = {{.temperature = 1.0f, .top_p = 1.0f}, {.temperature = 1.0f, .top_k = 3,
                                       .top_p = 1.0f}, {.temperature = 0.7f, .top_p = 0.8f}};
    const char *labels[] = {"width 3, temperature 1", "width 3, top-k 3", "width 3, temp 0.7, top-p 0.8"};
    ModelPair pair;
    pair_open(&pair, V_SMALL, 32, 1, 0.3f);
#ifdef SPECDEC_DEBUG  // the sanitizer suite: the draft model's and the lookup's trees at temperature 1
    check_sampled_on_width(&pair, DRAFT_MODEL, &settings[0], SAMPLER_REJECTION, 3, labels[0]);
#else
    for (int i = 0; i < 3; i++)
        check_sampled_on_width(&pair, DRAFT_MODEL, &settings[i], SAMPLER_REJECTION, 3, labels[i]);
    check_sampled_on_width(&pair, DRAFT_MODEL, &settings[0], SAMPLER_COUPLED, 3, "coupled, width 3");
    check_sampled_on_width(&pair, DRAFT_STAGED, &settings[0], SAMPLER_REJECTION, 3, "staged, width 3");
#endif
    check_sampled_on_width(&pair, DRAFT_LOOKUP, &settings[0], SAMPLER_REJECTION, 3, "lookup, width 3");
    model_pair_close(&pair);
}

// Under coupling a tree changes nothing either: the output is target-only's for the seed, at every width.
TEST(speculative_tree_coupled_equals_target_only) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 2, 0.3f);
    const int prompt[] = {3, 14, 15, 92, 3, 14};
    int expect[30], got[30];
    SpecStats stats;
    for (int seed = 1; seed <= 3; seed++) {
        SpecParams params = {.sampling = {1.0f, 0, 1.0f}, .sampler = SAMPLER_COUPLED, .max_tokens = 30, .eos_id = -1};
        CHECK(generate(&pair, prompt, 6, &params, seed, expect, &stats, false) == 30, "target-only");
        for (int width = 2; width <= TREE_FIRST_WIDTH_MAX + 1; width++) {
            params.tree_auto = width > TREE_FIRST_WIDTH_MAX;
            params.tree_width = params.tree_auto ? TREE_FIRST_WIDTH_MAX : width;
            params.policy = seed == 1 ? GAMMA_AUTO : GAMMA_FIXED;
            params.gamma = 2 + seed;
            CHECK(generate(&pair, prompt, 6, &params, seed, got, &stats, true) == 30 &&
                  memcmp(got, expect, sizeof got) == 0, "seed %d, width %d%s: coupled tree output differs from "
                  "target-only's", seed, params.tree_width, params.tree_auto ? " (--tree)" : "");
        }
    }
    model_pair_close(&pair);
}

// The shipped pair: greedy tree output is the target's for every width and --tree, at 1 and 2 threads.
typedef struct {
    int first_width, width_step;
    int sibling_accepted;  // over every run: children kept after a rejected sibling
} TreeWidths;

static void check_trees_on_shipped_pair(ShippedCase *c, void *ctx) {
    TreeWidths *w = ctx;
    for (int width = w->first_width; width <= TREE_FIRST_WIDTH_MAX + 1; width += w->width_step) {
        c->params.tree_auto = width > TREE_FIRST_WIDTH_MAX;
        c->params.tree_width = c->params.tree_auto ? TREE_FIRST_WIDTH_MAX : width;
        c->params.policy = c->params.tree_auto ? GAMMA_AUTO : GAMMA_FIXED;
        c->params.gamma = 4;
        int got[32];
        SpecStats stats;
        const int n_got = generate(c->pair, c->prompt, c->n_prompt, &c->params, 1, got, &stats, true);
        CHECK(n_got == c->n_expect && memcmp(got, c->expect, sizeof(int) * n_got) == 0, "prompt %d, threads %d, "
              "width %d%s: tree output differs from the target's", c->p, c->threads, c->params.tree_width,
              c->params.tree_auto ? " (--tree)" : "");
        w->sibling_accepted += stats.sibling_accepted;
    }
}

TEST(speculative_tree_greedy_equals_target_on_shipped_pair) {
    static const char *const prompts[] = {"def fibonacci(n):", "class Stack:\n    def __init__(self):"};
#ifdef SPECDEC_DEBUG  // widths 3 and --tree
    const int n_prompts = 1, n_tokens = 12;
    TreeWidths widths = {.first_width = 3, .width_step = 2};
#else
    const int n_prompts = 2, n_tokens = 32;
    TreeWidths widths = {.first_width = 2, .width_step = 1};
#endif
    on_shipped_pair(prompts, n_prompts, n_tokens, check_trees_on_shipped_pair, &widths);
    CHECK(widths.sibling_accepted > 0, "no child after a rejected sibling was ever kept");
}

// --tree falls back to the chain when a tree does not pay: with the target as its own draft every first child is
// kept (q = p), so siblings add verification cost and no tokens, and the policy — planning with the cost model at
// temperature 1 under rejection sampling, where the same seed must give the same tokens — never drafts a tree.
TEST(speculative_tree_policy_falls_back_to_the_chain) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 1, 0.3f);
    const int prompt[] = {3, 1, 4, 1, 5};
    SpecParams params = {.sampling = {.temperature = 1.0f, .top_p = 1}, .seed = 3, .policy = GAMMA_AUTO,
                         .tree_width = TREE_FIRST_WIDTH_MAX, .tree_auto = true, .max_tokens = 40, .eos_id = -1};
    ModelDrafter self;
    Err err;
    int out[40], again[40], n_out, n_again;
    SpecStats stats;
    CHECK(model_drafter_init(&self, &pair.target, &params, 0.0f, &err) == 0, "%s", err.msg);
    CHECK(speculative_generate(&pair.target, &self.base, prompt, 5, &params, out, &n_out, &stats, &err) == 0, "%s",
          err.msg);
    model_drafter_free(&self);
    CHECK(stats.tree_rounds == 0 && stats.accepted == stats.drafted && stats.drafted > 0, "the target as its own "
          "draft: %d tree rounds, %d of %d drafts accepted", stats.tree_rounds, stats.accepted, stats.drafted);
    // ... and a fixed --tree-width drafts trees, with the same seed's tokens on every run.
    params.tree_auto = false;
    params.tree_width = 3;
    n_out = generate(&pair, prompt, 5, &params, 3, out, &stats, true);
    CHECK(stats.tree_rounds > 0, "--tree-width 3: %d tree rounds of %d", stats.tree_rounds, stats.rounds);
    n_again = generate(&pair, prompt, 5, &params, 3, again, &stats, true);
    CHECK(n_out == n_again && memcmp(out, again, sizeof(int) * n_out) == 0, "--tree-width 3: the seed's tokens differ");
    model_pair_close(&pair);
}
