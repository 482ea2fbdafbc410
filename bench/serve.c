// serve.c — what the HTTP server costs: time to first token and tokens/s of the same greedy requests run in
// process, as `specdec generate` runs them (engine_run: prompt ids → speculative_generate, no HTTP), and through
// `specdec serve` on loopback (the server started in this process on a free port; a raw socket client posts each
// prompt as token ids with "stream": true and reads the events). Each round runs every prompt both ways, in an
// order that alternates, and the tables give the medians of the per-prompt ratios server / in process.
//
// Then a multi-turn exchange through the server, as chat clients send it: each turn resends the whole history
// (the previous prompt, the answer, a new line of code), once without the conversation cache (each turn under a
// cache_salt of its own: prefilled whole, the time to first token growing with the history) and once with it (one
// salt: each turn prefills only what the last one did not leave in its slot's caches). Then the concurrency sweep:
// 1, 2, 4, 8 clients at once, with the draft and without, at -n's tokens a request and at 32 — aggregate tokens/s and
// its ratios within a round, per-request tokens/s, time to first token; and a short request's time to first token
// alone and behind a long one. On a random shape (-m random:<shape>) the
// server decodes with the shipped target's tokenizer (pair_borrow_tokenizer).
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "serve/server.h"
#include "speculative/policy.h"

enum { SERVE_TURNS = 4 };

typedef struct {
    double ttft, seconds;   // to the first text, to the end
    int tokens;
    double prefill_ms;      // the server's own figure (its "specdec" extension), 0 in process
    int cached;             // prompt tokens the conversation cache held (usage.prompt_tokens_details)
    int drafted, accepted, target_calls;  // the server's (its "specdec" extension), 0 in process
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

// The request body: the prompt as token ids, greedy, streamed with usage, and `extra` fields (JSON members, each
// after a comma) — a cache_salt, specdec.draft.
static char *request_body(const Prompt *p, int max_tokens, const char *extra) {
    size_t cap = 128 + strlen(extra) + 12 * (size_t)p->n, at = 0;
    char *body = malloc(cap);
    at += (size_t)snprintf(body, cap, "{\"prompt\": [");
    for (int i = 0; i < p->n; i++) at += (size_t)snprintf(body + at, cap - at, i ? ", %d" : "%d", p->ids[i]);
    snprintf(body + at, cap - at, "], \"max_tokens\": %d, \"temperature\": 0, \"stream\": true, \"stream_options\": "
             "{\"include_usage\": true}%s}", max_tokens, extra);
    return body;
}

// Sends the request (streamed): the connected socket, its request written; *t0 when it began.
static int send_request(int port, const Prompt *p, int max_tokens, const char *extra, double *t0) {
    char *body = request_body(p, max_tokens, extra), *head;
    if (asprintf(&head, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: "
                        "application/json\r\nContent-Length: %zu\r\n\r\n", strlen(body)) < 0)
        die("out of memory");
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    *t0 = now_seconds();
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, head, strlen(head)) < 0 ||
        write(fd, body, strlen(body)) < 0)
        die("cannot reach the server on port %d", port);
    free(head);
    free(body);
    return fd;
}

