// request.h — an OpenAI request body (JSON) read into specdec's Request, and OpenAI's error shape for what is refused.
//
// What POST /v1/completions and /v1/chat/completions take (https://platform.openai.com/docs/api-reference):
//   model                   any string (one model is served; the response names it)
//   prompt                  completions: a string, a list of one string, or a list of token ids
//   messages                chat: a non-empty list of {role: system | developer | user | assistant | tool, content};
//                           content a string or a list of {type: "text", text} parts (joined); an assistant's may
//                           carry tool_calls (content then null), a tool's answers one by tool_call_id (chat/tools.h)
//   tools                   chat: OpenAI function tools (chat/tools.h), given to the template as `tools`
//   tool_choice             "auto" (the default with tools), "none" (no call is read back), "required" (a call of one
//                           of the tools), or {"type": "function", "function": {"name"}} (a call of that one)
//   parallel_tool_calls     true (default): a reply may hold several calls; false: the first call only
//   max_tokens, max_completion_tokens   an integer ≥ 1 (the second OpenAI's newer name: both given must agree)
//   temperature [0, 2], top_p (0, 1], top_k ≥ 0, seed ≥ 0; and vLLM's sampling extensions with vLLM's meanings
//   (sampling.h, penalties.h): min_p [0, 1], repetition_penalty [0.01, 100], presence_penalty and
//   frequency_penalty [−2, 2] (OpenAI's too) — every number checked as the float it is used as
//   logprobs                completions: an integer k in [0, 20], the most likely alternatives given beside each
//                           token's log-probability; chat: true or false, with top_logprobs k in [0, 20] (which needs
//                           logprobs true) — the target's raw log-softmax (speculative/logprobs.h)
//   stop                    a string or a list of at most REQUEST_MAX_STOP non-empty strings
//   stream, stream_options.include_usage
//   cache_salt              a string (vLLM's): the conversation cache serves a request only what a request with the
//                           same salt left (none given is a salt of its own)
//   specdec                 specdec's own extension, an object: "marks": true gives each streamed chunk the origin
//                           of its text (accepted draft, rejected draft, the target's own token; marks.h; with
//                           "stream": true only), "draft": false decodes with the target alone (no drafter: what
//                           speculation is measured against); any other member is refused
// Fields OpenAI has and specdec does not do (tools, n > 1, images, ...), and the sampling fields vLLM and
// llama-server take that specdec does not (typical_p, min_tokens, guided decoding, ...), are refused when set to
// anything but their "off" value, with status 400 naming the field; every other unknown field is ignored, as OpenAI
// does. Null is "not given" for every field.
#ifndef SPECDEC_SERVE_REQUEST_H
#define SPECDEC_SERVE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/error.h"
#include "grammar/grammar.h"
#include "speculative/logprobs.h"
#include "speculative/penalties.h"
#include "speculative/sampling.h"

enum { REQUEST_MAX_STOP = 4, REQUEST_MAX_TOKENS = 1 << 20 };

typedef enum { API_COMPLETIONS, API_CHAT } ApiKind;

typedef struct {
    char *role;         // system, developer, user, assistant or tool
    char *content;      // the text (a list of text parts joined; an assistant's null content is "")
    json_t *tool_calls; // an assistant's calls as given (checked: chat/tools.h), or NULL
    char *tool_call_id; // a tool message's, or NULL
} ChatMessage;

// How the reply may call the request's tools.
typedef enum {
    TOOL_CHOICE_NONE,       // no tools, or "none": the reply is text
    TOOL_CHOICE_AUTO,       // the model decides; a call it writes is read back
    TOOL_CHOICE_REQUIRED,   // a call of one of the tools, constrained from the first token
    TOOL_CHOICE_NAMED,      // a call of the tool named, constrained from the first token
} ToolChoice;

typedef struct {
    ApiKind kind;
    char *model;                // as given, or NULL
    char *prompt;               // completions: the prompt's text, or NULL when given as token ids
    int *prompt_ids;            // completions: [n_prompt_ids] the prompt as token ids (not checked against a vocabulary)
    int n_prompt_ids;
    ChatMessage *messages;      // chat: [n_messages]
    int n_messages;
    int max_tokens;             // 0: not given (the server's default)
    SamplingParams sampling;    // temperature 1, top_p 1, top_k 0, min_p 0 unless given (OpenAI's, vLLM's defaults)
    Penalties penalties;        // repetition_penalty 1, presence_penalty 0, frequency_penalty 0 unless given
    bool has_seed;
    uint64_t seed;
    char *stop[REQUEST_MAX_STOP];
    int n_stop;
    bool stream, include_usage;
    char *cache_salt;           // vLLM's: the conversation cache serves only requests with the same salt (NULL: none)
    bool logprobs;              // each token's log-probability asked for (completions' logprobs, chat's logprobs)
    int top_logprobs;           // ... and its k most likely alternatives (completions' logprobs: k; chat's top_logprobs)
    bool marks;                 // specdec.marks: the streamed chunks say where their text came from
    bool plain;                 // specdec.draft false: decode with the target alone
    json_t *tools;              // chat: the checked tools list, or NULL
    ToolChoice tool_choice;     // TOOL_CHOICE_NONE without tools
    char *tool_name;            // TOOL_CHOICE_NAMED: the function's name
    bool parallel_tool_calls;   // several calls may be read back (default true)
    Grammar *grammar;           // the text's grammar (docs/structured.md), or NULL: response_format json_object or
                                // json_schema, or llama-server's "grammar" (GBNF text)
} Request;

// A refusal in OpenAI's shape: {"error": {"message", "type", "param", "code"}} with an HTTP status.
typedef struct {
    int status;             // 400, 401, 404, 405, 413, 500, 503
    const char *type;       // "invalid_request_error", "server_error"
    const char *code;       // NULL, or e.g. "unsupported_parameter"
    char param[128];        // the field at fault ("messages[2].content[0].type"), "" for none
    Err err;                // the message: one line, escaped (error.h)
} ApiError;

// Fills e and returns -1 (for `return api_error(...)`); param may be NULL.
int api_error(ApiError *e, int status, const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The error's response body (malloc'd, NUL-terminated JSON).
char *api_error_json(const ApiError *e);

// Reads body[0..len) as a request of `kind`. Returns 0, or -1 with e set (status 400). req is freed either way by
// request_free (also after a failure).
int request_parse(Request *req, ApiKind kind, const char *body, size_t len, ApiError *e);
void request_free(Request *req);

#endif
