// test_logprobs.c — the log-probabilities reported of committed tokens (SpecParams.on_logprobs, logprobs.h):
//   - logprobs_of_row against a naive reference (every token's log-softmax in long double, all tokens sorted by
//     logit and id) on random rows with ties, and a row of equal logits worked by hand;
//   - during generation, every token's values equal, bit for bit, those of the target's own forward over the prompt
//     and the tokens before it (what `specdec logits` prints) — for kept drafts, residual draws, bonus tokens and
//     plain decoding, with and without a draft (model, lookup, both, a tree), greedy and at temperature 1, with
//     penalties and top-k, on a GPT-2 pair and a Qwen2 pair in q8 on 2 threads, and under a grammar, whose masks
//     never reach them;
//   - a top_logprobs outside [0, 20] is refused.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/mask.h"
#include "harness.h"
#include "speculative/logprobs.h"
#include "speculative_support.h"

// ---- one row -----------------------------------------------------------------------------------------------

static int by_logit_then_id(const void *a, const void *b, void *row) {
    const float *logits = row;
    const int x = *(const int *)a, y = *(const int *)b;
    if (logits[x] != logits[y]) return logits[x] > logits[y] ? -1 : 1;
    return x - y;
}

TEST(logprobs_of_row_match_a_naive_reference) {
    enum { V_MOST = 400 };
    static float logits[V_MOST];
    static int order[V_MOST];
    for (int trial = 0; trial < 500 && !test_failures(); trial++) {
        const int V = test_rand_int(1, V_MOST), n_top = test_rand_int(0, LOGPROBS_TOP_MAX);
        for (int x = 0; x < V; x++)  // a few distinct values on some trials: ties
            logits[x] = trial % 3 ? test_rand_uniform(-30.0f, 30.0f) : (float)test_rand_int(-3, 3);
        long double sum = 0.0L, max = logits[0];
        for (int x = 0; x < V; x++) max = logits[x] > max ? logits[x] : max;
        for (int x = 0; x < V; x++) sum += expl((long double)logits[x] - max);
        for (int x = 0; x < V; x++) order[x] = x;
        qsort_r(order, (size_t)V, sizeof(int), by_logit_then_id, logits);
        const int token = test_rand_int(0, V - 1);
        TokenLogprobs lp;
        logprobs_of_row(&lp, logits, V, token, n_top);
        const double want = (double)((long double)logits[token] - max - logl(sum));
        CHECK(lp.token == token && fabs(lp.logprob - want) <= 1e-6 * (1 + fabs(want)),
              "trial %d: token %d has %.9g, the reference %.9g", trial, token, lp.logprob, want);
        CHECK(lp.n_top == (n_top < V ? n_top : V), "trial %d: %d alternatives of %d asked, V %d", trial, lp.n_top,
              n_top, V);
        for (int k = 0; k < lp.n_top; k++) {
            const double top = (double)((long double)logits[order[k]] - max - logl(sum));
            CHECK(lp.top[k] == order[k] && fabs(lp.top_logprob[k] - top) <= 1e-6 * (1 + fabs(top)),
                  "trial %d: alternative %d is %d (%.9g), the reference's %d (%.9g)", trial, k, lp.top[k],
                  lp.top_logprob[k], order[k], top);
        }
    }
}

TEST(logprobs_of_equal_logits_are_log_one_over_v_in_id_order) {
    const float logits[5] = {2.5f, 2.5f, 2.5f, 2.5f, 2.5f};
    TokenLogprobs lp;
    logprobs_of_row(&lp, logits, 5, 3, 4);
    CHECK(lp.logprob == (float)-log(5.0), "log p = %.9g, want log 1/5", lp.logprob);
    CHECK(lp.n_top == 4 && lp.top[0] == 0 && lp.top[1] == 1 && lp.top[2] == 2 && lp.top[3] == 3,
          "ties: the lower id first (%d alternatives)", lp.n_top);
}

// ---- during generation -------------------------------------------------------------------------------------

enum { N_MOST = 24 };

