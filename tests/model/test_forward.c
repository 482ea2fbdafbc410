// test_forward.c — the C forward pass against an independent PyTorch reference (tools/gpt2_reference.py).
//
// tests/fixtures/<name>/ (written by tools/make_fixtures.py, described in tests/fixtures/README.md) is a small
// random GPT-2 checkpoint in the Hugging Face layout, plus expected.bin: a token sequence and the reference logits
// of every position. Little-endian:
//
//     "SDFX"  u32 version (1)  u32 T  u32 V  i32 tokens[T]  f32 logits[T][V]
//
// tests/fixtures/broken/<name>/ breaks one loader rule; its broken.txt states the rule ("rule: ...") and what the
// error message must name ("mention: ...", one a line).
//
// Two kinds of check:
//   - against the reference, within LOGIT_TOLERANCE, however the tokens are fed (all at once, one by one, in chunks);
//   - against the model itself, bit for bit: a position's logits do not depend on the chunk it was computed in
//     (chunks of up to MAX_CHUNK tokens), on the thread count, or on what the KV cache held before a rollback.
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "sdfx.h"
#include "model/kvcache.h"
#include "model/model.h"
#include "base/threads.h"

#define FIXTURES_DIR "tests/fixtures"
#define BROKEN_DIR FIXTURES_DIR "/broken"

// Error of a logit a against the reference b (logit_error and LOGIT_TOLERANCE, tests/support/harness.h):
//
//     err(a, b) = |a − b| / max(|b|, 0.1 · max_j |b_j|)        (max over b's row of V logits)
//
// a relative error, except that logits under a tenth of the row's largest are measured against that tenth (their
// own size says nothing about how well the model was computed). The tolerance sits between the F32 noise floor
// and the smallest plausible mistakes, both measured per fixture in tests/fixtures/README.md: a plain F32
// evaluation of the same math lands within 3e-5 of the F64 reference, computing the other GELU costs over 1e-3.
// The reference is computed from the very F16/BF16 values stored, so one tolerance serves every dtype.

enum {
    MAX_CHUNK = 16,     // chunks of up to this many tokens
    MAX_FOLDERS = 64,
    NAME_LEN = 64,
    SHOWN_MISMATCHES = 5,
};

// Chunk-size patterns for feed(), cycled over the sequence; the last chunk is cut to what is left.
static const int ALL_AT_ONCE[] = {INT_MAX};
static const int ONE_BY_ONE[] = {1};
static const int UNEVEN[] = {3, 1, 4, 1, 5, 9, 2, 6, 16};
#define PATTERN(p) (p), (int)(sizeof(p) / sizeof((p)[0]))

// ---- fixture files --------------------------------------------------------------------------------------------

typedef struct {
    char name[NAME_LEN];             // "f32_tied_prefix"
    char dir[NAME_LEN + 32];         // "tests/fixtures/f32_tied_prefix"
} Folder;


static int compare_folders(const void *a, const void *b) {
    return strcmp(((const Folder *)a)->name, ((const Folder *)b)->name);
}

// The folders under `root` that hold a file called `marker`, sorted by name; returns how many.
static int list_folders(const char *root, const char *marker, Folder folders[MAX_FOLDERS]) {
    DIR *dir = opendir(root);
    CHECK(dir, "cannot open %s (the tests run from the repository root)", root);
    if (!dir) return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(dir)) && n < MAX_FOLDERS;) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= NAME_LEN) continue;
        Folder *f = &folders[n];
        char marker_path[sizeof f->dir + 32];
        strcpy(f->name, e->d_name);  // fits: checked above
        snprintf(f->dir, sizeof f->dir, "%s/%s", root, f->name);
        snprintf(marker_path, sizeof marker_path, "%s/%s", f->dir, marker);
        if (access(marker_path, R_OK) == 0) n++;
    }
    closedir(dir);
    qsort(folders, (size_t)n, sizeof(Folder), compare_folders);
    CHECK(n > 0, "no folder under %s holds a %s (regenerate: /usr/bin/python3 tools/make_fixtures.py)", root,
          marker);
    return n;
}

