// test_gamma_policy.c — γ auto's choice between the lookup's runs, the draft model's drafts and plain decoding
// (policy.c, policy_choose), on a scripted drafter whose drafts are right or wrong by construction: greedy, the
// target's own output is known beforehand, so a draft is right when it is that output's next token.
//
//   - the lookup drafter proposes as much of its run as the policy asks for its match length, and tells the policy
//     what it found and did not propose;
//   - alone, the lookup proposes its first run on the prior (in place of plain decoding a run costs only its
//     verification's extra tokens); α is learned per match length: runs after the right-copying length are
//     proposed, the wrong-copying length's soon stop being;
//   - beside a draft model whose drafts are right, a run takes the model's place only after the acceptance of 4 first
//     drafts has been learned, from the rounds in which it was not proposed too: a wrong run is proposed at most once
//     (a match length not yet seen is judged by the lookup's other lengths), the model drafts in every other such
//     round, and right runs come to be proposed;
//   - under rejection sampling at a temperature, the cost model knows the target's threads: a draft step costs
//     more against the target at 16 threads than at 1 or 2, and a draft that pays on one thread does not on 16;
//     the shipped pair's plan shortens from γ = 3 on 1 and 2 threads to 2 on 16;
//   - greedy, a verification measured cheaper is planned deeper; at a temperature the measurements change nothing;
//   - greedy, the first plain round's time (a cold step) is not t_target(1): a second plain round's replaces it
//     before anything is drafted; and a draft that promises less than DRAFT_MARGIN over plain decoding is not made,
//     nor one below the cost model's break-even, however cheap the measured verification (the shipped pair's ≈ 0.18);
//   - a useless draft, every draft rejected (scripted outcomes): greedy, auto measures with 1 draft, drafts once
//     more and decodes plainly, probing with one draft after 8, 16, 32, 64 plain rounds (a kept probe starts the
//     waits over, and a kept probe is followed by another until drafting pays), the same when plain steps are timed
//     slower than verifications; at temperature 1, planned by the cost model, it stops after two drafting rounds of
//     one draft (the first drafting round of any plan drafts one: α is the prior's guess) and probes alike;
//   - greedy, every draft kept, one verification timed 4 plain steps does not hold the plan at γ = 1: priced by
//     one line through every count's readings, it goes deep in the rounds after it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "model/model.h"
#include "speculative/policy.h"
#include "random_checkpoint.h"
#include "speculative/speculative.h"

// The lookup drafter asked for part of its run, or none of it; either way it records the whole run it found.
TEST(speculative_lookup_proposes_what_the_policy_asks) {
    LookupDrafter d;
    Err err;
    CHECK(lookup_drafter_init(&d, 1, 4, &err) == 0, "%s", err.msg);
    DraftTree tree;
    DraftReport report;
    DraftRequest request = {.shape = {4, 1}};  // a chain
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) request.lookup_gamma[m] = GAMMA_MAX;
    const int text[] = {1, 2, 3, 9, 1, 2, 3, 7, 5, 1, 2, 3};  // "1 2 3" ends the text: a match of 3
    request.lookup_gamma[3] = 2;
    CHECK(d.base.propose(&d.base, text, 12, &request, &tree, NULL, &report, &err) == 0 && tree.n == 2 &&
              !tree.node[1].q && tree.parent[1] == 0, "two of the run, a chain of one-hot drafts");
    CHECK(report.match_length == 3 && report.run_proposed && report.n_run == GAMMA_MAX && tree.node[1].token == 5,
          "match %d, run of %d", report.match_length, report.n_run);
    request.lookup_gamma[3] = 0;
    CHECK(d.base.propose(&d.base, text, 12, &request, &tree, NULL, &report, &err) == 0 && tree.n == 0,
          "none of the run");
    CHECK(report.match_length == 3 && !report.run_proposed && report.run[0] == 7 && report.run[1] == 5 &&
              report.run[2] == 1 && report.run[5] == 7, "the run found, not proposed: %d %d %d .. %d", report.run[0],
          report.run[1], report.run[2], report.run[5]);
    // A tree: the run of the longest match is its first branch, as deep as asked for that match; the branches of
    // shorter matches ("3" before 9) are as deep, and there are none when the run is not proposed.
    const int branching[] = {1, 2, 3, 7, 5, 3, 9, 1, 2, 3};
    d.base.rollback(&d.base, 0, NULL, 0);  // a new text
    request.shape = (TreeShape){4, 2};
    request.lookup_gamma[3] = 1;
    CHECK(d.base.propose(&d.base, branching, 10, &request, &tree, NULL, &report, &err) == 0 && tree.n == 2 &&
              tree.node[0].token == 7 && tree.node[1].token == 9 && tree.parent[1] == -1 && report.run_proposed,
          "a tree of depth 1: %d nodes", tree.n);
    request.lookup_gamma[3] = 0;
    CHECK(d.base.propose(&d.base, branching, 10, &request, &tree, NULL, &report, &err) == 0 && tree.n == 0 &&
              report.match_length == 3 && report.run[0] == 7, "the run not proposed: no tree");
    const int longer[] = {1, 2, 3, 4, 5, 8, 1, 2, 3, 4, 5};  // a match of 5 counts as LOOKUP_MATCH_SLOTS − 1 long
    lookup_drafter_free(&d);
    CHECK(lookup_drafter_init(&d, 1, 6, &err) == 0, "%s", err.msg);
    request.shape = (TreeShape){4, 1};
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) request.lookup_gamma[m] = m == LOOKUP_MATCH_SLOTS - 1 ? 3 : 0;
    CHECK(d.base.propose(&d.base, longer, 11, &request, &tree, NULL, &report, &err) == 0 && tree.n == 3 &&
              report.match_length == 5 && tree.node[0].token == 8, "a match of %d, %d proposed", report.match_length,
          tree.n);
    lookup_drafter_free(&d);
}

enum { N_PROMPT = 6, N_NEW = 400, V = 97 };
static const float NEAR_GREEDY = 0.001f;

// A scripted drafter. Before the token at index j of the new text it "finds" a lookup run after a match of
// RIGHT_MATCH tokens when j is even, whose tokens are the target's own output (kept greedily), and after a match of
// WRONG_MATCH tokens when j is odd, whose tokens are never the target's; it proposes as much of the run as the
// policy asks (lookup_take), as a chain. With a model (step_cost > 0) it drafts a chain of the target's own tokens
// otherwise, with one-hot q rows. It counts what it was asked and did.
enum { RIGHT_MATCH = 3, WRONG_MATCH = 1 };
typedef struct {
    Drafter base;
    const int *expect;      // [N_NEW]: the target's greedy output
    int found[2], proposed[2];  // lookup runs found and proposed: [0] wrong, [1] right
    int first_found_proposed;   // the first run found was proposed
    int proposed_late[2];       // runs proposed in the second half of the text
    int model_drafted;          // tokens
    int model_instead;          // rounds in which a wrong run was found and the model drafted
} Script;

