// api.c — the OpenAI response objects (see api.h).
#include "serve/api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

static const char *object_name(const ApiResponse *r, bool chunk) {
    return r->kind == API_CHAT ? chunk ? "chat.completion.chunk" : "chat.completion" : "text_completion";
}

// The frame every object shares: {"id", "object", "created", "model", "choices": []}.
static json_t *frame(const ApiResponse *r, bool chunk) {
    return json_pack("{s:s, s:s, s:I, s:s, s:[]}", "id", r->id, "object", object_name(r, chunk), "created",
                     (json_int_t)r->created, "model", r->model, "choices");
}

static json_t *usage(const EngineResult *result) {
    return json_pack("{s:i, s:i, s:i, s:{s:i}}", "prompt_tokens", result->prompt_tokens, "completion_tokens",
                     result->completion_tokens, "total_tokens", result->prompt_tokens + result->completion_tokens,
                     "prompt_tokens_details", "cached_tokens", result->cached_tokens);
}

static json_t *extension(const EngineResult *result) {
    const SpecStats *s = &result->stats;
    return json_pack("{s:i, s:i, s:i, s:f, s:I, s:f, s:f}", "drafted", s->drafted, "accepted", s->accepted,
                     "target_calls", s->rounds, "tokens_per_target_call",
                     s->rounds ? (double)s->generated / s->rounds : 0.0, "seed", (json_int_t)result->seed,
                     "prefill_ms", s->prefill_seconds * 1e3, "decode_ms", s->decode_seconds * 1e3);
}

// ---- logprobs ------------------------------------------------------------------------------------------------

// Token id's string: its decoded bytes, an ill-formed part replaced by U+FFFD (utf8.h).
static json_t *token_string(const Tokenizer *tok, int id) {
    size_t n, len;
    const char *bytes = tokenizer_token(tok, id, &n);
    if (!bytes) return json_string("");  // (a model's padding row past the tokenizer's ids)
    char *text = malloc(3 * n + 1);
    if (!text) return NULL;
    utf8_repair((const unsigned char *)bytes, n, true, text, &len);
    json_t *s = json_stringn(text, len);
    free(text);
    return s;
}

// Chat's {"token", "logprob", "bytes"} of token id (and its "id" when asked for).
static json_t *chat_token(const Tokenizer *tok, int id, float logprob, bool with_id) {
    size_t n = 0;
    const char *bytes = tokenizer_token(tok, id, &n);
    json_t *list = json_array();
    for (size_t i = 0; list && bytes && i < n; i++) json_array_append_new(list, json_integer((unsigned char)bytes[i]));
    json_t *o = json_pack("{s:o, s:f, s:o}", "token", token_string(tok, id), "logprob", (double)logprob, "bytes", list);
    if (o && with_id) json_object_set_new(o, "id", json_integer(id));
    return o;
}

json_t *api_token_logprobs(const Tokenizer *tok, const TokenLogprobs *lp, bool with_ids) {
    json_t *entry = chat_token(tok, lp->token, lp->logprob, with_ids), *top = json_array();
    for (int k = 0; top && k < lp->n_top; k++)
        json_array_append_new(top, chat_token(tok, lp->top[k], lp->top_logprob[k], with_ids));
    if (entry) json_object_set_new(entry, "top_logprobs", top);
    else json_decref(top);
    return entry;
}

// Chat's {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}, ...]}.
static json_t *chat_logprobs(const Tokenizer *tok, const TokenReports *reports) {
    json_t *content = json_array();
    for (int i = 0; content && i < reports->n; i++)
        json_array_append_new(content, api_token_logprobs(tok, &reports->tokens[i].lp, false));
    return json_pack("{s:o}", "content", content);
}

// The legacy object of completions: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, each a list.
static json_t *completion_logprobs(const Tokenizer *tok, const TokenReports *reports) {
    json_t *tokens = json_array(), *values = json_array(), *tops = json_array(), *offsets = json_array();
    for (int i = 0; tokens && values && tops && offsets && i < reports->n; i++) {
        const TokenReport *t = &reports->tokens[i];
        json_t *string = token_string(tok, t->lp.token), *top = json_object();
        for (int k = 0; top && k < t->lp.n_top; k++) {
            json_t *key = token_string(tok, t->lp.top[k]);
            if (key && !json_object_get(top, json_string_value(key)))  // (the likelier of tokens spelt alike)
                json_object_set_new(top, json_string_value(key), json_real(t->lp.top_logprob[k]));
            json_decref(key);
        }
        if (string && top && !json_object_get(top, json_string_value(string)))
            json_object_set_new(top, json_string_value(string), json_real(t->lp.logprob));
        json_array_append_new(tokens, string);
        json_array_append_new(values, json_real(t->lp.logprob));
        json_array_append_new(tops, top);
        json_array_append_new(offsets, json_integer(t->text_offset));
    }
    return json_pack("{s:o, s:o, s:o, s:o}", "tokens", tokens, "token_logprobs", values, "top_logprobs", tops,
                     "text_offset", offsets);
}

// A choice's "logprobs": null when not asked for.
static json_t *logprobs_json(const ApiResponse *r, const TokenReports *reports) {
    if (!reports) return json_null();
    return r->kind == API_CHAT ? chat_logprobs(r->tok, reports) : completion_logprobs(r->tok, reports);
}

// ---- the objects ---------------------------------------------------------------------------------------------

