// tool_calls.c — replies read back into OpenAI tool calls: the Hermes, Mistral and Llama 3 formats (tool_calls.h).
#include <ctype.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "chat/tool_calls.h"
#include "grammar/json_schema.h"
#include "grammar/lazy.h"
#include "grammar/text.h"
#include "tokenizer/tokenizer.h"

#define HERMES_OPEN "<tool_call>"
#define HERMES_CLOSE "</tool_call>"
#define MISTRAL_OPEN "[TOOL_CALLS]"
#define MISTRAL_ARGS "[ARGS]"
#define LLAMA3_OPEN "<|python_tag|>"

ToolFormat tool_format_of_template(const char *source) {
    if (strstr(source, HERMES_OPEN)) return TOOL_FORMAT_HERMES;
    if (strstr(source, MISTRAL_OPEN))
        return strstr(source, MISTRAL_ARGS) ? TOOL_FORMAT_MISTRAL_ARGS : TOOL_FORMAT_MISTRAL;
    if (strstr(source, LLAMA3_OPEN) || (strstr(source, "\"parameters\"") && strstr(source, "ipython")))
        return TOOL_FORMAT_LLAMA3;
    return TOOL_FORMAT_NONE;
}

const char *tool_format_name(ToolFormat f) {
    static const char *const names[] = {"none", "hermes", "mistral", "llama3", "mistral-args"};
    return names[f];
}

