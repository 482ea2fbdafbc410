// session.c — loading what the commands work on (see session.h).
#include "cli/session.h"

#include "speculative/compatibility.h"
#include "speculative/drafter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/clock.h"
#include "checkpoint/gguf.h"
#include "model/probe.h"

int spec_params_from_args(const Args *args, SpecParams *params, Err *err) {
    *params = (SpecParams){.sampling = args->sampling, .seed = args->seed, .max_tokens = args->n_tokens,
                           .penalties = penalties_on(&args->penalties) ? &args->penalties : NULL,
                           .tree_width = args->tree && !args->tree_width ? TREE_FIRST_WIDTH_MAX : args->tree_width,
                           .tree_auto = args->tree};
    return parse_gamma(args->gamma, params, err) || parse_sampler(args->sampler, &params->sampler, err) ||
                   parse_pipeline(args->pipeline, &params->pipeline, err)
               ? -1
               : 0;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int model_dirs(const Args *args, const char **target, const char **draft, Err *err) {
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

// A load's progress on a terminal: one line on stderr, "specdec: loading DIR (q4): 412 of 2471 MB", redrawn at
// most every 0.1 s and erased once the load is done. Where stderr is no terminal, nothing.
typedef struct {
    const char *dir, *quant;
    double drawn;  // when the line was last drawn (now_seconds), or 0
    size_t shown;  // the bytes it showed
} LoadMeter;

static void draw_load(void *ctx, size_t read, size_t total) {
    LoadMeter *m = ctx;
    const double now = now_seconds();
    if (m->drawn > 0 && (read == m->shown || (read < total && now - m->drawn < 0.1))) return;
    m->drawn = now;
    m->shown = read;
    fprintf(stderr, "\rspecdec: loading %s (%s): %zu of %zu MB\033[K", m->dir, m->quant, read >> 20, total >> 20);
    fflush(stderr);
}

// model_load_reporting with the meter above on a terminal.
static int load_model(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err) {
    LoadMeter meter = {.dir = dir, .quant = quant == QUANT_NONE ? "as stored" : quant_name(quant)};
    const LoadProgress progress = {.report = draw_load, .ctx = &meter};
    const int rc = model_load_reporting(model, dir, pool, quant, isatty(STDERR_FILENO) ? &progress : NULL, err);
    if (meter.drawn > 0) fputs("\r\033[K", stderr);  // the line erased
    return rc;
}

int session_open(Session *s, const char *target_dir, const char *draft_dir, int threads, const char *quant,
                 const char *draft_quant, int n_ctx, Err *err) {
    *s = (Session){0};
    if (!target_dir) return err_fmt(err, "missing -m DIR (a checkpoint folder)");
    const char *const dirs[] = {target_dir, draft_dir};
    for (int i = 0; i < 2; i++)
        if (dirs[i] && !is_dir(dirs[i]) && access(dirs[i], F_OK) == 0 && !gguf_is_gguf(dirs[i]))
            return err_fmt(err, "%s: neither a folder nor a GGUF file: %s takes the checkpoint's folder (config.json + "
                           "model.safetensors) or a .gguf file", dirs[i], i ? "-d" : "-m");
    Quant q = QUANT_NONE, draft_q = DRAFT_QUANT_DEFAULT;
    if (quant && quant_from_name(&q, quant, "--quant", err)) return -1;
    if (draft_quant && quant_from_name(&draft_q, draft_quant, "--draft-quant", err)) return -1;
    if (!(s->pool = pool_create(threads, err))) return -1;
    if (pool_oversubscribed(s->pool))
        fprintf(stderr, "specdec: note: %d threads on %d available CPUs: they sleep between jobs (slower than "
                "--threads %d)\n", pool_size(s->pool), cpus_available(), cpus_available());
    if (load_model(&s->target, target_dir, s->pool, q, err)) return -1;
    if (*s->target.cfg.warning) fprintf(stderr, "specdec: warning: %s\n", s->target.cfg.warning);
    if (model_limit_context(&s->target, n_ctx, err)) return -1;
    if (draft_dir) {
        if (load_model(&s->draft, draft_dir, s->pool, draft_q, err)) return -1;
        if (*s->draft.cfg.warning) fprintf(stderr, "specdec: warning: %s\n", s->draft.cfg.warning);
        if (model_limit_context(&s->draft, n_ctx, err)) return -1;
        s->has_draft = true;
        int n_shared;
        if (draft_shared_vocabulary(&s->target, target_dir, &s->draft, draft_dir, &n_shared, err)) return -1;
        model_limit_vocab(&s->target, n_shared);  // ids past the shared range are never sampled
        model_limit_vocab(&s->draft, n_shared);
    }
    return 0;
}

int session_draft_threads(Session *s, int n, Err *err) {
    if (n > pool_size(s->pool))
        return err_fmt(err, "--draft-threads %d: more than the %d threads of --threads", n, pool_size(s->pool));
    if (!s->has_draft) return 0;
    if (n == 0 && (n = probe_fastest_threads(&s->draft, NULL, err)) < 0) return -1;
    s->draft.max_threads = n;
    return 0;
}

bool session_drafts_by_lookup(const Args *args, bool has_draft) {
    return args->lookup || (has_draft && !args->no_lookup);
}

int session_default_threads(const Args *args, bool has_draft, int cpus) {
    Pipelining pipeline;
    Err unused;  // a bad --pipeline is refused where the generation's parameters are read (spec_params_from_args)
    parse_pipeline(args->pipeline, &pipeline, &unused);
    const bool may_draft_ahead = has_draft && !args->tree && args->tree_width <= 1 && pipeline != PIPELINE_OFF;
    return may_draft_ahead && cpus >= PIPELINE_SPARE_CPU_FROM ? cpus - 1 : cpus;
}

// Options given that this run does not read get a note on stderr, one line per reason: speculative decoding's
// without a drafter (-d or --lookup), a draft model's without one, --show's marks with --print-ids, sampling's at
// temperature 0 (greedy: the most likely token, whatever the truncation, the seed or the sampler), and
// --allow-special with ids. --sampler is read without a drafter too: it picks target-only's draw (coupled: the
// Gumbel-max sample whose text a coupled speculative run gives). Options a command does not take stay at their
// defaults here, so each command gets the notes of its own; serve and batch (batched) take the temperature from each
// request, so their --sampler is always read.
static void note_ignored_options(const Args *args, bool has_draft, bool batched) {
    const bool drafting = has_draft || args->lookup, greedy = args->sampling.temperature <= 0.0f;
    const struct {
        bool ignored;
        const char *name;
        int reason;
    } options[] = {
        {!drafting && args->gamma, "--gamma", 0}, {!drafting && args->compare, "--compare", 0},
        {!has_draft && args->draft_p_min > 0, "--draft-p-min", 1},
        {!has_draft && args->draft_threads, "--draft-threads", 1},
        {!has_draft && args->draft_quant, "--draft-quant", 1},
        {!has_draft && args->pipeline, "--pipeline", 1}, {!has_draft && args->no_lookup, "--no-lookup", 1},
        {args->show && args->print_ids, "--show", 2},
        {greedy && args->sampling.top_k > 0, "--top-k", 3}, {greedy && args->sampling.top_p < 1.0f, "--top-p", 3},
        {greedy && args->sampling.min_p > 0.0f, "--min-p", 3}, {greedy && !batched && args->sampler, "--sampler", 3},
        {greedy && args->seed != 0, "--seed", 3},
        {args->allow_special && args->ids, "--allow-special", 4},
    };
    static const char *const why[] = {
        "without a draft model (-d DIR) or --lookup, decoding is target-only",
        "there is no draft model (-d DIR)",
        "--print-ids prints the ids unmarked",
        "at --temp 0 (the default) decoding is greedy: the most likely token each time",
        "--ids gives no text to tokenize",
    };
    for (int reason = 0; reason < (int)(sizeof why / sizeof *why); reason++) {
        char names[128] = "";
        for (size_t i = 0; i < sizeof options / sizeof *options; i++)
            if (options[i].ignored && options[i].reason == reason)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? ", " : "",
                         options[i].name);
        if (names[0]) fprintf(stderr, "specdec: note: %s ignored: %s\n", names, why[reason]);
    }
}

void session_note_context(const Session *s, int ctx) {
    const int n_ctx = s->target.cfg.n_positions;
    if (ctx > n_ctx)
        fprintf(stderr, "specdec: note: --ctx %d: the model's context is %d position%s, and the caches hold no more\n",
                ctx, n_ctx, n_ctx == 1 ? "" : "s");
}

// session_open_from_args and session_open_batched: the threads by default, every CPU for a batch (it drafts
// nothing ahead), else session_default_threads; then the notes on the options the run will not read.
static int open_from_args(Session *s, const Args *args, const char *target_dir, const char *draft_dir, bool batched,
                          Err *err) {
    *s = (Session){0};  // (closed by the caller on failure, also this one's, before anything loads)
    if (args->lookup && args->no_lookup) return err_fmt(err, "--lookup and --no-lookup: give one or the other");
    int threads = args->threads;
    if (!threads) threads = batched ? cpus_available() : session_default_threads(args, draft_dir, cpus_available());
    if (session_open(s, target_dir, draft_dir, threads, args->quant, args->draft_quant,
                     args->ctx ? args->ctx : DEFAULT_CONTEXT, err) ||
        session_draft_threads(s, args->draft_threads, err))
        return -1;
    if ((args->tree_width > 1 || args->tree) && !s->has_draft && !args->lookup)
        return err_fmt(err, "--tree-width and --tree draft a tree: give a draft model (-d DIR) or --lookup");
    note_ignored_options(args, s->has_draft, batched);
    session_note_context(s, args->ctx);
    return 0;
}

int session_open_from_args(Session *s, const Args *args, const char *target_dir, const char *draft_dir, Err *err) {
    return open_from_args(s, args, target_dir, draft_dir, false, err);
}

int session_open_batched(Session *s, const Args *args, const char *target_dir, const char *draft_dir, Err *err) {
    return open_from_args(s, args, target_dir, draft_dir, true, err);
}

void session_close(Session *s) {
    if (s->has_draft) model_free(&s->draft);
    model_free(&s->target);
    pool_free(s->pool);
}

int load_tokenizer(Tokenizer *tok, const char *dir, bool required, bool *loaded, Err *err) {
    *loaded = false;
    if (!dir_has_tokenizer(dir)) {
        if (!required) return 0;
        return err_fmt(err, "%s: no tokenizer.json or vocab.json + merges.txt in this folder", dir);
    }
    if (tokenizer_load_dir(tok, dir, err)) return -1;
    *loaded = true;
    return 0;
}

