// main.c — the specdec command line: a table of subcommands and one function per subcommand (the options are
// in args.c, loading in session.c, the reports in report.c). Generated text goes to stdout, statistics and errors
// to stderr; bad input exits with status 2.
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "cli/args.h"
#include "cli/chat.h"
#include "cli/report.h"
#include "cli/serve.h"
#include "cli/session.h"
#include "speculative/sampling.h"
#include "speculative/speculative.h"

static int cmd_generate(const Args *args, Err *err);
static int cmd_logits(const Args *args, Err *err);
static int cmd_tokenize(const Args *args, Err *err);
static int cmd_detokenize(const Args *args, Err *err);
static int cmd_inspect(const Args *args, Err *err);

static const Command commands[] = {
    {"generate", cmd_generate, "generate [-m DIR [-d DRAFT_DIR]] (-p TEXT | --ids \"1 2 3\") [options]",
     "continue a prompt; speculatively with a draft model (the shipped pair when no -m is given)",
     "model draft ids prompt tokens temp top-k top-p seed gamma sampler lookup tree-width tree draft-p-min ctx threads "
     "draft-threads "
     "quant draft-quant print-ids stats show trace compare allow-special chat system chat-var stop help", 0, 0},
    {"logits", cmd_logits, "logits -m DIR --ids \"1 2 3\" [--all]",
     "print the logits of the last position (all with --all), one line of %.7g values per position",
     "model ids all ctx threads quant help", 0, 0},
    {"tokenize", cmd_tokenize, "tokenize -m DIR [TEXT | -f FILE]  (no TEXT and no -f: standard input)",
     "print the token ids of a text, space-separated on one line", "model file allow-special help", 0, 1},
    {"detokenize", cmd_detokenize, "detokenize -m DIR ID...", "print the text of token ids", "model help", 1,
     MAX_POSITIONAL},
    {"serve", cmd_serve, "serve [-m DIR [-d DRAFT_DIR]] [--lookup] [--host 127.0.0.1] [--port 8080] [--api-key KEY] "
     "[options]", "an OpenAI-compatible HTTP server (docs/server.md); speculative with a draft model or --lookup",
     "model draft tokens gamma sampler lookup tree-width tree draft-p-min ctx threads draft-threads quant draft-quant "
     "host port api-key queue max-body timeout help", 0, 0},
    {"render", cmd_render,
     "render -m DIR [-f MESSAGES.json] [--add-generation-prompt] [--print-ids] [--chat-var NAME=JSON]...",
     "print a conversation (a JSON list of {role, content}; standard input by default) as the checkpoint's chat "
     "template renders it, or its token ids", "model file add-generation-prompt print-ids chat-var help", 0, 0},
    {"chat", cmd_chat, "chat [-m DIR [-d DRAFT_DIR]] [--lookup] [--system TEXT] [options]",
     "talk with an instruct model: user messages from standard input (line editing on a terminal), replies "
     "streamed; /reset starts over, /exit (or end of input) ends",
     "model draft tokens temp top-k top-p seed gamma sampler lookup tree-width tree draft-p-min ctx threads "
     "draft-threads quant draft-quant stats show system chat-var stop help", 0, 0},
    {"inspect", cmd_inspect, "inspect PATH", "show the header and tensor table of a safetensors file or folder",
     "help", 1, 1},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static void print_help(FILE *out, const Command *cmd) {
    if (cmd) {
        args_print_help(out, cmd);
        return;
    }
    fprintf(out, "specdec — GPT-2 inference with speculative decoding, on the CPU\n\n"
                 "usage: specdec COMMAND [options]     specdec --version\n\n");
    for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'specdec COMMAND --help' lists a command's options.\n");
}

// ---- generate -----------------------------------------------------------------------------------------------

// The --trace stream. "-" is standard error. A path naming the file, pipe or terminal that stderr or stdout already
// writes to (/dev/stderr, say) is that stream: opened anew it would have a file offset of its own, and the two
// would overwrite each other's lines (the statistics line was lost that way). Any other path is created, or
// truncated only if it is a regular file: a FIFO or a device is opened for appending.
static int open_trace(const char *path, FILE **trace, Err *err) {
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
    if (!(*trace = fopen(path, !exists || S_ISREG(named.st_mode) ? "w" : "a")))
        return err_fmt(err, "%s: cannot write the trace: %s", path, strerror(errno));
    return 0;
}

static int cmd_generate(const Args *args, Err *err) {
    const char *target_dir, *draft_dir;
    if (model_dirs(args, &target_dir, &draft_dir, err)) return -1;
    SpecParams params;
    if (spec_params_from_args(args, &params, err)) return -1;
    if (args->ids && args->prompt) return err_fmt(err, "give the prompt as --ids or as -p, not both");
    if (!args->ids && !args->prompt) return err_fmt(err, "missing prompt: give -p TEXT or --ids \"1 2 3\"");
    if (args->chat && !args->prompt) return err_fmt(err, "--chat takes the user's message as -p TEXT");
    if (args->system && !args->chat) return err_fmt(err, "--system is the system message of --chat");
    if (args->stops.n && (args->show || args->print_ids || args->compare))
        return err_fmt(err, "--stop prints the text up to the stop string: not with --show, --print-ids or --compare");

    Session s;
    Tokenizer tok;
    bool have_tok = false;
    Printer printer = {0};
    StopPrinter stopper = {0};
    ModelDrafter drafter = {0};
    LookupDrafter lookup = {0};
    StagedDrafter staged;
    int *prompt = NULL, *out = NULL, n_prompt = 0, n_out = 0, rc = -1;
    FILE *trace = NULL;
    if (session_open(&s, target_dir, draft_dir, args->threads, args->quant, args->draft_quant,
                     args->ctx ? args->ctx : DEFAULT_CONTEXT, err) ||
        session_draft_threads(&s, args->draft_threads, err))
        goto done;
    if ((args->tree_width > 1 || args->tree) && !s.has_draft && !args->lookup) {
        err_fmt(err, "--tree-width and --tree draft a tree: give a draft model (-d DIR) or --lookup");
        goto done;
    }
    if (load_tokenizer(&tok, target_dir, args->prompt != NULL, &have_tok, err)) goto done;
    if (have_tok && tokenizer_vocab_size(&tok) < s.target.n_vocab)  // padding rows of the embedding table: the
        model_limit_vocab(&s.target, tokenizer_vocab_size(&tok));    // ids past the tokenizer's are never sampled
    if (args->chat && args->prompt
            ? chat_prompt_ids(target_dir, &tok, args->system, args->prompt, &args->chat_vars, &prompt, &n_prompt, err)
        : args->prompt ? tokenizer_encode(&tok, args->prompt, strlen(args->prompt), args->allow_special, &prompt,
                                          &n_prompt, err) ||
                             tokenizer_add_special_tokens(&tok, &prompt, &n_prompt, err)  // BOS, as the checkpoint's
                       : parse_ids(args->ids, &prompt, &n_prompt, err))
        goto done;
    if (n_prompt == 0) {
        err_fmt(err, "the prompt is empty");
        goto done;
    }
    for (int i = 0; i < n_prompt; i++)
        if (prompt[i] >= s.target.cfg.vocab_size) {
            err_fmt(err, "prompt token id %d is outside the vocabulary [0, %d) of %s", prompt[i],
                    s.target.cfg.vocab_size, target_dir);
            goto done;
        }
    if (args->trace && open_trace(args->trace, &trace, err)) goto done;
    params.eos_id = s.target.cfg.eos_token_id;
    params.eos_ids = s.target.cfg.eos_ids;
    params.n_eos = s.target.cfg.n_eos;
    params.trace = trace;
    params.on_token = on_token;
    params.ctx = &printer;
    printer_init(&printer, stdout, have_tok && !args->print_ids ? &tok : NULL, args->show,
                 isatty(STDOUT_FILENO) && !getenv("NO_COLOR"), err);
    if (args->stops.n) {
        if (!have_tok) {
            err_fmt(err, "--stop needs the checkpoint's tokenizer, to read the text");
            goto done;
        }
        if (stop_printer_init(&stopper, stdout, &tok, &args->stops, err)) goto done;
        params.on_token = NULL;
        params.stop = stop_printer_token;
        params.stop_ctx = &stopper;
    }
    if (args->show) fprintf(stderr, "%s\n", show_legend(printer.color));

    out = malloc(sizeof(int) * (args->n_tokens + 1));
    if (s.has_draft && model_drafter_init(&drafter, &s.draft, &params, args->draft_p_min, err)) goto done;
    if (args->lookup && lookup_drafter_init(&lookup, LOOKUP_N_MIN, LOOKUP_N_MAX, err)) goto done;
    if (args->lookup && s.has_draft) staged_drafter_init(&staged, &lookup, &drafter, LOOKUP_STAGED_MIN_MATCH);
    Drafter *drafting = args->lookup && s.has_draft ? &staged.base : args->lookup ? &lookup.base
                        : s.has_draft ? &drafter.base : NULL;
    SpecStats stats;
    if (speculative_generate(&s.target, drafting, prompt, n_prompt, &params, out, &n_out, &stats, err)) goto done;
    if (args->stops.n) stop_printer_finish(&stopper);
    else printer_finish(&printer);
    if (stopper.failed) goto done;  // err says why
    // The loop stops when the committed tokens overrun the context by one (the last is sampled, never fed).
    const int n_ctx = s.target.cfg.n_positions;
    if (n_out < args->n_tokens && n_prompt + n_out > n_ctx)
        fprintf(stderr, "specdec: stopped after %d of the %d tokens asked for (-n): the prompt's %d tokens and the "
                "text fill the context of %d positions (the model's own, or less: --ctx)\n", n_out, args->n_tokens,
                n_prompt, n_ctx);

    if (args->stats && print_stats(&s, &stats, prompt, n_prompt, out, n_out, err)) goto done;
    if (args->compare && (s.has_draft || args->lookup) &&
        compare_with_target_only(&s, args->n_tokens, &params, &stats, prompt, n_prompt, out, n_out, err))
        goto done;
    rc = 0;
done:
    if (trace && trace != stderr && trace != stdout) fclose(trace);
    printer_free(&printer);
    stop_printer_free(&stopper);
    if (drafter.logits) model_drafter_free(&drafter);
    lookup_drafter_free(&lookup);
    if (have_tok) tokenizer_free(&tok);
    free(prompt);
    free(out);
    session_close(&s);
    return rc;
}

// ---- the other commands -------------------------------------------------------------------------------------

static int cmd_logits(const Args *args, Err *err) {
    Session s;
    KVCache cache = {0};
    int *ids = NULL, n = 0, rc = -1;
    float *logits = NULL;
    if (!args->ids) return err_fmt(err, "missing --ids \"1 2 3\"");
    if (parse_ids(args->ids, &ids, &n, err) ||
        session_open(&s, args->model_dir, NULL, args->threads, args->quant, NULL, args->ctx ? args->ctx : n, err) ||
        model_kv_init(&s.target, &cache, err))
        goto done;
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
    if (tokenizer_encode(&tok, text, len, args->allow_special, &ids, &n, err)) goto done;
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

static int cmd_inspect(const Args *args, Err *err) {
    StCheckpoint ckpt;
    if (st_open(&ckpt, args->positional[0], err)) return -1;
    st_print(stdout, &ckpt);
    st_close(&ckpt);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("specdec %s\n", SPECDEC_VERSION);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        print_help(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? EXIT_BAD_INPUT : 0;
    }
    const Command *cmd = NULL;
    for (int i = 0; i < N_COMMANDS; i++)
        if (strcmp(argv[1], commands[i].name) == 0) cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr, "specdec: unknown command '%s' (see 'specdec --help')\n", argv[1]);
        return EXIT_BAD_INPUT;
    }
    Args args = {.n_tokens = 64, .sampling = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}, .port = 8080,
                 .queue = 8, .max_body = 1 << 20, .timeout = 30};
    Err err = {{0}};
    if (args_parse(&args, cmd, argc - 2, argv + 2, &err)) {
        fprintf(stderr, "specdec: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    if (args.help) {
        print_help(stdout, cmd);
        return 0;
    }
    if (cmd->run(&args, &err)) {
        fprintf(stderr, "specdec: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    return 0;
}