const char *tool_format_opening(ToolFormat f) {
    static const char *const openings[] = {"", HERMES_OPEN, MISTRAL_OPEN, LLAMA3_OPEN, MISTRAL_OPEN};
    return openings[f];
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t skip_space(const char *s, size_t i, size_t len) {
    while (i < len && is_space(s[i])) i++;
    return i;
}

// Whether s[i..len) begins with marker.
static bool at_marker(const char *s, size_t i, size_t len, const char *marker) {
    return len - i >= strlen(marker) && memcmp(s + i, marker, strlen(marker)) == 0;
}

// The first occurrence of needle in s[0..len), or len.
static size_t find(const char *s, size_t len, const char *needle) {
    const char *p = memmem(s, len, needle, strlen(needle));
    return p ? (size_t)(p - s) : len;
}

// One JSON value at s[*i..len) (JSON_DISABLE_EOF_CHECK: what follows is left), *i moved past it; NULL if none.
static json_t *read_json(const char *s, size_t *i, size_t len) {
    json_error_t jerr;
    json_t *v = json_loadb(s + *i, len - *i, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
    if (v) *i += (size_t)jerr.position;
    return v;
}

// Appends {"name", "arguments": compact JSON} from a call object holding a string name and an object under one of
// the argument keys; -1 when it holds no such pair.
static int append_call(json_t *calls, const json_t *call, const char *args_key, const char *other_key) {
    const json_t *name = json_object_get(call, "name"), *args = json_object_get(call, args_key);
    if (!args && other_key) args = json_object_get(call, other_key);
    if (!json_is_string(name) || json_string_length(name) == 0 || !json_is_object(args)) return -1;
    char *text = json_dumps(args, JSON_COMPACT);
    if (!text) return -1;
    json_array_append_new(calls, json_pack("{s:O, s:s}", "name", name, "arguments", text));
    free(text);
    return 0;
}

// Hermes: (<tool_call> JSON </tool_call> whitespace)+ to the end; the last closing tag may be missing.
static int parse_hermes(json_t *calls, const char *s, size_t i, size_t len) {
    while (i < len) {
        if (!at_marker(s, i, len, HERMES_OPEN)) return -1;
        i = skip_space(s, i + strlen(HERMES_OPEN), len);
        json_t *call = read_json(s, &i, len);
        int rc = json_is_object(call) ? append_call(calls, call, "arguments", "parameters") : -1;
        json_decref(call);
        if (rc) return -1;
        i = skip_space(s, i, len);
        if (at_marker(s, i, len, HERMES_CLOSE)) i = skip_space(s, i + strlen(HERMES_CLOSE), len);
        else if (i < len) return -1;
    }
    return 0;
}

// Appends the call {"name": s[name..name_end), "arguments": args}; -1 when args is no object.
static int append_named_call(json_t *calls, const char *s, size_t name, size_t name_end, const json_t *args) {
    json_t *call = json_pack("{s:s%, s:O}", "name", s + name, name_end - name, "arguments", args);
    int rc = call ? append_call(calls, call, "arguments", NULL) : -1;
    json_decref(call);
    return rc;
}

// The end of the run of letters, digits and `also` characters that begins at s[i]: a function's name (OpenAI's
// characters, also "_.-"), a Python identifier (also "_").
static size_t name_end(const char *s, size_t i, size_t len, const char *also) {
    while (i < len && (isalnum((unsigned char)s[i]) || (s[i] && strchr(also, s[i])))) i++;
    return i;
}

// Mistral's newer form (its tokenizers from v11): ([TOOL_CALLS] NAME [CALL_ID]ID? [ARGS] {...})+, then only
// whitespace; s[i] is the first [TOOL_CALLS].
static int parse_mistral_named(json_t *calls, const char *s, size_t i, size_t len) {
    do {
        const size_t name = i + strlen(MISTRAL_OPEN), end = name_end(s, name, len, "_.-");
        i = end;
        if (at_marker(s, i, len, "[CALL_ID]")) i = name_end(s, i + strlen("[CALL_ID]"), len, "");
        if (end == name || !at_marker(s, i, len, MISTRAL_ARGS)) return -1;
        i += strlen(MISTRAL_ARGS);
        json_t *args = read_json(s, &i, len);
        const int rc = append_named_call(calls, s, name, end, args);
        json_decref(args);
        if (rc) return -1;
        i = skip_space(s, i, len);
    } while (at_marker(s, i, len, MISTRAL_OPEN));
    return i == len ? 0 : -1;
}

// Mistral: [TOOL_CALLS] then a JSON list of calls (or one call), then only whitespace; or the newer form.
static int parse_mistral(json_t *calls, const char *s, size_t i, size_t len) {
    const size_t start = i;
    i = skip_space(s, i + strlen(MISTRAL_OPEN), len);
    if (i < len && s[i] != '[' && s[i] != '{') return parse_mistral_named(calls, s, start, len);
    json_t *v = read_json(s, &i, len);
    int rc = v && skip_space(s, i, len) == len ? 0 : -1;
    if (rc == 0 && json_is_object(v)) rc = append_call(calls, v, "arguments", NULL);
    else if (rc == 0 && json_is_array(v) && json_array_size(v) > 0)
        for (size_t k = 0; rc == 0 && k < json_array_size(v); k++)
            rc = json_is_object(json_array_get(v, k)) ? append_call(calls, json_array_get(v, k), "arguments", NULL) : -1;
    else rc = -1;
    json_decref(v);
    return rc;
}

// Llama 3.1's built-in tools after <|python_tag|> (its model card; llama-stack reads them so): NAME.call(KEY=JSON,
// ...) — brave_search.call(query="..."), wolfram_alpha.call(query="...") — then only whitespace; any other text is
// code for code_interpreter, {"code": the text, its trailing whitespace dropped; text with a NUL byte or invalid
// UTF-8 is no code}. s[i] follows the tag and its space.
static int parse_python_tag(json_t *calls, const char *s, size_t i, size_t len) {
    const size_t name = i, end = name_end(s, i, len, "_");
    size_t k = skip_space(s, end, len);
    if (end > name && at_marker(s, k, len, ".call(")) {  // a built-in tool's call
        json_t *args = json_object();
        for (k = skip_space(s, k + strlen(".call("), len); args && k < len && s[k] != ')';) {
            const size_t key = k, key_end = name_end(s, k, len, "_");
            k = skip_space(s, key_end, len);
            if (key_end == key || k >= len || s[k] != '=') break;
            k = skip_space(s, k + 1, len);
            json_t *value = read_json(s, &k, len);
            if (!value) break;
            char *key_text = strndup(s + key, key_end - key);
            json_object_set_new(args, key_text ? key_text : "", value);
            free(key_text);
            k = skip_space(s, k, len);
            if (k < len && s[k] == ',') k = skip_space(s, k + 1, len);
        }
        const bool closed = k < len && s[k] == ')' && skip_space(s, k + 1, len) == len;
        const int rc = closed ? append_named_call(calls, s, name, end, args) : -1;
        json_decref(args);
        return rc;
    }
    size_t code_end = len;
    while (code_end > i && is_space(s[code_end - 1])) code_end--;
    if (code_end == i || memchr(s + i, '\0', code_end - i)) return -1;  // (a NUL byte: not code; JSON's \u0000)
    json_t *args = json_pack("{s:s%}", "code", s + i, code_end - i);
    const int rc = args ? append_named_call(calls, "code_interpreter", 0, strlen("code_interpreter"), args) : -1;
    json_decref(args);
    return rc;
}

// Llama 3: [<|python_tag|>] a call object, then more separated by ';' or whitespace, to the end; or after the tag a
// built-in tool's call or code (parse_python_tag).
static int parse_llama3(json_t *calls, const char *s, size_t i, size_t len) {
    if (at_marker(s, i, len, LLAMA3_OPEN)) {
        i = skip_space(s, i + strlen(LLAMA3_OPEN), len);
        if (i < len && s[i] != '{') return parse_python_tag(calls, s, i, len);
    }
    do {
        if (i >= len || s[i] != '{') return -1;
        json_t *call = read_json(s, &i, len);
        int rc = json_is_object(call) ? append_call(calls, call, "parameters", "arguments") : -1;
        json_decref(call);
        if (rc) return -1;
        i = skip_space(s, i, len);
        if (i < len && s[i] == ';') i = skip_space(s, i + 1, len);
    } while (i < len);
    return 0;
}

json_t *tool_calls_parse(ToolFormat f, const char *reply, size_t len, size_t *content_len) {
    if (f == TOOL_FORMAT_MISTRAL_ARGS) f = TOOL_FORMAT_MISTRAL;  // (which reads both forms)
    size_t start = len;  // where the calls begin
    if (f == TOOL_FORMAT_HERMES) start = find(reply, len, HERMES_OPEN);
    else if (f == TOOL_FORMAT_MISTRAL) start = find(reply, len, MISTRAL_OPEN);
    else if (f == TOOL_FORMAT_LLAMA3) start = skip_space(reply, 0, len);  // Llama's reply is the call, whole
    if (start >= len) return NULL;
    json_t *calls = json_array();
    int rc = -1;
    if (calls && f == TOOL_FORMAT_HERMES) rc = parse_hermes(calls, reply, start, len);
    if (calls && f == TOOL_FORMAT_MISTRAL) rc = parse_mistral(calls, reply, start, len);
    if (calls && f == TOOL_FORMAT_LLAMA3) rc = parse_llama3(calls, reply, start, len);
    if (rc || json_array_size(calls) == 0) {
        json_decref(calls);
        return NULL;
    }
    while (start > 0 && is_space(reply[start - 1])) start--;
    *content_len = start;
    return calls;
}

// The length of the longest tail of s[0..len) that is a proper prefix of marker.
static size_t partial_marker_tail(const char *s, size_t len, const char *marker) {
    size_t m = strlen(marker);
    for (size_t k = m - 1 < len ? m - 1 : len; k > 0; k--)
        if (memcmp(s + len - k, marker, k) == 0) return k;
    return 0;
}

size_t tool_calls_content_prefix(ToolFormat f, const char *reply, size_t len) {
    if (f == TOOL_FORMAT_NONE) return len;
    if (f == TOOL_FORMAT_LLAMA3) {  // a call is the whole reply: held while it may still be one
        size_t i = skip_space(reply, 0, len);
        if (i == len || reply[i] == '{') return 0;
        size_t n = len - i < strlen(LLAMA3_OPEN) ? len - i : strlen(LLAMA3_OPEN);
        return memcmp(reply + i, LLAMA3_OPEN, n) == 0 ? 0 : len;
    }
    const char *marker = tool_format_opening(f);
    size_t at = find(reply, len, marker);
    size_t n = at < len ? at : len - partial_marker_tail(reply, len, marker);
    while (n > 0 && is_space(reply[n - 1])) n--;  // the content before calls ends without its whitespace
    return n;
}

// The schema of a call of one tool: {"name": its name, ARGS_KEY: its parameters}, both required.
static json_t *call_schema(const json_t *tool, const char *args_key) {
    const json_t *fn = json_object_get(tool, "function"), *params = json_object_get(fn, "parameters");
    json_t *args = json_is_object(params) ? json_incref((json_t *)params) : json_pack("{s:s}", "type", "object");
    return json_pack("{s:s, s:{s:{s:O}, s:o}, s:[s, s], s:b}", "type", "object", "properties", "name", "const",
                     json_object_get(fn, "name"), args_key, args, "required", "name", args_key,
                     "additionalProperties", 0);
}

// The GBNF reference to the marker's token (grammar.h: "<|python_tag|>", "<[TOOL_CALLS]>"), written in s, where tok
// holds the marker as an added token, special or not; else NULL (tok NULL: none).
static const char *marker_token(const Tokenizer *tok, const char *marker, char s[LAZY_TRIGGER_MAX + 3]) {
    if (!tok || !tokenizer_added(tok, marker)) return NULL;
    snprintf(s, LAZY_TRIGGER_MAX + 3, marker[0] == '[' ? "<%s>" : "%s", marker);
    return s;
}

// A marker as the grammars write it: the reference to its token where tok has one — the model writes that token, as
// its template's text encodes to it — else its text.
static void marker_gbnf(Text *t, const Tokenizer *tok, const char *marker) {
    char s[LAZY_TRIGGER_MAX + 3];
    const char *token = marker_token(tok, marker, s);
    if (token) text_add(t, "%s", token);
    else text_literal(t, marker, strlen(marker));
}

// The GBNF rules of `schema` (a JSON Schema; its reference taken), its start rule named `rule` (malloc'd); NULL with
// err.
static char *schema_rules(json_t *schema, const char *rule, Err *err) {
    char *text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
    json_decref(schema);
    char *rules = text ? json_schema_to_gbnf(text, strlen(text), "tools", err) : NULL, *out = NULL;
    free(text);
    if (rules && strncmp(rules, "root ::= ", 9) == 0 && asprintf(&out, "%s ::= %s", rule, rules + 9) < 0) out = NULL;
    if (rules && !out) err_fmt(err, "out of memory");
    free(rules);
    return out;
}

// Whether the tool is the one named `name` (NULL: any).
static bool tool_chosen(const json_t *tool, const char *name) {
    const char *its = json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
    return !name || (its && strcmp(its, name) == 0);
}

// The rule `call` in the JSON formats: an object {"name": the tool's name, ARGS_KEY: its arguments} of the tool named
// `name` (NULL: of any of `tools`), and the rules of its schema, as GBNF text (malloc'd); NULL with err.
static char *json_call_rules(ToolFormat f, const json_t *tools, const char *name, Err *err) {
    const char *args_key = f == TOOL_FORMAT_LLAMA3 ? "parameters" : "arguments";
    json_t *choices = json_array();
    for (size_t i = 0; choices && i < json_array_size(tools); i++)
        if (tool_chosen(json_array_get(tools, i), name))
            json_array_append_new(choices, call_schema(json_array_get(tools, i), args_key));
    json_t *schema = json_array_size(choices) == 1 ? json_incref(json_array_get(choices, 0))
                                                   : json_pack("{s:O}", "anyOf", choices);
    json_decref(choices);
    return schema_rules(schema, "call", err);
}

// The rule `call` in Mistral's newer form: "NAME" [ARGS] ARGUMENTS, one alternative a tool, the arguments of tool k
// the rule def-tool-K of one schema whose $defs hold every chosen tool's parameters (as the JSON Schema converter
// names a definition's rule: grammar/json_schema.c), as GBNF text (malloc'd); NULL with err.
static char *named_call_rules(const json_t *tools, const char *name, const Tokenizer *tok, Err *err) {
    json_t *defs = json_object(), *refs = json_array();
    Text t = {0};
    text_add(&t, "call ::= ");
    int k = 0;
    for (size_t i = 0; defs && refs && i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function"), *params;
        if (!tool_chosen(json_array_get(tools, i), name)) continue;
        char key[32], ref[48];
        snprintf(key, sizeof key, "tool-%d", k);
        snprintf(ref, sizeof ref, "#/$defs/%s", key);
        params = json_object_get(fn, "parameters");
        json_object_set_new(defs, key, json_is_object(params) ? json_deep_copy(params)
                                                              : json_pack("{s:s}", "type", "object"));
        json_array_append_new(refs, json_pack("{s:s}", "$ref", ref));
        const char *its = json_string_value(json_object_get(fn, "name"));
        text_add(&t, "%s", k ? " | " : "");
        text_literal(&t, its, strlen(its));
        text_add(&t, " ");
        marker_gbnf(&t, tok, MISTRAL_ARGS);
        text_add(&t, " def-%s", key);
        k++;
    }
    text_add(&t, "\n");
    char *rules = schema_rules(json_pack("{s:o, s:o}", "$defs", defs, "anyOf", refs), "tool-args", err);
    bool written = rules != NULL;
    for (int i = 0; written && i < k; i++) {  // (the converter's names, checked)
        char rule[48];
        snprintf(rule, sizeof rule, "\ndef-tool-%d ::= ", i);
        written = strstr(rules, rule) != NULL;
        if (!written) err_fmt(err, "tools: the rule of tool %d's arguments was not written", i);
    }
    if (written) text_add(&t, "%s", rules);
    free(rules);
    char *out = text_take(&t);
    if (written && !out) err_fmt(err, "out of memory");
    if (written) return out;
    free(out);
    return NULL;
}
// The rule `call` — one call in format f of the tool named `name` (NULL: of any of `tools`) — and the rules of its
// arguments, as GBNF text (malloc'd); NULL with err.
static char *call_rules(ToolFormat f, const json_t *tools, const char *name, const Tokenizer *tok, Err *err) {
    if (f == TOOL_FORMAT_NONE) {
        err_fmt(err, "no tool-call format");
        return NULL;
    }
    return f == TOOL_FORMAT_MISTRAL_ARGS ? named_call_rules(tools, name, tok, err)
                                         : json_call_rules(f, tools, name, err);
}

// Hermes' call: <tool_call>\n CALL \n</tool_call>.
static void hermes_call(Text *t, const Tokenizer *tok) {
    marker_gbnf(t, tok, HERMES_OPEN);
    text_add(t, " \"\\n\" call \"\\n\" ");
    marker_gbnf(t, tok, HERMES_CLOSE);
}

char *tool_calls_gbnf(ToolFormat f, const json_t *tools, const char *name, const Tokenizer *tok, Err *err) {
    char *call = call_rules(f, tools, name, tok, err);
    if (!call) return NULL;
    Text t = {0};
    text_add(&t, "root ::= ");
    if (f == TOOL_FORMAT_HERMES) {
        hermes_call(&t, tok);
    } else if (f == TOOL_FORMAT_MISTRAL) {
        marker_gbnf(&t, tok, MISTRAL_OPEN);
        text_add(&t, " \" [\" call \"]\"");
    } else if (f == TOOL_FORMAT_MISTRAL_ARGS) {
        marker_gbnf(&t, tok, MISTRAL_OPEN);
        text_add(&t, " call");
    } else {
        text_add(&t, "call");
    }
    text_add(&t, "\n%s", call);
    free(call);
    char *out = text_take(&t);
    if (!out) err_fmt(err, "out of memory");
    return out;
}

char *tool_calls_lazy_gbnf(ToolFormat f, const json_t *tools, bool parallel, const Tokenizer *tok, Err *err) {
    char *call = call_rules(f, tools, NULL, tok, err);
    if (!call) return NULL;
    Text t = {0};
    char token[LAZY_TRIGGER_MAX + 3];
    if (f == TOOL_FORMAT_HERMES) {  // free text, then <tool_call>\n CALL \n</tool_call>, more of them when parallel
        text_add(&t, "root ::= tool-free-0\ntool-calls ::= \"\\n\" call \"\\n\" ");
        marker_gbnf(&t, tok, HERMES_CLOSE);
        text_add(&t, "%s\n", parallel ? " tool-more" : "");
        if (parallel) {
            text_add(&t, "tool-more ::= [ \\t\\n]{0,2} (");
            hermes_call(&t, tok);
            text_add(&t, " tool-more)?\n");
        }
        lazy_gbnf(&t, "tool-free", HERMES_OPEN, marker_token(tok, HERMES_OPEN, token), "tool-calls");
    } else if (f == TOOL_FORMAT_MISTRAL) {  // free text, then [TOOL_CALLS] [CALL, CALL…]
        text_add(&t, "root ::= tool-free-0\ntool-calls ::= \" \"? \"[\" call %s\"]\"\n",
                 parallel ? "(\",\" \" \"? call)* " : "");
        lazy_gbnf(&t, "tool-free", MISTRAL_OPEN, marker_token(tok, MISTRAL_OPEN, token), "tool-calls");
    } else if (f == TOOL_FORMAT_MISTRAL_ARGS) {  // free text, then [TOOL_CALLS] NAME [ARGS] ARGS, more after their own
        text_add(&t, "root ::= tool-free-0\ntool-calls ::= call");
        if (parallel) {
            text_add(&t, " (");
            marker_gbnf(&t, tok, MISTRAL_OPEN);
            text_add(&t, " call)*");
        }
        text_add(&t, "\n");
        lazy_gbnf(&t, "tool-free", MISTRAL_OPEN, marker_token(tok, MISTRAL_OPEN, token), "tool-calls");
    } else {  // Llama 3: a reply that opens with "{" (after whitespace) is a call; any other is free; after the
              // <|python_tag|> token, the same
        text_add(&t, "root ::= [ \\t\\n]* (tool-reply%s)?\ntool-reply ::= call %s| [^{ \\t\\n] .*\n",
                 marker_token(tok, LLAMA3_OPEN, token) ? " | <|python_tag|> [ \\t\\n]* tool-reply" : "",
                 parallel ? "(\";\" \" \"? call)* " : "");
    }
    text_add(&t, "%s", call);
    free(call);
    char *out = text_take(&t);
    if (!out) err_fmt(err, "out of memory");
    return out;
}

int tool_calls_check_parameters(const json_t *tools, ToolsError *e) {
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *fn = json_object_get(json_array_get(tools, i), "function");
        const json_t *params = json_object_get(fn, "parameters");
        if (!params || json_is_null(params)) continue;
        char source[128], *text = json_dumps(params, JSON_COMPACT | JSON_ENCODE_ANY);
        snprintf(e->field, sizeof e->field, "tools[%zu].function.parameters", i);
        snprintf(source, sizeof source, "tools[%zu] \"%s\": parameters", i,
                 json_string_value(json_object_get(fn, "name")));
        Grammar *g = text ? json_schema_grammar(text, strlen(text), source, &e->err) : NULL;
        if (!text) err_fmt(&e->err, "out of memory");
        free(text);
        if (!g) return -1;
        grammar_free(g);
    }
    return 0;
}
