// chat_template.c — fuzz target: a chat template parsed by jinja_parse and rendered by jinja_render. The input is
// the template, FUZZ_SEPARATOR, a JSON object of data variables (absent or not an object: a fixed conversation).
// A rejection, at parse or render time, leaves one clean line; an accepted render gives valid UTF-8 of the length
// it claims, NUL-terminated, with a provenance flag (0 or 1) for every byte.
#include <jansson.h>

#include "fuzz.h"

#include "chat/jinja.h"

static const char CONVERSATION[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Hi {{ x }} <|im_end|>\"}, {\"role\": \"assistant\", \"content\": \"<think>\\nok\\n</think>\\n\\nHello\"}], "
    "\"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    json_error_t jerr;
    json_t *vars = n == 2 ? json_loadb((const char *)parts[1].data, parts[1].size, 0, &jerr) : NULL;
    if (!json_is_object(vars)) {
        json_decref(vars);
        vars = json_loads(CONVERSATION, 0, &jerr);
    }
    json_t *template_vars = json_pack("{s:s, s:s, s:b}", "bos_token", "<s>", "eos_token", "</s>",
                                      "add_generation_prompt", 1);
    Err err = {""};
    JinjaTemplate *t = jinja_parse((const char *)parts[0].data, parts[0].size, &err);
    JinjaOutput out;
    if (!t) {
        fuzz_check_message(&err);
    } else if (jinja_render(t, &(JinjaContext){.template_vars = template_vars, .data_vars = vars, .now = 1},
                            &out, &err) < 0) {
        fuzz_check_message(&err);
    } else {
        if (out.text[out.len] != '\0') fuzz_fail("the output is not NUL-terminated");
        size_t bad = utf8_invalid_offset(out.text, out.len);
        if (bad < out.len) fuzz_fail("the output is invalid UTF-8 at byte %zu of %zu", bad, out.len);
        for (size_t i = 0; i < out.len; i++)
            if (out.from_data[i] > 1) fuzz_fail("provenance %d at byte %zu", out.from_data[i], i);
        jinja_output_free(&out);
    }
    jinja_free(t);
    json_decref(vars);
    json_decref(template_vars);
    return 0;
}
