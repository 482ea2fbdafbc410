// test_pipeline.c — pipelined drafting (draft_ahead.h) keeps speculative decoding lossless and reproducible:
//
//   - greedy: output equals target-only's token for token with pipelining on and off, for the draft-model and
//     staged drafters, at 1 and 2 target threads, under every γ policy, on tiny pairs and on the shipped pair —
//     where rounds of both drafters take drafts drafted ahead;
//   - exact: pipelined output equals unpipelined output token for token under every γ policy, with the same record
//     (rounds, drafts, acceptances, Σ β to the last bit) wherever γ does not follow timings, at temperature > 0
//     under both samplers, for both drafters, on tiny pairs and on the shipped pair — the chain drafted ahead is the
//     one the next round would have drafted (the same q rows, the same random numbers), continued where that round
//     asks for more;
//   - sampled: with pipelining on, the joint distribution of the first 3 tokens matches the target's exact one
//     (the chi-square test of speculative_support.h), where the third comes from a round that took drafts drafted
//     ahead whenever the guess held — under both samplers, for both drafters;
//   - reproducible: with pipelining on, the same seed gives the same tokens and rounds on every run under γ auto
//     (see pipeline_seed_reproducible for what this does and does not promise);
//   - the guess: drawn with the round's own number for its bonus token, so that with the target as its own draft
//     (q = p) every round after the first takes the chain drafted ahead, under both samplers;
//   - where it applies: never for the lookup drafter, trees or plain decoding; auto turns it on where the process
//     may use a CPU beyond the target's pool, at every temperature, for a draft small enough to draft ahead on one
//     in time, and only with a CPU to spare the drafting thread takes the rounds' proposals (the draft on a core
//     of its own);
//   - taken back: with the drafting thread held back, every job runs on the caller, and the tokens and record are
//     the unpipelined run's;
//   - an error on the drafting thread ends the generation with its message.
//
// In the debug build every rollback is checked (test_generation.c), the caches that take rows drafted ahead too.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "base/threads.h"
#include "harness.h"
#include "speculative/draft_ahead.h"
#include "speculative/speculative.h"
#include "speculative_support.h"

static const Pipelining MODES[] = {PIPELINE_OFF, PIPELINE_ON};
#ifdef SPECDEC_DEBUG  // which checks every rollback: fewer prompts and γ's
enum { N_TRIALS = 3, N_SHIPPED_CONFIGS = 2 };
#else
enum { N_TRIALS = 6, N_SHIPPED_CONFIGS = 4 };
#endif
static const char *const MODE_NAMES[] = {[PIPELINE_OFF] = "off", [PIPELINE_AUTO] = "auto", [PIPELINE_ON] = "on"};

// ---- greedy identity -------------------------------------------------------------------------------------------

// Every γ policy, both drafters that draft with the model, pipelining off and on, on N_TRIALS random prompts (every
// other one repetitive, for the staged drafter's lookup): the target's own tokens. The draft model's rounds take drafts
// drafted ahead; the staged drafter's seldom do here, as the tiny models' greedy loops give its lookup a run every
// round (on the shipped pair they do: below). A chain is taken only where the round before kept all its drafts and
// guessed its bonus token, which some random pairs seldom do on the first prompts (2 such rounds in 96 runs for some
// seeds, none for one): where none has yet, more prompts follow, up to 4 × N_TRIALS.
static void check_greedy_pipelined(ModelPair *pair, const char *label) {
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_FIXED, GAMMA_AUTO, GAMMA_HEURISTIC};
    const int gammas[] = {1, 2, 4, 8, 0, 5};
    const DraftKind kinds[] = {DRAFT_MODEL, DRAFT_STAGED};
    int ahead = 0;
    for (int trial = 0; trial < N_TRIALS || (ahead == 0 && trial < 4 * N_TRIALS); trial++) {
        int prompt[8], n_prompt = random_prompt(prompt, trial, pair->target.n_vocab);
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 40, .eos_id = -1};
        int expect[40], got[40];
        SpecStats stats;
        const int n_expect = generate(pair, prompt, n_prompt, &params, 1, expect, &stats, false);
        for (int k = 0; k < 2; k++)
            for (size_t g = 0; g < sizeof gammas / sizeof gammas[0]; g++)
                for (int m = 0; m < 2; m++) {
                    params.policy = policies[g];
                    params.gamma = gammas[g];
                    params.pipeline = MODES[m];
                    const int n_got = generate_with(pair, kinds[k], prompt, n_prompt, &params, 1, got, &stats, 0);
                    CHECK(n_got == n_expect && memcmp(got, expect, sizeof(int) * n_got) == 0,
                          "%s, %s, policy %d, gamma %d, pipelining %s: output differs from the target's", label,
                          DRAFT_NAMES[kinds[k]], policies[g], gammas[g], MODE_NAMES[MODES[m]]);
                    CHECK(stats.pipelined == (MODES[m] == PIPELINE_ON) && (stats.pipelined || !stats.ahead_rounds),
                          "%s: pipelined %d, %d rounds drafted ahead", label, stats.pipelined, stats.ahead_rounds);
                    ahead += kinds[k] == DRAFT_MODEL ? stats.ahead_rounds : 0;
                }
    }
    CHECK(ahead > 0, "%s, draft model: no round took drafts drafted ahead", label);
}

