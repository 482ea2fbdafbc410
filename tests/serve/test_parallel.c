// test_parallel.c — specdec serve --parallel: requests that arrive at random times and run side by side in one batch
// each get the text `specdec generate` gives them alone (greedy, sampled, top-k/top-p, a stop string, target-only),
// under each drafter (the draft model with the lookup beside it, as -d drafts by default, and a streaming client
// beside them going away mid-batch; the draft model alone; a tree; the lookup); the server is idle after. And a
// client gone while its long prompt is prefilled leaves with no token, and a client gone mid-generation (streamed
// or not) frees the worker within a step, the server in process with its worker held until the client is gone
// (events, not times).
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "serve/server.h"
#include "served.h"

#define TARGET "weights/pystd/target"
#define DRAFT "weights/pystd/draft"

// A request, and the options that give generate the same text.
typedef struct {
    const char *body;
    const char *options;    // generate's, beside the server's model and drafter options
    bool plain;             // the request asks for target-only decoding: generate without the drafter
} Case;

// On the shipped pair: a greedy, a sampled, a stopped and a target-only request, and a sampled one whose prompt
// repeats itself (REPEATING: harness.h).
static const Case PAIR_CASES[] = {
    {"{\"prompt\": \"def add(a, b):\", \"max_tokens\": 8, \"temperature\": 0}", "-n 8 --temp 0 -p 'def add(a, b):'",
     false},
    {"{\"prompt\": \"import os\\n\", \"max_tokens\": 8, \"temperature\": 0.8, \"seed\": 7}",
     "-n 8 --temp 0.8 --seed 7 -p 'import os\n'", false},
    // (greedy, "\n        self.data = data": stopped before its 8 tokens)
    {"{\"prompt\": \"def __init__(self):\", \"max_tokens\": 8, \"temperature\": 0, \"stop\": [\"data\"]}",
     "-n 8 --temp 0 --stop data -p 'def __init__(self):'", false},
    {"{\"prompt\": \"x = [\", \"max_tokens\": 8, \"temperature\": 0.7, \"seed\": 3, \"specdec\": {\"draft\": false}}",
     "-n 8 --temp 0.7 --seed 3 -p 'x = ['", true},
    // (sampled after a prompt that repeats itself: the lookup proposes runs beside the draft model, as generate's -d
    // does, and its text is not the draft model's alone: cli_batch_drafts_by_lookup_as_generate_does)
    {"{\"prompt\": \"" REPEATING_JSON "\", \"max_tokens\": 24, \"temperature\": 0.8, \"seed\": 7}",
     "-n 24 --temp 0.8 --seed 7 -p '" REPEATING "'", false},
};

// On the tiny checkpoint (ids below its vocabulary of 61: served.h), drafting by lookup: greedy, sampled, a stop
// string ("R" ends the greedy text of 55 10 56), top-k/top-p, target-only.
static const Case TINY_CASES[] = {
    {"{\"prompt\": [55, 10, 56], \"max_tokens\": 16, \"temperature\": 0}", "-n 16 --temp 0 --ids '55 10 56'", false},
    {"{\"prompt\": [7, 32, 8], \"max_tokens\": 16, \"temperature\": 0.8, \"seed\": 7}",
     "-n 16 --temp 0.8 --seed 7 --ids '7 32 8'", false},
    {"{\"prompt\": [55, 10, 56], \"max_tokens\": 16, \"temperature\": 0, \"stop\": [\"R\"]}",
     "-n 16 --temp 0 --stop R --ids '55 10 56'", false},
    {"{\"prompt\": [31, 12], \"max_tokens\": 12, \"temperature\": 0.9, \"top_k\": 20, \"top_p\": 0.9, \"seed\": 5}",
     "-n 12 --temp 0.9 --top-k 20 --top-p 0.9 --seed 5 --ids '31 12'", false},
    {"{\"prompt\": [40, 41, 42, 43], \"max_tokens\": 12, \"temperature\": 0.7, \"seed\": 3, \"specdec\": {\"draft\": "
     "false}}", "-n 12 --temp 0.7 --seed 3 --ids '40 41 42 43'", true},
};

// One client: waits its arrival time, then asks — or, leaves, streams a long text and goes away after its first
// event.
typedef struct {
    int port;
    const char *body;
    int delay_us;
    bool leaves;
    char *reply;
} Client;

static const char LEAVING_BODY[] =
    "{\"prompt\": \"def f(x):\", \"max_tokens\": 400, \"temperature\": 0, \"stream\": true}";

