// main.c — the specdec command line: a table of subcommands, a table of options, and one function per
// subcommand. Generated text goes to stdout, statistics and errors to stderr; bad input exits with status 2.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#include "model.h"
#include "safetensors.h"
#include "sampling.h"

// ---- arguments ----------------------------------------------------------------------------------------------

enum { MAX_POSITIONAL = 64 };

typedef struct {
    const char *model_dir;      // -m
    const char *ids;            // --ids "1 2 3"
    const char *prompt;         // -p
    int n_tokens;               // -n
    SamplingParams sampling;    // --temp, --top-k, --top-p
    uint64_t seed;              // --seed
    int threads;                // --threads (0 = all cores)
    bool print_ids, stats, all, help;
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
    {"model", 'm', OPT_STRING, FIELD(model_dir), 0, 0, "checkpoint folder (config.json + model.safetensors)"},
    {"ids", 0, OPT_STRING, FIELD(ids), 0, 0, "prompt as token ids, e.g. \"464 3290 318\""},
    {"prompt", 'p', OPT_STRING, FIELD(prompt), 0, 0, "prompt text"},
    {"tokens", 'n', OPT_INT, FIELD(n_tokens), 0, 1 << 20, "tokens to generate (default 64)"},
    {"temp", 0, OPT_FLOAT, FIELD(sampling.temperature), 0, 100, "temperature; 0 = greedy (default 0)"},
    {"top-k", 0, OPT_INT, FIELD(sampling.top_k), 0, 1 << 24, "sample from the k most likely tokens; 0 = all"},
    {"top-p", 0, OPT_FLOAT, FIELD(sampling.top_p), 1e-6, 1, "nucleus sampling mass (default 1 = off)"},
    {"seed", 0, OPT_U64, FIELD(seed), 0, 0, "random seed (default 0)"},
    {"threads", 't', OPT_INT, FIELD(threads), 1, 1024, "worker threads (default: all cores)"},
    {"print-ids", 0, OPT_FLAG, FIELD(print_ids), 0, 0, "print the generated ids instead of text"},
    {"stats", 0, OPT_FLAG, FIELD(stats), 0, 0, "print one JSON line of statistics on stderr"},
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
static int cmd_inspect(const Args *args, Err *err);

static const Command commands[] = {
    {"generate", cmd_generate, "generate -m DIR (--ids \"1 2 3\" | -p TEXT) [options]",
     "continue a prompt", "model ids prompt tokens temp top-k top-p seed threads print-ids stats help", 0, 0},
    {"logits", cmd_logits, "logits -m DIR --ids \"1 2 3\" [--all]",
     "print the logits of the last position (all with --all), one line of %.7g values per position",
     "model ids all threads help", 0, 0},
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
        fprintf(out, "specdec — GPT-2 inference with speculative decoding, on the CPU\n\nusage: specdec COMMAND [options]\n\n");
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
        fprintf(out, "  %-18s %s\n", flag, o->help);
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
        if (arg[0] != '-' || arg[1] == '\0') {
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

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Parses "--ids" ("1 2 3" or "1,2,3") into a malloc'd array.
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
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            free(ids);
            return err_fmt(err, "--ids: expected non-negative integers separated by spaces, got \"%.40s\"", p);
        }
        if (n == cap) ids = realloc(ids, sizeof(int) * (cap *= 2));
        ids[n++] = (int)v;
        p = end;
    }
    if (n == 0) {
        free(ids);
        return err_fmt(err, "--ids: no token ids given");
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

// The model, its cache and a thread pool: what every model command starts with.
typedef struct {
    ThreadPool *pool;
    Model model;
    KVCache cache;
} Session;

static int session_open(Session *s, const Args *args, Err *err) {
    *s = (Session){0};
    if (!args->model_dir) return err_fmt(err, "missing -m DIR (a checkpoint folder)");
    if (!(s->pool = pool_create(args->threads, err))) return -1;
    if (model_load(&s->model, args->model_dir, s->pool, err) || model_kv_init(&s->model, &s->cache, err)) return -1;
    return 0;
}

static void session_close(Session *s) {
    kv_free(&s->cache);
    model_free(&s->model);
    pool_free(s->pool);
}

// The prompt as ids: --ids, or -p TEXT through the checkpoint's tokenizer.
static int prompt_ids(const Args *args, int **ids, int *n, Err *err) {
    if (args->ids && args->prompt) return err_fmt(err, "give the prompt as --ids or as -p, not both");
    if (args->ids) return parse_ids(args->ids, ids, n, err);
    if (args->prompt) return err_fmt(err, "-p needs a tokenizer, which this build does not have yet: use --ids");
    return err_fmt(err, "missing prompt: give --ids \"1 2 3\" or -p TEXT");
}

// ---- commands -----------------------------------------------------------------------------------------------

static int cmd_generate(const Args *args, Err *err) {
    Session s;
    int *prompt = NULL, n_prompt = 0, rc = -1;
    float *logits = NULL, *probs = NULL;
    int *work = NULL;
    if (session_open(&s, args, err) || prompt_ids(args, &prompt, &n_prompt, err)) goto done;
    const Config *c = &s.model.cfg;
    if (n_prompt >= c->n_positions) {
        err_fmt(err, "the prompt has %d tokens but %s/config.json gives a context of %d positions, which leaves no "
                "room to generate", n_prompt, args->model_dir, c->n_positions);
        goto done;
    }
    const int V = c->vocab_size;
    logits = malloc(sizeof(float) * V);
    probs = malloc(sizeof(float) * V);
    work = malloc(sizeof(int) * V);
    Rng rng;
    rng_seed(&rng, args->seed);

    double t0 = now_seconds();
    if (model_forward(&s.model, &s.cache, prompt, n_prompt, logits, false, err)) goto done;
    double t1 = now_seconds();
    int generated = 0;
    while (generated < args->n_tokens) {
        if (sampling_adjust(probs, logits, V, &args->sampling, work)) {
            err_fmt(err, "the model produced a NaN or infinite logit at position %d", s.cache.len);
            goto done;
        }
        int token = sampling_draw(probs, V, rng_uniform(&rng));
        if (token == c->eos_token_id) break;
        printf(generated ? " %d" : "%d", token);
        fflush(stdout);
        generated++;
        if (generated == args->n_tokens) break;
        if (s.cache.len == c->n_positions) {
            fprintf(stderr, "specdec: stopped at the context limit of %d positions\n", c->n_positions);
            break;
        }
        if (model_forward(&s.model, &s.cache, &token, 1, logits, false, err)) goto done;
    }
    printf("\n");
    double t2 = now_seconds();
    if (args->stats) {
        double decode_s = t2 - t1, per_token = generated > 1 ? decode_s / (generated - 1) : decode_s;
        fprintf(stderr,
                "{\"prompt_tokens\": %d, \"generated_tokens\": %d, \"prefill_ms\": %.2f, \"tokens_per_s\": %.2f, "
                "\"ms_per_token\": %.3f, \"weights_GB_per_s\": %.2f, \"weight_bytes\": %zu, \"isa\": \"%s\", "
                "\"threads\": %d, \"logits_xxh64\": \"%016" PRIx64 "\"}\n",
                n_prompt, generated, (t1 - t0) * 1e3, generated > 1 ? 1.0 / per_token : 0.0, per_token * 1e3,
                s.model.weight_bytes / per_token / 1e9, s.model.weight_bytes, s.model.kernels->name,
                pool_size(s.pool), (uint64_t)XXH64(logits, sizeof(float) * V, 0));
    }
    rc = 0;
done:
    free(prompt);
    free(logits);
    free(probs);
    free(work);
    session_close(&s);
    return rc;
}

static int cmd_logits(const Args *args, Err *err) {
    Session s;
    int *ids = NULL, n = 0, rc = -1;
    float *logits = NULL;
    if (session_open(&s, args, err)) goto done;
    if (!args->ids) {
        err_fmt(err, "missing --ids \"1 2 3\"");
        goto done;
    }
    if (parse_ids(args->ids, &ids, &n, err)) goto done;
    const int V = s.model.cfg.vocab_size, rows = args->all ? n : 1;
    logits = malloc(sizeof(float) * V * rows);
    if (!logits || model_forward(&s.model, &s.cache, ids, n, logits, args->all, err)) goto done;
    for (int r = 0; r < rows; r++)
        for (int i = 0; i < V; i++) printf("%.7g%c", logits[(size_t)r * V + i], i + 1 == V ? '\n' : ' ');
    rc = 0;
done:
    free(ids);
    free(logits);
    session_close(&s);
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