TEST(pipeline_greedy_equals_target) {
    for (int threads = 1; threads <= 2; threads++) {
        ModelPair pair;
        pair_open(&pair, 97, 128, threads, 0.3f);
        char label[32];
        snprintf(label, sizeof label, "%d thread%s", threads, threads > 1 ? "s" : "");
        check_greedy_pipelined(&pair, label);
        model_pair_close(&pair);
    }
}

// The shipped pair, greedy, at 1 and 2 threads (on_shipped_pair): γ fixed at 3, 1 and 8, and auto (the debug build:
// 3 and auto), with the draft model and the staged drafter, pipelining on — the target's tokens, and rounds of both drafters took drafts
// drafted ahead.
static void check_pipelined_on_shipped_pair(ShippedCase *c, void *ctx) {
    int *ahead = ctx;
    const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_AUTO, GAMMA_FIXED, GAMMA_FIXED};
    const int gammas[] = {3, 0, 1, 8};
    c->params.pipeline = PIPELINE_ON;
    for (int k = 0; k < 2; k++)
        for (int g = 0; g < N_SHIPPED_CONFIGS; g++) {
            const DraftKind kind = k ? DRAFT_STAGED : DRAFT_MODEL;
            c->params.policy = policies[g];
            c->params.gamma = gammas[g];
            int got[32];
            SpecStats stats;
            const int n_got = generate_with(c->pair, kind, c->prompt, c->n_prompt, &c->params, 1, got, &stats, 0);
            CHECK(n_got == c->n_expect && memcmp(got, c->expect, sizeof(int) * n_got) == 0,
                  "prompt %d, %d threads, %s, gamma %d (policy %d), pipelined: output differs from the target's", c->p,
                  c->threads, DRAFT_NAMES[kind], gammas[g], policies[g]);
            ahead[k] += stats.ahead_rounds;
        }
}

TEST(pipeline_greedy_equals_target_on_shipped_pair) {
    static const char *const prompts[] = {"def fibonacci(n):", "import os\n\n\ndef list_files(path):"};
    int ahead[2] = {0};
#ifdef SPECDEC_DEBUG  // which checks every rollback: 12 tokens of one prompt, where the staged drafter's lookup
                      // proposes every round after the first
    on_shipped_pair(prompts, 1, 12, check_pipelined_on_shipped_pair, ahead);
    ahead[1] = 1;
#else
    on_shipped_pair(prompts, 2, 32, check_pipelined_on_shipped_pair, ahead);
#endif
    CHECK(ahead[0] > 0 && ahead[1] > 0, "rounds that took drafts drafted ahead: %d (draft model), %d (staged)",
          ahead[0], ahead[1]);
}

// ---- the same output, pipelined or not -----------------------------------------------------------------------------

