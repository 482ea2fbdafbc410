// test_cli_sweep.c — every subcommand with every option it takes, each given every value of a table of hostile
// ones (issue 48: `specdec logits --ids ""` closed a Session it had never opened). A run may succeed (exit 0) or
// refuse its input (exit 2, the last line on stderr specdec's message); a signal, another exit status or a run that
// does not end within its deadline fails the test.
//
// The commands and their options are read from the binary's own --help, so that an option added later is swept
// without a change here. Each run starts from a base command line that succeeds (a tiny random GPT-2 with a
// byte-level tokenizer and a chat template, its own draft, -n 1) and puts the option under test in the place of the
// base's own value for it. A flag is given alone, and each hostile value as the command's positional argument.
// `serve` is stopped by SIGTERM once it listens (it then exits 0). A value that the option table's parser refuses
// (args_parse, which every command runs first, called here in-process) is not run again as a process: that refusal
// is the same for every command, and the sanitizer build's runs stay a few hundred. The runs go several at a time.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/threads.h"
#include "cli/args.h"
#include "harness.h"
#include "tokenizer_fixtures.h"

enum { MAX_WORDS = 48, MAX_OPTIONS = 96, MAX_COMMANDS = 16, STDERR_KEPT = 4096 };

// The values every option and argument gets (the folder, the devices and the missing path stand for files).
static const char *const HOSTILE[] = {
    "", "-1", "1e309", "nan", "99999999999999999999", "x", "/tmp", "/dev/zero", "/dev/null", "/nonexistent/file",
    "\x1b[31m\n", NULL /* a 5000-byte word, made at run time */,
};
#define N_HOSTILE (int)(sizeof HOSTILE / sizeof *HOSTILE)

// A run that has not ended by then is a hang (the sanitizer build at -O0 loads and decodes the tiny model in well
// under a second).
#define DEADLINE_S 20.0

typedef struct {
    char name[32];
    char options[MAX_OPTIONS][32];  // without the dashes
    char shorts[MAX_OPTIONS];       // each one's short form's letter, or 0
    int n_options;
} CommandHelp;

// The stdout of `specdec ARGS`, which must succeed (malloc'd).
static char *help_text(const char *args) {
    char *streams[2];  // stdout, stderr (in an array: as two locals, GCC 12 warns of a dangling pointer at -O3)
    const int status = run_specdec(args, &streams[0], &streams[1]);
    CHECK(status == 0, "specdec %s: exit status %d: %s", args, status, streams[1]);
    free(streams[1]);
    return streams[0];
}

// The commands `specdec --help` lists ("  NAME   summary" lines), each with the options its --help lists
// ("  -x, --name  help" or "      --name  help").
static int read_commands(CommandHelp *commands) {
    char *top = help_text("--help");
    int n = 0;
    for (char *line = strtok(top, "\n"); line && n < MAX_COMMANDS; line = strtok(NULL, "\n")) {
        char name[32];
        if (strncmp(line, "  ", 2) != 0 || line[2] == ' ' || sscanf(line, " %31s", name) != 1) continue;
        commands[n] = (CommandHelp){0};
        snprintf(commands[n].name, sizeof commands[n].name, "%s", name);
        n++;
    }
    free(top);
    for (int c = 0; c < n; c++) {
        char args[64];
        snprintf(args, sizeof args, "%.31s --help", commands[c].name);
        char *help = help_text(args);
        for (char *p = help; (p = strstr(p, "--")) && commands[c].n_options < MAX_OPTIONS;) {
            if (p > help && p[-1] != ' ') {  // "--" inside a help text's word
                p += 2;
                continue;
            }
            size_t len = strcspn(p + 2, " \n=");
            bool option_column = strchr(" \n", p[2 + len]) && (p == help || p[-1] == ' ');
            const char *line = p;
            while (line > help && line[-1] != '\n') line--;
            if (option_column && (size_t)(p - line) <= 8 && len > 0 && len < 32) {  // the options column
                const int o = commands[c].n_options++;
                snprintf(commands[c].options[o], 32, "%.*s", (int)len, p + 2);
                commands[c].shorts[o] = strncmp(line, "  -", 3) == 0 && line[4] == ',' ? line[3] : 0;
            }
            p += 2 + len;
        }
        free(help);
        CHECK(commands[c].n_options > 0, "specdec %s --help lists no options", commands[c].name);
    }
    CHECK(n >= 8, "specdec --help lists %d commands", n);
    return n;
}

// The base command line of each command: option, value pairs (value NULL: a flag) that together succeed.
typedef struct {
    const char *option, *value;
} Pair;

typedef struct {
    const char *command;
    Pair pairs[8];
    const char *positional;  // NULL: none
} Base;