// Reads <folder>/expected.bin; false (and a failed check) if it is not a well-formed version 1 file.
static bool fixture_expected(Expected *e, const Folder *folder) {
    char path[sizeof folder->dir + 16];
    snprintf(path, sizeof path, "%s/expected.bin", folder->dir);
    bool ok = expected_read(e, path);
    CHECK(ok, "%s: not a version 1 SDFX file of T tokens and T×V logits (regenerate the fixtures)", path);
    return ok;
}

// ---- running the model ----------------------------------------------------------------------------------------

typedef struct {
    ThreadPool *pool;
    Model model;
    KVCache cache;
} Runner;

static bool runner_open(Runner *r, const char *dir, int n_threads) {
    Err err = {{0}};
    *r = (Runner){0};
    r->pool = pool_create(n_threads, &err);
    bool ok = r->pool && model_load(&r->model, dir, r->pool, &err) == 0;
    if (ok && model_kv_init(&r->model, &r->cache, &err)) {
        model_free(&r->model);
        ok = false;
    }
    if (!ok && r->pool) pool_free(r->pool);
    CHECK(ok, "%s: cannot load with %d thread(s): %s", dir, n_threads, err.msg);
    return ok;
}

static void runner_close(Runner *r) {
    kv_free(&r->cache);
    model_free(&r->model);
    pool_free(r->pool);
}

// Feeds tokens[0, T) after what the cache holds, in chunks of chunks[0], chunks[1], ... tokens (cycled; the last
// one cut to what is left), and writes the logits of every fed position to logits: [T, V].
static bool feed(Runner *r, const int *tokens, int T, const int *chunks, int n_chunks, float *logits) {
    const int V = r->model.cfg.vocab_size;
    for (int done = 0, i = 0; done < T; i++) {
        int n = chunks[i % n_chunks] < T - done ? chunks[i % n_chunks] : T - done;
        Err err = {{0}};
        if (model_forward(&r->model, &r->cache, tokens + done, n, logits + (size_t)done * V, true, &err)) {
            CHECK(false, "model_forward of tokens [%d, %d) failed: %s", done, done + n, err.msg);
            return false;
        }
        done += n;
    }
    return true;
}

// A fixture's expected.bin and its model, with 1 thread; false (and a failed check) if either is unusable.
static bool fixture_open(Expected *e, Runner *r, const Folder *folder) {
    if (!fixture_expected(e, folder)) return false;
    if (!runner_open(r, folder->dir, 1)) {
        expected_free(e);
        return false;
    }
    const int V = r->model.cfg.vocab_size;
    CHECK(V == e->V, "%s: the model has V = %d, expected.bin says %d", folder->name, V, e->V);
    if (V != e->V) {
        runner_close(r);
        expected_free(e);
    }
    return V == e->V;
}

static void fixture_close(Expected *e, Runner *r) {
    runner_close(r);
    expected_free(e);
}

static int *random_tokens(int n, int V) {
    int *tokens = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++) tokens[i] = test_rand_int(0, V - 1);
    return tokens;
}

// ---- comparisons ----------------------------------------------------------------------------------------------