// Pipelining on and off, sampled: the same tokens, for each sampler, drafter, thread count and sampling setting, with
// γ fixed (2 and 5), heuristic and auto — with the draft stopping below a top probability too (p_min: the chain
// drafted ahead stops where the next round's would, or at an unsure guess, where the next round drafts afresh).
// Under every policy but coupling's auto (whose γ follows timings, which its tokens do not depend on) the same
// record too: rounds, drafts, acceptances, Σ β to the last bit. Under heuristic and auto a round that takes the
// chain drafted ahead may ask for more drafts than it holds (the chain's depth was chosen a round earlier), and the
// drafter draws the rest from the same positions on (draft_model.c, model_propose): the rounds would differ
// otherwise.
TEST(pipeline_changes_no_token) {
    enum { N_TOKENS = 48, N_CASES = 32 };
    const SamplingParams settings[] = {{1.0f, 0, 1.0f, 0}, {0.8f, 40, 0.95f, 0}};
    const DraftKind kinds[] = {DRAFT_MODEL, DRAFT_STAGED};
    int ahead[2] = {0};
    for (int threads = 1; threads <= 2; threads++) {
        ModelPair pair;
        pair_open(&pair, 97, 128, threads, 0.3f);
        for (int c = 0; c < N_CASES; c++) {
            static const GammaPolicy policies[] = {GAMMA_FIXED, GAMMA_FIXED, GAMMA_HEURISTIC, GAMMA_AUTO};
            static const int gammas[] = {2, 5, 3, 0};
            const int k = c % 2, gamma = gammas[c / 2 % 4];
            const GammaPolicy policy = policies[c / 2 % 4];
            const float p_min = c / 8 % 2 ? 0.2f : 0.0f;
            const SpecSampler sampler = c / 16 ? SAMPLER_COUPLED : SAMPLER_REJECTION;
            const int prompt[] = {3 + c, 14, 15, 92, 3 + c, 14};  // a repeat, for the lookup
            int first[N_TOKENS], got[N_TOKENS];
            SpecStats off, on;
            SpecParams params = {.sampling = settings[c / 8 % 2], .sampler = sampler, .policy = policy,
                                 .gamma = gamma, .max_tokens = N_TOKENS, .eos_id = -1};
            const int n_off = generate_with(&pair, kinds[k], prompt, 6, &params, 7 + c, first, &off, p_min);
            params.pipeline = PIPELINE_ON;
            const int n_on = generate_with(&pair, kinds[k], prompt, 6, &params, 7 + c, got, &on, p_min);
            const bool same_record = policy != GAMMA_AUTO || sampler == SAMPLER_REJECTION;
            CHECK(n_on == n_off && memcmp(first, got, sizeof(int) * n_on) == 0 &&
                      (!same_record || (on.rounds == off.rounds && on.drafted == off.drafted &&
                                        on.accepted == off.accepted && on.sum_min_pq == off.sum_min_pq)),
                  "%d threads, case %d (%s, gamma %d, p_min %.1f, %s): pipelined %d tokens, %d rounds, %d of %d "
                  "accepted, sum beta %.17g; not %d, %d, %d of %d, %.17g", threads, c, DRAFT_NAMES[kinds[k]], gamma,
                  p_min, sampler == SAMPLER_COUPLED ? "coupled" : "rejection", n_on, on.rounds, on.accepted,
                  on.drafted, on.sum_min_pq, n_off, off.rounds, off.accepted, off.drafted, off.sum_min_pq);
            CHECK(!same_record || on.draft_calls <= off.draft_calls,
                  "case %d: %d draft forwards in the rounds' way, %d without", c, on.draft_calls, off.draft_calls);
            ahead[k] += on.ahead_rounds;
        }
        model_pair_close(&pair);
    }
    for (int k = 0; k < 2; k++)
        CHECK(ahead[k] > 0, "%s: no round took drafts drafted ahead", DRAFT_NAMES[kinds[k]]);
}