// A request (streamed or not) sent on a new connection to port, its reply left to the caller to read: the
// connection, or −1.
static int send_request(int port, const char *body) {
    char *raw;
    if (asprintf(&raw, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n\r\n%s", strlen(body), body) < 0)
        return -1;
    int fd = connect_to(port);
    if (fd >= 0 && write(fd, raw, strlen(raw)) != (ssize_t)strlen(raw)) {
        close(fd);
        fd = -1;
    }
    free(raw);
    return fd;
}

static void *run_client(void *arg) {
    Client *c = arg;
    usleep((useconds_t)c->delay_us);
    if (!c->leaves) {
        c->reply = post(c->port, "/v1/completions", "", c->body);
        return NULL;
    }
    const int fd = send_request(c->port, c->body);
    if (fd >= 0) {
        free(read_reply(fd, "data: {"));
        close(fd);
    }
    return NULL;
}

// The text of a completion's reply (malloc'd), or NULL.
static char *reply_text(const char *reply) {
    const char *body = reply ? strstr(reply, "\r\n\r\n") : NULL;
    json_error_t je;
    json_t *o = body ? json_loads(body + 4, 0, &je) : NULL;
    const char *text = json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0), "text"));
    char *copy = text ? strdup(text) : NULL;
    json_decref(o);
    return copy;
}

// generate's text for the case with the server's model and drafter options (its stdout less its last newline).
static char *generated(const Case *c, const char *model, const char *drafter) {
    char args[512], *out = NULL;
    snprintf(args, sizeof args, "generate -m %s %s %s", model, c->plain ? "" : drafter, c->options);
    CHECK(run_specdec(args, &out, NULL) == 0, "%s", args);
    size_t n = out ? strlen(out) : 0;
    if (n && out[n - 1] == '\n') out[n - 1] = '\0';
    return out;
}

// The cases at random times within 0.3 s against `--parallel 3` with the model and drafter — and, with a leaver, a
// client beside them that streams and goes away after its first event.
static void check_side_by_side(const char *model, const char *drafter, const Case *cases, int n, bool leaver) {
    char options[256];
    snprintf(options, sizeof options, "%s --parallel 3 --queue 8", drafter);
    Served s;
    CHECK(serve(&s, model, options), "the server did not start with %s", options);
    if (test_failures()) return;
    Client clients[8];
    pthread_t threads[8];
    const int n_clients = n + leaver;
    for (int i = 0; i < n_clients; i++) {
        clients[i] = (Client){.port = s.port, .delay_us = test_rand_int(0, 300000), .leaves = i == n,
                              .body = i < n ? cases[i].body : LEAVING_BODY};
        pthread_create(&threads[i], NULL, run_client, &clients[i]);
    }
    for (int i = 0; i < n_clients; i++) pthread_join(threads[i], NULL);
    for (int i = 0; i < n; i++) {
        char *text = reply_text(clients[i].reply), *want = generated(&cases[i], model, drafter);
        CHECK(text && want && strcmp(text, want) == 0, "%s, case %d (arrived at %d µs): the server's \"%s\", "
              "generate's alone \"%s\"", drafter, i, clients[i].delay_us, text ? text : clients[i].reply,
              want ? want : "");
        free(text);
        free(want);
        free(clients[i].reply);
    }
    wait_health(s.port, false);  // the client that went away left the batch
    char *log;
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status: %s", log);
    CHECK(strstr(log, "requests at once, their KV caches"), "no memory line at start-up: %s", log);
    CHECK(!strstr(drafter, "-d ") || strstr(log, "their draft caches up to"), "the memory line leaves out the draft "
          "model's caches: %s", log);
    const char *drafting = strstr(drafter, "-d ") ? strstr(drafter, "--no-lookup") ? "drafter: draft model)"
                                                                           : "drafter: draft model and lookup)"
                                                  : "drafter: lookup)";
    CHECK(strstr(log, drafting), "the \"listening on\" line does not say \"%s\": %s", drafting, log);
    // The streaming client that went away: "cancelled" or "(connection lost)", whichever its line finds first
    // (docs/server.md).
    CHECK(!leaver || strstr(log, "(connection lost)") || strstr(log, "(cancelled"),
          "the streaming client that went away is not logged as gone: %s", log);
    free(log);
}

