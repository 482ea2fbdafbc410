// test_request.c — the server's request layer (src/serve/request.c): one table of bodies, each with the status, the
// field named and a word of the message it must get; and what accepted bodies are read as.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "serve/request.h"

typedef struct {
    ApiKind kind;
    const char *body;
    int status;             // 0: accepted
    const char *param;      // the field the error names ("" for none)
    const char *needle;     // a part of the message
} Case;

#define C API_COMPLETIONS
#define CHAT API_CHAT
// the bodies most rows begin with, their fields after
#define PROMPT_HI "{\"prompt\": \"hi\", "
#define CHAT_HI "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
// a completions body refused for its one field, which the error names
#define REFUSED(field, value, needle) {C, PROMPT_HI "\"" field "\": " value "}", 400, field, needle}
static const Case cases[] = {
    // accepted, with OpenAI's "off" values of refused fields and unknown fields ignored
    {C, "{\"prompt\": \"hi\"}", 0, "", ""},
    {C, "{\"prompt\": [\"hi\"], \"n\": 1, \"best_of\": null, \"logprobs\": null, \"echo\": false}", 0, "", ""},
    {C, "{\"prompt\": [1, 2, 3], \"suffix\": \"\", \"presence_penalty\": 0, \"frequency_penalty\": 0.0}", 0, "", ""},
    {C, PROMPT_HI "\"typical_p\": 1, \"min_tokens\": 0, \"stop_token_ids\": [], \"length_penalty\": 1}", 0, "", ""},
    {CHAT, CHAT_HI "\"tools\": [], \"tool_choice\": \"none\", \"response_format\": {\"type\": \"text\"}, "
           "\"logit_bias\": {}, \"user\": \"x\", \"whatever\": [1]}", 0, "", ""},
    {CHAT, "{\"messages\": [{\"role\": \"assistant\", \"content\": null}, {\"role\": \"developer\", \"content\": "
           "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}]}", 0, "", ""},
    // malformed bodies
    {C, "", 400, "", "not valid JSON"},
    {C, "{\"prompt\": \"hi\"", 400, "", "not valid JSON"},
    {C, "[1, 2]", 400, "", "JSON object"},
    {C, "{\"prompt\": \"a\", \"prompt\": \"b\"}", 400, "", "duplicate"},
    {C, "{\"prompt\": \"\\u0000\"}", 400, "", "not valid JSON"},
    {C, "{\"prompt\": \"\xff\"}", 400, "", "not valid JSON"},
    // what specdec does not do
    REFUSED("n", "2", "n = 1"),
    REFUSED("best_of", "3", "best_of = 1"),
    // structured output: what does not convert or parse, named (docs/structured.md)
    {CHAT, CHAT_HI "\"response_format\": {\"type\": \"xml\"}}", 400, "response_format.type", "\"json_schema\""},
    {CHAT, CHAT_HI "\"response_format\": {\"type\": "
           "\"json_schema\", \"json_schema\": {\"name\": \"x\"}}}", 400, "response_format.json_schema.schema",
     "missing"},
    {CHAT, CHAT_HI "\"response_format\": {\"type\": "
           "\"json_schema\", \"json_schema\": {\"schema\": {\"not\": {}}}}}", 400, "response_format",
     "the keyword 'not' is not supported"},
    {CHAT, CHAT_HI "\"response_format\": {\"type\": "
           "\"json_schema\", \"json_schema\": {\"schema\": {\"$ref\": \"#/nowhere\"}}}}", 400, "response_format",
     "$ref '#/nowhere' is not a definition"},
    REFUSED("grammar", "\"root ::= [b-a]\"", "grammar:1:11: character range"),
    {C, PROMPT_HI "\"grammar\": \"root ::= \\\"a\\\"\", \"response_format\": {\"type\": \"json_object\"}}",
     400, "grammar", "give one of them"},
    {C, PROMPT_HI "\"json_schema\": {\"type\": \"object\", \"if\": {}}}", 400, "json_schema",
     "the keyword 'if' is not supported"},
    REFUSED("typical_p", "0.5", "typical sampling"),
    REFUSED("min_tokens", "4", "min_tokens"),
    REFUSED("guided_regex", "\"a+\"", "guided decoding"),
    REFUSED("ignore_eos", "true", "end-of-text"),
    REFUSED("logit_bias", "{\"1\": 5}", "logit bias"),
    REFUSED("echo", "true", "echo"),
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\", \"image_url\": {}}]}]}", 400,
     "messages[0].content[0].type", "text parts only"},
    // tools: accepted shapes, and hostile tools, choices and calls named