// What on_logprobs was handed, in order.
typedef struct {
    TokenLogprobs lp[N_MOST];
    TokenKind kind[N_MOST];
    int n;
    int kinds[TOKEN_TARGET + 1];  // tokens of each kind, over every run of a test
} Reported;

static void collect(void *ctx, const TokenLogprobs *lp, TokenKind kind) {
    Reported *r = ctx;
    if (r->n < N_MOST) r->lp[r->n] = *lp, r->kind[r->n++] = kind;
    r->kinds[kind]++;
}

// Each reported token's values against the target's own forward over prompt and out[0..i), afresh, bit for bit.
static void check_against_forward(ModelPair *pair, const int *prompt, int n_prompt, const int *out, int n_out,
                                  const Reported *r, int n_top, const char *label) {
    CHECK(r->n == n_out, "%s: %d tokens reported of %d committed", label, r->n, n_out);
    const int V = pair->target.n_vocab;
    int text[8 + N_MOST];
    memcpy(text, prompt, sizeof(int) * n_prompt);
    memcpy(text + n_prompt, out, sizeof(int) * n_out);
    float *logits = malloc(sizeof(float) * V);
    for (int i = 0; i < r->n && i < n_out && !test_failures(); i++) {
        KVCache cache;
        Err err;
        CHECK(model_kv_init(&pair->target, &cache, &err) == 0, "%s", err.msg);
        CHECK(model_forward(&pair->target, &cache, text, n_prompt + i, logits, false, &err) == 0, "%s", err.msg);
        kv_free(&cache);
        TokenLogprobs want;
        logprobs_of_row(&want, logits, V, out[i], n_top);
        const TokenLogprobs *got = &r->lp[i];
        CHECK(got->token == out[i] && got->logprob == want.logprob && got->n_top == want.n_top,
              "%s: token %d (%d, %s): log p %.9g, the forward's %.9g; %d alternatives, want %d", label, i, out[i],
              spec_token_kind_name(r->kind[i]), got->logprob, want.logprob, got->n_top, want.n_top);
        for (int k = 0; k < want.n_top && k < got->n_top; k++)
            CHECK(got->top[k] == want.top[k] && got->top_logprob[k] == want.top_logprob[k],
                  "%s: token %d, alternative %d: %d (%.9g), the forward's %d (%.9g)", label, i, k, got->top[k],
                  got->top_logprob[k], want.top[k], want.top_logprob[k]);
    }
    free(logits);
}

// Generations by every drafter, greedy and at temperature 1 (with penalties and top-k on some), chains and trees.
static void check_pair(ModelPair *pair, Reported *seen) {
    static const Penalties penalties = {.repetition = 1.3f, .presence = 0.5f, .frequency = 0.25f};
    for (int trial = 0; trial < 16 && !test_failures(); trial++) {
        int prompt[8], out[N_MOST];
        const int n_prompt = random_prompt(prompt, trial, pair->target.n_vocab);
        const DraftKind kind = (DraftKind)(trial % N_DRAFT_KINDS);
        const float temperature = trial / N_DRAFT_KINDS % 2 ? 1.0f : 0.0f;
        const int n_top = test_rand_int(0, LOGPROBS_TOP_MAX);
        Reported r = {0};
        const SpecParams params = {.sampling = {.temperature = temperature, .top_p = 1, .top_k = trial % 3 ? 0 : 5},
                                   .penalties = trial / 8 ? &penalties : NULL, .policy = GAMMA_FIXED, .gamma = 3,
                                   .tree_width = trial % 5 == 1 ? 2 : 1, .max_tokens = N_MOST, .eos_id = -1,
                                   .on_logprobs = collect, .top_logprobs = n_top, .logprobs_ctx = &r};
        SpecStats stats;
        const int n = generate_with(pair, kind, prompt, n_prompt, &params, (uint64_t)trial, out, &stats, 0);
        char label[96];
        snprintf(label, sizeof label, "%s, T %g, trial %d", DRAFT_NAMES[kind], temperature, trial);
        check_against_forward(pair, prompt, n_prompt, out, n, &r, n_top, label);
        for (int k = 0; k <= TOKEN_TARGET; k++) seen->kinds[k] += r.kinds[k];
    }
}