static int script_propose(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                          double *q, DraftReport *report, Err *err) {
    (void)context, (void)err;
    Script *s = (Script *)self;
    const int j = n - N_PROMPT;
    const bool right = j % 2 == 0;
    for (int i = 0; i < GAMMA_MAX; i++) {
        const int x = j + i < N_NEW ? s->expect[j + i] : 0;
        report->run[i] = right ? x : (x + 1) % V;
    }
    report->calls = 0;
    const int take = lookup_take(request, report, right ? RIGHT_MATCH : WRONG_MATCH, GAMMA_MAX, request->shape.depth);
    lookup_tree(tree, &report->run, 1, take);
    if (s->found[0] + s->found[1] == 0) s->first_found_proposed = take > 0;
    s->found[right]++;
    s->proposed[right] += take > 0;
    s->proposed_late[right] += take > 0 && j >= N_NEW / 2;
    if (take > 0 || self->step_cost == 0) return 0;
    const int k = request->shape.depth < request->model_gamma ? request->shape.depth : request->model_gamma;
    for (int i = 0; i < k; i++) {
        const int x = j + i < N_NEW ? s->expect[j + i] : 0;
        double *q_row = q + (size_t)i * V;
        memset(q_row, 0, sizeof(double) * V);
        q_row[x] = 1.0;
        tree->node[i] = tree_drawn_child(q_row, x, false, NULL, 0, V, NULL);
        tree->parent[i] = i - 1;
    }
    tree->n = k;
    s->model_drafted += k;
    s->model_instead += !right && k > 0;
    report->calls = k;
    return 0;
}

static void script_rollback(Drafter *self, int n, const int *path, int n_path) {
    (void)self, (void)n, (void)path, (void)n_path;
}

// Generation of N_NEW tokens after a fixed prompt by the target alone (script NULL) or with the script, at a
// temperature low enough that the target's greedy token has probability ≈ 1 at every position: a draft of it is kept
// (with probability p(x) ≈ 1), any other token is not. Sampling (under rejection) makes γ auto plan with the fixed
// cost model (spec_forward_cost), so the policy's choices do not depend on timings; the seed is fixed.
static void generate(Model *target, Script *script, float temperature, int *out, SpecStats *stats) {
    const int prompt[N_PROMPT] = {3, 14, 15, 92, 65, 35};
    SpecParams params = {.sampling = {.temperature = temperature, .top_p = 1}, .policy = GAMMA_AUTO, .seed = 1,
                         .max_tokens = N_NEW, .eos_id = -1};
    Err err;
    int n_out = 0;
    CHECK(speculative_generate(target, script ? &script->base : NULL, prompt, N_PROMPT, &params, out, &n_out, stats,
                               &err) == 0, "%s", err.msg);
    CHECK(n_out == N_NEW, "%d tokens", n_out);
}

static void with_target(void (*body)(Model *target)) {
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/specdec-policy-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    const RandomCheckpoint spec = {.n_layer = 2, .n_embd = 32, .n_head = 4, .vocab_size = V, .n_positions = 512,
                                   .scale = 0.3f, .seed = 11};
    Err err;
    ThreadPool *pool = pool_create(1, &err);
    Model target;
    CHECK(pool && random_checkpoint_write(dir, &spec, &err) == 0 && model_load(&target, dir, pool, &err) == 0, "%s",
          err.msg);
    body(&target);
    model_free(&target);
    pool_free(pool);
    random_checkpoint_remove(dir);
}

static Script script_for(const int *expect, double step_cost) {
    return (Script){.base = {.propose = script_propose, .rollback = script_rollback, .has_lookup = true,
                             .step_cost = step_cost},
                    .expect = expect};
}

static void lookup_alone(Model *target) {
    int expect[N_NEW], got[N_NEW];
    SpecStats stats;
    generate(target, NULL, 0, expect, &stats);
    Script script = script_for(expect, 0);
    generate(target, &script, NEAR_GREEDY, got, &stats);
    int same = 0;
    while (same < N_NEW && got[same] == expect[same]) same++;
    CHECK(same == N_NEW, "the greedy output up to token %d only", same);
    printf("    right runs %d of %d proposed, wrong runs %d of %d (%d in the second half); %.1f tokens per round\n",
           script.proposed[1], script.found[1], script.proposed[0], script.found[0], script.proposed_late[0],
           (double)N_NEW / stats.rounds);
    CHECK(script.first_found_proposed, "the first run found, in place of plain decoding, was not proposed");
    CHECK(script.proposed[1] * 4 >= script.found[1] * 3, "right runs: %d of %d proposed", script.proposed[1],
          script.found[1]);
    CHECK(script.proposed[0] * 2 < script.found[0] && script.proposed_late[0] == 0,
          "wrong runs: %d of %d proposed, %d in the second half", script.proposed[0], script.found[0],
          script.proposed_late[0]);
    CHECK(stats.accepted == stats.lookup_accepted && stats.draft_calls == 0, "lookup drafts only");
}

// Lookup alone: the policy learns which match length copies right, and proposes those runs only.
TEST(speculative_auto_learns_lookup_acceptance_per_match_length) { with_target(lookup_alone); }

static void beside_a_right_model(Model *target) {
    int expect[N_NEW], got[N_NEW];
    SpecStats stats;
    generate(target, NULL, 0, expect, &stats);
    Script script = script_for(expect, 0.05 * spec_forward_cost(target, 1, 1));  // c = 0.05
    generate(target, &script, NEAR_GREEDY, got, &stats);
    int same = 0;
    while (same < N_NEW && got[same] == expect[same]) same++;
    CHECK(same == N_NEW, "the greedy output up to token %d only", same);
    printf("    right runs %d of %d proposed, wrong runs %d of %d (the model drafted in %d of those rounds)\n",
           script.proposed[1], script.found[1], script.proposed[0], script.found[0], script.model_instead);
    CHECK(script.proposed[0] <= 1, "%d wrong runs proposed in place of the model's right drafts", script.proposed[0]);
    // Right runs, all free where the model's drafts cost, come to pay more than the model's only once the policy has
    // seen, from the rounds the model drafted in, that their later tokens are kept too.
    CHECK(script.proposed[1] * 2 >= script.found[1], "right runs: %d of %d proposed", script.proposed[1],
          script.found[1]);
    CHECK(script.model_instead + script.proposed[0] == script.found[0],
          "the model drafted in %d of the %d rounds of a wrong run", script.model_instead, script.found[0]);
}

// Beside a draft model whose drafts are kept, the lookup's wrong runs are not proposed (once at most, judged by the
// right runs' length before its own is seen), its right runs are: it learns both from the rounds it did not propose
// in.
TEST(speculative_auto_lookup_never_displaces_a_better_model) { with_target(beside_a_right_model); }

