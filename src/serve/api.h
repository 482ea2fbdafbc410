// api.h — the OpenAI response objects the server sends (https://platform.openai.com/docs/api-reference): a
// completion or chat completion whole, or as server-sent events ("data: {chunk}\n\n" ..., "data: [DONE]\n\n").
// Every returned string is malloc'd JSON (or SSE text), NULL when out of memory.
//
// `usage` is OpenAI's, prompt_tokens_details.cached_tokens the prompt's tokens that the conversation's caches held
// (engine.h). Besides it, each response carries an extension object "specdec" that says what speculation did:
//   {"drafted", "accepted", "target_calls", "tokens_per_target_call", "seed", "prefill_ms", "decode_ms"}
// — draft tokens proposed and kept, target verification forwards, generated tokens per such forward, the seed the
// request was sampled with (drawn for it when it gave none), and the times of prefill (from joining the batch in its
// slot to its prompt read: batch.c, start_rounds) and of the rounds.
#ifndef SPECDEC_SERVE_API_H
#define SPECDEC_SERVE_API_H

#include <stdbool.h>
#include <stddef.h>

#include "serve/engine.h"
#include "serve/request.h"

// What every object of one response shares.
typedef struct {
    ApiKind kind;
    const char *id;         // "cmpl-…" or "chatcmpl-…"
    long long created;      // Unix seconds
    const char *model;
    const Tokenizer *tok;   // the logprobs' token strings
} ApiResponse;

// The whole response to a request without stream: one choice holding text[0..len), usage and the extension; with
// logprobs (NULL: not asked for), the choice's "logprobs" — completions OpenAI's legacy object
//   {"tokens": [s], "token_logprobs": [f], "top_logprobs": [{token: f}], "text_offset": [code points]}
// (each top_logprobs object the k most likely tokens and the token itself, so up to k + 1 keys; tokens spelt alike
// share a key, the likelier's value), chat's
//   {"content": [{"token", "logprob", "bytes": [the token's bytes], "top_logprobs": [{"token", "logprob",
//   "bytes"}] (k, most likely first)}]}
// A token's string is its decoded bytes, an ill-formed part replaced by U+FFFD ("bytes" has them as they are).
char *api_completion_json(const ApiResponse *r, const char *text, size_t len, const EngineResult *result,
                          const TokenReports *logprobs);

// A token's entry of chat's logprobs, {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]},
// each object with the token's "id" too when with_ids (generate --logprobs' lines). NULL when out of memory.
struct json_t;
struct json_t *api_token_logprobs(const Tokenizer *tok, const TokenLogprobs *lp, bool with_ids);

// One SSE event of a streamed response holding text[0..len) ("data: …\n\n"); chat's first event also gives the
// role (first). With marks (the request's specdec.marks; else NULL) the chunk carries them as the extension
//   "specdec": {"marks": [{"kind", "text"}, …], "rounds": [{"gamma", "width", "drafted", "accepted", "tokens"}, …]}
// — kind "accepted", "rejected" (a draft's text that is not part of the output), "resampled", "bonus" or "target".
// With logprobs (else NULL), the choice carries those of the chunk's tokens, as api_completion_json's.
char *api_chunk_sse(const ApiResponse *r, const char *text, size_t len, bool first, const TextMarks *marks,
                    const TokenReports *logprobs);

// The events that end a stream: a chunk with the finish reason and the extension, usage when asked for
// (stream_options.include_usage: a chunk with no choices), then "data: [DONE]\n\n".
char *api_stream_end_sse(const ApiResponse *r, const EngineResult *result, bool include_usage);

// GET /v1/models: the one model served, with what the page (web.h) asks of it as the extension
//   "specdec": {"chat": bool, "drafter": "draft model" | "lookup" | "draft model and lookup" | null}
// — whether chat completions are served (a chat template), and what drafts (null: target-only decoding).
char *api_models_json(const char *model, long long created, const Engine *engine);

#endif
