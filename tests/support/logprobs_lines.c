// logprobs_lines.c — generate --logprobs' lines against specdec logits (logprobs_lines.h).
#include "logprobs_lines.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

json_t *logprobs_lines_read(const char *text) {
    json_t *lines = json_array();
    for (const char *at = text; *at;) {
        const size_t n = strcspn(at, "\n");
        json_error_t je;
        json_t *line = json_loadb(at, n, 0, &je);
        CHECK(line, "a line that is not JSON (%s): %.*s", je.text, (int)n, at);
        if (!line) return json_decref(lines), NULL;
        json_array_append_new(lines, line);
        at += n + (at[n] == '\n');
    }
    return lines;
}

// The printed logits' rows: [rows, V] doubles, parsed from `specdec logits --all`'s lines.
static double *read_rows(const char *text, int *rows, int *V) {
    *rows = count_lines(text);
    *V = 0;
    for (const char *p = text; *p && *p != '\n'; p++) *V += *p == ' ';
    (*V)++;
    double *x = malloc(sizeof(double) * (size_t)*rows * *V);
    char *end;
    const char *p = text;
    for (size_t i = 0; x && i < (size_t)*rows * *V; i++, p = end) x[i] = strtod(p, &end);
    return x;
}

// log softmax(row) in place: row[x] − m − log Σ_y exp(row[y] − m), from the printed logits.
static void log_softmax(double *row, int V) {
    double m = row[0], sum = 0.0;
    for (int y = 1; y < V; y++) m = row[y] > m ? row[y] : m;
    for (int y = 0; y < V; y++) sum += exp(row[y] - m);
    const double log_z = m + log(sum);
    for (int y = 0; y < V; y++) row[y] -= log_z;
}

// The printed logits' error: 7 significant digits of values up to about 30, on both sides of log softmax.
static const double TOLERANCE = 1e-4;

// Line i against log softmax row [V].
static void check_line(const json_t *line, const double *row, int V, int i) {
    const int id = (int)json_integer_value(json_object_get(line, "id"));
    const double got = json_number_value(json_object_get(line, "logprob"));
    CHECK(json_integer_value(json_object_get(line, "i")) == i && id >= 0 && id < V, "line %d: i or id %d wrong", i, id);
    if (id < 0 || id >= V) return;
    CHECK(fabs(got - row[id]) < TOLERANCE, "line %d (token %d, %s): logprob %.9g, logits give %.9g", i,
          id, json_string_value(json_object_get(line, "kind")), got, row[id]);
    const json_t *top = json_object_get(line, "top_logprobs");
    double last = INFINITY;
    for (size_t k = 0; k < json_array_size(top); k++) {
        const json_t *alt = json_array_get(top, k);
        const int a = (int)json_integer_value(json_object_get(alt, "id"));
        const double value = json_number_value(json_object_get(alt, "logprob"));
        CHECK(a >= 0 && a < V && fabs(value - row[a]) < TOLERANCE && value <= last,
              "line %d, alternative %zu (token %d): %.9g, logits give %.9g (after %.9g)", i, k, a, value,
              a >= 0 && a < V ? row[a] : NAN, last);
        last = value;
    }
    int likelier = 0;  // than the last alternative: all of them alternatives too, those before it
    for (int y = 0; y < V && json_array_size(top); y++) likelier += row[y] > last + TOLERANCE;
    CHECK(likelier < (int)json_array_size(top) || !json_array_size(top), "line %d: %d tokens are likelier than the "
          "last of the %zu alternatives (%.9g)", i, likelier, json_array_size(top), last);
}

void logprobs_lines_check(const json_t *lines, const char *model_dir, const char *prompt_ids, int kinds[4]) {
    static const char *const names[4] = {"accepted", "resampled", "bonus", "target"};
    size_t length = strlen(prompt_ids) + 12 * json_array_size(lines) + 1;
    char *ids = malloc(length), *args = NULL, *out = NULL, *err = NULL;
    int at = snprintf(ids, length, "%s", prompt_ids), n_prompt = 0;
    for (const char *p = prompt_ids; *p; p++) n_prompt += *p != ' ' && (p == prompt_ids || p[-1] == ' ');
    for (size_t i = 0; i + 1 < json_array_size(lines); i++)  // (the last token's logits are not needed)
        at += snprintf(ids + at, length - at, " %lld", json_integer_value(json_object_get(json_array_get(lines, i), "id")));
    if (asprintf(&args, "logits -m %s --all --ids \"%s\"", model_dir, ids) < 0) return;
    CHECK(run_specdec(args, &out, &err) == 0, "specdec %s: %s", args, err);
    int rows, V;
    double *x = read_rows(out ? out : "", &rows, &V);
    CHECK(x && rows == n_prompt + (int)json_array_size(lines) - 1, "%d rows of logits for %d + %zu ids", rows, n_prompt,
          json_array_size(lines));
    for (size_t i = 0; x && !test_failures() && i < json_array_size(lines); i++) {
        const json_t *line = json_array_get(lines, i);
        double *row = x + (size_t)(n_prompt - 1 + i) * V;
        log_softmax(row, V);
        check_line(line, row, V, (int)i);
        for (int k = 0; k < 4; k++) kinds[k] += strcmp(json_string_value(json_object_get(line, "kind")) ?: "", names[k]) == 0;
    }
    free(x), free(ids), free(args), free(out), free(err);
}
