// regex.h — a JSON Schema `pattern` (a regular expression) as a GBNF expression over a JSON string's contents
// (regex.c has the subset).
#ifndef SPECDEC_GRAMMAR_REGEX_H
#define SPECDEC_GRAMMAR_REGEX_H

#include <stdio.h>

#include "base/error.h"
#include "grammar/text.h"

// Appends to out a GBNF expression (one item) matching the JSON-escaped text of the strings that pattern matches
// whole. `where` names the schema location in messages. -1 with err set when pattern leaves the subset.
int regex_to_gbnf(Text *out, const char *pattern, const char *where, Err *err);

#endif
