// tool_calls.h — a model's reply read back into OpenAI tool calls, in the format its chat template teaches.
//
// The formats, as the model families publish them:
//   Hermes   (Qwen2.5, Qwen3, Hermes-style templates): content, then one or more
//            <tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>
//   Mistral  (instruct models with function calling): content, then [TOOL_CALLS] and a JSON list
//            [{"name": NAME, "arguments": {...}}, ...] (or one such object); or, in the newer form of its tokenizers
//            from v11, [TOOL_CALLS]NAME[ARGS]{...} for each call ([CALL_ID]ID before [ARGS] read past)
//   Llama 3  (Llama 3.1, 3.2 with JSON tools): the whole reply one call, {"name": NAME, "parameters": {...}}
//            ("arguments" is taken too), optionally after <|python_tag|>; several separated by ';' or newlines
// Which one a checkpoint speaks is read from its template's own text (tool_format_of_template), never from the
// checkpoint's model_type: a fine-tune may carry any family's template.
//
// Text that is not a whole call stays content: a marker followed by JSON that does not parse, a call without a
// name or whose arguments are not an object, text after the last call. Then the reply is all content, as written.
#ifndef SPECDEC_CHAT_TOOL_CALLS_H
#define SPECDEC_CHAT_TOOL_CALLS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "chat/tools.h"
#include "tokenizer/tokenizer.h"

// TOOL_FORMAT_MISTRAL_ARGS: Mistral's newer form ([TOOL_CALLS]NAME[ARGS]{...}), read back as TOOL_FORMAT_MISTRAL reads
// both forms; the formats differ in the calls' grammars, which write the template's own form.
typedef enum {
    TOOL_FORMAT_NONE, TOOL_FORMAT_HERMES, TOOL_FORMAT_MISTRAL, TOOL_FORMAT_LLAMA3, TOOL_FORMAT_MISTRAL_ARGS
} ToolFormat;

// The format a chat template's source text teaches (the markers it writes), or TOOL_FORMAT_NONE: Mistral's newer form
// where the template writes [ARGS] beside [TOOL_CALLS].
ToolFormat tool_format_of_template(const char *source);

// "hermes", "mistral", "llama3", "mistral-args" or "none".
const char *tool_format_name(ToolFormat f);

// The text with which a call opens in format f ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>"; "" for none).
const char *tool_format_opening(ToolFormat f);

// Reads reply[0..len) in format f. When it ends in calls, returns a JSON array of {"name": string, "arguments":
// string (the arguments object as compact JSON, as OpenAI sends it)} and sets *content_len to the length of the text
// before them (the reply's content, its trailing whitespace dropped); otherwise returns NULL (the whole reply is
// content). The caller owns the array.
json_t *tool_calls_parse(ToolFormat f, const char *reply, size_t len, size_t *content_len);

// How much of a reply growing in format f is content for certain: the bytes before any text that opens, or may
// still grow into the opening of, a call, less the whitespace that ends them (dropped before a call). A stream sends
// these and holds the rest until the reply is whole.
size_t tool_calls_content_prefix(ToolFormat f, const char *reply, size_t len);

// The GBNF grammar (grammar/gbnf: its start rule root) of one call in format f of the tool named `name` (NULL: of
// any of `tools`, a checked list: chat/tools.h), its arguments a document the tool's parameters schema validates
// (grammar/json_schema.h; no parameters: any object). Hermes: <tool_call>\n{"name": …, "arguments": …}\n</tool_call>;
// Mistral: [TOOL_CALLS] [{"name": …, "arguments": …}]; Mistral's newer form: [TOOL_CALLS]NAME[ARGS]{…} (no
// [CALL_ID]); Llama 3: {"name": …, "parameters": …}. A marker that the
// tokenizer tok holds as an added token (special or not: Mistral's [TOOL_CALLS], Qwen's <tool_call>) is written as a
// reference to that token (grammar.h), so that the call opens with the token itself, as the model was taught; the
// others, and all of them where tok is NULL, as text. Returns the text (malloc'd), or NULL with err (a schema keyword
// the converter refuses, named; format none).
char *tool_calls_gbnf(ToolFormat f, const json_t *tools, const char *name, const Tokenizer *tok, Err *err);

// The lazy grammar of tool_choice "auto" in format f (grammar/lazy.h): the reply is free until the format's trigger
// opens a call, and from there it is calls of `tools` as tool_calls_gbnf writes them — one, or with `parallel` as
// many as the model writes — and nothing after them. Hermes: free text, then <tool_call> opens a call (the text
// before stays content, as tool_calls_parse reads it); Mistral: free text, then [TOOL_CALLS] " "? "[" CALL ("," CALL)*
// "]" (the newer form: [TOOL_CALLS] NAME [ARGS] ARGS, and with `parallel` more of them, each after its own
// [TOOL_CALLS]); Llama 3: a reply whose first character other than whitespace is "{" is a call (CALL (";" CALL)*), any other
// is free, and so after the <|python_tag|> token where tok has it (a built-in tool's call or code stays free). Where
// tok holds the opening marker as an added token, that token opens a call too, wherever it comes (and the markers are
// written as tool_calls_gbnf writes them): so a special token is the trigger (grammar/lazy.h), which free text can
// never hold. Returns the text (malloc'd), or NULL with err as tool_calls_gbnf.
char *tool_calls_lazy_gbnf(ToolFormat f, const json_t *tools, bool parallel, const Tokenizer *tok, Err *err);

// Compiles each tool's parameters (a checked list: tools.h) as the JSON Schema of its calls' arguments
// (grammar/json_schema.h), whatever format a template teaches, so that a schema no grammar can hold is refused before
// anything is generated. 0, or -1 with e: the field tools[i].function.parameters, and the message
// `tools[i] "NAME": parameters: at /POINTER: what the converter refuses`.
int tool_calls_check_parameters(const json_t *tools, ToolsError *e);

#endif