// The shipped pair at temperature 1 under γ auto (the CLI's defaults, rejection sampling), on 1 and 2 threads: the
// same tokens and rounds pipelined or not, where rounds took drafts drafted ahead — and some of them drafts the
// chain did not hold (the policy asking for more than it had chosen a round before).
static void check_sampled_pipelined_on_shipped_pair(ShippedCase *c, void *ctx) {
    int *ahead = ctx;
    enum { N = 64 };
    int off[N], on[N];
    SpecStats off_stats, on_stats;
    SpecParams params = c->params;
    params.sampling = (SamplingParams){.temperature = 1.0f, .top_p = 1.0f};
    params.policy = GAMMA_AUTO;
    params.max_tokens = N;
    params.pipeline = PIPELINE_OFF;
    const int n_off = generate_with(c->pair, DRAFT_MODEL, c->prompt, c->n_prompt, &params, 3, off, &off_stats, 0);
    params.pipeline = PIPELINE_ON;
    const int n_on = generate_with(c->pair, DRAFT_MODEL, c->prompt, c->n_prompt, &params, 3, on, &on_stats, 0);
    CHECK(n_on == n_off && memcmp(on, off, sizeof(int) * n_on) == 0 && on_stats.rounds == off_stats.rounds &&
              on_stats.drafted == off_stats.drafted,
          "prompt %d, %d threads, temperature 1, gamma auto: pipelined %d tokens, %d rounds, %d drafted; not %d, %d, "
          "%d", c->p, c->threads, n_on, on_stats.rounds, on_stats.drafted, n_off, off_stats.rounds,
          off_stats.drafted);
    ahead[0] += on_stats.ahead_rounds;
    ahead[1] += on_stats.ahead_extended;
}

TEST(pipeline_changes_no_token_on_shipped_pair) {
    static const char *const prompts[] = {"def fibonacci(n):", "import os\n\n\ndef list_files(path):",
                                          "class Stack:\n    def __init__(self):"};
    int ahead[2] = {0};
    on_shipped_pair(prompts, 3, 1, check_sampled_pipelined_on_shipped_pair, ahead);
    CHECK(ahead[0] > 0 && ahead[1] > 0, "rounds that took drafts drafted ahead: %d; that drew more after them: %d",
          ahead[0], ahead[1]);
}

// ---- the caller taking jobs back -----------------------------------------------------------------------------------

// A draft model drafter that counts its proposals and chains drafted ahead, and those run on a thread other than
// `caller`. (The drafter's calls never overlap: the job word orders them.)
typedef struct {
    Drafter base;
    ModelDrafter inner;
    pthread_t caller;
    int calls, elsewhere;
} Watcher;

static void watch(Watcher *w) {
    w->calls++;
    w->elsewhere += !pthread_equal(pthread_self(), w->caller);
}

static int watcher_propose(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                           double *q, DraftReport *report, Err *err) {
    Watcher *w = (Watcher *)self;
    watch(w);
    return w->inner.base.propose(&w->inner.base, context, n, request, tree, q, report, err);
}

static int watcher_draft_ahead(Drafter *self, const int *context, int n, int depth, Err *err) {
    Watcher *w = (Watcher *)self;
    watch(w);
    return w->inner.base.draft_ahead(&w->inner.base, context, n, depth, err);
}

static void watcher_rollback(Drafter *self, int n, const int *path, int n_path) {
    Watcher *w = (Watcher *)self;
    w->inner.base.rollback(&w->inner.base, n, path, n_path);
}

// Pipelined, with the draft model drafter watched: the tokens, with *stats; every call of the drafter counted in
// *calls, and in *elsewhere those off the caller's thread.
static int generate_watched(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, int *out,
                            SpecStats *stats, int *calls, int *elsewhere) {
    Watcher w = {.base = {.propose = watcher_propose, .rollback = watcher_rollback,
                          .draft_ahead = watcher_draft_ahead},
                 .caller = pthread_self()};
    Err err;
    int n_out = -1;
    CHECK(model_drafter_init(&w.inner, &pair->draft, params, 0.0f, &err) == 0, "%s", err.msg);
    CHECK(speculative_generate(&pair->target, &w.base, prompt, n_prompt, params, out, &n_out, stats, &err) == 0,
          "%s", err.msg);
    model_drafter_free(&w.inner);
    *calls = w.calls;
    *elsewhere = w.elsewhere;
    return n_out;
}

