// tool_calls.c — fuzz target: a model's reply read back into tool calls (src/chat/tool_calls.h) in each format, and
// the input read as a template's text for its format. A call found has a non-empty name and arguments that are the
// compact JSON of an object; the content before it lies inside the reply; and as the reply grows byte by byte, what a
// stream may send never shrinks and never reaches past the content the whole reply gives.
#include <jansson.h>

#include "chat/tool_calls.h"
#include "fuzz.h"

enum { STREAM_CHECK_MAX = 4096 };  // longer inputs: the stream checked at 64 prefixes, not every byte

static void check_calls(ToolFormat f, const json_t *calls) {
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *call = json_array_get(calls, i), *name = json_object_get(call, "name"),
                     *args = json_object_get(call, "arguments");
        if (!json_is_string(name) || json_string_length(name) == 0 || !json_is_string(args))
            fuzz_fail("%s: call %zu without a name or string arguments", tool_format_name(f), i);
        json_error_t jerr;
        json_t *parsed = json_loads(json_string_value(args), 0, &jerr);
        if (!json_is_object(parsed)) fuzz_fail("%s: call %zu: arguments not an object", tool_format_name(f), i);
        json_decref(parsed);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *reply = (const char *)data;
    for (ToolFormat f = TOOL_FORMAT_NONE; f <= TOOL_FORMAT_MISTRAL_ARGS; f++) {
        size_t content_len = size;
        json_t *calls = tool_calls_parse(f, reply, size, &content_len);
        if (calls && (content_len > size || json_array_size(calls) == 0))
            fuzz_fail("%s: content of %zu bytes in a reply of %zu, %zu calls", tool_format_name(f), content_len,
                      size, json_array_size(calls));
        check_calls(f, calls);
        size_t sent = 0, step = size <= STREAM_CHECK_MAX ? 1 : size / 64;
        for (size_t k = 0; k <= size; k += step) {
            size_t now = tool_calls_content_prefix(f, reply, k);
            if (now < sent || now > k || (calls && now > content_len))
                fuzz_fail("%s: after %zu bytes the stream may send %zu (before %zu, content %zu)",
                          tool_format_name(f), k, now, sent, calls ? content_len : size);
            sent = now;
        }
        json_decref(calls);
    }
    char *text = strndup(reply, size);
    if (!text) fuzz_fail("out of memory");
    ToolFormat f = tool_format_of_template(text);
    if (f > TOOL_FORMAT_MISTRAL_ARGS) fuzz_fail("a format out of range");
    free(text);
    return 0;
}
