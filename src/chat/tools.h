// tools.h — OpenAI's function tools on their way into a chat template: the `tools` list checked, and a
// conversation's tool calls put in the shape templates read.
//
// A tool is OpenAI's {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}; the
// list reaches the template as its variable `tools`, as transformers' apply_chat_template(tools=...) passes it.
// An assistant message may carry "tool_calls": [{"id"?, "type": "function", "function": {"name", "arguments"}}]
// (content then null or text), and a "tool" message answers one with "tool_call_id" and its content. OpenAI sends a
// call's arguments as a JSON string; templates index them as an object (Llama 3.1's `arguments | tojson`,
// Qwen's `tool_call.arguments is string` branch aside), so a string that holds a JSON object is replaced by that
// object, as vLLM does before rendering.
#ifndef SPECDEC_CHAT_TOOLS_H
#define SPECDEC_CHAT_TOOLS_H

#include <jansson.h>

#include "base/error.h"

enum { TOOLS_MAX = 128, TOOL_NAME_MAX = 64 };

// Where a check failed: the field's path, e.g. "tools[2].function.name" or "messages[1].tool_calls[0]".
typedef struct {
    char field[200];
    Err err;  // the message, without the field (one line, escaped)
} ToolsError;

// Checks a `tools` list: an array of at most TOOLS_MAX function tools, names of 1–TOOL_NAME_MAX characters of
// [A-Za-z0-9_.-] (OpenAI's rule), unique; parameters, when given, an object. Returns 0, or -1 with e.
int tools_check(const json_t *tools, ToolsError *e);

// The tool named name in a checked list, or NULL.
const json_t *tools_find(const json_t *tools, const char *name);

// A copy of messages (an array) in which every tool call's string arguments are the JSON object they hold: what
// every path from a conversation to a template (render, the server and batch) reads it through. Checks each
// tool_calls entry (an object whose function has a string name, and arguments an object or a string holding a JSON
// object), each tool message's tool_call_id (a string when given), and that each tool message answers a call made
// before it, as OpenAI's API does: the messages before it, back over the other tool messages, end in an assistant
// message with tool_calls, and its tool_call_id, when given, is the id of one of those calls (in any order). Returns
// the copy, or NULL with e naming the field: messages[i].tool_calls[k]..., messages[i].tool_call_id, or
// messages[i].role for a tool message that follows no call.
json_t *tools_messages_for_template(const json_t *messages, ToolsError *e);

#endif