// With the drafting thread held back (draft_ahead_hold_back), every job — drafting ahead, and the rounds' proposals
// where the draft has a core of its own — runs on the caller, taken back (draft_ahead.c, job_result), which
// scheduling otherwise reaches only where it leaves a job unclaimed: every call of the draft model drafter on the
// caller's thread, and the same tokens and record as unpipelined, for both samplers and for the staged drafter too,
// at 1 target thread (of 2 or more CPUs: the draft on a core of its own, the caller taking a job back after its poll)
// and at 2. With the target as its own draft (q = p: every draft kept, every guess right,
// pipeline_guess_is_the_bonus_token_when_q_is_p), every round of the draft model's after the first takes the chain
// the caller drafted ahead.
TEST(pipeline_jobs_taken_back_change_no_token) {
    enum { N_TOKENS = 32 };
    const RandomCheckpoint spec = {.n_layer = 2, .n_embd = 32, .n_head = 4, .vocab_size = 97, .n_positions = 128,
                                   .scale = 0.3f, .seed = 5};
    draft_ahead_hold_back(true);
    for (int threads = 1; threads <= 2; threads++) {
        ModelPair pair;
        model_pair_open(&pair, &spec, &spec, spec.vocab_size, threads, QUANT_NONE);
        for (int c = 0; c < 4; c++) {
            const int prompt[] = {4 + c, 9, 16, 25, 4 + c, 9};  // a repeat, for the lookup
            const DraftKind kind = c % 2 ? DRAFT_STAGED : DRAFT_MODEL;
            SpecParams params = {.sampling = {1.0f, 0, 1.0f, 0}, .sampler = c / 2 ? SAMPLER_COUPLED : SAMPLER_REJECTION,
                                 .policy = GAMMA_FIXED, .gamma = 3, .max_tokens = N_TOKENS, .eos_id = -1,
                                 .seed = 11 + c};
            int off[N_TOKENS], on[N_TOKENS], calls = 0, elsewhere = 0;
            SpecStats off_stats, on_stats;
            const int n_off = generate_with(&pair, kind, prompt, 6, &params, params.seed, off, &off_stats, 0);
            params.pipeline = PIPELINE_ON;
            const int n_on = kind == DRAFT_MODEL
                                 ? generate_watched(&pair, prompt, 6, &params, on, &on_stats, &calls, &elsewhere)
                                 : generate_with(&pair, kind, prompt, 6, &params, params.seed, on, &on_stats, 0);
            CHECK(n_on == n_off && memcmp(on, off, sizeof(int) * n_on) == 0 && on_stats.rounds == off_stats.rounds &&
                      on_stats.drafted == off_stats.drafted && on_stats.accepted == off_stats.accepted,
                  "%d threads, case %d (%s): every job taken back, %d tokens, %d rounds, %d of %d accepted; "
                  "unpipelined %d, %d, %d of %d", threads, c, DRAFT_NAMES[kind], n_on, on_stats.rounds,
                  on_stats.accepted, on_stats.drafted, n_off, off_stats.rounds, off_stats.accepted,
                  off_stats.drafted);
            CHECK(kind != DRAFT_MODEL || (on_stats.pipelined && on_stats.ahead_rounds == on_stats.rounds - 1 &&
                                          calls > on_stats.rounds && elsewhere == 0),
                  "%d threads, case %d: pipelined %d, %d of %d rounds took the chain drafted ahead, %d of the "
                  "drafter's %d calls off the caller's thread", threads, c, on_stats.pipelined,
                  on_stats.ahead_rounds, on_stats.rounds, elsewhere, calls);
        }
        model_pair_close(&pair);
    }
    draft_ahead_hold_back(false);
}

// ---- sampled losslessness ----------------------------------------------------------------------------------------

// γ = 1 and 4 tokens: the first round drafts token 1 and ends with the bonus token 2, while the drafting thread
// guesses token 2 and drafts token 3 after it, which the second round verifies when the guess held.
static void check_pipelined_sampling(DraftKind kind, const SamplingParams *sp, SpecSampler sampler, const char *label) {
    ModelPair pair;
    pair_open(&pair, V_SMALL, 32, 1, 0.3f);
    const SpecParams params = {.sampling = *sp, .sampler = sampler, .policy = GAMMA_FIXED, .gamma = 1,
                               .max_tokens = 4, .pipeline = PIPELINE_ON};
    check_sampled_with(&pair, kind, &params, label);
    model_pair_close(&pair);
}

