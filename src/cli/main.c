// main.c — the specdec command line: a table of subcommands, a table of options, and one function per
// subcommand. Generated text goes to stdout, statistics and errors to stderr; bad input exits with status 2.
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "model/model.h"
#include "checkpoint/safetensors.h"
#include "speculative/sampling.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

// The model pair that ships in weights/, used when neither -m nor -d is given.
#define DEFAULT_TARGET "weights/pystd/target"
#define DEFAULT_DRAFT "weights/pystd/draft"

// ---- arguments ----------------------------------------------------------------------------------------------

enum { MAX_POSITIONAL = 4096 };

typedef struct {
    const char *model_dir;      // -m
    const char *draft_dir;      // -d
    const char *ids;            // --ids "1 2 3"
    const char *prompt;         // -p
    const char *file;           // -f
    const char *gamma;          // --gamma N | heuristic | auto
    const char *trace;          // --trace FILE
    float draft_p_min;          // --draft-p-min
    int n_tokens;               // -n
    SamplingParams sampling;    // --temp, --top-k, --top-p
    uint64_t seed;              // --seed
    int threads;                // --threads (0 = all cores)
    bool print_ids, stats, all, show, compare, allow_special, help;
    const char *positional[MAX_POSITIONAL];
    int n_positional;
} Args;

typedef enum { OPT_FLAG, OPT_INT, OPT_FLOAT, OPT_STRING, OPT_U64 } OptType;

typedef struct {
    const char *name;   // --name
    char short_name;    // -x, or 0
    OptType type;
    size_t offset;      // of the field in Args
    double min, max;    // accepted range of a number
    const char *help;
} Option;

#define FIELD(f) offsetof(Args, f)
static const Option options[] = {
    {"model", 'm', OPT_STRING, FIELD(model_dir), 0, 0, "target checkpoint folder (config.json + model.safetensors)"},
    {"draft", 'd', OPT_STRING, FIELD(draft_dir), 0, 0, "draft checkpoint folder: decode speculatively"},
    {"ids", 0, OPT_STRING, FIELD(ids), 0, 0, "prompt as token ids, e.g. \"464 3290 318\""},
    {"prompt", 'p', OPT_STRING, FIELD(prompt), 0, 0, "prompt text"},
    {"file", 'f', OPT_STRING, FIELD(file), 0, 0, "read the text from FILE"},
    {"tokens", 'n', OPT_INT, FIELD(n_tokens), 0, 1 << 20, "tokens to generate (default 64)"},
    {"temp", 0, OPT_FLOAT, FIELD(sampling.temperature), 0, 100, "temperature; 0 = greedy (default 0)"},
    {"top-k", 0, OPT_INT, FIELD(sampling.top_k), 0, 1 << 24, "sample from the k most likely tokens; 0 = all"},
    {"top-p", 0, OPT_FLOAT, FIELD(sampling.top_p), 1e-6, 1, "nucleus sampling mass (default 1 = off)"},
    {"seed", 0, OPT_U64, FIELD(seed), 0, 0, "random seed (default 0)"},
    {"gamma", 0, OPT_STRING, FIELD(gamma), 0, 0, "draft length: N (1-16), heuristic, or auto (default)"},
    {"draft-p-min", 0, OPT_FLOAT, FIELD(draft_p_min), 0, 1, "stop drafting when the draft's top probability < P"},
    {"threads", 't', OPT_INT, FIELD(threads), 1, 1024, "worker threads (default: all cores)"},
    {"print-ids", 0, OPT_FLAG, FIELD(print_ids), 0, 0, "print the generated ids instead of text"},
    {"stats", 0, OPT_FLAG, FIELD(stats), 0, 0, "print one JSON line of statistics on stderr"},
    {"show", 0, OPT_FLAG, FIELD(show), 0, 0, "mark accepted, rejected and target tokens (colour on a terminal)"},
    {"trace", 0, OPT_STRING, FIELD(trace), 0, 0, "write one JSON line per speculative round to FILE"},
    {"compare", 0, OPT_FLAG, FIELD(compare), 0, 0, "also run target-only decoding and compare speeds"},
    {"allow-special", 0, OPT_FLAG, FIELD(allow_special), 0, 0, "\"<|endoftext|>\" in text is the special token"},
    {"all", 0, OPT_FLAG, FIELD(all), 0, 0, "logits of every position, not only the last"},
    {"help", 'h', OPT_FLAG, FIELD(help), 0, 0, "show this help"},
};
#define N_OPTIONS (int)(sizeof options / sizeof options[0])