TEST(serve_parallel_draft_model_as_alone) { check_side_by_side(TARGET, "-d " DRAFT, PAIR_CASES, 5, true); }
TEST(serve_parallel_draft_model_without_lookup_as_alone) {
    check_side_by_side(TARGET, "-d " DRAFT " --no-lookup", &PAIR_CASES[4], 1, false);
}
TEST(serve_parallel_tree_as_alone) { check_side_by_side(TARGET, "-d " DRAFT " --tree-width 2", PAIR_CASES, 2, false); }

TEST(serve_parallel_lookup_as_alone) {
    char dir[64];
    tiny_checkpoint(dir, false);
    check_side_by_side(dir, "--lookup", TINY_CASES, sizeof TINY_CASES / sizeof TINY_CASES[0], false);
    remove_dir(dir);
}

// The cached_tokens of a greedy 4-token completion of ids (a JSON array's contents) through the server, or −1.
static long cached_tokens(int port, const char *ids) {
    char body[256];
    snprintf(body, sizeof body, "{\"prompt\": [%s], \"max_tokens\": 4, \"temperature\": 0}", ids);
    char *reply = post(port, "/v1/completions", "", body);
    const char *json = reply ? strstr(reply, "\r\n\r\n") : NULL;
    json_error_t je;
    json_t *r = json ? json_loads(json + 4, 0, &je) : NULL;
    const json_t *details = json_object_get(json_object_get(r, "usage"), "prompt_tokens_details");
    const long cached = json_is_integer(json_object_get(details, "cached_tokens"))
                            ? (long)json_integer_value(json_object_get(details, "cached_tokens")) : -1;
    json_decref(r);
    free(reply);
    return cached;
}

// Two slots, two conversations taking turns: each turn finds its own conversation's slot by the prefix it shares
// (B's second turn goes to B's slot, though A's is the least recently used), and a request that shares nothing
// takes the least recently used slot, whose conversation is then gone.
TEST(serve_parallel_slot_by_prefix) {
    char dir[64], *log;
    tiny_checkpoint(dir, false);
    Served s;
    CHECK(serve(&s, dir, "--lookup --parallel 2"), "the server did not start");
    if (test_failures()) return;
    static const struct {
        const char *ids;
        long cached;
    } turns[] = {{"55, 10, 56", 0}, {"7, 32, 8", 0}, {"7, 32, 8, 21", 3}, {"55, 10, 56, 20", 3},
                 {"40, 41", 0} /* into B's slot, the least recently used */, {"7, 32, 8, 21, 22", 0}};
    for (size_t i = 0; i < sizeof turns / sizeof turns[0]; i++) {
        const long cached = cached_tokens(s.port, turns[i].ids);
        CHECK(cached == turns[i].cached, "turn %zu ([%s]): %ld tokens cached, expected %ld", i, turns[i].ids, cached,
              turns[i].cached);
    }
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status: %s", log);
    free(log);
    remove_dir(dir);
}

