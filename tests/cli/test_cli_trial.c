// test_cli_trial.c — what a new user's first trial of the command line found (issue 27): write errors end the run
// with one line naming the stream, options that would do nothing say so, and the usual conventions (--name=value,
// --, -f FILE, -p -) hold.
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "harness.h"
#include "kernels.h"
#include "tokenizer_fixtures.h"

#define MODEL "tests/fixtures/f32_tied_prefix"  // n_positions 32, vocab 61, no tokenizer
#define SHIPPED "weights/pystd/target"          // has a tokenizer

// `specdec ARGS` exits with `status`, and stderr is one line that contains `needle`.
static void check_one_line(const char *args, int status, const char *needle) {
    char *out, *err;
    int got = run_specdec(args, &out, &err);
    CHECK(got == status, "specdec %s: exit status %d, expected %d (stderr \"%s\")", args, got, status, err);
    CHECK(count_lines(err) == 1 && strstr(err, needle), "specdec %s: stderr \"%s\", expected one line with \"%s\"",
          args, err, needle);
    free(out);
    free(err);
}

TEST(cli_write_errors_end_the_run) {
    static const char *const commands[] = {
        "generate -m " SHIPPED " -p 'def f' -n 20 > /dev/full",
        "generate -m " MODEL " --ids '4 5' -n 20 --print-ids > /dev/full",
        "tokenize -m " SHIPPED " 'a b c' > /dev/full",
        "logits -m " MODEL " --ids '1 2 3' --all > /dev/full",
        "inspect " MODEL " > /dev/full",
        "--version > /dev/full",
    };
    for (int i = 0; i < (int)(sizeof commands / sizeof *commands); i++)
        check_one_line(commands[i], 2, "specdec: stdout: No space left on device");
    check_one_line("generate -m " MODEL " -d " MODEL " --ids '4 5' -n 20 --trace /dev/full", 2,
                   "specdec: /dev/full: No space left on device");
}

TEST(cli_closed_pipe_is_quiet) {
    char *out, *err;
    int status = run_specdec("generate -m " MODEL " --ids '4 5' -n 30 --print-ids | head -c 1", &out, &err);
    CHECK(status == 0 && strlen(out) == 1 && err[0] == '\0', "| head -c 1: status %d, out \"%s\", err \"%s\"",
          status, out, err);
    free(out);
    free(err);
}

TEST(cli_prompt_from_a_file_or_standard_input) {
    // -p TEXT, -f FILE, -f - and -p - (standard input) give the same tokens; --name=value is --name value.
    char path[] = "/tmp/specdec_prompt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "def f", 5) == 5, "cannot write %s", path);
    close(fd);
    char *want, *err;
    CHECK(run_specdec("generate -m " SHIPPED " -p 'def f' -n 3 --print-ids", &want, &err) == 0, "-p: %s", err);
    free(err);
    char forms[4][256];
    snprintf(forms[0], sizeof forms[0], "generate -m " SHIPPED " -f %s -n 3 --print-ids", path);
    snprintf(forms[1], sizeof forms[1], "generate -m " SHIPPED " -f - -n 3 --print-ids < %s", path);
    snprintf(forms[2], sizeof forms[2], "generate --model=" SHIPPED " -p - --tokens=3 --print-ids < %s", path);
    snprintf(forms[3], sizeof forms[3], "generate -m " SHIPPED " --prompt=- -n 3 --print-ids -- < %s", path);
    for (int i = 0; i < 4; i++) {
        char *out;
        int status = run_specdec(forms[i], &out, &err);
        CHECK(status == 0 && strcmp(out, want) == 0, "%s: status %d, \"%s\", expected \"%s\" (%s)", forms[i], status,
              out, want, err);
        free(out);
        free(err);
    }
    free(want);
    unlink(path);
}

