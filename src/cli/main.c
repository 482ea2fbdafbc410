// main.c — the specdec command line: a table of subcommands and one function per subcommand (the options are
// in args.c, loading in session.c, the reports in report.c). Generated text goes to stdout, statistics and errors
// to stderr; bad input exits with status 2.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "base/file.h"
#include "base/utf8.h"
#include "chat/template.h"
#include "checkpoint/gguf_convert.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/safetensors.h"
#include "cli/args.h"
#include "cli/batch.h"
#include "cli/chat.h"
#include "cli/interrupt.h"
#include "cli/report.h"
#include "cli/serve.h"
#include "cli/session.h"
#include "cli/structured.h"
#include "serve/api.h"
#include "speculative/sampling.h"
#include "speculative/speculative.h"

static int cmd_generate(const Args *args, Err *err);
static int cmd_logits(const Args *args, Err *err);
static int cmd_tokenize(const Args *args, Err *err);
static int cmd_detokenize(const Args *args, Err *err);
static int cmd_inspect(const Args *args, Err *err);
static int cmd_convert(const Args *args, Err *err);

// The commands' own words for options whose table text (args.c, written for generate) would mislead them.
static const OptionText drafting_texts[] = {  // generate and chat, whose draft may take a thread of its own
    {"threads", NULL, "worker threads (default: the CPUs this process may use; with -d on 8 or more, one fewer: the "
                      "drafting thread's)"},
    {NULL, NULL, NULL},
};
static const OptionText logits_texts[] = {
    {"model", NULL, "checkpoint folder (config.json + model.safetensors), or a .gguf file"},
    {"ctx", NULL, "positions the KV cache holds (default: as many as the ids given)"},
    {NULL, NULL, NULL},
};
static const OptionText tokenizer_texts[] = {  // tokenize and detokenize
    {"model", NULL, "the checkpoint folder or .gguf file whose tokenizer is used"},
    {NULL, NULL, NULL},
};
static const OptionText render_texts[] = {
    {"model", NULL, "the checkpoint folder or .gguf file whose chat template and tokenizer are used"},
    {"file", NULL, "read the conversation from FILE (default and - : standard input)"},
    {NULL, NULL, NULL},
};
static const OptionText server_texts[] = {  // serve and batch
    {"tokens", NULL, "tokens to generate for a request that sets no max_tokens (default 64)"},
    {"file", NULL, "read the requests, one JSON body a line, from FILE (- : standard input)"},
    {NULL, NULL, NULL},
};
static const OptionText inspect_texts[] = {
    {"model", "PATH", "the safetensors file or folder, or the GGUF file, to show (as PATH alone)"},
    {NULL, NULL, NULL},
};
static const OptionText convert_texts[] = {
    {"model", NULL, "the Hugging Face checkpoint folder to convert (config.json, model.safetensors, the tokenizer)"},
    {"output", "FILE.gguf", "the GGUF file to write (a temporary file beside it, renamed over it once whole)"},
    {"threads", NULL, "threads converting each tensor's rows (default: the CPUs this process may use; the file's "
                      "bytes are the same for any number)"},
    {NULL, NULL, NULL},
};

