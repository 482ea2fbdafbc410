// test_generation.c — a speculative generation's edges and records:
//
//   - it stops at the context limit, at -n reached mid-round (chains and trees), and before the first end-of-text
//     of one id or of a list, with the tokens target-only decoding gives;
//   - the debug build checks every rollback: one corrupted value of the draft's cache, or a target cache gone
//     stale, stops the run with a message naming the model, the row and the difference (the release build checks
//     none);
//   - logits NaN or +inf, of the target or the draft, greedy or sampled, stop the run with a message naming the model;
//   - the trace names an accepted end-of-text draft as such;
//   - the numbers: γ auto's cost model of a forward, the predicted speed-up and the expected tokens per round at
//     their corners, and a run's accounting of expected tokens and time.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "model/model.h"
#include "speculative/speculative.h"
#include "speculative_support.h"

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

// A model whose logits turn NaN or +inf (its final norm's first gain set so: every logit follows) stops the run
// with a message naming that model, greedy (where only the argmax of a row is taken) and at temperature 1 alike,
// with a chain, a tree and plain decoding.
TEST(speculative_refuses_non_finite_logits) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    const int prompt[] = {3, 1, 4, 1, 5};
    const float bad[2] = {NAN, INFINITY};
    for (int c = 0; c < 8; c++) {
        const bool in_target = c % 2, greedy = c / 2 % 2, tree = c / 4;
        Model *model = in_target ? &pair.target : &pair.draft;
        float *gain = (float *)model->norm_f.gamma;
        const float kept = gain[0];
        gain[0] = bad[c % 2 == c / 2 % 2];
        const SpecParams params = {.sampling = {.temperature = greedy ? 0.0f : 1.0f, .top_p = 1}, .seed = 9,
                                   .policy = GAMMA_FIXED, .gamma = 3, .tree_width = tree ? 2 : 1, .max_tokens = 8,
                                   .eos_id = -1};
        for (int run = 0; run < (in_target ? 2 : 1); run++) {  // the target's: plain and speculative
            const DraftKind kind = in_target && run == 0 ? DRAFT_NONE : DRAFT_MODEL;
            Drafters drafters;
            Err err;
            CHECK(drafter_open(&drafters, (DrafterKind)kind, &pair.draft, &params, 0, 1, &err) == 0, "%s", err.msg);
            int out[8], n_out;
            SpecStats stats;
            const int rc = speculative_generate(&pair.target, drafters.drafter, prompt, 5, &params, out, &n_out,
                                                &stats, &err);
            CHECK(rc == -1 && strstr(err.msg, in_target ? "the target model produced a NaN or infinite logit"
                                                        : "the draft model produced a NaN or infinite logit"),
                  "%s logits of the %s (%s, %s%s): rc %d, %s", isnan(gain[0]) ? "NaN" : "+inf",
                  in_target ? "target" : "draft", greedy ? "greedy" : "temperature 1", DRAFT_NAMES[kind],
                  tree ? ", width 2" : "", rc, rc ? err.msg : "no error");
            drafter_close(&drafters);
        }
        gain[0] = kept;
    }
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

// ---- the numbers ----------------------------------------------------------------------------------------------

// The cost model of γ auto under rejection sampling: the weights' bytes once, over threads^0.72, plus per token 2
// FLOPs per matrix weight (V·d for the LM head, 12·L·d² for the blocks: qkv 3d², projection d², MLP 2·4d²) at 4
// FLOPs per byte, each weighted by how the matrices are held (as stored 1, q8 0.36, q4 0.44, --quant bf16 1.4),
// over the threads; a row of V logits to probabilities 10 bytes a token.
TEST(speculative_forward_cost_model) {
    const Quant forms[] = {QUANT_NONE, QUANT_Q8, QUANT_Q4, QUANT_BF16};
    const double weights[] = {1.0, 0.36, 0.44, 1.4};
    for (int f = 0; f < 4; f++) {
        if (!quant_runs_here(forms[f])) continue;
        ModelPair pair;
        pair_open_quantized(&pair, 97, 64, 1, 0.3f, forms[f]);
        const Model *models[] = {&pair.target, &pair.draft};
        for (int m = 0; m < 2; m++) {
            const Config *c = &models[m]->cfg;
            CHECK(c->n_inner == 0 || c->n_inner == 4 * c->n_embd, "the random checkpoints have F = 4d");
            const double per_token =
                2.0 * ((double)c->vocab_size * c->n_embd + 12.0 * c->n_layer * c->n_embd * c->n_embd);
            CHECK(model_matrix_multiply_adds(models[m]) == per_token / 2, "model %d: %.0f multiply-adds a token", m,
                  model_matrix_multiply_adds(models[m]));
            for (int T = 1; T <= 17; T += 8)
                for (int n = 1; n <= 16; n *= 4) {
                    const double want =
                        models[m]->weight_bytes / pow(n, 0.72) + T * per_token * weights[f] / (4.0 * n);
                    CHECK(fabs(spec_forward_cost(models[m], T, n) - want) < 1e-6 * want,
                          "form %d, model %d, T %d, %d threads: cost %.1f, want %.1f", f, m, T, n,
                          spec_forward_cost(models[m], T, n), want);
                }
        }
        CHECK(spec_forward_cost(&pair.draft, 1, 1) < spec_forward_cost(&pair.target, 1, 1),
              "form %d: the 1-block draft is cheaper", f);
        model_pair_close(&pair);
    }
    CHECK(spec_row_cost(97) == 970.0, "a row of 97 logits: %g", spec_row_cost(97));
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
