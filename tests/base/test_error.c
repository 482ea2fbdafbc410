// test_error.c — error messages are one escaped line: err_fmt's notation and cutting (error.h), then every loader
// fed input that holds newlines, ANSI escape sequences, invalid UTF-8 and very long names, in the file's content and
// in its path, down to what `specdec inspect` prints.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/utf8.h"
#include "checkpoint/config.h"
#include "checkpoint/safetensors.h"
#include "harness.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"

// The ANSI sequence that turns a terminal's text red, and a clear-screen: what a crafted file would print.
#define RED "\x1b[31m"
#define CLEAR "\x1b[2J"

// Checks that msg is one clean line: valid UTF-8, no control byte (< 0x20 or 0x7F), within Err's buffer, and that
// it contains `want` (NULL: anything).
static void check_clean(const char *what, const char *msg, const char *want) {
    size_t n = strnlen(msg, sizeof ((Err *)0)->msg);
    CHECK(n < sizeof ((Err *)0)->msg, "%s: message not NUL-terminated within the buffer", what);
    bool control = false;
    for (size_t i = 0; i < n; i++) control |= (unsigned char)msg[i] < 0x20 || msg[i] == 0x7F;
    CHECK(!control, "%s: control byte in message: %s", what, msg);
    CHECK(utf8_invalid_offset(msg, n) == n, "%s: invalid UTF-8 at byte %zu of the message", what,
          utf8_invalid_offset(msg, n));
    if (want) CHECK(strstr(msg, want), "%s: message lacks '%s': %s", what, want, msg);
}

// ---------------------------------------------------------------------------------------------------------------
// err_fmt and err_quote

TEST(err_fmt_escapes_control_characters_and_invalid_utf8) {
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"plain text, é € 😀 and a \\ stay", "plain text, é € 😀 and a \\ stay"},
        {"line\nbreak\r\ttab", "line\\nbreak\\r\\ttab"},
        {RED "red" CLEAR, "\\x1B[31mred\\x1B[2J"},
        {"\x01\x1f\x7f", "\\x01\\x1F\\x7F"},
        {"bad \xff\xfe bytes", "bad \\xFF\\xFE bytes"},
        {"cut \xe2\x82 short", "cut \\xE2\\x82 short"},        // an incomplete character inside the message
        {"overlong \xc0\xaf", "overlong \\xC0\\xAF"},
        {"surrogate \xed\xa0\x80", "surrogate \\xED\\xA0\\x80"},
        {"C1 \xc2\x9b" "31m and \xc2\x85", "C1 \\u009B31m and \\u0085"},  // CSI and NEL as one character each
        {"\xc2\xa0 is no control", "\xc2\xa0 is no control"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        Err err;
        CHECK(err_fmt(&err, "%s", cases[c].in) == -1, "err_fmt does not return -1");
        CHECK(strcmp(err.msg, cases[c].want) == 0, "case %zu: got '%s', want '%s'", c, err.msg, cases[c].want);
        check_clean("escaped", err.msg, NULL);
        // Escaping again changes nothing, and err->msg may be an argument.
        Err again = err;
        err_fmt(&again, "%s", again.msg);
        CHECK(strcmp(again.msg, err.msg) == 0, "case %zu: escaped twice '%s' differs from once '%s'", c,
              again.msg, err.msg);
    }
    CHECK(err_fmt(NULL, "no %s", "err") == -1, "err_fmt(NULL) does not return -1");
}