TEST(cli_names_what_it_did_not_understand) {
    check_one_line("generate 'def f'", 2, "unexpected argument \"def f\"");
    check_one_line("generate -m " MODEL " --ids 1 -- -n 3", 2, "unexpected argument \"-n\"");
    check_one_line("generate -m " MODEL " --ids 1 --tokenz=3", 2, "unknown option --tokenz");
    check_one_line("generate -m " MODEL " --ids 1 --stats=yes", 2, "--stats takes no value");
    check_one_line("generate -m " MODEL " --ids 1 -n=5", 2, "a short option takes no '=': -n 5, or --tokens=5");
    check_one_line("generate -m " MODEL " -p a -f b", 2, "give the prompt once");
    check_one_line("--version --frobnicate", 2, "unknown option --frobnicate");
    check_one_line("-x", 2, "unknown option -x");
    char *out, *err;
    int status = run_specdec("--version --help", &out, &err);
    CHECK(status == 0 && strstr(out, "usage: specdec COMMAND"), "--version --help: status %d, \"%s\"", status, out);
    free(out);
    free(err);
    status = run_specdec("tokenize -m " SHIPPED " -- -p", &out, &err);  // after --, "-p" is the text
    CHECK(status == 0 && strlen(out) > 1, "tokenize -- -p: status %d, \"%s\" %s", status, out, err);
    free(out);
    free(err);
}

