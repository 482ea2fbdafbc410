// test_grammar.c — GBNF (src/grammar/gbnf.c) and its recogniser (recognise.c): a conformance table of grammars with
// documents they must accept and documents they must refuse, the parser's refusals with their line and column, and
// the recogniser's byte-level promises (UTF-8 split anywhere, "may end" and "must end", a refused byte changes
// nothing).
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "harness.h"

static Grammar *parse(const char *text) {
    Err err = {""};
    Grammar *g = grammar_parse(text, strlen(text), "test.gbnf", &err);
    CHECK(g, "grammar refused: %s\n%s", err.msg, text);
    return g;
}

static const struct {
    const char *grammar;
    const char *valid[8], *invalid[8];
} conformance[] = {
    {"root ::= \"abc\"", {"abc"}, {"", "ab", "abcd", "abd"}},
    {"root ::= \"a\" | \"bc\" | \"\"", {"a", "bc", ""}, {"b", "abc", "c"}},
    {"root ::= [a-c]+ [0-9]*", {"a", "abc9", "cc00"}, {"", "9", "ad", "a9a"}},
    {"root ::= [^a-z\\n]", {"A", "0", "é", "\xf0\x9f\x98\x80"}, {"a", "z", "\n", "AB", ""}},
    {"root ::= [d-fa-cbx]+ [^a-cd-fz]", {"abcdefx!", "xy"}, {"a", "xz", "xe", "g"}},
    {"root ::= .", {"x", "\n", "\xe2\x82\xac"}, {"", "xy", "\xe2\x82"}},
    {"root ::= \"x\"?  \"y\"{2,3} \"z\"{2} \"w\"{1,}", {"yyzzw", "xyyyzzwww"}, {"yzzw", "yyyyzzw", "yyzw", "yyzz"}},
    {"root ::= \"a\"{,2} \"b\"{0}", {"", "a", "aa"}, {"aaa", "b"}},
    {"root ::= (\"ab\" | \"c\")* \"!\"", {"!", "ab!", "cabc!"}, {"a!", "abab", "b!"}},
    {"# a comment\nroot ::= item (\",\" item)*   # items\nitem ::= [0-9]+\n", {"1", "1,22,333"}, {"", "1,", ",1"}},
    {"root ::= (\n  \"a\"\n  | \"b\"\n)\n", {"a", "b"}, {"ab", ""}},
    {"root ::= \"\\x41\\u00e9\\U0001F600\\t\\\"\\\\\"", {"A\xc3\xa9\xf0\x9f\x98\x80\t\"\\"}, {"A"}},
    {"root ::= [\\]\\[\\-\\\\]+", {"]", "[-\\"}, {"a", ""}},
    {"root ::= [\\x00-\\x7f\\u0100-\\U0010FFFF]", {"a", "\xc4\x80", "\xf4\x8f\xbf\xbf"}, {"\xc3\xa9", "\xc2\x80"}},
    {"root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= str \":\" ws str ws\nstr ::= \"\\\"\" [^\"]* \"\\\"\"\n"
     "ws ::= [ ]?",
     {"{}", "{ \"a\": \"b\"}", "{\"a\":\"b\" , \"c\": \"\"}"}, {"{", "{\"a\"}", "{\"a\":\"b\",}", "{  }"}},
    {"root ::= expr\nexpr ::= term ([+-] term)*\nterm ::= num | \"(\" expr \")\"\nnum ::= [0-9]+",
     {"1", "1+2-3", "(1+(2))-3"}, {"(1", "1+", "()", "1)"}},
    {"root ::= \"a\" root \"b\" | \"\"", {"", "ab", "aaabbb"}, {"a", "aab", "ba"}},
};

TEST(grammar_conformance_table) {
    for (size_t t = 0; t < sizeof conformance / sizeof *conformance; t++) {
        Grammar *g = parse(conformance[t].grammar);
        if (!g) continue;
        for (int i = 0; conformance[t].valid[i]; i++)
            CHECK(grammar_recognises(g, conformance[t].valid[i], strlen(conformance[t].valid[i])),
                  "grammar %zu refused valid \"%s\"", t, conformance[t].valid[i]);
        for (int i = 0; conformance[t].invalid[i]; i++)
            CHECK(!grammar_recognises(g, conformance[t].invalid[i], strlen(conformance[t].invalid[i])),
                  "grammar %zu accepted invalid \"%s\"", t, conformance[t].invalid[i]);
        grammar_free(g);
    }
}

