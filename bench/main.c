// main.c — run-bench: options, the run's record, and the suites in order (see bench.h).
//
//   build/release/run-bench [--suite limit,decode,speculative,tokenizer,quant,threads,trees,chat,serve,structured,
//                           batch]
//                           [-m TARGET] [-d DRAFT]
//                           [--reps N] [--prompts N] [--tokens N] [--quick] [--threads N] [--threads-sweep 1,2]
//                           [--quant q8|bf16|q4] [--draft-quant none|q8|bf16|q4] [--out DIR] [--no-plots]
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speculative/drafter.h"

// ---- options ------------------------------------------------------------------------------------------------

typedef struct {
    Options opt;
    const char *suites;         // --suite, comma-separated
    const char *quant;          // --quant none | q8 | bf16
    const char *draft_quant;    // --draft-quant none | q8 | bf16
    const char *threads_sweep;  // --threads-sweep 1,2,4
    bool no_plots;
} Args;

typedef enum { OPT_FLAG, OPT_INT, OPT_STRING } OptType;

typedef struct {
    const char *name;   // --name
    char short_name;    // -x, or 0
    OptType type;
    size_t offset;      // of the field in Args
    int min, max;       // accepted range of an integer
    const char *help;
} Option;

#define FIELD(f) offsetof(Args, f)
static const Option OPTIONS[] = {
    {"suite", 's', OPT_STRING, FIELD(suites), 0, 0, "suites to run, comma-separated: limit,decode,speculative,"
                                                     "tokenizer,quant,threads,trees,chat,serve,structured,batch "
                                                     "(default: all)"},
    {"model", 'm', OPT_STRING, FIELD(opt.target_dir), 0, 0, "target checkpoint folder (default weights/pystd/target), or random:gpt2-small[-bf16], random:llama-3.2-1b, random:qwen2.5-0.5b (BF16)"},
    {"draft", 'd', OPT_STRING, FIELD(opt.draft_dir), 0, 0, "draft checkpoint folder (default weights/pystd/draft); "
                                                               "with -m random:SHAPE, random: its one-block draft"},
    {"reps", 'r', OPT_INT, FIELD(opt.reps), 1, 10000, "rounds of each limit and decode measurement (default 15; "
                                                      "--quick 5)"},
    {"prompts", 0, OPT_INT, FIELD(opt.prompts), 1, 100000, "held-out prompts for the speculative suite (default "
                                                           "all; --quick 6)"},
    {"tokens", 'n', OPT_INT, FIELD(opt.tokens), 1, 1 << 20, "tokens generated per prompt (default 128; --quick 48)"},
    {"quick", 'q', OPT_FLAG, FIELD(opt.quick), 0, 0, "fewer rounds, prompts and tokens: 1.5-3 minutes on 2 idle cores"},
    {"threads", 't', OPT_INT, FIELD(opt.threads), 1, 1024, "worker threads (default: the CPUs this process may use)"},
    {"threads-sweep", 0, OPT_STRING, FIELD(threads_sweep), 0, 0, "thread counts of the threads suite, "
                                                                  "comma-separated (default 1, 2, 4, ... all)"},
    {"quant", 0, OPT_STRING, FIELD(quant), 0, 0, "the target's matrices: q8, quantized to 8 bits at load; bf16, "
                                                 "held in BF16, times activations rounded to BF16; none, as "
                                                 "stored (default)"},
    {"draft-quant", 0, OPT_STRING, FIELD(draft_quant), 0, 0, "the draft's: q8 (default, as specdec generate), "
                                                             "bf16 or none"},
    {"out", 'o', OPT_STRING, FIELD(opt.out_dir), 0, 0, "folder for the JSON, Markdown and PNG files (default "
                                                       "build/bench, untracked; make bench writes bench/results)"},
    {"no-plots", 0, OPT_FLAG, FIELD(no_plots), 0, 0, "write no plots"},
    {"help", 'h', OPT_FLAG, FIELD(opt.help), 0, 0, "show this help"},
};
enum { N_OPTIONS = sizeof OPTIONS / sizeof OPTIONS[0] };

enum { N_SUITES = 11 };
static const char *SUITE_NAMES[N_SUITES] = {"limit", "decode", "speculative", "tokenizer", "quant",
                                            "threads", "trees", "chat", "serve", "structured", "batch"};  // bit i