static const Command commands[] = {
    {"generate", cmd_generate, "generate [-m DIR [-d DRAFT_DIR]] (-p TEXT | -f FILE | --ids \"1 2 3\") [options]",
     "continue a prompt; speculatively with a draft model (the shipped pair when no -m is given)",
     "model draft ids prompt file tokens temp top-k top-p min-p repetition-penalty presence-penalty "
     "frequency-penalty seed gamma sampler lookup no-lookup tree-width tree pipeline "
     "draft-p-min ctx threads draft-threads "
     "quant draft-quant print-ids stats show trace logprobs logprobs-file compare allow-special chat system chat-var "
     "tools stop grammar json-schema json help", 0, 0, drafting_texts},
    {"logits", cmd_logits,
     "logits -m DIR --ids \"1 2 3\" [--all] [--ctx N] [--threads N] [--quant none|q8|q4|bf16|stored]",
     "print the logits of the last position (all with --all): a line of numbers (7 significant digits) per "
     "position", "model ids all ctx threads quant help", 0, 0, logits_texts},
    {"tokenize", cmd_tokenize, "tokenize -m DIR [--allow-special] [TEXT | -f FILE]  (no TEXT and no -f: standard input)",
     "print the token ids of a text, space-separated on one line", "model file allow-special help", 0, 1,
     tokenizer_texts},
    {"detokenize", cmd_detokenize, "detokenize -m DIR ID...", "print the text of token ids", "model help", 1,
     MAX_POSITIONAL, tokenizer_texts},
    {"serve", cmd_serve, "serve [-m DIR [-d DRAFT_DIR]] [--lookup | --no-lookup] [--host 127.0.0.1] [--port 8080] "
     "[--api-key KEY] [options]",
     "an OpenAI-compatible HTTP server (docs/server.md); speculative with a draft model or --lookup",
     "model draft tokens gamma sampler lookup no-lookup tree-width tree draft-p-min ctx threads draft-threads "
     "quant draft-quant host port api-key parallel queue max-body timeout help", 0, 0, server_texts},
    {"batch", cmd_batch, "batch [-m DIR [-d DRAFT_DIR]] [--lookup | --no-lookup] -f REQUESTS.jsonl [-o OUT.jsonl] "
     "[--parallel N] [options]",
     "offline jobs: each line a /v1/completions or /v1/chat/completions body, each answered by the server's response "
     "object (or its error object), in input order, --parallel at a time (docs/cli.md)",
     "model draft file output parallel tokens gamma sampler lookup no-lookup tree-width tree draft-p-min ctx "
     "threads draft-threads quant draft-quant help", 0, 0, server_texts},
    {"render", cmd_render,
     "render -m DIR [-f MESSAGES.json] [--tools TOOLS.json] [--add-generation-prompt] [--print-ids] "
     "[--chat-var NAME=JSON]...",
     "print a conversation (a JSON list of {role, content}; standard input by default) as the checkpoint's chat "
     "template renders it, or its token ids", "model file tools add-generation-prompt print-ids chat-var help", 0, 0,
     render_texts},
    {"chat", cmd_chat, "chat [-m DIR [-d DRAFT_DIR]] [--lookup | --no-lookup] [--system TEXT] [options]",
     "talk with an instruct model: user messages from standard input (line editing on a terminal), replies "
     "streamed; /reset starts over, /exit (or end of input) ends",
     "model draft tokens temp top-k top-p min-p repetition-penalty presence-penalty frequency-penalty seed gamma "
     "sampler lookup no-lookup tree-width tree pipeline draft-p-min ctx threads draft-threads quant draft-quant "
     "stats show system chat-var tools stop grammar json-schema json help", 0, 0, drafting_texts},
    {"convert", cmd_convert, "convert -m DIR -o FILE.gguf --type bf16|q8_0|q4_0|q4_k_m|q5_k_m|q6_k [--threads N]",
     "write a Hugging Face checkpoint folder as a GGUF file, as llama.cpp's converter (and llama-quantize) would",
     "model output type threads help", 0, 0, convert_texts},
    {"inspect", cmd_inspect, "inspect PATH | -m PATH",
     "show the header and tensor table of a safetensors file or folder, or of a GGUF file",
     "model help", 0, 1, inspect_texts},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void print_help(FILE *out, const Command *cmd) {
    if (cmd) {
        args_print_help(out, cmd);
        return;
    }
    fprintf(out, "specdec — transformer inference (GPT-2, Llama, Mistral, Qwen2, Qwen3) with speculative decoding, on the CPU\n\n"
                 "usage: specdec COMMAND [options]     specdec --version\n\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'specdec COMMAND --help' lists a command's options.\n");
}

// ---- generate -----------------------------------------------------------------------------------------------

// A trace file's stream keeps the errno of its first failed write: stdio reports only that a write failed, and
// once it has dropped the failed buffer a later flush may have nothing left to fail with (a trace a little longer
// than the buffer, written to /dev/full, ended "write error" one run in ten).
typedef struct {
    int fd;
    int write_errno;  // of the first write that failed, else 0
} TraceFile;

static ssize_t trace_file_write(void *cookie, const char *buf, size_t size) {
    TraceFile *t = cookie;
    const ssize_t written = write(t->fd, buf, size);
    if (written < 0 && !t->write_errno) t->write_errno = errno;
    return written;
}

static int trace_file_close(void *cookie) {
    TraceFile *t = cookie;
    const int rc = close(t->fd);
    free(t);
    return rc;
}

// The --trace stream. "-" is standard error. A path naming the file, pipe or terminal that stderr or stdout already
// writes to (/dev/stderr, say) is that stream: opened anew it would have a file offset of its own, and the two
// would overwrite each other's lines (the statistics line was lost that way). Any other path is created, or
// truncated only if it is a regular file: a FIFO or a device is opened for appending.
static int open_trace(const char *path, const char *what, FILE **trace, TraceFile **file, Err *err) {
    *file = NULL;
    if (strcmp(path, "-") == 0) {
        *trace = stderr;
        return 0;
    }
    struct stat named, standard;
    const bool exists = stat(path, &named) == 0;
    FILE *const streams[] = {stderr, stdout};
    for (int i = 0; i < 2 && exists; i++)
        if (fstat(fileno(streams[i]), &standard) == 0 && named.st_dev == standard.st_dev &&
            named.st_ino == standard.st_ino) {
            *trace = streams[i];
            return 0;
        }
    const int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (!exists || S_ISREG(named.st_mode) ? O_TRUNC : O_APPEND),
                        0666);
    if (fd < 0) return err_fmt(err, "%s: cannot write the %s: %s", path, what, strerror(errno));
    *file = malloc(sizeof **file);
    if (*file) **file = (TraceFile){.fd = fd};
    if (!*file || !(*trace = fopencookie(*file, "w", (cookie_io_functions_t){.write = trace_file_write,
                                                                             .close = trace_file_close}))) {
        close(fd);
        free(*file);
        return err_fmt(err, "%s: out of memory for the %s's stream", path, what);
    }
    return 0;
}