// Each of its 30000 generations starts a drafting thread and hands it two jobs, which on the tiny models cost more
// than the forwards: a call takes a few seconds, so the sanitizer suite runs the first only — the staged drafter's
// (whose pipelined rounds pipeline_changes_no_token holds to the unpipelined ones token for token)
// and the coupled rule's (whose pipelined output is target-only's: pipeline_seed_reproducible) run in the release
// build's.
TEST(pipeline_sampling_matches_target) {
    const SamplingParams t1 = {.temperature = 1.0f, .top_p = 1.0f};
    check_pipelined_sampling(DRAFT_MODEL, &t1, SAMPLER_REJECTION, "pipelined, T = 1");
#ifndef SPECDEC_DEBUG
    check_pipelined_sampling(DRAFT_STAGED, &t1, SAMPLER_REJECTION, "pipelined staged");
    check_pipelined_sampling(DRAFT_MODEL, &t1, SAMPLER_COUPLED, "pipelined, coupled");
#endif
}

// ---- reproducible ---------------------------------------------------------------------------------------------

// What this guarantees: with pipelining on, the same seed, options and thread count give the same tokens on every
// run, however the drafting thread's work and the target's interleave (at 2 threads the two share 2 CPUs here, and
// their timing varies) — under γ auto with rejection sampling, whose choices at temperature > 0, the depth drafted
// ahead's among them, rest on the cost model (and so do the rounds, and the rounds that take drafts drafted ahead),
// and under coupling, whose output is target-only's with pipelining on too (its γ follows timings: its rounds vary).
// That pipelined and unpipelined runs agree is pipeline_changes_no_token's.
TEST(pipeline_seed_reproducible) {
    enum { N_TOKENS = 40, RUNS = 3 };
    for (int c = 0; c < 4; c++) {
        const int threads = 1 + c % 2;
        const SpecSampler sampler = c / 2 ? SAMPLER_COUPLED : SAMPLER_REJECTION;
        ModelPair pair;
        pair_open(&pair, 97, 128, threads, 0.3f);
        const int prompt[] = {2, 7, 1, 8};
        SpecParams params = {.sampling = {0.7f, 0, 0.95f}, .sampler = sampler, .policy = GAMMA_AUTO,
                             .max_tokens = N_TOKENS, .eos_id = -1, .pipeline = PIPELINE_ON};
        int first[N_TOKENS], got[N_TOKENS], target_only[N_TOKENS];
        SpecStats first_stats, stats;
        for (int run = 0; run < RUNS; run++) {
            const int n = generate(&pair, prompt, 4, &params, 42, run ? got : first, run ? &stats : &first_stats,
                                   true);
            CHECK(n == N_TOKENS, "generated %d", n);
            if (!run) continue;
            CHECK(memcmp(first, got, sizeof got) == 0, "case %d, run %d: other tokens", c, run);
            if (sampler == SAMPLER_REJECTION)  // (coupling plans with timings: the tokens are the same, not the rounds)
                CHECK(stats.rounds == first_stats.rounds && stats.drafted == first_stats.drafted &&
                          stats.ahead_rounds == first_stats.ahead_rounds,
                      "case %d, run %d: %d rounds, %d drafted, %d drafted ahead; first %d, %d, %d", c, run,
                      stats.rounds, stats.drafted, stats.ahead_rounds, first_stats.rounds, first_stats.drafted,
                      first_stats.ahead_rounds);
        }
        CHECK(first_stats.drafted > 0 && first_stats.pipelined, "case %d: drafted %d, pipelined %d", c,
              first_stats.drafted, first_stats.pipelined);
        if (sampler == SAMPLER_COUPLED) {
            generate(&pair, prompt, 4, &params, 42, target_only, &stats, false);
            CHECK(memcmp(first, target_only, sizeof first) == 0, "case %d: coupled, pipelined: not target-only's", c);
        }
        model_pair_close(&pair);
    }
}