#define F(name) "{\"type\": \"function\", \"function\": {\"name\": \"" name "\"}}"
    {CHAT, CHAT_HI "\"tools\": [" F("a") ", " F("b.c-d") "], \"tool_choice\": {\"type\": \"function\", \"function\": "
              "{\"name\": \"b.c-d\"}}, \"parallel_tool_calls\": false}", 0, "", ""},
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"assistant\", \"content\": "
           "null, \"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"a\", "
           "\"arguments\": \"{\\\"x\\\": 1}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c1\", \"content\": "
           "\"42\"}], \"tools\": [" F("a") "], \"tool_choice\": \"required\"}", 0, "", ""},
    {CHAT, CHAT_HI "\"tools\": [{\"type\": \"function\"}]}", 400, "tools[0].function", "expected an object"},
    {CHAT, CHAT_HI "\"tools\": {}}", 400, "tools", "expected an array"},
    {CHAT, CHAT_HI "\"tools\": [" F("a b") "]}", 400, "tools[0].function.name", "expected 1 to 64"},
    {CHAT, CHAT_HI "\"tools\": [" F("\\u001b[31m") "]}", 400, "tools[0].function.name", "expected 1 to 64"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") ", " F("a") "]}", 400, "tools[1]", "a second function named \"a\""},
    {CHAT, CHAT_HI "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\", \"parameters\": 3}}]}", 400,
     "tools[0].function.parameters", "JSON Schema object"},
    {CHAT, CHAT_HI "\"tools\": [{\"type\": \"retrieval\"}]}", 400, "tools[0].type", "\"function\""},
    {C, PROMPT_HI "\"tools\": [" F("a") "]}", 400, "tools", "chat completions"},
    {CHAT, CHAT_HI "\"tool_choice\": \"auto\"}", 400, "tool_choice", "no tools are given"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"tool_choice\": \"always\"}", 400, "tool_choice", "\"required\""},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
              "\"zz\"}}}", 400, "tool_choice.function.name", "no tool is named \"zz\""},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"tool_choice\": {\"type\": \"function\"}}", 400, "tool_choice",
     "expected a string or"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"tool_choice\": \"required\", \"response_format\": {\"type\": "
              "\"json_object\"}}", 400, "tool_choice", "cannot both constrain"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"parallel_tool_calls\": 1}", 400, "parallel_tool_calls", "true or false"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"stream\": true, \"specdec\": {\"marks\": true}}", 400, "specdec.marks",
     "not with tools"},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"logprobs\": true, \"top_logprobs\": 2}", 0, "", ""},
    {CHAT, CHAT_HI "\"tools\": [" F("a") "], \"tool_choice\": \"none\", \"logprobs\": true}", 0, "", ""},
    {CHAT, "{\"messages\": [{\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": 7}]}", 400,
     "messages[0].tool_call_id", "expected a string"},
    // a tool message names the call it answers (OpenAI's API refuses one without); null is no id
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"tool\", \"content\": "
           "\"42\"}]}", 400, "messages[1].tool_call_id", "missing"},
    {CHAT, "{\"messages\": [{\"role\": \"tool\", \"content\": \"42\", \"tool_call_id\": null}]}", 400,
     "messages[0].tool_call_id", "missing"},
    // a tool message answers a call made before it (OpenAI's API refuses both as 400): after an assistant message
    // with tool_calls, or after another answer to it, and naming one of its calls
#define CALL(id) "{\"id\": \"" id "\", \"type\": \"function\", \"function\": {\"name\": \"a\", \"arguments\": \"{}\"}}"
#define CALLS "{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"assistant\", \"content\": null, " \
              "\"tool_calls\": [" CALL("c1") ", " CALL("c2") "]}"
