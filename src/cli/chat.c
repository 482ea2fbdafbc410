// chat.c — the chat commands (chat.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/template.h"
#include "cli/chat.h"
#include "cli/session.h"

json_t *chat_vars_object(const Repeated *vars, Err *err) {
    json_t *obj = json_object();
    for (int i = 0; obj && i < vars->n; i++) {
        const char *item = vars->items[i], *eq = strchr(item, '=');
        size_t name_len = eq ? (size_t)(eq - item) : 0;
        bool ok = name_len > 0 && name_len < 128 && !(item[0] >= '0' && item[0] <= '9');
        for (size_t k = 0; ok && k < name_len; k++)
            ok = (item[k] >= 'a' && item[k] <= 'z') || (item[k] >= 'A' && item[k] <= 'Z') ||
                 (item[k] >= '0' && item[k] <= '9') || item[k] == '_';
        if (!ok) {
            err_fmt(err, "--chat-var \"%s\": expected NAME=JSON, NAME a template variable's name", item);
            json_decref(obj);
            return NULL;
        }
        json_error_t jerr;
        json_t *value = json_loads(eq + 1, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
        if (!value) {
            err_fmt(err, "--chat-var %.*s: the value is not JSON (%s); a string needs quotes: %.*s='\"text\"'",
                    (int)name_len, item, jerr.text, (int)name_len, item);
            json_decref(obj);
            return NULL;
        }
        char name[128];
        memcpy(name, item, name_len);
        name[name_len] = '\0';
        json_object_set_new(obj, name, value);
    }
    if (!obj) err_fmt(err, "out of memory");
    return obj;
}

// Reads the messages array from -f FILE, or standard input.
static json_t *read_messages(const char *file, Err *err) {
    const char *path = file ? file : "-";
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len, err)) return NULL;
    json_error_t jerr;
    json_t *messages = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!messages) {
        err_fmt(err, "%s: line %d: %s", file ? file : "standard input", jerr.line, jerr.text);
        return NULL;
    }
    if (!json_is_array(messages)) {
        err_fmt(err, "%s: expected a JSON array of {\"role\", \"content\"} messages", file ? file : "standard input");
        json_decref(messages);
        return NULL;
    }
    return messages;
}

int chat_prompt_ids(const char *dir, const Tokenizer *tok, const char *system, const char *user,
                    const Repeated *vars, int **ids, int *n_ids, Err *err) {
    ChatTemplate ct;
    JinjaOutput out = {0};
    json_t *messages = json_array(), *vars_obj = NULL;
    if (system) json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", user));
    if (chat_template_load(&ct, dir, err)) {
        json_decref(messages);
        return -1;
    }
    int rc = !(vars_obj = chat_vars_object(vars, err)) || chat_template_render(&ct, messages, true, vars_obj, &out, err) ||
                     chat_encode(tok, &out, ids, n_ids, err)
                 ? -1
                 : 0;
    jinja_output_free(&out);
    json_decref(messages);
    json_decref(vars_obj);
    chat_template_free(&ct);
    return rc;
}

int cmd_render(const Args *args, Err *err) {
    ChatTemplate ct = {0};
    Tokenizer tok = {0};
    bool have_tok = false;
    JinjaOutput out = {0};
    int *ids = NULL, n_ids = 0, rc = -1;
    json_t *messages = NULL, *vars = NULL;
    if (!args->model_dir) return err_fmt(err, "render: -m DIR is needed (a checkpoint folder with a chat template)");
    if (chat_template_load(&ct, args->model_dir, err) || !(messages = read_messages(args->file, err)) ||
        !(vars = chat_vars_object(&args->chat_vars, err)) ||
        chat_template_render(&ct, messages, args->add_generation_prompt, vars, &out, err))
        goto done;
    if (args->print_ids) {
        if (load_tokenizer(&tok, args->model_dir, true, &have_tok, err) || chat_encode(&tok, &out, &ids, &n_ids, err))
            goto done;
        for (int i = 0; i < n_ids; i++) printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    } else {
        fwrite(out.text, 1, out.len, stdout);
    }
    rc = fflush(stdout) == 0 ? 0 : err_fmt(err, "standard output: write failed");
done:
    free(ids);
    if (have_tok) tokenizer_free(&tok);
    jinja_output_free(&out);
    json_decref(messages);
    json_decref(vars);
    chat_template_free(&ct);
    return rc;
}