typedef struct {
    const char *name;
    int (*run)(const Args *args, Err *err);
    const char *usage;
    const char *summary;
    const char *accepted;   // space-separated option names this command takes
    int min_positional, max_positional;
} Command;

static int cmd_generate(const Args *args, Err *err);
static int cmd_logits(const Args *args, Err *err);
static int cmd_tokenize(const Args *args, Err *err);
static int cmd_detokenize(const Args *args, Err *err);
static int cmd_inspect(const Args *args, Err *err);

static const Command commands[] = {
    {"generate", cmd_generate, "generate [-m DIR [-d DRAFT_DIR]] (-p TEXT | --ids \"1 2 3\") [options]",
     "continue a prompt; speculatively with a draft model (the shipped pair when no -m is given)",
     "model draft ids prompt tokens temp top-k top-p seed gamma draft-p-min threads print-ids stats show trace "
     "compare allow-special help", 0, 0},
    {"logits", cmd_logits, "logits -m DIR --ids \"1 2 3\" [--all]",
     "print the logits of the last position (all with --all), one line of %.7g values per position",
     "model ids all threads help", 0, 0},
    {"tokenize", cmd_tokenize, "tokenize -m DIR [TEXT | -f FILE]  (no TEXT and no -f: standard input)",
     "print the token ids of a text, space-separated on one line", "model file allow-special help", 0, 1},
    {"detokenize", cmd_detokenize, "detokenize -m DIR ID...", "print the text of token ids", "model help", 1,
     MAX_POSITIONAL},
    {"inspect", cmd_inspect, "inspect PATH", "show the header and tensor table of a safetensors file or folder",
     "help", 1, 1},
};
#define N_COMMANDS (int)(sizeof commands / sizeof commands[0])

static bool accepts(const Command *cmd, const char *name) {
    size_t len = strlen(name);
    for (const char *p = cmd->accepted; (p = strstr(p, name)); p += len)
        if ((p == cmd->accepted || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return true;
    return false;
}

static void print_help(FILE *out, const Command *cmd) {
    if (!cmd) {
        fprintf(out, "specdec — GPT-2 inference with speculative decoding, on the CPU\n\n"
                     "usage: specdec COMMAND [options]\n\n");
        for (int i = 0; i < N_COMMANDS; i++) fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
        fprintf(out, "\n'specdec COMMAND --help' lists a command's options.\n");
        return;
    }
    fprintf(out, "usage: specdec %s\n%s\n\noptions:\n", cmd->usage, cmd->summary);
    for (int i = 0; i < N_OPTIONS; i++) {
        const Option *o = &options[i];
        if (!accepts(cmd, o->name)) continue;
        char flag[64];
        if (o->short_name) snprintf(flag, sizeof flag, "-%c, --%s", o->short_name, o->name);
        else snprintf(flag, sizeof flag, "    --%s", o->name);
        fprintf(out, "  %-20s %s\n", flag, o->help);
    }
}

// Parses one option value into its field, checking syntax and range.
static int set_option(Args *args, const Option *o, const char *value, Err *err) {
    void *field = (char *)args + o->offset;
    char *end;
    errno = 0;
    switch (o->type) {
    case OPT_FLAG: *(bool *)field = true; return 0;
    case OPT_STRING: *(const char **)field = value; return 0;
    case OPT_U64: {
        unsigned long long v = strtoull(value, &end, 0);
        if (errno || end == value || *end || value[0] == '-')
            return err_fmt(err, "--%s: expected a non-negative integer, got \"%s\"", o->name, value);
        *(uint64_t *)field = v;
        return 0;
    }
    case OPT_INT: {
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max)
            return err_fmt(err, "--%s: expected an integer in [%g, %g], got \"%s\"", o->name, o->min, o->max, value);
        *(int *)field = (int)v;
        return 0;
    }
    case OPT_FLOAT: {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !(v >= o->min && v <= o->max))
            return err_fmt(err, "--%s: expected a number in [%g, %g], got \"%s\"", o->name, o->min, o->max, value);
        *(float *)field = (float)v;
        return 0;
    }
    }
    return 0;
}