TEST(cli_says_which_options_it_ignores) {
    char *out, *err;
    int status = run_specdec("generate -m " MODEL " --ids '4 5' -n 3 --gamma 3 --sampler coupled --compare "
                         "--draft-threads 1 --show --print-ids --stats", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    CHECK(strstr(err, "specdec: note: --gamma, --compare ignored: without a draft model") &&
              strstr(err, "specdec: note: --sampler ignored: at --temp 0"),
          "no note on the speculative options: \"%s\"", err);
    CHECK(strstr(err, "specdec: note: --draft-threads ignored: there is no draft model"), "\"%s\"", err);
    CHECK(strstr(err, "specdec: note: --show ignored: --print-ids"), "\"%s\"", err);
    CHECK(strstr(err, "\"predicted_speedup\": null, \"theorem_3_8_speedup\": null"),
          "target-only --stats predicts a speed-up: \"%s\"", err);
    free(out);
    free(err);
    // Sampling's options at temperature 0 (greedy), and --allow-special with ids, not text; read where they count.
    status = run_specdec("generate -m " MODEL " --ids '4 5' -n 3 --top-k 5 --top-p 0.5 --min-p 0.1 --seed 7 "
                         "--allow-special", &out, &err);
    CHECK(status == 0 && strstr(err, "specdec: note: --top-k, --top-p, --min-p, --seed ignored: at --temp 0") &&
              strstr(err, "specdec: note: --allow-special ignored: --ids gives no text") && count_lines(err) == 2,
          "greedy: status %d, \"%s\"", status, err);
    free(out);
    free(err);
    status = run_specdec("generate -m " MODEL " --ids '4 5' -n 3 --temp 0.7 --top-k 5 --top-p 0.5 --min-p 0.1 "
                         "--seed 7", &out, &err);
    CHECK(status == 0 && err[0] == '\0', "sampled: status %d, \"%s\"", status, err);
    free(out);
    free(err);
    // --ctx past the model's context of 32 positions: the caches hold 32 (generate, and logits, which opens its own)
    static const char *const past_context[] = {"generate -m " MODEL " --ids '4 5' -n 3 --ctx 100",
                                               "logits -m " MODEL " --ids '4 5' --ctx 100"};
    for (int i = 0; i < 2; i++) {
        status = run_specdec(past_context[i], &out, &err);
        CHECK(status == 0 && count_lines(err) == 1 &&
                  strstr(err, "specdec: note: --ctx 100: the model's context is 32 positions, and the caches hold no "
                         "more"), "%s: status %d, \"%s\"", past_context[i], status, err);
        free(out);
        free(err);
    }
    status = run_specdec("generate -m " MODEL " -d " MODEL " --ids '4 5' -n 3 --gamma 3 --stats", &out, &err);
    CHECK(status == 0 && !strstr(err, "note:") && !strstr(err, "\"predicted_speedup\": null"),
          "with a draft: status %d, \"%s\"", status, err);
    free(out);
    free(err);
}

// Chat, serve and batch say which options they ignore as generate does, in the same words: a chat checkpoint
// without a draft model, the speculative and draft options and (chat only: serve and batch take sampling from each
// request) sampling's at temperature 0 (serve stops there, on an address no interface has, after the notes).
TEST(cli_chat_serve_and_batch_say_which_options_they_ignore) {
    char *dir = fixture_dir(), args[1024], *out, *err, *generate_err;
    const RandomCheckpoint spec = {.n_layer = 1, .n_embd = 32, .n_head = 2, .vocab_size = 259, .n_positions = 64,
                                   .scale = 0.5f, .seed = 5};
    char *ckpt = fixture_chat_checkpoint(dir, &spec);
    const char *options = "--gamma 3 --sampler coupled --draft-threads 1 --draft-quant q4 --top-k 5 --seed 7";
    snprintf(args, sizeof args, "generate -m %s -p hi -n 1 %s", ckpt, options);
    int status = run_specdec(args, &out, &generate_err);
    CHECK(status == 0 && count_lines(generate_err) == 3 &&
              strstr(generate_err, "specdec: note: --gamma ignored: without a draft model") &&
              strstr(generate_err, "specdec: note: --draft-threads, --draft-quant ignored: there is no draft model") &&
              strstr(generate_err, "specdec: note: --top-k, --sampler, --seed ignored: at --temp 0"),
          "generate: status %d, \"%s\"", status, generate_err);
    free(out);
    snprintf(args, sizeof args, "chat -m %s -n 1 %s < /dev/null", ckpt, options);
    status = run_specdec(args, &out, &err);
    CHECK(status == 0 && strcmp(err, generate_err) == 0, "chat: status %d, \"%s\", generate's \"%s\"", status, err,
          generate_err);
    free(out), free(err);
    const char *drafting = "--gamma 3 --sampler coupled --draft-threads 1 --draft-quant q4";
    snprintf(args, sizeof args, "batch -m %s -f /dev/null %s", ckpt, drafting);
    status = run_specdec(args, &out, &err);
    CHECK(status == 0 && count_lines(err) == 2 && strncmp(err, generate_err, strlen(err)) == 0,
          "batch: status %d, \"%s\"", status, err);
    free(out), free(err);
    snprintf(args, sizeof args, "serve -m %s --host 192.0.2.1 --port 0 %s", ckpt, drafting);
    status = run_specdec(args, &out, &err);
    CHECK(status == 2 && strncmp(err, generate_err, strlen("specdec: note: --gamma ignored")) == 0 &&
              strstr(err, "specdec: note: --draft-threads, --draft-quant ignored: there is no draft model") &&
              count_lines(err) == 3 && strstr(err, "192.0.2.1"),
          "serve: status %d, \"%s\"", status, err);
    free(out), free(err), free(generate_err), free(ckpt);
    fixture_remove_dir(dir);
}

// What would mean nothing is refused in one line: -n 0 where every reply (chat) or every request that sets no
// max_tokens (serve, batch) would be empty, and serve's --pipeline, which no batch reads (batch takes none either);
// generate -n 0 prefills its prompt and generates nothing.
TEST(cli_refuses_what_would_mean_nothing) {
    check_one_line("chat -m " MODEL " -n 0 < /dev/null", 2, "specdec: chat: -n 0 would leave every reply empty; give "
                   "-n 1 or more (generate -n 0 prefills its prompt alone)");
    check_one_line("serve -m " MODEL " --port 0 -n 0", 2, "specdec: serve: -n 0 would leave the answer to every "
                   "request that sets no max_tokens empty");
    check_one_line("batch -m " MODEL " -f /dev/null -n 0", 2, "specdec: batch: -n 0 would leave the answer to every "
                   "request that sets no max_tokens empty");
    check_one_line("serve -m " MODEL " --port 0 --pipeline on", 2, "specdec: serve: unknown option --pipeline");
    check_one_line("batch -m " MODEL " -f /dev/null --pipeline on", 2, "specdec: batch: unknown option --pipeline");
    char *out, *err;
    const int status = run_specdec("generate -m " MODEL " --ids '4 5' -n 0 --print-ids --stats", &out, &err);
    CHECK(status == 0 && strcmp(out, "\n") == 0 && strstr(err, "\"prompt_tokens\": 2,") &&
              strstr(err, "\"generated_tokens\": 0,"),
          "generate -n 0: status %d, \"%s\", \"%s\"", status, out, err);
    free(out), free(err);
}

// batch -o naming its requests' file, by the same path or another, is refused before the file is touched.
TEST(cli_batch_refuses_to_answer_over_its_requests) {
    char path[] = "/tmp/specdec_requests_XXXXXX", link[64], args[256];
    const char *requests = "{\"prompt\": [1, 2], \"max_tokens\": 1}\n";
    const int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, requests, strlen(requests)) == (ssize_t)strlen(requests), "cannot write %s", path);
    close(fd);
    snprintf(link, sizeof link, "%s.link", path);
    CHECK(symlink(path, link) == 0, "symlink %s", link);
    const char *outputs[] = {path, link};
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args, "batch -m " MODEL " -f %s -o %s", path, outputs[i]);
        check_one_line(args, 2, "is the requests' file");
    }
    char kept[256] = "";
    FILE *f = fopen(path, "r");
    kept[f ? fread(kept, 1, sizeof kept - 1, f) : 0] = '\0';
    if (f) fclose(f);
    CHECK(strcmp(kept, requests) == 0, "the requests' file now holds \"%s\"", kept);
    unlink(link);
    unlink(path);
}