// ---- the guess ---------------------------------------------------------------------------------------------------

// The guess of the round's next token is drawn from q with the number the round's bonus draw from p uses, so it is
// right wherever q is p. With the target as its own draft (q = p to the bit: one model, batch-invariant), every
// draft is kept and every guess right: each round after the first takes the chain drafted ahead — under rejection
// sampling as under coupling, at any temperature. (An independent guess would hold in a Σ p² share of rounds.)
TEST(pipeline_guess_is_the_bonus_token_when_q_is_p) {
    enum { N_TOKENS = 40 };
    const RandomCheckpoint spec = {.n_layer = 2, .n_embd = 32, .n_head = 4, .vocab_size = 97, .n_positions = 128,
                                   .scale = 0.3f, .seed = 5};
    ModelPair pair;
    model_pair_open(&pair, &spec, &spec, spec.vocab_size, 1, QUANT_NONE);
    const int prompt[] = {4, 9, 16, 25};
    for (int c = 0; c < 4; c++) {
        const SpecSampler sampler = c % 2 ? SAMPLER_COUPLED : SAMPLER_REJECTION;
        const float temperature = c / 2 ? 0.7f : 1.0f;
        SpecParams params = {.sampling = {temperature, 0, 1.0f}, .sampler = sampler, .policy = GAMMA_FIXED,
                             .gamma = 3, .max_tokens = N_TOKENS, .eos_id = -1, .pipeline = PIPELINE_ON};
        int got[N_TOKENS];
        SpecStats stats;
        generate(&pair, prompt, 4, &params, 100 + c, got, &stats, true);
        CHECK(stats.accepted == stats.drafted && stats.ahead_rounds == stats.rounds - 1,
              "%s, T = %.1f: %d of %d drafts kept, %d of %d rounds drafted ahead",
              sampler == SAMPLER_COUPLED ? "coupled" : "rejection", temperature, stats.accepted, stats.drafted,
              stats.ahead_rounds, stats.rounds);
    }
    model_pair_close(&pair);
}

// ---- where it applies ----------------------------------------------------------------------------------------

// Only a draft model's chains are drafted ahead: with pipelining on, the lookup drafter and plain decoding run
// without the drafting thread, and a tree of the draft model never drafts ahead (its output still the target's).
// Auto starts the thread, at every temperature, where this process may use more CPUs than the target's pool has
// threads and the draft is small enough to draft ahead in time on one; the thread then takes the rounds' proposals
// too (the draft on a core of its own), and only then.
TEST(pipeline_only_where_it_applies) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 1, 0.3f);
    const int prompt[] = {5, 6, 7, 5, 6};
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 3,
                         .max_tokens = 30, .eos_id = -1, .pipeline = PIPELINE_ON};
    int expect[30], got[30];
    SpecStats stats;
    generate(&pair, prompt, 5, &params, 1, expect, &stats, false);
    CHECK(!stats.pipelined, "target-only decoding started the drafting thread");
    generate_with(&pair, DRAFT_LOOKUP, prompt, 5, &params, 1, got, &stats, 0);
    CHECK(!stats.pipelined && memcmp(got, expect, sizeof got) == 0, "lookup: pipelined %d", stats.pipelined);
    params.tree_width = 3;
    generate_with(&pair, DRAFT_MODEL, prompt, 5, &params, 1, got, &stats, 0);
    CHECK(stats.tree_rounds > 0 && stats.ahead_rounds == 0 && stats.ahead_discarded == 0 &&
              memcmp(got, expect, sizeof got) == 0,
          "width 3: %d tree rounds, %d drafted ahead, %d discarded", stats.tree_rounds, stats.ahead_rounds,
          stats.ahead_discarded);
    model_pair_close(&pair);

    const int cpus = cpus_available();
    for (int threads = 1; threads <= cpus; threads += cpus > 1 ? cpus - 1 : 1) {
        pair_open(&pair, 97, 128, threads, 0.3f);
        params = (SpecParams){.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 8, .eos_id = -1,
                              .pipeline = PIPELINE_AUTO};
        for (int t = 0; t <= 1; t++) {
            params.sampling.temperature = (float)t;
            generate(&pair, prompt, 5, &params, 1, got, &stats, true);
            CHECK(stats.pipelined == (threads < cpus) && stats.draft_own_core == stats.pipelined,
                  "auto at temperature %d on %d of %d CPUs: pipelined %d, the draft on a core of its own %d", t,
                  threads, cpus, stats.pipelined, stats.draft_own_core);
        }
        params.pipeline = PIPELINE_ON;  // on the CPUs the target's threads use: the proposals stay on the caller
        generate(&pair, prompt, 5, &params, 1, got, &stats, true);
        CHECK(stats.pipelined && stats.draft_own_core == (threads < cpus),
              "on, %d of %d CPUs: pipelined %d, the draft on a core of its own %d", threads, cpus, stats.pipelined,
              stats.draft_own_core);
        model_pair_close(&pair);
    }

    // A draft as large as its target (the target itself) would take longer to draft a chain ahead on one CPU than
    // the target takes to verify it: auto leaves it off, with a CPU to spare or not; on still pipelines.
    const RandomCheckpoint spec = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = 97, .n_positions = 128,
                                   .scale = 0.3f, .seed = 7};
    model_pair_open(&pair, &spec, &spec, spec.vocab_size, 1, QUANT_NONE);
    params = (SpecParams){.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 8, .eos_id = -1,
                          .pipeline = PIPELINE_AUTO};
    generate(&pair, prompt, 5, &params, 1, got, &stats, true);
    CHECK(!stats.pipelined, "auto with a draft as large as the target, on 1 of %d CPUs: pipelined", cpus);
    params.pipeline = PIPELINE_ON;
    generate(&pair, prompt, 5, &params, 1, got, &stats, true);
    CHECK(stats.pipelined, "on with a draft as large as the target: not pipelined");
    model_pair_close(&pair);
}