static const struct {
    const char *grammar, *message;
} refusals[] = {
    {"root ::= \"a\"\nroot ::= \"b\"", "test.gbnf:2:1: rule 'root' is defined twice"},
    {"root ::= item", "test.gbnf:1:10: rule 'item' is used but not defined"},
    {"item ::= \"a\"", "test.gbnf: no rule named 'root'"},
    {"root = \"a\"", "test.gbnf:1:6: expected '::=' after the rule name 'root'"},
    {"root ::= \"abc", "test.gbnf:1:10: unterminated string literal"},
    {"root ::= [abc", "test.gbnf:1:10: unterminated character class"},
    {"root ::= []", "test.gbnf:1:10: empty character class"},
    {"root ::= [z-a]", "test.gbnf:1:11: character range runs backwards"},
    {"root ::= \"\\q\"", "test.gbnf:1:11: unknown escape '\\q'"},
    {"root ::= \"\\x4\"", "test.gbnf:1:11: expected 2 hexadecimal digits"},
    {"root ::= \"\\uD800\"", "test.gbnf:1:11: escape U+D800 is not a Unicode scalar value"},
    {"root ::= (\"a\"", "test.gbnf:1:10: '(' is not closed by ')'"},
    {"root ::= \"a\")", "test.gbnf:1:13: ')' without '('"},
    {"root ::= * \"a\"", "test.gbnf:1:10: '*' does not follow an item to repeat"},
    {"root ::= \"a\"{3,2}", "test.gbnf:1:13: repetition {3,2}: the maximum is below the minimum"},
    {"root ::= \"a\"{2001}", "test.gbnf:1:14: repetition count above 2000"},
    {"root ::= \"a\"{2", "test.gbnf:1:15: expected '}'"},
    {"root ::= <[151657]>", "test.gbnf:1:10: token references by number ('<[ID]>') are not supported"},
    {"root ::= !<think>", "test.gbnf:1:10: negated token references ('!<…>') are not supported"},
    {"root ::= <think", "test.gbnf:1:10: a token reference is '<' and the token's text"},
    {"root ::= <a b>", "test.gbnf:1:10: a token reference is '<' and the token's text"},
    {"root ::= <a> <b> <c> <d> <e> <f> <g> <h> <i>", "test.gbnf:1:42: more than 8 different tokens referenced"},
    {"root ::= root \"a\" | \"b\"", "test.gbnf:1:1: rule 'root' is left-recursive"},
    {"root ::= x\nx ::= \"\"? y\ny ::= x \"a\"", "rule 'x' is left-recursive"},
    {"root ::= (\"a\"?)*", "test.gbnf:1:16: rule 'root/3' is left-recursive"},
    {"root ::= \"a\" $", "test.gbnf:1:14: unexpected '$' in rule 'root'"},
    {"root ::= x\nx ::= (\"\"? \"b\"?){0,2000} x", "rule 'x' is left-recursive"},
    {"root ::= \"\xff\"", "test.gbnf:1:11: invalid UTF-8"},
    {"\n\n  root ::= \"é\" \"\xe9\"", "test.gbnf:3:17: invalid UTF-8"},
};

TEST(grammar_refusals_name_line_and_column) {
    for (size_t t = 0; t < sizeof refusals / sizeof *refusals; t++) {
        Err err = {""};
        Grammar *g = grammar_parse(refusals[t].grammar, strlen(refusals[t].grammar), "test.gbnf", &err);
        CHECK(!g, "accepted: %s", refusals[t].grammar);
        CHECK(strstr(err.msg, refusals[t].message), "refusal %zu: got \"%s\", want \"%s\"", t, err.msg,
              refusals[t].message);
        grammar_free(g);
    }
}

// A grammar's size is bounded once its repetitions are written out: 33 items of {0,2000} need 66000 rules.
TEST(grammar_refuses_too_many_rules) {
    char text[1024] = "root ::=";
    for (int i = 0; i < 33; i++) strcat(text, " \"a\"{0,2000}");
    Err err = {""};
    Grammar *g = grammar_parse(text, strlen(text), "test.gbnf", &err);
    CHECK(!g && strstr(err.msg, "test.gbnf: more than 65536 rules"), "got \"%s\"", err.msg);
    grammar_free(g);
}

// A repetition of a repetition is written out as rules that refer to each other, not as copies: its size adds up,
// (x{m}){n} costs about m + n elements where its language's sentence is m·n characters long, so ("a"{1000}){1000}
// and even (("a"{2000}){2000}){2000} compile small and fast; what does grow with the counts ({0,n} chains, literals
// written out) meets MAX_ELEMENTS and the 65536 rules, refused by name. Read exactly: (("a"{10}){20}){3}.
TEST(grammar_nested_repetition_adds_up) {
    static const char *const nested[] = {"root ::= (\"a\"{1000}){1000}", "root ::= ((\"a\"{2000}){2000}){2000}"};
    for (int i = 0; i < 2; i++) {
        Grammar *g = parse(nested[i]);
        CHECK(g && g->n_elements < 8000 && g->n_rules < 8, "%s: %d elements, %d rules", nested[i],
              g ? g->n_elements : -1, g ? g->n_rules : -1);
        grammar_free(g);
    }
    Grammar *g = parse("root ::= ((\"a\"{10}){20}){3}");
    char text[601];
    memset(text, 'a', sizeof text);
    CHECK(g && grammar_recognises(g, text, 600) && !grammar_recognises(g, text, 601) &&
              !grammar_recognises(g, text, 599), "((\"a\"{10}){20}){3} is not exactly 600 a's");
    grammar_free(g);
}

