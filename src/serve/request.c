// request.c — reading an OpenAI request body (see request.h).
#include "serve/request.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "chat/tools.h"
#include "grammar/json_schema.h"

int api_error(ApiError *e, int status, const char *code, const char *param, const char *fmt, ...) {
    char message[sizeof e->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    *e = (ApiError){.status = status, .code = code,
                    .type = status >= 500 ? "server_error" : "invalid_request_error"};
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    err_fmt(&e->err, "%s", message);  // escaped: a quoted field or value may hold anything
    return -1;
}

char *api_error_json(const ApiError *e) {
    json_t *body = json_pack("{s:{s:s, s:s, s:o, s:o}}", "error", "message", e->err.msg, "type", e->type, "param",
                             e->param[0] ? json_string(e->param) : json_null(), "code",
                             e->code ? json_string(e->code) : json_null());
    char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
    json_decref(body);
    return text;
}

// ---- fields specdec does not do -----------------------------------------------------------------------------

// A refused field's "off" values, which are accepted (clients send defaults): null always, and
typedef enum {
    OFF_EMPTY,      // false, 0, "", [] or {}
    OFF_ONE,        // 1 (n, best_of)
    OFF_NONE,       // the string "none" (tool_choice, function_call)
} OffValue;

static const struct {
    const char *name;
    OffValue off;
    const char *what;   // what specdec does not do, for the message
} refused[] = {
    {"n", OFF_ONE, "one choice per request (n = 1)"},
    {"best_of", OFF_ONE, "one choice per request (best_of = 1)"},
    {"functions", OFF_EMPTY, "no function calling"},
    {"function_call", OFF_NONE, "no function calling"},
    {"logit_bias", OFF_EMPTY, "no logit bias"},
    {"echo", OFF_EMPTY, "no echo of the prompt"},
    {"suffix", OFF_EMPTY, "no suffix (insertion)"},
    {"audio", OFF_EMPTY, "text only (no audio)"},
    {"prediction", OFF_EMPTY, "no predicted outputs (try --lookup: it drafts from the prompt)"},
    // vLLM's and llama-server's sampling fields beyond min_p, top_k and the penalties
    {"typical_p", OFF_ONE, "no typical sampling"},
    {"tfs_z", OFF_ONE, "no tail-free sampling"},
    {"top_a", OFF_EMPTY, "no top-a sampling"},
    {"epsilon_cutoff", OFF_EMPTY, "no epsilon sampling"},
    {"eta_cutoff", OFF_EMPTY, "no eta sampling"},
    {"mirostat", OFF_EMPTY, "no Mirostat sampling"},
    {"dry_multiplier", OFF_EMPTY, "no DRY penalty"},
    {"xtc_probability", OFF_EMPTY, "no XTC sampling"},
    {"length_penalty", OFF_ONE, "no beam search (length_penalty)"},
    {"use_beam_search", OFF_EMPTY, "no beam search"},
    {"min_tokens", OFF_EMPTY, "no minimum length (min_tokens)"},
    {"ignore_eos", OFF_EMPTY, "no generation past the end-of-text token (ignore_eos)"},
    {"stop_token_ids", OFF_EMPTY, "stop strings only (no stop_token_ids)"},
    {"bad_words", OFF_EMPTY, "no banned words"},
    {"allowed_token_ids", OFF_EMPTY, "no token allow-list"},
    {"logits_processors", OFF_EMPTY, "no logits processors"},
    {"prompt_logprobs", OFF_EMPTY, "no log probabilities of the prompt (logprobs: the generated tokens')"},
    {"guided_json", OFF_EMPTY, "no guided decoding"},
    {"guided_regex", OFF_EMPTY, "no guided decoding"},
    {"guided_choice", OFF_EMPTY, "no guided decoding"},
    {"guided_grammar", OFF_EMPTY, "no guided decoding"},
    {"structured_outputs", OFF_EMPTY, "no structured outputs"},
};

static bool is_off(const json_t *v, OffValue off) {
    if (json_is_null(v)) return true;
    switch (off) {
    case OFF_EMPTY:
        return json_is_false(v) || (json_is_number(v) && json_number_value(v) == 0) ||
               (json_is_string(v) && json_string_length(v) == 0) || (json_is_array(v) && json_array_size(v) == 0) ||
               (json_is_object(v) && json_object_size(v) == 0);
    case OFF_ONE: return json_is_number(v) && json_number_value(v) == 1;
    case OFF_NONE: return json_is_string(v) && strcmp(json_string_value(v), "none") == 0;
    }
    return false;
}

static int check_refused(const json_t *body, ApiError *e) {
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const json_t *v = json_object_get(body, refused[i].name);
        if (v && !is_off(v, refused[i].off))
            return api_error(e, 400, "unsupported_parameter", refused[i].name, "%s: specdec does %s",
                             refused[i].name, refused[i].what);
    }
    return 0;
}

