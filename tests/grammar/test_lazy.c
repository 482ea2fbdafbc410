// test_lazy.c — text free until a trigger, then a grammar (src/grammar/lazy.h): the rules of the trigger's KMP
// automaton recognise exactly what the definition says — every text over the trigger's characters and two others up
// to 8 characters, for triggers whose failures go back in different ways — and the parse stays flat however long
// the free text.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "grammar/lazy.h"
#include "harness.h"

// The definition: s is a sentence when it holds no trigger, or when its first trigger ends just before a final "!"
// (the grammar after the trigger: then ::= "!").
static bool lazy_reference(const char *trigger, const char *s, size_t n) {
    const char *at = memmem(s, n, trigger, strlen(trigger));
    return !at || ((size_t)(at - s) + strlen(trigger) + 1 == n && s[n - 1] == '!');
}

static Grammar *lazy_grammar(const char *trigger) {
    Text t = {0};
    text_add(&t, "root ::= free-0\nthen ::= \"!\"\n");
    CHECK(lazy_gbnf(&t, "free", trigger, NULL, "then") == 0, "trigger \"%s\" refused", trigger);
    char *gbnf = text_take(&t);
    Err err = {""};
    Grammar *g = gbnf ? grammar_parse(gbnf, strlen(gbnf), "lazy.gbnf", &err) : NULL;
    CHECK(g, "%s\n%s", err.msg, gbnf ? gbnf : "");
    free(gbnf);
    return g;
}

TEST(lazy_grammar_is_free_until_the_trigger) {
    static const char *const triggers[] = {"<tool_call>", "abab", "aab", "aba", "a", "[TOOL_CALLS]"};
    for (size_t i = 0; i < sizeof triggers / sizeof *triggers && !test_failures(); i++) {
        const char *trigger = triggers[i];
        Grammar *g = lazy_grammar(trigger);
        if (!g) continue;
        // the alphabet: the trigger's first two distinct characters, "!" and a two-byte character
        char alphabet[4][3] = {{trigger[0]}, {0}, "!", "\xC3\xA9"};
        const char *other = strpbrk(trigger, trigger[0] == 'a' ? "b<_" : "t_O");
        alphabet[1][0] = other ? *other : 'x';
        char s[6 * 2 + 1];
        int checked = 0;
        for (int len = 0; len <= 6; len++) {
            int count = 1;
            for (int k = 0; k < len; k++) count *= 4;
            for (int code = 0; code < count && !test_failures(); code++) {
                size_t n = 0;
                for (int k = 0, c = code; k < len; k++, c /= 4) {
                    memcpy(s + n, alphabet[c % 4], strlen(alphabet[c % 4]));
                    n += strlen(alphabet[c % 4]);
                }
                const bool want = lazy_reference(trigger, s, n);
                CHECK(grammar_recognises(g, s, n) == want, "trigger \"%s\", text \"%.*s\": %s by the grammar", trigger,
                      (int)n, s, want ? "refused" : "accepted");
                checked++;
            }
        }
        // the trigger itself, in longer text, and text around near-misses of it
        char text[256];
        snprintf(text, sizeof text, "%.*s %s%s!", (int)strlen(trigger) - 1, trigger, trigger, trigger);
        CHECK(!grammar_recognises(g, text, strlen(text)), "text after the grammar's part accepted: %s", text);
        snprintf(text, sizeof text, "%.*s x %s!", (int)strlen(trigger) - 1, trigger, trigger);
        CHECK(grammar_recognises(g, text, strlen(text)), "a near-miss then the trigger refused: %s", text);
        CHECK(checked > 5000, "%d texts", checked);
        grammar_free(g);
    }
    Text t = {0};
    CHECK(lazy_gbnf(&t, "free", "", NULL, "then") == -1 && lazy_gbnf(&t, "free", "a\nb", NULL, "then") == -1 &&
              lazy_gbnf(&t, "free", "\xC3\xA9", NULL, "then") == -1 && t.n == 0,
          "triggers outside printable ASCII taken");
    free(text_take(&t));
}

// Free text is a tail call in every state: reading a long text keeps one short stack.
TEST(lazy_grammar_keeps_its_parse_flat) {
    Grammar *g = lazy_grammar("<tool_call>");
    if (!g) return;
    GrammarState s = {0}, next = {0};
    Err err;
    CHECK(grammar_state_init(&s, g, &err) == 0, "%s", err.msg);
    int cells_then = 0;  // after the first round of the text
    for (int i = 0; i < 13 * 1500; i++) {
        const char c = "<tool_cal x\xC3\xA9"[i % 13];
        CHECK(grammar_accept_byte(&s, (unsigned char)c, &next), "byte %d refused", i);
        if (i == 12) cells_then = s.start[s.n_stacks];
    }
    // one stack per alternative of the state's rule (the trigger's 8 distinct characters, the rest, the end)
    CHECK(s.n_stacks <= 10 && s.start[s.n_stacks] == cells_then && grammar_may_end(&s), "%d stacks, %d cells (%d)",
          s.n_stacks, s.start[s.n_stacks], cells_then);
    grammar_state_free(&s);
    grammar_state_free(&next);
    grammar_free(g);
}