TEST(cli_messages_say_what_is_wrong) {
    // A GGUF file, a file given to -m, and --help's first line.
    char path[] = "/tmp/specdec_XXXXXX.gguf", args[256];
    int fd = mkstemps(path, 5);
    CHECK(fd >= 0 && write(fd, "GGUF\3\0\0\0\0\0\0\0\0\0\0\0", 16) == 16, "cannot write %s", path);
    close(fd);
    snprintf(args, sizeof args, "inspect %s", path);
    check_one_line(args, 2, "is 16 bytes, too short for a GGUF header (24)");
    unlink(path);
    check_one_line("serve -m " MODEL " --api-key ''", 2, "--api-key: empty; give the key that clients must send");
    static char many[2 * 4097 + 64];  // more arguments than a command takes: named, with the command
    int at = sprintf(many, "detokenize -m " SHIPPED);
    for (int i = 0; i < 4097; i++) at += sprintf(many + at, " %d", i % 10);
    check_one_line(many, 2, "specdec: detokenize: more than 4096 arguments");
    check_one_line("generate -m " SHIPPED "/model.safetensors -p x", 2,
                   "neither a folder nor a GGUF file: -m takes the checkpoint's folder");
    check_one_line("logits -m " SHIPPED "/config.json --ids 1", 2, "neither a folder nor a GGUF file: -m takes the checkpoint's folder");
    char *out, *err;
    CHECK(run_specdec("--help", &out, &err) == 0 && !strstr(strtok(out, "\n"), "GPT-2 inference"), "--help: \"%s\"",
          out);
    free(out);
    free(err);
}

TEST(cli_unreadable_files_give_the_system_reason) {
    // Permissions bind only a user other than root (CI may run as root: nothing to check then).
    if (geteuid() == 0) return;
    char dir[] = "/tmp/specdec_unreadable_XXXXXX", command[512];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(command, sizeof command,
             "cp " SHIPPED "/config.json " SHIPPED "/tokenizer.json %s && chmod 0 %s/tokenizer.json", dir, dir);
    CHECK(system(command) == 0, "%s", command);
    snprintf(command, sizeof command, "tokenize -m %s x", dir);
    check_one_line(command, 2, "tokenizer.json: cannot open: Permission denied");
    snprintf(command, sizeof command, "chmod 0 %s", dir);
    CHECK(system(command) == 0, "%s", command);
    snprintf(command, sizeof command, "inspect %s", dir);
    check_one_line(command, 2, "cannot read the folder: Permission denied");
    snprintf(command, sizeof command, "chmod 700 %s && rm -r %s", dir, dir);
    CHECK(system(command) == 0, "%s", command);
}

