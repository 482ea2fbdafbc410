// engine.c — one generation for the server (see engine.h).
#include "serve/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"
#include "chat/text_out.h"
#include "chat/tools.h"
#include "grammar/vocabulary.h"

// ---- the prompt ---------------------------------------------------------------------------------------------

// A chat message as the template reads it: role and content, and an assistant's tool_calls or a tool's
// tool_call_id (the calls' string arguments become objects: chat/tools.h).
static json_t *template_message(const ChatMessage *m) {
    json_t *o = json_pack("{s:s, s:s}", "role", m->role, "content", m->content);
    if (o && m->tool_calls) json_object_set(o, "tool_calls", m->tool_calls);
    if (o && m->tool_call_id) json_object_set_new(o, "tool_call_id", json_string(m->tool_call_id));
    return o;
}

// A chat request's messages (and tools) through the checkpoint's template, the assistant's turn opened, encoded with
// special tokens from the template's own bytes only (chat/template.h): what generate --chat does with one user
// message.
static int chat_prompt(const Engine *en, const Request *req, int **ids, int *n_ids, ApiError *e) {
    if (!en->chat) return api_error(e, 400, "unsupported_value", "messages", "%s", en->no_chat);
    json_t *given = json_array(), *vars = json_object();
    for (int i = 0; given && i < req->n_messages; i++) json_array_append_new(given, template_message(&req->messages[i]));
    if (vars && req->tools) json_object_set(vars, "tools", req->tools);
    ToolsError te;
    json_t *messages = given ? tools_messages_for_template(given, &te) : NULL;  // (checked when read: no error)
    Err err;
    int rc = 0;
    if (!messages || !vars || chat_render_ids(en->chat, en->tok, messages, true, vars, ids, n_ids, &err))
        rc = api_error(e, 400, "invalid_value", "messages", "messages: %s", messages ? err.msg : "out of memory");
    json_decref(given);
    json_decref(messages);
    json_decref(vars);
    return rc;
}

const char *engine_drafter_name(const Engine *en) {
    return drafter_kind_name(drafter_kind(en->draft != NULL, en->lookup));
}

int engine_prompt(const Engine *en, const Request *req, int **ids, int *n_ids, ApiError *e) {
    *ids = NULL;
    *n_ids = 0;
    const char *param = req->kind == API_CHAT ? "messages" : "prompt";
    if (req->kind == API_CHAT) {
        if (chat_prompt(en, req, ids, n_ids, e)) return -1;
    } else if (req->prompt) {
        Err err;
        if (tokenizer_encode(en->tok, req->prompt, strlen(req->prompt), false, ids, n_ids, &err) ||
            tokenizer_add_special_tokens(en->tok, ids, n_ids, &err))  // BOS, as the checkpoint's (generate -p)
            return api_error(e, 400, "invalid_value", param, "prompt: %s", err.msg);
    } else {
        if (!(*ids = malloc(sizeof(int) * req->n_prompt_ids))) return api_error(e, 500, NULL, NULL, "out of memory");
        memcpy(*ids, req->prompt_ids, sizeof(int) * req->n_prompt_ids);
        *n_ids = req->n_prompt_ids;
    }
    // The ids the model really uses: its logits' (a tokenizer may know more tokens than the model has rows, and a
    // model's rows may be padded past its tokenizer's, as Qwen's are: cmd_serve limits its logits to them).
    const int vocabulary = en->target->n_vocab;
    for (int i = 0; i < *n_ids; i++)
        if ((*ids)[i] >= vocabulary)
            return api_error(e, 400, "invalid_value", param, "%s: token id %d (token %d of the prompt) is outside "
                             "the model's vocabulary [0, %d)", param, (*ids)[i], i, vocabulary);
    if (*n_ids == 0) return api_error(e, 400, "invalid_value", param, "%s: empty", param);
    if (*n_ids >= en->target->cfg.n_positions)
        return api_error(e, 400, "context_length_exceeded", param, "%s: %d token%s, which leave no room to generate "
                         "in the context of %d position%s", param, *n_ids, plural(*n_ids), en->target->cfg.n_positions,
                         plural(en->target->cfg.n_positions));
    return 0;
}

// ---- the run ------------------------------------------------------------------------------------------------

