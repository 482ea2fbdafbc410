// test_speculative.c — speculative decoding is lossless.
//
//   - exactly: the accept / resample step, enumerated over the draft's choice, gives P(output = x) = p(x);
//   - greedy: speculative output equals target-only output token for token, for any γ and thread count, with
//     the weights as stored, quantized to q8, and in BF16 arithmetic (where the CPU has a BF16 dot product), and on
//     the shipped pair;
//   - sampled: the joint distribution of the first 3 tokens over many seeds matches the target's exact
//     distribution (a chi-square test), at temperature 1 and with top-k / top-p, for both samplers; the expected
//     distribution comes from the independent reference (tests/support/sampling_reference.c), not from sampling.c;
//   - coupled: speculative output equals target-only output with the same seed, token for token, for any γ,
//     policy, thread count and sampling setting;
//   - reproducible: the same seed gives the same tokens with γ auto, for both samplers, at 1 and 2 threads.
//
// The same for draft trees: test_tree_decoding.c. The drafters' proposals: test_drafters.c. A generation's limits,
// trace, accounting and the debug build's rollback check: test_generation.c. The model pairs, the drafters under
// test and the chi-square harness they share: tests/support/speculative_support.h.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "speculative/speculative.h"
#include "speculative_support.h"

// ---- the accept / resample step, exactly --------------------------------------------------------------------

