// test_penalties.c — the repetition, presence and frequency penalties (penalties.h), and speculative decoding with
// them and min-p:
//   - penalize equals the naive reference (tests/support/sampling_reference.c) on random logits and histories, a
//     case worked by hand, and bad settings are refused;
//   - target-only greedy decoding with penalties equals a naive decode that recomputes every position's logits and
//     penalises them by the reference, so the scheduler's history of a row is the text before it;
//   - greedy speculative output equals greedy target-only output with penalties, and so does coupled sampling's with
//     the same seed, for every drafter (draft model, lookup, both), chains and trees, pipelined or not;
//   - a draft that is the target itself has every draft kept: its rows are penalised after the same history;
//   - sampled output keeps the penalised target's distribution: a chi-square against the exact joint distribution
//     of the reference's penalised and min-p'd rows, for the draft model's chains and trees.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sampling_reference.h"
#include "speculative/penalties.h"
#include "speculative_support.h"

// ---- the penalties against the reference -----------------------------------------------------------------------

static Penalties random_penalties(void) {
    static const float repetitions[] = {1.0f, 0.5f, 1.3f, 2.0f};
    Penalties p = {repetitions[test_rand_int(0, 3)], 0.0f, 0.0f};
    if (test_rand_int(0, 2) == 0) p.repetition = test_rand_uniform(0.01f, 3.0f);
    if (test_rand_int(0, 1)) p.presence = test_rand_uniform(-2.0f, 2.0f);
    if (test_rand_int(0, 1)) p.frequency = test_rand_uniform(-2.0f, 2.0f);
    return p;
}

TEST(penalties_match_reference_on_random_histories) {
    enum { V_MOST = 300, N_MOST = 80 };
    static float got[V_MOST], want[V_MOST];
    for (int trial = 0; trial < 2000 && !test_failures(); trial++) {
        const int V = test_rand_int(1, V_MOST), n = test_rand_int(0, N_MOST), n_path = test_rand_int(0, n);
        int text[N_MOST];
        for (int i = 0; i < n; i++) text[i] = test_rand_int(0, V + 2);  // (ids ≥ V: no token of these logits)
        for (int x = 0; x < V; x++) {
            want[x] = test_rand_int(0, 9) == 0 ? 0.0f : test_rand_uniform(-8.0f, 8.0f);
            if (test_rand_int(0, 19) == 0) want[x] = -INFINITY;
        }
        memcpy(got, want, sizeof(float) * V);
        const Penalties p = random_penalties();
        Penalizer z;
        Err err;
        CHECK(penalizer_init(&z, &p, V, &err) == 0, "%s", err.msg);
        // The text is the committed context and a draft path, split anywhere; the prompt ends anywhere in the context.
        const int n_context = n - n_path, n_prompt = test_rand_int(0, n_context);
        const History history = {.context = text, .n = n_context, .n_prompt = n_prompt, .path = text + n_context,
                                 .n_path = n_path};
        penalize(&z, got, &history);
        reference_penalize(want, V, text, n, n_prompt, &p);
        for (int x = 0; x < V; x++)
            CHECK(got[x] == want[x] || (isnan(got[x]) && isnan(want[x])),
                  "trial %d (r %g, a %g, f %g): token %d has logit %.9g, the reference %.9g", trial, p.repetition,
                  p.presence, p.frequency, x, got[x], want[x]);
        for (int x = 0; x < V; x++) CHECK(z.count[x] == 0 && z.seen[x] == 0, "scratch of token %d not cleared", x);
        penalizer_free(&z);
    }
}

TEST(penalties_worked_by_hand) {
    // Prompt {0, 4}, output {1, 1, 2}; r = 2, a = 0.25, f = 0.5.
    float logits[] = {2.0f, -1.0f, 0.5f, 3.0f, -INFINITY};
    const int context[] = {0, 4, 1, 1}, path[] = {2};
    const Penalties p = {.repetition = 2.0f, .presence = 0.25f, .frequency = 0.5f};
    Penalizer z;
    Err err;
    CHECK(penalizer_init(&z, &p, 5, &err) == 0, "%s", err.msg);
    penalize(&z, logits, &(History){.context = context, .n = 4, .n_prompt = 2, .path = path, .n_path = 1});
    const float want[] = {1.0f,                                // in the prompt: 2 / 2
                          -1.0f * 2 - 0.5f * 2 - 0.25f,        // twice in the output: −3.25
                          0.5f / 2 - 0.5f - 0.25f,             // once, on the path: −0.5
                          3.0f, -INFINITY};                    // not in the text; −inf stays
    for (int x = 0; x < 5; x++) CHECK(logits[x] == want[x], "token %d: %g, want %g", x, logits[x], want[x]);
    penalizer_free(&z);

    const Penalties bad[] = {{0, 0, 0}, {-1, 0, 0}, {INFINITY, 0, 0}, {NAN, 0, 0}, {1, NAN, 0}, {1, 0, INFINITY}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(penalizer_init(&z, &bad[i], 5, &err) == -1, "bad penalties %zu accepted", i);
        CHECK(strchr(err.msg, '\n') == NULL && strncmp(err.msg, "sampling: ", 10) == 0, "message: %s", err.msg);
    }
    CHECK(!penalties_on(&PENALTIES_OFF) && penalties_check(&PENALTIES_OFF, &err) == 0, "PENALTIES_OFF");
}