// --logprobs K's lines, one per generated token, in order: {"i", "kind"} and chat's logprobs entry with ids,
// {"token", "id", "logprob", "bytes", "top_logprobs": [{"token", "id", "logprob", "bytes"}]} (api.h), each value
// printed with 9 significant digits, which read back as the same float.
typedef struct {
    FILE *f;
    TraceFile *file;            // f's, where it is a file of its own (open_trace)
    const Tokenizer *tok;
    int i;                      // the next token's index in the output
} LogprobsLines;

static void write_logprobs_line(void *ctx, const TokenLogprobs *lp, TokenKind kind) {
    LogprobsLines *l = ctx;
    json_t *line = json_pack("{s:i, s:s}", "i", l->i, "kind", spec_token_kind_name(kind));
    json_t *entry = api_token_logprobs(l->tok, lp, true);
    if (line && entry) json_object_update(line, entry);
    json_decref(entry);
    char *text = line ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9)) : NULL;
    fprintf(l->f, "%s\n", text ? text : "{\"error\": \"out of memory\"}");
    l->i++;
    free(text);
    json_decref(line);
}

// Flushes f, named `name` in the message: a write to it that failed, now or earlier (a full disk, /dev/full), is
// an error, named by the errno that `file` kept where f is a trace file's stream. (A reader that went away ends the
// process quietly by SIGPIPE: main restores its default action.)
static int check_written(FILE *f, const char *name, const TraceFile *file, Err *err) {
    errno = 0;
    if (fflush(f) == 0 && !ferror(f)) return 0;
    const int cause = file && file->write_errno ? file->write_errno : errno;
    return err_fmt(err, "%s: %s", name, cause ? strerror(cause) : "write error");
}

// check_written for a stream opened by open_trace from path (none: NULL); stderr is not checked.
static int check_stream_written(FILE *f, const char *path, const TraceFile *file, Err *err) {
    return f && f != stderr ? check_written(f, f == stdout ? "stdout" : path, file, err) : 0;
}

// The checks of generate's options that need no model.
static int check_generate_options(const Args *args, Err *err) {
    if (!!args->ids + !!args->prompt + !!args->file > 1)
        return err_fmt(err, "give the prompt once: as -p TEXT, -f FILE or --ids \"1 2 3\"");
    if (!args->ids && !args->prompt && !args->file)
        return err_fmt(err, "missing prompt: give -p TEXT, -f FILE (- : standard input) or --ids \"1 2 3\"");
    if (args->chat && args->ids) return err_fmt(err, "--chat takes the user's message as -p TEXT or -f FILE");
    if (args->system && !args->chat) return err_fmt(err, "--system is the system message of --chat");
    if (args->chat_vars.n && !args->chat) return err_fmt(err, "--chat-var is a variable of --chat's template");
    if (args->tools && !args->chat) return err_fmt(err, "--tools FILE gives its tools to --chat's template");
    if ((args->logprobs >= 0) != (args->logprobs_file != NULL))
        return err_fmt(err, "--logprobs K and --logprobs-file FILE go together: K alternatives per token, written to "
                       "FILE (- for stderr)");
    if (args->stops.n && (args->show || args->print_ids || args->compare))
        return err_fmt(err, "--stop prints the text up to the stop string: not with --show, --print-ids or --compare");
    return 0;
}

