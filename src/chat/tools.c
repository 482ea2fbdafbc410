// tools.c — the `tools` list checked, and a conversation's tool calls and answers checked and put in the shape
// templates read (tools.h).
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "chat/tools.h"

// Fills e with the field and the message, and returns -1.
static int tools_fail(ToolsError *e, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tools_fail(ToolsError *e, const char *field, const char *fmt, ...) {
    snprintf(e->field, sizeof e->field, "%s", field);
    char msg[sizeof e->err.msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return err_fmt(&e->err, "%s", msg);
}

// OpenAI's rule for a function's name: 1 to 64 of a-z, A-Z, 0-9, underscore, dot and dash.
static bool valid_name(const char *s) {
    size_t n = strlen(s);
    bool ok = n >= 1 && n <= TOOL_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
             s[i] == '_' || s[i] == '.' || s[i] == '-';
    return ok;
}

static int check_tool(const json_t *tool, const char *at, ToolsError *e) {
    char field[200];
    if (!json_is_object(tool)) return tools_fail(e, at, "expected a {\"type\": \"function\", \"function\": {...}} object");
    const json_t *type = json_object_get(tool, "type"), *fn = json_object_get(tool, "function");
    snprintf(field, sizeof field, "%s.type", at);
    if (!json_is_string(type) || strcmp(json_string_value(type), "function") != 0)
        return tools_fail(e, field, "expected \"function\" (the only type of tool)");
    snprintf(field, sizeof field, "%s.function", at);
    if (!json_is_object(fn)) return tools_fail(e, field, "expected an object with \"name\" and \"parameters\"");
    const json_t *name = json_object_get(fn, "name"), *params = json_object_get(fn, "parameters"),
                 *description = json_object_get(fn, "description");
    snprintf(field, sizeof field, "%s.function.name", at);
    if (!json_is_string(name) || !valid_name(json_string_value(name)))
        return tools_fail(e, field, "expected 1 to %d of a-z, A-Z, 0-9, _, . and -", TOOL_NAME_MAX);
    snprintf(field, sizeof field, "%s.function.description", at);
    if (description && !json_is_null(description) && !json_is_string(description))
        return tools_fail(e, field, "expected a string");
    snprintf(field, sizeof field, "%s.function.parameters", at);
    if (params && !json_is_null(params) && !json_is_object(params))
        return tools_fail(e, field, "expected a JSON Schema object");
    return 0;
}

// A checked tool's function name.
static const char *tool_name(const json_t *tool) {
    return json_string_value(json_object_get(json_object_get(tool, "function"), "name"));
}

const json_t *tools_find(const json_t *tools, const char *name) {
    for (size_t i = 0; i < json_array_size(tools); i++) {
        const json_t *tool = json_array_get(tools, i);
        const char *its = tool_name(tool);
        if (its && strcmp(its, name) == 0) return tool;
    }
    return NULL;
}

int tools_check(const json_t *tools, ToolsError *e) {
    if (!json_is_array(tools)) return tools_fail(e, "tools", "expected an array of function tools");
    if (json_array_size(tools) > TOOLS_MAX) return tools_fail(e, "tools", "more than %d tools", TOOLS_MAX);
    for (size_t i = 0; i < json_array_size(tools); i++) {
        char at[64];
        snprintf(at, sizeof at, "tools[%zu]", i);
        if (check_tool(json_array_get(tools, i), at, e)) return -1;
        const char *name = tool_name(json_array_get(tools, i));
        bool repeated = false;
        for (size_t k = 0; k < i; k++) repeated |= strcmp(tool_name(json_array_get(tools, k)), name) == 0;
        if (repeated) return tools_fail(e, at, "a second function named \"%s\"", name);
    }
    return 0;
}

// One entry of an assistant message's tool_calls, with string arguments parsed into their object (in place).
static int prepare_call(json_t *call, const char *at, ToolsError *e) {
    char field[200];
    json_t *fn = json_object_get(call, "function");
    if (!json_is_object(call) || !json_is_object(fn))
        return tools_fail(e, at, "expected {\"type\": \"function\", \"function\": {\"name\", \"arguments\"}}");
    snprintf(field, sizeof field, "%s.function.name", at);
    if (!json_is_string(json_object_get(fn, "name"))) return tools_fail(e, field, "expected a string");
    snprintf(field, sizeof field, "%s.function.arguments", at);
    json_t *args = json_object_get(fn, "arguments");
    if (json_is_string(args)) {
        json_error_t jerr;
        json_t *parsed = json_loadb(json_string_value(args), json_string_length(args), JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(parsed)) {
            json_decref(parsed);
            return tools_fail(e, field, "expected a JSON object in the string (%s)",
                              jerr.text[0] ? jerr.text : "another JSON value");
        }
        json_object_set_new(fn, "arguments", parsed);
    } else if (!json_is_object(args)) {
        return tools_fail(e, field, "expected a JSON object, or a string holding one");
    }
    return 0;
}

// Each tool message answers a call made before it, as OpenAI's API requires: the messages before it, back over the
// other tool messages, end in an assistant message with tool_calls, and its tool_call_id (when given) is the id of
// one of those calls. Returns 0, or -1 with e naming messages[i].role or messages[i].tool_call_id.
static int check_answers(const json_t *messages, ToolsError *e) {
    const json_t *calls = NULL;  // those of the assistant message that the tool messages since answer, or NULL
    size_t caller = 0;           // its index
    for (size_t i = 0; i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        const char *role = json_string_value(json_object_get(m, "role"));
        char at[64];
        if (!role || strcmp(role, "tool") != 0) {
            const json_t *made = json_object_get(m, "tool_calls");
            calls = role && strcmp(role, "assistant") == 0 && json_array_size(made) > 0 ? made : NULL;
            caller = i;
            continue;
        }
        if (!calls) {
            snprintf(at, sizeof at, "messages[%zu].role", i);
            return tools_fail(e, at, "a tool message answers a call: it must follow an assistant message with "
                              "tool_calls (or another tool message that does)");
        }
        const char *id = json_string_value(json_object_get(m, "tool_call_id"));
        bool named = false;
        for (size_t k = 0; id && k < json_array_size(calls); k++) {
            const char *call_id = json_string_value(json_object_get(json_array_get(calls, k), "id"));
            named |= call_id && strcmp(call_id, id) == 0;
        }
        if (id && !named) {
            char quoted[ERR_QUOTE_LEN + 4];
            snprintf(at, sizeof at, "messages[%zu].tool_call_id", i);
            return tools_fail(e, at, "\"%s\" is the id of none of the calls of messages[%zu]", err_quote(quoted, id),
                              caller);
        }
    }
    return 0;
}

json_t *tools_messages_for_template(const json_t *messages, ToolsError *e) {
    if (!json_is_array(messages)) {
        tools_fail(e, "messages", "expected a JSON array of {role, content} objects");
        return NULL;
    }
    json_t *copy = json_deep_copy(messages);
    int rc = copy ? 0 : tools_fail(e, "messages", "out of memory");
    for (size_t i = 0; rc == 0 && i < json_array_size(copy); i++) {
        json_t *m = json_array_get(copy, i), *calls = json_object_get(m, "tool_calls"),
               *id = json_object_get(m, "tool_call_id");
        char at[128];
        snprintf(at, sizeof at, "messages[%zu].tool_call_id", i);
        if (id && !json_is_null(id) && !json_is_string(id)) rc = tools_fail(e, at, "expected a string");
        snprintf(at, sizeof at, "messages[%zu].tool_calls", i);
        if (rc == 0 && calls && !json_is_null(calls) && !json_is_array(calls))
            rc = tools_fail(e, at, "expected an array of calls");
        for (size_t k = 0; rc == 0 && k < json_array_size(calls); k++) {
            snprintf(at, sizeof at, "messages[%zu].tool_calls[%zu]", i, k);
            rc = prepare_call(json_array_get(calls, k), at, e);
        }
    }
    if (rc == 0) rc = check_answers(copy, e);
    if (rc == 0) return copy;
    json_decref(copy);
    return NULL;
}