// ---- greedy ---------------------------------------------------------------------------------------------------

static const Penalties GREEDY_SETTINGS[] = {{1.3f, 0.0f, 0.0f}, {1.0f, 0.5f, 0.2f}, {0.8f, -0.3f, 0.4f}};
enum { N_GREEDY_SETTINGS = 3, N_TOKENS = 24 };

// Greedy decoding done naively: every position's logits by a forward over the whole text from an empty cache,
// penalised by the reference, their argmax (the lowest id on a tie).
static void naive_greedy(Model *target, const int *prompt, int n_prompt, const Penalties *p, int *out) {
    int text[8 + N_TOKENS];
    memcpy(text, prompt, sizeof(int) * n_prompt);
    float *logits = malloc(sizeof(float) * target->n_vocab);
    double *probs = malloc(sizeof(double) * target->n_vocab);
    const SamplingParams greedy = {.temperature = 0, .top_p = 1};
    Err err;
    for (int i = 0; i < N_TOKENS; i++) {
        const int n = n_prompt + i;
        KVCache cache;
        CHECK(model_kv_init(target, &cache, &err) == 0, "%s", err.msg);
        CHECK(model_forward(target, &cache, text, n, logits, false, &err) == 0, "%s", err.msg);
        kv_free(&cache);
        reference_penalize(logits, target->n_vocab, text, n, n_prompt, p);
        reference_adjust(probs, logits, target->n_vocab, &greedy, NULL);
        int token = 0;
        while (probs[token] != 1.0) token++;
        text[n] = out[i] = token;
    }
    free(logits);
    free(probs);
}

TEST(penalties_target_only_greedy_equals_naive_decode) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 1, 0.3f);
    int changed = 0;
    for (int trial = 0; trial < 4; trial++) {
        int prompt[8], want[N_TOKENS], got[N_TOKENS], plain[N_TOKENS];
        const int n_prompt = random_prompt(prompt, trial, pair.target.n_vocab);
        const Penalties *p = &GREEDY_SETTINGS[trial % N_GREEDY_SETTINGS];
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = N_TOKENS, .eos_id = -1};
        SpecStats stats;
        generate(&pair, prompt, n_prompt, &params, 1, plain, &stats, false);
        params.penalties = p;
        CHECK(generate(&pair, prompt, n_prompt, &params, 1, got, &stats, false) == N_TOKENS, "tokens");
        naive_greedy(&pair.target, prompt, n_prompt, p, want);
        CHECK(memcmp(got, want, sizeof got) == 0, "trial %d (r %g, a %g, f %g): target-only output differs from the "
              "naive decode", trial, p->repetition, p->presence, p->frequency);
        changed += memcmp(got, plain, sizeof got) != 0;
    }
    CHECK(changed > 0, "the penalties changed no output: the test cannot tell them from none");
    model_pair_close(&pair);
}

// Speculative output equals target-only output with the same penalties token for token — greedy, and under coupled
// sampling with the same seed (with min-p and top-k) — for every drafter, as a chain of 3, a tree of width 3, with
// γ auto and pipelined. Both the accept and the reject path are taken by each drafter.
static void check_equals_target_only(const SamplingParams *sampling, SpecSampler sampler, const char *label) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 2, 0.3f);
    const int V = pair.target.n_vocab;
    int accepted[N_DRAFT_KINDS] = {0}, drafted[N_DRAFT_KINDS] = {0};
    for (int trial = 0; trial < 6 && !test_failures(); trial++) {
        int prompt[8], expect[N_TOKENS], got[N_TOKENS];
        const int n_prompt = random_prompt(prompt, trial, V);
        SpecParams params = {.sampling = *sampling, .sampler = sampler, .max_tokens = N_TOKENS, .eos_id = -1,
                             .penalties = &GREEDY_SETTINGS[trial % N_GREEDY_SETTINGS]};
        SpecStats stats;
        const int n_expect = generate(&pair, prompt, n_prompt, &params, 1 + trial, expect, &stats, false);
        for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
            for (int config = 0; config < 4; config++) {  // a chain of 3, a tree of width 3, auto, pipelined
                params.policy = config == 2 ? GAMMA_AUTO : GAMMA_FIXED;
                params.gamma = 3;
                params.tree_width = config == 1 ? 3 : 1;
                params.pipeline = config == 3 ? PIPELINE_ON : PIPELINE_OFF;
                const int n_got = generate_with(&pair, kind, prompt, n_prompt, &params, 1 + trial, got, &stats, 0);
                CHECK(n_got == n_expect && memcmp(got, expect, sizeof(int) * n_got) == 0,
                      "%s, trial %d, %s, configuration %d: speculative output differs from the target's", label, trial,
                      DRAFT_NAMES[kind], config);
                accepted[kind] += stats.accepted;
                drafted[kind] += stats.drafted;
            }
    }
    for (DraftKind kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++)
        CHECK(accepted[kind] > 0 && accepted[kind] < drafted[kind], "%s, %s: both paths exercised: %d of %d drafts "
              "accepted", label, DRAFT_NAMES[kind], accepted[kind], drafted[kind]);
    model_pair_close(&pair);
}