TEST(err_fmt_cuts_long_messages_at_a_character_boundary) {
    enum { SIZE = sizeof ((Err *)0)->msg };
    char *long_text = malloc(4 * SIZE);
    static const char *const units[] = {"a", "\xc3\xa9", "\n", "\x1b", "\xff", "\xe2\x82\xac", "\xc2\x9b"};
    for (size_t u = 0; u < sizeof units / sizeof *units; u++) {
        size_t k = strlen(units[u]);
        size_t n_units = (4 * SIZE - 1) / k;
        for (size_t i = 0; i < n_units; i++) memcpy(long_text + i * k, units[u], k);
        long_text[n_units * k] = '\0';
        Err err;
        err_fmt(&err, "%s", long_text);
        size_t n = strlen(err.msg);
        CHECK(n >= SIZE - 12 && n < SIZE, "unit %zu: message of %zu bytes", u, n);
        CHECK(n >= 3 && strcmp(err.msg + n - 3, "...") == 0, "unit %zu: a cut message does not end in '...'", u);
        check_clean("cut", err.msg, NULL);
        // Nothing half-escaped before the "...": the text is whole units.
        Err unit;
        err_fmt(&unit, "%s", units[u]);
        size_t m = strlen(unit.msg);
        CHECK((n - 3) % m == 0 && strncmp(err.msg + n - 3 - m, unit.msg, m) == 0,
              "unit %zu: cut inside an escape or a character: ...%s", u, err.msg + n - 3 - m);
    }
    // Exactly the buffer: no "..."; one byte more: cut.
    memset(long_text, 'b', SIZE - 1);
    long_text[SIZE - 1] = '\0';
    Err err;
    err_fmt(&err, "%s", long_text);
    CHECK(strcmp(err.msg, long_text) == 0, "a message of %d bytes was changed", SIZE - 1);
    err_fmt(&err, "%s!", long_text);
    CHECK(strlen(err.msg) == SIZE - 1 && strcmp(err.msg + SIZE - 4, "...") == 0, "a message one byte too long");
    free(long_text);
}

TEST(err_quote_keeps_short_input_and_cuts_long_input) {
    char q[ERR_QUOTE_LEN + 4];
    CHECK(strcmp(err_quote(q, "short"), "short") == 0, "short input changed: %s", q);
    char s[3 * ERR_QUOTE_LEN];
    memset(s, 'x', ERR_QUOTE_LEN);
    s[ERR_QUOTE_LEN] = '\0';
    CHECK(strcmp(err_quote(q, s), s) == 0, "input of ERR_QUOTE_LEN bytes changed");
    s[ERR_QUOTE_LEN] = 'y';
    s[ERR_QUOTE_LEN + 1] = '\0';
    CHECK(strlen(err_quote(q, s)) == ERR_QUOTE_LEN + 3 && strncmp(q, s, ERR_QUOTE_LEN) == 0 &&
              strcmp(q + ERR_QUOTE_LEN, "...") == 0, "long input: %s", q);
    memset(s, 'x', ERR_QUOTE_LEN - 1);  // then "é" over bytes 63 and 64: cut before it
    strcpy(s + ERR_QUOTE_LEN - 1, "\xc3\xa9 and more");
    CHECK(strlen(err_quote(q, s)) == ERR_QUOTE_LEN + 2 && strcmp(q + ERR_QUOTE_LEN - 1, "...") == 0,
          "cut inside a character: %s", q);
}

// ---------------------------------------------------------------------------------------------------------------
// The loaders

// A folder whose name holds a newline and an escape sequence, made in a fresh temporary folder *parent, for the
// files that the loaders read (the caller frees it and removes *parent with fixture_remove_dir).
static char *nasty_dir(char **parent) {
    *parent = fixture_dir();
    char *dir;
    if (asprintf(&dir, "%s/new\nline" RED "dir", *parent) < 0 || mkdir(dir, 0700) != 0) abort();
    return dir;
}