// Checks got [T, V] against the reference want [T, V] (the measure above), shows the first few mismatches, and
// prints the largest error.
static void check_close(const char *fixture, const char *how, const float *got, const float *want, int T, int V) {
    double max_err = 0;
    int bad = 0;
    for (int t = 0; t < T; t++) {
        const float *a = got + (size_t)t * V, *b = want + (size_t)t * V;
        const double row_max = logit_row_max(b, V);
        for (int j = 0; j < V; j++) {
            double err = logit_error(a[j], b[j], row_max);
            if (!(err <= LOGIT_TOLERANCE) && bad++ < SHOWN_MISMATCHES)  // NaN fails too
                test_fail(__FILE__, __LINE__, "%s (%s): position %d logit %d: got %.9g, expected %.9g (error %.2e)",
                          fixture, how, t, j, a[j], b[j], err);
            max_err = isnan(err) ? INFINITY : fmax(max_err, err);
        }
    }
    CHECK(bad == 0, "%s (%s): %d of %d logits off by more than %.0e; max error %.2e", fixture, how, bad, T * V,
          LOGIT_TOLERANCE, max_err);
    printf("    %-26s %-22s max error %.1e\n", fixture, how, max_err);
    fflush(stdout);
}

// Checks that a and b, both [T, V], are bit-identical, and shows the first difference.
static void check_identical(const char *fixture, const char *what, const float *a, const float *b, int T, int V) {
    for (size_t i = 0; i < (size_t)T * V; i++)
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            CHECK(false, "%s: %s: position %zu logit %zu differs: %a vs %a", fixture, what, i / V, i % V, a[i], b[i]);
            return;
        }
}

// ---- against the reference ------------------------------------------------------------------------------------

// Every fixture's tokens fed in the given chunk pattern, from an empty cache, against the expected logits.
static void check_fixtures_fed(const char *how, const int *chunks, int n_chunks) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Expected e;
        Runner r;
        if (!fixture_open(&e, &r, &folders[i])) continue;
        float *logits = malloc(sizeof(float) * e.T * e.V);
        if (feed(&r, e.tokens, e.T, chunks, n_chunks, logits))
            check_close(folders[i].name, how, logits, e.logits, e.T, e.V);
        free(logits);
        fixture_close(&e, &r);
    }
}

TEST(forward_matches_reference) { check_fixtures_fed("all at once", PATTERN(ALL_AT_ONCE)); }
TEST(forward_matches_reference_token_by_token) { check_fixtures_fed("one token at a time", PATTERN(ONE_BY_ONE)); }
TEST(forward_matches_reference_in_chunks) { check_fixtures_fed("chunks 3+1+4+1+5...", PATTERN(UNEVEN)); }

// ---- against itself -------------------------------------------------------------------------------------------

// A whole context of random tokens: one token at a time, then in random chunks of 1..MAX_CHUNK (the first one of
// MAX_CHUNK): every position's logits bit-identical.
TEST(forward_batch_invariant) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Runner r;
        if (!runner_open(&r, folders[i].dir, 1)) continue;
        const int S = r.model.cfg.n_positions, V = r.model.cfg.vocab_size;
        int *tokens = random_tokens(S, V), *chunks = malloc(sizeof(int) * S);
        float *single = malloc(sizeof(float) * S * V), *chunked = malloc(sizeof(float) * S * V);
        for (int c = 0; c < S; c++) chunks[c] = c == 0 ? MAX_CHUNK : test_rand_int(1, MAX_CHUNK);
        bool ok = feed(&r, tokens, S, PATTERN(ONE_BY_ONE), single);
        kv_truncate(&r.cache, 0);
        if (ok && feed(&r, tokens, S, chunks, S, chunked))
            check_identical(folders[i].name, "T = 1 vs chunks of up to 16", single, chunked, S, V);
        free(tokens);
        free(chunks);
        free(single);
        free(chunked);
        runner_close(&r);
    }
}