// Each command's --help: an option that takes a value shows its name ("--temp T", "--tools FILE"; the option table's
// parser asking for one is the judge), a flag none, and every help text starts in one column, two spaces after the
// widest option (before, "--repetition-penalty divide ..." ran into its option and no value was named).
TEST(cli_help_names_values_and_aligns_the_texts) {
    static const char *const COMMANDS[] = {"generate", "chat", "serve", "batch", "convert", "logits", "render"};
    for (size_t c = 0; c < sizeof COMMANDS / sizeof *COMMANDS; c++) {
        char args[64], *help, *err;
        snprintf(args, sizeof args, "%s --help", COMMANDS[c]);
        CHECK(run_specdec(args, &help, &err) == 0, "specdec %s: %s", args, err);
        int column = -1, lines = 0;
        for (char *line = strtok(help, "\n"); line; line = strtok(NULL, "\n")) {
            char *dashes = strstr(line, "--");
            if (strncmp(line, "  -", 3) != 0 && strncmp(line, "      --", 8) != 0) continue;
            const size_t name_len = strcspn(dashes + 2, " ");
            const char *after = dashes + 2 + name_len, *text = after + strspn(after, " ");
            const bool shows_value = after[0] == ' ' && after[1] != ' ';  // "--name VALUE  text"
            const char *value_end = shows_value ? strstr(after + 1, "  ") : after;
            if (shows_value && value_end) text = value_end + strspn(value_end, " ");
            char option[40];
            snprintf(option, sizeof option, "--%.*s", (int)name_len, dashes + 2);
            const Command cmd = {.name = "help", .accepted = option + 2, .max_positional = 4};
            char *argv[] = {option, NULL};
            Args parsed = {0};
            Err perr = {{0}};
            const bool needs_value = args_parse(&parsed, &cmd, 1, argv, &perr) != 0 && strstr(perr.msg, "needs a value");
            CHECK(needs_value == shows_value, "specdec %s: \"%s\": %s", args, line,
                  needs_value ? "no name for its value" : "a value shown for a flag");
            const int at = (int)(text - line);
            CHECK(text[-1] == ' ' && text[-2] == ' ' && (column < 0 || at == column), "specdec %s: \"%s\": its text at "
                  "column %d, not %d with the others' (two spaces after the widest option)", args, line, at, column);
            column = column < 0 ? at : column;
            lines++;
        }
        CHECK(lines > 1, "specdec %s: %d option lines", args, lines);
        free(help), free(err);
    }
}

// Each command's --help in its own words, where the option table's texts (written for generate) misled: convert's
// -m took "a .gguf file" (convert refuses one), its -t spoke of -d and its -o of "the answers"; logits, tokenize and
// render spoke of a target with no draft beside it, render's -f of "the text", serve's and batch's -n of "tokens to
// generate" (a request's max_tokens decides), and the command list gave logits' output as a printf format.
TEST(cli_help_says_what_each_command_does_with_an_option) {
    static const struct {
        const char *command;      // "" for the list of commands
        const char *says[3];      // each in the help
        const char *never[5];     // none in the help
    } CASES[] = {
        {"convert", {"checkpoint folder to convert", "GGUF file to write", "the same for any number"},
         {".gguf file", "-d", "draft", "answers", "batch"}},
        {"logits", {"as many as the ids given"}, {"%", "-d", "draft", "logits:", "target checkpoint"}},
        {"tokenize", {"whose tokenizer is used"}, {"target", "draft"}},
        {"detokenize", {"whose tokenizer is used"}, {"target", "draft"}},
        {"render", {"read the conversation from FILE", "chat template and tokenizer"}, {"target", "read the text"}},
        {"serve", {"sets no max_tokens"}, {"logits:", "generate and chat", "convert", "answers"}},
        {"batch", {"the requests, one JSON body a line", "sets no max_tokens"},
         {"logits:", "generate and chat", "convert", "read the text"}},
        {"generate", {"one fewer: the drafting thread's"}, {"convert", "batch's", "logits:"}},
        {"", {"7 significant digits"}, {"%"}},
    };
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        char args[64], *help, *err;
        snprintf(args, sizeof args, "%s --help", CASES[c].command);
        CHECK(run_specdec(args, &help, &err) == 0, "specdec %s: %s", args, err);
        for (int i = 0; i < 3 && CASES[c].says[i]; i++)
            CHECK(strstr(help, CASES[c].says[i]), "specdec %s does not say \"%s\":\n%s", args, CASES[c].says[i], help);
        for (int i = 0; i < 5 && CASES[c].never[i]; i++)
            CHECK(!strstr(help, CASES[c].never[i]), "specdec %s says \"%s\":\n%s", args, CASES[c].never[i], help);
        free(help), free(err);
    }
}

