// test_constrained.c — speculative decoding under a grammar (SpecParams.constraint, src/grammar/mask.h): greedy
// constrained speculative output equals constrained target-only output for every drafter and tree, and every
// output is a prefix of a sentence of the grammar (a whole sentence where the grammar made it end); sampled with a
// draft, the first tokens follow the target's masked and renormalised distribution (chi-square); and the same under a
// lazy grammar, free until a trigger (grammar/lazy.h), with coupled sampling equal to target-only decoding too.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/lazy.h"
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
    grammar_free(g);
    // A forced text that several tokenizations spell ("\"ab\": " as "\"ab\"" ":" " ", or "\"" "ab" "\": "…): its
    // longest tokens drafted at no draft forward, the output target-only's without them.
    const char text_gbnf[] = "root ::= \"\\\"ab\\\": \" [0-9]+";
    g = grammar_parse(text_gbnf, sizeof text_gbnf - 1, "forced_text.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    SpecParams without = params;
    without.forced_drafts = false;
    int want[6];
    const int n_want = constrained(&pair, DRAFT_NONE, g, &pv, prompt, 3, without, 1, want, "reference");
    const int n_text = constrained_stats(&pair, DRAFT_NONE, g, &pv, prompt, 3, params, 1, out, &stats, "forced text");
    CHECK(n_text == n_want && !memcmp(out, want, sizeof(int) * n_want), "forced text drafts changed the output");
    CHECK(stats.drafted >= 3 && stats.draft_calls == 0, "%d drafts of the forced text, %d draft forwards", stats.drafted,
          stats.draft_calls);
    // With the draft model (γ 1), the forced text after its draft is drafted on at no draft forward: more drafts, in
    // no more rounds and draft forwards than without (the target keeps a forced token only where it is its own
    // greedy choice among the text's tokenizations), the output target-only's either way.
    SpecParams one = params, one_without = without;
    one.gamma = one_without.gamma = 1;
    SpecStats model_only;
    const int n_model = constrained_stats(&pair, DRAFT_MODEL, g, &pv, prompt, 3, one_without, 1, out, &model_only,
                                          "draft model");
    CHECK(n_model == n_want && !memcmp(out, want, sizeof(int) * n_want), "the draft model changed the output");
    const int n_tail = constrained_stats(&pair, DRAFT_MODEL, g, &pv, prompt, 3, one, 1, out, &stats,
                                         "draft model, forced text");
    CHECK(n_tail == n_want && !memcmp(out, want, sizeof(int) * n_want),
          "the forced text after the draft model's draft changed the output");
    CHECK(stats.drafted > model_only.drafted && stats.rounds <= model_only.rounds &&
              stats.draft_calls <= model_only.draft_calls,
          "with the forced text: %d drafts in %d rounds, %d draft forwards; without: %d in %d, %d", stats.drafted,
          stats.rounds, stats.draft_calls, model_only.drafted, model_only.rounds, model_only.draft_calls);
    model_pair_close(&pair);
    grammar_free(g);
}

// Beside the draft model, the tokens the grammar forces ride its chain ("true" "," before each digit: its q, masked,
// is 1 there) instead of making rounds of their own that end at them (each would commit "true" "," and the target's
// digit alone), and what it forces after the chain is drafted on: no more rounds than without forced drafts (chains
// of γ 4, every draft kept), the output the same.
TEST(constrained_forced_tokens_ride_the_draft_models_chain) {
    const char gbnf[] = "root ::= (\"true\" \",\" [0-9]){3}";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "forced_chain.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    PairVocab pv;
    pair_vocab(&pv, V_PAIR, true, true);
    // The draft is the target itself, so that every draft is kept and a round's length shows in the round count.
    const RandomCheckpoint same = {.n_layer = 3, .n_embd = 32, .n_head = 4, .vocab_size = V_PAIR, .n_positions = 128,
                                   .scale = 0.3f, .seed = 7};
    ModelPair pair;
    model_pair_open(&pair, &same, &same, V_PAIR, 1, QUANT_NONE);
    const int prompt[] = {1, 2, 3};
    SpecParams with = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = 4,
                       .max_tokens = 9, .eos_id = END, .forced_drafts = true};
    SpecParams without = with;
    without.forced_drafts = false;
    int want[9], out[9];
    SpecStats s_with, s_without;
    const int n_want = constrained_stats(&pair, DRAFT_MODEL, g, &pv, prompt, 3, without, 1, want, &s_without,
                                         "draft model");
    const int n = constrained_stats(&pair, DRAFT_MODEL, g, &pv, prompt, 3, with, 1, out, &s_with,
                                    "draft model, forced drafts");
    CHECK(n == 9 && n == n_want && !memcmp(out, want, sizeof(int) * n), "forced drafts changed the output");
    CHECK(s_with.rounds <= s_without.rounds, "with forced drafts %d rounds, without %d", s_with.rounds,
          s_without.rounds);
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