// How a message names where a text came from: the file, or standard input ("-").
static const char *text_source(const char *file) { return strcmp(file, "-") == 0 ? "standard input" : file; }

// -1 naming `source` and the first byte that is not UTF-8 where the text holds one (before any model is loaded).
static int check_utf8(const char *text, size_t len, const char *source, Err *err) {
    const size_t bad = utf8_invalid_offset(text, len);
    return bad < len ? err_fmt(err, "%s: invalid UTF-8 at byte %zu (0x%02X); expected UTF-8 text", source, bad,
                               (unsigned char)text[bad])
                     : 0;
}

// The prompt's text: -p TEXT, or what -f FILE, -f - or -p - read into *read (the caller frees it). *text is NULL
// when the prompt is --ids.
static int prompt_text(const Args *args, char **read, const char **text, size_t *len, Err *err) {
    const char *from = args->file;
    if (!from && args->prompt && strcmp(args->prompt, "-") == 0) from = "-";
    if (from) {
        if (read_file(from, read, len, err)) return -1;
        *text = *read;
        if (check_utf8(*text, *len, text_source(from), err) == 0) return 0;
        free(*read);
        *read = NULL;
        return -1;
    }
    *text = args->prompt;
    *len = *text ? strlen(*text) : 0;
    return *text ? check_utf8(*text, *len, "--prompt", err) : 0;
}

// The prompt's ids: the text as the user's message through the checkpoint's chat template (--chat, with the
// variables chat_vars; *format the call format it teaches), or the text tokenized with the checkpoint's special
// tokens (BOS), or --ids; every id inside the target's vocabulary.
static int prompt_ids(const Args *args, const char *target_dir, const Tokenizer *tok, const Model *target,
                      const char *text, size_t len, const json_t *chat_vars, ToolFormat *format, int **prompt,
                      int *n_prompt, Err *err) {
    int rc;
    if (text && args->chat)
        rc = chat_prompt_ids(target_dir, tok, args->system, text, len, chat_vars, format, prompt, n_prompt, err);
    else if (text)
        rc = tokenizer_encode(tok, text, len, args->allow_special, prompt, n_prompt, err) ||
             tokenizer_add_special_tokens(tok, prompt, n_prompt, err);
    else
        rc = parse_ids(args->ids, prompt, n_prompt, err);
    if (rc) return -1;
    if (*n_prompt == 0) return err_fmt(err, "the prompt is empty");
    for (int i = 0; i < *n_prompt; i++)
        if ((*prompt)[i] >= target->cfg.vocab_size)
            return err_fmt(err, "prompt token id %d is outside the vocabulary [0, %d) of %s", (*prompt)[i],
                           target->cfg.vocab_size, target_dir);
    return 0;
}

// Where decided tokens go: the printer (text, --show's marks, or --print-ids), or with --stop the stop-string
// printer, which ends the run where a stop string completes. tok is NULL without a tokenizer.
static int open_output(const Args *args, const Tokenizer *tok, Printer *printer, StopPrinter *stopper,
                       SpecParams *params, Err *err) {
    printer_init(printer, stdout, args->print_ids ? NULL : tok, args->show,
                 isatty(STDOUT_FILENO) && !getenv("NO_COLOR"), err);
    params->on_token = on_token;
    params->ctx = printer;
    if (args->show && printer->tok) fprintf(stderr, "%s\n", show_legend(printer->color));
    if (!args->stops.n) return 0;
    if (!tok) return err_fmt(err, "--stop needs the checkpoint's tokenizer, to read the text");
    if (stop_printer_init(stopper, stdout, tok, &args->stops, err)) return -1;
    params->on_token = NULL;
    params->stop = stop_printer_token;
    params->stop_ctx = stopper;
    return 0;
}

// The generation's grammar (--grammar, --json-schema, --json) over the target's ids, ending at its end-of-text ids.
static int constrain_generation(Structured *st, const Tokenizer *tok, const Session *s, Err *err) {
    return structured_constraint(st, tok, s->target.n_vocab, s->target.cfg.eos_ids, s->target.cfg.n_eos, err);
}