TEST(err_tokenizer_json_messages_are_one_escaped_line) {
    static const Merge merges[] = {{"h", "e"}};
    static const struct {
        const char *key, *value, *want;
    } cases[] = {
        {"\n" RED "red", "-1", "vocab[\"\\n\\x1B[31mred\"]: expected an id"},
        {"ok", "\"\\n\\u001b[31m\"", "vocab[\"ok\"]: expected an id"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        json_t *root = fixture_tokenizer_json(merges, 1);
        json_object_set_new(json_object_get(json_object_get(root, "model"), "vocab"), cases[c].key,
                            json_loads(cases[c].value, JSON_DECODE_ANY, NULL));
        char *parent, *dir = nasty_dir(&parent), *path = fixture_write_json(dir, "tokenizer.json", root);
        Tokenizer tok;
        Err err = {""};
        CHECK(tokenizer_load_json(&tok, path, &err) == -1, "case %zu accepted", c);
        check_clean("tokenizer.json", err.msg, cases[c].want);
        check_clean("tokenizer.json", err.msg, "new\\nline\\x1B[31mdir/tokenizer.json");
        free(path);
        free(dir);
    fixture_remove_dir(parent);
        json_decref(root);
    }
    // A syntax error that jansson reports quoting the input: the escape sequence after a newline.
    char *dir = fixture_dir(), *path = fixture_write_text(dir, "tokenizer.json", "{\"model\": 1,\n" RED "}");
    Tokenizer tok;
    Err err = {""};
    CHECK(tokenizer_load_json(&tok, path, &err) == -1, "bad JSON accepted");
    check_clean("tokenizer.json syntax", err.msg, "\\x1B");
    // A key of 5000 bytes: quoted in part, so that what is wrong still fits.
    json_t *root = fixture_tokenizer_json(merges, 1);
    char *key = malloc(5001);
    memset(key, 'k', 5000);
    key[5000] = '\0';
    json_object_set_new(json_object_get(json_object_get(root, "model"), "vocab"), key, json_integer(-1));
    free(path);
    path = fixture_write_json(dir, "tokenizer.json", root);
    CHECK(tokenizer_load_json(&tok, path, &err) == -1, "long key accepted");
    check_clean("tokenizer.json long key", err.msg, "kkk...\"]: expected an id");
    free(key);
    json_decref(root);
    free(path);
    fixture_remove_dir(dir);
}

TEST(err_vocab_and_merges_messages_are_one_escaped_line) {
    static const Merge merges[] = {{"h", "e"}};
    char *parent, *dir = nasty_dir(&parent);
    fixture_write_vocab_merges(dir, merges, 1);
    char *vocab, *merges_path;
    if (asprintf(&vocab, "%s/vocab.json", dir) < 0 || asprintf(&merges_path, "%s/merges.txt", dir) < 0) abort();
    static const struct {
        const char *merges, *want;
    } cases[] = {
        {"h e\nh " CLEAR "\xff\n", "line 2: token \"\\x1B[2J\\xFF\" is not in the vocabulary"},
        {"h e\n\x1b[31m\x7f\n", "line 2: expected two tokens"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        free(fixture_write_text(dir, "merges.txt", cases[c].merges));
        Tokenizer tok;
        Err err = {""};
        CHECK(tokenizer_load_files(&tok, vocab, merges_path, &err) == -1, "merges case %zu accepted", c);
        check_clean("merges.txt", err.msg, cases[c].want);
        check_clean("merges.txt", err.msg, "new\\nline\\x1B[31mdir/merges.txt");
    }
    free(fixture_write_text(dir, "vocab.json", "{\"\\n\\u001b[31mred\": 0.5}"));
    Tokenizer tok;
    Err err = {""};
    CHECK(tokenizer_load_files(&tok, vocab, merges_path, &err) == -1, "vocab.json accepted");
    check_clean("vocab.json", err.msg, "vocab[\"\\n\\x1B[31mred\"]");
    free(vocab);
    free(merges_path);
    free(dir);
    fixture_remove_dir(parent);
}

TEST(err_config_messages_are_one_escaped_line) {
    char *parent, *dir = nasty_dir(&parent);
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"{\"model_type\": \"gpt2\\n\\u001b[31m\"}", "model_type"},
        {"{\"model_type\": \"gpt2\", \"activation_function\": \"\\u009b31m\"}", "activation_function"},
        {"{\"n_embd\": 768,\n" RED "}", "\\x1B"},
        {"{\"model_type\": \"gpt2\", \"n_embd\": \"\xff\"}", "0xff"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *path = fixture_write_text(dir, "config.json", cases[c].json);
        Config cfg;
        Err err = {""};
        CHECK(config_load(&cfg, path, &err) == -1, "config case %zu accepted", c);
        check_clean("config.json", err.msg, cases[c].want);
        check_clean("config.json", err.msg, "new\\nline\\x1B[31mdir/config.json");
        free(path);
    }
    free(dir);
    fixture_remove_dir(parent);
}

// Writes a safetensors file dir/name with this JSON header and no data; returns its path (malloc'd).
static char *write_safetensors(const char *dir, const char *name, const char *header) {
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0) abort();
    FILE *f = fopen(path, "wb");
    unsigned char len[8] = {0};
    for (int i = 0; i < 8; i++) len[i] = (unsigned char)(strlen(header) >> (8 * i));
    if (!f || fwrite(len, 1, 8, f) != 8 || fputs(header, f) < 0 || fclose(f) != 0) abort();
    return path;
}