// The prompt's three sources, of which a run gives one.
static bool is_prompt_source(const char *option) {
    return strcmp(option, "prompt") == 0 || strcmp(option, "file") == 0 || strcmp(option, "ids") == 0;
}

// argv for `BIN COMMAND BASE... --OPTION VALUE POSITIONAL`: the base's pairs without OPTION's (or, for a
// prompt source, without the other sources), value NULL for a flag; extra, when not NULL, as the positional
// argument instead of the base's. Returns the word count.
static int build_argv(const char **argv, const char *bin, const Base *base, const char *ckpt, const char *option,
                      const char *value, bool flag, const char *extra) {
    int n = 0;
    argv[n++] = bin;
    argv[n++] = base->command;
    static char dashed[MAX_WORDS][40];
    for (int i = 0; i < 8 && base->pairs[i].option; i++) {
        const Pair *p = &base->pairs[i];
        if (option && (strcmp(p->option, option) == 0 || (is_prompt_source(option) && is_prompt_source(p->option))))
            continue;
        snprintf(dashed[n], sizeof dashed[n], "--%s", p->option);
        argv[n] = dashed[n];
        n++;
        if (p->value) argv[n++] = strcmp(p->value, "CKPT") == 0 ? ckpt : p->value;
    }
    if (option) {
        snprintf(dashed[n], sizeof dashed[n], "--%s", option);
        argv[n] = dashed[n];
        n++;
        if (!flag) argv[n++] = value;
    }
    const char *positional = extra ? extra : base->positional;
    if (positional) argv[n++] = strcmp(positional, "CKPT") == 0 ? ckpt : positional;
    argv[n] = NULL;
    return n;
}

// The runs in flight: each one's process, the pipe its stderr comes through and what came, the command line for
// the message.
enum { MAX_PARALLEL = 8 };
typedef struct {
    pid_t pid;
    int err_fd;
    bool must_succeed;        // a base command line: exit 0 only
    bool stopped;             // SIGTERM sent: a server that listens
    struct timespec start;
    char err[STDERR_KEPT];    // the first bytes of stderr
    size_t kept;
    char line[1024];          // the arguments, quoted
} Run;

typedef struct {
    Run runs[MAX_PARALLEL];
    int n, parallel;          // in flight, and the most at once
    const char *stdin_path;
    const char *cwd;          // where the runs run: the files they write (--trace x) go there
    int started;
} Runner;

static double seconds_since(const struct timespec *t) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - t->tv_sec) + (now.tv_nsec - t->tv_nsec) / 1e9;
}

// Whether the outcome is a success or a refusal: exit 0, or exit 2 with specdec's message as stderr's last line.
static bool acceptable(int status, const char *err) {
    if (status == 0) return true;
    if (status != 2) return false;
    const char *last = err;
    for (const char *p = err; *p; p++)
        if (*p == '\n' && p[1]) last = p + 1;
    return strncmp(last, "specdec: ", 9) == 0;
}

