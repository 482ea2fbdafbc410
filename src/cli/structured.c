// structured.c — the grammar of --grammar, --json-schema and --json (structured.h).
#include "base/file.h"
#include "cli/structured.h"

#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "grammar/json_schema.h"

int structured_read(Structured *st, const char *grammar, const char *json_schema, bool json, Err *err) {
    *st = (Structured){0};
    if ((grammar != NULL) + (json_schema != NULL) + json > 1)
        return err_fmt(err, "--grammar, --json-schema and --json: give one of them");
    if (json) return (st->grammar = json_object_grammar(err)) ? 0 : -1;
    const char *path = grammar ? grammar : json_schema;
    if (!path) return 0;
    const char *start = json_schema ? json_schema + strspn(json_schema, " \t\r\n") : "";
    char *text = NULL;
    size_t len;
    if (*start == '{') {
        st->grammar = json_schema_grammar(json_schema, strlen(json_schema), "--json-schema", err);
        return st->grammar ? 0 : -1;
    }
    if (read_file(path, &text, &len, err)) return -1;
    st->grammar = grammar ? grammar_parse(text, len, path, err) : json_schema_grammar(text, len, path, err);
    free(text);
    return st->grammar ? 0 : -1;
}

int structured_constraint(Structured *st, const Tokenizer *tok, int V, const int *end_ids, int n_end, Err *err) {
    if (st->constraint_open) grammar_constraint_free(&st->constraint);
    st->constraint_open = false;
    if (!st->tokens.offset && token_bytes_init(&st->tokens, tok, V, end_ids, n_end, st->grammar, err)) return -1;
    st->constraint_open = true;
    return grammar_constraint_init(&st->constraint, st->grammar, &st->tokens.vocab, err);
}

void structured_free(Structured *st) {
    if (st->constraint_open) grammar_constraint_free(&st->constraint);
    grammar_free(st->grammar);
    token_bytes_free(&st->tokens);
    *st = (Structured){0};
}