static void print_help(void) {
    printf("usage: run-bench [options]    (make bench BENCH_ARGS=\"...\", or make bench QUICK=1)\n\n"
           "Measures memory bandwidth and the matmul kernels (limit), decoding speed (decode), speculative decoding "
           "on the\nheld-out and copy-heavy prompts of bench/prompts (speculative) and tokenizer throughput (tokenizer); prints "
           "Markdown tables\nand writes results-<date>.json, latest.json, latest.md and PNG plots under --out.\n\n");
    for (int i = 0; i < N_OPTIONS; i++) {
        char flag[48];
        if (OPTIONS[i].short_name) snprintf(flag, sizeof flag, "-%c, --%s", OPTIONS[i].short_name, OPTIONS[i].name);
        else snprintf(flag, sizeof flag, "    --%s", OPTIONS[i].name);
        printf("  %-18s %s\n", flag, OPTIONS[i].help);
    }
}

static int parse_suites(const char *list, unsigned *suites, Err *err) {
    *suites = 0;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        unsigned bit = 0;
        for (int i = 0; i < N_SUITES; i++)
            if (strlen(SUITE_NAMES[i]) == len && strncmp(p, SUITE_NAMES[i], len) == 0) bit = 1u << i;
        if (!bit) return err_fmt(err, "--suite: unknown suite \"%.*s\" (limit, decode, speculative, tokenizer, quant, "
                                 "threads, trees, chat, serve, structured, batch)",
                                 (int)len, p);
        *suites |= bit;
        p += len + (p[len] == ',');
    }
    return *suites ? 0 : err_fmt(err, "--suite: no suite named");
}

static int parse_args(Args *args, int argc, char **argv, Err *err) {
    for (int i = 1; i < argc; i++) {
        const Option *o = NULL;
        for (int k = 0; k < N_OPTIONS && !o; k++) {
            const char *a = argv[i];
            if (a[0] == '-' && (a[1] == '-' ? strcmp(a + 2, OPTIONS[k].name) == 0
                                            : a[1] == OPTIONS[k].short_name && a[1] && a[2] == '\0'))
                o = &OPTIONS[k];
        }
        if (!o) return err_fmt(err, "unknown option %s (see run-bench --help)", argv[i]);
        void *field = (char *)args + o->offset;
        if (o->type == OPT_FLAG) {
            *(bool *)field = true;
            continue;
        }
        if (i + 1 == argc) return err_fmt(err, "option %s needs a value", argv[i]);
        const char *value = argv[++i];
        if (o->type == OPT_STRING) {
            *(const char **)field = value;
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max)
            return err_fmt(err, "--%s: expected an integer in [%d, %d], got \"%s\"", o->name, o->min, o->max, value);
        *(int *)field = (int)v;
    }
    Options *opt = &args->opt;
    opt->reps = opt->reps ? opt->reps : opt->quick ? 5 : 15;
    opt->prompts = opt->prompts ? opt->prompts : opt->quick ? 6 : 0;
    opt->tokens = opt->tokens ? opt->tokens : opt->quick ? 48 : 128;
    opt->out_dir = opt->out_dir ? opt->out_dir : "build/bench";  // (git keeps bench/results: make bench's)
    opt->plots = !args->no_plots;
    if (opt->draft_dir && !opt->target_dir) return err_fmt(err, "-d needs -m: which target does the draft serve?");
    if (args->quant && quant_from_name(&opt->quant, args->quant, "--quant", err)) return -1;
    opt->draft_quant = DRAFT_QUANT_DEFAULT;
    if (args->draft_quant && quant_from_name(&opt->draft_quant, args->draft_quant, "--draft-quant", err)) return -1;
    const char *all = "limit,decode,speculative,tokenizer,quant,threads,trees,chat,serve,structured,batch";
    if (parse_suites(args->suites ? args->suites : all, &opt->suites, err))
        return -1;
    if ((opt->suites & SUITE_QUANT) && opt->quant != QUANT_NONE)
        return err_fmt(err, "--suite quant compares the stored weights with q8 and q4: leave out --quant");
    if ((opt->suites & SUITE_QUANT) && opt->draft_quant == QUANT_BF16)
        return err_fmt(err, "--suite quant compares the stored weights with q8 and q4: --draft-quant bf16 is none "
                       "of them");
    return 0;
}

// ---- the run ------------------------------------------------------------------------------------------------

static json_t *options_json(const Options *o) {
    json_t *suites = json_array();
    for (int i = 0; i < N_SUITES; i++)
        if (o->suites & (1u << i)) json_array_append_new(suites, json_string(SUITE_NAMES[i]));
    return json_pack("{s:o, s:i, s:i, s:i, s:b, s:s}", "suites", suites, "reps", o->reps, "prompts", o->prompts,
                     "tokens", o->tokens, "quick", o->quick, "quant", quant_name(o->quant), "draft_quant",
                     quant_name(o->draft_quant));
}

