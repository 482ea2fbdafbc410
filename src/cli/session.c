// session.c — loading what the commands work on (see session.h).
#include "cli/session.h"

#include "speculative/compatibility.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

int session_open(Session *s, const char *target_dir, const char *draft_dir, int threads, const char *quant,
                 int n_ctx, Err *err) {
    *s = (Session){0};
    if (!target_dir) return err_fmt(err, "missing -m DIR (a checkpoint folder)");
    Quant q = QUANT_NONE;
    if (quant && strcmp(quant, "q8") == 0) q = QUANT_Q8;
    else if (quant && strcmp(quant, "none") != 0)
        return err_fmt(err, "--quant: expected q8 or none, got \"%s\"", quant);
    if (!(s->pool = pool_create(threads, err))) return -1;
    if (model_load_quantized(&s->target, target_dir, s->pool, q, err)) return -1;
    if (*s->target.cfg.warning) fprintf(stderr, "warning: %s\n", s->target.cfg.warning);
    if (model_limit_context(&s->target, n_ctx, err)) return -1;
    if (draft_dir) {
        if (model_load_quantized(&s->draft, draft_dir, s->pool, q, err)) return -1;
        if (*s->draft.cfg.warning) fprintf(stderr, "warning: %s\n", s->draft.cfg.warning);
        if (model_limit_context(&s->draft, n_ctx, err)) return -1;
        s->has_draft = true;
        int n_shared;
        if (draft_shared_vocabulary(&s->target, target_dir, &s->draft, draft_dir, &n_shared, err)) return -1;
        model_limit_vocab(&s->target, n_shared);  // ids past the shared range are never sampled
        model_limit_vocab(&s->draft, n_shared);
    }
    return 0;
}

void session_close(Session *s) {
    if (s->has_draft) model_free(&s->draft);
    model_free(&s->target);
    pool_free(s->pool);
}

int load_tokenizer(Tokenizer *tok, const char *dir, bool required, bool *loaded, Err *err) {
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

