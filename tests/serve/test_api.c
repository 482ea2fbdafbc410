// test_api.c — the server's pure pieces: the key comparison and the response objects' shape (api.c).
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "serve/api.h"
#include "serve/server.h"

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
    char *text = api_completion_json(&chat, "hi\n", 3, &result, NULL);
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
    text = api_chunk_sse(&completion, "ab", 2, true, NULL, NULL);
    CHECK(strncmp(text, "data: {", 7) == 0 && strcmp(text + strlen(text) - 2, "\n\n") == 0, "an event: %s", text);
    o = parse_json(text + 6);
    choice = json_array_get(json_object_get(o, "choices"), 0);
    CHECK(strcmp(json_string_value(json_object_get(choice, "text")), "ab") == 0 &&
              json_is_null(json_object_get(choice, "finish_reason")),
          "a chunk: %s", text);
    json_decref(o);
    free(text);

    // With marks: each mark's kind and text, and the rounds finished, as the extension.
    const TextMark marks[] = {{TOKEN_ACCEPTED, "a", 1}, {TOKEN_REJECTED, "x\n", 2}, {TOKEN_RESAMPLED, "b", 1}};
    const RoundOutcome round = {.gamma = 3, .width = 1, .drafted = 3, .accepted = 1, .committed = 2};
    text = api_chunk_sse(&completion, "ab", 2, false, &(TextMarks){.marks = marks, .n_marks = 3, .rounds = &round,
                                                                     .n_rounds = 1}, NULL);
    o = parse_json(text + 6);
    const json_t *ms = json_object_get(json_object_get(o, "specdec"), "marks");
    const json_t *r0 = json_array_get(json_object_get(json_object_get(o, "specdec"), "rounds"), 0);
    CHECK(json_array_size(ms) == 3 &&
              strcmp(json_string_value(json_object_get(json_array_get(ms, 1), "kind")), "rejected") == 0 &&
              strcmp(json_string_value(json_object_get(json_array_get(ms, 1), "text")), "x\n") == 0 &&
              strcmp(json_string_value(json_object_get(json_array_get(ms, 2), "kind")), "resampled") == 0,
          "the marks: %s", text);
    CHECK(json_integer_value(json_object_get(r0, "gamma")) == 3 && json_integer_value(json_object_get(r0, "tokens")) == 2
              && json_integer_value(json_object_get(r0, "accepted")) == 1,
          "the round: %s", text);
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
