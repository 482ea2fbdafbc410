// test_cli_batch.c — specdec batch on the shipped pair: one answer per input line, in input order, each the response
// object the server sends (its text that of specdec generate with the same options, prompt and seed), a bad line
// its error object and the rest going on (blank lines skipped, the last one read without its newline), written by -o
// to a file.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static const char *const LINES[] = {
    "{\"prompt\": \"def add(a, b):\", \"max_tokens\": 12, \"temperature\": 0}",
    "not json",
    "{\"prompt\": \"import os\\n\", \"max_tokens\": 8, \"seed\": 7}",
    "{\"prompt\": \"x\", \"max_tokens\": 0}",
    "{\"prompt\": \"class Stack:\", \"max_tokens\": 10, \"temperature\": 0.7, \"seed\": 3}",
};
enum { N_LINES = sizeof LINES / sizeof LINES[0] };

// The text generate gives for the line's prompt and options (less the newline it ends with), as a JSON string's
// contents (newlines and quotes escaped).
static char *generated(const char *options) {
    char args[512], *out, *err;
    snprintf(args, sizeof args, "generate -t 1 %s", options);
    CHECK(run_specdec(args, &out, &err) == 0, "generate %s: %s", options, err);
    free(err);
    const size_t len = strlen(out) - (strlen(out) > 0);
    char *escaped = malloc(2 * len + 1), *w = escaped;
    for (size_t i = 0; i < len; i++) {
        if (out[i] == '\n' || out[i] == '"') *w++ = '\\';
        *w++ = out[i] == '\n' ? 'n' : out[i];
    }
    *w = '\0';
    free(out);
    return escaped;
}

TEST(cli_batch_answers_in_order) {
    char path[] = "/tmp/specdec-batch-XXXXXX", out_path[64], args[256], *out, *err;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < N_LINES; i++)  // (a blank line skipped; the last line without its newline)
        fprintf(f, "%s%s%s", LINES[i], i < N_LINES - 1 ? "\n" : "", i == 1 ? " \r\n" : "");
    fclose(f);
    snprintf(out_path, sizeof out_path, "%s.out", path);  // -o: the answers in a file, nothing on standard output
    snprintf(args, sizeof args, "batch -t 1 --parallel 2 -f %s -o %s && cat %s", path, out_path, out_path);
    CHECK(run_specdec(args, &out, &err) == 0, "%s: %s", args, err);
    const char *says[N_LINES] = {"\"id\":\"cmpl-batch-1\"", "\"code\":\"invalid_json\"", "\"id\":\"cmpl-batch-3\"",
                                 "\"param\":\"max_tokens\"", "\"id\":\"cmpl-batch-5\""};
    char *texts[N_LINES] = {generated("-n 12 --temp 0 -p 'def add(a, b):'"), NULL,
                            generated("-n 8 --temp 1 --seed 7 -p 'import os\n'"), NULL,
                            generated("-n 10 --temp 0.7 --seed 3 -p 'class Stack:'")};
    CHECK(count_lines(out) == N_LINES, "%d answers to %d lines:\n%s", count_lines(out), N_LINES, out);
    char *line = out;
    for (int i = 0; i < N_LINES && line; i++) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        CHECK(strstr(line, says[i]), "answer %d does not say %s: %s", i + 1, says[i], line);
        char want[512];
        snprintf(want, sizeof want, "\"text\":\"%s\"", texts[i] ? texts[i] : "");
        CHECK(!texts[i] || strstr(line, want), "answer %d: not generate's text %s: %s", i + 1, want, line);
        line = end ? end + 1 : NULL;
        free(texts[i]);
    }
    // Where the batch's time went (batch_times): the steps, their rows, and three shares that add up to the whole.
    const char *times = strstr(err, "specdec batch: ");
    int steps = 0;
    double rows = 0, seconds = 0, target = 0, draft = 0, rest = 0;
    CHECK(times && sscanf(times, "specdec batch: %d steps of %lf rows on average; of their %lf s, the target's "
                          "forwards %lf%%, the draft's %lf%%, the rest (γ, accept, commit) %lf%%", &steps, &rows,
                          &seconds, &target, &draft, &rest) == 6, "no line of where the time went: %s", err);
    CHECK(steps > 0 && rows >= 1 && seconds > 0 && target > 0 && draft > 0 && fabs(target + draft + rest - 100) < 0.5,
          "where the time went: %s", times);
    free(out);
    free(err);
    unlink(out_path);
    unlink(path);
}