// The same tokens and chunks with 1 thread and with 2 and 3, every job split over all of them (work_per_thread
// 0: the fixtures are too small for the default rule to split much), and with 3 under the default rule, which
// runs each job on as many as it pays for: bit-identical logits.
TEST(forward_thread_count_invariant) {
    static const struct { int threads; size_t work_per_thread; } splits[] = {
        {2, 0}, {3, 0}, {3, MODEL_WORK_PER_THREAD}, {3, 1000}};
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Runner one;
        if (!runner_open(&one, folders[i].dir, 1)) continue;
        const int S = one.model.cfg.n_positions, V = one.model.cfg.vocab_size;
        int *tokens = random_tokens(S, V);
        float *a = malloc(sizeof(float) * S * V), *b = malloc(sizeof(float) * S * V);
        if (feed(&one, tokens, S, PATTERN(UNEVEN), a)) {
            for (int k = 0; k < (int)(sizeof splits / sizeof splits[0]); k++) {
                Runner many;
                if (!runner_open(&many, folders[i].dir, splits[k].threads)) continue;
                many.model.work_per_thread = splits[k].work_per_thread;
                char what[96];
                snprintf(what, sizeof what, "1 thread vs %d threads, %zu multiply-adds per thread",
                         splits[k].threads, splits[k].work_per_thread);
                if (feed(&many, tokens, S, PATTERN(UNEVEN), b)) check_identical(folders[i].name, what, a, b, S, V);
                runner_close(&many);
            }
        }
        free(tokens);
        free(a);
        free(b);
        runner_close(&one);
    }
}

// The fixture's tokens x: feed x[0, k) then x[k, T); truncate to k, feed other random tokens (up to the end of the
// context), truncate to k again and feed x[k, T) again, in the same chunks: the same logits for positions [k, T),
// bit for bit, and the reference's.
TEST(forward_kv_rollback) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Expected e;
        Runner r;
        if (!fixture_open(&e, &r, &folders[i])) continue;
        const char *name = folders[i].name;
        const int T = e.T, V = e.V, k = test_rand_int(1, T - 1);
        const int m = test_rand_int(1, r.model.cfg.n_positions - k);
        int *other = random_tokens(m, V);
        float *prefix = malloc(sizeof(float) * k * V), *other_logits = malloc(sizeof(float) * m * V);
        float *first = malloc(sizeof(float) * (T - k) * V), *again = malloc(sizeof(float) * (T - k) * V);
        bool ok = feed(&r, e.tokens, k, PATTERN(UNEVEN), prefix) &&
                  feed(&r, e.tokens + k, T - k, PATTERN(UNEVEN), first);
        kv_truncate(&r.cache, k);
        ok = ok && feed(&r, other, m, PATTERN(UNEVEN), other_logits);
        CHECK(!ok || r.cache.len == k + m, "%s: the cache holds %d positions, expected %d", name, r.cache.len, k + m);
        kv_truncate(&r.cache, k);
        if (ok && feed(&r, e.tokens + k, T - k, PATTERN(UNEVEN), again)) {
            char what[96];
            snprintf(what, sizeof what, "rollback to %d after %d other tokens", k, m);
            check_identical(name, what, first, again, T - k, V);
            check_close(name, "after a rollback", again, e.logits + (size_t)k * V, T - k, V);
        }
        free(other);
        free(prefix);
        free(other_logits);
        free(first);
        free(again);
        fixture_close(&e, &r);
    }
}

// ---- refusals -------------------------------------------------------------------------------------------------

// Whether `text` contains `word`, ignoring spaces in both ("[32, 96]" contains "32,96").
static bool contains_ignoring_spaces(const char *text, const char *word) {
    char *a = malloc(strlen(text) + 1), *b = malloc(strlen(word) + 1), *p = a, *q = b;
    for (; *text; text++)
        if (*text != ' ') *p++ = *text;
    for (; *word; word++)
        if (*word != ' ') *q++ = *word;
    *p = *q = '\0';
    bool found = strstr(a, b) != NULL;
    free(a);
    free(b);
    return found;
}