// The plan at temperature 1 under rejection sampling (policy_init, policy_choose) for a draft whose step costs 0.08
// of the target's one-thread forward, with the target on 1, 2 and 16 threads: the modelled c grows with the threads
// as the target's weight stream speeds up (16^0.72 / 2^0.72 = 4.4 between 2 and 16, less the rows' sampling, which
// does not), and the prior α = 0.6 pays for drafting on 1 and 2 threads, not on 16.
static void model_knows_threads(Model *target) {
    const SpecParams params = {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = 64,
                               .eos_id = -1};
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const int threads[] = {1, 2, 16};
    double c[3];
    int depth[3];
    for (int i = 0; i < 3; i++) {
        target->max_threads = threads[i];
        GammaState g;
        policy_init(&g, target, &drafter, &params);
        CHECK(g.modelled, "temperature 1, rejection, auto: not planned with the cost model");
        c[i] = g.model_draft_step / g.model_target[1];
        depth[i] = policy_choose(&g, &params, &drafter).shape.depth;
    }
    printf("    modelled c: %.3f, %.3f, %.3f at 1, 2, 16 threads; γ %d, %d, %d\n", c[0], c[1], c[2], depth[0],
           depth[1], depth[2]);
    CHECK(c[0] < c[1] && c[2] > 3 * c[1], "modelled c %.3f, %.3f, %.3f at 1, 2, 16 threads", c[0], c[1], c[2]);
    CHECK(depth[0] > 0 && depth[1] > 0 && depth[2] == 0, "γ %d, %d, %d at 1, 2, 16 threads", depth[0], depth[1],
          depth[2]);
    target->max_threads = 1;
}

TEST(speculative_auto_model_knows_threads) { with_target(model_knows_threads); }

// The plan the shipped pair gets at temperature 1 under rejection sampling, with α = 0.66 (its acceptance there, the
// bench's latest run) and its draft in q8 (the default), for the target on 1, 2 and 16 threads: the modelled c grows
// with the threads and γ shortens from 3 to 2 on 16, where drafting is still planned (docs/performance.md's
// prediction for 16 threads starts from this γ).
// The shipped pair, its draft in q8 (the default), for a body planning at temperature 1 under rejection sampling.
static void with_shipped_pair(void (*body)(Model *target, const Drafter *drafter, const SpecParams *params)) {
    Err err;
    ThreadPool *pool = pool_create(1, &err);
    Model target, draft;
    CHECK(pool && model_load(&target, "weights/pystd/target", pool, &err) == 0, "%s", err.msg);
    CHECK(model_load_quantized(&draft, "weights/pystd/draft", pool, QUANT_Q8, &err) == 0, "%s", err.msg);
    const SpecParams params = {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = 64,
                               .eos_id = -1};
    ModelDrafter drafter;
    CHECK(model_drafter_init(&drafter, &draft, &params, 0, &err) == 0, "%s", err.msg);
    body(&target, &drafter.base, &params);
    model_drafter_free(&drafter);
    model_free(&draft);
    model_free(&target);
    pool_free(pool);
}

static void shipped_pair_by_threads(Model *target, const Drafter *drafter, const SpecParams *params) {
    const int threads[] = {1, 2, 16}, want[] = {3, 3, 2};
    for (int i = 0; i < 3; i++) {
        target->max_threads = threads[i];
        GammaState g;
        policy_init(&g, target, drafter, params);
        for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.66, g.n_alpha[source] = 1;
        const int depth = policy_choose(&g, params, drafter).shape.depth;
        printf("    %2d threads: modelled c %.3f, γ %d\n", threads[i], g.model_draft_step / g.model_target[1], depth);
        CHECK(depth == want[i], "%d threads: γ %d, want %d", threads[i], depth, want[i]);
    }
}

TEST(speculative_auto_plans_the_shipped_pair_by_threads) { with_shipped_pair(shipped_pair_by_threads); }

// Greedy, γ auto plans from the measured times: with the same α and draft step, a verification of T tokens that
// costs 1 + 0.5 (T − 1) decode steps (as AVX2's quantized kernels did) is planned shallower than one that costs
// 1 + 0.03 (T − 1) (one that streams the weights once for all rows). At temperature 1 under rejection sampling the
// plan comes from the cost model of sizes and threads, so the same measurements change nothing: a seed gives the
// same text on every machine.
static void measured_verification_sets_depth(Model *target) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const double slopes[] = {0.5, 0.03};
    int depth[2][2];  // [temperature 0, 1][slope]
    for (int hot = 0; hot < 2; hot++) {
        const SpecParams params = {.sampling = {.temperature = (float)hot, .top_p = 1}, .policy = GAMMA_AUTO,
                                   .max_tokens = 64, .eos_id = -1};
        for (int s = 0; s < 2; s++) {
            GammaState g;
            policy_init(&g, target, &drafter, &params);
            for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.7, g.n_alpha[source] = 1;
            g.draft_step = 0.05;
            g.draft_step_known = true;
            for (int T = 1; T < T_SLOTS; T++) g.target[T] = 1.0 + slopes[s] * (T - 1), g.target_readings[T] = 1;
            g.largest_measured = T_SLOTS - 1;
            depth[hot][s] = policy_choose(&g, &params, &drafter).shape.depth;
        }
    }
    printf("    greedy: γ %d where T costs 0.5 more a token, %d where 0.03; temperature 1: γ %d and %d\n", depth[0][0],
           depth[0][1], depth[1][0], depth[1][1]);
    CHECK(depth[0][0] >= 1 && depth[0][1] > depth[0][0], "greedy: γ %d and %d", depth[0][0], depth[0][1]);
    CHECK(depth[1][0] == depth[1][1], "temperature 1: γ %d and %d, from the same model", depth[1][0], depth[1][1]);
}

TEST(speculative_auto_measured_cheap_verification_plans_deeper) { with_target(measured_verification_sets_depth); }

// Greedy decoding with γ auto, planned from measured times.
static const SpecParams GREEDY_AUTO = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_AUTO,
                                       .max_tokens = 64, .eos_id = -1};

