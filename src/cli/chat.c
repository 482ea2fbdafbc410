// chat.c — the chat commands (chat.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "base/utf8.h"
#include "chat/template.h"
#include "chat/tools.h"
#include "cli/chat.h"
#include "cli/chat_input.h"
#include "cli/interrupt.h"
#include "cli/report.h"
#include "cli/session.h"
#include "cli/structured.h"
#include "speculative/conversation.h"

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

int chat_prompt_ids(const char *dir, const Tokenizer *tok, const char *system, const char *user, size_t user_len,
                    const json_t *vars, ToolFormat *format, int **ids, int *n_ids, Err *err) {
    size_t bad = utf8_invalid_offset(user, user_len);
    if (bad < user_len) return err_fmt(err, "the message: invalid UTF-8 at byte %zu; expected UTF-8 text", bad);
    if (system && utf8_invalid_offset(system, strlen(system)) < strlen(system))
        return err_fmt(err, "--system: invalid UTF-8; expected UTF-8 text");
    ChatTemplate ct;
    json_t *messages = json_array();
    if (system) json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "system", "content", system));
    json_array_append_new(messages, json_pack("{s:s, s:s%}", "role", "user", "content", user, user_len));
    if (chat_template_load(&ct, dir, err)) {
        json_decref(messages);
        return -1;
    }
    *format = ct.tool_format;
    int rc = chat_render_ids(&ct, tok, messages, true, vars, ids, n_ids, err);
    json_decref(messages);
    chat_template_free(&ct);
    return rc;
}

// Reads --tools FILE: a JSON list of OpenAI function tools, checked (chat/tools.h); NULL with err naming the file
// and the field.
static json_t *read_tools(const char *file, Err *err) {
    char *text = NULL;
    size_t len = 0;
    if (read_file(file, &text, &len, err)) return NULL;
    json_error_t jerr;
    json_t *tools = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    free(text);
    if (!tools) {
        err_fmt(err, "%s: line %d: %s", file, jerr.line, jerr.text);
        return NULL;
    }
    ToolsError e;
    if (tools_check(tools, &e)) {
        json_decref(tools);
        err_fmt(err, "%s: %s: %s", file, e.field, e.err.msg);
        return NULL;
    }
    return tools;
}

json_t *chat_template_vars(const Args *a, Err *err) {
    json_t *vars = chat_vars_object(&a->chat_vars, err), *tools = NULL;
    if (vars && a->tools && !(tools = read_tools(a->tools, err))) {
        json_decref(vars);
        return NULL;
    }
    if (tools) json_object_set_new(vars, "tools", tools);
    return vars;
}

int chat_tools_grammar(Structured *st, const char *file, ToolFormat format, const json_t *vars, const Tokenizer *tok,
                       Err *err) {
    const json_t *tools = json_object_get(vars, "tools");
    ToolsError e;
    if (tools && tool_calls_check_parameters(tools, &e)) return err_fmt(err, "%s: %s", file, e.err.msg);
    if (!tools || format == TOOL_FORMAT_NONE || st->grammar) return 0;
    char *gbnf = tool_calls_lazy_gbnf(format, tools, false, tok, err);  // one call a reply
    st->grammar = gbnf ? grammar_parse(gbnf, strlen(gbnf), "--tools", err) : NULL;
    free(gbnf);
    return st->grammar ? 0 : -1;
}

json_t *chat_print_tool_calls(FILE *f, ToolFormat format, const char *reply, size_t len, size_t *content_len) {
    json_t *calls = tool_calls_parse(format, reply, len, content_len);
    for (size_t i = 0; i < json_array_size(calls); i++) {
        const json_t *call = json_array_get(calls, i);
        fprintf(f, "specdec: tool call %zu: %s %s\n", i + 1, json_string_value(json_object_get(call, "name")),
                json_string_value(json_object_get(call, "arguments")));
    }
    return calls;
}

// The messages of -f FILE with tool calls' string arguments as objects (tools.h).
static json_t *read_messages_for_template(const char *file, Err *err) {
    json_t *messages = read_messages(file, err);
    ToolsError e;
    json_t *prepared = messages ? tools_messages_for_template(messages, &e) : NULL;
    if (messages && !prepared) err_fmt(err, "%s: %s: %s", file ? file : "standard input", e.field, e.err.msg);
    json_decref(messages);
    return prepared;
}

