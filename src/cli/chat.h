// chat.h — the chat commands: `specdec render` (what a conversation becomes through the checkpoint's template)
// and generate --chat's prompt, and `specdec chat`.
#ifndef SPECDEC_CLI_CHAT_H
#define SPECDEC_CLI_CHAT_H

#include <jansson.h>

#include "base/error.h"
#include "cli/args.h"
#include "tokenizer/tokenizer.h"

// The --chat-var NAME=JSON options as one JSON object (a new reference), or NULL with err naming the bad one.
json_t *chat_vars_object(const Repeated *vars, Err *err);

// The token ids of a conversation of one user message user[0..user_len) (after a system message when system is not NULL) as the
// chat template of checkpoint folder dir renders it with the assistant's turn opened (generate --chat).
int chat_prompt_ids(const char *dir, const Tokenizer *tok, const char *system, const char *user, size_t user_len,
                    const Repeated *vars, int **ids, int *n_ids, Err *err);

// specdec render -m DIR [-f MESSAGES.json] [--add-generation-prompt] [--ids] [--chat-var NAME=JSON]...
int cmd_render(const Args *args, Err *err);

// specdec chat: a conversation with an instruct model (chat.c's top says how).
int cmd_chat(const Args *args, Err *err);

#endif
