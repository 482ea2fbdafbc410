// text.h — a growing string for writing grammars (json_schema.c, regex.c): appends never fail loudly, they set
// `failed` (out of memory), which the writer checks once at the end.
#ifndef SPECDEC_GRAMMAR_TEXT_H
#define SPECDEC_GRAMMAR_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *s;        // NUL-terminated once anything was added
    size_t n, cap;
    bool failed;
} Text;

void text_add(Text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Appends a GBNF literal of bytes s[0..n): quoted, with \" \\ and \xHH for control bytes.
void text_literal(Text *t, const char *s, size_t n);
// Appends code point cp as it may stand inside a GBNF character class (escaped where the class syntax needs it).
void text_class_char(Text *t, uint32_t cp);
// The string, handed over (the caller frees it); NULL if an append failed. t is left empty.
char *text_take(Text *t);

#endif