int cmd_render(const Args *args, Err *err) {
    ChatTemplate ct = {0};
    Tokenizer tok = {0};
    bool have_tok = false;
    JinjaOutput out = {0};
    int *ids = NULL, n_ids = 0, rc = -1;
    json_t *messages = NULL, *vars = NULL;
    if (!args->model_dir) return err_fmt(err, "render: -m DIR is needed (a checkpoint folder with a chat template)");
    if (chat_template_load(&ct, args->model_dir, err) || !(messages = read_messages_for_template(args->file, err)) ||
        !(vars = chat_template_vars(args, err)) ||
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

// ---- specdec chat -----------------------------------------------------------------------------------------------
//
// Each user line is added to the conversation (a JSON list of messages, with --system's first), the whole is
// rendered by the template with the assistant's turn opened, and the reply continues the Conversation
// (speculative/conversation.h): its caches keep what the last turn left, so a turn prefills only what the rendering
// adds. The reply streams as it is decided (--show's marks too; with --stop, the text up to the stop string,
// unmarked: --show is refused with it) and ends at the checkpoint's end-of-text ids (generation_config.json's eos
// list: <|eot_id|>, <|im_end|>), at -n tokens, or at a stop string; it joins the conversation as the assistant's
// message. A conversation that no longer fits the context is refused turn by turn with a note, until /reset. With
// --tools, a reply that ends in calls leaves them waiting for their results: `/tool TEXT` sends TEXT as the result of
// the first call still waiting (a `tool` message with its tool_call_id), and once every call has its result the
// model replies to them.

typedef struct {
    const Args *args;
    Session s;
    Tokenizer tok;
    bool have_tok;
    ChatTemplate ct;
    json_t *vars, *messages;
    Drafters drafters;
    Conversation conv;
    bool conv_open;
    SpecParams params;
    Structured structured;      // --grammar, --json-schema, --json: each reply's grammar, started afresh
    json_t *waiting;            // the last reply's calls still without a result: [{"id", "name"}], in order
    int *out;
    int turn;
} Chat;

static int chat_open(Chat *c, const Args *a, Err *err) {
    const char *target_dir, *draft_dir;
    *c = (Chat){.args = a};
    if (a->stops.n && a->show)  // (the stop strings' printer prints text, unmarked: as generate refuses it)
        return err_fmt(err, "--stop prints the text up to the stop string: not with --show");
    if (spec_params_from_args(a, &c->params, err) || model_dirs(a, &target_dir, &draft_dir, err) ||
        chat_template_load(&c->ct, target_dir, err) || !(c->vars = chat_template_vars(a, err)) ||
        session_open_from_args(&c->s, a, target_dir, draft_dir, err) ||
        load_tokenizer(&c->tok, target_dir, true, &c->have_tok, err))
        return -1;
    if (tokenizer_vocab_size(&c->tok) < c->s.target.n_vocab)  // padding rows of the embedding table, as generate
        model_limit_vocab(&c->s.target, tokenizer_vocab_size(&c->tok));
    c->params.eos_id = c->s.target.cfg.eos_token_id;
    c->params.eos_ids = c->s.target.cfg.eos_ids;
    c->params.n_eos = c->s.target.cfg.n_eos;
    if (structured_read(&c->structured, a->grammar, a->json_schema, a->json, err) ||
        chat_tools_grammar(&c->structured, a->tools, c->ct.tool_format, c->vars, &c->tok, err))
        return -1;
    if (c->structured.grammar) {
        c->params.constraint = &c->structured.constraint;  // (the drafter reads it too)
        c->params.forced_drafts = true;
    }
    if (drafter_open(&c->drafters, drafter_kind(c->s.has_draft, session_drafts_by_lookup(a, c->s.has_draft)),
                     &c->s.draft, &c->params, a->draft_p_min, LOOKUP_STAGED_MIN_MATCH, err) ||
        conversation_init(&c->conv, &c->s.target, c->drafters.drafter, err))
        return -1;
    c->conv_open = true;
    c->messages = json_array();
    c->waiting = json_array();
    c->out = malloc(sizeof(int) * ((size_t)a->n_tokens + 1));
    if (!c->messages || !c->waiting || !c->out) return err_fmt(err, "out of memory");
    if (a->system && utf8_invalid_offset(a->system, strlen(a->system)) < strlen(a->system))
        return err_fmt(err, "--system: invalid UTF-8; expected UTF-8 text");
    if (a->system) json_array_append_new(c->messages, json_pack("{s:s, s:s}", "role", "system", "content", a->system));
    return 0;
}

static void chat_close(Chat *c) {
    if (c->conv_open) conversation_free(&c->conv);
    structured_free(&c->structured);
    drafter_close(&c->drafters);
    if (c->have_tok) tokenizer_free(&c->tok);
    chat_template_free(&c->ct);
    json_decref(c->vars);
    json_decref(c->messages);
    json_decref(c->waiting);
    free(c->out);
    session_close(&c->s);
}

// One --stats line a turn: what was reused from the caches and what was prefilled, the reply's decoding and its
// drafts (the draft model's calls and rows, the lookup's rounds), and the run's set-up as generate's line says it.
static void print_turn_stats(const Chat *c, int n_ids, int reused, int n_out, const SpecStats *st) {
    fprintf(stderr, "{\"turn\": %d, \"prompt_tokens\": %d, \"reused_tokens\": %d, \"prefill_tokens\": %d, "
                    "\"prefill_ms\": %.2f, \"generated_tokens\": %d, \"tokens_per_s\": %.2f, \"target_calls\": %d, "
                    "\"draft_calls\": %d, \"draft_rows\": %d, \"drafted\": %d, \"accepted\": %d, "
                    "\"acceptance_rate\": %.4f, \"lookup_rounds\": %d, \"lookup_drafted\": %d, "
                    "\"lookup_accepted\": %d, ",
            c->turn, n_ids, reused, n_ids - reused, st->prefill_seconds * 1e3, n_out,
            st->decode_seconds > 0 ? n_out / st->decode_seconds : 0.0, st->rounds, st->draft_calls, st->draft_rows,
            st->drafted, st->accepted, st->drafted ? (double)st->accepted / st->drafted : 0, st->lookup_rounds,
            st->lookup_drafted, st->lookup_accepted);
    print_session_fields(stderr, &c->s);
    fputs("}\n", stderr);
}

// The reply to the conversation's ids, streamed; *text (malloc'd) and *len its bytes as the conversation keeps them
// (a model may print NUL bytes: the length, not strlen, says where they end).
static int reply(Chat *c, const int *ids, int n_ids, char **text, size_t *len, Err *err) {
    const Args *a = c->args;
    Printer printer = {0};
    StopPrinter stopper = {0};
    SpecParams params = c->params;
    if (a->stops.n) {
        if (stop_printer_init(&stopper, stdout, &c->tok, &a->stops, err)) return -1;
        params.stop = stop_printer_token;
        params.stop_ctx = &stopper;
    } else {
        printer_init(&printer, stdout, &c->tok, a->show, isatty(STDOUT_FILENO) && !getenv("NO_COLOR"), err);
        params.on_token = on_token;
        params.ctx = &printer;
    }
    const Config *cfg = &c->s.target.cfg;
    if (c->structured.grammar &&
        structured_constraint(&c->structured, &c->tok, c->s.target.n_vocab, cfg->eos_ids, cfg->n_eos, err)) {
        printer_free(&printer);
        stop_printer_free(&stopper);
        return -1;
    }
    InterruptStop interrupt;  // Ctrl-C ends the reply at its next token; the reply's writes go on through it
    interrupt_wrap_stop(&params, &interrupt);
    interrupt_catch(true);
    SpecStats stats;
    int n_out = 0, reused = 0, rc = conversation_reply(&c->conv, ids, n_ids, &params, c->out, &n_out, &stats, &reused,
                                                       err);
    Err finish_err;  // a failed write, or the stop scan's failure; a failed reply's message comes first
    int finished = a->stops.n ? stop_printer_finish(&stopper, "stdout", &finish_err)
                              : printer_finish(&printer, "stdout", &finish_err);
    if (rc == 0 && finished) {
        *err = finish_err;
        rc = -1;
    }
    const StopScan *printed = &stopper.text.scan;
    if (rc == 0 && a->stops.n) {
        *len = printed->len;
        rc = (*text = malloc(*len + 1)) ? 0 : err_fmt(err, "out of memory");
        if (rc == 0 && *len) memcpy(*text, printed->text, *len);
        if (rc == 0) (*text)[*len] = '\0';
    } else if (rc == 0) {
        rc = tokenizer_decode(&c->tok, c->out, n_out, text, len, err);
    }
    if (rc == 0 && interrupt_requested())
        fprintf(stderr, "specdec: the reply was cut short (Ctrl-C); it stays in the conversation as printed\n");
    interrupt_clear();
    interrupt_catch(false);  // (the next line's read returns at Ctrl-C)
    if (rc == 0 && a->stats) print_turn_stats(c, n_ids, reused, n_out, &stats);
    if (rc == 0 && n_out < a->n_tokens && c->conv.cache.len + 1 >= c->s.target.cfg.n_positions)
        fprintf(stderr, "specdec: the reply stopped where the conversation fills the context of %d position%s "
                "(--ctx); /reset starts a new one\n", c->s.target.cfg.n_positions, plural(c->s.target.cfg.n_positions));
    printer_free(&printer);
    stop_printer_free(&stopper);
    return rc;
}

// The reply joins the conversation as the assistant's message, in valid UTF-8: a reply cut short (-n, Ctrl-C) may
// end inside a character, and a model may print bytes that are not UTF-8; those become U+FFFD. A reply that ends in
// tool calls (--tools) joins as its content (an empty string when there is none: Qwen3's template tests strings
// `in` it) and the calls, their arguments as objects, as templates read them (chat/tools.h); each call printed on
// stderr (chat_print_tool_calls), and waiting for its result (/tool).
static int add_reply(Chat *c, const char *text, size_t len, Err *err) {
    json_t *calls = json_object_get(c->vars, "tools")
                        ? chat_print_tool_calls(stderr, c->ct.tool_format, text, len, &len)
                        : NULL;
    char *repaired = malloc(3 * len + 1);
    size_t repaired_len = 0;
    if (repaired) utf8_repair((const unsigned char *)text, len, true, repaired, &repaired_len);
    json_t *message = repaired ? json_pack("{s:s, s:s%}", "role", "assistant", "content", repaired, repaired_len)
                               : NULL;
    free(repaired);
    json_t *template_calls = calls ? json_array() : NULL;
    for (size_t i = 0; template_calls && i < json_array_size(calls); i++) {
        const json_t *call = json_array_get(calls, i);
        json_error_t jerr;
        char id[32];
        snprintf(id, sizeof id, "call_%d_%zu", c->turn, i);
        json_array_append_new(c->waiting, json_pack("{s:s, s:O}", "id", id, "name", json_object_get(call, "name")));
        json_array_append_new(template_calls,
                              json_pack("{s:s, s:s, s:{s:O, s:o}}", "id", id, "type", "function", "function", "name",
                                        json_object_get(call, "name"), "arguments",
                                        json_loads(json_string_value(json_object_get(call, "arguments")), 0, &jerr)));
    }
    if (message && template_calls) json_object_set_new(message, "tool_calls", template_calls);
    if (template_calls) fprintf(stderr, "specdec: /tool TEXT sends a call's result (the calls in order)\n");
    json_decref(calls);
    return message && json_array_append_new(c->messages, message) == 0 ? 0 : err_fmt(err, "out of memory");
}

// The reply to the conversation as it stands (its last message the user's, or a tool's result), joined to it. A
// conversation that no longer fits the context is refused with a note and its last message taken back: returns 1.
static int respond(Chat *c, Err *err) {
    int *ids = NULL, n_ids = 0;
    char *text = NULL;
    size_t len = 0;
    int rc = chat_render_ids(&c->ct, &c->tok, c->messages, true, c->vars, &ids, &n_ids, err);
    const int n_ctx = c->s.target.cfg.n_positions;
    if (rc == 0 && n_ids >= n_ctx) {
        fprintf(stderr, "specdec: the conversation has %d token%s and the context holds %d position%s (--ctx): no "
                "room for a reply; /reset starts a new one\n", n_ids, plural(n_ids), n_ctx, plural(n_ctx));
        json_array_remove(c->messages, json_array_size(c->messages) - 1);
        rc = 1;
    } else if (rc == 0) {
        c->turn++;
        json_array_clear(c->waiting);  // (calls not answered before this turn stay so)
        rc = reply(c, ids, n_ids, &text, &len, err);
        if (rc == 0) rc = add_reply(c, text, len, err);
    }
    free(text);
    free(ids);
    return rc;
}

// Whether a message is valid UTF-8; a note when it is not (it is not sent).
static bool sendable(const char *message) {
    if (utf8_invalid_offset(message, strlen(message)) == strlen(message)) return true;
    fprintf(stderr, "specdec: the message is not valid UTF-8; it was not sent\n");
    return false;
}

// One turn: the user's message, the reply. A message that is not UTF-8, or a conversation that no longer fits
// the context, is refused with a note (the conversation unchanged).
static int turn(Chat *c, const char *user, Err *err) {
    if (!sendable(user)) return 0;
    json_array_append_new(c->messages, json_pack("{s:s, s:s}", "role", "user", "content", user));
    return respond(c, err) < 0 ? -1 : 0;
}

// /tool RESULT: the result of the first call still waiting, as a `tool` message with its tool_call_id; when no call
// waits any more, the model replies. Refused with a note where no call waits or RESULT is not UTF-8.
static int tool_result(Chat *c, const char *result, Err *err) {
    json_t *call = json_incref(json_array_get(c->waiting, 0));
    if (!call) fprintf(stderr, "specdec: no tool call waits for a result; /tool RESULT follows a reply's call\n");
    if (!call || !sendable(result)) {
        json_decref(call);
        return 0;
    }
    json_array_append_new(c->messages, json_pack("{s:s, s:O, s:s}", "role", "tool", "tool_call_id",
                                                 json_object_get(call, "id"), "content", result));
    json_array_remove(c->waiting, 0);
    int rc = 0;
    if (json_array_size(c->waiting) > 0)
        fprintf(stderr, "specdec: %zu more tool call%s wait%s for a result\n", json_array_size(c->waiting),
                json_array_size(c->waiting) == 1 ? "" : "s", json_array_size(c->waiting) == 1 ? "s" : "");
    else if ((rc = respond(c, err)) == 1)  // (refused: the call waits again)
        rc = json_array_insert(c->waiting, 0, call) == 0 ? 0 : err_fmt(err, "out of memory");
    json_decref(call);
    return rc < 0 ? -1 : 0;
}

int cmd_chat(const Args *args, Err *err) {
    if (require_tokens(args, "chat", "every reply", err)) return -1;
    Chat c;
    int rc = chat_open(&c, args, err);
    const bool terminal = isatty(STDIN_FILENO);
    if (rc == 0) interrupt_catch(false);  // Ctrl-C: a reply cut short, a line dropped (chat_read_message)
    chat_input_start(terminal);
    if (rc == 0 && terminal)
        fprintf(stderr, "specdec chat: a line \"\"\" opens and closes a message of several lines; Ctrl-C stops a "
                "reply; /reset starts over; /tool TEXT answers a tool call; /exit or Ctrl-D ends; a paste is one "
                "message\n");
    for (char *line; rc == 0 && (line = chat_read_message(terminal)) != NULL; free(line)) {
        if (strcmp(line, "/exit") == 0) {
            free(line);
            break;
        }
        if (strcmp(line, "/reset") == 0) {
            conversation_reset(&c.conv);
            json_array_clear(c.messages);
            if (args->system)
                json_array_append_new(c.messages, json_pack("{s:s, s:s}", "role", "system", "content", args->system));
            json_array_clear(c.waiting);
            c.turn = 0;
            fprintf(stderr, "specdec: a new conversation\n");
        } else if (strncmp(line, "/tool ", 6) == 0) {
            rc = tool_result(&c, line + 6, err);
        } else if (strcmp(line, "/tool") == 0) {
            fprintf(stderr, "specdec: /tool TEXT: the call's result follows /tool and a space; nothing was sent\n");
        } else if (*line) {
            rc = turn(&c, line, err);
        }
    }
    chat_close(&c);
    return rc;
}
