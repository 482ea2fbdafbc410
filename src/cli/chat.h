// chat.h — the chat commands: `specdec render` (what a conversation becomes through the checkpoint's template).
#ifndef SPECDEC_CLI_CHAT_H
#define SPECDEC_CLI_CHAT_H

#include <jansson.h>

#include "base/error.h"
#include "cli/args.h"

// The --chat-var NAME=JSON options as one JSON object (a new reference), or NULL with err naming the bad one.
json_t *chat_vars_object(const Repeated *vars, Err *err);

// specdec render -m DIR [-f MESSAGES.json] [--add-generation-prompt] [--ids] [--chat-var NAME=JSON]...
int cmd_render(const Args *args, Err *err);

#endif