// ---- typed fields -------------------------------------------------------------------------------------------

static char *copy_string(const json_t *v) { return strndup(json_string_value(v), json_string_length(v)); }

// An optional number in [lo, hi], or (lo, hi] when lo_open — as the float it is used as: the JSON double is checked,
// rounded to a float, and checked again (1e-300 passes (0, 1] as a double, not as the float 0).
static int get_number(const json_t *body, const char *name, double lo, double hi, bool lo_open, float *out,
                      ApiError *e) {
    const json_t *v = json_object_get(body, name);
    if (!v || json_is_null(v)) return 0;
    const double x = json_is_number(v) ? json_number_value(v) : 0;
    const bool in_range = json_is_number(v) && (lo_open ? x > lo : x >= lo) && x <= hi;
    const float f = in_range ? (float)x : 0.0f;  // (a double beyond a float's range never reaches the cast)
    if (!in_range || !(lo_open ? f > lo : f >= lo) || !(f <= hi))
        return api_error(e, 400, "invalid_value", name, "%s: expected a number in %c%g, %g]%s", name,
                         lo_open ? '(' : '[', lo, hi, in_range ? " (as a 32-bit float)" : "");
    *out = f;
    return 0;
}

// An optional integer in [lo, hi].
static int get_integer(const json_t *body, const char *name, json_int_t lo, json_int_t hi, json_int_t *out, bool *given,
                       ApiError *e) {
    const json_t *v = json_object_get(body, name);
    if (given) *given = false;
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return api_error(e, 400, "invalid_value", name, "%s: expected an integer in [%lld, %lld]", name,
                         (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    if (given) *given = true;
    return 0;
}

static int get_bool(const json_t *object, const char *name, const char *param, bool *out, ApiError *e) {
    const json_t *v = json_object_get(object, name);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_boolean(v)) return api_error(e, 400, "invalid_type", param, "%s: expected true or false", param);
    *out = json_is_true(v);
    return 0;
}

// stop: a string or a list of at most REQUEST_MAX_STOP strings, none empty.
static int get_stop(Request *req, const json_t *body, ApiError *e) {
    const json_t *v = json_object_get(body, "stop");
    if (!v || json_is_null(v)) return 0;
    const bool list = json_is_array(v);
    const size_t n = list ? json_array_size(v) : 1;
    if (!list && !json_is_string(v))
        return api_error(e, 400, "invalid_type", "stop", "stop: expected a string or a list of strings");
    if (n > REQUEST_MAX_STOP)
        return api_error(e, 400, "invalid_value", "stop", "stop: at most %d sequences, got %zu", REQUEST_MAX_STOP, n);
    for (size_t i = 0; i < n; i++) {
        const json_t *s = list ? json_array_get(v, i) : v;
        char param[40];
        snprintf(param, sizeof param, list ? "stop[%zu]" : "stop", i);
        if (!json_is_string(s)) return api_error(e, 400, "invalid_type", param, "%s: expected a string", param);
        if (json_string_length(s) == 0)
            return api_error(e, 400, "invalid_value", param, "%s: an empty stop sequence", param);
        req->stop[req->n_stop++] = copy_string(s);
    }
    return 0;
}

// The sampling and length fields every request has.
static int get_common(Request *req, const json_t *body, ApiError *e) {
    json_int_t v = 0, completion = 0;
    bool given = false, completion_given = false;
    const json_t *model = json_object_get(body, "model");
    if (model && !json_is_null(model) && !json_is_string(model))
        return api_error(e, 400, "invalid_type", "model", "model: expected a string");
    if (json_is_string(model)) req->model = copy_string(model);
    if (get_integer(body, "max_tokens", 1, REQUEST_MAX_TOKENS, &v, &given, e) ||
        get_integer(body, "max_completion_tokens", 1, REQUEST_MAX_TOKENS, &completion, &completion_given, e))
        return -1;
    // max_completion_tokens is OpenAI's newer name for max_tokens (the older, deprecated in chat completions): a
    // client that sends both with one value is understood; two different limits are a mistake that vLLM and SGLang
    // settle silently (the newer wins), so the client is told instead
    if (given && completion_given && v != completion)
        return api_error(e, 400, "invalid_value", "max_tokens", "max_tokens and max_completion_tokens: two different "
                         "limits (%lld and %lld); give one of them, or the same value in both", (long long)v,
                         (long long)completion);
    req->max_tokens = completion_given ? (int)completion : given ? (int)v : 0;
    if (get_number(body, "temperature", 0, 2, false, &req->sampling.temperature, e) ||
        get_number(body, "top_p", 0, 1, true, &req->sampling.top_p, e) ||
        get_number(body, "min_p", 0, 1, false, &req->sampling.min_p, e) ||
        get_number(body, "repetition_penalty", 0.01, 100, false, &req->penalties.repetition, e) ||
        get_number(body, "presence_penalty", -2, 2, false, &req->penalties.presence, e) ||
        get_number(body, "frequency_penalty", -2, 2, false, &req->penalties.frequency, e) ||
        get_integer(body, "top_k", 0, 1 << 24, &v, &given, e))
        return -1;
    if (given) req->sampling.top_k = (int)v;
    if (get_integer(body, "seed", 0, INT64_MAX, &v, &req->has_seed, e)) return -1;
    req->seed = (uint64_t)v;
    if (get_stop(req, body, e) || get_bool(body, "stream", "stream", &req->stream, e)) return -1;
    const json_t *salt = json_object_get(body, "cache_salt");
    if (salt && !json_is_null(salt) && !json_is_string(salt))
        return api_error(e, 400, "invalid_type", "cache_salt", "cache_salt: expected a string");
    if (json_is_string(salt)) req->cache_salt = copy_string(salt);
    const json_t *options = json_object_get(body, "stream_options");
    if (options && !json_is_null(options) && !json_is_object(options))
        return api_error(e, 400, "invalid_type", "stream_options", "stream_options: expected an object");
    if (json_object_size(options) > 0 && !req->stream)  // (as OpenAI's API and vLLM: an empty object says nothing)
        return api_error(e, 400, "invalid_value", "stream_options", "stream_options: only with \"stream\": true (it "
                         "says what a stream's chunks hold)");
    return options ? get_bool(options, "include_usage", "stream_options.include_usage", &req->include_usage, e) : 0;
}

// The extension "specdec": {"marks": bool, "draft": bool}, each optional; marks with a stream only.
static int get_extension(Request *req, const json_t *body, ApiError *e) {
    const json_t *ext = json_object_get(body, "specdec");
    if (!ext || json_is_null(ext)) return 0;
    if (!json_is_object(ext)) return api_error(e, 400, "invalid_type", "specdec", "specdec: expected an object");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)ext, key, value) {
        if (strcmp(key, "marks") != 0 && strcmp(key, "draft") != 0) {
            char param[4 * ERR_QUOTE_LEN + 32], quoted[ERR_QUOTE_LEN + 4], escaped[4 * ERR_QUOTE_LEN + 16];
            snprintf(param, sizeof param, "specdec.%s", err_escape(escaped, sizeof escaped, err_quote(quoted, key)));
            return api_error(e, 400, "unknown_parameter", param, "%s: specdec's extension has \"marks\" and \"draft\" "
                             "only", param);
        }
    }
    bool draft = true;
    if (get_bool(ext, "marks", "specdec.marks", &req->marks, e) || get_bool(ext, "draft", "specdec.draft", &draft, e))
        return -1;
    req->plain = !draft;
    if (req->marks && !req->stream)
        return api_error(e, 400, "invalid_value", "specdec.marks", "specdec.marks: marks come on a stream's chunks "
                         "(\"stream\": true)");
    return 0;
}