// batch drafts as generate does: with a draft model (the shipped pair's), by the n-gram lookup beside it unless
// --no-lookup. A sampled line whose prompt repeats itself (so the lookup proposes runs) gets generate's text both
// ways, and the two texts differ: which drafters ran shows in the text, and the same options give the same text in
// either command.
TEST(cli_batch_drafts_by_lookup_as_generate_does) {
    char path[] = "/tmp/specdec-batch-XXXXXX", args[256], *texts[2];
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    fprintf(f, "{\"prompt\": \"" REPEATING_JSON "\", \"max_tokens\": 24, \"temperature\": 0.8, \"seed\": 7}\n");
    fclose(f);
    for (int alone = 0; alone < 2; alone++) {
        char *out, *err, want[512];
        const char *option = alone ? " --no-lookup" : "";
        snprintf(args, sizeof args, "batch -t 1%s -f %s", option, path);
        CHECK(run_specdec(args, &out, &err) == 0, "%s: %s", args, err);
        snprintf(want, sizeof want, "-n 24 --temp 0.8 --seed 7%s -p '" REPEATING "'", option);
        texts[alone] = generated(want);
        snprintf(want, sizeof want, "\"text\":\"%s\"", texts[alone]);
        CHECK(strstr(out, want), "batch%s: not generate's text %s: %s", option, want, out);
        free(out);
        free(err);
    }
    CHECK(strcmp(texts[0], texts[1]) != 0, "the lookup beside the draft model changed nothing: \"%s\"", texts[0]);
    free(texts[0]);
    free(texts[1]);
    unlink(path);
}

// Under a grammar: lines with response_format, greedy and sampled, beside a line without, each answered by generate
// --json-schema's text for its prompt and seed (each sequence's grammar its own, in the batch as alone).
TEST(cli_batch_response_format) {
#define SCHEMA "{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\", \"minimum\": 0, " \
               "\"maximum\": 99}}, \"required\": [\"id\"], \"additionalProperties\": false}"
#define FORMAT "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", " \
               "\"schema\": " SCHEMA "}}"
    static const char *const lines[] = {
        "{\"prompt\": \"x = \", \"max_tokens\": 30, \"temperature\": 0, " FORMAT "}",
        "{\"prompt\": \"def f(\", \"max_tokens\": 12, \"seed\": 5}",
        "{\"prompt\": \"y = \", \"max_tokens\": 30, \"seed\": 11, \"temperature\": 0.8, " FORMAT "}",
    };
    char path[] = "/tmp/specdec-batch-XXXXXX", args[256], *out, *err;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 3; i++) fprintf(f, "%s\n", lines[i]);
    fclose(f);
    snprintf(args, sizeof args, "batch -t 1 --parallel 3 -f %s", path);
    CHECK(run_specdec(args, &out, &err) == 0, "%s: %s", args, err);
    char *texts[3] = {generated("-n 30 --temp 0 -p 'x = ' --json-schema '" SCHEMA "'"),
                      generated("-n 12 --temp 1 --seed 5 -p 'def f('"),
                      generated("-n 30 --temp 0.8 --seed 11 -p 'y = ' --json-schema '" SCHEMA "'")};
    CHECK(count_lines(out) == 3, "%d answers to 3 lines:\n%s", count_lines(out), out);
    char *line = out;
    for (int i = 0; i < 3 && line; i++) {
        char *end = strchr(line, '\n');
        if (end) *end = '\0';
        char want[512];
        snprintf(want, sizeof want, "\"text\":\"%s\"", texts[i]);
        CHECK(strstr(line, want), "answer %d: not generate's text %s: %s", i + 1, want, line);
        CHECK(i == 1 || strstr(line, "\"text\":\"{"), "answer %d: not an object: %s", i + 1, line);
        line = end ? end + 1 : NULL;
        free(texts[i]);
    }
    free(out);
    free(err);
    unlink(path);
#undef FORMAT
#undef SCHEMA
}