// One generation's text: decoded token by token as the scheduler commits them (SpecParams.stop), scanned for the
// request's stop strings (chat/stop.h), handed on as it becomes final — with specdec.marks, once per round, with
// where each piece came from (marks.h).
//
// With tools the reply is read back into calls (chat/tool_calls.h): the text that is content for certain goes on
// as it comes, what may open a call waits for the end, where it is read in the template's format.
typedef struct {
    ToolFormat format;          // TOOL_FORMAT_NONE: nothing is read back (no tools, or tool_choice "none")
    char *reply;                // [len] the reply so far
    size_t len, cap, sent;      // sent: the bytes handed on as content
    json_t *calls;              // at the end: the calls read ({"name", "arguments"}), or NULL
} ToolReading;

typedef struct {
    const EngineSink *sink;
    const Tokenizer *tok;
    TextOut text;               // decoded, scanned for the stop strings, given out (give_out)
    Marks *marks;               // NULL: not asked for
    TokenReportList reports;    // with the request's logprobs (run_logprobs)
    int reports_given;          // ... of them handed on with a piece
    int text_chars;             // code points of the generated text so far
    size_t text_bytes;          // ... its bytes
    bool logprobs;              // asked for
    ToolReading tools;
    bool stopped, cancelled, failed;
} Run;


int token_reports_append(TokenReportList *list, const TokenReports *more) {
    if (list->n + more->n > list->cap) {
        const int cap = 2 * (list->n + more->n) + 16;
        TokenReport *grown = realloc(list->tokens, sizeof(TokenReport) * cap);
        if (!grown) return -1;
        list->tokens = grown, list->cap = cap;
    }
    memcpy(list->tokens + list->n, more->tokens, sizeof(TokenReport) * more->n);
    list->n += more->n;
    return 0;
}

void token_reports_free(TokenReportList *list) {
    free(list->tokens);
    *list = (TokenReportList){0};
}

// The reports of the tokens whose text is now given out — the generated text's first `upto` bytes, all of it once
// `last` — not handed on before.
static TokenReports reports_given(Run *run, size_t upto, bool last) {
    const int first = run->reports_given;
    const TokenReport *tokens = run->reports.tokens;
    while (run->reports_given < run->reports.n && (last || tokens[run->reports_given].text_end <= upto))
        run->reports_given++;
    return (TokenReports){.tokens = tokens + first, .n = run->reports_given - first};
}

// With tools: adds final text to the reply and hands on what is content for certain, with the logprobs of its
// tokens; at the end reads the calls, and hands on the logprobs of every token left — a call's too (as vLLM gives
// them: each generated token has its entry; the calls themselves go in the response's tool_calls).
static void give_out_content(Run *run, const char *final, size_t len, bool last) {
    ToolReading *t = &run->tools;
    if (t->len + len + 1 > t->cap) {
        char *grown = realloc(t->reply, t->cap = 2 * (t->len + len + 1));
        if (!grown) {
            run->failed = run->stopped = true;
            return;
        }
        t->reply = grown;
    }
    memcpy(t->reply + t->len, final, len);
    t->len += len;
    size_t content = tool_calls_content_prefix(t->format, t->reply, t->len);
    if (last) t->calls = tool_calls_parse(t->format, t->reply, t->len, &content);
    if (last && !t->calls) content = t->len;
    const TokenReports logprobs = reports_given(run, content, last);  // (the reply's bytes are the text's)
    if (content > t->sent || logprobs.n)
        run->sink->on_text(run->sink->ctx, t->reply + t->sent, content > t->sent ? content - t->sent : 0, NULL,
                           run->logprobs ? &logprobs : NULL);
    if (content > t->sent) t->sent = content;
}

// The text out's sink (ctx: the Run): hands on the text that is final (`last`: no more text comes), with its marks
// and its tokens' logprobs when asked for.
static void give_out(void *ctx, const char *final, size_t len, bool last) {
    Run *run = ctx;
    if (run->tools.format != TOOL_FORMAT_NONE) {  // (marks are refused with tools: request.c)
        give_out_content(run, final, len, last);
        return;
    }
    TextMarks marks;
    if (run->marks && marks_take(run->marks, final, len, &marks)) run->failed = run->stopped = true;
    const TokenReports logprobs = reports_given(run, run->text.scan.taken, last);
    if (len || (run->marks && (marks.n_marks || marks.n_rounds)) || logprobs.n)
        run->sink->on_text(run->sink->ctx, final, len, run->marks ? &marks : NULL,
                           run->logprobs ? &logprobs : NULL);
}