static const Option *find_option(const char *arg) {
    for (int i = 0; i < N_OPTIONS; i++) {
        const Option *o = &options[i];
        if (arg[1] == '-' ? strcmp(arg + 2, o->name) == 0 : (arg[1] == o->short_name && arg[2] == '\0')) return o;
    }
    return NULL;
}

static int parse_args(Args *args, const Command *cmd, int argc, char **argv, Err *err) {
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (arg[0] != '-' || arg[1] == '\0' || (arg[1] >= '0' && arg[1] <= '9')) {  // "-", "-12": positional
            if (args->n_positional == MAX_POSITIONAL) return err_fmt(err, "too many arguments");
            args->positional[args->n_positional++] = arg;
            continue;
        }
        const Option *o = find_option(arg);
        if (!o || !accepts(cmd, o->name))
            return err_fmt(err, "%s: unknown option %s (see 'specdec %s --help')", cmd->name, arg, cmd->name);
        if (o->type != OPT_FLAG && i + 1 == argc) return err_fmt(err, "option %s needs a value", arg);
        if (set_option(args, o, o->type == OPT_FLAG ? NULL : argv[++i], err)) return -1;
    }
    if (args->help) return 0;
    if (args->n_positional < cmd->min_positional || args->n_positional > cmd->max_positional)
        return err_fmt(err, "usage: specdec %s", cmd->usage);
    return 0;
}

// ---- shared pieces of the commands --------------------------------------------------------------------------