// Whether a grammar allows letter t (of a..e) at position i after the letters seq[0..i).
typedef bool Allows(const int *seq, int i, int t);

// The exact masked joint distribution of the first 3 tokens after the prompt over ids spelling a..e: p at each
// position masked to the letters `allows` allows there, then adjusted.
static void masked_joint(ModelPair *pair, const int *prompt, int n_prompt, const SamplingParams *sp, Allows *allows,
                         double *joint) {
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
            for (int t = 0; t < V_SMALL; t++) logits[t] = allows(seq, i, t) ? logits[t] : -INFINITY;
            reference_adjust(p[i], logits, V_SMALL, sp, NULL);
            joint[cell] *= p[i][seq[i]];
        }
    }
    kv_free(&cache);
}

static const char *const LETTERS[V_SMALL] = {"a", "b", "c", "d", "e"};

// Ids 0..V_SMALL-1 spelling pieces[0..V_SMALL), no end token.
static void small_vocab(PairVocab *pv, const char *const pieces[V_SMALL]) {
    pv->offset[0] = 0;
    for (int t = 0; t < V_SMALL; t++) {
        memcpy(pv->bytes + pv->offset[t], pieces[t], strlen(pieces[t]));
        pv->offset[t + 1] = pv->offset[t] + (uint32_t)strlen(pieces[t]);
    }
    pv->vocab = (Vocabulary){.V = V_SMALL, .offset = pv->offset, .bytes = pv->bytes};
}

