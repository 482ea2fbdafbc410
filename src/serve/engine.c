// engine.c — one generation for the server (see engine.h).
#include "serve/engine.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "base/clock.h"

// ---- the prompt ---------------------------------------------------------------------------------------------

int engine_prompt(const Engine *en, const Request *req, int **ids, int *n_ids, ApiError *e) {
    *ids = NULL;
    *n_ids = 0;
    const char *param = req->kind == API_CHAT ? "messages" : "prompt";
    if (req->kind == API_CHAT)
        return api_error(e, 400, "unsupported_value", param, "this checkpoint has no chat template: use "
                         "/v1/completions with the prompt as text");
    if (req->prompt) {
        Err err;
        if (tokenizer_encode(en->tok, req->prompt, strlen(req->prompt), false, ids, n_ids, &err) ||
            tokenizer_add_special_tokens(en->tok, ids, n_ids, &err))  // BOS, as the checkpoint's (generate -p)
            return api_error(e, 400, "invalid_value", param, "prompt: %s", err.msg);
    } else {
        if (!(*ids = malloc(sizeof(int) * req->n_prompt_ids))) return api_error(e, 500, NULL, NULL, "out of memory");
        memcpy(*ids, req->prompt_ids, sizeof(int) * req->n_prompt_ids);
        *n_ids = req->n_prompt_ids;
    }
    for (int i = 0; i < *n_ids; i++)  // (a tokenizer may know more tokens than the model has rows)
        if ((*ids)[i] >= en->target->cfg.vocab_size)
            return api_error(e, 400, "invalid_value", param, "%s: token id %d (token %d of the prompt) is outside "
                             "the model's vocabulary [0, %d)", param, (*ids)[i], i, en->target->cfg.vocab_size);
    if (*n_ids == 0) return api_error(e, 400, "invalid_value", param, "%s: empty", param);
    if (*n_ids >= en->target->cfg.n_positions)
        return api_error(e, 400, "context_length_exceeded", param, "%s: %d tokens, which leave no room to generate "
                         "in the context of %d positions", param, *n_ids, en->target->cfg.n_positions);
    return 0;
}

// ---- stop strings -------------------------------------------------------------------------------------------

size_t stop_scan(const char *text, size_t len, size_t from, char *const *stop, int n_stop, bool *stopped) {
    size_t first = len, first_end = len + 1, hold = 0;
    *stopped = false;
    for (int s = 0; s < n_stop; s++) {
        const size_t n = strlen(stop[s]);
        const char *hit = memmem(text + from, len - from, stop[s], n);  // (its first: the one that ends first)
        const size_t at = hit ? (size_t)(hit - text) : 0;
        if (hit && (at + n < first_end || (at + n == first_end && at < first))) {
            first = at;
            first_end = at + n;
            *stopped = true;
        }
        for (size_t k = n - 1; k > hold; k--)  // the longest proper prefix of stop[s] that ends the text
            if (k <= len - from && memcmp(text + len - k, stop[s], k) == 0) {
                hold = k;
                break;
            }
    }
    return *stopped ? first : len - hold;
}

// ---- the run ------------------------------------------------------------------------------------------------

// The text of one generation: all of it decoded so far, of which text[0..sent) went to the sink.
typedef struct {
    const Request *req;
    const EngineSink *sink;
    TokenStream stream;
    char *text;
    size_t len, cap, sent;
    int tokens;             // emitted tokens up to the one that completed a stop string
    bool stopped, cancelled, out_of_memory;
} Run;

// Appends a piece of decoded text and hands on what is final: up to the first stop string (then the text ends
// there), or up to what may begin one. `last`: no more text comes, so nothing is held back.
static void add_text(Run *run, const char *piece, size_t n, bool last) {
    if (run->stopped) return;
    if (run->len + n + 1 > run->cap) {
        const size_t cap = 2 * (run->len + n + 1);
        char *grown = realloc(run->text, cap);
        if (!grown) {
            run->out_of_memory = run->stopped = true;
            return;
        }
        run->text = grown, run->cap = cap;
    }
    memcpy(run->text + run->len, piece, n);
    run->len += n;
    size_t final = stop_scan(run->text, run->len, run->sent, run->req->stop, run->req->n_stop, &run->stopped);
    if (last) final = run->stopped ? final : run->len;
    if (run->stopped) run->len = final;
    if (final > run->sent) run->sink->on_text(run->sink->ctx, run->text + run->sent, final - run->sent);
    run->sent = final;
}

