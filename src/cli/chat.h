// chat.h — the chat commands: `specdec render` (what a conversation becomes through the checkpoint's template)
// and generate --chat's prompt, and `specdec chat`.
#ifndef SPECDEC_CLI_CHAT_H
#define SPECDEC_CLI_CHAT_H

#include <jansson.h>
#include <stdio.h>

#include "base/error.h"
#include "chat/tool_calls.h"
#include "cli/args.h"
#include "cli/structured.h"
#include "tokenizer/tokenizer.h"

// The --chat-var NAME=JSON options as one JSON object (a new reference), or NULL with err naming the bad one.
json_t *chat_vars_object(const Repeated *vars, Err *err);

// The template's variables from the options: --chat-var's, and --tools FILE's list (checked: chat/tools.h) as
// `tools`. A new reference, or NULL with err naming the option, the file or the field.
json_t *chat_template_vars(const Args *a, Err *err);

// The token ids of a conversation of one user message user[0..user_len) (after a system message when system is not
// NULL) as the chat template of checkpoint folder dir renders it with the assistant's turn opened and the variables
// vars (generate --chat); *format: the tool-call format the template teaches.
int chat_prompt_ids(const char *dir, const Tokenizer *tok, const char *system, const char *user, size_t user_len,
                    const json_t *vars, ToolFormat *format, int **ids, int *n_ids, Err *err);

// With --tools FILE (vars' `tools`): each tool's parameters compiled as a JSON Schema, whatever the template (one
// refused is named with FILE and the tool, where a template that teaches no call format would only have rendered
// it); and with a template that teaches a call format, and no other grammar asked for, st's grammar becomes the lazy grammar of calls of the tools (tool_calls_lazy_gbnf: the reply free until a call opens,
// then held to the tools' schemas, and ended after that one call), as the server's tool_choice "auto" with
// parallel_tool_calls false; the format's markers that tok holds as added tokens are those tokens (tok NULL: text).
// -1 with err (a schema keyword refused).
int chat_tools_grammar(Structured *st, const char *file, ToolFormat format, const json_t *vars, const Tokenizer *tok,
                       Err *err);

// Reads reply[0..len) back into calls in format (chat/tool_calls.h) and prints each on f as one line, "specdec: tool
// call N: NAME ARGUMENTS" (the arguments as compact JSON). Returns the calls (tool_calls_parse's array, *content_len
// the content before them), or NULL when the reply holds none.
json_t *chat_print_tool_calls(FILE *f, ToolFormat format, const char *reply, size_t len, size_t *content_len);

// specdec render -m DIR [-f MESSAGES.json] [--add-generation-prompt] [--ids] [--chat-var NAME=JSON]...
int cmd_render(const Args *args, Err *err);

// specdec chat: a conversation with an instruct model (chat.c's top says how).
int cmd_chat(const Args *args, Err *err);

#endif
