// test_constrained.c — speculative decoding under a grammar (SpecParams.constraint, src/grammar/mask.h): greedy
// constrained speculative output equals constrained target-only output for every drafter and tree, and every
// output is a prefix of a sentence of the grammar (a whole sentence where the grammar made it end); sampled with a
// draft, the first tokens follow the target's masked and renormalised distribution (chi-square).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/mask.h"
#include "harness.h"
#include "sampling_reference.h"
#include "speculative_support.h"

// The tiny pairs' ids spell these pieces of JSON, id t the piece t % N_PIECES; END is the end-of-text id.
static const char *const PIECES[] = {
    "{", "}", "\"", "a", "b", "c", ":", " ", ",", "0", "1", "2", "7", "-", "true", "false", "ab", "\"ab\"", "\": ",
    "{\"", "\",", "12", "\"c\":", "null", "x", "e", "\n",
};
enum { N_PIECES = sizeof PIECES / sizeof *PIECES, V_PAIR = 97, END = 96 };

typedef struct {
    uint32_t offset[V_PAIR + 1];
    char bytes[V_PAIR * 8];
    int end[1];
    Vocabulary vocab;
} PairVocab;

// Each id its piece; with `unique`, the ids past the first N_PIECES spell nothing (so each piece has one id).
static void pair_vocab(PairVocab *pv, int V, bool with_end, bool unique) {
    pv->offset[0] = 0;
    for (int t = 0; t < V; t++) {
        const char *piece = (with_end && t == END) || (unique && t >= N_PIECES) ? "" : PIECES[t % N_PIECES];
        memcpy(pv->bytes + pv->offset[t], piece, strlen(piece));
        pv->offset[t + 1] = pv->offset[t] + (uint32_t)strlen(piece);
    }
    pv->end[0] = END;
    pv->vocab = (Vocabulary){.V = V, .offset = pv->offset, .bytes = pv->bytes, .end_ids = pv->end,
                             .n_end = with_end ? 1 : 0};
}

// Generates under a fresh constraint of g; checks that the output reads as a prefix of a sentence, a whole one when
// generation ended before max_tokens. Returns the number of tokens.
static int constrained_stats(ModelPair *pair, DraftKind kind, const Grammar *g, const PairVocab *pv,
                             const int *prompt, int n_prompt, SpecParams params, uint64_t seed, int *out,
                             SpecStats *stats, const char *label) {
    GrammarConstraint c;
    Err err;
    CHECK(grammar_constraint_init(&c, g, &pv->vocab, &err) == 0, "%s", err.msg);
    params.constraint = &c;
    int n = generate_with(pair, kind, prompt, n_prompt, &params, seed, out, stats, 0);
    GrammarState s = {0}, scratch = {0};
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    for (int i = 0; i < n; i++)
        CHECK(grammar_accept_token(&c.masker, &s, out[i], &scratch), "%s: token %d (%d) refused by the grammar", label,
              i, out[i]);
    if (n < params.max_tokens) CHECK(grammar_may_end(&s), "%s: ended after %d tokens, not at a sentence's end", label, n);
    grammar_state_free(&s);
    grammar_state_free(&scratch);
    grammar_constraint_free(&c);
    return n;
}

static int constrained(ModelPair *pair, DraftKind kind, const Grammar *g, const PairVocab *pv, const int *prompt,
                       int n_prompt, SpecParams params, uint64_t seed, int *out, const char *label) {
    SpecStats stats;
    return constrained_stats(pair, kind, g, pv, prompt, n_prompt, params, seed, out, &stats, label);
}

// Grammar-forced drafting: where only one token spells what the grammar allows ("true", then ","), it is drafted
// without a draft model — target-only decoding drafts it too — and kept.
TEST(constrained_forced_drafts_are_free_and_kept) {
    const char gbnf[] = "root ::= \"true\" \",\" [0-9]+";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "forced.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    PairVocab pv;
    pair_vocab(&pv, V_PAIR, true, true);
    ModelPair pair;
    pair_open(&pair, V_PAIR, 128, 1, 0.3f);
    const int prompt[] = {1, 2, 3};
    const SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 4,
                               .max_tokens = 6, .eos_id = END, .forced_drafts = true};
    int out[6];
    SpecStats stats;
    const int n = constrained_stats(&pair, DRAFT_NONE, g, &pv, prompt, 3, params, 1, out, &stats, "forced");
    CHECK(n >= 2 && !strcmp(PIECES[out[0]], "true") && !strcmp(PIECES[out[1]], ","),
          "the forced tokens first: %d tokens", n);
    CHECK(stats.drafted >= 2 && stats.accepted == stats.drafted && stats.draft_calls == 0,
          "%d forced drafts, %d kept, %d draft forwards", stats.drafted, stats.accepted, stats.draft_calls);
    model_pair_close(&pair);
    grammar_free(g);
}

