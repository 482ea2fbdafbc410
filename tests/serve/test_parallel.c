// test_parallel.c — specdec serve --parallel: requests that arrive at random times and run side by side in one batch
// each get the text `specdec generate` gives them alone (greedy, sampled, top-k/top-p, a stop string, target-only),
// under each drafter (the draft model with a client beside them going away mid-batch, a tree, the lookup); the server
// is idle after.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"
#include "served.h"

#define TARGET "weights/pystd/target"
#define DRAFT "weights/pystd/draft"

// A request, and the options that give generate the same text.
typedef struct {
    const char *body;
    const char *options;    // generate's, beside the server's model and drafter options
    bool plain;             // the request asks for target-only decoding: generate without the drafter
} Case;

// On the shipped pair: a greedy, a sampled, a stopped and a target-only request.
static const Case PAIR_CASES[] = {
    {"{\"prompt\": \"def add(a, b):\", \"max_tokens\": 16, \"temperature\": 0}", "-n 16 --temp 0 -p 'def add(a, b):'",
     false},
    {"{\"prompt\": \"import os\\n\", \"max_tokens\": 12, \"temperature\": 0.8, \"seed\": 7}",
     "-n 12 --temp 0.8 --seed 7 -p 'import os\n'", false},
    {"{\"prompt\": \"class Stack:\", \"max_tokens\": 16, \"temperature\": 0, \"stop\": [\"self\"]}",
     "-n 16 --temp 0 --stop self -p 'class Stack:'", false},
    {"{\"prompt\": \"x = [\", \"max_tokens\": 8, \"temperature\": 0.7, \"seed\": 3, \"specdec\": {\"draft\": false}}",
     "-n 8 --temp 0.7 --seed 3 -p 'x = ['", true},
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

// One client: waits its arrival time, then asks (or, hang_up, streams and goes away after the first event).
typedef struct {
    int port;
    const char *body;
    int delay_us;
    bool hang_up;
    char *reply;
} Client;

static void *run_client(void *arg) {
    Client *c = arg;
    usleep((useconds_t)c->delay_us);
    if (!c->hang_up) {
        c->reply = post(c->port, "/v1/completions", "", c->body);
        return NULL;
    }
    char *raw;
    if (asprintf(&raw, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n\r\n%s", strlen(c->body), c->body) < 0)
        return NULL;
    const int fd = connect_to(c->port);
    if (fd >= 0 && write(fd, raw, strlen(raw)) == (ssize_t)strlen(raw)) free(read_reply(fd, "data: {"));
    if (fd >= 0) close(fd);
    free(raw);
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

// The cases at random times within 0.3 s against `--parallel 3` with the model and drafter — and, hang_up, a client
// that asks for a long stream and goes away after its first event.
static void check_side_by_side(const char *model, const char *drafter, const Case *cases, int n, bool hang_up) {
    char options[256];
    snprintf(options, sizeof options, "%s --parallel 3 --queue 8", drafter);
    Served s;
    CHECK(serve(&s, model, options), "the server did not start with %s", options);
    if (test_failures()) return;
    Client clients[8];
    pthread_t threads[8];
    const int n_clients = n + hang_up;
    for (int i = 0; i < n_clients; i++) {
        clients[i] = (Client){.port = s.port, .delay_us = test_rand_int(0, 300000), .hang_up = i == n,
                              .body = i < n ? cases[i].body
                                            : "{\"prompt\": \"def f(x):\", \"max_tokens\": 400, \"temperature\": 0, "
                                              "\"stream\": true}"};
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
    CHECK(!hang_up || strstr(log, "cancelled"), "the client that went away is not logged as cancelled: %s", log);
    free(log);
}

TEST(serve_parallel_draft_model_as_alone) { check_side_by_side(TARGET, "-d " DRAFT, PAIR_CASES, 4, true); }
TEST(serve_parallel_tree_as_alone) { check_side_by_side(TARGET, "-d " DRAFT " --tree-width 2", PAIR_CASES, 2, false); }

TEST(serve_parallel_lookup_as_alone) {
    char dir[64];
    tiny_checkpoint(dir, false);
    check_side_by_side(dir, "--lookup", TINY_CASES, sizeof TINY_CASES / sizeof TINY_CASES[0], false);
    remove_dir(dir);
}