// A token's log-probabilities (SpecParams.on_logprobs), reported before its text is decoded (run_token).
static void run_logprobs(void *ctx, const TokenLogprobs *lp, TokenKind kind) {
    (void)kind;
    Run *run = ctx;
    const TokenReport report = {.lp = *lp, .text_offset = run->text_chars};
    if (token_reports_append(&run->reports, &(TokenReports){.tokens = &report, .n = 1})) run->failed = true;
}

// The token's decoded piece p[0..n) (valid UTF-8) counted into the text so far, and into its report.
static void count_text(Run *run, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) run->text_chars += ((unsigned char)p[i] & 0xC0) != 0x80;
    run->text_bytes += n;
    if (run->reports.n) run->reports.tokens[run->reports.n - 1].text_end = run->text_bytes;
}

// The scheduler's stop hook: each committed token's text; true makes the token the last — a stop string completed
// in it, or nobody waits for the text any more. With marks the text waits for the round's end (run_round).
static bool run_token(void *ctx, int id) {
    Run *run = ctx;
    const char *piece;
    size_t n;
    Err err;
    bool stopped = false;
    if (text_out_token(&run->text, id, &piece, &n, &stopped, &err) ||  // (ids come from the model: in the vocabulary)
        (run->marks && marks_committed(run->marks, n))) {
        run->failed = run->stopped = true;
        return true;
    }
    run->stopped = stopped;
    count_text(run, piece, n);
    if (!run->marks) text_out_give(&run->text, false);
    if (!run->stopped && run->sink->cancelled) run->cancelled = run->sink->cancelled(run->sink->ctx);
    return run->stopped || run->cancelled || run->failed;
}

// With marks: each token's kind as the round decided it (SpecParams.on_token), then the round's end.
static void run_mark(void *ctx, int id, TokenKind kind) {
    Run *run = ctx;
    if (marks_token(run->marks, run->tok, id, kind)) run->failed = true;
}

static void run_round(void *ctx, const RoundOutcome *round) {
    Run *run = ctx;
    if (marks_round(run->marks, round)) run->failed = true;
    text_out_give(&run->text, false);
}

// ---- drafters -----------------------------------------------------------------------------------------------

// A seed for a request that gives none: fresh randomness in [0, 2^63), which a request's "seed" can give again
// (the response says which seed it was).
static uint64_t draw_seed(void) {
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)(now_seconds() * 1e9);
    return seed >> 1;
}

// The continuation of prompt[0..n_prompt) into out: in the engine's conversation when it has one (the caches keep
// the longest common prefix of the last request's ids and these, when it was the request's cache_salt's; a fresh
// drafter prefills them whole), else fresh.
static int generate(const Engine *en, const Request *req, Drafter *drafter, const int *prompt, int n_prompt,
                    const SpecParams *params, int *out, int *n_out, EngineResult *result, Err *err) {
    if (!en->conversation)
        return speculative_generate(en->target, drafter, prompt, n_prompt, params, out, n_out, &result->stats, err);
    if (conversation_claim(en->conversation, req->cache_salt, err)) return -1;
    en->conversation->drafter = drafter;
    const int rc = conversation_reply(en->conversation, prompt, n_prompt, params, out, n_out, &result->stats,
                                      &result->cached_tokens, err);
    en->conversation->drafter = NULL;  // (freed after this request: the next brings its own)
    return rc;
}

// A generation set up by engine_begin: its parameters, drafter, grammar, text stream and tokens.
struct EngineRun {
    const Engine *en;
    EngineResult *result;
    Run run;
    Marks marks;
    SpecParams params;
    Drafters drafters;
    TokenBytes tokens;              // the target's tokens as bytes, under a grammar
    GrammarConstraint constraint;   // the request's grammar (docs/structured.md), or none
    Grammar *call_grammar;          // the grammar of the calls tool_choice asks for (calls_constrained), or NULL
    bool parallel_tool_calls;       // false: the first call read back only
    int *out;
    int n_prompt;
};

void engine_abort(EngineRun *x) {
    if (!x) return;
    drafter_close(&x->drafters);
    grammar_constraint_free(&x->constraint);
    grammar_free(x->call_grammar);
    token_bytes_free(&x->tokens);
    free(x->run.tools.reply);
    json_decref(x->run.tools.calls);
    text_out_free(&x->run.text);
    marks_free(&x->marks);
    token_reports_free(&x->run.reports);
    free(x->out);
    free(x);
}