// What the title line says of --quant.
static const char *const QUANT_PHRASES[] = {[QUANT_NONE] = "", [QUANT_Q8] = ", weights quantized to q8",
                                            [QUANT_BF16] = ", BF16 weights times BF16 activations",
                                            [QUANT_Q4] = ", weights quantized to q4"};

int main(int argc, char **argv) {
    Args args = {0};
    Err err;
    if (parse_args(&args, argc, argv, &err)) {
        fprintf(stderr, "run-bench: %s\n", err.msg);
        return EXIT_BAD_INPUT;
    }
    if (args.opt.help) {
        print_help();
        return 0;
    }
    make_out_folder(args.opt.out_dir);
    setvbuf(stdout, NULL, _IOLBF, 0);  // tables line by line, between the progress lines on stderr
    Bench b = {.opt = args.opt, .results = json_object()};
    char why[160];
    if (!(b.kernels = kernels_select(why, sizeof why))) die("%s", why);
    if (!(b.pool = pool_create(b.opt.threads, &err))) die("%s", err.msg);
    if (!(b.md = open_memstream(&b.md_text, &b.md_len))) die("out of memory");
    const char *cpu;
    json_object_set_new(b.results, "machine", machine_json(&b, &cpu));
    json_object_set_new(b.results, "options", options_json(&b.opt));
    Pair pair;
    pair_open(&pair, &b);
    json_object_set_new(b.results, "pair", pair_json(&pair));

    out(&b, "# specdec bench\n\n%s, %d threads, %s kernels%s, commit %s, %s%s\n\nTarget: %s (%.1f MB of weights)",
        cpu, pool_size(b.pool), b.kernels->name, QUANT_PHRASES[b.opt.quant],
        json_string_value(json_object_get(json_object_get(b.results, "machine"), "commit")),
        json_string_value(json_object_get(json_object_get(b.results, "machine"), "date")),
        b.opt.quick ? " (--quick)" : "", pair.target_dir, pair.target.weight_bytes / 1e6);
    if (pair.has_draft) out(&b, "; draft: %s (%.1f MB)", pair.draft_dir, pair.draft.weight_bytes / 1e6);
    if (pair.load_peak_mb > 0)
        out(&b, "; loaded in %.2f s from the page cache, peak resident memory %.0f MB", pair.load_seconds[0],
            pair.load_peak_mb);
    out(&b, "%s\n\n", pair.random ? ". **A random pair**: speeds are representative, "
                                    "acceptance and speed-ups are not" : "");

    Memory memory = {0};
    if (b.opt.suites & (SUITE_LIMIT | SUITE_DECODE | SUITE_QUANT | SUITE_THREADS))
        memory_init(&memory, memory_array_bytes());
    if (b.opt.suites & SUITE_LIMIT) suite_limit(&b, &pair, &memory);
    if (b.opt.suites & SUITE_DECODE) out(&b, "\n"), suite_decode(&b, &pair, &memory);
    if (b.opt.suites & SUITE_QUANT) out(&b, "\n"), suite_quant(&b, &pair, &memory);
    if (b.opt.suites & SUITE_THREADS) out(&b, "\n"), suite_threads(&b, &pair, &memory, args.threads_sweep);
    memory_free(&memory);
    if (b.opt.suites & SUITE_SPECULATIVE) out(&b, "\n"), suite_speculative(&b, &pair);
    if (b.opt.suites & SUITE_TREES) out(&b, "\n"), suite_trees(&b, &pair);
    if (b.opt.suites & SUITE_TOKENIZER) out(&b, "\n"), suite_tokenizer(&b, &pair);
    if (b.opt.suites & SUITE_CHAT) out(&b, "\n"), suite_chat(&b, &pair);
    if (b.opt.suites & SUITE_SERVE) out(&b, "\n"), suite_serve(&b, &pair);
    if (b.opt.suites & SUITE_STRUCTURED) out(&b, "\n"), suite_structured(&b, &pair);
    if (b.opt.suites & SUITE_BATCH) out(&b, "\n"), suite_batch(&b, &pair);
    fflush(stdout);

    write_results(&b);
    if (b.failed) fprintf(stderr, "run-bench: FAILED: greedy speculative output differed from target-only\n");
    pair_close(&pair);
    fclose(b.md);
    free(b.md_text);
    json_decref(b.results);
    pool_free(b.pool);
    return b.failed ? 1 : 0;
}