#define ANSWER(id) "{\"role\": \"tool\", \"tool_call_id\": \"" id "\", \"content\": \"42\"}"
    {CHAT, "{\"messages\": [" CALLS ", " ANSWER("c2") ", " ANSWER("c1") "]}", 0, "", ""},
    {CHAT, "{\"messages\": [" ANSWER("c1") "]}", 400, "messages[0].role", "must follow an assistant message with "
                                                                           "tool_calls"},
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, " ANSWER("c1") "]}", 400, "messages[1].role",
     "must follow an assistant message with tool_calls"},
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"assistant\", \"content\": "
           "\"no call\"}, " ANSWER("c1") "]}", 400, "messages[2].role", "must follow an assistant message"},
    {CHAT, "{\"messages\": [" CALLS ", " ANSWER("c1") ", {\"role\": \"user\", \"content\": \"and?\"}, " ANSWER("c2")
           "]}", 400, "messages[4].role", "must follow an assistant message"},
    {CHAT, "{\"messages\": [" CALLS ", " ANSWER("c1") ", " ANSWER("c3") "]}", 400, "messages[3].tool_call_id",
     "messages[3].tool_call_id: \"c3\" is the id of none of the calls of messages[1]"},
    {CHAT, "{\"messages\": [" CALLS ", " ANSWER("\\u001b[2J") "]}", 400, "messages[2].tool_call_id",
     "\"\\x1B[2J\" is the id of none"},
#undef ANSWER
#undef CALLS
#undef CALL
    // every tool's parameters compile as a JSON Schema, whatever the template (as chat --tools): a $ref to nowhere,
    // a keyword the converter does not take
    {CHAT, CHAT_HI "\"tools\": [" F("a") ", {\"type\": \"function\", \"function\": {\"name\": \"b\", \"parameters\": "
              "{\"type\": \"object\", \"properties\": {\"x\": {\"$ref\": \"#/nowhere\"}}}}}]}", 400,
     "tools[1].function.parameters", "tools[1] \"b\": parameters: at /properties/x: $ref '#/nowhere' is not a definition"},
    {CHAT, CHAT_HI "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a\", \"parameters\": {\"not\": {}}}}], "
              "\"tool_choice\": \"none\"}", 400, "tools[0].function.parameters", "the keyword 'not' is not supported"},
    {CHAT, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"1\"}]}]}", 400,
     "messages[0].tool_calls[0]", "expected {\"type\": \"function\""},
    {CHAT, "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"a\", "
           "\"arguments\": \"{oops\"}}]}]}", 400, "messages[0].tool_calls[0].function.arguments",
     "a JSON object in the string"},
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": [{\"function\": "
           "{\"name\": \"a\", \"arguments\": {}}}]}]}", 400, "messages[0].tool_calls", "only an assistant's"},