// The grammar of the calls tool_choice asks for, in the template's format (chat/tool_calls.h): "required" or a named
// function, one call from the first token; "auto", the lazy grammar (free text until a call opens). NULL with e
// (400) when "required" or a name meets a template that teaches no format, or a parameters schema is refused.
static Grammar *call_grammar(const Engine *en, const Request *req, ApiError *e) {
    const ToolFormat format = en->chat ? en->chat->tool_format : TOOL_FORMAT_NONE;
    if (format == TOOL_FORMAT_NONE) {
        api_error(e, 400, "invalid_value", "tool_choice", "tool_choice: the checkpoint's chat template teaches no "
                  "tool-call format (Hermes' <tool_call>, Mistral's [TOOL_CALLS], Llama 3's JSON): use \"auto\"");
        return NULL;
    }
    Err err;
    const char *name = req->tool_choice == TOOL_CHOICE_NAMED ? req->tool_name : NULL;
    char *gbnf = req->tool_choice == TOOL_CHOICE_AUTO
                     ? tool_calls_lazy_gbnf(format, req->tools, req->parallel_tool_calls, en->tok, &err)
                     : tool_calls_gbnf(format, req->tools, name, en->tok, &err);
    Grammar *g = gbnf ? grammar_parse(gbnf, strlen(gbnf), "tools", &err) : NULL;
    free(gbnf);
    if (!g) api_error(e, 400, "invalid_value", "tools", "tools: %s", err.msg);
    return g;
}

// Whether the request's tools put decoding under a call's grammar: "required" and a named function always; "auto"
// (lazily) where the template teaches a format and no response_format or grammar is given (that one rules then). A
// marker that is a special token (Mistral's [TOOL_CALLS]) is the grammar's token reference, which only that token
// spells (grammar/vocabulary.h), so the lazy grammar lets the model write it.
static bool calls_constrained(const Engine *en, const Request *req) {
    if (req->tool_choice == TOOL_CHOICE_REQUIRED || req->tool_choice == TOOL_CHOICE_NAMED) return true;
    const ToolFormat format = en->chat ? en->chat->tool_format : TOOL_FORMAT_NONE;
    return req->tool_choice == TOOL_CHOICE_AUTO && req->tools && !req->grammar && format != TOOL_FORMAT_NONE;
}

// The request's grammar over the target's ids (docs/structured.md), or its calls', when it gives one.
static int constrain(EngineRun *x, const Request *req, ApiError *e) {
    if (calls_constrained(x->en, req) && !(x->call_grammar = call_grammar(x->en, req, e))) return -1;
    const Grammar *grammar = x->call_grammar ? x->call_grammar : req->grammar;
    if (!grammar) return 0;
    const Config *cfg = &x->en->target->cfg;
    const char *missing = token_bytes_missing_marker(x->en->tok, x->en->target->n_vocab, grammar);
    if (missing)
        return api_error(e, 400, "invalid_value", "grammar", "grammar: it references the token %s, which the "
                         "tokenizer has not (as an added token)", missing);
    Err err;
    if (token_bytes_init(&x->tokens, x->en->tok, x->en->target->n_vocab, cfg->eos_ids, cfg->n_eos, grammar, &err) ||
        grammar_constraint_init(&x->constraint, grammar, &x->tokens.vocab, &err))
        return api_error(e, 500, NULL, NULL, "%s", err.msg);
    x->params.constraint = &x->constraint;
    x->params.forced_drafts = true;
    return 0;
}