static void run_on_token(void *ctx, int id, TokenKind kind) {
    Run *run = ctx;
    if (kind == TOKEN_REJECTED || run->stopped) return;
    const char *piece;
    size_t n;
    Err err;
    if (token_stream_push(&run->stream, id, &piece, &n, &err)) {  // (ids come from the model: in the vocabulary)
        run->out_of_memory = run->stopped = true;
        return;
    }
    run->tokens++;
    add_text(run, piece, n, false);
}

static bool run_should_stop(void *ctx) {
    Run *run = ctx;
    if (!run->stopped && !run->cancelled && run->sink->cancelled) run->cancelled = run->sink->cancelled(run->sink->ctx);
    return run->stopped || run->cancelled;
}

// ---- drafters -----------------------------------------------------------------------------------------------

// The drafters of one request, as generate assembles them: the draft model, the lookup, or both staged.
typedef struct {
    ModelDrafter model;
    LookupDrafter lookup;
    StagedDrafter staged;
    bool has_model, has_lookup;
} Drafters;

static int drafters_open(Drafters *d, const Engine *en, const SpecParams *params, Drafter **drafter, Err *err) {
    *d = (Drafters){.has_model = en->draft != NULL, .has_lookup = en->lookup};  // (closed even when half open)
    *drafter = NULL;
    if (d->has_model && model_drafter_init(&d->model, en->draft, params, en->draft_p_min, err)) return -1;
    if (d->has_lookup && lookup_drafter_init(&d->lookup, LOOKUP_N_MIN, LOOKUP_N_MAX, err)) return -1;
    if (d->has_model && d->has_lookup) staged_drafter_init(&d->staged, &d->lookup, &d->model, LOOKUP_STAGED_MIN_MATCH);
    *drafter = d->has_model && d->has_lookup ? &d->staged.base
               : d->has_lookup               ? &d->lookup.base
               : d->has_model                ? &d->model.base
                                             : NULL;
    return 0;
}

static void drafters_close(Drafters *d) {
    if (d->has_model) model_drafter_free(&d->model);
    if (d->has_lookup) lookup_drafter_free(&d->lookup);
}

// A seed for a request that gives none: fresh randomness in [0, 2^63), which a request's "seed" can give again
// (the response says which seed it was).
static uint64_t draw_seed(void) {
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, 0) != (ssize_t)sizeof seed) seed = (uint64_t)(now_seconds() * 1e9);
    return seed >> 1;
}

int engine_run(const Engine *en, const Request *req, const int *prompt, int n_prompt, const EngineSink *sink,
               EngineResult *result, ApiError *e) {
    const Config *cfg = &en->target->cfg;
    *result = (EngineResult){.prompt_tokens = n_prompt, .seed = req->has_seed ? req->seed : draw_seed()};
    SpecParams params = en->spec;
    params.sampling = req->sampling;
    params.seed = result->seed;
    params.max_tokens = req->max_tokens ? req->max_tokens : en->default_max_tokens;
    params.eos_id = cfg->eos_token_id;
    params.eos_ids = cfg->eos_ids;
    params.n_eos = cfg->n_eos;
    params.trace = NULL;
    Run run = {.req = req, .sink = sink};
    params.on_token = run_on_token;
    params.should_stop = run_should_stop;
    params.ctx = &run;
    token_stream_init(&run.stream, en->tok);
    Drafters drafters = {0};
    Drafter *drafter;
    Err err;
    int *out = malloc(sizeof(int) * ((size_t)params.max_tokens + 1)), n_out = 0, rc = -1;
    if (!out || drafters_open(&drafters, en, &params, &drafter, &err) ||
        speculative_generate(en->target, drafter, prompt, n_prompt, &params, out, &n_out, &result->stats, &err)) {
        api_error(e, 500, NULL, NULL, "generation failed: %s", out ? err.msg : "out of memory");
        goto done;
    }
    const char *piece;
    size_t n;
    token_stream_flush(&run.stream, &piece, &n);
    add_text(&run, piece, n, true);
    if (run.out_of_memory) {
        api_error(e, 500, NULL, NULL, "out of memory for the generated text");
        goto done;
    }
    result->completion_tokens = run.tokens;
    result->cancelled = run.cancelled;
    const bool full = n_out == params.max_tokens || n_prompt + n_out > cfg->n_positions;  // (as generate says)
    result->finish_reason = full && !run.stopped ? "length" : "stop";
    rc = 0;
done:
    drafters_close(&drafters);
    token_stream_free(&run.stream);
    free(run.text);
    free(out);
    return rc;
}