TEST(logprobs_equal_the_targets_forward_for_every_kind_of_token) {
    Reported seen = {0};
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    check_pair(&pair, &seen);
    model_pair_close(&pair);
    RandomCheckpoint target = QWEN2_TARGET, draft = QWEN2_TARGET;  // a Qwen2 pair in q8, on 2 threads
    draft.n_layer = 1;
    model_pair_open(&pair, &target, &draft, 97, 2, QUANT_Q8);
    check_pair(&pair, &seen);
    model_pair_close(&pair);
    for (TokenKind k = TOKEN_ACCEPTED; k <= TOKEN_TARGET; k++)
        CHECK(k == TOKEN_REJECTED ? seen.kinds[k] == 0 : seen.kinds[k] > 0, "%d tokens of kind %s reported",
              seen.kinds[k], spec_token_kind_name(k));
}

// Under a grammar the values are the unmasked row's: the alternatives include tokens the grammar refuses.
TEST(logprobs_under_a_grammar_are_unmasked) {
    enum { V = 97 };
    uint32_t offset[V + 1] = {0};  // id t spells the letter 'a' + t % 26
    char bytes[V];
    for (int t = 0; t < V; t++) bytes[t] = (char)('a' + t % 26), offset[t + 1] = (uint32_t)t + 1;
    const Vocabulary vocab = {.V = V, .offset = offset, .bytes = bytes};
    const char gbnf[] = "root ::= [ab]+";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "ab.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    ModelPair pair;
    pair_open(&pair, V, 64, 1, 0.3f);
    int refused_alternatives = 0;
    for (int trial = 0; trial < 4 && !test_failures(); trial++) {
        GrammarConstraint c;
        CHECK(grammar_constraint_init(&c, g, &vocab, &err) == 0, "%s", err.msg);
        Reported r = {0};
        const SpecParams params = {.sampling = {.temperature = trial % 2 ? 1.0f : 0.0f, .top_p = 1},
                                   .policy = GAMMA_FIXED, .gamma = 3, .max_tokens = 12, .eos_id = -1,
                                   .constraint = &c, .on_logprobs = collect, .top_logprobs = 5, .logprobs_ctx = &r};
        int prompt[8], out[N_MOST];
        const int n_prompt = random_prompt(prompt, trial, V);
        SpecStats stats;
        const int n = generate_with(&pair, trial < 2 ? DRAFT_MODEL : DRAFT_NONE, prompt, n_prompt, &params,
                                    (uint64_t)trial, out, &stats, 0);
        check_against_forward(&pair, prompt, n_prompt, out, n, &r, 5, "grammar");
        for (int i = 0; i < r.n; i++)
            for (int k = 0; k < r.lp[i].n_top; k++) refused_alternatives += r.lp[i].top[k] % 26 > 1;
        grammar_constraint_free(&c);
    }
    CHECK(refused_alternatives > 0, "no alternative was a token the grammar refuses");
    model_pair_close(&pair);
    grammar_free(g);
}

TEST(logprobs_top_count_out_of_range_is_refused) {
    ModelPair pair;
    pair_open(&pair, 97, 64, 1, 0.3f);
    Reported r = {0};
    const int prompt[] = {1, 2, 3};
    int out[4], n_out;
    SpecStats stats;
    Err err;
    for (int top = -1; top <= LOGPROBS_TOP_MAX + 1; top += LOGPROBS_TOP_MAX + 2) {
        const SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = 4, .eos_id = -1,
                                   .on_logprobs = collect, .top_logprobs = top, .logprobs_ctx = &r};
        CHECK(speculative_generate(&pair.target, NULL, prompt, 3, &params, out, &n_out, &stats, &err) == -1 &&
                  strstr(err.msg, "top_logprobs"),
              "top_logprobs %d accepted", top);
    }
    model_pair_close(&pair);
}
