// forward_loop.c — a checkpoint's forward over T rows, again and again, for `perf record` to split by function
// (run.sh builds it): after a prompt of CONTEXT positions, each forward computes T more rows (all their logits, as a
// verification does) and the cache is cut back to the prompt, so every forward does the same work. Prints the
// median wall time of a forward; the profile, not this figure, is what it is for (docs/performance-history.md,
// "Where the shipped target's verification goes on AVX2").
//     build/release/forward_loop DIR T THREADS FORWARDS
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/threads.h"
#include "base/clock.h"
#include "model/model.h"

enum { CONTEXT = 64, MAX_T = 16 };

static int ascending(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int positive_argument(const char *text, const char *name, int most) {
    char *end;
    const long v = strtol(text, &end, 10);
    if (*end || v < 1 || v > most) {
        char said[ERR_QUOTE_LEN + 4];
        fprintf(stderr, "forward_loop: %s: expected an integer in [1, %d], got \"%s\"\n", name, most,
                err_escape(said, sizeof said, text));
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: forward_loop DIR T THREADS FORWARDS\n");
        return 2;
    }
    const int T = positive_argument(argv[2], "T", MAX_T), threads = positive_argument(argv[3], "THREADS", 256),
              forwards = positive_argument(argv[4], "FORWARDS", 1000000);
    Err err;
    Model model;
    KVCache cache;
    ThreadPool *pool = pool_create(threads, &err);
    if (!pool || model_load(&model, argv[1], pool, &err) || model_kv_init(&model, &cache, &err)) {
        fprintf(stderr, "forward_loop: %s\n", err.msg);
        return 2;
    }
    int tokens[CONTEXT + MAX_T];  // a fixed pattern of ids
    for (int i = 0; i < CONTEXT + T; i++) tokens[i] = (int)(((long)i * 7919 + 13) % model.n_vocab);
    float *logits = malloc(sizeof(float) * MAX_T * model.cfg.vocab_size);
    double *seconds = malloc(sizeof(double) * forwards);
    if (!logits || !seconds) return fprintf(stderr, "forward_loop: out of memory\n"), 1;
    if (model_forward(&model, &cache, tokens, CONTEXT, logits, false, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    for (int i = 0; i < forwards; i++) {
        kv_truncate(&cache, CONTEXT);
        const double t0 = now_seconds();
        if (model_forward(&model, &cache, tokens + CONTEXT, T, logits, T > 1, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
        seconds[i] = now_seconds() - t0;
    }
    qsort(seconds, forwards, sizeof *seconds, ascending);
    printf("%s: T = %d on %d threads, median %.3f ms a forward over %d\n", argv[1], T, threads,
           seconds[forwards / 2] * 1e3, forwards);
    free(seconds), free(logits);
    kv_free(&cache);
    model_free(&model);
    pool_free(pool);
    return 0;
}