// A character's bytes are read one at a time: the state between them admits only bytes that can still complete a
// character the grammar allows there.
TEST(grammar_reads_utf8_byte_by_byte) {
    Grammar *g = parse("root ::= [\\u00e0-\\u00ef] | \"\\u20ac\"");  // à..ï (C3 A0..C3 AF) or € (E2 82 AC)
    if (!g) return;
    GrammarState s = {0}, next = {0};
    Err err;
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    CHECK(!grammar_accept_byte(&s, 0xC4, &next), "C4 begins no allowed character");
    CHECK(grammar_accept_byte(&s, 0xC3, &next), "C3 begins à");
    CHECK(!grammar_may_end(&s), "may end inside a character");
    CHECK(!grammar_accept_byte(&s, 0x9F, &next), "C3 9F is ß, not allowed");
    CHECK(!grammar_accept_byte(&s, 0x41, &next), "A is not a continuation byte");
    CHECK(grammar_accept_byte(&s, 0xA9, &next) && grammar_must_end(&s), "é read, and nothing may follow");
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    CHECK(grammar_accept_bytes(&s, "\xe2\x82", 2, &next) && !grammar_accept_byte(&s, 0xAD, &next) &&
              grammar_accept_byte(&s, 0xAC, &next) && grammar_must_end(&s), "€ read byte by byte");
    grammar_state_free(&s);
    grammar_state_free(&next);
    grammar_free(g);
    // Overlong forms, surrogates and code points past U+10FFFF are refused even by "any character".
    g = parse("root ::= .*");
    if (!g) return;
    const char *bad[] = {"\xc0\x80", "\xe0\x80\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf8", "\x80"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        CHECK(!grammar_recognises(g, bad[i], strlen(bad[i])), "accepted ill-formed UTF-8 %zu", i);
    CHECK(grammar_recognises(g, "a\0b", 3), "NUL is a character");
    grammar_free(g);
}

// The state after a character's first bytes reads r1 and r2 (each of a 3- and a 4-byte character) and compares them.
static bool same_state_after(const Grammar *g, const char *r1, const char *r2) {
    GrammarState a = {0}, b = {0}, next = {0};
    Err err;
    bool same = grammar_state_init(&a, g, &err) == 0 && grammar_state_init(&b, g, &err) == 0 &&
                grammar_accept_bytes(&a, r1, strlen(r1), &next) && grammar_accept_bytes(&b, r2, strlen(r2), &next) &&
                grammar_state_hash(&a) == grammar_state_hash(&b) && grammar_state_equal(&a, &b);
    grammar_state_free(&a);
    grammar_state_free(&b);
    grammar_state_free(&next);
    return same;
}

// Inside a character whose code point no longer matters to any parse (every class admits all of what the bytes so
// far can finish, or none of it), the bytes read are forgotten: such states are one, and the masks' walk meets few.
TEST(grammar_partial_characters_merge_where_the_code_point_no_longer_matters) {
    Grammar *g = parse("root ::= [^\"]{0,3}");
    if (!g) return;
    CHECK(same_state_after(g, "\xe4\xb8", "\xe4\xb9"), "U+4E00.. and U+4E40.. both read by [^\"]");
    CHECK(same_state_after(g, "\xf0\x9f\x98", "\xf0\x90\x80"), "two 4-byte characters' first three bytes");
    CHECK(same_state_after(g, "\xf0\x9f", "\xf1\x80"), "two 4-byte characters' first two bytes");
    CHECK(!same_state_after(g, "\xe4", "\xe5"), "after a first byte alone, which bytes may follow differs");
    CHECK(grammar_recognises(g, "\xe4\xb8\x80\xf0\x9f\x98\x80x", 8) && !grammar_recognises(g, "\xe4\xb8\x41", 3) &&
              !grammar_recognises(g, "\xe4\xb8\x80\xe4\xb8\x80\xe4\xb8\x80\xe4\xb8\x80", 12),
          "characters still read whole, and counted");
    grammar_free(g);
    g = parse("root ::= \"\\u4e01\" \"a\" | [^\"] \"b\"");  // U+4E01 is E4 B8 81: the class splits E4 B8's range
    if (!g) return;
    CHECK(!same_state_after(g, "\xe4\xb8", "\xe4\xb9"), "a parse tells U+4E00.. from U+4E40..");
    CHECK(grammar_recognises(g, "\xe4\xb8\x81" "a", 4) && grammar_recognises(g, "\xe4\xb8\x82" "b", 4) &&
              grammar_recognises(g, "\xe4\xb8\x81" "b", 4) && !grammar_recognises(g, "\xe4\xb8\x82" "a", 4),
          "the literal's parse kept apart from the class's");
    grammar_free(g);
}

TEST(grammar_may_end_and_must_end) {
    Grammar *g = parse("root ::= \"ab\" \"c\"?");
    if (!g) return;
    GrammarState s = {0}, next = {0}, saved = {0};
    Err err;
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    CHECK(!grammar_may_end(&s) && !grammar_must_end(&s), "at the start");
    CHECK(grammar_accept_bytes(&s, "ab", 2, &next), "ab");
    CHECK(grammar_may_end(&s) && !grammar_must_end(&s), "after ab: may end, may go on");
    CHECK(grammar_state_copy(&saved, &s) == 0, "copy");
    CHECK(!grammar_accept_byte(&s, 'd', &next) && grammar_state_equal(&s, &saved) &&
              grammar_state_hash(&s) == grammar_state_hash(&saved), "a refused byte leaves the state as it was");
    CHECK(grammar_accept_byte(&s, 'c', &next) && grammar_must_end(&s), "after abc: must end");
    CHECK(!grammar_state_equal(&s, &saved), "states after ab and abc differ");
    CHECK(grammar_state_copy(&s, &saved) == 0 && grammar_may_end(&s) && !grammar_must_end(&s), "rolled back");
    grammar_state_free(&s);
    grammar_state_free(&next);
    grammar_state_free(&saved);
    grammar_free(g);
}

// Repetition is a tail call: reading a long run leaves the stacks as deep as after the first item.
TEST(grammar_repetition_keeps_stacks_flat) {
    Grammar *g = parse("root ::= (\"[\" item \"]\")*\nitem ::= [a-z]*");
    if (!g) return;
    GrammarState s = {0}, next = {0};
    Err err;
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    CHECK(grammar_accept_bytes(&s, "[ab]", 4, &next), "first item");
    int cells = s.start[s.n_stacks];
    for (int i = 0; i < 1000; i++) CHECK(grammar_accept_bytes(&s, "[xyz]", 5, &next), "item %d", i);
    CHECK(s.start[s.n_stacks] == cells, "cells grew from %d to %d", cells, s.start[s.n_stacks]);
    grammar_state_free(&s);
    grammar_state_free(&next);
    grammar_free(g);
}

// Token references (grammar.h): each token named once is a marker, its character GRAMMAR_MARKER_BASE + k read from
// the byte GRAMMAR_MARKER_BYTE + k; `<…>` keeps its brackets, `<[…]>` names the bracketed text; no class admits a
// marker, `.` and negated ones included, and no UTF-8 text spells one.
TEST(grammar_token_references_are_markers) {
    Grammar *g = parse("root ::= .* (<[TOOL_CALLS]> \" [\" [^\\]]* \"]\" | <|python_tag|> .*)?\n"
                       "other ::= <[TOOL_CALLS]>");
    if (!g) return;
    CHECK(g->n_markers == 2 && !strcmp(g->markers[0], "[TOOL_CALLS]") && !strcmp(g->markers[1], "<|python_tag|>"),
          "markers: %d, %s", g->n_markers, g->n_markers ? g->markers[0] : "");
    static const char *const valid[] = {"", "text", "text\xF8 [x]", "\xF8 []", "\xF9", "a\xF9 any \xe2\x82\xac"};
    static const char *const invalid[] = {"\xF8", "\xF8[x]", "\xF8 [\xF9]", "\xF8 [x]\xF8", "\xF9\xF8", "\xFA",
                                          "a\xF8\xF8 []", "\xF8 [x]\xF9"};
    for (size_t i = 0; i < sizeof valid / sizeof *valid; i++)
        CHECK(grammar_recognises(g, valid[i], strlen(valid[i])), "refused valid %zu", i);
    for (size_t i = 0; i < sizeof invalid / sizeof *invalid; i++)
        CHECK(!grammar_recognises(g, invalid[i], strlen(invalid[i])), "accepted invalid %zu", i);
    grammar_free(g);
    // A marker byte inside a character is no continuation byte.
    g = parse("root ::= <tool_call> | \"\\u00e9\"");
    if (!g) return;
    CHECK(grammar_recognises(g, "\xF8", 1) && !grammar_recognises(g, "\xC3\xF8", 2) &&
              !grammar_recognises(g, "<tool_call>", 11), "<tool_call> is its marker only");
    grammar_free(g);
}