// Log-probabilities (speculative/logprobs.h): completions' "logprobs": k, an integer in [0, 20]; chat's "logprobs":
// true with "top_logprobs": k in [0, 20] (which needs logprobs true; 0 when not given).
static int get_logprobs(Request *req, const json_t *body, ApiError *e) {
    const json_t *top = json_object_get(body, "top_logprobs");
    json_int_t k = 0;
    if (req->kind == API_COMPLETIONS) {
        if (top && !json_is_null(top))
            return api_error(e, 400, "unsupported_parameter", "top_logprobs", "top_logprobs: a chat completions "
                             "field; /v1/completions takes \"logprobs\": k");
        if (get_integer(body, "logprobs", 0, LOGPROBS_TOP_MAX, &k, &req->logprobs, e)) return -1;
    } else {
        if (get_bool(body, "logprobs", "logprobs", &req->logprobs, e) ||
            get_integer(body, "top_logprobs", 0, LOGPROBS_TOP_MAX, &k, NULL, e))
            return -1;
        if (top && !json_is_null(top) && !req->logprobs)
            return api_error(e, 400, "invalid_value", "top_logprobs", "top_logprobs: needs \"logprobs\": true");
    }
    req->top_logprobs = (int)k;
    return 0;
}

// ---- structured output -----------------------------------------------------------------------------------------