TEST(constrained_greedy_speculative_equals_target_only) {
    // A small JSON object with fixed keys, short enough that the tiny models close it within max_tokens.
    const char gbnf[] = "root ::= \"{\" ws \"\\\"ab\\\":\" ws [0-9]{1,3} \",\" ws \"\\\"c\\\":\" ws (\"true\" | \"false\") \"}\"\n"
                        "ws ::= \" \"?";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "object.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    PairVocab pv;
    pair_vocab(&pv, V_PAIR, true, false);
    ModelPair pair;
    pair_open(&pair, V_PAIR, 128, 1, 0.3f);
    const int widths[] = {1, 3};
    int ended = 0;
    for (int trial = 0; trial < 6 && !test_failures(); trial++) {
        int prompt[8];
        const int n_prompt = random_prompt(prompt, trial, V_PAIR);
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 4,
                             .max_tokens = 40, .eos_id = END};
        int want[40], got[40];
        const int n_want = constrained(&pair, DRAFT_NONE, g, &pv, prompt, n_prompt, params, 1, want, "target-only");
        ended += n_want < params.max_tokens;
        for (int kind = DRAFT_NONE; kind < N_DRAFT_KINDS; kind++) {
            for (int k = 0; k < 4; k++) {  // widths 1 and 3, without and with grammar-forced drafts
                params.tree_width = widths[k % 2];
                params.forced_drafts = k >= 2;
                if (kind == DRAFT_NONE && !params.forced_drafts) continue;  // (that is the reference)
                const int n_got = constrained(&pair, kind, g, &pv, prompt, n_prompt, params, 1, got, DRAFT_NAMES[kind]);
                CHECK(n_got == n_want && memcmp(got, want, sizeof(int) * n_want) == 0,
                      "trial %d, %s, width %d%s: constrained speculative output differs from target-only's", trial,
                      DRAFT_NAMES[kind], params.tree_width, params.forced_drafts ? ", forced drafts" : "");
            }
        }
        params.tree_width = 1;
        params.forced_drafts = false;
    }
    CHECK(ended > 0, "no generation closed its object within 40 tokens");
    model_pair_close(&pair);
    grammar_free(g);
}

// The exact masked joint distribution of the first 3 tokens after the prompt under `root ::= [ab] [a-e] [cd] .*`
// over ids spelling a..e: p at each position masked to the letters allowed there, then adjusted.
static void masked_joint(ModelPair *pair, const int *prompt, int n_prompt, const SamplingParams *sp, double *joint) {
    static const bool allowed[3][V_SMALL] = {{1, 1, 0, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 1, 1, 0}};
    Err err;
    KVCache cache;
    CHECK(model_kv_init(&pair->target, &cache, &err) == 0, "kv");
    float logits[V_SMALL];
    double p[3][V_SMALL];
    int seq[3];
    for (int cell = 0; cell < V_SMALL * V_SMALL * V_SMALL; cell++) {
        seq[0] = cell / (V_SMALL * V_SMALL), seq[1] = cell / V_SMALL % V_SMALL, seq[2] = cell % V_SMALL;
        kv_truncate(&cache, 0);
        joint[cell] = 1;
        for (int i = 0; i < 3; i++) {
            const int *feed = i == 0 ? prompt : &seq[i - 1];
            CHECK(model_forward(&pair->target, &cache, feed, i == 0 ? n_prompt : 1, logits, false, &err) == 0, "%s",
                  err.msg);
            for (int t = 0; t < V_SMALL; t++) logits[t] = allowed[i][t] ? logits[t] : -INFINITY;
            reference_adjust(p[i], logits, V_SMALL, sp, NULL);
            joint[cell] *= p[i][seq[i]];
        }
    }
    kv_free(&cache);
}

TEST(constrained_sampling_with_a_draft_matches_the_masked_target) {
    static const char *const letters[] = {"a", "b", "c", "d", "e"};
    PairVocab pv = {.offset = {0}};
    for (int t = 0; t < V_SMALL; t++) {
        pv.bytes[t] = letters[t][0];
        pv.offset[t + 1] = (uint32_t)t + 1;
    }
    pv.vocab = (Vocabulary){.V = V_SMALL, .offset = pv.offset, .bytes = pv.bytes};
    const char gbnf[] = "root ::= [ab] [a-e] [cd] .*";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "test.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    ModelPair pair;
    pair_open(&pair, V_SMALL, 64, 1, 1.0f);
    const int prompt[] = {1, 3};
    const SpecParams params = {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 3,
                               .max_tokens = 3, .eos_id = -1};
#ifdef SPECDEC_DEBUG
    enum { SAMPLES = 2000 };  // the debug build checks every rollback: a shorter, weaker test
#else
    enum { SAMPLES = 12000 };
#endif
    enum { CELLS = V_SMALL * V_SMALL * V_SMALL };
    double joint[CELLS];
    masked_joint(&pair, prompt, 2, &params.sampling, joint);
    static int counts[CELLS];
    for (int s = 1; s <= SAMPLES; s++) {
        int out[3];
        if (constrained(&pair, DRAFT_MODEL, g, &pv, prompt, 2, params, (uint64_t)s, out, "sampled") != 3) break;
        counts[(out[0] * V_SMALL + out[1]) * V_SMALL + out[2]]++;
    }
    double chi2 = 0, pooled_expect = 0, pooled_count = 0;
    int cells = 0;
    for (int i = 0; i < CELLS; i++) {
        const double e = joint[i] * SAMPLES;
        if (e == 0) CHECK(counts[i] == 0, "sequence %d, which the grammar refuses, drawn %d times", i, counts[i]);
        if (e < 5) {
            pooled_expect += e;
            pooled_count += counts[i];
            continue;
        }
        chi2 += (counts[i] - e) * (counts[i] - e) / e;
        cells++;
    }
    if (pooled_expect > 0) {
        chi2 += (pooled_count - pooled_expect) * (pooled_count - pooled_expect) / pooled_expect;
        cells++;
    }
    const double critical = chi_square_critical(cells - 1);
    printf("    constrained, draft model: chi2 = %.1f over %d cells (critical %.1f at 1e-4)\n", chi2, cells, critical);
    CHECK(chi2 < critical, "chi-square %.1f exceeds %.1f: not the masked target's distribution", chi2, critical);
    model_pair_close(&pair);
    grammar_free(g);
}