// P(output = x) when the draft proposes y ~ q and the target holds p (Leviathan et al., Appendix A.1):
//   P(x) = q(x) min(1, p(x)/q(x)) + Σ_y q(y) (1 − min(1, p(y)/q(y))) · residual(x)
static void output_distribution(double *out, const double *p, const double *q, int V) {
    double residual[64], reject = 0.0;
    const double mass = spec_residual(residual, p, q, V);
    for (int x = 0; x < V && mass > 0.0; x++) residual[x] /= mass;
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

// spec_overlap and spec_residual against their plain loops, bit for bit, on fresh random rows of every length mod 4
// up to the shipped vocabulary's (some entries equal, some zero, one NaN in p now and then; not normalised, which
// neither needs): the overlap's 4 lanes, lane j summing min(p, q) over x ≡ j (mod 4) in order; the residual's
// max(0, p − q) as p > q ? p − q : 0, its mass summed in the same 4 lanes, the entries left unnormalised (p where
// the mass is not positive).
TEST(speculative_overlap_and_residual_are_their_scalar_loops) {
    const int lengths[] = {1, 2, 3, 4, 5, 6, 7, 9, 63, 64, 65, 1001, 8192};
    enum { MAX_V = 8192 };
    double *p = malloc(sizeof(double) * MAX_V), *q = malloc(sizeof(double) * MAX_V);
    double *got = malloc(sizeof(double) * MAX_V), *want = malloc(sizeof(double) * MAX_V);
    CHECK(p && q && got && want, "out of memory");
    for (int trial = 0; trial < 60; trial++) {
        const int V = lengths[trial % (int)(sizeof lengths / sizeof *lengths)];
        for (int x = 0; x < V; x++) {  // magnitudes 2^0..2^-40, so that another order of additions rounds otherwise
            p[x] = test_rand_int(0, 4) ? ldexp(test_rand_uniform(0.5f, 1), -test_rand_int(0, 40)) : 0.0;
            q[x] = test_rand_int(0, 5) ? ldexp(test_rand_uniform(0.5f, 1), -test_rand_int(0, 40)) : p[x];
        }
        if (trial % 7 == 6) p[test_rand_int(0, V - 1)] = NAN;
        double part[4] = {0};
        for (int x = 0; x < V; x++) part[x % 4] += p[x] < q[x] ? p[x] : q[x];
        const double overlap = (part[0] + part[2]) + (part[1] + part[3]), got_overlap = spec_overlap(p, q, V);
        CHECK(memcmp(&overlap, &got_overlap, sizeof overlap) == 0, "V = %d: overlap %.17g, the loop's %.17g", V,
              got_overlap, overlap);
        double lane[4] = {0};
        for (int x = 0; x < V; x++) lane[x % 4] += want[x] = p[x] > q[x] ? p[x] - q[x] : 0.0;
        const double mass = (lane[0] + lane[2]) + (lane[1] + lane[3]);
        if (!(mass > 0.0)) memcpy(want, p, sizeof(double) * V);
        const double got_mass = spec_residual(got, p, q, V);
        CHECK(memcmp(&got_mass, &mass, sizeof mass) == 0 && memcmp(got, want, sizeof(double) * V) == 0,
              "V = %d: residual mass %.17g, the loop's %.17g, or its entries differ", V, got_mass, mass);
    }
    free(p), free(q), free(got), free(want);
}

// ---- greedy identity ------------------------------------------------------------------------------------------

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
                    CHECK(stats.lookup_drafted == stats.drafted && stats.draft_calls == 0, "lookup: %d of %d drafts "
                          "from the lookup, %d forwards", stats.lookup_drafted, stats.drafted, stats.draft_calls);
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

// Pairs of the Llama family (speculative_support.h): the Qwen2 target and a one-block draft of it; the Llama target
// and the Qwen3 draft; and a pair whose embedding tables are padded to different sizes (101 and 99 rows) around a
// shared vocabulary of 97 ids.
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
        draft = QWEN3_DRAFT;
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

// ---- coupled: the target's tokens whatever the drafter ---------------------------------------------------------

// Under SAMPLER_COUPLED the accept rule never changes the target's token: speculative output equals target-only
// output with the same seed, token for token, for every γ, policy and thread count (and the tokens do not depend
// on the thread count either).
TEST(speculative_coupled_equals_target_only) {
    const SamplingParams settings[] = {{1.0f, 0, 1.0f, 0}, {1.0f, 5, 1.0f, 0}, {1.0f, 0, 0.8f, 0}, {0.7f, 10, 0.9f, 0}};
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

// With γ fixed, sampled output does not depend on the thread count: the same tokens and the same record (drafts,
// acceptances, Σ β to the last bit) on 1, 2 and 3 threads — where the p rows of a verification are adjusted one
// per thread, two or three at once — for a chain and a tree of width 3, under both rules, with top-k and top-p.
TEST(speculative_sampled_output_does_not_depend_on_threads) {
    enum { N_TOKENS = 40 };
    for (int c = 0; c < 4; c++) {
        int first[N_TOKENS], got[N_TOKENS];
        SpecStats first_stats, stats;
        for (int threads = 1; threads <= 3; threads++) {
            ModelPair pair;
            pair_open(&pair, 97, 128, threads, 0.3f);
            const int prompt[] = {2, 7, 1, 8};
            const SpecParams params = {.sampling = {0.8f, 40, 0.95f}, .sampler = c % 2 ? SAMPLER_COUPLED
                                                                                        : SAMPLER_REJECTION,
                                       .policy = GAMMA_FIXED, .gamma = 5, .tree_width = c < 2 ? 1 : 3,
                                       .max_tokens = N_TOKENS, .eos_id = -1};
            const int n = generate(&pair, prompt, 4, &params, 5, threads == 1 ? first : got,
                                   threads == 1 ? &first_stats : &stats, true);
            CHECK(n == N_TOKENS, "generated %d", n);
            if (threads > 1)
                CHECK(memcmp(first, got, sizeof got) == 0 && stats.rounds == first_stats.rounds &&
                          stats.accepted == first_stats.accepted && stats.sum_min_pq == first_stats.sum_min_pq,
                      "case %d on %d threads: other tokens or record (%d rounds, %d accepted, sum beta %.17g; on 1 "
                      "thread %d, %d, %.17g)", c, threads, stats.rounds, stats.accepted, stats.sum_min_pq,
                      first_stats.rounds, first_stats.accepted, first_stats.sum_min_pq);
            model_pair_close(&pair);
        }
        CHECK(first_stats.accepted > 0 && first_stats.accepted < first_stats.drafted, "case %d: %d of %d drafts "
              "accepted", c, first_stats.accepted, first_stats.drafted);
    }
}

// ---- the shipped pair ----------------------------------------------------------------------------------------

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
