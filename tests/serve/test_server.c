// test_server.c — specdec serve as a process on a free loopback port: a real client (the npm openai package, run by
// node: tests/oracle/serve_client.mjs) whose texts must equal `specdec generate`'s for the same checkpoint, options
// and seed; raw HTTP for what a client library never sends (malformed requests, oversize bodies, keys, slow and
// vanishing clients); a bounded load.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "logprobs_lines.h"
#include "random_checkpoint.h"
#include "served.h"
#include "tokenizer_fixtures.h"

#define TARGET "weights/pystd/target"
#define DRAFT "weights/pystd/draft"
#define PROMPT "X+Y"  // ids 55 10 56 in the shipped tokenizer: inside the tiny checkpoint's vocabulary

// ---- a real client against generate --------------------------------------------------------------------------

// generate's text for the same checkpoint, prompt and options (its stdout less the newline it ends with).
static char *generate(const char *dir, const char *options) {
    char *command, *out = NULL;
    if (asprintf(&command, "%s generate -m %s --lookup -p '" PROMPT "' -n 20 %s", specdec_bin(), dir, options) < 0)
        return NULL;
    const int status = run_command(command, &out, NULL);
    free(command);
    CHECK(status == 0, "generate %s: exit status %d", options, status);
    size_t n = out ? strlen(out) : 0;
    if (n && out[n - 1] == '\n') out[n - 1] = '\0';
    return out;
}

static void check_text(json_t *cases, const char *name, const char *want) {
    const json_t *got = json_object_get(cases, name);
    CHECK(json_is_string(got) && want && strcmp(json_string_value(got), want) == 0,
          "%s: the server's text \"%s\" is not generate's \"%s\"", name, json_is_string(got) ? json_string_value(got)
          : "(not a text)", want ? want : "");
}

// What `node tests/oracle/serve_client.mjs ARGS` prints: one JSON object (NULL, and a failure, if not).
static json_t *client_cases(const char *args) {
    char *command, *out = NULL;
    if (asprintf(&command, "node tests/oracle/serve_client.mjs %s", args) < 0) return NULL;
    const int status = run_command(command, &out, NULL);
    CHECK(status == 0, "%s: exit status %d", command, status);
    json_error_t je;
    json_t *cases = json_loads(out ? out : "", 0, &je);
    CHECK(cases, "the client printed no JSON: %s", out ? out : "");
    free(command), free(out);
    return cases;
}