TEST(speculative_penalised_greedy_equals_target) {
    check_equals_target_only(&(SamplingParams){.temperature = 0, .top_p = 1}, SAMPLER_REJECTION, "greedy");
}

TEST(speculative_penalised_coupled_equals_target_only) {
    check_equals_target_only(&(SamplingParams){.temperature = 0.3f, .top_k = 10, .top_p = 1, .min_p = 0.05f},
                             SAMPLER_COUPLED, "coupled");
}

// A draft that is the target itself, penalised as the target is, proposes what the target decides: every draft of a
// chain is kept — greedy, and sampled (p = q at every draft) — drafted in the round or ahead of it. Had a draft's row
// another history than the target's row after the same drafts (the prompt counted as output, a draft left out, a
// guess's row drafted ahead after the wrong text), its q would differ from p and drafts would be rejected.
TEST(speculative_penalised_draft_mirrors_target) {
    RandomCheckpoint spec = {.n_layer = 2, .n_embd = 32, .n_head = 4, .vocab_size = 97, .n_positions = 128,
                             .scale = 0.3f, .seed = 7};
    ModelPair pair;
    model_pair_open(&pair, &spec, &spec, 97, 1, QUANT_NONE);
    const SamplingParams settings[] = {{.temperature = 0, .top_p = 1}, {.temperature = 1, .top_p = 1, .min_p = 0.02f}};
    for (int s = 0; s < 2; s++)
        for (int trial = 0; trial < 4; trial++) {
            int prompt[8], got[N_TOKENS];
            const int n_prompt = random_prompt(prompt, trial, pair.target.n_vocab);
            const SpecParams params = {.sampling = settings[s], .policy = GAMMA_FIXED, .gamma = 3,
                                       .max_tokens = N_TOKENS, .eos_id = -1, .penalties = &GREEDY_SETTINGS[trial % 3],
                                       .pipeline = trial % 2 ? PIPELINE_ON : PIPELINE_OFF};
            SpecStats stats;
            generate_with(&pair, DRAFT_MODEL, prompt, n_prompt, &params, 1 + trial, got, &stats, 0);
            CHECK(stats.drafted > 0 && stats.accepted == stats.drafted, "setting %d, trial %d%s: %d of %d drafts kept",
                  s, trial, trial % 2 ? " (pipelined)" : "", stats.accepted, stats.drafted);
            CHECK(trial % 2 == 0 || stats.ahead_rounds > 0, "setting %d, trial %d: no round drafted ahead", s, trial);
        }
    model_pair_close(&pair);
}

// ---- sampled --------------------------------------------------------------------------------------------------

// Penalties strong enough on the tiny pair's logits to move its distribution far (checked: total variation ≥ 0.1
// between the penalised and the plain joint distribution), with min-p cutting its tail.
TEST(speculative_penalised_sampling_matches_target) {
    ModelPair pair;
    pair_open(&pair, V_SMALL, 32, 1, 0.3f);
    const Penalties penalties = {.repetition = 1.5f, .presence = 0.5f, .frequency = 0.4f};
    SpecParams params = {.sampling = {.temperature = 1.0f, .top_p = 1.0f, .min_p = 0.05f}, .sampler = SAMPLER_REJECTION,
                         .policy = GAMMA_FIXED, .gamma = 3, .max_tokens = 3, .penalties = &penalties};
    static double penalised[V_SMALL * V_SMALL * V_SMALL], plain[V_SMALL * V_SMALL * V_SMALL];
    const int prompt[] = {1, 3};
    exact_joint(&pair, prompt, 2, &params, penalised);
    SpecParams none = params;
    none.penalties = NULL;
    exact_joint(&pair, prompt, 2, &none, plain);
    double distance = 0;
    for (int i = 0; i < V_SMALL * V_SMALL * V_SMALL; i++) distance += fabs(penalised[i] - plain[i]) / 2;
    CHECK(distance >= 0.1, "the penalties move the distribution by %g only", distance);

    check_sampled_with(&pair, DRAFT_MODEL, &params, "penalised chain");
#ifndef SPECDEC_DEBUG  // (the sanitizer suite runs the chain only)
    params.tree_width = 3;
    check_sampled_with(&pair, DRAFT_MODEL, &params, "penalised tree");
#endif
    model_pair_close(&pair);
}