// Parses token ids ("1 2 3" or "1,2,3") into a malloc'd array.
static int parse_ids(const char *text, int **ids_out, int *n_out, Err *err) {
    int cap = 16, n = 0;
    int *ids = malloc(sizeof(int) * cap);
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !strchr(" ,\t\n", *end))) {
            free(ids);
            return err_fmt(err, "token ids: expected non-negative integers separated by spaces, got \"%.40s\"", p);
        }
        if (n == cap) ids = realloc(ids, sizeof(int) * (cap *= 2));
        ids[n++] = (int)v;
        p = end;
    }
    if (n == 0) {
        free(ids);
        return err_fmt(err, "token ids: none given");
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

// Reads a whole file (or standard input for "-") into a malloc'd buffer.
static int read_file(const char *path, char **text, size_t *len, Err *err) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return err_fmt(err, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0)
        if ((n += got) == cap) buf = realloc(buf, cap *= 2);
    bool failed = !buf || ferror(f);
    if (f != stdin) fclose(f);
    if (failed) {
        free(buf);
        return err_fmt(err, "%s: cannot read", path);
    }
    *text = buf;
    *len = n;
    return 0;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

// The checkpoint folders to use: -m (and -d), or the shipped pair when neither is given.
static int model_dirs(const Args *args, const char **target, const char **draft, Err *err) {
    *target = args->model_dir;
    *draft = args->draft_dir;
    if (!*target && *draft) return err_fmt(err, "-d needs -m: give the target model too");
    if (!*target) {
        if (!is_dir(DEFAULT_TARGET))
            return err_fmt(err, "missing -m DIR, and the default model %s is not there (run from the repository "
                           "root, or give -m)", DEFAULT_TARGET);
        *target = DEFAULT_TARGET;
        *draft = DEFAULT_DRAFT;
    }
    return 0;
}

// A model with its thread pool: what every model command starts with.
typedef struct {
    ThreadPool *pool;
    Model target, draft;
    bool has_draft;
} Session;

static int session_open(Session *s, const char *target_dir, const char *draft_dir, int threads, Err *err) {
    *s = (Session){0};
    if (!target_dir) return err_fmt(err, "missing -m DIR (a checkpoint folder)");
    if (!(s->pool = pool_create(threads, err))) return -1;
    if (model_load(&s->target, target_dir, s->pool, err)) return -1;
    if (draft_dir) {
        if (model_load(&s->draft, draft_dir, s->pool, err)) return -1;
        s->has_draft = true;
        if (s->draft.cfg.vocab_size != s->target.cfg.vocab_size)
            return err_fmt(err, "%s/config.json: vocab_size %d differs from the target's %d (%s): a draft must share "
                           "the target's tokenizer", draft_dir, s->draft.cfg.vocab_size, s->target.cfg.vocab_size,
                           target_dir);
    }
    return 0;
}

static void session_close(Session *s) {
    if (s->has_draft) model_free(&s->draft);
    model_free(&s->target);
    pool_free(s->pool);
}

// The tokenizer of checkpoint folder dir, when it has one; *loaded says whether it did.
static int load_tokenizer(Tokenizer *tok, const char *dir, bool required, bool *loaded, Err *err) {
    *loaded = false;
    char path[4096];
    const char *files[] = {"tokenizer.json", "vocab.json", "encoder.json"};
    bool present = false;
    for (int i = 0; i < 3 && !present; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        present = access(path, F_OK) == 0;
    }
    if (!present) {
        if (!required) return 0;
        return err_fmt(err, "%s: no tokenizer.json or vocab.json + merges.txt in this folder", dir);
    }
    if (tokenizer_load_dir(tok, dir, err)) return -1;
    *loaded = true;
    return 0;
}

// ---- generate -----------------------------------------------------------------------------------------------

// Prints tokens as they are decided: text through the streaming decoder (or ids), and with --show the kind of
// each token: accepted drafts in green, rejected drafts in red and struck through, the target's own tokens in
// blue (the paper's Figure 1); plain marks [-rejected-] and {+target+} when stdout is no terminal or NO_COLOR is
// set.
typedef struct {
    const Tokenizer *tok;   // NULL: print ids
    TokenStream stream;
    bool show, color;
    int printed;
    Err *err;
} Printer;

static void print_text(Printer *pr, int id) {
    const char *text;
    size_t len;
    if (token_stream_push(&pr->stream, id, &text, &len, pr->err) == 0) fwrite(text, 1, len, stdout);
}

static void on_token(void *ctx, int id, TokenKind kind) {
    Printer *pr = ctx;
    if (kind == TOKEN_REJECTED && !pr->show) return;  // a rejected draft is never part of the output
    if (!pr->tok) {
        if (kind != TOKEN_REJECTED) printf(pr->printed++ ? " %d" : "%d", id);
        fflush(stdout);
        return;
    }
    static const char *const colour[] = {[TOKEN_ACCEPTED] = "\x1b[32m", [TOKEN_REJECTED] = "\x1b[31;9m",
                                         [TOKEN_RESAMPLED] = "\x1b[34m", [TOKEN_BONUS] = "\x1b[34m",
                                         [TOKEN_TARGET] = "\x1b[34m"};
    const char *open = "", *close = "";
    if (pr->show && pr->color) {
        open = colour[kind];
        close = "\x1b[0m";
    } else if (pr->show && kind != TOKEN_ACCEPTED) {
        open = kind == TOKEN_REJECTED ? "[-" : "{+";
        close = kind == TOKEN_REJECTED ? "-]" : "+}";
    }
    fputs(open, stdout);
    if (kind == TOKEN_REJECTED) {  // its raw bytes: a rejected token never joins the text's UTF-8 stream
        size_t len;
        const char *bytes = tokenizer_token(pr->tok, id, &len);
        fwrite(bytes, 1, len, stdout);
    } else {
        print_text(pr, id);
    }
    fputs(close, stdout);
    fflush(stdout);
}

static int parse_gamma(const char *text, SpecParams *params, Err *err) {
    params->policy = GAMMA_AUTO;
    params->gamma = 5;  // the heuristic's start
    if (!text || strcmp(text, "auto") == 0) return 0;
    if (strcmp(text, "heuristic") == 0) {
        params->policy = GAMMA_HEURISTIC;
        return 0;
    }
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > GAMMA_MAX)
        return err_fmt(err, "--gamma: expected an integer in [1, %d], heuristic or auto, got \"%s\"", GAMMA_MAX, text);
    params->policy = GAMMA_FIXED;
    params->gamma = (int)v;
    return 0;
}