// ---- an error on the drafting thread ------------------------------------------------------------------------------

// A draft model drafter whose model's logits turn NaN once its first proposal is made (its final norm's first gain
// set so), so that the first draft forward to see them is the drafting thread's.
typedef struct {
    Drafter base;
    ModelDrafter inner;
} Spoiler;

static int spoiler_propose(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                           double *q, DraftReport *report, Err *err) {
    Spoiler *s = (Spoiler *)self;
    const int rc = s->inner.base.propose(&s->inner.base, context, n, request, tree, q, report, err);
    ((float *)s->inner.model->norm_f.gamma)[0] = NAN;
    return rc;
}

static int spoiler_draft_ahead(Drafter *self, const int *context, int n, int depth, Err *err) {
    Spoiler *s = (Spoiler *)self;
    return s->inner.base.draft_ahead(&s->inner.base, context, n, depth, err);
}

static void spoiler_rollback(Drafter *self, int n, const int *path, int n_path) {
    Spoiler *s = (Spoiler *)self;
    s->inner.base.rollback(&s->inner.base, n, path, n_path);
}

// The drafting thread's error ends the generation with its message, as the caller's own would.
TEST(pipeline_reports_the_drafting_threads_error) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const float gain = pair.draft.norm_f.gamma[0];
    const SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 3,
                               .max_tokens = 16, .eos_id = -1, .pipeline = PIPELINE_ON};
    Spoiler s = {.base = {.propose = spoiler_propose, .rollback = spoiler_rollback,
                          .draft_ahead = spoiler_draft_ahead}};
    Err err;
    CHECK(model_drafter_init(&s.inner, &pair.draft, &params, 0.0f, &err) == 0, "%s", err.msg);
    const int prompt[] = {3, 1, 4, 1, 5};
    int out[16], n_out;
    SpecStats stats;
    const int rc = speculative_generate(&pair.target, &s.base, prompt, 5, &params, out, &n_out, &stats, &err);
    CHECK(rc == -1 && strstr(err.msg, "the draft model produced a NaN or infinite logit"), "rc %d, %s", rc,
          rc ? err.msg : "no error");
    model_drafter_free(&s.inner);
    ((float *)pair.draft.norm_f.gamma)[0] = gain;
    model_pair_close(&pair);
}