// Greedy, measuring: round 1 is plain and takes 4 (as the shipped target's first step after its prompt did: 4 times a
// warm one), round 2 drafts 1 to measure a draft step and its forward of 2 rows takes 1.2: t_target(1) is then 1.2
// at most; the next plain round's time (1.0) replaces it, the cold step forgotten.
static void cold_first_step_forgotten(Model *target) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const SpecParams params = GREEDY_AUTO;
    GammaState g;
    policy_init(&g, target, &drafter, &params);
    CHECK(policy_choose(&g, &params, &drafter).shape.depth == 0, "round 1 is not plain");
    policy_learn(&g, &params, &(Round){.target_seconds = 4.0}, NULL);
    const int depth = policy_choose(&g, &params, &drafter).shape.depth;
    CHECK(depth == 1, "round 2 drafts %d to measure a draft step, not 1", depth);
    Round measuring = {.tree = {.n = 1}, .depth = 1, .target_seconds = 1.2, .draft_calls = 1, .draft_seconds = 0.01};
    policy_learn(&g, &params, &measuring, NULL);
    CHECK(g.target[1] == 1.2, "t_target(1) = %g after a cold step of 4 and a forward of 2 rows in 1.2", g.target[1]);
    policy_learn(&g, &params, &(Round){.target_seconds = 1.0}, NULL);
    CHECK(g.target[1] == 1.0, "t_target(1) = %g after a warm plain step of 1", g.target[1]);
}

TEST(speculative_auto_forgets_the_cold_first_step) { with_target(cold_first_step_forgotten); }

// The depth greedy γ auto chooses with every source's α at `alpha`, a draft step of 0.01 and a verification of T
// tokens measured at 1 + slope (T − 1) plain steps.
static int measured_choice(Model *target, const Drafter *drafter, double alpha, double slope) {
    const SpecParams params = GREEDY_AUTO;
    GammaState g;
    policy_init(&g, target, drafter, &params);
    for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = alpha;
    g.draft_step = 0.01;
    g.draft_step_known = true;
    for (int T = 1; T < T_SLOTS; T++) g.target[T] = 1.0 + slope * (T - 1), g.target_readings[T] = 1;
    g.largest_measured = T_SLOTS - 1;
    return policy_choose(&g, &params, drafter).shape.depth;
}

// Greedy, measured, a draft step 0.01 of a plain step. A verification measured as cheap as a plain step: α = 0.04
// promises γ = 1 1.04 / 1.01 ≈ 1.03 times plain decoding's rate, under DRAFT_MARGIN (1.05): plain decoding; α = 0.1
// promises 1.09 by the measurements, but the cost model (this target's rows and the draft's step by sizes) puts
// drafting's break-even above it: plain decoding; α = 0.4: drafted. A verification measured at 0.35 of a step a
// further token: α = 0.4 promises γ = 1 1.4 / 1.36 ≈ 1.03, under the margin: plain decoding.
static void drafting_needs_a_margin(Model *target) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const int useless = measured_choice(target, &drafter, 0.04, 0), noise = measured_choice(target, &drafter, 0.1, 0);
    const int good = measured_choice(target, &drafter, 0.4, 0), dear = measured_choice(target, &drafter, 0.4, 0.35);
    printf("    free verification: γ %d at α 0.04, %d at 0.1, %d at 0.4; 0.35 a token: γ %d at α 0.4\n", useless, noise,
           good, dear);
    CHECK(useless == 0 && noise == 0 && good >= 1 && dear == 0, "γ %d, %d, %d, %d: want 0, 0, ≥ 1, 0", useless, noise,
          good, dear);
}

TEST(speculative_auto_drafts_only_past_the_margin) { with_target(drafting_needs_a_margin); }

// ---- a useless draft: when auto stops drafting, and when it probes -----------------------------------------------

enum { SCRIPTED_ROUNDS = 160, MOST_DRAFTING = 16 };

// The seconds a scripted round's forwards take: a plain round's; a verification of T = k + 1 rows, verify + per_row k.
typedef struct {
    double plain, verify, per_row;
} Timing;

// What a measured plan sees on AVX2 for the shipped target: a verification of T rows 1 + 0.15 (T − 1) plain steps.
static const Timing AVX2_TIMES = {1.0, 1.0, 0.15};
// ... and when the machine's speed moves under it: plain rounds timed 1.3 (another process ran, or the two threads
// were placed farther apart), verifications timed as if their rows cost nothing.
static const Timing NOISY_TIMES = {1.3, 1.0, 0.0};

// Plays SCRIPTED_ROUNDS rounds of γ auto against a scripted outcome: every draft is rejected, with β = beta (what α
// learns of it), except a probe in round `kept_round` (0: none), whose one draft is kept with β = 1, and every draft
// from round `easy_from` on (0: none), all kept. The forwards take `times`, a draft step 0.05. Writes the rounds
// that drafted (1-based) and their depths; returns how many.
static int scripted_rounds(const GammaState *start, const SpecParams *params, const Drafter *drafter, Timing times,
                           double beta, int kept_round, int easy_from, int *rounds, int *depths) {
    GammaState g = *start;
    int n = 0;
    for (int round = 1; round <= SCRIPTED_ROUNDS; round++) {
        const int k = policy_choose(&g, params, drafter).shape.depth;
        const bool easy = easy_from > 0 && round >= easy_from, kept = easy || (round == kept_round && k == 1);
        Round r = {.tree = {.n = k}, .depth = k, .width = 1, .n_verified = easy ? k : k > 0,
                   .n_accepted = kept ? k : 0, .learned = {kept ? 1.0 : beta},
                   .target_seconds = k ? times.verify + times.per_row * k : times.plain, .draft_calls = k,
                   .draft_seconds = 0.05 * k};
        for (int i = 1; easy && i < k; i++) r.learned[i] = 1.0;
        policy_learn(&g, params, &r, NULL);
        if (k > 0 && n < MOST_DRAFTING) rounds[n] = round, depths[n++] = k;
    }
    return n;
}

// Checks the rounds that drafted against the expected ones.
static void check_drafting_rounds(const char *what, const int *rounds, const int *depths, int n, const int *want,
                                  int n_want) {
    printf("    %s: drafted in rounds", what);
    for (int i = 0; i < n; i++) printf(" %d (γ %d)", rounds[i], depths[i]);
    printf("\n");
    CHECK(n == n_want, "%s: %d drafting rounds, want %d", what, n, n_want);
    for (int i = 0; i < n; i++) CHECK(rounds[i] == want[i], "%s: drafting round %d is %d, want %d", what, i + 1,
                                      rounds[i], want[i]);
}