// A forward that would run past n_positions is refused, names the context length and leaves the cache as it was;
// the context can be filled exactly.
TEST(forward_refuses_past_context) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Runner r;
        if (!runner_open(&r, folders[i].dir, 1)) continue;
        const char *name = folders[i].name;
        const int P = r.model.cfg.n_positions, V = r.model.cfg.vocab_size;
        int *tokens = random_tokens(P + 1, V);
        float *logits = malloc(sizeof(float) * (P + 1) * V);
        char context[16];
        snprintf(context, sizeof context, "%d", P);
        if (feed(&r, tokens, P - 2, PATTERN(UNEVEN), logits)) {
            Err err = {{0}};
            int rc = model_forward(&r.model, &r.cache, tokens, 3, logits, true, &err);
            CHECK(rc == -1, "%s: 3 tokens after %d of %d positions: accepted", name, P - 2, P);
            CHECK(rc != -1 || strstr(err.msg, context), "%s: the refusal does not name the context length %d: %s",
                  name, P, err.msg);
            CHECK(r.cache.len == P - 2, "%s: a refused forward changed the cache length to %d", name, r.cache.len);
            rc = model_forward(&r.model, &r.cache, tokens, 2, logits, true, &err);
            CHECK(rc == 0 && r.cache.len == P, "%s: filling the context exactly failed: %s", name, err.msg);
            CHECK(model_forward(&r.model, &r.cache, tokens, 1, logits, false, &err) == -1,
                  "%s: a token past a full context was accepted", name);
        }
        free(tokens);
        free(logits);
        runner_close(&r);
    }
}

// Token ids outside [0, V) are refused without touching the cache; the model still matches the reference after.
TEST(forward_refuses_bad_token) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int i = 0; i < n; i++) {
        Expected e;
        Runner r;
        if (!fixture_open(&e, &r, &folders[i])) continue;
        const char *name = folders[i].name;
        const int bad_ids[] = {e.V, e.V + 1000, -1, INT_MIN};
        float *logits = malloc(sizeof(float) * e.T * e.V);
        for (size_t b = 0; b < sizeof bad_ids / sizeof bad_ids[0]; b++) {
            int tokens[2] = {0, bad_ids[b]};
            char id[16];
            snprintf(id, sizeof id, "%d", bad_ids[b]);
            Err err = {{0}};
            int rc = model_forward(&r.model, &r.cache, tokens, 2, logits, true, &err);
            CHECK(rc == -1, "%s: token id %d (V = %d) accepted", name, bad_ids[b], e.V);
            CHECK(rc != -1 || strstr(err.msg, id), "%s: the refusal does not name the token id %d: %s", name,
                  bad_ids[b], err.msg);
            CHECK(r.cache.len == 0, "%s: a refused forward changed the cache length to %d", name, r.cache.len);
            kv_truncate(&r.cache, 0);  // so that one wrong refusal does not spoil the next checks
        }
        if (feed(&r, e.tokens, e.T, PATTERN(ALL_AT_ONCE), logits))
            check_close(name, "after refusals", logits, e.logits, e.T, e.V);
        free(logits);
        fixture_close(&e, &r);
    }
}

// ---- the CLI --------------------------------------------------------------------------------------------------

// Parses `rows` lines of V space-separated numbers, and nothing more, into out: [rows, V].
static bool parse_logits(float *out, const char *text, int rows, int V, const char *fixture) {
    const char *p = text;
    for (int t = 0; t < rows; t++) {
        for (int j = 0; j < V; j++) {
            char *end;
            out[(size_t)t * V + j] = strtof(p, &end);
            const char separator = j < V - 1 ? ' ' : '\n';
            if (end == p || *end != separator) {
                CHECK(false, "%s: output line %d, value %d of %d: expected a number then '%s' at \"%.20s\"", fixture,
                      t + 1, j + 1, V, separator == ' ' ? " " : "\\n", p);
                return false;
            }
            p = end + 1;
        }
    }
    CHECK(*p == '\0', "%s: more than %d line(s) of output", fixture, rows);
    return *p == '\0';
}

