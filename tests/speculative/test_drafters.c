// test_drafters.c — the drafters' proposals, and a draft that does not pay:
//
//   - the lookup drafter proposes the continuation of the latest longest match, copying on through its own
//     proposal, the shorter matches that continue otherwise as a tree's branches, nothing without a match, and
//     makes no forward; a rollback before the indexed text starts afresh;
//   - the staged drafter proposes the lookup's run as a chain, or, when the scheduler asks for none of it, the
//     draft model's tree of the width asked;
//   - a draft model that stops below top probability p_min drafts less, and greedy output is still the target's;
//   - with a useless draft γ auto falls back to plain decoding, and keeping the draft in sync costs no forward per
//     plain token.
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "speculative/speculative.h"
#include "speculative_support.h"

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

// ---- p_min ----------------------------------------------------------------------------------------------------

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
    // Pipelined: a chain that stopped where the draft was unsure has nothing to draft ahead (its guess would come
    // from the same unsure q) — greedy, still the target's tokens; at temperature 1 with γ fixed, the unpipelined
    // run's tokens and rounds (test_pipeline.c's exactness, with p_min).
    params.pipeline = PIPELINE_ON;
    generate_p_min(&pair, prompt, 3, &params, 5, out, &stats, true, 0.5f);
    CHECK(memcmp(plain, out, sizeof plain) == 0 && stats.pipelined, "greedy output with p_min, pipelined");
    params.sampling.temperature = 1.0f;
    int piped[30];
    SpecStats piped_stats;
    generate_p_min(&pair, prompt, 3, &params, 5, piped, &piped_stats, true, 0.05f);
    params.pipeline = PIPELINE_OFF;
    generate_p_min(&pair, prompt, 3, &params, 5, out, &stats, true, 0.05f);
    CHECK(memcmp(piped, out, sizeof out) == 0 && piped_stats.rounds == stats.rounds &&
              piped_stats.drafted == stats.drafted,
          "temperature 1, p_min 0.05: pipelined %d rounds, %d drafted; unpipelined %d, %d", piped_stats.rounds,
          piped_stats.drafted, stats.rounds, stats.drafted);
    model_pair_close(&pair);
}
