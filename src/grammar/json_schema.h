// json_schema.h — a JSON Schema as a GBNF grammar (grammar.h) whose sentences are JSON documents it validates.
//
// The subset that clients send for structured output (JSON Schema 2020-12's keywords, as OpenAI's and llama.cpp's
// converters take them; docs/structured.md lists it): type (one or a list); object with properties, required and
// additionalProperties (false, true, a schema, or absent: with properties listed, absent means no other keys, as
// llama.cpp's converter reads it); allOf of object schemas, merged; array with items, minItems, maxItems; string
// with minLength, maxLength, pattern (a regular expression anchored by ^…$, of literals, classes, escapes \d \w \s,
// groups, | and quantifiers), format (date, time, date-time, uuid); integer with minimum, maximum,
// exclusiveMinimum, exclusiveMaximum; number with the same bounds where they are whole numbers; boolean, null;
// anyOf and oneOf (as alternatives: oneOf's exclusivity is not enforced); $ref to "#/$defs/…" or
// "#/definitions/…" (recursion allowed); enum and const of any JSON value. {"type": "object"} alone (or `true`, or
// {}) is any JSON value of that type. Annotations (title, description, default, examples, $schema, $id, $comment)
// are read past. Every other keyword, format, or regular-expression feature is refused by name.
//
// Properties come in the schema's order (required ones first, then the optional, each optional one may be left
// out); whitespace between tokens is bounded (at most one newline and 20 spaces or tabs, the rule `ws`) and numbers
// have at most 16 digits in each part, so that a document sampled from the grammar always ends.
#ifndef SPECDEC_JSON_SCHEMA_H
#define SPECDEC_JSON_SCHEMA_H

#include <stddef.h>

#include "base/error.h"
#include "grammar/grammar.h"

// The GBNF text of schema text[0..n) (JSON), malloc'd, its start rule `root`. `source` names the schema in messages
// ("schema.json"); a refusal names the keyword and where it is (a JSON pointer). NULL with err set on refusal.
char *json_schema_to_gbnf(const char *text, size_t n, const char *source, Err *err);

// The grammar of schema text[0..n): json_schema_to_gbnf, then grammar_parse. NULL with err set.
Grammar *json_schema_grammar(const char *text, size_t n, const char *source, Err *err);

// The grammar of any JSON object (what `--json` and response_format {"type": "json_object"} ask for).
Grammar *json_object_grammar(Err *err);

#endif
