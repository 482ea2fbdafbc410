// test_api.c — the server's pure pieces: stop strings held back and cut (engine.c's stop_scan, against a plain
// search on random texts), the key comparison, and the response objects' shape (api.c).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "serve/api.h"
#include "serve/server.h"

TEST(serve_stop_scan_table) {
    char *stops[] = {"END", "\n\n", "é"};
    const struct {
        const char *text;
        size_t from, want;
        bool stopped;
    } cases[] = {
        {"hello", 0, 5, false},           // nothing begins a stop string
        {"hello E", 0, 6, false},         // "E" may begin END: held back
        {"hello EN", 0, 6, false},
        {"hello END", 0, 6, true},        // cut before it
        {"a\n", 0, 1, false},             // "\n" may begin "\n\n"
        {"a\n\nEND", 0, 1, true},         // the stop string that ends first wins
        {"xEND\n\n", 0, 1, true},
        {"xENDyEND", 4, 5, true},         // only from `from` on (what was sent could not hold one)
        {"caf\xc3", 0, 3, false},         // half of é
        {"caf\xc3\xa9!", 0, 3, true},
        {"", 0, 0, false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool stopped;
        const size_t got = stop_scan(cases[i].text, strlen(cases[i].text), cases[i].from, stops, 3, &stopped);
        CHECK(got == cases[i].want && stopped == cases[i].stopped, "case %zu: %zu %d, expected %zu %d", i, got,
              stopped, cases[i].want, cases[i].stopped);
    }
}

// Random texts over a small alphabet, fed in random pieces as the engine feeds them: what is handed on is always a
// prefix of the answer, and at the end it is the answer, found by a plain search: the text up to the stop string
// that ends first — however the text was cut into pieces.
TEST(serve_stop_scan_random) {
    for (int round = 0; round < 2000; round++) {
        char text[40], stop_a[4], stop_b[4];
        const int n = test_rand_int(0, 39);
        for (int i = 0; i < n; i++) text[i] = (char)('a' + test_rand_int(0, 2));
        text[n] = '\0';
        for (int i = 0, la = test_rand_int(1, 3), lb = test_rand_int(1, 3); i < 4; i++) {
            stop_a[i] = i < la ? (char)('a' + test_rand_int(0, 2)) : '\0';
            stop_b[i] = i < lb ? (char)('a' + test_rand_int(0, 2)) : '\0';
        }
        char *stops[] = {stop_a, stop_b};
        size_t want = (size_t)n;  // where the stop string that ends first begins (the longer of two that end together)
        bool hit = false;
        for (int end = 1; end <= n && !hit; end++)
            for (int k = 0; k < 2; k++) {
                const int len = (int)strlen(stops[k]), start = end - len;
                if (start >= 0 && strncmp(text + start, stops[k], (size_t)len) == 0 && (!hit || (size_t)start < want)) {
                    want = (size_t)start;
                    hit = true;
                }
            }
        size_t sent = 0, len = 0;
        bool stopped = false;
        while (len < (size_t)n && !stopped) {
            len += (size_t)test_rand_int(1, n - (int)len);
            size_t final = stop_scan(text, len, sent, stops, 2, &stopped);
            if (len == (size_t)n && !stopped) final = len;
            CHECK(final >= sent && final <= want, "round %d: \"%s\" stops \"%s\" \"%s\": handed on %zu, answer %zu",
                  round, text, stop_a, stop_b, final, want);
            sent = final;
        }
        CHECK(sent == want && stopped == hit, "round %d: \"%s\" stops \"%s\" \"%s\": %zu (stopped %d), "
              "expected %zu", round, text, stop_a, stop_b, sent, stopped, want);
    }
}

TEST(serve_same_secret) {
    CHECK(same_secret("sekrit", "sekrit"), "equal");
    CHECK(!same_secret("sekriT", "sekrit") && !same_secret("sekri", "sekrit") && !same_secret("sekritt", "sekrit"),
          "one byte off, shorter, longer");
    CHECK(!same_secret("", "sekrit") && same_secret("", ""), "empty");
}

static json_t *parse_json(const char *text) {
    json_error_t e;
    json_t *v = text ? json_loads(text, 0, &e) : NULL;
    CHECK(v, "not JSON: %s", text ? text : "(null)");
    return v;
}

TEST(serve_response_objects) {
    EngineResult result = {.prompt_tokens = 3, .completion_tokens = 4, .finish_reason = "stop", .seed = 9,
                           .stats = {.generated = 4, .rounds = 2, .drafted = 5, .accepted = 3}};
    const ApiResponse chat = {.kind = API_CHAT, .id = "chatcmpl-1", .created = 7, .model = "m"};
    char *text = api_completion_json(&chat, "hi\n", 3, &result);
    json_t *o = parse_json(text), *choice = json_array_get(json_object_get(o, "choices"), 0);
    CHECK(strcmp(json_string_value(json_object_get(o, "object")), "chat.completion") == 0, "object: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(choice, "message"), "content")), "hi\n") == 0 &&
              strcmp(json_string_value(json_object_get(json_object_get(choice, "message"), "role")), "assistant") == 0,
          "message: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(choice, "finish_reason")), "stop") == 0, "finish: %s", text);
    CHECK(json_integer_value(json_object_get(json_object_get(o, "usage"), "total_tokens")) == 7, "usage: %s", text);
    const json_t *ext = json_object_get(o, "specdec");
    CHECK(json_integer_value(json_object_get(ext, "drafted")) == 5 &&
              json_integer_value(json_object_get(ext, "accepted")) == 3 &&
              json_integer_value(json_object_get(ext, "target_calls")) == 2 &&
              json_real_value(json_object_get(ext, "tokens_per_target_call")) == 2.0 &&
              json_integer_value(json_object_get(ext, "seed")) == 9,
          "extension: %s", text);
    json_decref(o);
    free(text);

    const ApiResponse completion = {.kind = API_COMPLETIONS, .id = "cmpl-2", .created = 7, .model = "m"};
    text = api_chunk_sse(&completion, "ab", 2, true);
    CHECK(strncmp(text, "data: {", 7) == 0 && strcmp(text + strlen(text) - 2, "\n\n") == 0, "an event: %s", text);
    o = parse_json(text + 6);
    choice = json_array_get(json_object_get(o, "choices"), 0);
    CHECK(strcmp(json_string_value(json_object_get(choice, "text")), "ab") == 0 &&
              json_is_null(json_object_get(choice, "finish_reason")),
          "a chunk: %s", text);
    json_decref(o);
    free(text);

    text = api_stream_end_sse(&chat, &result, true);
    const char *second = text ? strstr(text + 1, "data: {") : NULL, *done = text ? strstr(text, "data: [DONE]\n\n") : NULL;
    CHECK(second && done && done[14] == '\0', "the end: a chunk, the usage, [DONE]: %s", text ? text : "(null)");
    if (second && done) {
        char *first = strndup(text + 6, (size_t)(second - text - 6)), *usage = strndup(second + 6, (size_t)(done - second - 6));
        o = parse_json(first);
        choice = json_array_get(json_object_get(o, "choices"), 0);
        CHECK(strcmp(json_string_value(json_object_get(choice, "finish_reason")), "stop") == 0 &&
                  json_object_size(json_object_get(choice, "delta")) == 0 && json_object_get(o, "specdec"),
              "the last chunk: finish reason, an empty delta, the extension: %s", first);
        json_decref(o);
        o = parse_json(usage);
        CHECK(json_array_size(json_object_get(o, "choices")) == 0 &&
                  json_integer_value(json_object_get(json_object_get(o, "usage"), "completion_tokens")) == 4,
              "the usage chunk: %s", usage);
        json_decref(o);
        free(first);
        free(usage);
    }
    free(text);
    text = api_stream_end_sse(&completion, &result, false);
    CHECK(text && !strstr(text, "\"usage\"") && strstr(text, "data: [DONE]\n\n"), "no usage unless asked: %s", text ? text : "");
    free(text);
}
