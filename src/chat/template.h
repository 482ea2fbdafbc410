// template.h — a checkpoint's chat template: loaded from its folder, rendered over a conversation as
// transformers' apply_chat_template renders it, and encoded so that special tokens come from the template alone.
//
// Where the template is: chat_template.jinja in the checkpoint folder (newer transformers write it there), else
// tokenizer_config.json's "chat_template": a string, or a list of {"name", "template"} of which "default" is used.
// bos_token and eos_token come from tokenizer_config.json (a string, or an object with "content"). In a GGUF file
// (or a folder of one) the template is tokenizer.chat_template, bos_token and eos_token the texts of the tokens
// tokenizer.ggml.bos_token_id and eos_token_id name.
//
// Variables: messages (the conversation: a JSON list of {role, content, ...}), add_generation_prompt,
// bos_token, eos_token, and any others the caller gives (--chat-var, e.g. enable_thinking for Qwen3). bos_token and
// eos_token are the template's own text; everything else is data.
//
// Special tokens. transformers tokenizes the rendered string whole, so special-token text inside a message (a user
// typing "<|im_end|>") becomes a control token. chat_encode does not: a special token's text becomes its id only
// where the template's own bytes spell it, and message text is encoded as ordinary text. Where no data holds
// special-token text the ids are transformers' ids.
#ifndef SPECDEC_CHAT_TEMPLATE_H
#define SPECDEC_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"
#include "chat/jinja.h"
#include "chat/tool_calls.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    JinjaTemplate *jinja;
    char *source;                 // the template's text
    char *bos_token, *eos_token;  // NULL when tokenizer_config.json has none
    char *path;                   // where the template came from, for messages
    ToolFormat tool_format;       // the tool-call format its text teaches (tool_calls.h)
} ChatTemplate;

// Loads the chat template of checkpoint folder dir. Returns 0, or -1 with err naming the file and field (a folder
// without a template, a template this interpreter refuses: "DIR/tokenizer_config.json: chat_template: line N: ...").
int chat_template_load(ChatTemplate *ct, const char *dir, Err *err);

// Parses source as the template (bos/eos none), path naming it in messages; for tests and tools.
int chat_template_from_source(ChatTemplate *ct, const char *source, const char *path, Err *err);

void chat_template_free(ChatTemplate *ct);

// Renders the conversation: messages a JSON array, vars an object of further variables (or NULL). Returns 0 with
// *out (jinja_output_free), or -1 with err.
int chat_template_render(const ChatTemplate *ct, const json_t *messages, bool add_generation_prompt,
                         const json_t *vars, JinjaOutput *out, Err *err);

// Encodes a rendering into *ids (malloc'd): special tokens only from the template's bytes (see the top).
int chat_encode(const Tokenizer *tok, const JinjaOutput *rendered, int **ids, int *n_ids, Err *err);

// A conversation's token ids: chat_template_render, then chat_encode (what the chat, generate --chat and the
// server's /v1/chat/completions send the model).
int chat_render_ids(const ChatTemplate *ct, const Tokenizer *tok, const json_t *messages, bool add_generation_prompt,
                    const json_t *vars, int **ids, int *n_ids, Err *err);

#endif