// With --tools: the reply read back into calls in the template's format, each printed on stderr (cli/chat.h).
static int print_tool_calls(const Tokenizer *tok, ToolFormat format, const int *out, int n_out, Err *err) {
    char *text;
    size_t len, content_len;
    if (tokenizer_decode(tok, out, n_out, &text, &len, err)) return -1;
    json_decref(chat_print_tool_calls(stderr, format, text, len, &content_len));
    free(text);
    return 0;
}

static int cmd_generate(const Args *args, Err *err) {
    const char *target_dir, *draft_dir;
    SpecParams params;
    if (check_generate_options(args, err) || model_dirs(args, &target_dir, &draft_dir, err) ||
        spec_params_from_args(args, &params, err))
        return -1;
    Session s;
    Tokenizer tok;
    bool have_tok = false;
    Printer printer = {0};
    StopPrinter stopper = {0};
    Drafters drafters = {0};
    int *prompt = NULL, *out = NULL, n_prompt = 0, n_out = 0, rc = -1;
    FILE *trace = NULL;
    TraceFile *trace_file = NULL;  // trace's, where it is a file of its own (open_trace)
    LogprobsLines logprobs = {0};
    char *read = NULL;
    const char *text;
    size_t text_len;
    Structured structured;
    json_t *chat_vars = NULL;  // --chat's template variables (--chat-var, --tools)
    ToolFormat format = TOOL_FORMAT_NONE;
    if (structured_read(&structured, args->grammar, args->json_schema, args->json, err)) return -1;
    if (prompt_text(args, &read, &text, &text_len, err)) {
        structured_free(&structured);
        return -1;
    }
    if (session_open_from_args(&s, args, target_dir, draft_dir, err)) goto done;
    if (load_tokenizer(&tok, target_dir, text != NULL || structured.grammar || args->logprobs_file, &have_tok, err))
        goto done;
    if (have_tok && tokenizer_vocab_size(&tok) < s.target.n_vocab)  // padding rows of the embedding table: the
        model_limit_vocab(&s.target, tokenizer_vocab_size(&tok));    // ids past the tokenizer's are never sampled
    if ((args->chat && !(chat_vars = chat_template_vars(args, err))) ||
        prompt_ids(args, target_dir, &tok, &s.target, text, text_len, chat_vars, &format, &prompt, &n_prompt, err) ||
        chat_tools_grammar(&structured, args->tools, format, chat_vars, have_tok ? &tok : NULL, err))
        goto done;
    if (args->trace && open_trace(args->trace, "trace", &trace, &trace_file, err)) goto done;
    params.eos_id = s.target.cfg.eos_token_id;
    params.eos_ids = s.target.cfg.eos_ids;
    params.n_eos = s.target.cfg.n_eos;
    params.trace = trace;
    if (args->logprobs_file) {
        if (open_trace(args->logprobs_file, "log-probabilities", &logprobs.f, &logprobs.file, err)) goto done;
        logprobs.tok = &tok;
        params.on_logprobs = write_logprobs_line;
        params.logprobs_ctx = &logprobs;
        params.top_logprobs = args->logprobs;
    }
    if (structured.grammar) {
        if (constrain_generation(&structured, &tok, &s, err)) goto done;
        params.constraint = &structured.constraint;
        params.forced_drafts = true;
    }
    if (open_output(args, have_tok ? &tok : NULL, &printer, &stopper, &params, err)) goto done;

    out = malloc(sizeof(int) * (args->n_tokens + 1));
    if (!out) {
        err_fmt(err, "out of memory for %d tokens", args->n_tokens);
        goto done;
    }
    if (drafter_open(&drafters, drafter_kind(s.has_draft, session_drafts_by_lookup(args, s.has_draft)), &s.draft,
                     &params, args->draft_p_min, LOOKUP_STAGED_MIN_MATCH, err))
        goto done;
    SpecStats stats;
    InterruptStop interrupt;  // Ctrl-C ends the generation at its next token; what it decided is printed, then
    interrupt_wrap_stop(&params, &interrupt);  // the process dies by SIGINT (the load before dies at once)
    interrupt_catch(true);
    if (speculative_generate(&s.target, drafters.drafter, prompt, n_prompt, &params, out, &n_out, &stats, err)) goto done;
    if (args->stops.n ? stop_printer_finish(&stopper, "stdout", err) : printer_finish(&printer, "stdout", err))
        goto done;
    interrupt_die_if_requested();
    if (args->tools && print_tool_calls(&tok, format, out, n_out, err)) goto done;
    // The loop stops when the committed tokens overrun the context by one (the last is sampled, never fed).
    const int n_ctx = s.target.cfg.n_positions;
    if (n_out < args->n_tokens && n_prompt + n_out > n_ctx)
        fprintf(stderr, "specdec: stopped after %d of the %d token%s asked for (-n): the prompt's %d token%s and the "
                "text fill the context of %d positions (the model's own, or less: --ctx)\n", n_out, args->n_tokens,
                plural(args->n_tokens), n_prompt, plural(n_prompt), n_ctx);
    if (args->stats && print_stats(&s, drafters.drafter != NULL, &stats, prompt, n_prompt, out, n_out, err)) goto done;
    if (args->compare && drafters.drafter &&
        ((structured.grammar && constrain_generation(&structured, &tok, &s, err)) ||  // the grammar from its start
         compare_with_target_only(&s, args->n_tokens, &params, &stats, prompt, n_prompt, out, n_out, err)))
        goto done;
    rc = check_stream_written(trace, args->trace, trace_file, err) ||
                 check_stream_written(logprobs.f, args->logprobs_file, logprobs.file, err)
             ? -1
             : 0;
done:
    if (trace && trace != stderr && trace != stdout) fclose(trace);
    if (logprobs.f && logprobs.f != stderr && logprobs.f != stdout) fclose(logprobs.f);
    printer_free(&printer);
    stop_printer_free(&stopper);
    drafter_close(&drafters);
    if (have_tok) tokenizer_free(&tok);
    structured_free(&structured);
    json_decref(chat_vars);
    free(read);
    free(prompt);
    free(out);
    session_close(&s);
    return rc;
}

