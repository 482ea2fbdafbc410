// json_schema.c — fuzz target: a JSON Schema → json_schema_to_gbnf (src/grammar/json_schema.c, regex.c). A refusal
// must leave one clean line; an accepted schema's GBNF must parse (grammar_parse: the converter writes only grammars
// the parser takes) and give a state to start from.
#include "fuzz.h"

#include "grammar/json_schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Err err = {""};
    char *gbnf = json_schema_to_gbnf((const char *)data, size, "fuzz.json", &err);
    if (!gbnf) {
        fuzz_check_message(&err);
        return 0;
    }
    Grammar *g = grammar_parse(gbnf, strlen(gbnf), "converted", &err);
    if (!g) fuzz_fail("the converter wrote a grammar the parser refuses: %s\n%s", err.msg, gbnf);
    GrammarState s = {0};
    if (grammar_state_init(&s, g, &err) < 0) fuzz_fail("no start state: %s", err.msg);
    grammar_state_free(&s);
    grammar_free(g);
    free(gbnf);
    return 0;
}