// The tiny checkpoint, drafting by lookup (its vocabulary is not the shipped draft's): each case's text is
// generate's for the same options and seed (chat: generate --chat, the prompt as the user's message); a stop string
// cuts generate's text where it first occurs.
TEST(serve_openai_client_matches_generate) {
    char dir[64], *command, *log;
    tiny_checkpoint(dir, true);
    char *greedy = generate(dir, "--temp 0"), *sampled = generate(dir, "--temp 0.8 --seed 11");
    char *warped = generate(dir, "--temp 0.9 --top-k 20 --top-p 0.9 --seed 5");
    char *chat_greedy = generate(dir, "--chat --temp 0"), *chat_sampled = generate(dir, "--chat --temp 0.8 --seed 11");
    CHECK(greedy && strlen(greedy) >= 12, "the greedy text is too short to cut: \"%s\"", greedy ? greedy : "");
    if (test_failures()) return;
    char stop[3] = {greedy[10], greedy[11], '\0'}, *cut = strdup(greedy);
    *strstr(cut, stop) = '\0';
    Served s;
    CHECK(serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return;
    if (asprintf(&command, "cases %d '" PROMPT "' 20 '%s'", s.port, stop) < 0) return;
    json_t *cases = client_cases(command);
    free(command);
    check_text(cases, "greedy", greedy);
    check_text(cases, "greedy_stream", greedy);
    check_text(cases, "sampled", sampled);
    check_text(cases, "sampled_stream", sampled);
    check_text(cases, "top_k_top_p", warped);
    check_text(cases, "stop", cut);
    check_text(cases, "stop_stream", cut);
    const json_t *usage = json_object_get(cases, "usage"), *ext = json_object_get(cases, "specdec");
    CHECK(json_integer_value(json_object_get(usage, "completion_tokens")) == 5 &&
              json_integer_value(json_object_get(usage, "prompt_tokens")) > 0,
          "usage of a 5-token completion");
    CHECK(json_integer_value(json_object_get(ext, "drafted")) >= json_integer_value(json_object_get(ext, "accepted"))
              && json_integer_value(json_object_get(ext, "target_calls")) >= 1,
          "the specdec extension: drafted ≥ accepted, target calls ≥ 1");
    const char *finish = json_string_value(json_object_get(cases, "finish_reason"));
    CHECK(finish && strcmp(finish, "length") == 0, "finish_reason");
    check_text(cases, "chat", chat_greedy);
    check_text(cases, "chat_stream", chat_greedy);
    check_text(cases, "chat_sampled", chat_sampled);
    CHECK(json_integer_value(json_object_get(json_object_get(cases, "refused"), "status")) == 400, "n = 2: 400");
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM: %s", log);
    json_decref(cases);
    free(greedy), free(sampled), free(warped), free(chat_greedy), free(chat_sampled), free(cut), free(log);
    remove_dir(dir);
}

// ---- logprobs: the client's against generate's lines, and those against specdec logits ---------------------------

// generate --logprobs 3's lines for options (besides generate()'s), read back.
static json_t *generate_logprobs(const char *dir, const char *options) {
    char path[] = "/tmp/specdec-logprobs-XXXXXX", *with, *text = NULL;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    if (asprintf(&with, "%s --logprobs 3 --logprobs-file %s", options, path) < 0) return NULL;
    free(generate(dir, with));
    text = read_text(path);
    unlink(path);
    json_t *lines = logprobs_lines_read(text);
    free(with), free(text);
    return lines;
}

static bool same_float(const json_t *a, const json_t *b) {
    return json_is_number(a) && json_is_number(b) && (float)json_number_value(a) == (float)json_number_value(b);
}

// A completion's legacy logprobs against generate's lines: each token's string and value (as the float it is), its
// top_logprobs object the alternatives' and its own, its text_offset the code points of the tokens before it.
static void check_completion_logprobs(const json_t *got, const json_t *lines, const char *name) {
    const json_t *tokens = json_object_get(got, "tokens"), *values = json_object_get(got, "token_logprobs");
    const json_t *tops = json_object_get(got, "top_logprobs"), *offsets = json_object_get(got, "text_offset");
    const size_t n = json_array_size(lines);
    CHECK(n > 0 && json_array_size(tokens) == n && json_array_size(values) == n && json_array_size(tops) == n &&
              json_array_size(offsets) == n, "%s: lists of %zu, %zu, %zu, %zu for %zu tokens", name,
          json_array_size(tokens), json_array_size(values), json_array_size(tops), json_array_size(offsets), n);
    long offset = 0;
    for (size_t i = 0; i < n && !test_failures(); i++) {
        const json_t *line = json_array_get(lines, i), *top = json_array_get(tops, i);
        const char *token = json_string_value(json_object_get(line, "token"));
        CHECK(json_equal(json_array_get(tokens, i), json_object_get(line, "token")) &&
                  same_float(json_array_get(values, i), json_object_get(line, "logprob")) &&
                  json_integer_value(json_array_get(offsets, i)) == offset,
              "%s: token %zu is \"%s\" (%g at %lld), generate's \"%s\" (%g at %ld)", name, i,
              json_string_value(json_array_get(tokens, i)), json_number_value(json_array_get(values, i)),
              json_integer_value(json_array_get(offsets, i)), token, json_number_value(json_object_get(line, "logprob")),
              offset);
        const json_t *alternatives = json_object_get(line, "top_logprobs");
        for (size_t k = 0; k < json_array_size(alternatives); k++) {
            const json_t *alt = json_array_get(alternatives, k);
            CHECK(same_float(json_object_get(top, json_string_value(json_object_get(alt, "token"))),
                             json_object_get(alt, "logprob")), "%s: token %zu, alternative %zu", name, i, k);
        }
        CHECK(same_float(json_object_get(top, token), json_object_get(line, "logprob")) &&
                  json_object_size(top) <= json_array_size(alternatives) + 1,
              "%s: token %zu's top_logprobs: its own and the 3 alternatives", name, i);
        for (const char *p = token; p && *p; p++) offset += ((unsigned char)*p & 0xC0) != 0x80;
    }
}

// Chat's logprobs content against generate's lines: token, logprob, bytes and the alternatives', less the ids.
static void check_chat_logprobs(const json_t *got, const json_t *lines, const char *name) {
    const size_t n = json_array_size(lines);
    CHECK(n > 0 && json_array_size(got) == n, "%s: %zu entries for %zu tokens", name, json_array_size(got), n);
    for (size_t i = 0; i < n && i < json_array_size(got) && !test_failures(); i++) {
        const json_t *entry = json_array_get(got, i), *line = json_array_get(lines, i);
        const json_t *top = json_object_get(entry, "top_logprobs"), *want = json_object_get(line, "top_logprobs");
        CHECK(json_equal(json_object_get(entry, "token"), json_object_get(line, "token")) &&
                  json_equal(json_object_get(entry, "bytes"), json_object_get(line, "bytes")) &&
                  same_float(json_object_get(entry, "logprob"), json_object_get(line, "logprob")) &&
                  json_array_size(top) == json_array_size(want) && !json_object_get(entry, "id"),
              "%s: entry %zu differs from generate's line", name, i);
        for (size_t k = 0; k < json_array_size(top); k++) {
            const json_t *a = json_array_get(top, k), *b = json_array_get(want, k);
            CHECK(json_equal(json_object_get(a, "token"), json_object_get(b, "token")) &&
                      json_equal(json_object_get(a, "bytes"), json_object_get(b, "bytes")) &&
                      same_float(json_object_get(a, "logprob"), json_object_get(b, "logprob")),
                  "%s: entry %zu, alternative %zu", name, i, k);
        }
    }
}

static json_t *stream_events(int port, const char *body);

// A greedy stream cut by a stop string (the generated text's characters 6 and 7, which may occur before): an entry for
// every generated token (usage's completion_tokens), the stop string's too, at code-point offsets that grow from 0 by
// each token's length.
static void check_stream_cut_by_a_stop(int port, const json_t *greedy) {
    char text[256] = "", *body;
    for (size_t i = 0; i < json_array_size(greedy); i++)
        strncat(text, json_string_value(json_object_get(json_array_get(greedy, i), "token")) ?: "",
                sizeof text - strlen(text) - 1);
    if (strlen(text) < 8 || asprintf(&body, "{\"prompt\": \"" PROMPT "\", \"max_tokens\": 20, \"temperature\": 0, "
                                     "\"logprobs\": 1, \"stream\": true, \"stream_options\": {\"include_usage\": "
                                     "true}, \"stop\": \"%.2s\"}", text + 6) < 0)
        return;
    json_t *events = stream_events(port, body);
    long offset = 0, tokens = 0, completion_tokens = -1;
    for (size_t e = 0; e < json_array_size(events); e++) {
        const json_t *event = json_array_get(events, e), *usage = json_object_get(event, "usage");
        if (usage) completion_tokens = (long)json_integer_value(json_object_get(usage, "completion_tokens"));
        const json_t *lp = json_object_get(json_array_get(json_object_get(event, "choices"), 0), "logprobs");
        for (size_t i = 0; i < json_array_size(json_object_get(lp, "tokens")); i++, tokens++) {
            CHECK(json_integer_value(json_array_get(json_object_get(lp, "text_offset"), i)) == offset,
                  "%s: token %ld at offset %lld, not %ld", body, tokens,
                  json_integer_value(json_array_get(json_object_get(lp, "text_offset"), i)), offset);
            offset += (long)strlen(json_string_value(json_array_get(json_object_get(lp, "tokens"), i)) ?: "");
        }
    }
    char stop[3] = {text[6], text[7], '\0'};
    const long end = (long)(strstr(text, stop) - text) + 2;  // where the stop string first ends
    CHECK(completion_tokens > 0 && tokens == completion_tokens && offset >= end,
          "%s: %ld entries for %ld tokens (%ld characters, the stop string ends at %ld)", body, tokens,
          completion_tokens, offset, end);
    json_decref(events);
    free(body);
}

// The openai client's logprobs, streamed and not, equal generate --logprobs' lines (whose values equal the log-softmax
// of what specdec logits prints): completions greedy, drafting by lookup (kept drafts, corrections and plain rounds)
// and target-only (specdec.draft false: the same values), the three sent at once; chat sampled; and a stream cut by
// a stop string has every token's entry.
TEST(serve_logprobs_equal_generate_and_logits) {
    char dir[64], *command, *log, *ids = NULL;
    tiny_checkpoint(dir, true);
    json_t *greedy = generate_logprobs(dir, "--temp 0"), *chat = generate_logprobs(dir, "--chat --temp 0.8 --seed 11");
    if (asprintf(&command, "%s tokenize -m %s '" PROMPT "'", specdec_bin(), dir) < 0) return;
    CHECK(run_command(command, &ids, NULL) == 0, "%s", command);
    free(command);
    ids[strcspn(ids, "\n")] = '\0';
    int kinds[4] = {0};
    if (greedy) logprobs_lines_check(greedy, dir, ids, kinds);
    CHECK(kinds[0] > 0 && kinds[1] + kinds[3] > 0, "kept drafts (%d) and the target's own tokens (%d, %d)", kinds[0],
          kinds[1], kinds[3]);
    Served s;
    CHECK(serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return;
    if (asprintf(&command, "logprobs %d '" PROMPT "' 20", s.port) < 0) return;
    json_t *cases = client_cases(command);
    free(command);
    static const char *const completions[] = {"completion", "completion_stream", "completion_plain"};
    static const char *const chats[] = {"chat", "chat_stream"};
    for (int i = 0; i < 3 && greedy && chat; i++)
        check_completion_logprobs(json_object_get(json_object_get(cases, completions[i]), "logprobs"), greedy,
                                  completions[i]);
    for (int i = 0; i < 2 && greedy && chat; i++)
        check_chat_logprobs(json_object_get(json_object_get(cases, chats[i]), "logprobs"), chat, chats[i]);
    if (greedy) check_stream_cut_by_a_stop(s.port, greedy);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM: %s", log);
    json_decref(cases), json_decref(greedy), json_decref(chat);
    free(log), free(ids);
    remove_dir(dir);
}

// The text and usage of a non-streamed completion of `prompt` (greedy, 8 tokens) through the server, with a
// cache_salt unless salt is NULL.
static char *complete_text(int port, const char *prompt, const char *salt, long *cached) {
    char *body, *reply, *text = NULL;
    *cached = -1;
    if (asprintf(&body, "{\"prompt\": \"%s\", \"max_tokens\": 8, \"temperature\": 0%s%s%s}", prompt,
                 salt ? ", \"cache_salt\": \"" : "", salt ? salt : "", salt ? "\"" : "") < 0)
        return NULL;
    reply = post(port, "/v1/completions", "", body);
    const char *json = reply ? strstr(reply, "\r\n\r\n") : NULL;
    json_error_t je;
    json_t *r = json ? json_loads(json + 4, 0, &je) : NULL;
    const json_t *t = json_object_get(json_array_get(json_object_get(r, "choices"), 0), "text");
    CHECK(json_is_string(t), "no text for \"%s\": %s", prompt, reply ? reply : "");
    if (json_is_string(t)) text = strdup(json_string_value(t));
    *cached = (long)json_integer_value(
        json_object_get(json_object_get(json_object_get(r, "usage"), "prompt_tokens_details"), "cached_tokens"));
    json_decref(r);
    free(reply);
    free(body);
    return text;
}

// The conversation caches, one per slot (--parallel 4): a request whose ids begin with a slot's takes it, keeps them
// (cached_tokens) and prefills only the rest; one that shares nothing keeps nothing, and neither does one under
// another cache_salt (none given being a salt of its own); every text is generate's for the same prompt, run fresh.
// (The prompts extend each other, not the replies: this tiny model's replies, re-encoded, would spell ids beyond
// its vocabulary.)
TEST(serve_conversation_cache_is_keyed_by_ids) {
    char dir[64], *log;
    tiny_checkpoint(dir, false);
    Served s;
    CHECK(serve(&s, dir, "--lookup --parallel 4"), "the server did not start");
    if (test_failures()) return;
    enum { TURNS = 9 };
    const char *prompts[TURNS] = {PROMPT, PROMPT "@", PROMPT "@(A)", "Q", "Q",  // ids 55 10 56 | 31 | 7 32 8; 48
                                  "Q", "Q@", "Q@", "Q@"};
    const char *salts[TURNS] = {NULL, NULL, NULL, NULL, NULL, "a", "a", "b", NULL};
    // what a slot holds of the prompt (its newest id is fed again): turns 0-2 in one slot, then each turn the least
    // recently used slot but turn 6 (a's slot of turn 5) and turn 8 (the saltless "Q" of turn 3 or 4)
    const long cached_want[TURNS] = {0, 3, 4, 0, 0, 0, 1, 0, 1};
    for (int turn = 0; turn < TURNS; turn++) {
        long cached;
        char *text = complete_text(s.port, prompts[turn], salts[turn], &cached), *command, *fresh = NULL;
        CHECK(cached == cached_want[turn], "turn %d: %ld tokens of \"%s\" were cached, expected %ld", turn, cached,
              prompts[turn], cached_want[turn]);
        if (asprintf(&command, "%s generate -m %s --lookup -p '%s' -n 8 --temp 0", specdec_bin(), dir, prompts[turn]) < 0)
            return;
        CHECK(run_command(command, &fresh, NULL) == 0, "%s", command);
        if (fresh && *fresh) fresh[strlen(fresh) - 1] = '\0';
        CHECK(text && fresh && strcmp(text, fresh) == 0, "turn %d: the server's \"%s\", fresh \"%s\"", turn,
              text ? text : "", fresh ? fresh : "");
        free(command), free(fresh), free(text);
    }
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM");
    free(log);
    remove_dir(dir);
}

// ---- raw HTTP, load -----------------------------------------------------------------------------------------------

static void check_log_is_clean(const char *log) {
    for (const char *p = log; *p; p++)
        CHECK(*p == '\n' || ((unsigned char)*p >= 0x20 && *p != 0x7f), "a control byte 0x%02x in the log",
              (unsigned char)*p);
}

TEST(serve_raw_http_refusals) {
    char dir[64], *log;
    tiny_checkpoint(dir, false);
    Served s;
    CHECK(serve(&s, dir, "--api-key sekrit --max-body 2000 --timeout 1"), "the server did not start");
    if (test_failures()) return;
    // Greedy, so that the token count the log is checked for below does not hang on a draw: sampled (the default
    // temperature, 1), the end token sometimes came first and the line said 1 token.
    const char *key = "Authorization: Bearer sekrit\r\n",
               *body = "{\"prompt\": [1, 2], \"max_tokens\": 3, \"temperature\": 0}";
    char chunked[4096];  // a body of 3000 bytes in one chunk, with no Content-Length to announce it
    int at = snprintf(chunked, sizeof chunked, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                      "Authorization: Bearer sekrit\r\nTransfer-Encoding: chunked\r\n\r\nbb8\r\n");
    memset(chunked + at, ' ', 3000);
    snprintf(chunked + at + 3000, sizeof chunked - at - 3000, "\r\n0\r\n\r\n");
    struct {
        char *reply;
        int status;
        const char *needle;
    } c[] = {
        {post(s.port, "/v1/completions", "", body), 401, "invalid_api_key"},
        {post(s.port, "/v1/completions", "Authorization: Bearer sekriT\r\n", body), 401, "invalid_api_key"},
        {post(s.port, "/v1/completions", "Authorization: sekrit\r\n", body), 401, "invalid_api_key"},
        {post(s.port, "/v1/completions", key, body), 200, "\"text_completion\""},
        {post(s.port, "/v1/completions", "Authorization: bearer sekrit\r\n", body), 200, "\"text_completion\""},
        {exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 200, "\"ok\""},
        {exchange(s.port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 401, "api_key"},
        {post(s.port, "/v1/completions", key, "{\"prompt\": [1, 2], \"max_tokens\": 3"), 400, "not valid JSON"},
        {post(s.port, "/v1/completions", key, "{\"prompt\": [1, 99]}"), 400, "outside the model's vocabulary"},
        {post(s.port, "/v1/completions", key, "{\"prompt\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, "
                                              "17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32]}"),
         400, "no room"},
        {post(s.port, "/v1/chat/completions", key, "{\"messages\": [{\"role\": \"user\", \"content\": \"X\"}]}"), 400,
         "no chat template"},
        {post(s.port, "/v1/nothing", key, body), 404, "unknown_url"},
        {exchange(s.port, "GET /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 405, "Allow: POST"},
        {exchange(s.port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
                          "sekrit\r\n\r\n"), 200, "\"id\":\"specdec-tiny-"},
        {exchange(s.port, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer "
                          "sekrit\r\nContent-Length: 5000\r\n\r\n"), 413, "max-body"},
        {exchange(s.port, chunked), 413, "max-body"},
        {exchange(s.port, "GET /health HTTP/1.1\r\nA header without a colon\r\n\r\n"), 400, ""},
        {exchange(s.port, "GET /health HTTP/9.9\r\nHost: x\r\n\r\n"), 505, ""},
        {exchange(s.port, "NONSENSE\r\n\r\n"), 0, ""},  // closed without an answer
        {exchange(s.port, "GET /\x1b[31mred HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"), 0, ""},
    };
    const int n = (int)(sizeof c / sizeof c[0]);
    for (int i = 0; i < n; i++) {
        if (c[i].status) CHECK(status_of(c[i].reply) == c[i].status, "case %d: status %d, expected %d: %.300s", i,
                               status_of(c[i].reply), c[i].status, c[i].reply);
        CHECK(strstr(c[i].reply, c[i].needle), "case %d: \"%s\" not in %.300s", i, c[i].needle, c[i].reply);
    }
    // A slow client: half a request line, then nothing; the server closes the connection after --timeout.
    const int fd = connect_to(s.port);
    CHECK(fd >= 0 && write(fd, "GET /health HT", 14) == 14, "connect and send");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char byte;
    CHECK(poll(&p, 1, 20000) == 1 && read(fd, &byte, 1) <= 0, "the server kept an idle connection for 20 s");
    close(fd);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM: %s", log);
    check_log_is_clean(log);
    CHECK(strstr(log, "POST /v1/completions 200 3 tokens"), "the log has a line per request: %s", log);
    CHECK(!strstr(c[3].reply, "/tmp/") && !strstr(c[13].reply, "/tmp/"), "a response names the model by its path");
    CHECK(strstr(log, "POST /v1/completions 413 0 tokens"), "and the 413s: %s", log);
    CHECK(strstr(log, "(model ") && strstr(log, ", drafter: none, target-only decoding)\n"),
          "the \"listening on\" line does not say that the server drafts by nothing: %s", log);
    for (int i = 0; i < n; i++) free(c[i].reply);
    free(log);
    remove_dir(dir);
}

// Whether the server closed fd: it reads as ended (or reset) within `ms`.
static bool closed_within(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char buf[256];
    for (;;) {
        if (poll(&p, 1, ms) != 1) return false;
        const ssize_t got = read(fd, buf, sizeof buf);
        if (got <= 0) return true;  // (what came before the end, a 413 say, is the caller's to read first)
    }
}

// Slow clients: 64 connections (the server's limit with --queue 0) that trickle a header byte every 0.2 s, never
// idle for --timeout, are closed once their requests are not whole --timeout seconds after they opened — and the
// server answers others again. Before, they held every connection until they stopped.
TEST(serve_trickling_clients_are_closed) {
    char dir[64], *log;
    tiny_checkpoint(dir, false);
    Served s;
    CHECK(serve(&s, dir, "--queue 0 --timeout 1"), "the server did not start");
    if (test_failures()) return;
    enum { N = 64 };
    int fds[N], open = 0;
    for (int i = 0; i < N; i++) open += (fds[i] = connect_to(s.port)) >= 0;
    CHECK(open == N, "%d of %d connections", open, N);
    for (int tick = 0; tick < 50 && open > 0; tick++) {  // 10 s at most
        for (int i = 0; i < N; i++) {
            if (fds[i] < 0) continue;
            if (send(fds[i], "G", 1, MSG_NOSIGNAL) < 0 || closed_within(fds[i], 0)) {
                close(fds[i]);
                fds[i] = -1;
                open--;
            }
        }
        usleep(200000);
    }
    CHECK(open == 0, "%d of %d trickling connections still open after 10 s", open, N);
    for (int i = 0; i < N; i++)
        if (fds[i] >= 0) close(fds[i]);
    char *reply = exchange(s.port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK(status_of(reply) == 200, "/health after the slow clients: %.200s", reply);
    free(reply);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM");
    free(log);
    remove_dir(dir);
}

// The same request sent whole and then half-closed (shutdown(SHUT_WR), as some clients and proxies do): its answer.
static char *half_closed(int port, const char *body) {
    char *raw;
    if (asprintf(&raw, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %zu\r\n"
                       "\r\n%s", strlen(body), body) < 0)
        return NULL;
    const int fd = connect_to(port);
    CHECK(fd >= 0 && write(fd, raw, strlen(raw)) == (ssize_t)strlen(raw), "send");
    free(raw);
    shutdown(fd, SHUT_WR);
    char *reply = read_reply(fd, NULL);
    close(fd);
    return reply;
}

// What a client library does not send: a half-close is no hang-up (the whole answer comes, streamed or not); a
// chunked body past --max-body gets 413 at once, without its end; prompt ids in a padded vocabulary's unused rows
// (a tokenizer of 258 ids before a model of 301 rows) get 400; an address of no interface here is named as such.
TEST(serve_half_close_chunked_and_padded_vocabulary) {
    char dir[64], *log, *command;
    snprintf(dir, sizeof dir, "/tmp/specdec-padded-XXXXXX");
    CHECK(mkdtemp(dir), "mkdtemp");
    json_t *tok = fixture_tokenizer_json(NULL, 0);  // 256 bytes, <|endoftext|> and <pad>: ids 0..257
    free(fixture_write_json(dir, "tokenizer.json", tok));
    json_decref(tok);
    if (asprintf(&command, "f=$(pwd)/tests/fixtures/f32_sharded_inner; ln -s $f/* %s/", dir) < 0) return;
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
    free(command);
    Served s;
    CHECK(serve(&s, dir, "--max-body 2000 --timeout 20"), "the server did not start");
    if (test_failures()) return;
    const char *body = "{\"prompt\": [10, 20, 30], \"max_tokens\": 6, \"temperature\": 0}",
               *streamed = "{\"prompt\": [10, 20, 30], \"max_tokens\": 6, \"temperature\": 0, \"stream\": true}";
    char *whole = post(s.port, "/v1/completions", "", body), *half = half_closed(s.port, body);
    const char *at = strstr(whole, "\"text\":\"");
    char text[64] = "";
    if (at) snprintf(text, sizeof text, "%.*s", (int)strcspn(at + 8, "\"") + 9, at);  // "text":"…"
    CHECK(status_of(whole) == 200 && at, "the request: %.300s", whole);
    CHECK(status_of(half) == 200 && at && strstr(half, text), "half-closed, not streamed: %.300s", half);
    free(half);
    half = half_closed(s.port, streamed);
    CHECK(status_of(half) == 200 && strstr(half, "data: [DONE]") && strstr(half, "\"finish_reason\":\"length\""),
          "half-closed, streamed: %.500s", half);
    free(half), free(whole);

    char *reply = post(s.port, "/v1/completions", "", "{\"prompt\": [10, 290], \"max_tokens\": 2}");
    CHECK(status_of(reply) == 400 && strstr(reply, "vocabulary [0, 258)"), "an id in the padding: %.300s", reply);
    free(reply);

    // A chunk that passes the limit, and no end: 413 and the connection closed, with 20 s to spare before --timeout.
    const int fd = connect_to(s.port);
    char chunk[2600];
    const int head = snprintf(chunk, sizeof chunk, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: "
                              "chunked\r\n\r\n1000\r\n");
    memset(chunk + head, ' ', sizeof chunk - head);
    CHECK(fd >= 0 && write(fd, chunk, sizeof chunk) == (ssize_t)sizeof chunk, "send");
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char answer[512] = "";
    CHECK(poll(&p, 1, 10000) == 1 && read(fd, answer, sizeof answer - 1) > 0, "no answer to the long chunk in 10 s");
    CHECK(status_of(answer) == 413, "the long chunk: %.200s", answer);
    CHECK(closed_within(fd, 10000), "the connection stayed open after the 413");
    close(fd);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM");
    check_log_is_clean(log);
    free(log);

    char *out, *err;
    if (asprintf(&command, "%s serve -m %s --host 192.0.2.1 --port 0", specdec_bin(), dir) < 0) return;
    CHECK(run_command(command, &out, &err) == 2 && strstr(err, "cannot assign the address"),
          "--host 192.0.2.1 (TEST-NET-1, no interface's): %s", err);
    free(command), free(out), free(err);
    remove_dir(dir);
}

TEST(serve_load_is_bounded) {
    char dir[64], *out = NULL, *log, *command;
    tiny_checkpoint(dir, false);
    Served s;
    CHECK(serve(&s, dir, "--queue 2"), "the server did not start");
    if (test_failures()) return;
    if (asprintf(&command, "node tests/oracle/serve_client.mjs load %d 8 25", s.port) < 0) return;
    CHECK(run_command(command, &out, NULL) == 0, "the client failed");
    free(command);
    json_error_t je;
    json_t *r = json_loads(out ? out : "", 0, &je), *statuses = json_object_get(r, "statuses");
    const long ok = (long)json_integer_value(json_object_get(statuses, "200"));
    const long busy = (long)json_integer_value(json_object_get(statuses, "503"));
    CHECK(ok + busy == 200 && ok > 0, "8 × 25 requests: %ld answered 200 and %ld 503: %s", ok, busy, out);
    CHECK(json_integer_value(json_object_get(r, "lost")) == 0, "lost requests: %s", out);
    CHECK(json_integer_value(json_object_get(r, "mismatches")) == 0, "texts unlike the sequential ones: %s", out);
    CHECK(json_is_true(json_object_get(r, "healthy")), "/health after the load: %s", out);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM");
    check_log_is_clean(log);
    json_decref(r);
    free(out);
    free(log);
    remove_dir(dir);
}

// ---- specdec's extension: marks, target-only decoding, what /v1/models says --------------------------------------

// A streamed completion (HTTP/1.0: the events unframed, to the connection's end) of body; its events' JSON objects
// in order, the last "data: [DONE]" left out.
static json_t *stream_events_at(int port, const char *path, const char *body) {
    char *raw;
    if (asprintf(&raw, "POST %s HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                       "\r\n%s", path, strlen(body), body) < 0)
        return NULL;
    char *reply = exchange(port, raw), *at = strstr(reply, "\r\n\r\n");
    json_t *events = json_array();
    CHECK(status_of(reply) == 200 && at, "a stream of %s: %.300s", body, reply);
    for (at = at ? strstr(at, "data: ") : NULL; at; at = strstr(at, "data: ")) {
        at += strlen("data: ");
        char *end = strstr(at, "\n\n");
        if (!end || strncmp(at, "[DONE]", 6) == 0) break;
        json_error_t je;
        json_t *event = json_loadb(at, (size_t)(end - at), 0, &je);
        CHECK(event, "an event that is not JSON: %.200s", at);
        if (event) json_array_append_new(events, event);
        at = end;
    }
    free(reply);
    free(raw);
    return events;
}

static json_t *stream_events(int port, const char *body) { return stream_events_at(port, "/v1/completions", body); }

// What a stream's marks add up to: the text (chunks' texts, joined), and per kind.
typedef struct {
    char text[512];
    int rounds, tokens, drafted, accepted, rounds_rejecting, rejected_marks;
    const json_t *last;     // the last event's "specdec" (the run's figures)
} Marked;

static Marked read_marks(const json_t *events) {
    Marked m = {0};
    for (size_t i = 0; i < json_array_size(events); i++) {
        const json_t *e = json_array_get(events, i), *ext = json_object_get(e, "specdec");
        const char *text = json_string_value(json_object_get(json_array_get(json_object_get(e, "choices"), 0), "text"));
        m.last = ext;
        if (!json_object_get(ext, "marks")) continue;
        char joined[512] = "";
        const json_t *mark, *round;
        size_t k;
        json_array_foreach(json_object_get(ext, "marks"), k, mark) {
            const char *kind = json_string_value(json_object_get(mark, "kind"));
            m.rejected_marks += strcmp(kind, "rejected") == 0;
            if (strcmp(kind, "rejected") != 0)
                strncat(joined, json_string_value(json_object_get(mark, "text")), sizeof joined - strlen(joined) - 1);
        }
        CHECK(text && strcmp(joined, text) == 0, "chunk %zu: its marks spell \"%s\", its text is \"%s\"", i, joined,
              text ? text : "");
        strncat(m.text, text ? text : "", sizeof m.text - strlen(m.text) - 1);
        json_array_foreach(json_object_get(ext, "rounds"), k, round) {
            const int drafted = (int)json_integer_value(json_object_get(round, "drafted"));
            const int accepted = (int)json_integer_value(json_object_get(round, "accepted"));
            m.rounds++;
            m.tokens += (int)json_integer_value(json_object_get(round, "tokens"));
            m.drafted += drafted;
            m.accepted += accepted;
            m.rounds_rejecting += accepted < drafted;
            CHECK(accepted <= drafted && json_integer_value(json_object_get(round, "gamma")) == drafted,
                  "a chain's round: accepted ≤ drafted = γ");
        }
    }
    return m;
}

// A string the page reported, or "" where it reported none (a page that failed to run reports nothing): the checks
// below then fail by name instead of reading through a null pointer.
static const char *page_string(const json_t *value) {
    return json_is_string(value) ? json_string_value(value) : "";
}

static int figure(const json_t *ext, const char *name) { return (int)json_integer_value(json_object_get(ext, name)); }

// specdec.marks: every chunk's marks spell its text; the rounds add up to the run's figures; a chain's round that
// rejected a draft shows it (one rejected mark per such round); the text is generate's, with marks or without, greedy
// or sampled, cut by a stop string. specdec.draft false: target-only decoding, whose greedy text is the same.
TEST(serve_marks_and_target_only) {
    char dir[64], *log;
    tiny_checkpoint(dir, false);
    char *greedy = generate(dir, "--temp 0"), *sampled = generate(dir, "--temp 0.8 --seed 11");
    Served s;
    CHECK(greedy && strlen(greedy) >= 12 && serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return;
    const char *marked = "{\"prompt\": \"" PROMPT "\", \"max_tokens\": 20, \"stream\": true, \"specdec\": {\"marks\": "
                         "true}, %s}";
    char *body;
    for (int run = 0; run < 3; run++) {
        char stop[40] = "\"temperature\": 0";
        if (run == 2) snprintf(stop, sizeof stop, "\"temperature\": 0, \"stop\": \"%c%c\"", greedy[10], greedy[11]);
        if (asprintf(&body, marked, run == 1 ? "\"temperature\": 0.8, \"seed\": 11" : stop) < 0) return;
        json_t *events = stream_events(s.port, body);
        const Marked m = read_marks(events);
        const char *want = run == 1 ? sampled : greedy;
        CHECK(run == 2 ? strncmp(m.text, want, 10) == 0 && strlen(m.text) == 10 : strcmp(m.text, want) == 0,
              "%s: the marked text \"%s\", generate's \"%s\"", body, m.text, want);
        CHECK(m.rounds == figure(m.last, "target_calls") && m.drafted == figure(m.last, "drafted") &&
                  m.accepted == figure(m.last, "accepted") && (run == 2 || m.tokens == 20),
              "%s: the rounds (%d, %d drafted, %d accepted, %d tokens) against the run's figures", body, m.rounds,
              m.drafted, m.accepted, m.tokens);
        CHECK(run == 2 || m.rejected_marks == m.rounds_rejecting,
              "%s: %d rejected drafts shown, %d rounds rejected one", body, m.rejected_marks, m.rounds_rejecting);
        CHECK(run != 0 || (m.rejected_marks > 0 && m.accepted > 0), "the greedy run shows both kinds of draft");
        json_decref(events);
        free(body);
    }
    // Target-only decoding: no drafts, one token per target call, the same greedy text.
    json_t *events = stream_events(s.port, "{\"prompt\": \"" PROMPT "\", \"max_tokens\": 20, \"temperature\": 0, "
                                           "\"stream\": true, \"specdec\": {\"marks\": true, \"draft\": false}}");
    const Marked plain = read_marks(events);
    CHECK(strcmp(plain.text, greedy) == 0 && plain.drafted == 0 && figure(plain.last, "target_calls") == 20 &&
              plain.rounds == 20,
          "target-only: \"%s\", %d drafted, %d target calls", plain.text, plain.drafted,
          figure(plain.last, "target_calls"));
    json_decref(events);
    char *models = exchange(s.port, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    CHECK(strstr(models, "\"specdec\":{\"chat\":false,\"drafter\":\"lookup\"}"), "/v1/models: %s", models);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM: %s", log);
    free(models), free(greedy), free(sampled), free(log);
    remove_dir(dir);
}

// ---- the page -------------------------------------------------------------------------------------------------

// The page (src/serve/web/): its three files with their types under the Content-Security-Policy, no key needed;
// then in headless Chromium (tests/oracle/web_page.mjs) with the key it asks for: no console errors; a greedy
// completion drawn with <del> and <ins> exactly where the stream's marks say, and the stream's figures (the
// server's, and α and Equation 1's expectation from its rounds); the race's two texts equal (greedy: speculative is
// target-only), the target alone drafting nothing; a chat's reply as the stream's; nothing wider than a phone.
// With SPECDEC_WEB_SCREENSHOT=FILE.png, the shipped pair instead of the tiny checkpoint, and a screenshot of the
// race into FILE (how docs/web-page.png was made).
TEST(serve_web_page) {
    char dir[64], *log, *out = NULL, *command;
    const char *shot = getenv("SPECDEC_WEB_SCREENSHOT");
    tiny_checkpoint(dir, true);
    Served s;
    CHECK(shot ? serve(&s, TARGET, "-d " DRAFT " --api-key sekrit") : serve(&s, dir, "--lookup --api-key sekrit"),
          "the server did not start");
    if (test_failures()) return;
    const struct {
        const char *path, *type, *needle;
    } files[] = {{"/", "text/html; charset=utf-8", "<textarea"}, {"/page.css", "text/css; charset=utf-8", "del {"},
                 {"/page.js", "text/javascript; charset=utf-8", "specdec"}};
    for (int i = 0; i < 3; i++) {
        char *request, *reply;
        if (asprintf(&request, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", files[i].path) < 0) return;
        reply = exchange(s.port, request);
        CHECK(status_of(reply) == 200 && strstr(reply, files[i].type) && strstr(reply, files[i].needle) &&
                  strstr(reply, "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'"),
              "GET %s: %.400s", files[i].path, reply);
        free(request), free(reply);
    }
    char *refused = post(s.port, "/", "", "{}");
    CHECK(status_of(refused) == 405, "POST /: %.200s", refused);
    free(refused);
    if (asprintf(&command, "node tests/oracle/web_page.mjs %d sekrit '%s' %d %s", s.port,
                 shot ? "def fibonacci(n):" : PROMPT, shot ? 48 : 20, shot ? shot : "") < 0)
        return;
    CHECK(run_command(command, &out, NULL) == 0, "%s failed: %s", command, out ? out : "");
    json_error_t je;
    json_t *r = json_loads(out ? out : "", 0, &je);
    const json_t *marks = json_object_get(r, "marks"), *figures = json_object_get(r, "figures");
    const json_t *race = json_object_get(r, "race"), *chat = json_object_get(r, "chat");
    CHECK(r && !json_object_get(r, "failure") && json_array_size(json_object_get(r, "errors")) == 0,
          "the page failed or logged errors: %s", out ? out : "");
    CHECK(json_equal(json_object_get(marks, "page"), json_object_get(marks, "stream")),
          "the page's marks are not the stream's: %s", out);
    bool rejected = false, own = false;
    const json_t *mark;
    size_t i;
    json_array_foreach(json_object_get(marks, "page"), i, mark) {
        rejected |= strcmp(page_string(json_array_get(mark, 0)), "rejected") == 0;
        own |= strcmp(page_string(json_array_get(mark, 0)), "own") == 0;
    }
    CHECK(rejected && own, "the page drew no <del> or no <ins>: %s", out);
    const char *names[] = {"rounds", "tokens-per-call", "alpha", "expected"};
    for (int f = 0; f < 4; f++)
        CHECK(json_equal(json_object_get(json_object_get(figures, "page"), names[f]),
                         json_object_get(json_object_get(figures, "stream"), names[f])),
              "the page's %s against the stream's: %s", names[f], out);
    const char *spec = json_string_value(json_object_get(race, "with_draft"));
    CHECK(spec && *spec && json_equal(json_object_get(race, "with_draft"), json_object_get(race, "target_only")),
          "the race's greedy texts differ: %s", out);
    CHECK(strncmp(page_string(json_object_get(race, "plain_drafts")), "– (no drafts)", 5) == 0 &&
              strncmp(page_string(json_object_get(race, "speedup")), "Speed-up with the draft: ×", 10) == 0,
          "the race's figures: %s", out);
    CHECK(shot || (json_equal(json_object_get(chat, "page"), json_object_get(chat, "stream")) &&
                   json_integer_value(json_object_get(chat, "turns")) == 2),
          "the chat: %s", out);
    CHECK(json_integer_value(json_object_get(r, "overflow")) <= 0, "wider than a phone: %s", out);
    CHECK(stop_serving(&s, &log) == 0, "the server's exit status on SIGTERM: %s", log);
    json_decref(r);
    free(command), free(out), free(log);
    remove_dir(dir);
}

// Structured output on the shipped pair: response_format json_schema on /v1/completions gives generate
// --json-schema's greedy text, a whole document of the schema, finish_reason "stop";
// a schema outside the subset is refused with 400, naming the keyword.
TEST(serve_response_format_json_schema) {
#define STRUCTURED_SCHEMA "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\", \"minimum\": 0, " \
                          "\"maximum\": 99}}, \"required\": [\"id\"], \"additionalProperties\": false}"
    char *command, *want = NULL, *log;
    if (asprintf(&command, "%s generate -m weights/pystd/target -d weights/pystd/draft -p 'x = ' -n 30 --temp 0 "
                 "--json-schema '" STRUCTURED_SCHEMA "'", specdec_bin()) < 0)
        return;
    CHECK(run_command(command, &want, NULL) == 0, "generate --json-schema failed");
    free(command);
    size_t n = want ? strlen(want) : 0;
    if (n && want[n - 1] == '\n') want[n - 1] = '\0';
    Served s;
    CHECK(serve(&s, "weights/pystd/target", "-d weights/pystd/draft"), "the server did not start");
    if (test_failures()) return;
    char *reply = post(s.port, "/v1/completions", "", "{\"prompt\": \"x = \", \"max_tokens\": 30, \"temperature\": 0, "
                       "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", "
                       "\"strict\": true, \"schema\": " STRUCTURED_SCHEMA "}}}");
    const char *body = reply ? strstr(reply, "\r\n\r\n") : NULL;
    json_error_t je;
    json_t *o = body ? json_loads(body + 4, 0, &je) : NULL, *choice = json_array_get(json_object_get(o, "choices"), 0);
    const char *text = json_string_value(json_object_get(choice, "text"));
    CHECK(status_of(reply) == 200 && text && want && strcmp(text, want) == 0, "the server's \"%s\", generate's \"%s\"",
          text ? text : reply, want ? want : "");
    CHECK(text && text[0] == '{' && text[strlen(text) - 1] == '}', "not a closed object: %s", text ? text : "");
    CHECK(strcmp(json_string_value(json_object_get(choice, "finish_reason")) ?: "", "stop") == 0, "finish: %s",
          body ? body : "");
    json_decref(o);
    free(reply);
    reply = post(s.port, "/v1/completions", "", "{\"prompt\": \"x\", \"response_format\": {\"type\": \"json_schema\", "
                 "\"json_schema\": {\"schema\": {\"type\": \"object\", \"not\": {}}}}}");
    CHECK(status_of(reply) == 400 && strstr(reply, "the keyword 'not' is not supported"), "%s", reply);
    free(reply);
    CHECK(stop_serving(&s, &log) == 0, "exit status: %s", log);
    free(log);
    free(want);
#undef STRUCTURED_SCHEMA
}

// ---- tools ----------------------------------------------------------------------------------------------------

#define WEATHER_TOOL                                                                                                \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather now\", "     \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 8}, "  \
    "\"days\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 7}, \"unit\": {\"enum\": [\"c\", \"f\"]}}, "    \
    "\"required\": [\"city\", \"unit\"], \"additionalProperties\": false}}}"

// The arguments of a get_weather call hold what WEATHER_TOOL's schema asks, and nothing else.
static void check_weather_arguments(const char *arguments) {
    json_error_t je;
    json_t *a = arguments ? json_loads(arguments, 0, &je) : NULL;
    const json_t *city = json_object_get(a, "city"), *unit = json_object_get(a, "unit"), *days = json_object_get(a, "days");
    const char *u = json_string_value(unit);
    size_t n_chars = 0;  // maxLength counts characters
    for (const char *p = json_string_value(city); p && *p; p++) n_chars += ((unsigned char)*p & 0xC0) != 0x80;
    CHECK(json_is_object(a) && json_is_string(city) && n_chars <= 8 && u && (!strcmp(u, "c") || !strcmp(u, "f")) &&
              (!days || (json_is_integer(days) && json_integer_value(days) >= 1 && json_integer_value(days) <= 7)) &&
              json_object_size(a) == 2u + (days != NULL),
          "arguments the schema refuses: %s", arguments ? arguments : "(none)");
    json_decref(a);
}

// The message of a chat completion's reply (owned by *o), or NULL.
static const json_t *chat_reply(const char *reply, json_t **o) {
    const char *at = reply ? strstr(reply, "\r\n\r\n") : NULL;
    json_error_t je;
    *o = at ? json_loads(at + 4, 0, &je) : NULL;
    return json_array_get(json_object_get(*o, "choices"), 0);
}

// Asks `body` (a chat request, its one %s for more fields) for a call of get_weather, greedy, with lookup drafting
// and with the target alone: each reply one call whose arguments validate, finish_reason "tool_calls", no content;
// and the two calls' arguments equal (greedy identity under the call's grammar). Returns the arguments (malloc'd).
static char *one_weather_call_with_and_without_drafts(int port, const char *body) {
    char *arguments[2] = {NULL, NULL};
    for (int plain = 0; plain < 2; plain++) {  // lookup drafting, then the target alone
        char *request, *reply = NULL;
        if (asprintf(&request, body, plain ? ", \"specdec\": {\"draft\": false}" : "") >= 0)
            reply = post(port, "/v1/chat/completions", "", request);
        json_t *o;
        const json_t *choice = chat_reply(reply, &o), *message = json_object_get(choice, "message");
        const json_t *call = json_array_get(json_object_get(message, "tool_calls"), 0);
        const json_t *fn = json_object_get(call, "function");
        CHECK(status_of(reply) == 200 && json_is_null(json_object_get(message, "content")) &&
                  !strcmp(json_string_value(json_object_get(choice, "finish_reason")) ?: "", "tool_calls") &&
                  json_array_size(json_object_get(message, "tool_calls")) == 1 &&
                  !strcmp(json_string_value(json_object_get(call, "type")) ?: "", "function") &&
                  !strcmp(json_string_value(json_object_get(fn, "name")) ?: "", "get_weather"),
              "not one call of get_weather: %s", reply ? reply : "");
        const char *args = json_string_value(json_object_get(fn, "arguments"));
        check_weather_arguments(args);
        arguments[plain] = args ? strdup(args) : NULL;
        json_decref(o);
        free(reply);
        free(request);
    }
    CHECK(arguments[0] && arguments[1] && !strcmp(arguments[0], arguments[1]),
          "greedy with lookup drafting %s, target alone %s", arguments[0], arguments[1]);
    free(arguments[1]);
    return arguments[0];
}

#ifndef SPECDEC_DEBUG  // (its one caller is not in the sanitizer suite)
// The openai client's logprobs beside the call (serve_client.mjs tools): logprobs.content has one entry a generated
// token, whole and streamed alike, each with its token, a log-probability ≤ 0 and 2 top_logprobs; the tokens spell
// the call, opened by Qwen3's <tool_call> token whole (the grammar names it: docs/server.md, "Markers that are
// tokens").
static void check_client_logprobs(const json_t *o) {
    const json_t *entries = json_object_get(o, "logprobs");
    const json_int_t n_tokens = json_integer_value(json_object_get(o, "completion_tokens"));
    char text[4096] = "";
    bool well_formed = json_array_size(entries) > 0;
    for (size_t i = 0; i < json_array_size(entries); i++) {
        const json_t *e = json_array_get(entries, i);
        well_formed &= json_is_string(json_object_get(e, "token")) &&
                       json_real_value(json_object_get(e, "logprob")) <= 0 &&
                       json_array_size(json_object_get(e, "top_logprobs")) == 2;
        if (strlen(text) < 3000) strncat(text, json_string_value(json_object_get(e, "token")) ?: "", 64);
    }
    CHECK(well_formed && (json_int_t)json_array_size(entries) == n_tokens &&
              json_equal(entries, json_object_get(o, "logprobs_streamed")) &&
              !strcmp(json_string_value(json_object_get(json_array_get(entries, 0), "token")) ?: "", "<tool_call>") &&
              !strncmp(text, "<tool_call>\n{", 13) && strstr(text, "}\n</tool_call>"),
          "the client's logprobs: %zu entries (%zu streamed), %lld tokens, their text %s", json_array_size(entries),
          json_array_size(json_object_get(o, "logprobs_streamed")), (long long)n_tokens, text);
}
#endif

// A named tool_choice on a random-weight checkpoint: a call of that tool whose arguments validate, finish_reason
// "tool_calls"; the same call streamed (its delta) and decoded with lookup drafting as without (greedy identity
// under the call's grammar); the openai npm client's round trip (tools with logprobs, the call and the logprobs
// whole and streamed: check_client_logprobs; its assistant message and a tool result sent back).
TEST(serve_tools_named_choice_gives_a_valid_call) {
    char dir[64], *log;
    if (!fixture_qwen3_checkpoint(dir, 0)) return;
    Served s;
    CHECK(serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return remove_dir(dir);
    static const char body[] =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], \"max_tokens\": 120, "
        "\"temperature\": 0, \"tools\": [" WEATHER_TOOL ", {\"type\": \"function\", \"function\": {\"name\": "
        "\"other\"}}], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}%s}";
    char *arguments = one_weather_call_with_and_without_drafts(s.port, body);
#ifndef SPECDEC_DEBUG  // (the sanitizer suite at -O0: the masks over Qwen3's 151936 ids make each call seconds)
    // streamed: no content, one delta with the call, finish_reason "tool_calls"
    char *request;
    if (asprintf(&request, body, ", \"stream\": true") >= 0) {
        json_t *events = stream_events_at(s.port, "/v1/chat/completions", request);
        const json_t *last = json_array_get(json_object_get(json_array_get(events, json_array_size(events) - 1),
                                                            "choices"), 0);
        const json_t *call = json_array_get(json_object_get(json_object_get(last, "delta"), "tool_calls"), 0);
        const char *args = json_string_value(json_object_get(json_object_get(call, "function"), "arguments"));
        CHECK(!strcmp(json_string_value(json_object_get(last, "finish_reason")) ?: "", "tool_calls") && args &&
                  arguments && !strcmp(args, arguments) && json_integer_value(json_object_get(call, "index")) == 0,
              "the stream's last event: %s", last ? json_dumps(last, 0) : "(none)");
        for (size_t i = 0; i + 1 < json_array_size(events); i++) {
            const json_t *delta = json_object_get(json_array_get(json_object_get(json_array_get(events, i), "choices"),
                                                                 0), "delta");
            const char *content = json_string_value(json_object_get(delta, "content"));
            CHECK(!content || !content[0], "content streamed before the call: %s", content);
        }
        json_decref(events);
        free(request);
    }
    // the openai npm client: the same call whole and streamed, and its own assistant message sent back with a result
    char *command, *out = NULL;
    if (asprintf(&command, "node tests/oracle/serve_client.mjs tools %d '" WEATHER_TOOL "' get_weather", s.port) >= 0) {
        CHECK(run_command(command, &out, NULL) == 0, "%s failed", command);
        json_error_t je;
        json_t *o = out ? json_loads(out, 0, &je) : NULL, *streamed = json_object_get(o, "streamed");
        const json_t *second = json_object_get(o, "second");
        const char *args = json_string_value(json_object_get(json_object_get(json_object_get(o, "call"), "function"),
                                                             "arguments"));
        check_weather_arguments(args);
        CHECK(args && json_equal(json_object_get(o, "call"), streamed) &&
                  !strcmp(json_string_value(json_object_get(o, "finish_reason")) ?: "", "tool_calls"),
              "the client's call, whole and streamed: %s", out ? out : "");
        CHECK(json_is_string(json_object_get(second, "finish_reason")), "the second turn: %s", out ? out : "");
        check_client_logprobs(o);
        json_decref(o);
        free(out);
        free(command);
    }
#endif
    free(arguments);
    CHECK(stop_serving(&s, &log) == 0, "exit status: %s", log);
    free(log);
    remove_dir(dir);
}

#ifndef SPECDEC_DEBUG  // (its one caller is not in the sanitizer suite: below)
// logprobs beside a call: every generated token has its entry, the call's too — the first <tool_call>, which the
// model favours, at probability about 1 — whole and streamed alike, the streamed ones handed on with the last chunk.
static void check_logprobs_with_a_call(int port, const char *body) {
    char *request, *reply = NULL;
    if (asprintf(&request, body, ", \"logprobs\": true, \"top_logprobs\": 2") >= 0)
        reply = post(port, "/v1/chat/completions", "", request);
    json_t *o;
    const json_t *choice = chat_reply(reply, &o);
    const json_t *entries = json_object_get(json_object_get(choice, "logprobs"), "content");
    const json_int_t n_tokens = json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens"));
    char text[4096] = "";
    for (size_t i = 0; i < json_array_size(entries) && strlen(text) < 3000; i++)
        strncat(text, json_string_value(json_object_get(json_array_get(entries, i), "token")) ?: "", 64);
    CHECK(json_array_size(json_object_get(json_object_get(choice, "message"), "tool_calls")) == 1 &&
              (json_int_t)json_array_size(entries) == n_tokens && n_tokens > 10 &&
              json_real_value(json_object_get(json_array_get(entries, 0), "logprob")) > -0.01 &&
              json_array_size(json_object_get(json_array_get(entries, 0), "top_logprobs")) == 2 &&
              !strncmp(text, "<tool_call>\n{", 13) && strstr(text, "}\n</tool_call>"),
          "%lld tokens, %zu logprobs entries, their text %s", (long long)n_tokens, json_array_size(entries), text);
    free(request);
    if (asprintf(&request, body, ", \"logprobs\": true, \"top_logprobs\": 2, \"stream\": true") >= 0) {
        json_t *events = stream_events_at(port, "/v1/chat/completions", request), *streamed = json_array();
        for (size_t i = 0; i < json_array_size(events); i++) {
            const json_t *c = json_array_get(json_object_get(json_array_get(events, i), "choices"), 0);
            json_t *content = json_object_get(json_object_get(c, "logprobs"), "content");
            if (json_is_array(content)) json_array_extend(streamed, content);
        }
        CHECK(json_equal(streamed, entries), "streamed, %zu logprobs entries; whole, %zu", json_array_size(streamed),
              json_array_size(entries));
        json_decref(streamed);
        json_decref(events);
        free(request);
    }
    json_decref(o);
    free(reply);
}
#endif

// tool_choice "auto" under the lazy grammar: a checkpoint that writes <tool_call> wherever it may opens a call at
// once; from there the call's grammar decides — one valid call of get_weather (parallel_tool_calls false: the
// grammar ends after it), finish_reason "tool_calls", the same with lookup drafting as with the target alone. With
// "none", the same model writes <tool_call> after <tool_call>: the grammar is what made the call. And logprobs beside
// the call (check_logprobs_with_a_call).
// (Not in the sanitizer suite at -O0, where its masks over Qwen3's 151936 ids take half a minute; the lazy grammar's
// sanitizer runs are test_lazy.c's, test_tool_calls.c's and test_constrained.c's.)
TEST(serve_tools_auto_constrains_a_call_once_begun) {
#ifndef SPECDEC_DEBUG
    char dir[64], *log;
    if (!fixture_qwen3_checkpoint(dir, 151657)) return;  // <tool_call>
    Served s;
    CHECK(serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return remove_dir(dir);
#define AUTO_BODY(choice)                                                                                           \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}], \"max_tokens\": 400, "              \
    "\"temperature\": 0, \"tools\": [" WEATHER_TOOL "], \"parallel_tool_calls\": false, \"tool_choice\": \"" choice "\"%s}"
    static const char auto_body[] = AUTO_BODY("auto"), none_body[] = AUTO_BODY("none");
#undef AUTO_BODY
    free(one_weather_call_with_and_without_drafts(s.port, auto_body));
    char *request, *reply = NULL;
    if (asprintf(&request, none_body, "") >= 0) reply = post(s.port, "/v1/chat/completions", "", request);
    json_t *o;
    const char *content = json_string_value(json_object_get(json_object_get(chat_reply(reply, &o), "message"),
                                                            "content"));
    CHECK(content && !strncmp(content, "<tool_call><tool_call>", 22), "unconstrained, the model wrote: %s",
          reply ? reply : "");
    json_decref(o);
    free(reply);
    free(request);
    check_logprobs_with_a_call(s.port, auto_body);
    CHECK(stop_serving(&s, &log) == 0, "exit status: %s", log);
    free(log);
    remove_dir(dir);
#endif
}

// A format whose marker the tokenizer holds as a special token (Mistral's [TOOL_CALLS] in its published tokenizers):
// the call grammars reference that token (grammar.h), which the masks give its marker's byte. Here Qwen3's tokenizer
// with <|box_start|>, a special token, renamed [TOOL_CALLS], a Mistral-style template, and a model that writes that
// token wherever it may. With tool_choice "none" it writes it again and again; with "auto" the token opens a call and
// the grammar holds what follows to the tool's schema (one valid call, with lookup drafting as without); with
// "required" the call opens with that one token (its logprobs entry is the whole marker), not its text spelled. A
// request's own grammar naming a token the tokenizer lacks is refused (400, naming it).
// (Not in the sanitizer suite at -O0: masks over 151936 ids, as serve_tools_auto_constrains_a_call_once_begun.)
TEST(serve_tools_special_marker_opens_a_call) {
#ifndef SPECDEC_DEBUG
    char dir[64], *log, *command;
    if (!fixture_qwen3_checkpoint(dir, 151648)) return;  // <|box_start|>, to be [TOOL_CALLS]
    if (asprintf(&command, "cd %s && cp --remove-destination \"$(readlink tokenizer.json)\" tokenizer.json && sed -i "
                 "'s/<|box_start|>/[TOOL_CALLS]/g' tokenizer.json && cp %s/tests/fixtures/templates/mistral_tools.jinja "
                 "chat_template.jinja", dir, getenv("PWD") ?: ".") >= 0) {
        CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
        free(command);
    }
    Served s;
    CHECK(!test_failures() && serve(&s, dir, "--lookup"), "the server did not start");
    if (test_failures()) return remove_dir(dir);
#define MARKER_BODY(choice)                                                                                         \
    "{\"messages\": [{\"role\": \"user\", \"content\": \"Weather?\"}], \"max_tokens\": 200, \"temperature\": 0, "  \
    "\"tools\": [" WEATHER_TOOL "], \"parallel_tool_calls\": false, \"tool_choice\": " choice "%s}"
    char *reply = post(s.port, "/v1/chat/completions", "", "{\"messages\": [{\"role\": \"user\", \"content\": "
                       "\"Weather?\"}], \"max_tokens\": 4, \"temperature\": 0, \"tools\": [" WEATHER_TOOL "], "
                       "\"tool_choice\": \"none\"}");
    json_t *o;
    const json_t *choice = chat_reply(reply, &o);
    const char *content = json_string_value(json_object_get(json_object_get(choice, "message"), "content"));
    CHECK(content && !strcmp(content, "[TOOL_CALLS][TOOL_CALLS][TOOL_CALLS][TOOL_CALLS]"),
          "the model did not write its special token: %s", reply ? reply : "");
    json_decref(o);
    free(reply);
    free(one_weather_call_with_and_without_drafts(s.port, MARKER_BODY("\"auto\"")));
    char *request;
    if (asprintf(&request, MARKER_BODY("\"required\""), ", \"logprobs\": true, \"specdec\": {\"draft\": false}") >= 0) {
        reply = post(s.port, "/v1/chat/completions", "", request);
        choice = chat_reply(reply, &o);
        const json_t *first = json_array_get(json_object_get(json_object_get(choice, "logprobs"), "content"), 0);
        CHECK(!strcmp(json_string_value(json_object_get(first, "token")) ?: "", "[TOOL_CALLS]") &&
                  json_array_size(json_object_get(json_object_get(choice, "message"), "tool_calls")) == 1,
              "required: the first token is not [TOOL_CALLS] whole, or no call: %s", reply ? reply : "");
        json_decref(o);
        free(reply);
        free(request);
    }
#undef MARKER_BODY
    // a grammar naming a token the tokenizer lacks: 400, naming it
    reply = post(s.port, "/v1/chat/completions", "", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                 "\"max_tokens\": 2, \"grammar\": \"root ::= <[ARGS]> \\\"x\\\"\"}");
    CHECK(status_of(reply) == 400 && strstr(reply, "references the token [ARGS], which the tokenizer has not"),
          "a grammar naming a token the tokenizer lacks: %.300s", reply ? reply : "");
    free(reply);
    CHECK(stop_serving(&s, &log) == 0, "exit status: %s", log);
    free(log);
    remove_dir(dir);
#endif
}
