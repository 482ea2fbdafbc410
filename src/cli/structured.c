// structured.c — the grammar of --grammar, --json-schema and --json (structured.h).
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

// The vocabulary's bytes as the masks read them: every id's decoded bytes, but none for special tokens (never
// text) and for the ids past the tokenizer's.
static int vocabulary_bytes(Structured *st, const Tokenizer *tok, int V, Err *err) {
    const int n_tok = tokenizer_vocab_size(tok);
    st->offset = malloc(((size_t)V + 1) * sizeof *st->offset);
    st->bytes = malloc((size_t)tok->token_off[n_tok] + 1);
    if (!st->offset || !st->bytes) return err_fmt(err, "out of memory for the grammar's vocabulary");
    bool *special = calloc((size_t)V + 1, sizeof *special);
    if (!special) return err_fmt(err, "out of memory for the grammar's vocabulary");
    for (int i = 0; i < tok->n_added; i++)
        if (tok->added[i].special && tok->added[i].id >= 0 && tok->added[i].id < V) special[tok->added[i].id] = true;
    st->offset[0] = 0;
    for (int t = 0; t < V; t++) {
        size_t n = 0;
        const char *b = t < n_tok && !special[t] ? tokenizer_token(tok, t, &n) : NULL;
        if (b) memcpy(st->bytes + st->offset[t], b, n);
        st->offset[t + 1] = st->offset[t] + (uint32_t)(b ? n : 0);
    }
    free(special);
    return 0;
}

int structured_constraint(Structured *st, const Tokenizer *tok, int V, const int *end_ids, int n_end, Err *err) {
    if (st->constraint_open) grammar_constraint_free(&st->constraint);
    st->constraint_open = false;
    if (!st->offset && vocabulary_bytes(st, tok, V, err)) return -1;
    free(st->end_ids);
    st->end_ids = malloc(((size_t)n_end + 1) * sizeof *st->end_ids);
    if (!st->end_ids) return err_fmt(err, "out of memory");
    memcpy(st->end_ids, end_ids, (size_t)n_end * sizeof *end_ids);
    st->n_end = n_end;
    const Vocabulary vocab = {.V = V, .offset = st->offset, .bytes = st->bytes, .end_ids = st->end_ids,
                              .n_end = n_end};
    st->constraint_open = true;
    return grammar_constraint_init(&st->constraint, st->grammar, &vocab, err);
}

void structured_free(Structured *st) {
    if (st->constraint_open) grammar_constraint_free(&st->constraint);
    grammar_free(st->grammar);
    free(st->offset);
    free(st->bytes);
    free(st->end_ids);
    *st = (Structured){0};
}