// Samples the first 3 tokens with drafter `kind` (and grammar-forced drafts where `forced`) under g, over ids
// spelling pieces[0..V_SMALL), and checks their distribution against the exact masked one (chi-square at a
// false-alarm rate of 1e-4), and that nothing refused is drawn.
static void check_masked_sampling(const char *gbnf, const char *const pieces[V_SMALL], Allows *allows, DraftKind kind,
                                  bool forced, int gamma, const char *label) {
    PairVocab pv;
    small_vocab(&pv, pieces);
    Err err;
    Grammar *g = grammar_parse(gbnf, strlen(gbnf), "test.gbnf", &err);
    CHECK(g, "%s", err.msg);
    if (!g) return;
    ModelPair pair;
    pair_open(&pair, V_SMALL, 64, 1, 1.0f);
    const int prompt[] = {1, 3};
    const SpecParams params = {.sampling = {.temperature = 1, .top_p = 1}, .policy = GAMMA_FIXED, .gamma = gamma,
                               .max_tokens = 3, .eos_id = -1, .forced_drafts = forced};
#ifdef SPECDEC_DEBUG
    enum { SAMPLES = 2000 };  // the debug build checks every rollback: a shorter, weaker test
#else
    enum { SAMPLES = 12000 };
#endif
    enum { CELLS = V_SMALL * V_SMALL * V_SMALL };
    double joint[CELLS];
    masked_joint(&pair, prompt, 2, &params.sampling, allows, joint);
    static int counts[CELLS];
    memset(counts, 0, sizeof counts);
    for (int s = 1; s <= SAMPLES; s++) {
        int out[3];
        if (constrained(&pair, kind, g, &pv, prompt, 2, params, (uint64_t)s, out, "sampled") != 3) break;
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
    printf("    %s, %s: chi2 = %.1f over %d cells (critical %.1f at 1e-4)\n", label, DRAFT_NAMES[kind], chi2, cells,
           critical);
    CHECK(chi2 < critical, "%s: chi-square %.1f exceeds %.1f: not the masked target's distribution", label, chi2,
          critical);
    model_pair_close(&pair);
    grammar_free(g);
}

// `root ::= [ab] [a-e] [cd] .*`
static bool allows_fixed(const int *seq, int i, int t) {
    (void)seq;
    static const bool allowed[3][V_SMALL] = {{1, 1, 0, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 1, 1, 0}};
    return allowed[i][t];
}

TEST(constrained_sampling_with_a_draft_matches_the_masked_target) {
    check_masked_sampling("root ::= [ab] [a-e] [cd] .*", LETTERS, allows_fixed, DRAFT_MODEL, false, 3, "constrained");
}

// `root ::= "abc" [a-c]*` over ids spelling a, b, c, ab, bc: the text so far must begin as "abc" does.
static const char *const SPLIT_PIECES[V_SMALL] = {"a", "b", "c", "ab", "bc"};

static bool allows_abc(const int *seq, int i, int t) {
    char text[3 * 2 + 1] = "";
    for (int k = 0; k < i; k++) strcat(text, SPLIT_PIECES[seq[k]]);
    strcat(text, SPLIT_PIECES[t]);
    const size_t n = strlen(text) < 3 ? strlen(text) : 3;
    return strncmp(text, "abc", n) == 0;
}

// The forced text "abc" has three tokenizations (a b c, ab c, a bc): drafted as "ab" "c" (q one-hot) with no
// drafter, and after the draft model's one draft (γ 1: "a" then "bc", or "ab" then "c"), each kept with the masked
// target's probability.
TEST(constrained_forced_text_drafts_keep_the_masked_distribution) {
    check_masked_sampling("root ::= \"abc\" [a-c]*", SPLIT_PIECES, allows_abc, DRAFT_NONE, true, 3, "forced text");
    check_masked_sampling("root ::= \"abc\" [a-c]*", SPLIT_PIECES, allows_abc, DRAFT_MODEL, true, 1,
                          "forced text after a draft");
}

// The forced text's drafts: its longest tokens, up to the room given; none where fewer than 2 bytes are forced.
TEST(constrained_forced_text_is_tokenized_longest_first) {
    PairVocab pv;
    small_vocab(&pv, SPLIT_PIECES);
    const char gbnf[] = "root ::= \"abcab\" [a-c]* | \"abcb\"";
    Err err;
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "forced.gbnf", &err);
    GrammarConstraint c;
    CHECK(g && grammar_constraint_init(&c, g, &pv.vocab, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    int tokens[8];
    const int path_a[] = {0}, path_ab[] = {3};  // "a", "ab"
    CHECK(grammar_constraint_forced_text(&c, NULL, 0, tokens, 8) == 2 && tokens[0] == 3 && tokens[1] == 2,
          "\"abc\" forced from the start: ab c");
    CHECK(grammar_constraint_forced_text(&c, path_a, 1, tokens, 1) == 1 && tokens[0] == 4, "after a, at most one: bc");
    CHECK(grammar_constraint_forced_text(&c, path_ab, 1, tokens, 8) == 0, "after ab, one byte: c");
    grammar_constraint_free(&c);
    grammar_free(g);
}

// ---- lazy grammars: free until a trigger (grammar/lazy.h, tool_choice "auto") -------------------------------------

// A lazy grammar over the letters: free until "ab", then "c" or "d" and "e" (the definition, for the reference: text
// without "ab" anywhere, or its first "ab" followed by a prefix of "ce" or "de").
static const char LAZY_LETTERS[] = "root ::= free-0\nthen ::= [cd] \"e\"\n"
                                   "free-0 ::= \"\" | [^ab] free-0 | \"a\" free-1 | \"b\" free-0\n"
                                   "free-1 ::= \"\" | [^ab] free-0 | \"a\" free-1 | \"b\" then\n";

static bool allows_lazy(const int *seq, int i, int t) {
    char text[4];
    for (int k = 0; k < i; k++) text[k] = (char)('a' + seq[k]);
    text[i] = (char)('a' + t);
    const char *at = memmem(text, (size_t)i + 1, "ab", 2);
    if (!at) return true;
    const size_t rest = (size_t)i + 1 - (size_t)(at + 2 - text);
    return rest == 0 || (rest == 1 && (at[2] == 'c' || at[2] == 'd')) || (rest == 2 && at[3] == 'e');
}

// The rules above are what lazy_gbnf writes for the trigger "ab" (so the chi-square is of the function's grammar).
static void check_lazy_letters_rules(void) {
    Text t = {0};
    text_add(&t, "root ::= free-0\nthen ::= [cd] \"e\"\n");
    CHECK(lazy_gbnf(&t, "free", "ab", NULL, "then") == 0, "lazy_gbnf refused \"ab\"");
    char *written = text_take(&t);
    CHECK(written && strcmp(written, LAZY_LETTERS) == 0, "lazy_gbnf wrote:\n%s", written ? written : "");
    free(written);
}

TEST(constrained_lazy_sampling_with_a_draft_matches_the_masked_target) {
    check_lazy_letters_rules();
    check_masked_sampling(LAZY_LETTERS, LETTERS, allows_lazy, DRAFT_MODEL, false, 3, "lazy");
}

// The same where a token of its own triggers too (lazy_gbnf's `token`: a special token the grammar references, spelled
// by its marker's byte F8, grammar.h): over ids a, b, c, d and that token, free until "ab" or the token, then two of
// "c" or "d" (the definition, for the reference: the text so far, the token as '#', up to the first trigger's end
// free; after it "c" and "d" only, two at most).
static const char *const MARKER_LETTERS[V_SMALL] = {"a", "b", "c", "d", "\xF8"};

static bool allows_lazy_token(const int *seq, int i, int t) {
    char text[3];
    for (int k = 0; k <= i && k < 3; k++) {
        const int id = k < i ? seq[k] : t;
        text[k] = id == 4 ? '#' : (char)('a' + id);
    }
    int end = -1;  // where the first trigger ends
    for (int k = 0; k <= i && end < 0; k++)
        if (text[k] == '#' || (k > 0 && text[k - 1] == 'a' && text[k] == 'b')) end = k + 1;
    if (end < 0 || end > i) return true;
    return i - end < 2 && (text[i] == 'c' || text[i] == 'd');
}

TEST(constrained_lazy_token_sampling_with_a_draft_matches_the_masked_target) {
    Text t = {0};
    text_add(&t, "root ::= free-0\nthen ::= [cd]{0,2}\n");
    CHECK(lazy_gbnf(&t, "free", "ab", "<[TOOL_CALLS]>", "then") == 0, "lazy_gbnf refused \"ab\"");
    char *gbnf = text_take(&t);
    if (gbnf) check_masked_sampling(gbnf, MARKER_LETTERS, allows_lazy_token, DRAFT_MODEL, false, 3,
                                    "lazy, token trigger");
    free(gbnf);
}

// The lazy test's tail, the rule `then`: `, "c": true}` (or false, a space optional after each punctuation), unless
// the trigger is one of its characters — the token-trigger half turns the trigger's one-character pieces into the
// marker, and a tail needing them could not be written (TEST_SEED=122545803326142 chose '}') — then `-x1` or `-x0`,
// whose characters are the pieces' and none of the first tail's.
static const char *lazy_tail_rule(char trigger) {
    static const char json_tail[] = ", \"c:truefals}";
    return strchr(json_tail, trigger)
               ? "then ::= \"-x\" (\"1\" | \"0\")\n"
               : "then ::= \",\" \" \"? \"\\\"c\\\":\" \" \"? (\"true\" | \"false\") \"}\"\n";
}

// The lazy test's grammar: free until the one character `trigger`, then the tail.
static Grammar *lazy_tail_grammar(char trigger) {
    Text t = {0};
    text_add(&t, "root ::= free-0\n%s", lazy_tail_rule(trigger));
    lazy_gbnf(&t, "free", (char[]){trigger, '\0'}, NULL, "then");
    char *gbnf = text_take(&t);
    Err err;
    Grammar *g = gbnf ? grammar_parse(gbnf, strlen(gbnf), "lazy.gbnf", &err) : NULL;
    CHECK(g, "%s", gbnf ? err.msg : "out of memory");
    free(gbnf);
    return g;
}

enum { LAZY_TRIALS = 12, LAZY_TOKENS = 40 };

// The lazy test's prompts, drawn once: choosing the trigger and the checks run the same trials.
typedef struct {
    int prompt[LAZY_TRIALS][8], n_prompt[LAZY_TRIALS];
} LazyPrompts;

static void lazy_prompts(LazyPrompts *lp) {
    for (int trial = 0; trial < LAZY_TRIALS; trial++)
        lp->n_prompt[trial] = random_prompt(lp->prompt[trial], trial, V_PAIR);
}

// Trial k of the lazy test: its prompt, greedy when k is even, coupled sampling at temperature 1 when odd.
static SpecParams lazy_trial(const LazyPrompts *lp, int trial, const int **prompt, int *n_prompt) {
    *prompt = lp->prompt[trial];
    *n_prompt = lp->n_prompt[trial];
    const bool coupled = trial % 2;
    return (SpecParams){.sampling = {.temperature = coupled ? 1.0f : 0.0f, .top_p = 1},
                        .sampler = coupled ? SAMPLER_COUPLED : SAMPLER_REJECTION, .policy = GAMMA_FIXED, .gamma = 4,
                        .max_tokens = LAZY_TOKENS, .eos_id = END};
}

// The trigger: a one-character piece that free target-only decoding writes, before any other piece holding its
// character, in the most greedy and coupled trials. In such a greedy trial the text under the lazy grammar is the
// free text up to the trigger (every token before it is allowed, and so is the trigger), so it meets the trigger
// whatever random pair TEST_SEED made; coupled trials, whose masked distributions differ earlier, only likely do.
// *greedy_trials says in how many greedy trials it came so — none where no greedy free text holds such a piece.
// With `anywhere`, the piece counts wherever it comes: the token-trigger half's grammar allows every character before
// the trigger's token, so a greedy trial meets that token if its free text holds the piece at all.
static char lazy_test_trigger(ModelPair *pair, const PairVocab *pv, const LazyPrompts *lp, bool anywhere,
                              int *greedy_trials) {
    *greedy_trials = 0;
    Grammar *free_text = lazy_tail_grammar('~');  // no piece holds '~'
    if (!free_text) return '7';
    int first[2][128] = {{0}};
    for (int trial = 0; trial < LAZY_TRIALS; trial++) {
        const int *prompt;
        int n_prompt, out[LAZY_TOKENS];
        const SpecParams params = lazy_trial(lp, trial, &prompt, &n_prompt);
        const int n = constrained(pair, DRAFT_NONE, free_text, pv, prompt, n_prompt, params, 7 + trial, out, "free");
        bool seen[128] = {false}, counted[128] = {false};
        for (int i = 0; i < n && out[i] != END; i++) {
            const char *piece = PIECES[out[i] % N_PIECES];
            const unsigned char c = (unsigned char)piece[0];
            if (strlen(piece) == 1 && c != '\n' && !counted[c] && (anywhere || !seen[c])) {
                first[trial % 2][c]++;
                counted[c] = true;
            }
            for (const char *p = piece; *p; p++) seen[(unsigned char)*p] = true;
        }
    }
    grammar_free(free_text);
    // The most trials of the rarer kind, then of greedy decoding's (where meeting it is certain), then of both.
    int best = '7';
    for (int c = 0; c < 128; c++) {
        const int g = first[0][c], k = first[1][c], best_g = first[0][best], best_k = first[1][best];
        const int key[3] = {g < k ? g : k, g, g + k};
        const int best_key[3] = {best_g < best_k ? best_g : best_k, best_g, best_g + best_k};
        int i = 0;
        while (i < 2 && key[i] == best_key[i]) i++;
        if (key[i] > best_key[i]) best = c;
    }
    *greedy_trials = first[0][best];
    return (char)best;
}

// Greedy speculative output and coupled sampling's equal target-only decoding's token for token under g, for every
// drafter, chains and trees; the texts read as the grammar's (constrained() checks), and some of them do meet the
// trigger (a token `triggers` says is one), so the constrained part is exercised: every greedy trial whose free
// text lazy_test_trigger saw meet it (`greedy_trials` of them), and some generation in all.
static void check_lazy_equals_target_only(ModelPair *pair, const PairVocab *pv, const LazyPrompts *lp, const Grammar *g,
                                          bool (*triggers)(const PairVocab *, int, char), char trigger,
                                          int greedy_trials, const char *label) {
    int triggered[2] = {0, 0};
    for (int trial = 0; g && trial < LAZY_TRIALS && !test_failures(); trial++) {
        const int *prompt;
        int n_prompt;
        SpecParams params = lazy_trial(lp, trial, &prompt, &n_prompt);
        const int coupled = trial % 2;
        int want[LAZY_TOKENS], got[LAZY_TOKENS];
        const int n_want = constrained(pair, DRAFT_NONE, g, pv, prompt, n_prompt, params, 7 + trial, want,
                                       "target-only");
        bool met = false;
        for (int i = 0; i < n_want; i++) met |= triggers(pv, want[i], trigger);
        triggered[coupled] += met;
        for (int kind = DRAFT_MODEL; kind < N_DRAFT_KINDS; kind++) {
            for (int width = 1; width <= 3; width += 2) {
                params.tree_width = width;
                const int n_got = constrained(pair, kind, g, pv, prompt, n_prompt, params, 7 + trial, got,
                                              DRAFT_NAMES[kind]);
                CHECK(n_got == n_want && memcmp(got, want, sizeof(int) * n_want) == 0,
                      "%s: trial %d, %s, %s, width %d: output under the lazy grammar differs from target-only's",
                      label, trial, coupled ? "coupled" : "greedy", DRAFT_NAMES[kind], width);
            }
        }
    }
    CHECK(triggered[0] >= greedy_trials && triggered[0] + triggered[1] > 0,
          "%s: the trigger '%c' met in %d greedy (at least %d expected) and %d coupled generations", label, trigger,
          triggered[0], greedy_trials, triggered[1]);
}

// Whether token t's bytes hold the character c / are the marker's byte.
static bool holds_char(const PairVocab *pv, int t, char c) {
    return memchr(pv->bytes + pv->offset[t], c, pv->offset[t + 1] - pv->offset[t]) != NULL;
}
static bool is_marker(const PairVocab *pv, int t, char c) {
    (void)c;
    return pv->offset[t + 1] - pv->offset[t] == 1 && (unsigned char)pv->bytes[pv->offset[t]] == GRAMMAR_MARKER_BYTE;
}

// Under a lazy grammar — free until a trigger the tiny target writes (lazy_test_trigger), then a tail — greedy
// speculative output and coupled sampling's equal target-only decoding's (check_lazy_equals_target_only). Then the
// same where the trigger is a token of its own (grammar.h: a special token such as [TOOL_CALLS], which the grammar
// references and the vocabulary spells by its marker's byte): the ids of the trigger's one-character piece become
// that token, and the grammar is free text, then optionally the token and the tail.
TEST(constrained_lazy_greedy_and_coupled_equal_target_only) {
    PairVocab pv;
    pair_vocab(&pv, V_PAIR, true, false);
    ModelPair pair;
    pair_open(&pair, V_PAIR, 128, 1, 0.3f);
    LazyPrompts lp;
    lazy_prompts(&lp);
    int greedy_trials;
    char trigger = lazy_test_trigger(&pair, &pv, &lp, false, &greedy_trials);
    Grammar *g = lazy_tail_grammar(trigger);
    check_lazy_equals_target_only(&pair, &pv, &lp, g, holds_char, trigger, greedy_trials, "text trigger");
    grammar_free(g);
    trigger = lazy_test_trigger(&pair, &pv, &lp, true, &greedy_trials);
    char text[160];
    snprintf(text, sizeof text, "root ::= .* (<[TRIGGER]> then)?\n%s", lazy_tail_rule(trigger));
    Err err;
    g = grammar_parse(text, strlen(text), "lazy_token.gbnf", &err);
    CHECK(g, "%s", err.msg);
    PairVocab marked = pv;
    for (int t = 0; t < V_PAIR; t++)  // (each id one byte at most: the offsets stay, the byte changes)
        if (pv.offset[t + 1] - pv.offset[t] == 1 && pv.bytes[pv.offset[t]] == trigger)
            marked.bytes[pv.offset[t]] = (char)GRAMMAR_MARKER_BYTE;
    marked.vocab.offset = marked.offset;
    marked.vocab.bytes = marked.bytes;
    marked.vocab.end_ids = marked.end;
    check_lazy_equals_target_only(&pair, &marked, &lp, g, is_marker, trigger, greedy_trials, "token trigger");
    model_pair_close(&pair);
    grammar_free(g);
}
