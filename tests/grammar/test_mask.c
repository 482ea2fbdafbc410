// test_mask.c — token masks (src/grammar/mask.c) against a brute-force check of every token: from random states of
// small grammars (reached by random allowed tokens), the mask allows token t exactly when a copy of the state reads
// all of t's bytes, the end token exactly where the grammar may end, and a token without bytes never; then the
// constraint's masked logits and its commits.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"
#include "grammar/mask.h"
#include "harness.h"

// A small vocabulary: bytes, words, pieces of JSON, characters split across tokens (é = C3 A9, € = E2 82 AC), an
// end token and a special token (no bytes).
static const char *const TOKENS[] = {
    "a", "b", "c", "x", "y", "z", "0", "1", "7", "9", "-", "+", ".", "e", " ", "\n", "\t", "\"", "\\", ":", ",", "{",
    "}", "[", "]", "ab", "abc", "xyz", "12", "007", "\": ", "{\"", "\"}", "\",", "\", \"", "true", "false", "null",
    "tr", "ue", "nu", "ll", "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82", "\xac", "\xe2\x82\xac", "a\xc3", "\xa9z",
    "name", "age", "\"name", "\"age\"", " {", "} ", "],", "\\n", "\\\"", "\\u00e9", "", "",
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

// Walks random allowed tokens from the start of g, checking every mask on the way; returns the masks checked.
static int check_walks(const Grammar *g, const char *what) {
    static uint32_t offset[V + 1];
    static char bytes[1024];
    static const int end[] = {END};
    Vocabulary vocab;
    make_vocab(&vocab, offset, bytes, end);
    GrammarMasker m;
    Err err;
    CHECK(grammar_masker_init(&m, g, &vocab, &err) == 0, "%s", err.msg);
    int checked = 0;
    for (int walk = 0; walk < 20; walk++) {
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
            CHECK(grammar_accept_token(&m, &s, allowed[test_rand_int(0, n_allowed - 1)], &scratch), "%s", what);
        }
        grammar_state_free(&s);
        grammar_state_free(&scratch);
    }
    CHECK(m.hits > 0, "%s: the cache never served a mask", what);
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
        if (g) checked += check_walks(g, grammars[i]);
        grammar_free(g);
    }
    const char schema[] = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": "
                          "{\"type\": \"integer\", \"minimum\": 0}}, \"required\": [\"name\", \"age\"]}";
    Err err;
    Grammar *g = json_schema_grammar(schema, sizeof schema - 1, "schema.json", &err);
    CHECK(g, "%s", err.msg);
    if (g) checked += check_walks(g, "schema");
    grammar_free(g);
    CHECK(checked > 200, "only %d masks checked", checked);
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
