// serve.c — what the HTTP server costs: time to first token and tokens/s of the same greedy requests run in
// process, as `specdec generate` runs them (engine_run: prompt ids → speculative_generate, no HTTP), and through
// `specdec serve` on loopback (the server started in this process on a free port; a raw socket client posts each
// prompt as token ids with "stream": true and reads the events). Each round runs every prompt both ways, in an
// order that alternates, and the tables give the medians of the per-prompt ratios server / in process.
//
// Then a multi-turn exchange through the server, as chat clients send it: each turn resends the whole history
// (the previous prompt, the answer, a new line of code), once without the conversation cache (every turn
// prefilled whole: the time to first token grows with the history) and once with it, as specdec serve runs
// (engine.h: each turn prefills only what the last one did not leave in the caches).
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "serve/server.h"

enum { SERVE_TURNS = 4 };

typedef struct {
    double ttft, seconds;   // to the first text, to the end
    int tokens;
    double prefill_ms;      // the server's own figure (its "specdec" extension), 0 in process
    int cached;             // prompt tokens the conversation cache held (usage.prompt_tokens_details)
} Timing;

// ---- in process ---------------------------------------------------------------------------------------------

typedef struct {
    double t0, first;
} FirstText;

static void note_text(void *ctx, const char *text, size_t len, const TextMarks *marks,
                      const TokenReports *logprobs) {
    (void)text, (void)len, (void)marks, (void)logprobs;
    FirstText *f = ctx;
    if (f->first == 0) f->first = now_seconds() - f->t0;
}

static Timing run_in_process(const Engine *engine, const Request *req, const Prompt *p) {
    FirstText f = {.t0 = now_seconds()};
    const EngineSink sink = {.on_text = note_text, .ctx = &f};
    EngineResult result;
    ApiError e;
    if (engine_run(engine, req, p->ids, p->n, &sink, &result, &e)) die("engine_run: %s", e.err.msg);
    return (Timing){.ttft = f.first, .seconds = now_seconds() - f.t0, .tokens = result.completion_tokens};
}

// ---- through the server -------------------------------------------------------------------------------------

// The request body: the prompt as token ids, greedy, streamed with usage.
static char *request_body(const Prompt *p, int max_tokens) {
    size_t cap = 128 + 12 * (size_t)p->n, at = 0;
    char *body = malloc(cap);
    at += (size_t)snprintf(body, cap, "{\"prompt\": [");
    for (int i = 0; i < p->n; i++) at += (size_t)snprintf(body + at, cap - at, i ? ", %d" : "%d", p->ids[i]);
    snprintf(body + at, cap - at, "], \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, \"stream_options\": "
             "{\"include_usage\": true}}", max_tokens);
    return body;
}

static Timing run_through_server(int port, const Prompt *p, int max_tokens) {
    char *body = request_body(p, max_tokens), *head;
    if (asprintf(&head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                        "application/json\r\nContent-Length: %zu\r\n\r\n", strlen(body)) < 0)
        die("out of memory");
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    Timing t = {0};
    const double t0 = now_seconds();
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, head, strlen(head)) < 0 ||
        write(fd, body, strlen(body)) < 0)
        die("cannot reach the server on port %d", port);
    size_t cap = 1 << 16, n = 0;
    char *reply = malloc(cap);
    ssize_t got;
    while ((got = read(fd, reply + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        reply[n] = '\0';
        if (t.ttft == 0 && strstr(reply, "\"text\":\"")) t.ttft = now_seconds() - t0;  // the first chunk with text
        if (n + 1 == cap) reply = realloc(reply, cap *= 2);
    }
    t.seconds = now_seconds() - t0;
    const char *usage = strstr(reply, "\"completion_tokens\":"), *prefill = strstr(reply, "\"prefill_ms\":");
    if (!strstr(reply, "HTTP/1.1 200") || !usage || !prefill) die("the server answered: %.300s", reply);
    t.tokens = atoi(usage + strlen("\"completion_tokens\":"));
    t.prefill_ms = atof(prefill + strlen("\"prefill_ms\":"));
    const char *cached = strstr(reply, "\"cached_tokens\":");
    t.cached = cached ? atoi(cached + strlen("\"cached_tokens\":")) : 0;
    close(fd);
    free(reply);
    free(head);
    free(body);
    return t;
}

// ---- the tables ---------------------------------------------------------------------------------------------

// Rounds × prompts, both ways in alternating order: [way][round · n + prompt].
static void compare(Bench *b, const Engine *engine, int port, const Prompt *prompts, int n, Timing *t[2]) {
    const int reps = b->opt.reps;
    Request req = {.kind = API_COMPLETIONS, .max_tokens = b->opt.tokens, .has_seed = true,
                   .sampling = {.temperature = 0, .top_k = 0, .top_p = 1}};
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            progress_show(&b->progress, "server against in process", (double)(r * n + i) / (reps * n));
            for (int k = 0; k < 2; k++) {
                const int way = (r + i + k) % 2;
                t[way][r * n + i] = way ? run_through_server(port, &prompts[i], b->opt.tokens)
                                        : run_in_process(engine, &req, &prompts[i]);
            }
            if (t[0][r * n + i].tokens != t[1][r * n + i].tokens) die("the server generated another length");
        }
}