// Greedy, measured, every draft rejected: round 1 is plain, round 2 drafts 1 to measure a draft step (α 0.6 → 0.3:
// the prior counts as one draft), round 3 drafts one (γ = 1 promises 1.3 / 1.2 = 1.08 > DRAFT_MARGIN; α → 0.2,
// which promises 1.0): then plain decoding, with a probe of one draft after 8 plain rounds, then after 16, 32, 64
// (each rejected probe doubles the wait). A kept probe (round 27) lifts α to 0.32: two rounds draft one token until
// α is 0.23 again, and the probes start over from 8 plain rounds. Timed noisily (NOISY_TIMES), by the measurements
// alone γ = 1 promised more than DRAFT_MARGIN until α fell below 0.09, and the draft drafted in rounds 2, 3, 4, 5,
// 6, 8, 16, 32, 64 and 128; the cost model's break-even stops it where AVX2's times do: the same rounds draft (round
// 3 two tokens, its rows timed free). (Measuring with 2 drafts, the rounds were the same.) When the text turns easy
// after the draft has been judged useless (every draft kept from round 100), the probe of round 123 is kept and each
// round after it drafts: kept probes follow one another (rounds 124 to 127, where the plan still said plain decoding:
// α 0.1 → 0.23 → 0.33 → 0.40 → 0.46 → 0.51, the prior counting as one draft) until α pays for drafting, then
// deeper (γ 2 in round 128, 6 by round 133) — where a kept probe waited 8 plain rounds for the next, and drafting
// resumed in round 131.
static void useless_draft_greedy(Model *target) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const SpecParams params = GREEDY_AUTO;
    GammaState g;
    policy_init(&g, target, &drafter, &params);
    int rounds[MOST_DRAFTING], depths[MOST_DRAFTING];
    int n = scripted_rounds(&g, &params, &drafter, AVX2_TIMES, 0, 0, 0, rounds, depths);
    const int rejected[] = {2, 3, 11, 27, 59, 123};
    check_drafting_rounds("every draft rejected", rounds, depths, n, rejected, 6);
    CHECK(depths[0] == 1 && depths[1] == 1 && depths[2] == 1, "γ %d, %d, %d", depths[0], depths[1], depths[2]);
    n = scripted_rounds(&g, &params, &drafter, AVX2_TIMES, 0, 27, 0, rounds, depths);
    const int one_kept[] = {2, 3, 11, 27, 28, 29, 37, 53, 85, 149};
    check_drafting_rounds("the probe of round 27 kept", rounds, depths, n, one_kept, 10);
    n = scripted_rounds(&g, &params, &drafter, NOISY_TIMES, 0, 0, 0, rounds, depths);
    check_drafting_rounds("every draft rejected, timed noisily", rounds, depths, n, rejected, 6);
    n = scripted_rounds(&g, &params, &drafter, AVX2_TIMES, 0, 0, 100, rounds, depths);
    const int easy_late[] = {2, 3, 11, 27, 59, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133};
    check_drafting_rounds("every draft kept from round 100", rounds, depths, n, easy_late, MOST_DRAFTING);
}

TEST(speculative_auto_useless_draft_probes_back_off) { with_target(useless_draft_greedy); }

// The shipped pair greedy, the target on 2 threads, a verification measured as cheap as a plain step: the cost
// model's break-even is α ≈ 0.18 (a draft step 0.032 of the target's, a further row 0.094: γ = 1 promises
// DRAFT_MARGIN there) — α = 0.15 decodes plainly, α = 0.22 drafts, whatever the measurements promise.
static void shipped_pair_break_even(Model *target, const Drafter *drafter, const SpecParams *params) {
    (void)params;
    target->max_threads = 2;
    const int below = measured_choice(target, drafter, 0.15, 0), above = measured_choice(target, drafter, 0.22, 0);
    printf("    greedy, free verification: γ %d at α 0.15, %d at 0.22\n", below, above);
    CHECK(below == 0 && above >= 1, "γ %d at α 0.15 (want 0), %d at 0.22 (want ≥ 1)", below, above);
}

TEST(speculative_auto_measured_plan_needs_the_models_break_even) { with_shipped_pair(shipped_pair_break_even); }

// At temperature 1 under rejection sampling (the modelled plan: the measured times change nothing), the shipped
// target on 2 threads with a useless draft, every draft rejected with β = Σ min(p, q) = 0.07 (a random draft's at
// temperature 1, the speculative suite's useless-draft table): round 1 drafts one on the prior α = 0.6 (the
// first drafting round drafts one: the cost model's γ on the prior is 3), whose rejection teaches α 0.6 + (0.07 − 0.6) / 1.5 = 0.25 (the prior counts as half a draft where α learns overlaps);
// round 2 drafts one, α → 0.18, and γ = 1 no longer promises DRAFT_MARGIN: plain decoding, with probes after 8, 16,
// 32 and 64 plain rounds.
static void useless_draft_sampled(Model *target, const Drafter *drafter, const SpecParams *params) {
    target->max_threads = 2;
    GammaState g;
    policy_init(&g, target, drafter, params);
    int rounds[MOST_DRAFTING], depths[MOST_DRAFTING];
    const int n = scripted_rounds(&g, params, drafter, AVX2_TIMES, 0.07, 0, 0, rounds, depths);
    const int want[] = {1, 2, 10, 26, 58, 122};
    check_drafting_rounds("temperature 1, every draft rejected", rounds, depths, n, want, 6);
    CHECK(depths[0] == 1 && depths[1] == 1, "γ %d, %d", depths[0], depths[1]);
}

TEST(speculative_auto_useless_draft_probes_back_off_sampled) { with_shipped_pair(useless_draft_sampled); }

// ---- one slow reading: a forward timed slow once must not pin the plan shallow ---------------------------------

enum { SLOW_READING_ROUNDS = 24 };

// The shipped pair greedy, the target on 2 threads, every draft kept (text the draft copies whole), a verification
// of T rows timed at 1 + 0.1 (T − 1) plain steps (the shipped target's on AVX2: t(8) / t(1) ≈ 1.7) and a draft
// step at 0.05 — but the first verification of more than two rows timed at 4 steps, once (a preemption, or the
// host's L3 taken by another guest). Priced by each count's own mean, that count kept its 4 steps, the line through
// it priced every deeper count as dear, and the plan drafted γ = 1 in the 21 rounds after it, kept whole, timing no
// deeper count again (as an AVX2 run of the shipped pair did after one slow t(4): 20 fully kept rounds at γ = 1).
// Priced by one line through the readings (policy.c: policy_target_time), the slow reading is one among the rest:
// in the rounds after it at most 2 draft γ ≤ 1, and the last drafts γ ≥ 4.
static void slow_reading_greedy(Model *target, const Drafter *drafter, const SpecParams *params) {
    (void)params;
    target->max_threads = 2;
    const SpecParams greedy = GREEDY_AUTO;
    GammaState g;
    policy_init(&g, target, drafter, &greedy);
    int depths[SLOW_READING_ROUNDS], slow_round = 0, shallow_after = 0;
    for (int round = 1; round <= SLOW_READING_ROUNDS; round++) {
        const int k = policy_choose(&g, &greedy, drafter).shape.depth;
        const bool slow = slow_round == 0 && k >= 2;
        if (slow) slow_round = round;
        else if (slow_round > 0 && k <= 1) shallow_after++;
        Round r = {.tree = {.n = k}, .depth = k, .width = 1, .n_verified = k, .n_accepted = k,
                   .target_seconds = slow ? 4.0 : 1.0 + 0.1 * k, .draft_calls = k, .draft_seconds = 0.05 * k};
        for (int i = 0; i < k; i++) r.learned[i] = 1.0;
        policy_learn(&g, &greedy, &r, NULL);
        depths[round - 1] = k;
    }
    printf("    every draft kept, the first verification of > 2 rows timed slow (round %d): γ", slow_round);
    for (int i = 0; i < SLOW_READING_ROUNDS; i++) printf(" %d", depths[i]);
    printf("\n");
    CHECK(slow_round > 0 && shallow_after <= 2 && depths[SLOW_READING_ROUNDS - 1] >= 4,
          "slow reading in round %d; %d rounds after it at γ ≤ 1, the last at γ %d", slow_round, shallow_after,
          depths[SLOW_READING_ROUNDS - 1]);
}

