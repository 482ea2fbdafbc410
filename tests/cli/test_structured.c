// test_structured.c — specdec generate under a grammar (--grammar, --json-schema, --json; docs/structured.md) on the
// shipped pair: greedy output the same speculative (draft model, lookup, a tree) as target-only (--compare), and a
// document the grammar recognises whole where generation ended before -n; the options' refusals.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "grammar/json_schema.h"
#include "harness.h"

#define PAIR "-m weights/pystd/target -d weights/pystd/draft"
#define SCHEMA "'{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, " \
               "\"id\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 999}}, \"required\": [\"name\", \"id\"], " \
               "\"additionalProperties\": false}'"

// Whether g recognises text whole (the newline that generate prints after it aside).
static bool recognised(const Grammar *g, const char *text) {
    size_t n = strlen(text);
    return grammar_recognises(g, text, n > 0 && text[n - 1] == '\n' ? n - 1 : n);
}

TEST(cli_json_schema_output_validates_and_matches_target_only) {
    const char schema[] = "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 12}, "
                          "\"id\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 999}}, \"required\": [\"name\", "
                          "\"id\"], \"additionalProperties\": false}";
    Err e;
    Grammar *g = json_schema_grammar(schema, sizeof schema - 1, "schema", &e);
    CHECK(g, "%s", e.msg);
    static const char *const drafting[] = {"", "--lookup", "--tree-width 3", "--sampler coupled --temp 0.8 --seed 5"};
    for (size_t i = 0; i < sizeof drafting / sizeof *drafting && g; i++) {
        char args[1024], *out, *err;
        snprintf(args, sizeof args, "generate " PAIR " -p \"record = \" -n 80 %s --compare --stats --json-schema "
                 SCHEMA, drafting[i][0] ? drafting[i] : "--temp 0");
        CHECK(run_specdec(args, &out, &err) == 0, "%s: %s", drafting[i], err);
        CHECK(strstr(err, "\"same_output\": true"), "%s: speculative output differs from target-only's: %s",
              drafting[i], err);
        CHECK(recognised(g, out), "%s: the output is not a document of the schema: %s", drafting[i], out);
        free(out);
        free(err);
    }
    grammar_free(g);
}

TEST(cli_grammar_file_and_json) {
    char path[] = "/tmp/specdec-grammar-XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    const char gbnf[] = "root ::= (\"yes\" | \"no\") \".\"\n";
    CHECK(write(fd, gbnf, sizeof gbnf - 1) == (ssize_t)(sizeof gbnf - 1), "write");
    close(fd);
    char args[512], *out, *err;
    snprintf(args, sizeof args, "generate " PAIR " -p \"# is 7 prime? \" -n 20 --temp 0 --grammar %s", path);
    CHECK(run_specdec(args, &out, &err) == 0 && (!strcmp(out, "yes.\n") || !strcmp(out, "no.\n")), "got \"%s\" %s",
          out, err);
    free(out), free(err);
    // Refusals: a grammar's syntax error with its line and column, two grammars at once, a schema keyword.
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("root ::= \"a\"\nitem ::= [z-a]\n", f) >= 0, "rewrite");
    if (f) fclose(f);
    snprintf(args, sizeof args, "generate " PAIR " -p x --grammar %s", path);
    CHECK(run_specdec(args, &out, &err) == 2 && strstr(err, ":2:11: character range runs backwards"), "%s", err);
    free(out), free(err);
    snprintf(args, sizeof args, "generate " PAIR " -p x --grammar %s --json", path);
    CHECK(run_specdec(args, &out, &err) == 2 && strstr(err, "give one of them"), "%s", err);
    free(out), free(err);
    CHECK(run_specdec("generate " PAIR " -p x --json-schema '{\"not\": {}}'", &out, &err) == 2 &&
              strstr(err, "the keyword 'not' is not supported"), "%s", err);
    free(out), free(err);
    unlink(path);
    CHECK(run_specdec("generate " PAIR " -p \"data = \" -n 30 --temp 0 --json", &out, &err) == 0 && out[0] == '{',
          "--json: \"%s\" %s", out, err);
    free(out), free(err);
}
