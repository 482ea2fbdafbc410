// grammar.c — fuzz target: GBNF text → grammar_parse (src/grammar/gbnf.c), then a document read by the recogniser
// (recognise.c). The input is the grammar, FUZZ_SEPARATOR, the document (absent: the grammar alone). A refused
// grammar must leave one clean line naming where; an accepted one must give a state at the start and read the
// document byte by byte keeping the recogniser's promises: a refused byte leaves the state equal to what it was
// (same hash), a copy is equal to its original, and "must end" implies "may end" and that no byte is accepted.
#include "fuzz.h"

#include "grammar/grammar.h"

static void check_must_end(GrammarState *s, GrammarState *probe, GrammarState *next) {
    if (!grammar_must_end(s)) return;
    if (!grammar_may_end(s)) fuzz_fail("must end but may not end");
    for (int b = 0; b < 256; b++) {
        if (grammar_state_copy(probe, s) < 0) fuzz_fail("out of memory");
        if (grammar_accept_byte(probe, (unsigned char)b, next)) fuzz_fail("must end, yet byte %02x was accepted", b);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    Err err = {""};
    Grammar *g = grammar_parse((const char *)parts[0].data, parts[0].size, "fuzz.gbnf", &err);
    if (!g) {
        fuzz_check_message(&err);
        return 0;
    }
    GrammarState s = {0}, before = {0}, next = {0};
    if (grammar_state_init(&s, g, &err) < 0) {
        fuzz_check_message(&err);
    } else if (n == 2) {
        for (size_t i = 0; i < parts[1].size; i++) {
            if (grammar_state_copy(&before, &s) < 0) fuzz_fail("out of memory");
            if (!grammar_state_equal(&before, &s)) fuzz_fail("a copy differs from its original");
            if (!grammar_accept_byte(&s, parts[1].data[i], &next)) {
                if (!grammar_state_equal(&before, &s) || grammar_state_hash(&before) != grammar_state_hash(&s))
                    fuzz_fail("refused byte %zu changed the state", i);
                break;
            }
        }
        check_must_end(&s, &before, &next);
    }
    grammar_state_free(&s);
    grammar_state_free(&before);
    grammar_state_free(&next);
    grammar_free(g);
    return 0;
}