// The grammar of a JSON Schema given as a JSON value; NULL with err set.
static Grammar *schema_grammar(const json_t *schema, const char *source, Err *err) {
    char *text = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        err_fmt(err, "out of memory");
        return NULL;
    }
    Grammar *g = json_schema_grammar(text, strlen(text), source, err);
    free(text);
    return g;
}

// response_format {"type": "json_object"} or {"type": "json_schema", "json_schema": {"schema": {...}, "strict": …}}
// ({"type": "text"} and null: plain text), or llama-server's "grammar" (GBNF text) or "json_schema" (a schema) —
// one of them ("" and {} count as not given, as clients send defaults). A schema or grammar that does not convert or
// parse is refused here, with its message (400).
static int get_structure(Request *req, const json_t *body, ApiError *e) {
    const json_t *format = json_object_get(body, "response_format"), *grammar = json_object_get(body, "grammar");
    const json_t *schema = json_object_get(body, "json_schema");
    const json_t *type = json_is_object(format) ? json_object_get(format, "type") : NULL;
    const char *kind = json_is_string(type) ? json_string_value(type) : NULL, *param = "response_format";
    if (format && !json_is_null(format) && !kind)
        return api_error(e, 400, "invalid_type", "response_format", "response_format: expected {\"type\": …}");
    if (kind && !strcmp(kind, "text")) kind = NULL;
    if (grammar && (json_is_null(grammar) || (json_is_string(grammar) && json_string_length(grammar) == 0)))
        grammar = NULL;
    if (schema && (json_is_null(schema) || (json_is_object(schema) && json_object_size(schema) == 0))) schema = NULL;
    if ((kind != NULL) + (grammar != NULL) + (schema != NULL) > 1)
        return api_error(e, 400, "invalid_value", grammar ? "grammar" : "json_schema",
                         "response_format, grammar and json_schema: give one of them");
    Err err;
    if (grammar) {
        if (!json_is_string(grammar)) return api_error(e, 400, "invalid_type", "grammar", "grammar: expected GBNF text");
        param = "grammar";
        req->grammar = grammar_parse(json_string_value(grammar), json_string_length(grammar), "grammar", &err);
    } else if (schema) {
        param = "json_schema";
        req->grammar = schema_grammar(schema, "json_schema", &err);
    } else if (kind && !strcmp(kind, "json_object")) {
        req->grammar = json_object_grammar(&err);
    } else if (kind && !strcmp(kind, "json_schema")) {
        const json_t *spec = json_object_get(format, "json_schema");
        const json_t *inner = json_is_object(spec) ? json_object_get(spec, "schema") : NULL;
        const json_t *strict = json_is_object(spec) ? json_object_get(spec, "strict") : NULL;
        if (!inner) return api_error(e, 400, "missing_required_parameter", "response_format.json_schema.schema",
                                     "response_format.json_schema.schema: missing");
        if (strict && !json_is_boolean(strict) && !json_is_null(strict))
            return api_error(e, 400, "invalid_type", "response_format.json_schema.strict",
                             "response_format.json_schema.strict: expected a boolean");
        req->grammar = schema_grammar(inner, "response_format.json_schema.schema", &err);
    } else if (kind) {
        return api_error(e, 400, "invalid_value", "response_format.type", "response_format.type: \"text\", "
                         "\"json_object\" or \"json_schema\"");
    } else {
        return 0;
    }
    return req->grammar ? 0 : api_error(e, 400, "invalid_value", param, "%s", err.msg);
}

