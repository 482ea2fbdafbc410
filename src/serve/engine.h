// engine.h — one generation for the server: a request's prompt through speculative_generate (speculative.h), its
// text handed on as it becomes final, cut at the request's stop strings (chat/stop.h), ended early when the client
// goes away.
//
// The output is that of `specdec generate` with the same checkpoint, options, prompt and seed: the same drafters
// built afresh for every request (so nothing of one request's drafts reaches the next; none when the request's
// specdec.draft is false: target-only decoding), the same streaming decoder.
// The server runs each request as engine_begin, its sequence in the batch of the requests generating at once
// (speculative/batch.h, on the KV cache of its slot's conversation: serve/queue.c), engine_end; engine_run is the
// same alone, in a conversation when the engine has one (the bench's in-process path). With a conversation
// (speculative/conversation.h) the target's cache keeps what the last request left: a request whose ids begin with
// the last one's prompt and reply — a chat client resending the history — prefills only the rest; any other
// request keeps only the prefix it shares. The logits are those of a fresh run, bit for bit (the forward is batch
// invariant), so the text is too.
#ifndef SPECDEC_SERVE_ENGINE_H
#define SPECDEC_SERVE_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "chat/template.h"
#include "model/model.h"
#include "serve/marks.h"
#include "serve/request.h"
#include "speculative/batch.h"
#include "speculative/conversation.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

// What the command line fixed for every request.
typedef struct {
    Model *target;
    Model *draft;               // a draft model, or NULL
    bool lookup;                // n-gram lookup drafting (with draft: staged)
    const Tokenizer *tok;
    const ChatTemplate *chat;         // the checkpoint's chat template, or NULL: chat requests get 400 with no_chat
    const char *no_chat;              // why there is none (one line)
    Conversation *conversation;       // engine_run's caches kept from the last request (NULL: every request afresh)
    SpecParams spec;            // γ policy, sampler and tree (sampling, seed and lengths come with each request)
    float draft_p_min;
    int default_max_tokens;     // when a request gives none
} Engine;

// How the engine drafts, as a user calls it (drafter_kind_name): NULL for target-only decoding.
const char *engine_drafter_name(const Engine *en);

// A generated token's log-probabilities (the request's logprobs; speculative/logprobs.h) and where its text begins.
typedef struct {
    TokenLogprobs lp;
    int text_offset;            // code points of the generated text before the token's (OpenAI's text_offset)
    size_t text_end;            // bytes of generated text once the token's is in (when a piece may carry it)
} TokenReport;

// The reports that come with a piece of text: those of the tokens whose text the piece completes. Every generated
// token has one, in order — a stop string's tokens too, with the last piece.
typedef struct {
    const TokenReport *tokens;  // [n]
    int n;
} TokenReports;

// A whole response's reports, grown piece by piece.
typedef struct {
    TokenReport *tokens;        // [n], room for cap
    int n, cap;
} TokenReportList;

// Appends more's reports to list. -1 when out of memory (list unchanged).
int token_reports_append(TokenReportList *list, const TokenReports *more);
void token_reports_free(TokenReportList *list);

// Where a generation's text goes, and how it learns that nobody waits for it any more.
typedef struct {
    // Each piece of text once final (valid UTF-8); with the request's specdec.marks, the piece's marks and the
    // rounds since the last piece (marks.h; a piece may then be empty), else marks NULL; with its logprobs, the
    // reports of the piece's tokens (a piece may then be empty), else logprobs NULL.
    void (*on_text)(void *ctx, const char *text, size_t len, const TextMarks *marks, const TokenReports *logprobs);
    bool (*cancelled)(void *ctx);                              // asked after every token; may be NULL
    void *ctx;
} EngineSink;

typedef struct {
    int prompt_tokens, completion_tokens;
    int cached_tokens;          // of the prompt's, those the conversation's caches held already (not prefilled)
    const char *finish_reason;  // "stop" (end of text or a stop string), "length" (max_tokens or the context), or
                                // "tool_calls" (the reply ends in calls)
    json_t *tool_calls;         // OpenAI's tool_calls read back from the reply, or NULL (engine_result_free)
    bool cancelled;             // the sink said so: the text is cut short
    uint64_t seed;              // the request's, or the one drawn for it
    SpecStats stats;
} EngineResult;

// The token ids of a request's prompt (malloc'd): the text encoded with the checkpoint's special tokens around it
// (as generate -p), or the ids given, checked against the vocabulary; chat messages through the checkpoint's
// template (as generate --chat).
// Bad input → -1 with e (400).
int engine_prompt(const Engine *en, const Request *req, int **ids, int *n_ids, ApiError *e);

// Generates the request's continuation of prompt[0..n_prompt) into sink. -1 with e on failure (500: the model
// failed; 400: the prompt leaves no room in the context).
int engine_run(const Engine *en, const Request *req, const int *prompt, int n_prompt, const EngineSink *sink,
               EngineResult *result, ApiError *e);

// The same in three steps, for a caller that runs the generation itself (several side by side: batch.h).
// engine_begin sets up the request's continuation of prompt[0..n_prompt) — its parameters, its drafter, the text
// stream into sink — and says in *job what to generate (its cache NULL: the engine's conversation is not used);
// NULL with e on failure (500). Once the generation made n_out tokens (its statistics in result->stats),
// engine_end hands the rest of the text to the sink and fills result; −1 with e on failure. Either frees the run;
// engine_abort frees it without a word to the sink.
typedef struct EngineRun EngineRun;
EngineRun *engine_begin(const Engine *en, const Request *req, const int *prompt, int n_prompt,
                        const EngineSink *sink, EngineResult *result, BatchJob *job, ApiError *e);
int engine_end(EngineRun *run, int n_out, ApiError *e);
void engine_abort(EngineRun *run);

// Frees what a result holds (its tool_calls).
void engine_result_free(EngineResult *result);

#endif