// `specdec logits -m DIR --ids "..." [--all]` on every fixture: T lines (one without --all: the last position) of
// V %.7g floats, matching the reference.
static void check_cli_logits(bool all) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(FIXTURES_DIR, "expected.bin", folders);
    for (int f = 0; f < n; f++) {
        Expected e;
        if (!fixture_expected(&e, &folders[f])) continue;
        char command[1024];
        int len = snprintf(command, sizeof command, "%s logits -m %s%s --ids \"", specdec_bin(), folders[f].dir,
                           all ? " --all" : "");
        for (int t = 0; t < e.T; t++)
            len += snprintf(command + len, sizeof command - len, "%s%d", t ? " " : "", e.tokens[t]);
        snprintf(command + len, sizeof command - len, "\"");

        char *out = NULL, *err = NULL;
        int status = run_command(command, &out, &err);
        CHECK(status == 0, "`%s` exited with %d: %s", command, status, err ? err : "");
        const int rows = all ? e.T : 1;
        float *got = malloc(sizeof(float) * rows * e.V);
        if (status == 0 && parse_logits(got, out, rows, e.V, folders[f].name))
            check_close(folders[f].name, all ? "specdec logits --all" : "specdec logits", got,
                        e.logits + (size_t)(e.T - rows) * e.V, rows, e.V);
        free(got);
        free(out);
        free(err);
        expected_free(&e);
    }
}

TEST(forward_cli_logits_all) { check_cli_logits(true); }
TEST(forward_cli_logits_last) { check_cli_logits(false); }

// ---- broken checkpoints ---------------------------------------------------------------------------------------

// Every checkpoint under broken/: model_load fails with an error naming what broken.txt lists, and
// `specdec logits` exits with status 2, nothing on stdout and that one line on stderr.
TEST(forward_rejects_broken_checkpoints) {
    Folder folders[MAX_FOLDERS];
    int n = list_folders(BROKEN_DIR, "broken.txt", folders);
    ThreadPool *pool = pool_create(1, &(Err){{0}});
    CHECK(pool, "pool_create(1) failed");
    for (int b = 0; b < n && pool; b++) {
        const char *dir = folders[b].dir;
        char path[sizeof folders[b].dir + 16], line[256], command[1024];
        snprintf(path, sizeof path, "%s/broken.txt", dir);
        snprintf(command, sizeof command, "%s logits -m %s --ids \"0 1\"", specdec_bin(), dir);

        Model model;
        Err load_err = {{0}};
        int rc = model_load(&model, dir, pool, &load_err);
        CHECK(rc == -1, "%s: loaded, but breaks a rule (see %s)", folders[b].name, path);
        if (rc == 0) model_free(&model);
        char *out = NULL, *err = NULL;
        int status = run_command(command, &out, &err);
        const char *newline = err ? strchr(err, '\n') : NULL;
        CHECK(status == EXIT_BAD_INPUT, "`%s` exited with %d, expected %d", command, status, EXIT_BAD_INPUT);
        CHECK(out && !*out, "%s: `specdec logits` printed on stdout: %.80s", folders[b].name, out ? out : "(nothing)");
        CHECK(newline && newline[1] == '\0', "%s: stderr is not one line: \"%s\"", folders[b].name, err ? err : "");

        FILE *f = fopen(path, "r");
        int mentions = 0;
        while (f && fgets(line, sizeof line, f)) {
            if (strncmp(line, "mention: ", 9) != 0) continue;
            line[strcspn(line, "\n")] = '\0';
            const char *word = line + 9;
            mentions++;
            CHECK(contains_ignoring_spaces(load_err.msg, word), "%s: model_load's error does not name \"%s\": %s",
                  folders[b].name, word, load_err.msg);
            CHECK(err && contains_ignoring_spaces(err, word), "%s: specdec's error does not name \"%s\": %.*s",
                  folders[b].name, word, err ? (int)strcspn(err, "\n") : 0, err ? err : "");
        }
        if (f) fclose(f);
        CHECK(mentions > 0, "%s: no \"mention:\" lines", path);
        free(out);
        free(err);
    }
    if (pool) pool_free(pool);
}
