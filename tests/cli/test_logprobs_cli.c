// test_logprobs_cli.c — generate --logprobs K --logprobs-file FILE: one JSON line per generated token, whose values
// are the log-softmax of what `specdec logits` prints for the prompt and the tokens before it (logprobs_lines.h) —
// for kept drafts, residual draws, bonus tokens and plain decoding, with and without a draft, greedy and sampled,
// under penalties and a grammar too (the raw row, not the adjusted one); specdec batch's, whose sequences are
// verified together, equal generate's alone; and the options' misuse refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "logprobs_lines.h"

#define TARGET "weights/pystd/target"
#define PROMPT_IDS "314 286 7 87 303"  // "def f(x):" in the shipped tokenizer

// generate's output (--print-ids) and --logprobs k lines for options (besides the prompt).
static json_t *generate_lines(const char *options, int k, char **ids) {
    char path[] = "/tmp/specdec-logprobs-XXXXXX", *args, *err = NULL;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    *ids = NULL;
    if (asprintf(&args, "generate -m " TARGET " --print-ids --logprobs %d --logprobs-file %s %s", k, path, options) < 0)
        return NULL;
    CHECK(run_specdec(args, ids, &err) == 0, "specdec %s: %s", args, err);
    char *command, *text = NULL;
    if (asprintf(&command, "cat %s", path) < 0) return NULL;
    run_command(command, &text, NULL);
    json_t *lines = logprobs_lines_read(text ? text : "");
    unlink(path);
    free(args), free(err), free(command), free(text);
    return lines;
}

// Runs generate with options and --logprobs 4; checks its lines against logits and that there is one per generated
// token, its id. Adds the kinds seen.
static void check_generation(const char *options, int kinds[4]) {
    char *with, *out;
    if (asprintf(&with, "--ids \"" PROMPT_IDS "\" %s", options) < 0) return;
    json_t *lines = generate_lines(with, 4, &out);
    int n_out = 0;
    for (const char *p = out ? out : ""; *p; p++) n_out += *p != ' ' && *p != '\n' && (p == out || p[-1] == ' ');
    CHECK(lines && (int)json_array_size(lines) == n_out && n_out > 0, "%s: %zu lines for %d tokens", options,
          lines ? json_array_size(lines) : 0, n_out);
    for (size_t i = 0; lines && i < json_array_size(lines); i++) {
        char id[16];
        snprintf(id, sizeof id, "%lld", json_integer_value(json_object_get(json_array_get(lines, i), "id")));
        const char *at = out;
        for (size_t w = 0; w < i && at; w++) at = strchr(at, ' ') ? strchr(at, ' ') + 1 : NULL;
        CHECK(at && strncmp(at, id, strlen(id)) == 0, "%s: line %zu's id %s is not the output's", options, i, id);
        CHECK(json_array_size(json_object_get(json_array_get(lines, i), "top_logprobs")) == 4, "4 alternatives");
    }
    if (lines) logprobs_lines_check(lines, TARGET, PROMPT_IDS, kinds);
    json_decref(lines);
    free(with), free(out);
}

TEST(cli_logprobs_equal_the_logits_for_every_kind_of_token) {
    int kinds[4] = {0};
    // Sampled with a draft, under penalties and top-k: the raw rows, not the penalised ones.
    check_generation("-d weights/pystd/draft --gamma 4 -n 10 --temp 1 --seed 7 --top-k 40 --repetition-penalty 1.3",
                     kinds);
    check_generation("-d weights/pystd/draft --gamma 4 -n 6 --temp 0 --json", kinds);  // a grammar's: unmasked
    check_generation("-n 4 --temp 1 --seed 3", kinds);  // plain decoding
    static const char *const names[4] = {"accepted", "resampled", "bonus", "target"};
    for (int k = 0; k < 4; k++) CHECK(kinds[k] > 0, "no %s token reported", names[k]);
}

TEST(cli_logprobs_options_refused) {
    static const char *const bad[][2] = {
        {"--logprobs 3", "--logprobs-file"},
        {"--logprobs-file /dev/null", "--logprobs K"},
        {"--logprobs 21 --logprobs-file /dev/null", "--logprobs"},
        {"--logprobs -1 --logprobs-file /dev/null", "--logprobs"},
        {"--logprobs 2 --logprobs-file /nonexistent/x", "cannot write the log-probabilities"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *args, *out = NULL, *err = NULL;
        if (asprintf(&args, "generate -m " TARGET " --ids \"" PROMPT_IDS "\" -n 2 %s", bad[i][0]) < 0) return;
        const int status = run_specdec(args, &out, &err);
        CHECK(status == 2 && err && count_lines(err) == 1 && strstr(err, bad[i][1]),
              "%s: status %d, stderr \"%s\" (want one line naming %s)", bad[i][0], status, err ? err : "", bad[i][1]);
        free(args), free(out), free(err);
    }
}

// specdec batch: sequences verified together in one batched forward report each token's values as generate does
// alone (the server's legacy object; the same tokens, the same floats).
TEST(cli_batch_logprobs_equal_generates) {
    static const char *const lines[][2] = {
        {"{\"prompt\": \"def add(a, b):\", \"max_tokens\": 10, \"temperature\": 0, \"logprobs\": 2}",
         "-d weights/pystd/draft -t 1 -n 10 --temp 0 -p 'def add(a, b):'"},
        {"{\"prompt\": \"class Stack:\", \"max_tokens\": 10, \"temperature\": 0.7, \"seed\": 3, \"logprobs\": 2}",
         "-d weights/pystd/draft -t 1 -n 10 --temp 0.7 --seed 3 -p 'class Stack:'"},
    };
    char path[] = "/tmp/specdec-batch-XXXXXX", args[256], *out = NULL, *err = NULL;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < 2; i++) fprintf(f, "%s\n", lines[i][0]);
    fclose(f);
    snprintf(args, sizeof args, "batch -t 1 --parallel 2 -f %s", path);
    CHECK(run_specdec(args, &out, &err) == 0, "%s: %s", args, err);
    json_t *answers = logprobs_lines_read(out ? out : "");
    for (int i = 0; answers && i < 2; i++) {
        char *ids;
        json_t *want = generate_lines(lines[i][1], 2, &ids);
        const json_t *got = json_object_get(json_array_get(json_object_get(json_array_get(answers, i), "choices"), 0),
                                            "logprobs");
        const json_t *tokens = json_object_get(got, "tokens"), *values = json_object_get(got, "token_logprobs");
        CHECK(want && json_array_size(want) > 0 && json_array_size(tokens) == json_array_size(want),
              "line %d: %zu tokens' logprobs, generate's %zu", i, json_array_size(tokens), json_array_size(want));
        for (size_t t = 0; want && t < json_array_size(want) && t < json_array_size(tokens); t++) {
            const json_t *line = json_array_get(want, t);
            CHECK(json_equal(json_array_get(tokens, t), json_object_get(line, "token")) &&
                      (float)json_number_value(json_array_get(values, t)) ==
                          (float)json_number_value(json_object_get(line, "logprob")),
                  "line %d, token %zu: %s %.9g, generate's %s %.9g", i, t, json_string_value(json_array_get(tokens, t)),
                  json_number_value(json_array_get(values, t)), json_string_value(json_object_get(line, "token")),
                  json_number_value(json_object_get(line, "logprob")));
        }
        json_decref(want);
        free(ids);
    }
    json_decref(answers);
    unlink(path);
    free(out), free(err);
}
