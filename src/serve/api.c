// api.c — the OpenAI response objects (see api.h).
#include "serve/api.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// One choice: completions {"text", "index", "logprobs", "finish_reason"}; chat {"index", "message" | "delta",
// "logprobs", "finish_reason"}. finish NULL: null (a chunk before the last).
static json_t *choice(const ApiResponse *r, const char *text, size_t len, bool chunk, bool role, const char *finish) {
    json_t *c = json_pack("{s:i, s:n, s:o}", "index", 0, "logprobs", "finish_reason",
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

char *api_completion_json(const ApiResponse *r, const char *text, size_t len, const EngineResult *result) {
    json_t *o = frame(r, false);
    if (!o) return NULL;
    json_array_append_new(json_object_get(o, "choices"), choice(r, text, len, false, false, result->finish_reason));
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

char *api_chunk_sse(const ApiResponse *r, const char *text, size_t len, bool first, const TextMarks *marks) {
    json_t *o = frame(r, true);
    if (o) json_array_append_new(json_object_get(o, "choices"), choice(r, text, len, true, first, NULL));
    if (o && marks) json_object_set_new(o, "specdec", marks_json(marks));
    return dump(o, "data: ", "\n\n");
}

char *api_stream_end_sse(const ApiResponse *r, const EngineResult *result, bool include_usage) {
    json_t *last = frame(r, true);
    if (!last) return NULL;
    json_array_append_new(json_object_get(last, "choices"),
                          choice(r, r->kind == API_CHAT ? NULL : "", 0, true, false, result->finish_reason));
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
    static const char *const drafters[] = {[DRAFTER_NONE] = NULL, [DRAFTER_MODEL] = "draft model",
                                           [DRAFTER_LOOKUP] = "lookup", [DRAFTER_STAGED] = "draft model and lookup"};
    const char *drafter = drafters[drafter_kind(engine->draft != NULL, engine->lookup)];
    return dump(json_pack("{s:s, s:[{s:s, s:s, s:I, s:s, s:{s:b, s:o}}]}", "object", "list", "data", "id", model,
                          "object", "model", "created", (json_int_t)created, "owned_by", "specdec", "specdec", "chat",
                          engine->chat != NULL, "drafter", drafter ? json_string(drafter) : json_null()),
                "", "");
}