TEST(speculative_auto_one_slow_reading_does_not_pin_the_plan) { with_shipped_pair(slow_reading_greedy); }

// γ auto's greedy plan at α 0.7 beside the rest of a batch, `others`.
static int greedy_depth_beside(Model *target, const Drafter *drafter, BatchLoad others) {
    const SpecParams greedy = {.sampling = {.top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = 64, .eos_id = -1};
    GammaState g;
    policy_init(&g, target, drafter, &greedy);
    for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.7;
    g.others = others;
    return policy_choose(&g, &greedy, drafter).shape.depth;
}

// γ auto in a batch (GammaState.others, policy.h's rate_batch): greedy plans for the whole batch with the cost model
// — beside one sequence decoding plainly it drafts, and as the batch grows (more such sequences) its forward turns
// compute-bound, a draft row costs as much as a committed one and γ falls, to plain decoding beside 64. At
// temperature 1 under rejection sampling the request's own plan stands, whatever the batch.
static void batch_sets_depth(Model *target) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const int others[] = {1, 4, 16, 64};
    int depth[2][4];  // [temperature 0, 1][batch]
    for (int hot = 0; hot < 2; hot++) {
        const SpecParams params = {.sampling = {.temperature = (float)hot, .top_p = 1}, .policy = GAMMA_AUTO,
                                   .max_tokens = 64, .eos_id = -1};
        for (int i = 0; i < 4; i++) {
            GammaState g;
            policy_init(&g, target, &drafter, &params);
            for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.7, g.n_alpha[source] = 1;
            g.others = (BatchLoad){.sequences = others[i], .rows = others[i], .tokens = others[i]};
            depth[hot][i] = policy_choose(&g, &params, &drafter).shape.depth;
        }
    }
    // Beside a sequence that drafted 4 levels, drafting up to 4 levels adds no draft forward to the batch's (each
    // level's serves both): only its rows. So it drafts deeper than beside a sequence that put the same rows and
    // tokens into the forward without a draft forward to share.
    const BatchLoad drafting = {.sequences = 1, .rows = 5, .tokens = 3, .draft_forwards = 4, .drafting = 1},
                    undrafted = {.sequences = 1, .rows = 5, .tokens = 3};
    const int beside_drafting = greedy_depth_beside(target, &drafter, drafting),
              beside_undrafted = greedy_depth_beside(target, &drafter, undrafted);
    printf("    greedy beside a sequence of 5 rows and 3 tokens that drafted 4 levels: γ %d; that drafted none: γ %d\n",
           beside_drafting, beside_undrafted);
    CHECK(beside_drafting > beside_undrafted, "greedy: γ %d beside a sequence that drafted 4 levels, %d beside one "
          "that drafted none", beside_drafting, beside_undrafted);
    printf("    greedy: γ %d, %d, %d, %d beside 1, 4, 16, 64 sequences; temperature 1: γ %d, %d, %d, %d\n",
           depth[0][0], depth[0][1], depth[0][2], depth[0][3], depth[1][0], depth[1][1], depth[1][2], depth[1][3]);
    CHECK(depth[0][0] > 0 && depth[0][3] == 0, "greedy: γ %d beside 1 sequence, %d beside 64", depth[0][0],
          depth[0][3]);
    for (int i = 1; i < 4; i++) {
        CHECK(depth[0][i] <= depth[0][i - 1], "greedy: γ %d beside %d sequences, %d beside %d", depth[0][i],
              others[i], depth[0][i - 1], others[i - 1]);
        CHECK(depth[1][i] == depth[1][0], "temperature 1: γ %d beside %d sequences, %d beside 1", depth[1][i],
              others[i], depth[1][0]);
    }
}

TEST(speculative_auto_plans_for_the_batch) { with_target(batch_sets_depth); }

// The batch's draft forwards are a cost shared by the sequences that draft (policy.c: round_rate). A coupled
// sequence at temperature 1 (α 0.5) beside 7 that each drafted a level: the batch's forward 1 ms + 0.1 ms a row, a
// draft forward 0.8 ms. All 8 plain commit 8 tokens in 1.8 ms, all 8 drafting 12 in 0.8 + 2.6 ms — 4.4 tokens a ms
// against 3.5 — yet priced at its margin (the others' draft forward runs anyway) a draft looked worth its row:
// 11.4 tokens, 5% margin off, in 3.4 ms against a plain round's 11 in 3.3. Charged its share of the draft forward
// (1/8) it decodes plainly. Beside 7 that decoded plainly it does too (the draft forward its own).
static int coupled_depth_beside(Model *target, BatchLoad others) {
    const SpecParams coupled = {.sampling = {.temperature = 1, .top_p = 1}, .sampler = SAMPLER_COUPLED,
                                .policy = GAMMA_AUTO, .max_tokens = 64, .eos_id = -1};
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    RowTimes target_times = {0}, draft_times = {0};
    for (int rows = 4; rows <= 40; rows++) row_times_add(&target_times, rows, 1e-3 + rows * 1e-4);
    for (int rows = 1; rows <= 40; rows++) row_times_add(&draft_times, rows, 0.8e-3);
    GammaState g;
    policy_init(&g, target, &drafter, &coupled);
    for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.5, g.n_alpha[source] = 16;
    g.others = others;
    g.batch_costs = (BatchCosts){row_times_fit(&target_times), row_times_fit(&draft_times)};
    return policy_choose(&g, &coupled, &drafter).model_gamma;
}

static void batch_shares_draft_forwards(Model *target) {
    const int beside_drafting = coupled_depth_beside(target, (BatchLoad){.sequences = 7, .rows = 14, .tokens = 10,
                                                                          .draft_forwards = 1, .drafting = 7}),
              beside_plain = coupled_depth_beside(target, (BatchLoad){.sequences = 7, .rows = 7, .tokens = 7});
    printf("    coupled at α 0.5 beside 7 sequences that drafted a level: γ %d; beside 7 plain: γ %d\n",
           beside_drafting, beside_plain);
    CHECK(beside_drafting == 0 && beside_plain == 0, "γ %d beside 7 drafting, %d beside 7 plain: expected 0, 0",
          beside_drafting, beside_plain);
}

TEST(speculative_auto_batch_shares_draft_forwards) { with_target(batch_shares_draft_forwards); }