// run-bench's absolute path, beside the specdec binary the tests run: false where that binary is not found.
static bool run_bench_path(char bin[PATH_MAX]) {
    if (!realpath(specdec_bin(), bin)) return false;
    char *slash = strrchr(bin, '/');
    snprintf(slash, PATH_MAX - (size_t)(slash - bin), "/run-bench");
    return true;
}

// run-bench writes its results under build/bench/ (untracked) unless --out says where (make bench says
// bench/results, which git keeps): a run from a fresh folder makes build/bench there, at its start (here the model
// then fails to load), and no bench/; a folder that cannot be made is refused before anything is loaded.
TEST(run_bench_writes_under_build_unless_told) {
    char dir[] = "/tmp/specdec-bench-XXXXXX", bin[PATH_MAX], command[3 * PATH_MAX], *out, *err;
    CHECK(mkdtemp(dir) && run_bench_path(bin), "mkdtemp, or %s not found", specdec_bin());
    snprintf(command, sizeof command, "cd %s && %s -s decode -m /nonexistent", dir, bin);
    CHECK(run_command(command, &out, &err) == 1 && strstr(err, "/nonexistent/config.json"), "%s: %s", command, err);
    free(out), free(err);
    snprintf(command, sizeof command, "test -d %s/build/bench && test ! -e %s/bench", dir, dir);
    CHECK(run_command(command, NULL, NULL) == 0, "run-bench without --out: no %s/build/bench, or a %s/bench", dir, dir);
    snprintf(command, sizeof command, "touch %s/file && %s -s decode -m /nonexistent -o %s/file/results", dir, bin,
             dir);
    CHECK(run_command(command, &out, &err) == 1 && strstr(err, "cannot make the folder") &&
              !strstr(err, "config.json"), "%s: %s", command, err);
    free(out), free(err);
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
}

// The decode suite's split of the temperature-1 row (bench/decode.c, row_passes): for every variant this CPU runs,
// the three passes' medians in the JSON, all > 0, and their line in the Markdown. (Present and positive only: what
// they measure is speed, which the tests never assert.)
TEST(run_bench_decode_splits_the_sampling_row_by_pass) {
    char dir[] = "/tmp/specdec-bench-XXXXXX", bin[PATH_MAX], command[3 * PATH_MAX], path[PATH_MAX], *out, *err;
    CHECK(mkdtemp(dir) && run_bench_path(bin), "mkdtemp, or %s not found", specdec_bin());
    snprintf(command, sizeof command, "%s -s decode --quick -r 2 --no-plots -o %s", bin, dir);
    CHECK(run_command(command, &out, &err) == 0, "%s: %s", command, err);
    CHECK(strstr(out, "The temperature-1 row's passes, each alone from the caches, median µs, row_range / exp_sum / "
                      "scale_to_doubles:"),
          "no line of the row's passes:\n%s", out);
    free(out), free(err);
    snprintf(path, sizeof path, "%s/latest.json", dir);
    json_error_t error;
    json_t *results = json_load_file(path, 0, &error);
    CHECK(results, "%s: %s", path, error.text);
    const json_t *by = json_object_get(json_object_get(results, "decode"), "sampling_by_variant");
    int n;
    const Kernels *const *list = kernels_available(&n);
    static const char *const passes[] = {"row_range", "exp_sum", "scale_to_doubles"};
    for (int v = 0; v < n; v++) {
        const json_t *split = json_object_get(json_object_get(by, list[v]->name), "temperature_1_passes");
        for (int p = 0; p < 3; p++) {
            const double seconds = json_real_value(json_object_get(split, passes[p]));
            CHECK(seconds > 0, "%s: %s's %s is %g", path, list[v]->name, passes[p], seconds);
        }
    }
    json_decref(results);
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
}