static json_t *overhead_table(Bench *b, Timing *t[2], int count) {
    double *v[4];
    for (int k = 0; k < 4; k++) v[k] = malloc(sizeof(double) * count);
    for (int i = 0; i < count; i++) {
        v[0][i] = t[0][i].ttft, v[1][i] = t[1][i].ttft;
        v[2][i] = t[0][i].tokens / t[0][i].seconds, v[3][i] = t[1][i].tokens / t[1][i].seconds;
    }
    const Summary ttft[2] = {summarize(v[0], count), summarize(v[1], count)};
    const Summary rate[2] = {summarize(v[2], count), summarize(v[3], count)};
    const Summary ttft_ratio = summarize_ratio(v[1], v[0], count), rate_ratio = summarize_ratio(v[3], v[2], count);
    char a[64], c[64], d[64], e[64], f[64], g[64];
    out(b, "| | in process (generate's path) | through the server | server / in process |\n|---|---:|---:|---:|\n");
    out(b, "| time to first token, ms | %s | %s | %s |\n", fmt_range(a, sizeof a, ttft[0], 1e3, 2),
        fmt_range(c, sizeof c, ttft[1], 1e3, 2), fmt_range(d, sizeof d, ttft_ratio, 1, 2));
    out(b, "| tokens/s (request to last token) | %s | %s | %s |\n", fmt_range(e, sizeof e, rate[0], 1, 0),
        fmt_range(f, sizeof f, rate[1], 1, 0), fmt_range(g, sizeof g, rate_ratio, 1, 3));
    json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "ttft_in_process", summary_json(ttft[0]), "ttft_server",
                          summary_json(ttft[1]), "ttft_ratio", summary_json(ttft_ratio), "tokens_per_s_in_process",
                          summary_json(rate[0]), "tokens_per_s_server", summary_json(rate[1]), "tokens_per_s_ratio",
                          summary_json(rate_ratio));
    for (int k = 0; k < 4; k++) free(v[k]);
    return j;
}

// The greedy continuation of p (max_tokens, the target alone: greedy output is the target's whatever drafts)
// appended to p, then `line`: the history of the next turn.
static void extend_history(Pair *pair, Prompt *p, int max_tokens, const int *line, int n_line) {
    const SpecParams params = {.max_tokens = max_tokens, .policy = GAMMA_FIXED, .gamma = 1,
                               .eos_id = pair->target.cfg.eos_token_id, .eos_ids = pair->target.cfg.eos_ids,
                               .n_eos = pair->target.cfg.n_eos, .sampling = {.top_p = 1}};
    int *ids = realloc(p->ids, sizeof(int) * ((size_t)p->n + max_tokens + 1 + n_line)), n_out;
    SpecStats stats;
    Err err;
    if (!ids || speculative_generate(&pair->target, NULL, ids, p->n, &params, ids + p->n, &n_out, &stats, &err))
        die("the multi-turn history: %s", ids ? err.msg : "out of memory");
    memcpy(ids + p->n + n_out, line, sizeof(int) * n_line);
    p->ids = ids;
    p->n += n_out + n_line;
}

