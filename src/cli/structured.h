// structured.h — the grammar a generation runs under (docs/structured.md): --grammar FILE (GBNF), --json-schema
// FILE or inline JSON, --json (any JSON object), made into the scheduler's constraint over the tokenizer's
// vocabulary (src/grammar/mask.h, vocabulary.h).
#ifndef SPECDEC_CLI_STRUCTURED_H
#define SPECDEC_CLI_STRUCTURED_H

#include <stdbool.h>

#include "grammar/vocabulary.h"

typedef struct {
    Grammar *grammar;           // NULL: no grammar asked for
    TokenBytes tokens;
    GrammarConstraint constraint;
    bool constraint_open;
} Structured;

// Reads the grammar the options ask for (at most one of grammar, json_schema, json; none: st->grammar NULL).
// json_schema is inline JSON when it starts with '{' (after spaces), else a file. -1 with err naming the file or
// the schema's keyword.
int structured_read(Structured *st, const char *grammar, const char *json_schema, bool json, Err *err);

// The constraint for one generation of a model with V ids (the tokenizer's and any padding after them), ending at
// end_ids[0..n_end): a fresh state at the grammar's start. Called again, it starts over.
int structured_constraint(Structured *st, const Tokenizer *tok, int V, const int *end_ids, int n_end, Err *err);

void structured_free(Structured *st);

#endif