// The --stats line. The fingerprint of the final logits comes from a forward over the whole text, so that runs
// with other kernels, threads or draft lengths compare at a glance.
static int print_stats(Session *s, const SpecStats *st, const int *prompt, int n_prompt, const int *out, int n_out,
                       Err *err) {
    const int V = s->target.cfg.vocab_size, n_ctx = s->target.cfg.n_positions;
    int n_all = n_prompt + n_out < n_ctx ? n_prompt + n_out : n_ctx;
    int *all = malloc(sizeof(int) * (n_prompt + n_out));
    float *logits = malloc(sizeof(float) * V);
    KVCache cache = {0};
    int rc = -1;
    if (!all || !logits) {
        err_fmt(err, "out of memory");
        goto done;
    }
    memcpy(all, prompt, sizeof(int) * n_prompt);
    memcpy(all + n_prompt, out, sizeof(int) * n_out);
    if (model_kv_init(&s->target, &cache, err) || model_forward(&s->target, &cache, all, n_all, logits, false, err))
        goto done;
    double alpha = st->n_min_pq ? st->sum_min_pq / st->n_min_pq : 0;
    double c = st->target_t1_seconds > 0 ? st->draft_step_seconds / st->target_t1_seconds : 0;
    double target_gbs = st->target_seconds > 0 ? (double)s->target.weight_bytes * st->rounds / st->target_seconds / 1e9 : 0;
    fprintf(stderr,
            "{\"prompt_tokens\": %d, \"prefill_ms\": %.2f, \"generated_tokens\": %d, \"tokens_per_s\": %.2f, \"ms_per_token\": %.3f, "
            "\"target_calls\": %d, \"draft_calls\": %d, \"drafted\": %d, \"accepted\": %d, \"acceptance_rate\": %.4f, "
            "\"mean_min_pq\": %.4f, \"tokens_per_target_call\": %.3f, \"mean_gamma\": %.2f, \"c\": %.4f, "
            "\"predicted_speedup\": %.3f, \"theorem_3_8_speedup\": %.3f, \"weights_GB_per_s\": %.2f, "
            "\"isa\": \"%s\", \"threads\": %d, "
            "\"logits_xxh64\": \"%016" PRIx64 "\"}\n",
            n_prompt, st->prefill_seconds * 1e3, st->generated,
            st->decode_seconds > 0 ? st->generated / st->decode_seconds : 0,
            st->generated ? st->decode_seconds * 1e3 / st->generated : 0, st->rounds, st->draft_calls, st->drafted,
            st->accepted, st->drafted ? (double)st->accepted / st->drafted : 0, alpha,
            st->rounds ? (double)st->generated / st->rounds : 0, st->mean_gamma, c,
            st->predicted_speedup, s->has_draft ? spec_predicted_speedup(alpha, st->mean_gamma, c) : 1.0, target_gbs,
            s->target.kernels->name, pool_size(s->pool), (uint64_t)XXH64(logits, sizeof(float) * V, 0));
    rc = 0;
done:
    kv_free(&cache);
    free(all);
    free(logits);
    return rc;
}

// --compare: the same prompt and settings decoded by the target alone; prints both speeds, the speedup Theorem
// 3.8 predicts from the measured α and c, and whether the outputs are the same (they must be when greedy).
static int compare_with_target_only(Session *s, const Args *args, const SpecParams *params, const SpecStats *spec,
                                    const int *prompt, int n_prompt, const int *out, int n_out, Err *err) {
    SpecParams quiet = *params;
    quiet.on_token = NULL;
    quiet.trace = NULL;
    Rng rng;
    rng_seed(&rng, args->seed);
    SpecStats plain;
    int *plain_out = malloc(sizeof(int) * (args->n_tokens + 1)), n_plain;
    if (!plain_out) return err_fmt(err, "out of memory");
    if (speculative_generate(&s->target, NULL, prompt, n_prompt, &quiet, &rng, plain_out, &n_plain, &plain, err)) {
        free(plain_out);
        return -1;
    }
    double spec_rate = spec->generated / spec->decode_seconds, plain_rate = plain.generated / plain.decode_seconds;
    // The prediction with target-only's measured step as t_target(1) (see SpecStats.predicted_speedup).
    double forwards = spec->target_seconds + spec->draft_seconds;
    double predicted = forwards > 0 ? spec->expected_tokens / plain_rate / forwards : 1.0;
    fprintf(stderr, "{\"speculative_tokens_per_s\": %.2f, \"target_only_tokens_per_s\": %.2f, "
                    "\"measured_speedup\": %.3f, \"predicted_speedup\": %.3f, \"measured_over_predicted\": %.3f, "
                    "\"same_output\": %s}\n",
            spec_rate, plain_rate, spec_rate / plain_rate, predicted, spec_rate / plain_rate / predicted,
            n_plain == n_out && memcmp(plain_out, out, sizeof(int) * n_out) == 0 ? "true" : "false");
    free(plain_out);
    return 0;
}