// Ends run i (its stderr read to the end, or the deadline passed: killed) and checks how it ended.
static void run_end(Runner *r, int i, bool hung) {
    Run *run = &r->runs[i];
    if (hung) kill(run->pid, SIGKILL);
    close(run->err_fd);
    int status;
    waitpid(run->pid, &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    CHECK(!hung && (run->must_succeed ? code == 0 : acceptable(code, run->err)), "specdec%s: %s %d; stderr: %.300s",
          run->line,
          hung ? "hung, killed after" : "exit status", hung ? (int)DEADLINE_S : code, run->err);
    r->runs[i] = r->runs[--r->n];
}

// Waits until some run has more stderr, ends or passes its deadline, and deals with it: a server that says it
// listens gets SIGTERM.
static void runner_step(Runner *r) {
    struct pollfd fds[MAX_PARALLEL];
    double wait = DEADLINE_S;
    for (int i = 0; i < r->n; i++) {
        fds[i] = (struct pollfd){.fd = r->runs[i].err_fd, .events = POLLIN};
        const double left = DEADLINE_S - seconds_since(&r->runs[i].start);
        if (left < wait) wait = left;
    }
    poll(fds, (nfds_t)r->n, wait > 0 ? (int)(wait * 1000) + 1 : 0);
    for (int i = r->n - 1; i >= 0; i--) {
        Run *run = &r->runs[i];
        if (fds[i].revents) {
            char buf[1024];
            const ssize_t got = read(run->err_fd, buf, sizeof buf);
            if (got <= 0) {
                run_end(r, i, false);
                continue;
            }
            const size_t take = run->kept + (size_t)got < STDERR_KEPT - 1 ? (size_t)got : STDERR_KEPT - 1 - run->kept;
            memcpy(run->err + run->kept, buf, take);
            run->kept += take;
            run->err[run->kept] = '\0';
            if (!run->stopped && strstr(run->err, "specdec serve: listening on ")) {
                kill(run->pid, SIGTERM);
                run->stopped = true;
            }
        } else if (seconds_since(&run->start) >= DEADLINE_S) {
            run_end(r, i, true);
        }
    }
}

// Starts argv with stdin from the runner's file and stdout to /dev/null, once fewer than r->parallel run.
static void runner_start(Runner *r, const char **argv, bool must_succeed) {
    while (r->n >= r->parallel) runner_step(r);
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) {
        CHECK(false, "pipe failed");
        return;
    }
    const pid_t pid = fork();
    if (pid == 0) {
        const int in = open(r->stdin_path, O_RDONLY), out = open("/dev/null", O_WRONLY);
        dup2(in, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        if (chdir(r->cwd) == 0) execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pipe_fds[1]);
    Run *run = &r->runs[r->n++];
    *run = (Run){.pid = pid, .err_fd = pipe_fds[0], .must_succeed = must_succeed};
    clock_gettime(CLOCK_MONOTONIC, &run->start);
    for (int i = 1; argv[i]; i++)
        snprintf(run->line + strlen(run->line), sizeof run->line - strlen(run->line), " '%.40s'", argv[i]);
    r->started++;
}

static void runner_finish(Runner *r) {
    while (r->n > 0) runner_step(r);
}

// Whether the option table's parser takes `--option value` for a command that accepts `accepted` (value NULL: the
// option alone, which the parser refuses when it needs a value). *needs_value tells that case.
static bool parser_takes(const char *accepted, const char *option, const char *value, bool *needs_value) {
    const Command cmd = {.name = "sweep", .accepted = accepted, .max_positional = MAX_POSITIONAL};
    char dashed[40];
    snprintf(dashed, sizeof dashed, "--%s", option);
    char *argv[] = {dashed, (char *)value, NULL};
    Args args = {0};
    Err err = {{0}};
    const bool ok = args_parse(&args, &cmd, value ? 2 : 1, argv, &err) == 0;
    if (needs_value) *needs_value = !ok && strstr(err.msg, "needs a value");
    return ok;
}

TEST(cli_sweep_every_option_with_hostile_values) {
    // The checkpoint: a random GPT-2 of 258 tokens (the fixture tokenizer's 256 bytes, <|endoftext|>, <pad>), a
    // chat template, a messages file for render, and the line chat reads.
    char *dir = fixture_dir(), bin[PATH_MAX];
    CHECK(realpath(specdec_bin(), bin), "%s: not found", specdec_bin());  // the runs run in dir
    const RandomCheckpoint spec = {.n_layer = 1, .n_embd = 16, .n_head = 2, .vocab_size = 258, .n_positions = 64,
                                   .scale = 0.5f, .seed = 48};
    char *ckpt = fixture_chat_checkpoint(dir, &spec);
    if (!ckpt) return;
    char *messages = fixture_write_text(dir, "messages.json", "[{\"role\": \"user\", \"content\": \"hi\"}]");
    char *line = fixture_write_text(dir, "line.txt", "def f\n");
    char *requests = fixture_write_text(dir, "requests.jsonl", "{\"prompt\": \"def f\", \"max_tokens\": 1}\n");
    char *long_word = malloc(5001);
    memset(long_word, 'x', 5000);
    long_word[5000] = '\0';

    const Base bases[] = {
        {"generate", {{"model", "CKPT"}, {"draft", "CKPT"}, {"prompt", "def f"}, {"tokens", "1"}, {"threads", "1"},
                      {"draft-threads", "1"}}, NULL},
        {"chat", {{"model", "CKPT"}, {"draft", "CKPT"}, {"tokens", "1"}, {"threads", "1"}, {"draft-threads", "1"}},
         NULL},
        {"serve", {{"model", "CKPT"}, {"draft", "CKPT"}, {"port", "0"}, {"threads", "1"}, {"draft-threads", "1"}},
         NULL},
        {"batch", {{"model", "CKPT"}, {"draft", "CKPT"}, {"file", requests}, {"tokens", "1"}, {"threads", "1"},
                   {"draft-threads", "1"}}, NULL},
        {"logits", {{"model", "CKPT"}, {"ids", "1 2 3"}}, NULL},
        {"tokenize", {{"model", "CKPT"}}, "def f"},
        {"detokenize", {{"model", "CKPT"}}, "100 101"},
        {"render", {{"model", "CKPT"}, {"file", messages}}, NULL},
        {"inspect", {{0}}, "CKPT"},
        {"convert", {{"model", "CKPT"}, {"output", "converted.gguf"}, {"type", "q8_0"}}, NULL},
    };
    CommandHelp commands[MAX_COMMANDS];
    const int n_commands = read_commands(commands);
    Runner runner = {.parallel = cpus_available() < MAX_PARALLEL ? cpus_available() : MAX_PARALLEL,
                     .stdin_path = line, .cwd = dir};
    int refused_by_parser = 0;
    for (int c = 0; c < n_commands; c++) {
        const Base *base = NULL;
        for (size_t b = 0; b < sizeof bases / sizeof *bases; b++)
            if (strcmp(bases[b].command, commands[c].name) == 0) base = &bases[b];
        CHECK(base, "no base command line for specdec %s: add one to this test", commands[c].name);
        if (!base) continue;
        char accepted[MAX_OPTIONS * 33] = "";
        for (int i = 0; i < commands[c].n_options; i++)
            snprintf(accepted + strlen(accepted), sizeof accepted - strlen(accepted), " %s", commands[c].options[i]);
        const char *argv[MAX_WORDS];
        build_argv(argv, bin, base, ckpt, NULL, NULL, false, NULL);
        runner_start(&runner, argv, true);  // the base alone, which must succeed
        for (int k = 0; k < N_HOSTILE; k++) {  // the positional argument
            build_argv(argv, bin, base, ckpt, NULL, NULL, false, HOSTILE[k] ? HOSTILE[k] : long_word);
            runner_start(&runner, argv, false);
        }
        for (int i = 0; i < commands[c].n_options; i++) {
            const char *option = commands[c].options[i];
            bool needs_value;
            if (strcmp(option, "help") == 0) continue;
            if (parser_takes(accepted, option, NULL, &needs_value) || !needs_value) {  // a flag
                build_argv(argv, bin, base, ckpt, option, NULL, true, NULL);
                runner_start(&runner, argv, false);
                continue;
            }
            for (int k = 0; k < N_HOSTILE; k++) {
                const char *value = HOSTILE[k] ? HOSTILE[k] : long_word;
                if (!parser_takes(accepted, option, value, NULL)) {
                    refused_by_parser++;
                    continue;
                }
                build_argv(argv, bin, base, ckpt, option, value, false, NULL);
                runner_start(&runner, argv, false);
            }
        }
    }
    runner_finish(&runner);
    CHECK(runner.started > 200 && refused_by_parser > 200, "%d runs, %d values refused by the parser", runner.started,
          refused_by_parser);
    if (getenv("SPECDEC_VERBOSE"))
        fprintf(stderr, "    %d runs, %d values refused by the parser\n", runner.started, refused_by_parser);
    free(long_word);
    free(messages);
    free(line);
    free(requests);
    free(ckpt);
    fixture_remove_dir(dir);
}

// The help texts (issue 48): a usage line that does not end in "[options]" names every option its command takes,
// and an option's help names only options of the command it is shown for (chat's --system said "with --chat").
TEST(cli_help_names_what_the_command_takes) {
    CommandHelp commands[MAX_COMMANDS];
    const int n_commands = read_commands(commands);
    for (int c = 0; c < n_commands; c++) {
        char args[64];
        snprintf(args, sizeof args, "%.31s --help", commands[c].name);
        char *help = help_text(args);
        const char *usage_end = strchr(help, '\n');
        const bool says_options = usage_end && strstr(help, "[options]") && strstr(help, "[options]") < usage_end;
        for (int i = 0; i < commands[c].n_options; i++) {
            char dashed[40], short_form[4] = {'-', commands[c].shorts[i], ' ', '\0'};
            snprintf(dashed, sizeof dashed, "--%s", commands[c].options[i]);
            const char *named = strstr(help, dashed), *named_short = short_form[1] ? strstr(help, short_form) : NULL;
            CHECK(says_options || strcmp(commands[c].options[i], "help") == 0 || (named && named < usage_end) ||
                      (named_short && named_short < usage_end),
                  "specdec %s: the usage line omits %s: %.*s", commands[c].name, dashed,
                  (int)(usage_end ? usage_end - help : 0), help);
        }
        // Every "--name" in the options' help texts (after "options:") is one of the command's.
        const char *options = strstr(help, "\noptions:\n");
        for (const char *p = options; p && (p = strstr(p, " --")); p += 3) {
            const size_t len = strcspn(p + 3, " ,.;:)=\n");
            bool known = false;
            for (int i = 0; i < commands[c].n_options; i++)
                known |= strlen(commands[c].options[i]) == len && strncmp(commands[c].options[i], p + 3, len) == 0;
            CHECK(known, "specdec %s --help names --%.*s, which %s does not take", commands[c].name, (int)len, p + 3,
                  commands[c].name);
        }
        CHECK(!strstr(help, "generated ids") || strcmp(commands[c].name, "generate") == 0,
              "specdec %s --help speaks of generated ids", commands[c].name);
        free(help);
    }
}