// inspect lists a sharded checkpoint's shards in their names' order (issue 48: in the order of the index's hash
// table), each followed by its tensors.
// inspect takes its path as -m PATH too, as the other commands take a checkpoint, with the same output; none, or
// both, is refused on one line.
TEST(cli_inspect_takes_its_path_as_m_too) {
    char *out, *err, *by_m, *by_m_err;
    const int status = run_specdec("inspect " MODEL, &out, &err);
    const int status_m = run_specdec("inspect -m " MODEL, &by_m, &by_m_err);
    CHECK(status == 0 && status_m == 0 && out[0] && strcmp(out, by_m) == 0, "inspect PATH: %d, -m PATH: %d: %s%s",
          status, status_m, err, by_m_err);
    free(out), free(err), free(by_m), free(by_m_err);
    check_one_line("inspect", 2, "inspect: give the file or folder once, as PATH or -m PATH");
    check_one_line("inspect -m " MODEL " " MODEL, 2, "inspect: give the file or folder once");
}

// logits' usage line names every value --quant takes (those its refusal of another lists: "expected none, q8, …
// or stored, got …"), and each is read.
TEST(cli_logits_usage_names_every_quant) {
    char *out, *err, *help, *help_err;
    const int status = run_specdec("logits -m " MODEL " --ids 1 --quant x", &out, &err);
    CHECK(run_specdec("logits --help", &help, &help_err) == 0, "logits --help: %s", help_err);
    const char *expected = strstr(err, "expected "), *got = expected ? strstr(expected, ", got") : NULL;
    CHECK(status == 2 && got, "--quant x: status %d: %s", status, err);
    char names[128] = "";
    if (got) snprintf(names, sizeof names, "%.*s", (int)(got - expected - strlen("expected ")),
                      expected + strlen("expected "));
    const char *usage_quant = strstr(help, "--quant "), *usage_end = strchr(help, '\n');
    int n = 0;
    for (char *name = strtok(names, ", "); name; name = strtok(NULL, ", ")) {
        if (strcmp(name, "or") == 0) continue;
        const char *listed = usage_quant ? strstr(usage_quant, name) : NULL;
        CHECK(listed && listed < usage_end, "logits' usage line omits --quant %s: %.*s", name,
              (int)(usage_end - help), help);
        char args[128], *read_out, *read_err;
        snprintf(args, sizeof args, "logits -m " MODEL " --ids 1 --quant %s", name);
        run_specdec(args, &read_out, &read_err);
        CHECK(!strstr(read_err, "--quant:"), "%s: %s", args, read_err);
        free(read_out), free(read_err);
        n++;
    }
    CHECK(n == 5, "%d names in \"%s\"", n, err);
    free(out), free(err), free(help), free(help_err);
}

TEST(cli_inspect_lists_shards_in_order) {
    char *out, *err;
    const int status = run_specdec("inspect ../shared/fixtures/hf/mistral_untied_sharded_f32", &out, &err);
    CHECK(status == 0, "status %d: %s", status, err);
    int listed = 0;
    for (const char *p = out; p && (p = strstr(p, "/model-0000")); p++) {
        char want[32];
        snprintf(want, sizeof want, "/model-%05d-of-00009", listed + 1);
        CHECK(strncmp(p, want, strlen(want)) == 0, "shard %d listed as \"%.30s\"", listed + 1, p);
        listed++;
    }
    CHECK(listed == 9, "%d shards listed: %s", listed, out);
    free(out);
    free(err);
}