// The round of the first probe (a round of one draft) in `rounds` rounds of a greedy plan beside 64 sequences decoding
// plainly (plain decoding there: batch_sets_depth), whose drafter has read `read` of the committed tokens — the
// prompt's `prompt` tokens, then one a round — of a request for `rounds` tokens; 0: none.
static int first_probe(Model *target, int prompt, bool read, int rounds) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1)};
    const SpecParams greedy = {.sampling = {.top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = rounds, .eos_id = -1};
    GammaState g;
    policy_init(&g, target, &drafter, &greedy);
    g.others = (BatchLoad){.sequences = 64, .rows = 64, .tokens = 64};
    for (int round = 1; round <= rounds; round++) {
        g.unread = read ? 0 : prompt + round - 1;
        g.left = rounds - (round - 1);
        if (policy_choose(&g, &greedy, &drafter).shape.depth > 0) return round;
    }
    return 0;
}

// In a batch a drafter reads the prompt in its first draft forward (batch.c), and a greedy plan kept plain beside the
// batch probes (one draft after 8 plain rounds) only where the tokens still wanted are at least half the tokens the
// probe would read (policy.c: PROBE_READ_PER_TOKEN_LEFT): after a prompt of 100 tokens, a request for 32 never probes
// — its probe, the 8th round, would read 107 tokens with 25 left — one for 128 probes in its 8th round, and so does one
// for 32 whose drafter has read the text already.
static void batch_probes_pay_their_read(Model *target) {
    const int short_request = first_probe(target, 100, false, 32), long_request = first_probe(target, 100, false, 128),
              read = first_probe(target, 100, true, 32);
    printf("    the first probe beside 64 plain sequences, after a prompt of 100 tokens: round %d of 32, %d of 128, %d of "
           "32 with the text read\n", short_request, long_request, read);
    CHECK(short_request == 0 && long_request == 8 && read == 8, "first probes in rounds %d, %d, %d; expected none, 8, 8",
          short_request, long_request, read);
}

TEST(speculative_auto_batch_probes_pay_their_read) { with_target(batch_probes_pay_their_read); }

// row_times_fit: the least-squares fit through each row count's time — exact through times on a line, of no
// slope and no spread through one count.
TEST(speculative_row_times_fit_a_line) {
    RowTimes on_line = {0}, one = {0};
    for (int rows = 1; rows <= 40; rows += 3) row_times_add(&on_line, rows, 2e-3 + rows * 1e-4);
    row_times_add(&on_line, MEASURED_ROWS + 1, 1.0);  // (left out: more rows than kept)
    row_times_add(&one, 8, 5e-3);
    const RowFit line = row_times_fit(&on_line), single = row_times_fit(&one);
    CHECK(line.points == 14 && line.mean_rows == 20.5 && fabs(line.mean_seconds - (2e-3 + 20.5e-4)) < 1e-12 &&
              fabs(line.spread - 2047.5) < 1e-9 && fabs(line.slope - 1e-4) < 1e-12,
          "on a line: %d points, mean (%g, %g), spread %g, slope %g", line.points, line.mean_rows, line.mean_seconds,
          line.spread, line.slope);
    CHECK(single.points == 1 && single.mean_rows == 8 && single.mean_seconds == 5e-3 && single.spread == 0 &&
              single.slope == 0, "one count: %d points, slope %g", single.points, single.slope);
}

// γ auto in a batch prices its rows with what the batch measured of its forwards (BatchCosts), not with the cost
// model of sizes: beside 3 sequences decoding plainly, a greedy sequence drafts deep where the measured forward is
// nearly flat in its rows (a row 1% of the weights' stream), less where a row costs a tenth of it, and not at all
// where a row costs as much as the stream (compute-bound: a draft row as dear as a committed one); a measured draft
// forward as dear as the target's stops it too. At temperature 1 under rejection sampling the request's own plan
// stands whatever the batch measured.
// ... whose drafter would read `unread` committed tokens first, `left` tokens still wanted.
static int planned_depth_reading(Model *target, const Drafter *drafter, float temperature, int others,
                                 BatchCosts costs, int unread, int left) {
    const SpecParams params = {.sampling = {.temperature = temperature, .top_p = 1}, .policy = GAMMA_AUTO,
                               .max_tokens = 64, .eos_id = -1};
    GammaState g;
    policy_init(&g, target, drafter, &params);
    for (int source = 0; source < N_SOURCES; source++) g.alpha[source] = 0.8;
    g.others = (BatchLoad){.sequences = others, .rows = others, .tokens = others};
    g.batch_costs = costs;
    g.unread = unread;
    g.left = left;
    return policy_choose(&g, &params, drafter).shape.depth;
}

static int planned_depth(Model *target, const Drafter *drafter, float temperature, int others, BatchCosts costs) {
    return planned_depth_reading(target, drafter, temperature, others, costs, 0, 0);
}

static int depth_with_costs(Model *target, float temperature, int others, BatchCosts costs) {
    const Drafter drafter = {.step_cost = 0.08 * spec_forward_cost(target, 1, 1),
                             .row_cost = 0.01 * spec_forward_cost(target, 1, 1)};
    return planned_depth(target, &drafter, temperature, others, costs);
}

// A batch's forwards timed on the line fixed + R · per_row at the row counts from..to.
static RowFit timed(double fixed, double per_row, int from, int to) {
    RowTimes t = {0};
    for (int rows = from; rows <= to; rows++) row_times_add(&t, rows, fixed + rows * per_row);
    return row_times_fit(&t);
}

static void batch_costs_set_depth(Model *target) {
    const double stream = 1e-3;
    const RowFit draft = timed(0.05 * stream, 0, 1, 4), dear = timed(stream, 0, 1, 4), untimed = {0};
    const BatchCosts flat = {timed(stream, 0.01 * stream, 4, 36), draft},
                     tenth = {timed(stream, 0.1 * stream, 4, 36), draft},
                     steep = {timed(stream, stream, 4, 36), draft},
                     dear_draft = {timed(stream, 0.01 * stream, 4, 36), dear},
                     draft_unmeasured = {timed(stream, 0.01 * stream, 4, 36), untimed};
    const int d_flat = depth_with_costs(target, 0, 3, flat), d_tenth = depth_with_costs(target, 0, 3, tenth),
              d_steep = depth_with_costs(target, 0, 3, steep), d_dear = depth_with_costs(target, 0, 3, dear_draft),
              d_unmeasured = depth_with_costs(target, 0, 3, draft_unmeasured);
    printf("    greedy beside 3 plain sequences, a row %.2f, %.2f, %.2f of the stream: γ %d, %d, %d; a draft "
           "forward as dear as the target's: γ %d; the draft not yet timed: γ %d\n", 0.01, 0.1, 1.0, d_flat, d_tenth,
           d_steep, d_dear, d_unmeasured);
    CHECK(d_flat > d_tenth && d_tenth > 0 && d_steep == 0 && d_dear == 0 && d_unmeasured > 0,
          "greedy: γ %d, %d, %d by the row's cost, %d with a dear draft, %d with the draft untimed", d_flat, d_tenth,
          d_steep, d_dear, d_unmeasured);
    const int alone = depth_with_costs(target, 1, 3, (BatchCosts){0});
    const int hot[] = {depth_with_costs(target, 1, 3, flat), depth_with_costs(target, 1, 3, steep)};
    CHECK(hot[0] == alone && hot[1] == alone, "temperature 1: γ %d, %d with the batch's costs, %d without", hot[0],
          hot[1], alone);
}

