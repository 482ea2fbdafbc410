// api.h — the OpenAI response objects the server sends (https://platform.openai.com/docs/api-reference): a
// completion or chat completion whole, or as server-sent events ("data: {chunk}\n\n" ..., "data: [DONE]\n\n").
// Every returned string is malloc'd JSON (or SSE text), NULL when out of memory.
//
// `usage` is OpenAI's, prompt_tokens_details.cached_tokens the prompt's tokens that the conversation's caches held
// (engine.h). Besides it, each response carries an extension object "specdec" that says what speculation did:
//   {"drafted", "accepted", "target_calls", "tokens_per_target_call", "seed", "prefill_ms", "decode_ms"}
// — draft tokens proposed and kept, target verification forwards, generated tokens per such forward, the seed the
// request was sampled with (drawn for it when it gave none), and the times of prefill and of the rounds.
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
} ApiResponse;

// The whole response to a request without stream: one choice holding text[0..len), usage and the extension.
char *api_completion_json(const ApiResponse *r, const char *text, size_t len, const EngineResult *result);

// One SSE event of a streamed response holding text[0..len) ("data: …\n\n"); chat's first event also gives the
// role (first). With marks (the request's specdec.marks; else NULL) the chunk carries them as the extension
//   "specdec": {"marks": [{"kind", "text"}, …], "rounds": [{"gamma", "width", "drafted", "accepted", "tokens"}, …]}
// — kind "accepted", "rejected" (a draft's text that is not part of the output), "resampled", "bonus" or "target".
char *api_chunk_sse(const ApiResponse *r, const char *text, size_t len, bool first, const TextMarks *marks);

// The events that end a stream: a chunk with the finish reason and the extension, usage when asked for
// (stream_options.include_usage: a chunk with no choices), then "data: [DONE]\n\n".
char *api_stream_end_sse(const ApiResponse *r, const EngineResult *result, bool include_usage);

// GET /v1/models: the one model served, with what the page (web.h) asks of it as the extension
//   "specdec": {"chat": bool, "drafter": "draft model" | "lookup" | "draft model and lookup" | null}
// — whether chat completions are served (a chat template), and what drafts (null: target-only decoding).
char *api_models_json(const char *model, long long created, const Engine *engine);

#endif