TEST(err_safetensors_messages_are_one_escaped_line) {
    char *parent, *dir = nasty_dir(&parent);
    static const struct {
        const char *header, *want;
    } cases[] = {
        {"{\"a\\n\\u001b[31m\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
         "tensor \"a\\n\\x1B[31m\""},
        {"{\"a\": {\"dtype\": \"\\u001b[2J\", \"shape\": [], \"data_offsets\": [0, 0]}}", "dtype"},
        {"{\"a\": 1,\n" RED "}", "\\x1B"},
        {"{\"a\\u0085\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", "tensor \"a\\u0085\""},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *path = write_safetensors(dir, "model.safetensors", cases[c].header);
        StCheckpoint ckpt;
        Err err = {""};
        CHECK(st_open(&ckpt, path, &err) == -1, "safetensors case %zu accepted", c);
        check_clean("safetensors", err.msg, cases[c].want);
        check_clean("safetensors", err.msg, "new\\nline\\x1B[31mdir/model.safetensors");
        free(path);
    }
    // A tensor name of 3000 bytes: quoted in part.
    char *header = malloc(4000), *name = malloc(3001);
    memset(name, 'n', 3000);
    name[3000] = '\0';
    snprintf(header, 4000, "{\"%s\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", name);
    char *path = write_safetensors(dir, "model.safetensors", header);
    StCheckpoint ckpt;
    Err err = {""};
    CHECK(st_open(&ckpt, path, &err) == -1, "long name accepted");
    check_clean("safetensors long name", err.msg, "nnn...\": ends at data offset 4");
    // A missing file whose path holds a newline.
    char *missing;
    if (asprintf(&missing, "%s/no\nsuch" CLEAR ".safetensors", dir) < 0) abort();
    CHECK(st_open(&ckpt, missing, &err) == -1, "missing file opened");
    check_clean("safetensors missing", err.msg, "no\\nsuch\\x1B[2J.safetensors: cannot open");
    free(missing);
    free(path);
    free(name);
    free(header);
    free(dir);
    fixture_remove_dir(parent);
}

// A valid file whose tensor name and metadata hold control characters: inspect prints them escaped, every line
// clean (check_clean, line by line).
TEST(err_cli_inspect_prints_names_escaped) {
    char *parent, *dir = nasty_dir(&parent);
    char *path = write_safetensors(dir, "model.safetensors",
                                   "{\"__metadata__\": {\"k\\u001b[2J\": \"v\\n\\u0085\"}, "
                                   "\"a\\u001b[31m\\tb\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}}");
    char *command, *out, *err;
    if (asprintf(&command, "%s inspect '%s'", specdec_bin(), path) < 0) abort();
    int status = run_command(command, &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err ? err : "");
    CHECK(out && strstr(out, "a\\x1B[31m\\tb  F32"), "escaped tensor name missing:\n%s", out ? out : "");
    CHECK(out && strstr(out, "k\\x1B[2J = v\\n\\u0085"), "escaped metadata missing:\n%s", out ? out : "");
    for (char *line = out ? strtok(out, "\n") : NULL; line; line = strtok(NULL, "\n"))
        check_clean("specdec inspect output", line, NULL);
    char small[8];
    CHECK(strcmp(err_escape(small, sizeof small, "\x1b\x1b"), "\\x1B...") == 0, "err_escape cut: %s", small);
    free(out);
    free(err);
    free(command);
    free(path);
    free(dir);
    fixture_remove_dir(parent);
}

TEST(err_cli_prints_one_escaped_line) {
    char *parent, *dir = nasty_dir(&parent);
    char *path = write_safetensors(dir, "model.safetensors", "{\"\\u001b[2J\": 1}"), *command, *out, *err;
    if (asprintf(&command, "%s inspect '%s'", specdec_bin(), path) < 0) abort();
    int status = run_command(command, &out, &err);
    CHECK(status == EXIT_BAD_INPUT, "exit status %d, expected %d", status, EXIT_BAD_INPUT);
    size_t n = err ? strlen(err) : 0;
    CHECK(n > 0 && err[n - 1] == '\n', "stderr does not end in a newline: %s", err ? err : "");
    if (n > 0) {
        err[n - 1] = '\0';
        check_clean("specdec inspect", err, "tensor \"\\x1B[2J\"");
    }
    free(out);
    free(err);
    free(command);
    free(path);
    free(dir);
    fixture_remove_dir(parent);
}