EngineRun *engine_begin(const Engine *en, const Request *req, const int *prompt, int n_prompt,
                        const EngineSink *sink, EngineResult *result, BatchJob *job, ApiError *e) {
    const Config *cfg = &en->target->cfg;
    *result = (EngineResult){.prompt_tokens = n_prompt, .seed = req->has_seed ? req->seed : draw_seed()};
    EngineRun *x = calloc(1, sizeof *x);
    if (!x) {
        api_error(e, 500, NULL, NULL, "out of memory");
        return NULL;
    }
    marks_init(&x->marks);
    x->en = en;
    x->result = result;
    x->n_prompt = n_prompt;
    x->run = (Run){.sink = sink, .tok = en->tok, .marks = req->marks ? &x->marks : NULL, .logprobs = req->logprobs};
    SpecParams *params = &x->params;
    *params = en->spec;
    params->sampling = req->sampling;
    params->penalties = penalties_on(&req->penalties) ? &req->penalties : NULL;
    params->seed = result->seed;
    params->max_tokens = req->max_tokens ? req->max_tokens : en->default_max_tokens;
    params->eos_id = cfg->eos_token_id;
    params->eos_ids = cfg->eos_ids;
    params->n_eos = cfg->n_eos;
    params->trace = NULL;
    params->stop = run_token;
    params->stop_ctx = &x->run;
    params->on_token = req->marks ? run_mark : NULL;
    params->on_round = req->marks ? run_round : NULL;
    params->on_logprobs = req->logprobs ? run_logprobs : NULL;
    params->logprobs_ctx = &x->run;
    params->top_logprobs = req->top_logprobs;
    params->ctx = &x->run;
    if (req->tool_choice != TOOL_CHOICE_NONE && en->chat) x->run.tools.format = en->chat->tool_format;
    x->parallel_tool_calls = req->parallel_tool_calls;
    Err err;
    if (constrain(x, req, e)) {
        engine_abort(x);
        return NULL;
    }
    x->out = malloc(sizeof(int) * ((size_t)params->max_tokens + 1));
    if (!x->out ||
        text_out_init(&x->run.text, en->tok, (const char *const *)req->stop, req->n_stop, give_out, &x->run, &err) ||
        drafter_open(&x->drafters, drafter_kind(en->draft && !req->plain, en->lookup && !req->plain), en->draft,
                     params, en->draft_p_min, LOOKUP_STAGED_MIN_MATCH, &err)) {
        api_error(e, 500, NULL, NULL, "generation failed: %s", x->out ? err.msg : "out of memory");
        engine_abort(x);
        return NULL;
    }
    *job = (BatchJob){.prompt = prompt, .n_prompt = n_prompt, .params = params, .drafter = x->drafters.drafter,
                      .out = x->out};
    return x;
}

// The calls read back as OpenAI's tool_calls: [{"id", "type": "function", "function": {"name", "arguments"}}], the
// ids made from the request's seed and the call's place (the same request and seed, the same ids); all of them, or
// with parallel_tool_calls false the first.
static json_t *openai_tool_calls(const json_t *calls, uint64_t seed, bool parallel) {
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(calls) && (parallel || i == 0); i++) {
        const json_t *call = json_array_get(calls, i);
        char id[48];
        snprintf(id, sizeof id, "call_%016llx_%zu", (unsigned long long)seed, i);
        json_array_append_new(out, json_pack("{s:s, s:s, s:{s:O, s:O}}", "id", id, "type", "function", "function",
                                             "name", json_object_get(call, "name"), "arguments",
                                             json_object_get(call, "arguments")));
    }
    return out;
}

void engine_result_free(EngineResult *result) {
    json_decref(result->tool_calls);
    result->tool_calls = NULL;
}

int engine_end(EngineRun *x, int n_out, ApiError *e) {
    Run *run = &x->run;
    const char *piece;
    size_t n;
    bool stopped = false;
    Err err;
    if (text_out_end(&run->text, &piece, &n, &stopped, &err)) run->failed = true;  // (memory)
    if (run->marks && marks_flushed(run->marks, n)) run->failed = true;
    run->stopped |= stopped;
    text_out_give(&run->text, true);
    int rc = -1;
    if (run->failed) {
        api_error(e, 500, NULL, NULL, "out of memory for the generated text");
    } else {
        EngineResult *result = x->result;
        result->completion_tokens = n_out;
        result->cancelled = run->cancelled;
        const bool full = n_out == x->params.max_tokens || x->n_prompt + n_out > x->en->target->cfg.n_positions;
        result->finish_reason = full && !run->stopped ? "length" : "stop";  // (as generate says)
        if (run->tools.calls) {
            result->tool_calls = openai_tool_calls(run->tools.calls, result->seed, x->parallel_tool_calls);
            result->finish_reason = "tool_calls";
        }
        rc = 0;
    }
    engine_abort(x);
    return rc;
}

int engine_run(const Engine *en, const Request *req, const int *prompt, int n_prompt, const EngineSink *sink,
               EngineResult *result, ApiError *e) {
    BatchJob job;
    EngineRun *x = engine_begin(en, req, prompt, n_prompt, sink, result, &job, e);
    if (!x) return -1;
    Err err;
    int n_out = 0;
    if (generate(en, req, job.drafter, prompt, n_prompt, job.params, job.out, &n_out, result, &err)) {
        api_error(e, 500, NULL, NULL, "generation failed: %s", err.msg);
        engine_abort(x);
        return -1;
    }
    return engine_end(x, n_out, e);
}
