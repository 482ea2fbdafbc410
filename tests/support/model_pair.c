// model_pair.c — a tiny target and draft written, loaded and removed for a test (model_pair.h).
#include "model_pair.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

void model_pair_open(ModelPair *pair, const RandomCheckpoint *target, const RandomCheckpoint *draft, int n_shared,
                     int threads, Quant quant) {
    Err err;
    snprintf(pair->dir, sizeof pair->dir, "/tmp/specdec-pair-XXXXXX");
    CHECK(mkdtemp(pair->dir) != NULL, "mkdtemp");
    char target_dir[128], draft_dir[128];
    snprintf(target_dir, sizeof target_dir, "%s/target", pair->dir);
    snprintf(draft_dir, sizeof draft_dir, "%s/draft", pair->dir);
    mkdir(target_dir, 0700);
    mkdir(draft_dir, 0700);
    CHECK(random_checkpoint_write(target_dir, target, &err) == 0, "%s", err.msg);
    CHECK(random_checkpoint_write(draft_dir, draft, &err) == 0, "%s", err.msg);
    pair->pool = pool_create(threads, &err);
    CHECK(pair->pool && model_load_quantized(&pair->target, target_dir, pair->pool, quant, &err) == 0, "%s", err.msg);
    CHECK(model_load_quantized(&pair->draft, draft_dir, pair->pool, quant, &err) == 0, "%s", err.msg);
    if (n_shared < pair->target.n_vocab) model_limit_vocab(&pair->target, n_shared);
    if (n_shared < pair->draft.n_vocab) model_limit_vocab(&pair->draft, n_shared);
}

void model_pair_close(ModelPair *pair) {
    char path[128];
    model_free(&pair->target);
    model_free(&pair->draft);
    pool_free(pair->pool);
    snprintf(path, sizeof path, "%s/target", pair->dir);
    random_checkpoint_remove(path);
    snprintf(path, sizeof path, "%s/draft", pair->dir);
    random_checkpoint_remove(path);
    rmdir(pair->dir);
}