// Continuous batching: a short request sent while a long one streams is answered before the long one ends (it
// joins the batch at the next step instead of waiting for the long one).
TEST(serve_parallel_short_request_passes_a_long_one) {
    Served s;
    CHECK(serve(&s, TARGET, "-d " DRAFT " --parallel 2"), "the server did not start");
    if (test_failures()) return;
    const char *body = "{\"prompt\": \"def f(x):\", \"max_tokens\": 480, \"temperature\": 0, \"stream\": true}";
    char *raw;
    if (asprintf(&raw, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n\r\n%s", strlen(body), body) < 0)
        return;
    const int fd = connect_to(s.port);
    CHECK(fd >= 0 && write(fd, raw, strlen(raw)) == (ssize_t)strlen(raw), "send the long request");
    free(raw);
    free(read_reply(fd, "data: {"));  // it runs
    char *reply = post(s.port, "/v1/completions", "", "{\"prompt\": \"import os\", \"max_tokens\": 4, "
                       "\"temperature\": 0}");
    CHECK(status_of(reply) == 200, "the short request: %.300s", reply ? reply : "");
    free(reply);
    close(fd);  // the long one, hung up on once the short one is answered: it ends after it, if it ran beside it
    char *log;
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status: %s", log);
    // The first request the log says ended is the short one (the long one's 480 tokens take several times as long).
    const char *short_line = strstr(log, "POST /v1/completions 200 4 tokens");
    CHECK(short_line && short_line == strstr(log, "POST /v1/completions"),
          "the short request was not logged (answered) before the long one ended: %s", log);
    free(log);
}

// ---- a client gone while its prompt is prefilled ---------------------------------------------------------------

// A hold on the server's worker (JobQueue.before_step): while held, the worker waits before each step but the
// `allowed` ones.
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool held;
    int allowed;            // steps it may still take while held
    int waits;              // the times it began to wait
} Hold;

static void wait_while_held(void *ctx) {
    Hold *h = ctx;
    pthread_mutex_lock(&h->lock);
    if (h->held && h->allowed == 0) {
        h->waits++;
        pthread_cond_broadcast(&h->changed);
    }
    while (h->held && h->allowed == 0) pthread_cond_wait(&h->changed, &h->lock);
    if (h->held) h->allowed--;
    pthread_mutex_unlock(&h->lock);
}

// Lets the worker take one step more, and returns.
static void let_one_step(Hold *h) {
    pthread_mutex_lock(&h->lock);
    h->allowed++;
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
}

// Lets the worker take one step more, and waits until it waits again (the step and its look at the clients done).
static void one_step(Hold *h) {
    pthread_mutex_lock(&h->lock);
    const int waits = h->waits;
    h->allowed++;
    pthread_cond_broadcast(&h->changed);
    while (h->waits == waits) pthread_cond_wait(&h->changed, &h->lock);
    pthread_mutex_unlock(&h->lock);
}

static void release(Hold *h) {
    pthread_mutex_lock(&h->lock);
    h->held = false;
    pthread_cond_broadcast(&h->changed);
    pthread_mutex_unlock(&h->lock);
}

// The server's end of the connection whose client's end is fd — this process holds both, the server running in it
// — or −1.
static int server_end(int fd) {
    struct sockaddr_in mine, peer;
    socklen_t n = sizeof mine;
    if (getsockname(fd, (struct sockaddr *)&mine, &n) != 0) return -1;
    for (int other = 3; other < 1024; other++) {
        n = sizeof peer;
        if (other != fd && getpeername(other, (struct sockaddr *)&peer, &n) == 0 && n == sizeof peer &&
            peer.sin_family == AF_INET && peer.sin_port == mine.sin_port)
            return other;
    }
    return -1;
}

// Waits until the socket shows one of `events` (a minute at most): whether it did.
static bool wait_for(int fd, short events) {
    for (int tries = 0; tries < 600; tries++) {
        struct pollfd p = {.fd = fd, .events = events};
        if (poll(&p, 1, 100) == 1 && (p.revents & events)) return true;
    }
    return false;
}

// A streamed request for a prompt of about 420 tokens (7 prefill chunks) into body[8192].
static const char *long_prompt_body(char *body) {
    int at = snprintf(body, 8192, "{\"prompt\": \"");
    for (int i = 0; i < 30; i++)
        at += snprintf(body + at, 8192 - at, "def function_%d(x):\\n    return x + %d\\n\\n", i, i);
    snprintf(body + at, 8192 - at, "\", \"max_tokens\": 8, \"temperature\": 0, \"stream\": true}");
    return body;
}

// The server's log lines (stderr) while `during` runs the server of `engine` in process: what they wrote (malloc'd).
static char *logged(void (*during)(const Engine *engine), const Engine *engine) {
    fflush(stderr);
    FILE *log = tmpfile();
    const int saved = dup(STDERR_FILENO);
    if (!log || saved < 0 || dup2(fileno(log), STDERR_FILENO) < 0) return NULL;
    during(engine);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    const long n = ftell(log);
    char *text = n >= 0 ? calloc((size_t)n + 1, 1) : NULL;
    rewind(log);
    if (text && fread(text, 1, (size_t)n, log) != (size_t)n) text[0] = '\0';
    fclose(log);
    return text;
}

// Starts the server of `engine` in process on a free port, `parallel` slots and `queue` places behind them, its worker
// held before every step (hold, held from the start); false (said on stderr) where it did not start.
static bool start_held(Server *server, const Engine *engine, int parallel, int queue, Hold *hold) {
    const ServeOptions options = {.host = "127.0.0.1", .parallel = parallel, .queue = queue, .max_body = 1 << 20,
                                  .timeout = 30, .model = "target"};
    *hold = (Hold){.lock = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER, .held = true};
    Err err;
    if (server_start(server, engine, &options, &err)) {
        fprintf(stderr, "the server did not start: %s\n", err.msg);
        return false;
    }
    pthread_mutex_lock(&server->queue.lock);
    server->queue.before_step = wait_while_held;
    server->queue.before_step_ctx = hold;
    pthread_mutex_unlock(&server->queue.lock);
    return true;
}

// The client of fd (its request in a slot, the worker held) closes the connection: once the server's end has seen
// the close (a FIN), the worker takes one step — its look at the client finds the client's side ended and sends the
// probe (the stream's, which the connection's thread writes, or the interim response, which the worker sends and
// whose reset its look may find at once: the job then ends in this step, and the server may close its end) — and
// once the closed socket's reset has come back, the worker goes on: its next look finds the client gone. Each
// waits on the one before it.
static void hang_up(Hold *hold, int fd) {
    const int end = server_end(fd);
    close(fd);
    if (end >= 0 && wait_for(end, POLLRDHUP)) {
        let_one_step(hold);
        if (!wait_for(end, POLLHUP | POLLERR | POLLNVAL)) fprintf(stderr, "no reset came back after the probe\n");
    } else {
        fprintf(stderr, "the server's end of the connection (%d) never saw the client's close\n", end);
    }
    release(hold);
}

// The server in process, its worker held before every step from the request on: the streamed request of a long
// prompt is taken into a slot (its headers come: its prefill is under way, held before its first chunk), and its
// client goes away (hang_up: the worker's one step is the first chunk).
static void leave_while_prefilling(const Engine *engine) {
    Server server;
    Hold hold;
    if (!start_held(&server, engine, 2, 2, &hold)) return;
    char body[8192];
    const int fd = send_request(server_port(&server), long_prompt_body(body));
    free(fd >= 0 ? read_reply(fd, "\r\n\r\n") : NULL);  // the headers: it is in a slot, its prefill held
    if (fd >= 0) hang_up(&hold, fd);
    else release(&hold);
    wait_health(server_port(&server), false);  // it left the batch
    server_stop(&server);
}

// A streaming client gone while its long prompt is prefilled frees its slot at the next step, with no token: the
// server's log says `200 0 tokens … (cancelled …)` (docs/server.md).
TEST(serve_parallel_client_gone_while_prefilling) {
    Err err;
    ThreadPool *pool = pool_create(2, &err);
    Model target = {0};
    Tokenizer tok = {0};
    CHECK(pool && model_load(&target, TARGET, pool, &err) == 0 && tokenizer_load_dir(&tok, TARGET, &err) == 0, "%s",
          err.msg);
    const Engine engine = {.target = &target, .tok = &tok, .no_chat = "no chat in this test",
                           .spec = {.policy = GAMMA_AUTO, .gamma = 5}, .default_max_tokens = 8};
    char *log = test_failures() ? NULL : logged(leave_while_prefilling, &engine);
    CHECK(log && strstr(log, "POST /v1/completions 200 0 tokens") && strstr(log, "(cancelled"),
          "the client that went away while its prompt was prefilled is not logged as gone with no token: %s",
          log ? log : "(no log)");
    free(log);
    tokenizer_free(&tok);
    model_free(&target);
    pool_free(pool);
}

// ---- a client that goes away frees the worker ----------------------------------------------------------------

#define HANG_UP_GAMMA 4  // a fixed γ: a step commits at most γ + 1 tokens
#define FIRST_EVENT_STEPS 3  // steps after which the greedy stream below has sent text (the prefill's step sends none)

static void hold_again(Hold *h) {
    pthread_mutex_lock(&h->lock);
    h->held = true;
    h->allowed = 0;
    pthread_mutex_unlock(&h->lock);
}

// Lets the held worker take FIRST_EVENT_STEPS steps, each done before the next, then reads the stream on fd up to
// its first event (a minute at most: which steps have text is the greedy text's, the same in every run); whether it
// came.
static bool first_event(Hold *hold, int fd) {
    for (int i = 0; i < FIRST_EVENT_STEPS; i++) one_step(hold);
    char seen[16384];
    size_t n = 0;
    seen[0] = '\0';
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (!strstr(seen, "data: {") && n + 1 < sizeof seen && poll(&p, 1, 60000) == 1) {
        const ssize_t got = read(fd, seen + n, sizeof seen - 1 - n);
        if (got <= 0) break;
        seen[n += (size_t)got] = '\0';
    }
    return strstr(seen, "data: {") != NULL;
}

// The server of the shipped pair in process, one slot and no queue, its worker held: a streamed request of 480
// tokens is let take FIRST_EVENT_STEPS steps and its first event is read, a request for the whole text is let take
// one step; each client then goes away (hang_up). Once the server is idle the next request, which only a free slot
// takes (a second would get 503), is answered.
static void hang_up_twice(const Engine *engine) {
    Server server;
    Hold hold;
    if (!start_held(&server, engine, 1, 0, &hold)) return;
    const int port = server_port(&server);
    const char *bodies[] = {"{\"prompt\": \"def f(x):\", \"max_tokens\": 480, \"temperature\": 0, \"stream\": true}",
                            "{\"prompt\": \"def f(x):\", \"max_tokens\": 480, \"temperature\": 0}"};
    for (int i = 0; i < 2; i++) {
        if (i > 0) hold_again(&hold);
        const int fd = send_request(port, bodies[i]);
        bool going = fd >= 0;
        if (going && i == 0) going = first_event(&hold, fd);
        if (going && i == 1) wait_health(port, true), one_step(&hold);  // in its slot, then one step: generating
        if (going) hang_up(&hold, fd);
        else fprintf(stderr, "request %d: no connection, or no first event after %d steps\n", i, FIRST_EVENT_STEPS);
        if (!going) release(&hold);
        wait_health(port, false);
        char *reply = post(port, "/v1/completions", "", "{\"prompt\": \"x\", \"max_tokens\": 2}");
        fprintf(stderr, "after hang-up %d: the next request got %d\n", i, status_of(reply));
        free(reply);
    }
    server_stop(&server);
}

// The generation of a client that goes away ends at the worker's next look: the worker is free for the next request
// long before max_tokens, whether the client streamed (its events stop being read) or waited for the whole text;
// the drafter of the shipped pair's draft model, built per request, is freed with it. Each step waits on an event
// (hang_up), so that a loaded machine cannot let the generation run ahead of the client's going.
TEST(serve_hang_up_frees_the_worker) {
    Err err;
    ThreadPool *pool = pool_create(2, &err);
    Model target = {0}, draft = {0};
    Tokenizer tok = {0};
    CHECK(pool && model_load(&target, TARGET, pool, &err) == 0 && model_load(&draft, DRAFT, pool, &err) == 0 &&
              tokenizer_load_dir(&tok, TARGET, &err) == 0,
          "%s", err.msg);
    const Engine engine = {.target = &target, .draft = &draft, .tok = &tok, .no_chat = "no chat in this test",
                           .spec = {.policy = GAMMA_FIXED, .gamma = HANG_UP_GAMMA}, .default_max_tokens = 8};
    char *log = test_failures() ? NULL : logged(hang_up_twice, &engine);
    if (!log) log = strdup("(no log)");
    // Logged: the stream hung up on as 200 (its headers went), its connection lost or its generation cancelled
    // (whichever its line finds first), the other as 499 (nothing went) and cancelled, the requests after them as 200;
    // each hung up on within the steps it was let take and the one after (the stream's first FIRST_EVENT_STEPS,
    // hang_up's and the last), each of at most γ + 1 tokens.
    const int most = (FIRST_EVENT_STEPS + 2) * (HANG_UP_GAMMA + 1);
    int lines = 0, streams_gone = 0, waits_gone = 0;
    for (const char *p = log; (p = strstr(p, "POST /v1/completions ")); p++, lines++) {
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
        const char *status_at = line + strlen("POST /v1/completions ");  // "STATUS TOKENS tokens MS ms (why)"
        const int status = atoi(status_at), tokens = atoi(strchr(status_at, ' '));
        CHECK(tokens <= most, "a request hung up on went on past %d tokens: %s", most, log);
        streams_gone += status == 200 && (strstr(line, "(cancelled: the client went away)") ||
                                          strstr(line, "(connection lost)"));
        waits_gone += status == 499 && strstr(line, "(cancelled: the client went away)");
    }
    CHECK(lines == 4, "4 requests logged: %s", log);
    CHECK(!strstr(log, "no reset came back") && !strstr(log, "never saw the client's close") &&
              !strstr(log, "no connection, or no first event"),
          "a step of the hang-ups did not come: %s", log);
    CHECK(streams_gone == 1, "the stream hung up on, logged as lost or cancelled: %s", log);
    CHECK(waits_gone == 1, "the request hung up on while it waited for the whole text, logged as 499 and cancelled: "
          "%s", log);
    CHECK(strstr(log, "after hang-up 0: the next request got 200") &&
              strstr(log, "after hang-up 1: the next request got 200"),
          "the worker was not free after a hang-up: %s", log);
    free(log);
    tokenizer_free(&tok);
    model_free(&draft);
    model_free(&target);
    pool_free(pool);
}
