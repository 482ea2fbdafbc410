// request.c — fuzz target: an OpenAI request body → request_parse (src/serve/request.c), read both as a completions
// and as a chat request. A refusal must carry status 400 (500 only for out of memory), a clean one-line message
// and a field name without control bytes; its error body must be JSON. An accepted request must hold what
// request.h promises: a prompt (text or ids ≥ 0) or a non-empty list of messages with a served role and a content,
// at most REQUEST_MAX_STOP non-empty stop strings, sampling values in range, specdec.marks on a stream only,
// top_logprobs in [0, 20] and only with logprobs.
#include <jansson.h>

#include "fuzz.h"

#include "serve/request.h"

static void check_refusal(const ApiError *e) {
    if (e->status != 400 && e->status != 500) fuzz_fail("refused with status %d", e->status);
    fuzz_check_message(&e->err);
    for (const char *p = e->param; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) fuzz_fail("a control byte in param \"%s\"", e->param);
    char *body = api_error_json(e);
    json_error_t je;
    json_t *parsed = body ? json_loads(body, 0, &je) : NULL;
    if (!parsed) fuzz_fail("the error body is not JSON: %s", body ? body : "(null)");
    json_decref(parsed);
    free(body);
}

static void check_request(const Request *r) {
    if (r->kind == API_COMPLETIONS) {
        if (!r->prompt == !r->prompt_ids) fuzz_fail("a prompt must be text or ids, one of the two");
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] < 0) fuzz_fail("accepted token id %d", r->prompt_ids[i]);
        if (r->prompt_ids && r->n_prompt_ids < 1) fuzz_fail("accepted an empty list of ids");
    } else {
        if (r->n_messages < 1) fuzz_fail("accepted a chat without messages");
        for (int i = 0; i < r->n_messages; i++) {
            const char *role = r->messages[i].role;
            if (!role || !r->messages[i].content) fuzz_fail("message %d without role or content", i);
            if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") &&
                strcmp(role, "assistant") && strcmp(role, "tool"))
                fuzz_fail("accepted role \"%s\"", role);
        }
    }
    if (r->n_stop < 0 || r->n_stop > REQUEST_MAX_STOP) fuzz_fail("%d stop strings", r->n_stop);
    for (int i = 0; i < r->n_stop; i++)
        if (!r->stop[i] || !r->stop[i][0]) fuzz_fail("an empty stop string");
    const SamplingParams *s = &r->sampling;
    if (!(s->temperature >= 0 && s->temperature <= 2) || !(s->top_p > 0 && s->top_p <= 1) || s->top_k < 0 ||
        !(s->min_p >= 0 && s->min_p <= 1))
        fuzz_fail("accepted sampling T %g top_p %g top_k %d min_p %g", s->temperature, s->top_p, s->top_k, s->min_p);
    Err err;
    if (penalties_check(&r->penalties, &err)) fuzz_fail("accepted penalties: %s", err.msg);
    if (r->max_tokens < 0 || r->max_tokens > REQUEST_MAX_TOKENS) fuzz_fail("accepted max_tokens %d", r->max_tokens);
    if (r->marks && !r->stream) fuzz_fail("accepted specdec.marks without a stream");
    if (r->top_logprobs < 0 || r->top_logprobs > LOGPROBS_TOP_MAX || (!r->logprobs && r->top_logprobs))
        fuzz_fail("accepted top_logprobs %d (logprobs %d)", r->top_logprobs, r->logprobs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int kind = API_COMPLETIONS; kind <= API_CHAT; kind++) {
        Request r;
        ApiError e;
        if (request_parse(&r, (ApiKind)kind, (const char *)data, size, &e) == 0) check_request(&r);
        else check_refusal(&e);
        request_free(&r);
    }
    return 0;
}