TEST(speculative_auto_plans_with_the_batchs_measured_costs) { with_target(batch_costs_set_depth); }

// The measured line's slope leans on the cost model's until the row counts timed spread (policy.c: measured_line).
// The shipped pair on 2 threads, greedy beside 3 sequences decoding plainly: a batch that timed only 3, 4 and 5 rows
// — times whose noise makes a row look as dear as a whole forward of one — drafts, no deeper than the cost model (a
// line through those counts alone priced it plain decoding: the ninth session's regression); the same cost a row
// measured over 4..36 rows is believed: plain decoding. And three counts timed alike (a row for nothing) do not
// make it draft deeper than the model.
static void batch_slope_needs_spread(Model *target, const Drafter *drafter, const SpecParams *params) {
    target->max_threads = 2;
    const double stream = 1e-3;
    RowTimes noisy = {0}, free_rows = {0};
    for (int rows = 3; rows <= 5; rows++) row_times_add(&noisy, rows, (rows - 2) * stream);
    for (int rows = 3; rows <= 5; rows++) row_times_add(&free_rows, rows, 1.2 * stream);
    const RowFit untimed = {0};  // (the draft's forwards priced by the cost model's, scaled as the target's)
    const int by_model = planned_depth(target, drafter, 0, 3, (BatchCosts){untimed, untimed}),
              narrow = planned_depth(target, drafter, 0, 3, (BatchCosts){row_times_fit(&noisy), untimed}),
              wide = planned_depth(target, drafter, 0, 3, (BatchCosts){timed(0, stream, 4, 36), untimed}),
              flat = planned_depth(target, drafter, 0, 3, (BatchCosts){row_times_fit(&free_rows), untimed});
    GammaState g;
    policy_init(&g, target, drafter, params);
    printf("    the shipped pair beside 3 plain sequences (the cost model's row %.3f of its stream): γ %d by the "
           "model; a row as dear as a forward timed at 3..5 rows: γ %d, at 4..36: γ %d; no cost a row at 3..5: γ %d\n",
           (g.model_row_arithmetic + g.model_row_sampling) / g.model_stream, by_model, narrow, wide, flat);
    CHECK(by_model > 0 && narrow > 0 && narrow <= by_model && wide == 0 && flat == by_model,
          "γ %d by the model, %d timed at 3..5 rows, %d at 4..36, %d flat at 3..5", by_model, narrow, wide, flat);
}

TEST(speculative_auto_batch_slope_needs_spread) { with_shipped_pair(batch_slope_needs_spread); }

// DRAFT_MARGIN in a batch is on the sequence's own tokens (policy.c): the shipped pair on 2 threads, greedy beside 7
// sequences decoding plainly, a batch whose forwards were timed at 4..36 rows on t(R) = S + 0.03 S · R (16 rows
// 1.2 × 8) and its draft's at a twentieth of S — drafts, where a margin on the batch's whole rate kept it plain;
// the same beside 7 sequences at a row as dear as the stream decodes plainly.
static void batch_margin_is_the_sequences(Model *target, const Drafter *drafter, const SpecParams *params) {
    (void)params;
    target->max_threads = 2;
    const double stream = 50e-3;
    const RowFit draft = timed(stream / 20, 0, 1, 8);
    const int shallow = planned_depth(target, drafter, 0, 7, (BatchCosts){timed(stream, 0.03 * stream, 4, 36), draft}),
              steep = planned_depth(target, drafter, 0, 7, (BatchCosts){timed(stream, stream, 4, 36), draft});
    printf("    the shipped pair beside 7 plain sequences, a row 0.03 of the stream: γ %d; a row as dear as it: γ %d\n",
           shallow, steep);
    CHECK(shallow > 0 && steep == 0, "γ %d at a row 0.03 of the stream, %d at a row as dear", shallow, steep);
}

TEST(speculative_auto_batch_margin_is_the_sequences) { with_shipped_pair(batch_margin_is_the_sequences); }

// A batch's drafter that has read nothing reads the prompt in its first draft forward, and the plan prices that read
// over the tokens still wanted (policy.c: prompt_read_share). The shipped pair on 2 threads, greedy beside 7
// sequences decoding plainly, where drafting one token a round barely pays: the batch's forwards timed at 4..36 rows
// on t(R) = S + 0.16 S · R, its draft's at 1..8 rows on S / 40 + S / 1000 · R (a read of 100 tokens a tenth of S).
// With the text read it drafts; with a prompt of 100 tokens unread it drafts for 512 tokens still wanted, not for 32
// (8 clients of 32 tokens: the read costs more than drafting gains in them); at temperature 1 the request's own plan
// stands, read or not.
static void batch_prices_the_prompt_read(Model *target, const Drafter *drafter, const SpecParams *params) {
    (void)params;
    target->max_threads = 2;
    const double stream = 20e-3;
    const BatchCosts costs = {timed(stream, 0.16 * stream, 4, 36), timed(stream / 40, stream / 1000, 1, 8)};
    const int read = planned_depth_reading(target, drafter, 0, 7, costs, 0, 32),
              short_request = planned_depth_reading(target, drafter, 0, 7, costs, 100, 32),
              long_request = planned_depth_reading(target, drafter, 0, 7, costs, 100, 512),
              hot_read = planned_depth_reading(target, drafter, 1, 7, costs, 0, 32),
              hot_unread = planned_depth_reading(target, drafter, 1, 7, costs, 100, 32);
    printf("    the shipped pair beside 7 plain sequences: γ %d with the text read, 32 tokens left; a prompt of 100 "
           "unread: γ %d for 32 tokens left, %d for 512; temperature 1: γ %d read, %d unread\n", read, short_request,
           long_request, hot_read, hot_unread);
    CHECK(read > 0 && short_request == 0 && long_request > 0 && hot_unread == hot_read,
          "γ %d read, %d unread with 32 left, %d with 512; temperature 1: %d read, %d unread", read, short_request,
          long_request, hot_read, hot_unread);
}

TEST(speculative_auto_batch_prices_the_prompt_read) { with_shipped_pair(batch_prices_the_prompt_read); }