#undef F
    // wrong types and values out of range
    {C, "{}", 400, "prompt", "missing"},
    {C, "{\"prompt\": 3}", 400, "prompt", "expected a string"},
    {C, "{\"prompt\": [\"a\", \"b\"]}", 400, "prompt", "several prompts"},
    {C, "{\"prompt\": [1, -2]}", 400, "prompt[1]", "token id"},
    {C, "{\"prompt\": [1, 2.5]}", 400, "prompt[1]", "token id"},
    REFUSED("model", "7", "string"),
    REFUSED("max_tokens", "0", "integer in [1, "),
    REFUSED("max_tokens", "\"5\"", "integer"),
    REFUSED("max_tokens", "1e3", "integer"),
    {CHAT, CHAT_HI "\"max_completion_tokens\": 99999999}", 400, "max_completion_tokens", "integer"},
    // max_tokens beside max_completion_tokens (its newer name): one limit, given once or twice alike
    {CHAT, CHAT_HI "\"max_tokens\": 7, \"max_completion_tokens\": 7}", 0, "", ""},
    {CHAT, CHAT_HI "\"max_tokens\": null, \"max_completion_tokens\": 7}", 0, "", ""},
    {CHAT, CHAT_HI "\"max_tokens\": 9, \"max_completion_tokens\": 7}", 400, "max_tokens",
     "max_tokens and max_completion_tokens: two different limits (9 and 7)"},
    {C, PROMPT_HI "\"max_completion_tokens\": 16, \"max_tokens\": 64}", 400, "max_tokens",
     "give one of them, or the same value in both"},
    REFUSED("temperature", "2.5", "[0, 2]"),
    REFUSED("temperature", "-1", "[0, 2]"),
    REFUSED("temperature", "\"hot\"", "number"),
    REFUSED("top_p", "0", "(0, 1]"),
    REFUSED("top_p", "1.5", "(0, 1]"),
    REFUSED("top_p", "1e-300", "as a 32-bit float"),
    {C, PROMPT_HI "\"top_p\": 1e-300, \"stream\": true}", 400, "top_p", "as a 32-bit float"},
    REFUSED("temperature", "1e300", "[0, 2]"),
    REFUSED("min_p", "1.5", "[0, 1]"),
    REFUSED("cache_salt", "5", "string"),
    REFUSED("min_p", "\"0.1\"", "number"),
    REFUSED("repetition_penalty", "0", "[0.01, 100]"),
    REFUSED("repetition_penalty", "1e300", "[0.01, 100]"),
    REFUSED("presence_penalty", "2.5", "[-2, 2]"),
    REFUSED("frequency_penalty", "-3", "[-2, 2]"),
    REFUSED("top_k", "-1", "integer"),
    REFUSED("seed", "-5", "integer in [0, "),
    REFUSED("stop", "5", "string"),
    {C, PROMPT_HI "\"stop\": [\"a\", 5]}", 400, "stop[1]", "string"},
    {C, PROMPT_HI "\"stop\": [\"a\", \"\"]}", 400, "stop[1]", "empty"},
    {C, PROMPT_HI "\"stop\": [\"a\", \"b\", \"c\", \"d\", \"e\"]}", 400, "stop", "at most 4"},
    REFUSED("stream", "\"yes\"", "true or false"),
    REFUSED("stream_options", "1", "object"),
    {C, PROMPT_HI "\"stream_options\": {\"include_usage\": true}}", 400, "stream_options",
     "only with \"stream\": true"},
    {C, PROMPT_HI "\"stream\": false, \"stream_options\": null}", 0, "", ""},
    {C, PROMPT_HI "\"stream_options\": {}}", 0, "", ""},
    {C, PROMPT_HI "\"stream\": true, \"stream_options\": {\"include_usage\": 1}}", 400,
     "stream_options.include_usage", "true or false"},
    {CHAT, "{}", 400, "messages", "non-empty list"},
    {CHAT, "{\"messages\": []}", 400, "messages", "non-empty list"},
    {CHAT, "{\"messages\": [\"hi\"]}", 400, "messages[0]", "object"},
    {CHAT, "{\"messages\": [{\"content\": \"hi\"}]}", 400, "messages[0].role", "string"},
    {CHAT, "{\"messages\": [{\"role\": \"user\\u001b[31m\", \"content\": \"hi\"}]}", 400, "messages[0].role",
     "user\\x1B[31m"},
    {CHAT, "{\"messages\": [{\"role\": \"user\"}]}", 400, "messages[0].content", "string or a list"},
    {CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": 1}]}]}", 400,
     "messages[0].content[0].text", "string"},
    // logprobs: completions' an integer k, chat's a boolean with top_logprobs k, k in [0, 20]
    REFUSED("logprobs", "21", "integer in [0, 20]"),
    REFUSED("logprobs", "-1", "integer in [0, 20]"),
    REFUSED("logprobs", "true", "integer in [0, 20]"),
    REFUSED("logprobs", "2.5", "integer in [0, 20]"),
    REFUSED("logprobs", "1e9", "integer in [0, 20]"),
    {C, PROMPT_HI "\"logprobs\": 2, \"top_logprobs\": 2}", 400, "top_logprobs", "chat completions"},
    {CHAT, CHAT_HI "\"logprobs\": 3}", 400, "logprobs", "true or false"},
    {CHAT, CHAT_HI "\"top_logprobs\": 3}", 400, "top_logprobs", "needs \"logprobs\": true"},
    {CHAT, CHAT_HI "\"logprobs\": false, \"top_logprobs\": 0}", 400, "top_logprobs", "needs \"logprobs\": true"},
    {CHAT, CHAT_HI "\"logprobs\": true, \"top_logprobs\": 21}", 400, "top_logprobs", "integer in [0, 20]"},
    {CHAT, CHAT_HI "\"logprobs\": true, \"top_logprobs\": \"5\"}", 400, "top_logprobs", "integer in [0, 20]"},
    REFUSED("prompt_logprobs", "1", "of the prompt"),
    {CHAT, CHAT_HI "\"logprobs\": false, \"top_logprobs\": null}", 0, "", ""},
    // specdec's extension
    {C, PROMPT_HI "\"specdec\": null, \"stream\": true}", 0, "", ""},
    {C, PROMPT_HI "\"specdec\": {\"marks\": false, \"draft\": null}}", 0, "", ""},
    REFUSED("specdec", "true", "object"),
    {C, PROMPT_HI "\"specdec\": {\"marks\": 1}, \"stream\": true}", 400, "specdec.marks", "true or false"},
    {C, PROMPT_HI "\"specdec\": {\"draft\": \"no\"}}", 400, "specdec.draft", "true or false"},
    {C, PROMPT_HI "\"specdec\": {\"marks\": true}}", 400, "specdec.marks", "\"stream\": true"},
    {CHAT, CHAT_HI "\"specdec\": {\"gamma\": 3}}", 400, "specdec.gamma", "\"marks\" and \"draft\" only"},
    {C, PROMPT_HI "\"specdec\": {\"\\u001b[31m\": 3}}", 400, "specdec.\\x1B[31m", "specdec.\\x1B[31m"},
};