// A conversation of SERVE_TURNS turns through the server: turn k's prompt is turn k − 1's, its answer, and a line.
// Per turn: prompt tokens, the time to first token and the server's prefill time, cached tokens (those the
// conversation cache kept; 0 without it).
static json_t *multi_turn(Bench *b, Pair *pair, int port, const Prompt *first, const char *label) {
    Err err;
    int *line, n_line;
    const char *text = "\n    # and then\n";
    if (tokenizer_encode(&pair->tok, text, strlen(text), false, &line, &n_line, &err)) die("%s", err.msg);
    Prompt p = {.ids = malloc(sizeof(int) * first->n), .n = first->n};
    memcpy(p.ids, first->ids, sizeof(int) * first->n);
    json_t *turns = json_array();
    out(b, "\n%s:\n\n| turn | prompt tokens | cached | time to first token, ms | prefill, ms (the server's) |\n"
        "|---:|---:|---:|---:|---:|\n", label);
    for (int turn = 1; turn <= SERVE_TURNS && p.n + b->opt.tokens < pair->target.cfg.n_positions; turn++) {
        const Timing t = run_through_server(port, &p, b->opt.tokens);
        out(b, "| %d | %d | %d | %.2f | %.2f |\n", turn, p.n, t.cached, t.ttft * 1e3, t.prefill_ms);
        json_array_append_new(turns, json_pack("{s:i, s:i, s:f, s:f}", "prompt_tokens", p.n, "cached_tokens",
                                               t.cached, "ttft_ms", t.ttft * 1e3, "prefill_ms", t.prefill_ms));
        extend_history(pair, &p, b->opt.tokens, line, n_line);
    }
    free(line);
    free(p.ids);
    return turns;
}

// Starts the server on a free loopback port over engine.
static int start(Server *server, const Engine *engine, Pair *pair) {
    const ServeOptions options = {.host = "127.0.0.1", .port = 0, .queue = 1, .max_body = 1 << 20, .timeout = 30,
                                  .model = pair->target_dir};
    Err err;
    if (server_start(server, engine, &options, &err)) die("%s", err.msg);
    return server_port(server);
}

void suite_serve(Bench *b, Pair *pair) {
    if (!pair->has_tok) die("--suite serve needs a tokenizer (the server decodes text): give -m a checkpoint with one");
    suite_begin(b, "serve", 1);
    Conversation conversation;
    Err err;
    if (conversation_init(&conversation, &pair->target, NULL, &err)) die("%s", err.msg);
    Engine engine = {.target = &pair->target, .draft = pair->has_draft ? &pair->draft : NULL, .tok = &pair->tok,
                     .no_chat = "no chat in the bench", .spec = {.policy = GAMMA_AUTO, .gamma = 5},
                     .default_max_tokens = b->opt.tokens};
    int n;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.quick ? 4 : 8, b->opt.tokens + 1, &n);
    Timing *t[2] = {malloc(sizeof(Timing) * n * b->opt.reps), malloc(sizeof(Timing) * n * b->opt.reps)};
    out(b, "## The server's overhead\n\n%d held-out prompts × %d rounds, %d tokens each, greedy, %s; the server on "
        "loopback, streaming, without the conversation cache (each request afresh, as in process)\n\n", n,
        b->opt.reps, b->opt.tokens, pair->has_draft ? "with the draft" : "target only");
    Server server;
    const int port = start(&server, &engine, pair);
    compare(b, &engine, port, prompts, n, t);
    json_t *j = overhead_table(b, t, n * b->opt.reps);
    out(b, "\nA conversation through the server, each turn the whole history again (its answer and a line more)\n");
    json_object_set_new(j, "multi_turn_without_cache", multi_turn(b, pair, port, &prompts[0], "Without the "
                                                                  "conversation cache (every turn prefilled whole)"));
    server_stop(&server);
    engine.conversation = &conversation;  // as specdec serve runs
    const int cached_port = start(&server, &engine, pair);
    json_object_set_new(j, "multi_turn_with_cache", multi_turn(b, pair, cached_port, &prompts[0], "With the "
                                                               "conversation cache (what the last turn left is kept)"));
    server_stop(&server);
    conversation_free(&conversation);
    prompts_free(prompts, n);
    free(t[0]);
    free(t[1]);
    suite_end(b, j);
}