// ---- the other commands -------------------------------------------------------------------------------------

static int cmd_logits(const Args *args, Err *err) {
    Session s = {0};  // closed at done:, also when the ids are refused before it opens
    KVCache cache = {0};
    int *ids = NULL, n = 0, rc = -1;
    float *logits = NULL;
    if (!args->ids) return err_fmt(err, "missing --ids \"1 2 3\"");
    if (parse_ids(args->ids, &ids, &n, err) ||
        session_open(&s, args->model_dir, NULL, args->threads, args->quant, NULL, args->ctx ? args->ctx : n, err) ||
        model_kv_init(&s.target, &cache, err))
        goto done;
    session_note_context(&s, args->ctx);
    const int V = s.target.n_vocab, rows = args->all ? n : 1;
    logits = malloc(sizeof(float) * V * rows);
    if (!logits || model_forward(&s.target, &cache, ids, n, logits, args->all, err)) goto done;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < V; i++) printf("%.7g%c", logits[(size_t)r * V + i], i + 1 == V ? '\n' : ' ');
    rc = 0;
done:
    free(ids);
    free(logits);
    kv_free(&cache);
    session_close(&s);
    return rc;
}

static const char *tokenizer_dir(const Args *args) { return args->model_dir ? args->model_dir : DEFAULT_TARGET; }

