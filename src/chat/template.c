// template.c — finding a checkpoint's chat template, rendering a conversation with it, and encoding the result
// with special tokens from the template alone (template.h).
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "checkpoint/gguf_tokenizer.h"
#include "chat/template.h"

// A token field of tokenizer_config.json: a string, or an object with "content" (an AddedToken); NULL otherwise.
static char *token_field(const json_t *config, const char *key) {
    const json_t *v = json_object_get(config, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

// What a checkpoint without a template is told: chat needs an instruct model's, and where it may come from.
#define NO_TEMPLATE                                                                                               \
    "no chat template; chat needs an instruct checkpoint, with one in its tokenizer_config.json (\"chat_template\") "  \
    "or in a chat_template.jinja file: give its folder with -m DIR (or write the template to DIR/chat_template.jinja)"

// The template source in tokenizer_config.json's chat_template (a string, or the list entry named "default").
static const char *config_template(const json_t *config, const char *path, Err *err) {
    const json_t *t = json_object_get(config, "chat_template");
    if (json_is_string(t)) return json_string_value(t);
    if (json_is_array(t)) {
        size_t i;
        json_t *entry;
        json_array_foreach(t, i, entry) {
            const json_t *name = json_object_get(entry, "name"), *source = json_object_get(entry, "template");
            if (json_is_string(name) && strcmp(json_string_value(name), "default") == 0 && json_is_string(source))
                return json_string_value(source);
        }
        err_fmt(err, "%s: chat_template: a list without a {\"name\": \"default\", \"template\": ...} entry", path);
        return NULL;
    }
    err_fmt(err, "%s: " NO_TEMPLATE, path);
    return NULL;
}

int chat_template_from_source(ChatTemplate *ct, const char *source, const char *path, Err *err) {
    *ct = (ChatTemplate){.path = strdup(path), .source = strdup(source)};
    if (!ct->path || !ct->source) {
        chat_template_free(ct);
        return err_fmt(err, "out of memory");
    }
    Err inner;
    ct->jinja = jinja_parse(source, strlen(source), &inner);
    ct->tool_format = tool_format_of_template(source);
    if (!ct->jinja) {
        err_fmt(err, "%s: %s", path, inner.msg);
        chat_template_free(ct);
        return -1;
    }
    return 0;
}

// The chat template in a GGUF file's metadata (tokenizer.chat_template), with the texts of its bos and eos tokens.
static int gguf_template_load(ChatTemplate *ct, const char *path, Err *err) {
    GgufFile f;
    if (gguf_open(&f, path, err)) return -1;
    char where[4200], *text = gguf_chat_template(&f, err);
    snprintf(where, sizeof where, "%s: tokenizer.chat_template", path);
    int rc = text ? chat_template_from_source(ct, text, where, err) : -1;
    if (rc == 0) {
        ct->bos_token = gguf_token_text(&f, "tokenizer.ggml.bos_token_id");
        ct->eos_token = gguf_token_text(&f, "tokenizer.ggml.eos_token_id");
    }
    free(text);
    gguf_close(&f);
    return rc;
}

int chat_template_load(ChatTemplate *ct, const char *dir, Err *err) {
    *ct = (ChatTemplate){0};
    char gguf_path[4096];
    if (gguf_checkpoint_path(dir, gguf_path, sizeof gguf_path)) return gguf_template_load(ct, gguf_path, err);
    char config_path[4096], jinja_path[4096];
    snprintf(config_path, sizeof config_path, "%s/tokenizer_config.json", dir);
    snprintf(jinja_path, sizeof jinja_path, "%s/chat_template.jinja", dir);
    json_error_t jerr;
    // Integers as reals: configs hold limits such as 1e30 as integers, which Jansson's 64 bits refuse
    json_t *config = json_load_file(config_path, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &jerr);
    if (!config && access(config_path, F_OK) == 0)
        return err_fmt(err, "%s: line %d: %s", config_path, jerr.line, jerr.text);
    char *source = NULL;
    size_t len = 0;
    int found = read_file_if_present(jinja_path, &source, &len, err);
    int rc = found < 0 ? -1 : 0;
    if (found == 0) {
        if (strlen(source) != len) rc = err_fmt(err, "%s: a NUL byte in the template", jinja_path);
        else rc = chat_template_from_source(ct, source, jinja_path, err);
    } else if (found == 1 && !config) {
        rc = err_fmt(err, "%s: neither tokenizer_config.json nor chat_template.jinja: " NO_TEMPLATE, dir);
    } else if (found == 1) {
        char where[4200];
        snprintf(where, sizeof where, "%s: chat_template", config_path);
        const char *text = config_template(config, config_path, err);
        rc = text ? chat_template_from_source(ct, text, where, err) : -1;
    }
    if (rc == 0 && config) {
        ct->bos_token = token_field(config, "bos_token");
        ct->eos_token = token_field(config, "eos_token");
    }
    free(source);
    json_decref(config);
    return rc;
}

void chat_template_free(ChatTemplate *ct) {
    jinja_free(ct->jinja);
    free(ct->bos_token);
    free(ct->eos_token);
    free(ct->path);
    free(ct->source);
    *ct = (ChatTemplate){0};
}

int chat_template_render(const ChatTemplate *ct, const json_t *messages, bool add_generation_prompt,
                         const json_t *vars, JinjaOutput *out, Err *err) {
    if (!json_is_array(messages)) return err_fmt(err, "messages: expected a JSON array of {role, content} objects");
    json_t *template_vars = json_object(), *data_vars = json_object();
    int rc = template_vars && data_vars ? 0 : err_fmt(err, "out of memory");
    if (rc == 0 && ct->bos_token) json_object_set_new(template_vars, "bos_token", json_string(ct->bos_token));
    if (rc == 0 && ct->eos_token) json_object_set_new(template_vars, "eos_token", json_string(ct->eos_token));
    if (rc == 0) json_object_set_new(template_vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    if (rc == 0 && vars) json_object_update(data_vars, (json_t *)vars);
    if (rc == 0) json_object_set(data_vars, "messages", (json_t *)messages);
    Err inner;
    if (rc == 0 && jinja_render(ct->jinja, &(JinjaContext){.template_vars = template_vars, .data_vars = data_vars},
                                out, &inner) < 0)
        rc = err_fmt(err, "%s: %s", ct->path, inner.msg);
    json_decref(template_vars);
    json_decref(data_vars);
    return rc;
}

int chat_encode(const Tokenizer *tok, const JinjaOutput *rendered, int **ids, int *n_ids, Err *err) {
    return tokenizer_encode_marked(tok, rendered->text, rendered->len, rendered->from_data, ids, n_ids, err);
}

int chat_render_ids(const ChatTemplate *ct, const Tokenizer *tok, const json_t *messages, bool add_generation_prompt,
                    const json_t *vars, int **ids, int *n_ids, Err *err) {
    JinjaOutput rendered = {0};
    const int rc = chat_template_render(ct, messages, add_generation_prompt, vars, &rendered, err) ||
                           chat_encode(tok, &rendered, ids, n_ids, err)
                       ? -1
                       : 0;
    jinja_output_free(&rendered);
    return rc;
}
