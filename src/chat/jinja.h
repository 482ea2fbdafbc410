// jinja.h — a small Jinja interpreter for chat templates, configured as Hugging Face transformers configures
// Jinja2 for them (an ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols
// extension; the globals raise_exception and strftime_now; transformers' tojson filter).
//
// The subset is the one published chat templates use: text and {{ expressions }}; {% if/elif/else %}; {% for %}
// with an optional `if` filter, `else`, unpacking (`for k, v in d.items()`), loop.index/index0/revindex/revindex0/
// first/last/length/previtem/nextitem, {% break %} and {% continue %}; {% set name = expr %} and
// {% set ns.attr = expr %} with namespace(); transformers' {% generation %} block (rendered as its body);
// comments; whitespace control ({%- -%}, {{- -}}, {#- -#}, and `+` to keep). Expressions: none/bool/int/float/
// string/list/dict literals, arithmetic, comparisons, `in`, and/or/not, `x if c else y`, `~`, subscripts, slices
// with steps ([::-1]), attributes, the filters, tests, string and dict methods and global functions listed in
// jinja_builtins.c. Anything else — macros, includes, a filter or method not in the list — is refused when the
// template is parsed, in one line that names the construct and the template line; a template is never rendered
// with a construct half understood.
//
// Provenance. Every string carries, byte for byte, whether it came from the template (its literals, and the
// variables the caller marks as the template's, such as bos_token) or from data (messages, --chat-var values).
// Rendering keeps it, so that the tokenizer can let special tokens come from the template alone (template.h).
#ifndef SPECDEC_CHAT_JINJA_H
#define SPECDEC_CHAT_JINJA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct JinjaTemplate JinjaTemplate;

// Parses source[0..len) (UTF-8). Returns the template, or NULL with err: "line N: ..." naming what is wrong or
// unsupported.
JinjaTemplate *jinja_parse(const char *source, size_t len, Err *err);

void jinja_free(JinjaTemplate *t);

// A rendered text: text[0..len) (NUL-terminated) and, for each byte, from_data[i] = 1 when it came from data.
typedef struct {
    char *text;
    unsigned char *from_data;
    size_t len;
} JinjaOutput;

typedef struct {
    const json_t *template_vars;  // an object: variables that count as the template's (bos_token, ...)
    const json_t *data_vars;      // an object: variables that are data (messages, ...); they win over the above
    int64_t now;                  // strftime_now's time (seconds since the epoch, local time); 0: the clock's
} JinjaContext;

// Renders t with the variables of ctx into *out (malloc'd; jinja_output_free). Returns 0, or -1 with err: a
// raise_exception message, or "line N: ..." for an error (an undefined value used, types that do not combine,
// a render that grows past its limits).
int jinja_render(const JinjaTemplate *t, const JinjaContext *ctx, JinjaOutput *out, Err *err);

void jinja_output_free(JinjaOutput *out);

#endif