static int cmd_generate(const Args *args, Err *err) {
    const char *target_dir, *draft_dir;
    if (model_dirs(args, &target_dir, &draft_dir, err)) return -1;
    SpecParams params = {.sampling = args->sampling, .max_tokens = args->n_tokens};
    if (parse_gamma(args->gamma, &params, err)) return -1;
    if (args->ids && args->prompt) return err_fmt(err, "give the prompt as --ids or as -p, not both");
    if (!args->ids && !args->prompt) return err_fmt(err, "missing prompt: give -p TEXT or --ids \"1 2 3\"");

    Session s;
    Tokenizer tok;
    bool have_tok = false;
    Printer printer = {0};
    ModelDrafter drafter = {0};
    int *prompt = NULL, *out = NULL, n_prompt = 0, n_out = 0, rc = -1;
    FILE *trace = NULL;
    if (session_open(&s, target_dir, draft_dir, args->threads, err)) goto done;
    if (load_tokenizer(&tok, target_dir, args->prompt != NULL, &have_tok, err)) goto done;
    if (args->prompt ? tokenizer_encode(&tok, args->prompt, strlen(args->prompt), args->allow_special, &prompt,
                                        &n_prompt, err)
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
    if (args->trace && !(trace = fopen(args->trace, "w"))) {
        err_fmt(err, "%s: cannot write the trace: %s", args->trace, strerror(errno));
        goto done;
    }
    params.eos_id = s.target.cfg.eos_token_id;
    params.trace = trace;
    params.on_token = on_token;
    params.ctx = &printer;
    printer = (Printer){.tok = have_tok && !args->print_ids ? &tok : NULL, .show = args->show, .err = err,
                        .color = isatty(STDOUT_FILENO) && !getenv("NO_COLOR")};
    if (printer.tok) token_stream_init(&printer.stream, &tok);

    Rng rng;
    rng_seed(&rng, args->seed);
    out = malloc(sizeof(int) * (args->n_tokens + 1));
    if (s.has_draft && model_drafter_init(&drafter, &s.draft, &args->sampling, &rng, args->draft_p_min, err))
        goto done;
    SpecStats stats;
    if (speculative_generate(&s.target, s.has_draft ? &drafter.base : NULL, prompt, n_prompt, &params, &rng, out,
                             &n_out, &stats, err))
        goto done;
    if (printer.tok) {
        const char *text;
        size_t len;
        token_stream_flush(&printer.stream, &text, &len);
        fwrite(text, 1, len, stdout);
    }
    printf("\n");
    fflush(stdout);

    if (args->stats && print_stats(&s, &stats, prompt, n_prompt, out, n_out, err)) goto done;
    if (args->compare && s.has_draft && compare_with_target_only(&s, args, &params, &stats, prompt, n_prompt, out,
                                                                 n_out, err))
        goto done;
    rc = 0;
done:
    if (trace) fclose(trace);
    if (printer.tok) token_stream_free(&printer.stream);
    if (drafter.logits) model_drafter_free(&drafter);
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
    if (session_open(&s, args->model_dir, NULL, args->threads, err) || model_kv_init(&s.target, &cache, err) ||
        parse_ids(args->ids, &ids, &n, err))
        goto done;
    const int V = s.target.cfg.vocab_size, rows = args->all ? n : 1;
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
    Args args = {.n_tokens = 64, .sampling = {.temperature = 0.0f, .top_k = 0, .top_p = 1.0f}};
    Err err = {{0}};
    if (parse_args(&args, cmd, argc - 2, argv + 2, &err)) {
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
