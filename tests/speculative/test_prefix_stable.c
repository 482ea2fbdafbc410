// test_prefix_stable.c — the same seed is prefix-stable (params.h): at temperature > 0, the tokens of a run of
// max_tokens = n are the first n of a run of 16, for n = 1..15 (the debug build: 1, 6, 11), with every drafter (the
// draft model, the lookup, both staged), every tree (a chain, a tree of width 3, the width chosen by the policy:
// --tree), both samplers (rejection, coupled), every γ policy (fixed, heuristic, auto), and with pipelined drafting.
// A run that stops at n mid-round drafts what the longer run drafted there, so its tokens got the same random numbers.
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "speculative/speculative.h"
#include "speculative_support.h"

enum { N_LONG = 16 };
#ifdef SPECDEC_DEBUG
enum { N_STEP = 5 };  // the debug build checks every rollback, under the sanitizers: lengths 1, 6, 11 only
#else
enum { N_STEP = 1 };
#endif

typedef struct {
    int tree_width;
    bool tree_auto;
    const char *name;
} TreeCase;

static const TreeCase TREES[] = {{1, false, "chain"}, {3, false, "width 3"}, {3, true, "--tree"}};
static const GammaPolicy POLICIES[] = {GAMMA_FIXED, GAMMA_HEURISTIC, GAMMA_AUTO};
static const char *const POLICY_NAMES[] = {"gamma 5", "heuristic", "auto"};

// Runs of 1..N_LONG − 1 tokens (every N_STEP-th) against the run of N_LONG, by the drafter `kind` with `params`;
// counts into *drafted and *accepted the long run's drafts and kept drafts.
static void check_prefixes(ModelPair *pair, DraftKind kind, const SpecParams *params, const char *label, int *drafted,
                           int *accepted) {
    const int prompt[] = {3, 14, 15, 92, 3, 14};  // a repeat, for the lookup
    SpecParams run = *params;
    run.max_tokens = N_LONG;
    int full[N_LONG], got[N_LONG];
    SpecStats stats;
    if (generate_with(pair, kind, prompt, 6, &run, 5, full, &stats, 0) != N_LONG) {
        CHECK(false, "%s: the long run ended early", label);
        return;
    }
    *drafted += stats.drafted;
    *accepted += stats.accepted;
    for (int n = 1; n < N_LONG; n += N_STEP) {
        run.max_tokens = n;
        const int n_got = generate_with(pair, kind, prompt, 6, &run, 5, got, &stats, 0);
        int same = 0;
        while (same < n_got && got[same] == full[same]) same++;
        CHECK(n_got == n && same == n, "%s: max_tokens %d gave %d tokens, the first %d those of max_tokens %d", label,
              n, n_got, same, N_LONG);
    }
}

TEST(speculative_seed_is_prefix_stable) {
    ModelPair pair;
    pair_open(&pair, 97, 128, 1, 0.3f);
    const DraftKind kinds[] = {DRAFT_MODEL, DRAFT_LOOKUP, DRAFT_STAGED};
    const SpecSampler samplers[] = {SAMPLER_REJECTION, SAMPLER_COUPLED};
    for (int k = 0; k < 3; k++) {
        int drafted = 0, accepted = 0;
        for (int t = 0; t < 3; t++)
            for (int s = 0; s < 2; s++)
                for (int g = 0; g < 3; g++)
                    for (int pipelined = 0; pipelined < (kinds[k] != DRAFT_LOOKUP && t == 0 ? 2 : 1); pipelined++) {
                        const SpecParams params = {.sampling = {0.4f, 0, 0.95f}, .sampler = samplers[s],
                                                   .policy = POLICIES[g], .gamma = g == 0 ? 5 : 3,
                                                   .tree_width = TREES[t].tree_width, .tree_auto = TREES[t].tree_auto,
                                                   .pipeline = pipelined ? PIPELINE_ON : PIPELINE_OFF, .eos_id = -1};
                        char label[160];
                        snprintf(label, sizeof label, "%s, %s, %s, %s%s", DRAFT_NAMES[kinds[k]], TREES[t].name,
                                 s ? "coupled" : "rejection", POLICY_NAMES[g], pipelined ? ", pipelined" : "");
                        check_prefixes(&pair, kinds[k], &params, label, &drafted, &accepted);
                    }
        CHECK(accepted > 0 && accepted < drafted, "%s: both paths exercised (%d of %d drafts kept)",
              DRAFT_NAMES[kinds[k]], accepted, drafted);
    }
    model_pair_close(&pair);
}