static int cmd_tokenize(const Args *args, Err *err) {
    Tokenizer tok;
    bool loaded;
    char *text = NULL;
    size_t len = 0;
    int *ids = NULL, n = 0, rc = -1;
    if (load_tokenizer(&tok, tokenizer_dir(args), true, &loaded, err)) return -1;
    if (args->n_positional == 1 && args->file) {
        err_fmt(err, "give the text as an argument or as -f FILE, not both");
        goto done;
    }
    if (args->n_positional == 1) {
        len = strlen(args->positional[0]);
        text = strdup(args->positional[0]);
    } else if (read_file(args->file ? args->file : "-", &text, &len, err)) {
        goto done;
    }
    if (check_utf8(text, len, args->n_positional == 1 ? "the text" : text_source(args->file ? args->file : "-"), err) ||
        tokenizer_encode(&tok, text, len, args->allow_special, &ids, &n, err))
        goto done;
    for (int i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    rc = 0;
done:
    free(text);
    free(ids);
    tokenizer_free(&tok);
    return rc;
}

static int cmd_detokenize(const Args *args, Err *err) {
    // All the ids first (each argument may hold several), so that a bad one prints nothing.
    size_t chars = 1;
    for (int i = 0; i < args->n_positional; i++) chars += strlen(args->positional[i]) + 1;
    char *joined = malloc(chars), *text = NULL;
    int *ids = NULL, n = 0, rc = -1;
    size_t len;
    if (!joined) return err_fmt(err, "out of memory");
    joined[0] = '\0';
    for (int i = 0; i < args->n_positional; i++) strcat(strcat(joined, args->positional[i]), " ");
    Tokenizer tok;
    bool loaded = false;
    if (parse_ids(joined, &ids, &n, err) || load_tokenizer(&tok, tokenizer_dir(args), true, &loaded, err) ||
        tokenizer_decode(&tok, ids, n, &text, &len, err))
        goto done;
    fwrite(text, 1, len, stdout);
    rc = 0;
done:
    if (loaded) tokenizer_free(&tok);
    free(joined);
    free(ids);
    free(text);
    return rc;
}

// PATH, or -m PATH as the other commands name a checkpoint: one of them.
static int cmd_inspect(const Args *args, Err *err) {
    if ((args->n_positional == 1) == (args->model_dir != NULL))
        return err_fmt(err, "inspect: give the file or folder once, as PATH or -m PATH");
    const char *path = args->model_dir ? args->model_dir : args->positional[0];
    char gguf_path[4096];
    if (gguf_checkpoint_path(path, gguf_path, sizeof gguf_path)) {
        GgufFile f;
        if (gguf_open(&f, gguf_path, err)) return -1;
        gguf_print(stdout, &f);
        gguf_close(&f);
        return 0;
    }
    StCheckpoint ckpt;
    if (st_open(&ckpt, path, err)) return -1;
    st_print(stdout, &ckpt);
    st_close(&ckpt);
    return 0;
}

static int cmd_convert(const Args *args, Err *err) {
    ConvertType type;
    if (!args->model_dir) return err_fmt(err, "convert: -m DIR is required (a Hugging Face checkpoint folder)");
    if (!args->output) return err_fmt(err, "convert: -o FILE.gguf is required");
    if (convert_type_parse(args->type, &type, err)) return -1;
    char gguf_path[4096];
    if (gguf_checkpoint_path(args->model_dir, gguf_path, sizeof gguf_path))
        return err_fmt(err, "convert: %s is a GGUF file already; -m takes a Hugging Face folder", args->model_dir);
    ThreadPool *pool = pool_create(args->threads, err);
    if (!pool) return -1;
    ChatTemplate ct;
    Err why;
    const bool templated = chat_template_load(&ct, args->model_dir, &why) == 0;
    int rc = gguf_convert(args->model_dir, args->output, type, templated ? ct.source : NULL, pool, err);
    if (templated) chat_template_free(&ct);
    pool_free(pool);
    return rc;
}

// `specdec --version`, `specdec --help` (or -h), and the two together (help wins): 0 when argv[1] is one of
// them (done), 1 when it is not, -1 for another option among them.
static int global_options(int argc, char **argv, Err *err) {
    bool help = false, version = false;
    for (int i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) help = true;
        else if (strcmp(argv[i], "--version") == 0) version = true;
        else return err_fmt(err, "unknown option %s (see 'specdec --help')", argv[i]);
    }
    if (help) print_help(stdout, NULL);
    else if (version) printf("specdec %s\n", SPECDEC_VERSION);
    return help || version ? 0 : 1;
}

// The subcommand that argv[1] names, run with its options (or its help printed).
static int run_command_line(int argc, char **argv, Err *err) {
    if (argc < 2) return err_fmt(err, "usage: specdec COMMAND [options] (see 'specdec --help')");
    int global = global_options(argc, argv, err);
    if (global <= 0) return global;
    const Command *cmd = NULL;
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) cmd = &commands[i];
    if (!cmd) return err_fmt(err, "unknown command '%s' (see 'specdec --help')", argv[1]);
    Args args = {.n_tokens = 64, .sampling = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}, .port = 8080,
                 .penalties = PENALTIES_OFF, .logprobs = -1,
                 .queue = 8, .parallel = 4, .max_body = 1 << 20, .timeout = 30};
    if (args_parse(&args, cmd, argc - 2, argv + 2, err)) return -1;
    if (!args.help) return cmd->run(&args, err);
    print_help(stdout, cmd);
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_DFL);  // even if the parent ignored it: a closed pipe ends the output quietly
    Err err = {{0}};
    if (run_command_line(argc, argv, &err) || check_written(stdout, "stdout", NULL, &err)) {
        fprintf(stderr, "specdec: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    return 0;
}