// One choice: completions {"text", "index", "logprobs", "finish_reason"}; chat {"index", "message" | "delta",
// "logprobs", "finish_reason"}. finish NULL: null (a chunk before the last).
static json_t *choice(const ApiResponse *r, const char *text, size_t len, bool chunk, bool role, const char *finish,
                      const TokenReports *logprobs) {
    json_t *c = json_pack("{s:i, s:o, s:o}", "index", 0, "logprobs", logprobs_json(r, logprobs), "finish_reason",
                          finish ? json_string(finish) : json_null());
    if (!c) return NULL;
    if (r->kind == API_COMPLETIONS) {
        json_object_set_new(c, "text", json_stringn(text, len));
    } else {
        json_t *message = json_object();
        if (role || !chunk) json_object_set_new(message, "role", json_string("assistant"));
        if (text) json_object_set_new(message, "content", json_stringn(text, len));
        json_object_set_new(c, chunk ? "delta" : "message", message);
    }
    return c;
}

static char *dump(json_t *object, const char *before, const char *after) {
    char *body = object ? json_dumps(object, JSON_COMPACT) : NULL, *out = NULL;
    json_decref(object);
    if (body && asprintf(&out, "%s%s%s", before, body, after) < 0) out = NULL;
    free(body);
    return out;
}

// A chat reply's calls (OpenAI's tool_calls) in its message, or in a stream's delta with each call's index.
static void add_tool_calls(json_t *c, const EngineResult *result, bool chunk) {
    json_t *message = json_object_get(c, chunk ? "delta" : "message"), *calls = json_deep_copy(result->tool_calls);
    for (size_t i = 0; chunk && i < json_array_size(calls); i++)
        json_object_set_new(json_array_get(calls, i), "index", json_integer((json_int_t)i));
    json_object_set_new(message, "tool_calls", calls);
    if (!chunk && json_object_get(message, "content") && json_string_length(json_object_get(message, "content")) == 0)
        json_object_set_new(message, "content", json_null());  // OpenAI's content of a reply that is only calls
}

char *api_completion_json(const ApiResponse *r, const char *text, size_t len, const EngineResult *result,
                          const TokenReports *logprobs) {
    json_t *o = frame(r, false);
    if (!o) return NULL;
    json_array_append_new(json_object_get(o, "choices"),
                          choice(r, text, len, false, false, result->finish_reason, logprobs));
    if (result->tool_calls) add_tool_calls(json_array_get(json_object_get(o, "choices"), 0), result, false);
    json_object_set_new(o, "usage", usage(result));
    json_object_set_new(o, "specdec", extension(result));
    return dump(o, "", "");
}

// A chunk's marks: {"marks": [{"kind", "text"}, …], "rounds": [{"gamma", "width", "drafted", "accepted",
// "tokens"}, …]}.
static json_t *marks_json(const TextMarks *m) {
    json_t *marks = json_array(), *rounds = json_array();
    for (int i = 0; marks && i < m->n_marks; i++)
        json_array_append_new(marks, json_pack("{s:s, s:s%}", "kind", spec_token_kind_name(m->marks[i].kind), "text",
                                               m->marks[i].text, m->marks[i].len));
    for (int i = 0; rounds && i < m->n_rounds; i++) {
        const RoundOutcome *o = &m->rounds[i];
        json_array_append_new(rounds, json_pack("{s:i, s:i, s:i, s:i, s:i}", "gamma", o->gamma, "width", o->width,
                                                "drafted", o->drafted, "accepted", o->accepted, "tokens",
                                                o->committed));
    }
    return json_pack("{s:o, s:o}", "marks", marks, "rounds", rounds);
}

char *api_chunk_sse(const ApiResponse *r, const char *text, size_t len, bool first, const TextMarks *marks,
                    const TokenReports *logprobs) {
    json_t *o = frame(r, true);
    if (o) json_array_append_new(json_object_get(o, "choices"), choice(r, text, len, true, first, NULL, logprobs));
    if (o && marks) json_object_set_new(o, "specdec", marks_json(marks));
    return dump(o, "data: ", "\n\n");
}

char *api_stream_end_sse(const ApiResponse *r, const EngineResult *result, bool include_usage) {
    json_t *last = frame(r, true);
    if (!last) return NULL;
    json_array_append_new(json_object_get(last, "choices"),
                          choice(r, r->kind == API_CHAT ? NULL : "", 0, true, false, result->finish_reason, NULL));
    if (result->tool_calls) add_tool_calls(json_array_get(json_object_get(last, "choices"), 0), result, true);
    json_object_set_new(last, "specdec", extension(result));
    char *finish = dump(last, "data: ", "\n\n"), *tally = NULL, *out = NULL;
    if (include_usage) {
        json_t *u = frame(r, true);
        if (u) json_object_set_new(u, "usage", usage(result));
        tally = dump(u, "data: ", "\n\n");
    }
    if (finish && (tally || !include_usage) &&
        asprintf(&out, "%s%sdata: [DONE]\n\n", finish, tally ? tally : "") < 0)
        out = NULL;
    free(finish);
    free(tally);
    return out;
}

char *api_models_json(const char *model, long long created, const Engine *engine) {
    const char *drafter = engine_drafter_name(engine);
    return dump(json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:b, s:o}}]}", "object", "list", "data", "id", model,
                          "object", "model", "created", (json_int_t)created, "owned_by", "specdec", "specdec", "chat",
                          engine->chat != NULL, "drafter", drafter ? json_string(drafter) : json_null()),
                "", "");
}