// ---- the prompt and the messages ----------------------------------------------------------------------------

// prompt: a string, a list of one string, or a non-empty list of token ids (integers in [0, 2^31)).
static int get_prompt(Request *req, const json_t *body, ApiError *e) {
    const json_t *v = json_object_get(body, "prompt");
    if (!v || json_is_null(v)) return api_error(e, 400, "missing_required_parameter", "prompt", "prompt: missing");
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0))) v = json_array_get(v, 0);
    if (json_is_string(v)) {
        req->prompt = copy_string(v);
        return 0;
    }
    const size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n == 0 || !json_is_integer(json_array_get(v, 0)))
        return api_error(e, 400, "invalid_type", "prompt", "prompt: expected a string, a list of one string or a "
                         "non-empty list of token ids (several prompts in one request are not served)");
    if (!(req->prompt_ids = malloc(sizeof(int) * n))) return api_error(e, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *id = json_array_get(v, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) > INT32_MAX) {
            char param[40];
            snprintf(param, sizeof param, "prompt[%zu]", i);
            return api_error(e, 400, "invalid_value", param, "%s: expected a token id (an integer ≥ 0)", param);
        }
        req->prompt_ids[req->n_prompt_ids++] = (int)json_integer_value(id);
    }
    return 0;
}

// A message's content: a string, or a list of {"type": "text", "text": ...} parts, joined. Null or absent only for
// an assistant's message (as OpenAI allows). param: "messages[i]".
static int get_content(ChatMessage *m, const json_t *msg, const char *param, ApiError *e) {
    const json_t *c = json_object_get(msg, "content");
    char where[64];
    snprintf(where, sizeof where, "%s.content", param);
    if ((!c || json_is_null(c)) && strcmp(m->role, "assistant") == 0) m->content = strdup("");
    else if (json_is_string(c)) m->content = copy_string(c);
    if (m->content) return 0;
    if (!json_is_array(c))
        return api_error(e, 400, "invalid_type", where, "%s: expected a string or a list of text parts", where);
    size_t total = 1;
    for (size_t j = 0; j < json_array_size(c); j++) {
        const json_t *part = json_array_get(c, j), *type = json_object_get(part, "type");
        const json_t *text = json_object_get(part, "text");
        char at[128];
        snprintf(at, sizeof at, "%s[%zu].type", where, j);
        if (!json_is_string(type) || strcmp(json_string_value(type), "text") != 0)
            return api_error(e, 400, "unsupported_content", at, "%s: specdec reads text parts only (\"type\": "
                             "\"text\"), not images, audio or files", at);
        snprintf(at, sizeof at, "%s[%zu].text", where, j);
        if (!json_is_string(text)) return api_error(e, 400, "invalid_type", at, "%s: expected a string", at);
        total += json_string_length(text);
    }
    if (!(m->content = malloc(total))) return api_error(e, 500, NULL, NULL, "out of memory");
    size_t at = 0;
    for (size_t j = 0; j < json_array_size(c); j++) {
        const json_t *text = json_object_get(json_array_get(c, j), "text");
        memcpy(m->content + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    m->content[at] = '\0';
    return 0;
}

// An assistant's tool_calls and a tool message's tool_call_id, kept as given: their shapes, and that each answer
// follows its call, are checked over the whole conversation (get_messages).
static int get_tool_fields(ChatMessage *m, const json_t *msg, size_t i, ApiError *e) {
    const json_t *calls = json_object_get(msg, "tool_calls"), *id = json_object_get(msg, "tool_call_id");
    char where[64];
    snprintf(where, sizeof where, "messages[%zu].tool_calls", i);
    if (json_array_size(calls) > 0 && strcmp(m->role, "assistant") != 0)
        return api_error(e, 400, "invalid_value", where, "%s: only an assistant's message makes calls", where);
    if (json_array_size(calls) > 0) m->tool_calls = json_deep_copy(calls);
    snprintf(where, sizeof where, "messages[%zu].tool_call_id", i);
    if ((!id || json_is_null(id)) && strcmp(m->role, "tool") == 0)  // (OpenAI's API requires it; templates render it)
        return api_error(e, 400, "missing_required_parameter", where, "%s: missing: a tool message answers the call "
                         "whose id it gives", where);
    if (json_is_string(id)) m->tool_call_id = copy_string(id);
    return 0;
}

static int get_message(ChatMessage *m, const json_t *msg, size_t i, ApiError *e) {
    char param[40], where[64];
    snprintf(param, sizeof param, "messages[%zu]", i);
    snprintf(where, sizeof where, "%s.role", param);
    if (!json_is_object(msg)) return api_error(e, 400, "invalid_type", param, "%s: expected an object", param);
    const json_t *role = json_object_get(msg, "role");
    if (!json_is_string(role)) return api_error(e, 400, "invalid_type", where, "%s: expected a string", where);
    static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
    bool known = false;
    for (int r = 0; r < 5; r++) known |= strcmp(json_string_value(role), roles[r]) == 0;
    if (!known) {
        char quoted[ERR_QUOTE_LEN + 4];
        return api_error(e, 400, "invalid_value", where, "%s: \"%s\" is not served (system, developer, user, "
                         "assistant or tool)", where, err_quote(quoted, json_string_value(role)));
    }
    m->role = copy_string(role);
    return get_tool_fields(m, msg, i, e) || get_content(m, msg, param, e) ? -1 : 0;
}

// tool_choice (not null): "none", "auto", "required" or {"type": "function", "function": {"name"}}.
static int get_tool_choice(Request *req, const json_t *choice, ApiError *e) {
    const char *word = json_string_value(choice);
    const json_t *fn = json_object_get(choice, "function"), *name = json_object_get(fn, "name");
    if (word && strcmp(word, "none") == 0) {
        req->tool_choice = TOOL_CHOICE_NONE;
        return 0;
    }
    if (word && strcmp(word, "auto") != 0 && strcmp(word, "required") != 0)
        return api_error(e, 400, "invalid_value", "tool_choice", "tool_choice: \"none\", \"auto\", \"required\" "
                         "or {\"type\": \"function\", \"function\": {\"name\": …}}");
    if (!word && !json_is_string(name))
        return api_error(e, 400, "invalid_value", "tool_choice", "tool_choice: expected a string or {\"type\": "
                         "\"function\", \"function\": {\"name\": …}}");
    if (!req->tools)
        return api_error(e, 400, "invalid_value", "tool_choice", "tool_choice: asks for a call, and no tools are given");
    if (word) {
        req->tool_choice = strcmp(word, "auto") == 0 ? TOOL_CHOICE_AUTO : TOOL_CHOICE_REQUIRED;
    } else if (!tools_find(req->tools, json_string_value(name))) {
        char quoted[ERR_QUOTE_LEN + 4];
        return api_error(e, 400, "invalid_value", "tool_choice.function.name", "tool_choice.function.name: no tool "
                         "is named \"%s\"", err_quote(quoted, json_string_value(name)));
    } else {
        req->tool_choice = TOOL_CHOICE_NAMED;
        req->tool_name = copy_string(name);
    }
    if (req->tool_choice != TOOL_CHOICE_AUTO && req->grammar)
        return api_error(e, 400, "invalid_value", "tool_choice", "tool_choice: a required call and response_format "
                         "(or grammar, json_schema) cannot both constrain the reply");
    return 0;
}

// tools (checked: chat/tools.h), tool_choice and parallel_tool_calls. A choice that asks for a call needs tools, and
// the one named must be among them; a call constrained from the first token leaves no room for another grammar.
static int get_tools(Request *req, const json_t *body, ApiError *e) {
    const json_t *tools = json_object_get(body, "tools"), *choice = json_object_get(body, "tool_choice");
    req->parallel_tool_calls = true;
    if (get_bool(body, "parallel_tool_calls", "parallel_tool_calls", &req->parallel_tool_calls, e)) return -1;
    if (tools && !json_is_null(tools) && !(json_is_array(tools) && json_array_size(tools) == 0)) {
        ToolsError te;
        if (req->kind != API_CHAT)
            return api_error(e, 400, "invalid_value", "tools", "tools: tools are for chat completions");
        if (tools_check(tools, &te)) return api_error(e, 400, "invalid_value", te.field, "%s: %s", te.field, te.err.msg);
        if (tool_calls_check_parameters(tools, &te)) return api_error(e, 400, "invalid_value", te.field, "%s", te.err.msg);
        req->tools = json_deep_copy(tools);
        req->tool_choice = TOOL_CHOICE_AUTO;
    }
    if (choice && !json_is_null(choice) && get_tool_choice(req, choice, e)) return -1;
    // a reply read back for calls holds back text that may open one: the marks of the text would lag
    if (req->tool_choice != TOOL_CHOICE_NONE && req->marks)
        return api_error(e, 400, "invalid_value", "specdec.marks", "specdec.marks: not with tools (text that may "
                         "open a call waits for the reply's end); \"tool_choice\": \"none\" allows it");
    return 0;
}


static int get_messages(Request *req, const json_t *body, ApiError *e) {
    const json_t *v = json_object_get(body, "messages");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return api_error(e, 400, v ? "invalid_type" : "missing_required_parameter", "messages",
                         "messages: expected a non-empty list of messages");
    const size_t n = json_array_size(v);
    if (!(req->messages = calloc(n, sizeof *req->messages))) return api_error(e, 500, NULL, NULL, "out of memory");
    req->n_messages = (int)n;  // (request_free frees what a failure leaves half-read)
    for (size_t i = 0; i < n; i++)
        if (get_message(&req->messages[i], json_array_get(v, i), i, e)) return -1;
    ToolsError te;  // the calls' shapes and the answers' order, as render checks them (chat/tools.h)
    json_t *prepared = tools_messages_for_template(v, &te);
    if (!prepared) return api_error(e, 400, "invalid_value", te.field, "%s: %s", te.field, te.err.msg);
    json_decref(prepared);
    return 0;
}

// ---- the request --------------------------------------------------------------------------------------------

int request_parse(Request *req, ApiKind kind, const char *body, size_t len, ApiError *e) {
    *req = (Request){.kind = kind, .sampling = {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f},
                     .penalties = PENALTIES_OFF};
    json_error_t error;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &error);
    if (!root)
        return api_error(e, 400, "invalid_json", NULL, "the body is not valid JSON: %s (line %d, column %d)",
                         error.text, error.line, error.column);
    int rc = -1;
    if (!json_is_object(root)) {
        api_error(e, 400, "invalid_json", NULL, "the body must be a JSON object");
        goto done;
    }
    if (check_refused(root, e) || get_common(req, root, e) || get_extension(req, root, e) ||
        get_logprobs(req, root, e) || get_structure(req, root, e) || get_tools(req, root, e))
        goto done;
    if (kind == API_COMPLETIONS ? get_prompt(req, root, e) : get_messages(req, root, e)) goto done;
    rc = 0;
done:
    json_decref(root);
    return rc;
}

void request_free(Request *req) {
    free(req->model);
    free(req->prompt);
    free(req->prompt_ids);
    for (int i = 0; i < req->n_messages; i++) {
        free(req->messages[i].role);
        free(req->messages[i].content);
        json_decref(req->messages[i].tool_calls);
        free(req->messages[i].tool_call_id);
    }
    json_decref(req->tools);
    free(req->tool_name);
    free(req->messages);
    for (int i = 0; i < req->n_stop; i++) free(req->stop[i]);
    free(req->cache_salt);
    grammar_free(req->grammar);
    *req = (Request){0};
}