// Reads the reply on fd until `until` is in it (NULL: to the end): the reply so far (malloc'd), t->ttft when the
// first chunk with text came.
static char *read_until(int fd, const char *until, double t0, Timing *t) {
    size_t cap = 1 << 16, n = 0;
    char *reply = malloc(cap);
    reply[0] = '\0';
    ssize_t got;
    while ((!until || !strstr(reply, until)) && (got = read(fd, reply + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        reply[n] = '\0';
        if (t->ttft == 0 && strstr(reply, "\"text\":\"")) t->ttft = now_seconds() - t0;  // the first chunk with text
        if (n + 1 == cap) reply = realloc(reply, cap *= 2);
    }
    return reply;
}

static Timing run_through_server(int port, const Prompt *p, int max_tokens, const char *extra) {
    double t0;
    const int fd = send_request(port, p, max_tokens, extra, &t0);
    Timing t = {0};
    char *reply = read_until(fd, NULL, t0, &t);
    t.seconds = now_seconds() - t0;
    const char *usage = strstr(reply, "\"completion_tokens\":"), *prefill = strstr(reply, "\"prefill_ms\":");
    if (!strstr(reply, "HTTP/1.1 200") || !usage || !prefill) die("the server answered: %.300s", reply);
    t.tokens = atoi(usage + strlen("\"completion_tokens\":"));
    t.prefill_ms = atof(prefill + strlen("\"prefill_ms\":"));
    const char *cached = strstr(reply, "\"cached_tokens\":");
    t.cached = cached ? atoi(cached + strlen("\"cached_tokens\":")) : 0;
    const char *figures = strstr(reply, "\"specdec\":");  // (the last chunk's extension)
    const char *drafted = figures ? strstr(figures, "\"drafted\":") : NULL,
               *accepted = figures ? strstr(figures, "\"accepted\":") : NULL,
               *calls = figures ? strstr(figures, "\"target_calls\":") : NULL;
    if (!drafted || !accepted || !calls) die("the server's reply had no speculation figures: %.300s", reply);
    t.drafted = atoi(drafted + strlen("\"drafted\":"));
    t.accepted = atoi(accepted + strlen("\"accepted\":"));
    t.target_calls = atoi(calls + strlen("\"target_calls\":"));
    close(fd);
    free(reply);
    return t;
}

// ---- the tables ---------------------------------------------------------------------------------------------

// Rounds × prompts, both ways in alternating order: [way][round · n + prompt].
static void compare(Bench *b, const Engine *engine, int port, const Prompt *prompts, int n, Timing *t[2]) {
    const int reps = b->opt.reps;
    Request req = {.kind = API_COMPLETIONS, .max_tokens = b->opt.tokens, .has_seed = true, .penalties = PENALTIES_OFF,
                   .sampling = {.temperature = 0, .top_k = 0, .top_p = 1}};
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            progress_show(&b->progress, "server against in process", (double)(r * n + i) / (reps * n));
            for (int k = 0; k < 2; k++) {
                const int way = (r + i + k) % 2;
                char salt[64];  // (a salt of its own: the request afresh, as in process)
                snprintf(salt, sizeof salt, ", \"cache_salt\": \"compare-%d-%d\"", r, i);
                t[way][r * n + i] = way ? run_through_server(port, &prompts[i], b->opt.tokens, salt)
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
// kept: whether the turns share one cache_salt (the slot's conversation kept), or each has its own (afresh).
static json_t *multi_turn(Bench *b, Pair *pair, int port, const Prompt *first, bool kept, const char *label) {
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
        char salt[64];
        snprintf(salt, sizeof salt, ", \"cache_salt\": \"turn-%d\"", kept ? 0 : turn);
        const Timing t = run_through_server(port, &p, b->opt.tokens, salt);
        out(b, "| %d | %d | %d | %.2f | %.2f |\n", turn, p.n, t.cached, t.ttft * 1e3, t.prefill_ms);
        json_array_append_new(turns, json_pack("{s:i, s:i, s:f, s:f}", "prompt_tokens", p.n, "cached_tokens",
                                               t.cached, "ttft_ms", t.ttft * 1e3, "prefill_ms", t.prefill_ms));
        extend_history(pair, &p, b->opt.tokens, line, n_line);
    }
    free(line);
    free(p.ids);
    return turns;
}

// ---- many clients at once -----------------------------------------------------------------------------------

// A cell of the sweep: `clients` clients at once, each sending every prompt once, one after the other (client k
// from prompt k on), requests of `tokens` tokens, with the draft or without (each request's specdec.draft). Every
// client of every cell sends the same prompts, so cells differ only in how many run at once. One call of the cell
// is one sample (measure_rounds: a warm-up call of every cell, then rounds in which every cell runs once, in an
// order rotated round by round, so that the machine's drift hits all cells alike).
enum { SWEEP_MAX_CLIENTS = 8, SWEEP_CLIENT_COUNTS = 4, SWEEP_SHORT_TOKENS = 32, SWEEP_MAX_ROUNDS = 3 };

typedef struct {
    Server *server;
    int tokens, clients, rounds;
    bool draft;
    const Prompt *prompts;
    int n;                  // prompts: the requests of each client
    int calls;              // so far: each call's requests get salts of their own (no cache hits across calls)
    double *rate, *ttft;    // [rounds, clients, n]: each request's tokens/s and time to first token, per round
    // Summed over the calls but the warm-up: their time (the first request sent to the last answer's end), where
    // the server's worker spent it, and its requests' speculation.
    double seconds;
    WorkerTimes spent;
    long drafted, accepted, target_calls;
} SweepCell;

// A cell of the sweep as the server ran it: its median "× one client", and the sequences a step of its batch.
typedef struct {
    double over_one, sequences;
} ServerCell;

typedef struct {
    SweepCell *cell;
    int index;              // the client's number in the cell
    int round;
    int tokens;             // its requests' tokens
    long drafted, accepted, target_calls;
    double start, end;      // the first request sent, the last answer's end
} Client;

static void *run_client(void *arg) {
    Client *c = arg;
    SweepCell *cell = c->cell;
    c->start = now_seconds();
    for (int i = 0; i < cell->n; i++) {
        char extra[128];  // a cache_salt of its own: no request finds another's prefix
        snprintf(extra, sizeof extra, ", \"cache_salt\": \"sweep-%d-%d-%d-%d-%d-%d\"%s", cell->tokens, cell->clients,
                 cell->draft, cell->calls, c->index, i, cell->draft ? "" : ", \"specdec\": {\"draft\": false}");
        const Timing t = run_through_server(server_port(cell->server), &cell->prompts[(c->index + i) % cell->n],
                                            cell->tokens, extra);
        const size_t at = ((size_t)c->round * cell->clients + c->index) * cell->n + i;
        cell->rate[at] = t.tokens / t.seconds;
        cell->ttft[at] = t.ttft;
        c->tokens += t.tokens;
        c->drafted += t.drafted, c->accepted += t.accepted, c->target_calls += t.target_calls;
    }
    c->end = now_seconds();
    return NULL;
}

// x + sign · y, field by field: sign −1 gives where the worker's time went between two looks, +1 sums such spans.
static WorkerTimes worker_times_add(WorkerTimes x, WorkerTimes y, int sign) {
    const BatchTimes a = x.batch, b = y.batch;
    return (WorkerTimes){.batch = {a.steps + sign * b.steps, a.rows + sign * b.rows,
                                   a.prefill_rows + sign * b.prefill_rows, a.sequences + sign * b.sequences,
                                   a.target_seconds + sign * b.target_seconds, a.draft_seconds + sign * b.draft_seconds,
                                   a.rest_seconds + sign * b.rest_seconds},
                         .admit_seconds = x.admit_seconds + sign * y.admit_seconds,
                         .leave_seconds = x.leave_seconds + sign * y.leave_seconds,
                         .idle_seconds = x.idle_seconds + sign * y.idle_seconds};
}

// One call of the cell: its seconds per token, all its clients' tokens over the time from the first request sent to
// the last answer's end (1 / the aggregate tokens/s).
static double sweep_cell_run(void *ctx, int round) {
    SweepCell *cell = ctx;
    const WorkerTimes before = queue_times(&cell->server->queue);
    Client c[SWEEP_MAX_CLIENTS];
    pthread_t threads[SWEEP_MAX_CLIENTS];
    for (int k = 0; k < cell->clients; k++) {
        c[k] = (Client){.cell = cell, .index = k, .round = round};
        if (pthread_create(&threads[k], NULL, run_client, &c[k])) die("cannot start a client thread");
    }
    double first = 0, last = 0;
    int tokens = 0;
    for (int k = 0; k < cell->clients; k++) {
        pthread_join(threads[k], NULL);
        first = k == 0 || c[k].start < first ? c[k].start : first;
        last = c[k].end > last ? c[k].end : last;
        tokens += c[k].tokens;
        if (cell->calls > 0)
            cell->drafted += c[k].drafted, cell->accepted += c[k].accepted, cell->target_calls += c[k].target_calls;
    }
    if (cell->calls > 0) {  // (the first call is measure_rounds' warm-up)
        cell->spent = worker_times_add(cell->spent, worker_times_add(queue_times(&cell->server->queue), before, -1), 1);
        cell->seconds += last - first;
    }
    cell->calls++;
    return (last - first) / tokens;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The value at quantile q of v[0..n) (sorted in place).
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[(int)(q * (n - 1) + 0.5)];
}

// A cell's row: its aggregate tokens/s (the median over rounds), as a ratio to one client's with the same draft
// setting and to the same clients' without the draft (both per round, then the median: `one`, `plain` its
// seconds per token in every round, NULL where the row is that cell), each request's tokens/s and time to first token.
static json_t *sweep_row(Bench *b, const SweepCell *cell, const double *seconds, const double *one,
                         const double *plain, double read_seconds, double ceiling) {
    const int rounds = cell->rounds, count = rounds * cell->clients * cell->n;
    const Summary total = summary_inverse(summarize(seconds, rounds), 1), each = summarize(cell->rate, count),
                  first = summarize(cell->ttft, count);
    const Summary over_one = one ? summarize_ratio(one, seconds, rounds) : (Summary){1, 1, 1, rounds};
    const Summary over_plain = plain ? summarize_ratio(plain, seconds, rounds) : (Summary){1, 1, 1, rounds};
    const double p90 = quantile(cell->ttft, count, 0.9);
    char x[64], y[64], z[64], w[32] = "";
    if (ceiling > 0) snprintf(w, sizeof w, "%.2f", ceiling);
    out(b, "| %d | %d | %s | %s | %s | %s | %s | %.1f | %.1f | %.1f | %.0f |\n", cell->tokens, cell->clients,
        cell->draft ? "yes" : "no", fmt_range(x, sizeof x, total, 1, 1), fmt_range(y, sizeof y, over_one, 1, 2), w,
        cell->draft && plain ? fmt_range(z, sizeof z, over_plain, 1, 2) : "", each.median, first.median * 1e3,
        p90 * 1e3, cell->clients / read_seconds);
    return json_pack("{s:i, s:i, s:b, s:o, s:o, s:f, s:o, s:o, s:o, s:f}", "tokens", cell->tokens, "clients",
                     cell->clients, "draft", cell->draft, "aggregate_tokens_per_s", summary_json(total),
                     "over_one_client", summary_json(over_one), "ceiling_over_one_client", ceiling, "over_no_draft",
                     summary_json(over_plain), "request_tokens_per_s", summary_json(each), "ttft_s",
                     summary_json(first), "ttft_p90_s", p90);
}

// Where each cell's time went (its calls but the warm-up, summed), as the server's worker saw it: the batch's steps
// — their sequences and rows (prompts' chunks among them), the target's forwards, the draft's (with the drafters'
// work and prefills), the rest of a step (γ, accept steps, commits, the text given out) — the worker taking requests
// into slots and answering those that ended, and waiting for a request; as shares of the cell's time (what is left:
// the worker's turns between these, and the skew of looking while it steps). Beside them the requests' drafts a
// round and the share kept, and the ceiling's best schedule of as many clients (serve_ceiling: its mean γ, the share
// expected kept; best NULL: none measured).
static json_t *sweep_account(Bench *b, const SweepCell *cells, int k, const CeilingSchedule *best) {
    out(b, "\nWhere each cell's time went, as the server's worker saw it (its calls but the warm-up): sequences and "
        "rows a step (prompts' chunks among the rows), the requests' drafts a verification and the share kept, the "
        "ceiling's best schedule (mean γ, share expected kept), then shares of the cell's time: the target's "
        "forwards, the draft's (drafters' work and prefills with them), the rest of the steps (γ, accept, commit, "
        "the text given out), taking requests into slots, answering those that ended, waiting for a request\n\n"
        "| tokens | clients | draft | sequences a step | rows a step | prompt rows | drafts a round | kept | ceiling's "
        "γ (kept) | target | draft | rest | taking | answering | waiting |\n"
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    json_t *rows = json_array();
    for (int i = 0; i < k; i++) {
        const SweepCell *c = &cells[i];
        const WorkerTimes *w = &c->spent;
        const BatchTimes *t = &w->batch;
        const double steps = t->steps > 0 ? t->steps : 1, rounds = c->target_calls > 0 ? c->target_calls : 1;
        const double share[6] = {t->target_seconds, t->draft_seconds, t->rest_seconds, w->admit_seconds,
                                 w->leave_seconds, w->idle_seconds};
        char ceiling[32] = "";
        const int log2_clients = __builtin_ctz((unsigned)c->clients);
        if (c->draft && best) snprintf(ceiling, sizeof ceiling, "%.1f (%.2f)", best[log2_clients].depth,
                                       best[log2_clients].kept);
        out(b, "| %d | %d | %s | %.2f | %.1f | %.0f%% | %.2f | %.2f | %s |", c->tokens, c->clients,
            c->draft ? "yes" : "no", t->sequences / steps, t->rows / steps,
            t->rows > 0 ? 100.0 * t->prefill_rows / t->rows : 0, c->drafted / rounds,
            c->drafted > 0 ? (double)c->accepted / c->drafted : 0, ceiling);
        json_t *shares = json_array();
        for (int part = 0; part < 6; part++) {
            const double of_cell = c->seconds > 0 ? share[part] / c->seconds : 0;
            out(b, " %.1f%% |", 100 * of_cell);
            json_array_append_new(shares, json_real(of_cell));
        }
        out(b, "\n");
        json_array_append_new(rows, json_pack("{s:i, s:i, s:b, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "tokens",
                                              c->tokens, "clients", c->clients, "draft", c->draft, "steps", t->steps,
                                              "sequences", (json_int_t)t->sequences, "rows", (json_int_t)t->rows,
                                              "prompt_rows", (json_int_t)t->prefill_rows, "drafted",
                                              (json_int_t)c->drafted, "accepted", (json_int_t)c->accepted,
                                              "target_calls", (json_int_t)c->target_calls, "seconds", c->seconds,
                                              "shares_target_draft_rest_taking_answering_waiting", shares));
    }
    return rows;
}

// The concurrency sweep: 1, 2, 4, 8 clients at once against --parallel 8, with the draft and without (each
// request's specdec.draft), greedy, at -n's tokens a request and, where -n asks for more, at SWEEP_SHORT_TOKENS
// (short requests, whose prompts' prefill is about half their time); beside it the read pass's bound of plain
// decoding, and the ceiling of "× one client" (serve_ceiling's, by length, draft and clients; NULL: none measured).
// through gets the cells with the draft at -n's tokens, [log2 clients].
static json_t *sweep(Bench *b, Pair *pair, Server *server, const Prompt *prompts, int n, const int *lengths,
                     int n_lengths, const double *ceiling, const CeilingSchedule *best, ServerCell *through) {
    double gbs;
    const double read_seconds = weights_read_seconds(b, &pair->target, &gbs);
    const int drafts = 1 + pair->has_draft;
    const int rounds = b->opt.reps < SWEEP_MAX_ROUNDS ? b->opt.reps : SWEEP_MAX_ROUNDS;
    const int k = n_lengths * SWEEP_CLIENT_COUNTS * drafts;
    SweepCell cells[2 * SWEEP_CLIENT_COUNTS * 2];
    Trial trials[2 * SWEEP_CLIENT_COUNTS * 2];
    for (int i = 0; i < k; i++) {  // i = (length · SWEEP_CLIENT_COUNTS + log2 clients) · drafts + (with the draft)
        const int clients = 1 << (i / drafts % SWEEP_CLIENT_COUNTS), count = rounds * clients * n;
        cells[i] = (SweepCell){.server = server, .tokens = lengths[i / drafts / SWEEP_CLIENT_COUNTS], .clients = clients,
                               .rounds = rounds, .draft = pair->has_draft && i % drafts == 0, .prompts = prompts,
                               .n = n, .rate = malloc(sizeof(double) * count), .ttft = malloc(sizeof(double) * count)};
        trials[i] = (Trial){sweep_cell_run, &cells[i]};
    }
    double *seconds = malloc(sizeof(double) * k * rounds);
    measure_rounds(b, "many clients at once", trials, k, rounds, 0, seconds);
    out(b, "\n## Many clients at once\n\n`--parallel %d`; each client sends each of the %d prompts once, one after "
        "the other (greedy, streamed); a warm-up of every cell, then %d rounds of every cell in a rotated order: "
        "medians over rounds [min–max]; aggregate: all the cell's tokens over its time; × one client, × no draft: "
        "the ratios within each round; ceiling: the most \"× one client\" any γ schedule could reach with each "
        "request's prefill (the table above). The read pass: the target's %.0f MB of weights read in %.2f ms at "
        "%.1f GB/s "
        "(the read pass's median), the least time of a step — N sequences decoding plainly commit at most N tokens "
        "a step: N / %.2f ms\n\n| tokens | clients | draft | aggregate tokens/s | × one client | ceiling × one client "
        "| × no draft | per-request tokens/s | time to first token, ms | p90, ms | read pass's bound, "
        "plain |\n"
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n", SWEEP_MAX_CLIENTS, n, rounds,
        pair->target.weight_bytes / 1e6, read_seconds * 1e3, gbs, read_seconds * 1e3);
    json_t *rows = json_array();
    for (int i = 0; i < k; i++) {
        const int alone = i - i / drafts % SWEEP_CLIENT_COUNTS * drafts;  // the same length and draft, 1 client
        const double *own = seconds + (size_t)i * rounds;
        const int at = (i / drafts / SWEEP_CLIENT_COUNTS * 2 + cells[i].draft) * SWEEP_CLIENT_COUNTS +
                       i / drafts % SWEEP_CLIENT_COUNTS;  // serve_ceiling's index
        const double bound = i == alone || !ceiling ? 0 : ceiling[at];
        const BatchTimes *t = &cells[i].spent.batch;
        if (cells[i].draft && cells[i].tokens == lengths[n_lengths - 1])
            through[i / drafts % SWEEP_CLIENT_COUNTS] = (ServerCell){
                i == alone ? 1 : summarize_ratio(seconds + (size_t)alone * rounds, own, rounds).median,
                t->steps > 0 ? (double)t->sequences / t->steps : 0};
        json_array_append_new(rows, sweep_row(b, &cells[i], own, i == alone ? NULL : seconds + (size_t)alone * rounds,
                                              cells[i].draft ? seconds + (size_t)(i + 1) * rounds : NULL,
                                              read_seconds, bound));
        free(cells[i].rate);
        free(cells[i].ttft);
    }
    free(seconds);
    json_t *account = sweep_account(b, cells, k, best);
    return json_pack("{s:o, s:f, s:f, s:i, s:o}", "rows", rows, "weights_read_s", read_seconds, "read_gbs", gbs,
                     "rounds", rounds, "account", account);
}

// ---- the sweep's requests in process ------------------------------------------------------------------------

// A cell of the sweep with the draft, without the server: `clients` clients' requests as the server's worker runs
// them — engine_begin, one sequence of a batch of `clients` on its client's KV cache (as a slot's), engine_end — each
// client's next request joining at the step after its last one ended, as soon as the worker could take it; no HTTP,
// no connection threads, no round trips between a client's requests, no text read by anyone.
typedef struct {
    const Engine *engine;
    const Prompt *prompts;
    int n, tokens, clients;
    KVCache *caches;        // [clients]
    int calls;              // so far
    long steps, sequences;  // the batch's steps and the sequences they carried, over the calls but the warm-up
} InProcessCell;

// A client's request under way.
typedef struct {
    EngineRun *run;
    EngineResult result;
    BatchJob job;
    int place;              // in the batch; −1: none (its requests all answered)
    int sent;               // its requests so far
} InProcessClient;

static void ignore_text(void *ctx, const char *text, size_t len, const TextMarks *marks,
                        const TokenReports *logprobs) {
    (void)ctx, (void)text, (void)len, (void)marks, (void)logprobs;
}

// The client's next request (its prompts from its own number on, as run_client sends them) joins the batch.
static void in_process_send(InProcessCell *c, Batch *b, InProcessClient *client, int k, const Request *req) {
    static const EngineSink sink = {.on_text = ignore_text};
    const Prompt *p = &c->prompts[(k + client->sent++) % c->n];
    ApiError e;
    Err err;
    client->run = engine_begin(c->engine, req, p->ids, p->n, &sink, &client->result, &client->job, &e);
    if (!client->run) die("engine_begin: %s", e.err.msg);
    kv_truncate(&c->caches[k], 0);
    client->job.cache = &c->caches[k];
    if ((client->place = batch_join(b, &client->job, &err)) < 0) die("batch_join: %s", err.msg);
}

// One call: seconds per token of all the clients' requests.
static double in_process_cell_run(void *ctx, int rep) {
    (void)rep;
    InProcessCell *c = ctx;
    const Request req = {.kind = API_COMPLETIONS, .max_tokens = c->tokens, .has_seed = true,
                         .penalties = PENALTIES_OFF, .sampling = {.temperature = 0, .top_k = 0, .top_p = 1}};
    InProcessClient clients[SWEEP_MAX_CLIENTS];
    Err err;
    Batch *b = batch_open(c->engine->target, c->clients, &err);
    if (!b) die("%s", err.msg);
    const double t0 = now_seconds();
    for (int k = 0; k < c->clients; k++) {
        clients[k] = (InProcessClient){.place = -1};
        in_process_send(c, b, &clients[k], k, &req);
    }
    long tokens = 0;
    while (batch_active(b) > 0) {
        if (batch_step(b, &err)) die("%s", err.msg);
        for (int k = 0; k < c->clients; k++) {
            InProcessClient *client = &clients[k];
            if (client->place < 0 || batch_state(b, client->place) < BATCH_DONE) continue;
            int n_out;
            SpecStats stats;
            ApiError e;
            if (batch_leave(b, client->place, &n_out, &stats, &err) || engine_end(client->run, n_out, &e))
                die("a request in process failed");
            engine_result_free(&client->result);
            tokens += n_out;
            client->place = -1;
            if (client->sent < c->n) in_process_send(c, b, client, k, &req);
        }
    }
    const double seconds = now_seconds() - t0;
    if (c->calls++ > 0) {  // (the first call is measure_rounds' warm-up)
        c->steps += batch_times(b).steps;
        c->sequences += batch_times(b).sequences;
    }
    batch_close(b);
    return seconds / tokens;
}

// The sweep's cells with the draft at `tokens` a request for 1, 2, 4 and 8 clients, in process, each call in rounds
// against the others: aggregate tokens/s, "× one client" and sequences a step beside the sweep's through the server
// (server: its cells with the draft at these tokens, [log2 clients]).
static json_t *in_process(Bench *b, const Engine *engine, const Prompt *prompts, int n, int tokens,
                          const ServerCell *server) {
    const int rounds = b->opt.reps < SWEEP_MAX_ROUNDS ? b->opt.reps : SWEEP_MAX_ROUNDS;
    double *seconds = malloc(sizeof(double) * SWEEP_CLIENT_COUNTS * rounds);
    KVCache caches[SWEEP_MAX_CLIENTS];  // one a client, as the server's slots have
    InProcessCell cells[SWEEP_CLIENT_COUNTS];
    Trial trials[SWEEP_CLIENT_COUNTS];
    for (int k = 0; k < SWEEP_MAX_CLIENTS; k++) {
        Err err;
        if (model_kv_init(engine->target, &caches[k], &err)) die("%s", err.msg);
        if (k >= SWEEP_CLIENT_COUNTS) continue;
        cells[k] = (InProcessCell){.engine = engine, .prompts = prompts, .n = n, .tokens = tokens,
                                   .clients = 1 << k, .caches = caches};  // 1, 2, 4, 8 clients
        trials[k] = (Trial){in_process_cell_run, &cells[k]};
    }
    measure_rounds(b, "the sweep's requests in process", trials, SWEEP_CLIENT_COUNTS, rounds, 0, seconds);
    out(b, "\nThe sweep's cells with the draft at %d tokens a request, in process: each client's requests as the "
        "server's worker runs them (engine_begin, one batch, engine_end; the next request of a client joins at the step "
        "after its last ended) without HTTP, connection threads or round trips; a warm-up, then %d rounds in a "
        "rotated order: medians [min–max], \"× one client\" taken within each round, and the sequences a step, beside "
        "the sweep's through the server (its median; the sequences a step of the table above)\n\n| clients | "
        "aggregate tokens/s, in process | × one client, in process | × one client, through the server | sequences a "
        "step, in process | through the server |\n|---:|---:|---:|---:|---:|---:|\n", tokens, rounds);
    json_t *rows = json_array();
    for (int i = 0; i < SWEEP_CLIENT_COUNTS; i++) {
        const double *own = seconds + (size_t)i * rounds;
        const Summary total = summary_inverse(summarize(own, rounds), 1), over_one = summarize_ratio(seconds, own, rounds);
        char x[64], y[64];
        const double sequences = cells[i].steps > 0 ? (double)cells[i].sequences / cells[i].steps : 0;
        out(b, "| %d | %s | %s | %.2f | %.2f | %.2f |\n", cells[i].clients, fmt_range(x, sizeof x, total, 1, 1),
            fmt_range(y, sizeof y, over_one, 1, 2), server[i].over_one, sequences, server[i].sequences);
        json_array_append_new(rows, json_pack("{s:i, s:o, s:o, s:f, s:f, s:f}", "clients", cells[i].clients,
                                              "aggregate_tokens_per_s", summary_json(total), "over_one_client",
                                              summary_json(over_one), "server_over_one_client", server[i].over_one,
                                              "sequences_a_step", sequences, "server_sequences_a_step",
                                              server[i].sequences));
    }
    for (int k = 0; k < SWEEP_MAX_CLIENTS; k++) kv_free(&caches[k]);
    free(seconds);
    return json_pack("{s:i, s:o}", "tokens", tokens, "rows", rows);
}

// ---- what a batched forward costs ---------------------------------------------------------------------------

// The target's forward over a batch's rows against its cost model (policy.h: F(R) = S + R · (A + s), the sum the γ
// policy plans a batch with, beside the roofline max(S, R · A) + R · s, which planned batches slower): one sequence's
// rows, or each of BATCHED sequences' (their caches FORWARD_CONTEXT positions long), all as ratios to one row of one
// sequence, the ratios taken within a round.
enum { BATCHED = 4, FORWARD_CONTEXT = 128, FORWARD_ROW_COUNTS = 5 };
static const int FORWARD_ROWS[FORWARD_ROW_COUNTS] = {1, 2, 3, 5, 8};  // rows per sequence

typedef struct {
    Workload *sequences;    // [BATCHED]: each a cache of FORWARD_CONTEXT positions
    int n, rows;            // sequences in the forward, rows of each
    float *logits;          // [BATCHED · 8, V]
} BatchedForward;

static double batched_forward_run(void *ctx, int rep) {
    (void)rep;
    BatchedForward *f = ctx;
    SequenceRows rows[BATCHED];
    int tokens[8];
    for (int i = 0; i < f->rows; i++) tokens[i] = (FORWARD_CONTEXT + i) % f->sequences[0].model->n_vocab;
    for (int k = 0; k < f->n; k++) {
        kv_truncate(&f->sequences[k].cache, FORWARD_CONTEXT);
        rows[k] = (SequenceRows){.cache = &f->sequences[k].cache, .tokens = tokens, .T = f->rows, .all_logits = true};
    }
    Err err;
    const double t0 = now_seconds();
    if (model_forward_batch(f->sequences[0].model, rows, f->n, f->logits, &err)) die("%s", err.msg);
    return now_seconds() - t0;
}

// The roofline's price of a forward over R rows, in the cost model's units: max(S, R · A) + R · s.
static double roofline_forward(const GammaState *g, int rows) {
    const double arithmetic = rows * g->model_row_arithmetic;
    return (arithmetic > g->model_stream ? arithmetic : g->model_stream) + rows * g->model_row_sampling;
}

static json_t *batched_forward(Bench *b, Pair *pair) {
    Model *target = &pair->target;
    const int reps = b->opt.reps, k = 1 + 2 * FORWARD_ROW_COUNTS;
    Workload sequences[BATCHED];
    for (int i = 0; i < BATCHED; i++) workload_init(&sequences[i], target, FORWARD_CONTEXT);
    BatchedForward forwards[1 + 2 * FORWARD_ROW_COUNTS];
    Trial trials[1 + 2 * FORWARD_ROW_COUNTS];
    float *logits = malloc(sizeof(float) * BATCHED * 8 * target->n_vocab);
    forwards[0] = (BatchedForward){sequences, 1, 1, logits};
    for (int i = 0; i < 2 * FORWARD_ROW_COUNTS; i++)
        forwards[1 + i] = (BatchedForward){sequences, i < FORWARD_ROW_COUNTS ? 1 : BATCHED,
                                           FORWARD_ROWS[i % FORWARD_ROW_COUNTS], logits};
    for (int i = 0; i < k; i++) trials[i] = (Trial){batched_forward_run, &forwards[i]};
    double *seconds = malloc(sizeof(double) * k * reps);
    measure_rounds(b, "a batched forward", trials, k, reps, 0.05, seconds);
    GammaState g;
    const SpecParams greedy = {.policy = GAMMA_AUTO};
    policy_init(&g, target, NULL, &greedy);
    const double one_row = roofline_forward(&g, 1), sum_one = policy_batch_forward(&g, 1);
    out(b, "\n## What a batched forward costs\n\nThe target's forward over R rows — one sequence's, or each of %d "
        "sequences' (caches of %d positions) — as a ratio to one row's (%.2f ms, the median), within each of %d "
        "rounds; beside it the cost model's F(R) / F(1) as a roofline, max(S, R · A) + R · s, and as the sum the γ "
        "policy plans a batch with, S + R · (A + s)\n\n| sequences × rows | R | measured | roofline | sum |\n"
        "|---|---:|---:|---:|---:|\n", BATCHED, FORWARD_CONTEXT, summarize(seconds, reps).median * 1e3, reps);
    json_t *rows = json_array();
    for (int i = 1; i < k; i++) {
        const int R = forwards[i].n * forwards[i].rows;
        const Summary ratio = summarize_ratio(seconds + (size_t)i * reps, seconds, reps);
        const double roofline = roofline_forward(&g, R) / one_row, sum = policy_batch_forward(&g, R) / sum_one;
        char x[64];
        out(b, "| %d × %d | %d | %s | %.2f | %.2f |\n", forwards[i].n, forwards[i].rows, R,
            fmt_range(x, sizeof x, ratio, 1, 2), roofline, sum);
        json_array_append_new(rows, json_pack("{s:i, s:i, s:o, s:f, s:f}", "sequences", forwards[i].n, "rows",
                                              forwards[i].rows, "ratio", summary_json(ratio), "roofline", roofline,
                                              "sum", sum));
    }
    json_t *j = json_pack("{s:o, s:f}", "rows", rows, "one_row_s", summarize(seconds, reps).median);
    for (int i = 0; i < BATCHED; i++) workload_free(&sequences[i]);
    free(logits);
    free(seconds);
    return j;
}

// ---- a short request behind a long one ----------------------------------------------------------------------

enum { SHORT_TOKENS = 8, LONG_TOKENS = 480 };

// The time to first token of a short request (SHORT_TOKENS) alone, and sent while a long one (LONG_TOKENS, or as many
// as the context holds) streams — which it joins in the batch at the next step instead of waiting for it (the
// issue's goal: behind, under twice alone). The long one is hung up on once the short one is answered.
static json_t *short_behind_long(Bench *b, Pair *pair, int port, const Prompt *prompts, int n) {
    const int reps = b->opt.reps;
    const Prompt *shorter = &prompts[n > 1 ? 1 : 0], *longer = &prompts[0];
    int long_tokens = pair->target.cfg.n_positions - longer->n - 1;
    long_tokens = long_tokens < LONG_TOKENS ? long_tokens : LONG_TOKENS;
    double *alone = malloc(sizeof(double) * reps), *behind = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        progress_show(&b->progress, "a short request behind a long one", (double)r / reps);
        char salt[64];
        snprintf(salt, sizeof salt, ", \"cache_salt\": \"short-alone-%d\"", r);
        alone[r] = run_through_server(port, shorter, SHORT_TOKENS, salt).ttft;
        snprintf(salt, sizeof salt, ", \"cache_salt\": \"long-%d\"", r);
        double t0;
        Timing long_one = {0};
        const int fd = send_request(port, longer, long_tokens, salt, &t0);
        free(read_until(fd, "\"text\":\"", t0, &long_one));  // it runs
        snprintf(salt, sizeof salt, ", \"cache_salt\": \"short-behind-%d\"", r);
        behind[r] = run_through_server(port, shorter, SHORT_TOKENS, salt).ttft;
        close(fd);
    }
    const Summary a = summarize(alone, reps), w = summarize(behind, reps), ratio = summarize_ratio(behind, alone, reps);
    char x[64], y[64], z[64];
    out(b, "\n## A short request behind a long one\n\n%d tokens (greedy, streamed), alone and sent while a request "
        "for %d streams (%s); %d rounds\n\n| time to first token, ms | alone | behind the long one | behind / alone |\n"
        "|---|---:|---:|---:|\n| short request | %s | %s | %s |\n", SHORT_TOKENS, long_tokens,
        pair->has_draft ? "with the draft" : "target only", reps, fmt_range(x, sizeof x, a, 1e3, 2),
        fmt_range(y, sizeof y, w, 1e3, 2), fmt_range(z, sizeof z, ratio, 1, 2));
    free(alone);
    free(behind);
    return json_pack("{s:i, s:i, s:o, s:o, s:o}", "short_tokens", SHORT_TOKENS, "long_tokens", long_tokens,
                     "ttft_alone_s", summary_json(a), "ttft_behind_s", summary_json(w), "ratio", summary_json(ratio));
}

// Starts the server on a free loopback port over engine, with SWEEP_MAX_CLIENTS slots.
static int start(Server *server, const Engine *engine, Pair *pair) {
    const ServeOptions options = {.host = "127.0.0.1", .port = 0, .parallel = SWEEP_MAX_CLIENTS,
                                  .queue = SWEEP_MAX_CLIENTS, .max_body = 1 << 20, .timeout = 30,
                                  .model = pair->target_dir};
    Err err;
    if (server_start(server, engine, &options, &err)) die("%s", err.msg);
    return server_port(server);
}

void suite_serve(Bench *b, Pair *pair) {
    if (!pair_borrow_tokenizer(pair))
        die("--suite serve needs a tokenizer (the server decodes text): give -m a checkpoint with one, or a random "
            "shape whose vocabulary holds weights/pystd/target's");
    suite_begin(b, "serve", 1);
    // The draft model alone (serve -d --no-lookup), whose drafts the ceiling prices (serve_ceiling.c); serve's default
    // with -d, the lookup beside it, is measured against it by tools/batch_compare.py.
    Engine engine = {.target = &pair->target, .draft = pair->has_draft ? &pair->draft : NULL, .tok = &pair->tok,
                     .no_chat = "no chat in the bench", .spec = {.policy = GAMMA_AUTO, .gamma = 5},
                     .default_max_tokens = b->opt.tokens};
    int n;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, b->opt.quick ? 4 : 8, b->opt.tokens + 1, &n);
    Timing *t[2] = {malloc(sizeof(Timing) * n * b->opt.reps), malloc(sizeof(Timing) * n * b->opt.reps)};
    if (pair->borrowed_tok)
        out(b, "The random model's logits kept to weights/pystd/target's tokenizer's %d ids (the server decodes "
            "text)\n\n", tokenizer_vocab_size(&pair->tok));
    out(b, "## The server's overhead\n\n%d held-out prompts × %d rounds, %d tokens each, greedy, %s; the server on "
        "loopback, streaming, each request with a cache_salt of its own (afresh, as in process)\n\n", n,
        b->opt.reps, b->opt.tokens, pair->has_draft ? "with the draft model alone (--no-lookup)" : "target only");
    Server server;
    const int port = start(&server, &engine, pair);
    compare(b, &engine, port, prompts, n, t);
    json_t *j = overhead_table(b, t, n * b->opt.reps);
    out(b, "\nA conversation through the server, each turn the whole history again (its answer and a line more)\n");
    json_object_set_new(j, "multi_turn_without_cache", multi_turn(b, pair, port, &prompts[0], false, "Without the "
                                                                  "conversation cache (each turn a salt of its own: "
                                                                  "prefilled whole)"));
    json_object_set_new(j, "multi_turn_with_cache", multi_turn(b, pair, port, &prompts[0], true, "With the "
                                                               "conversation cache (what the last turn left is kept)"));
    json_object_set_new(j, "batched_forward", batched_forward(b, pair));
    // The sweep's lengths: -n's, and where -n asks for more, SWEEP_SHORT_TOKENS before it.
    const int lengths[2] = {b->opt.tokens < SWEEP_SHORT_TOKENS ? b->opt.tokens : SWEEP_SHORT_TOKENS, b->opt.tokens};
    const int n_lengths = lengths[0] == lengths[1] ? 1 : 2;
    double ceiling[2 * 2 * SWEEP_CLIENT_COUNTS];  // serve_ceiling's: [length][with the draft][log2 clients]
    CeilingSchedule best[SWEEP_CLIENT_COUNTS];    // ... [log2 clients]
    if (pair->has_draft) {
        const int clients[SWEEP_CLIENT_COUNTS] = {1, 2, 4, SWEEP_MAX_CLIENTS};
        json_object_set_new(j, "ceiling", serve_ceiling(b, pair, prompts, n, clients, SWEEP_CLIENT_COUNTS, lengths,
                                                        n_lengths, ceiling, best));
    }
    ServerCell server_cells[SWEEP_CLIENT_COUNTS];  // the sweep's with the draft at -n's tokens, [log2 clients]
    json_object_set_new(j, "concurrency", sweep(b, pair, &server, prompts, n, lengths, n_lengths,
                                                pair->has_draft ? ceiling : NULL, pair->has_draft ? best : NULL,
                                                server_cells));
    if (pair->has_draft)
        json_object_set_new(j, "in_process", in_process(b, &engine, prompts, n, b->opt.tokens, server_cells));
    json_object_set_new(j, "short_behind_long", short_behind_long(b, pair, port, prompts, n));
    server_stop(&server);
    prompts_free(prompts, n);
    free(t[0]);
    free(t[1]);
    suite_end(b, j);
    pair_return_tokenizer(pair);
}