TEST(serve_request_table) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const Case *c = &cases[i];
        Request req;
        ApiError e = {0};
        const int rc = request_parse(&req, c->kind, c->body, strlen(c->body), &e);
        if (c->status == 0) {
            CHECK(rc == 0, "%s: refused: %s", c->body, e.err.msg);
        } else {
            CHECK(rc == -1 && e.status == c->status, "%s: rc %d status %d, expected %d", c->body, rc, e.status,
                  c->status);
            CHECK(strcmp(e.param, c->param) == 0, "%s: param \"%s\", expected \"%s\"", c->body, e.param, c->param);
            CHECK(strstr(e.err.msg, c->needle), "%s: message \"%s\" lacks \"%s\"", c->body, e.err.msg, c->needle);
            for (const char *p = e.err.msg; *p; p++)
                CHECK((unsigned char)*p >= 0x20 && *p != 0x7f, "%s: a control byte in \"%s\"", c->body, e.err.msg);
        }
        request_free(&req);
    }
}

TEST(serve_request_reads_the_fields) {
    const char *body = "{\"model\": \"m\", \"prompt\": \"say hi\", \"max_completion_tokens\": 7, "
                       "\"temperature\": 0.5, \"top_p\": 0.9, \"top_k\": 40, \"seed\": 12345678901, \"stop\": "
                       "[\"\\n\", \"end\"], \"stream\": true, \"stream_options\": {\"include_usage\": true}, \"min_p\": "
                       "0.05, \"repetition_penalty\": 1.1, \"presence_penalty\": -0.5, \"frequency_penalty\": 1.5, "
                       "\"cache_salt\": \"s1\"}";
    Request req;
    ApiError e;
    CHECK(request_parse(&req, API_COMPLETIONS, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(strcmp(req.model, "m") == 0 && strcmp(req.prompt, "say hi") == 0 && !req.prompt_ids, "model, prompt");
    CHECK(req.max_tokens == 7, "max_completion_tokens: %d", req.max_tokens);
    CHECK(req.sampling.temperature == 0.5f && req.sampling.top_p == 0.9f && req.sampling.top_k == 40 &&
              req.sampling.min_p == 0.05f, "sampling");
    CHECK(req.penalties.repetition == 1.1f && req.penalties.presence == -0.5f && req.penalties.frequency == 1.5f,
          "penalties");
    CHECK(req.has_seed && req.seed == 12345678901ull, "seed");
    CHECK(req.n_stop == 2 && strcmp(req.stop[0], "\n") == 0 && strcmp(req.stop[1], "end") == 0, "stop");
    CHECK(req.stream && req.include_usage, "stream");
    CHECK(req.cache_salt && strcmp(req.cache_salt, "s1") == 0, "cache_salt");
    CHECK(!req.marks && !req.plain, "no marks, drafting: the defaults");
    CHECK(!req.logprobs, "no logprobs: the default");
    request_free(&req);

    body = "{\"prompt\": \"hi\", \"max_tokens\": 5, \"max_completion_tokens\": 5}";
    CHECK(request_parse(&req, API_COMPLETIONS, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.max_tokens == 5, "max_tokens and max_completion_tokens alike: %d", req.max_tokens);
    request_free(&req);

    body = "{\"prompt\": \"hi\", \"logprobs\": 0}";
    CHECK(request_parse(&req, API_COMPLETIONS, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.logprobs && req.top_logprobs == 0, "logprobs 0: the tokens' own");
    request_free(&req);

    body = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"logprobs\": true, \"top_logprobs\": 20}";
    CHECK(request_parse(&req, API_CHAT, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.logprobs && req.top_logprobs == 20, "chat's logprobs and top_logprobs: %d", req.top_logprobs);
    request_free(&req);

    body = "{\"prompt\": \"hi\", \"stream\": true, \"specdec\": {\"marks\": true, \"draft\": false}}";
    CHECK(request_parse(&req, API_COMPLETIONS, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.marks && req.plain, "specdec.marks, specdec.draft false");
    request_free(&req);

    body = "{\"prompt\": [5, 0, 7], \"stop\": \"x\"}";
    CHECK(request_parse(&req, API_COMPLETIONS, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.n_prompt_ids == 3 && req.prompt_ids[0] == 5 && req.prompt_ids[2] == 7 && !req.prompt, "ids");
    CHECK(req.n_stop == 1 && strcmp(req.stop[0], "x") == 0, "one stop string");
    CHECK(req.max_tokens == 0 && !req.has_seed && !req.stream, "defaults");
    CHECK(req.sampling.temperature == 1.0f && req.sampling.top_p == 1.0f && req.sampling.top_k == 0 &&
              req.sampling.min_p == 0.0f && !penalties_on(&req.penalties),
          "OpenAI's sampling defaults");
    request_free(&req);

    body = "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": "
           "[{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"bc\"}]}, {\"role\": "
           "\"assistant\"}]}";
    CHECK(request_parse(&req, API_CHAT, body, strlen(body), &e) == 0, "refused: %s", e.err.msg);
    CHECK(req.n_messages == 3, "%d messages", req.n_messages);
    CHECK(req.n_messages == 3 && strcmp(req.messages[0].role, "system") == 0 &&
              strcmp(req.messages[1].content, "abc") == 0 && strcmp(req.messages[2].content, "") == 0,
          "messages");
    request_free(&req);
}

// response_format json_object and json_schema (strict or not), and llama-server's grammar and json_schema (beside a
// grammar "", not given): each a grammar.
TEST(serve_request_reads_structured_output) {
    static const char *const bodies[] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"response_format\": {\"type\": "
        "\"json_object\"}}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"response_format\": {\"type\": "
        "\"json_schema\", \"json_schema\": {\"name\": \"n\", \"strict\": true, \"schema\": {\"type\": \"object\", "
        "\"properties\": {\"a\": {\"type\": \"integer\"}}, \"required\": [\"a\"], \"additionalProperties\": false}}}}",
        "{\"prompt\": \"hi\", \"grammar\": \"root ::= \\\"yes\\\" | \\\"no\\\"\"}",
        "{\"prompt\": \"hi\", \"json_schema\": {\"enum\": [1, 2]}, \"grammar\": \"\"}",
    };
    static const char *const accepted[] = {"{\"k\": [1]}", "{\"a\": 3}", "no", "2"};
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++) {
        Request req;
        ApiError e;
        const ApiKind kind = i < 2 ? API_CHAT : API_COMPLETIONS;
        CHECK(request_parse(&req, kind, bodies[i], strlen(bodies[i]), &e) == 0, "refused: %s", e.err.msg);
        CHECK(req.grammar && grammar_recognises(req.grammar, accepted[i], strlen(accepted[i])),
              "body %zu: %s not recognised", i, accepted[i]);
        request_free(&req);
    }
}

TEST(serve_error_json_has_openai_shape) {
    ApiError e;
    api_error(&e, 400, "unsupported_parameter", "n", "n: \"%s\"", "a\nb");
    char *text = api_error_json(&e);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je), *error = json_object_get(root, "error");
    CHECK(json_is_object(error), "no error object: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(error, "message")), "n: \"a\\nb\"") == 0, "message: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(error, "type")), "invalid_request_error") == 0, "type: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(error, "param")), "n") == 0, "param: %s", text);
    CHECK(strcmp(json_string_value(json_object_get(error, "code")), "unsupported_parameter") == 0, "code: %s", text);
    json_decref(root);
    free(text);
    api_error(&e, 503, NULL, NULL, "busy");
    text = api_error_json(&e);
    root = json_loads(text, 0, &je);
    error = json_object_get(root, "error");
    CHECK(json_is_null(json_object_get(error, "param")) && json_is_null(json_object_get(error, "code")) &&
              strcmp(json_string_value(json_object_get(error, "type")), "server_error") == 0,
          "null param and code, server_error: %s", text);
    json_decref(root);
    free(text);
}
