// test_terminal.c — what specdec does on a terminal (issue 48). Ctrl-C: in `specdec chat` it cuts the reply short
// (what was printed stays in the conversation), brings the prompt back with the caches kept, and at the prompt
// clears the line; `generate` dies by SIGINT with the tokens decided so far printed (its write waiting on a full pipe
// too). And a load's progress on stderr.
// The chat runs on a pseudo-terminal (forkpty), as a user's would, and Ctrl-C is the byte 0x03 typed into it; the
// first message holds a character of two bytes, which must arrive whole.
//
// The model is a random Llama whose end-of-text id lies past its tokenizer's tokens, so that it is never sampled,
// and whose context is long: a reply runs until Ctrl-C, or for many seconds (-n 30000) if Ctrl-C does nothing. The
// tests wait on what the run prints (WAIT_S only guards against a run that hangs), never on a clock: Ctrl-C comes
// after the reply's first bytes, and a reply cannot end by itself before a test, however slowly scheduled, types it.
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "tokenizer_fixtures.h"

#define ENDLESS "30000"  // -n for a reply that only Ctrl-C ends
#define WAIT_S 60.0  // the longest wait for what a run should print (the sanitizer build at -O0 is slow)

// A folder with the endless checkpoint: 258 tokens, 259 embedding rows, end-of-text 258 (fixture_chat_checkpoint);
// rotary positions, so that its context of 32768 costs no table. The caller frees the path and removes the folder.
static char *endless_checkpoint(char **dir) {
    *dir = fixture_dir();
    const RandomCheckpoint spec = {.model_type = "llama", .n_layer = 2, .n_embd = 256, .n_head = 4, .vocab_size = 259,
                                   .n_positions = 32768, .scale = 0.5f, .seed = 48};
    return fixture_chat_checkpoint(*dir, &spec);
}

// What a child printed so far (its terminal's or its pipe's bytes), read as it comes.
typedef struct {
    int fd;
    char *text;
    size_t len, cap;
    bool ended;  // the other side closed
} Screen;

// Reads what is there within `seconds`; false when nothing came (or the other side closed).
static bool screen_read(Screen *s, double seconds) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (s->ended || poll(&p, 1, (int)(seconds * 1000)) <= 0) return false;
    if (s->len + 4096 + 1 > s->cap) s->text = realloc(s->text, s->cap = 2 * s->cap + 8192);
    const ssize_t got = read(s->fd, s->text + s->len, 4096);
    if (got <= 0) {  // EIO: the terminal's other side closed
        s->ended = true;
        return false;
    }
    s->len += (size_t)got;
    s->text[s->len] = '\0';
    return true;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

// Waits until `needle` appears at or after byte `from` (-1: not within WAIT_S); returns where it ends.
static long screen_wait(Screen *s, size_t from, const char *needle) {
    const double deadline = now_s() + WAIT_S;
    for (;;) {
        if (s->text && s->len > from) {
            const char *at = memmem(s->text + from, s->len - from, needle, strlen(needle));
            if (at) return (long)(at - s->text) + (long)strlen(needle);
        }
        if (now_s() > deadline || s->ended) return -1;
        screen_read(s, 0.2);
    }
}

// Waits until at least n bytes came after byte `from`.
static bool screen_wait_bytes(Screen *s, size_t from, size_t n) {
    const double deadline = now_s() + WAIT_S;
    while (s->len < from + n && now_s() < deadline && !s->ended) screen_read(s, 0.2);
    return s->len >= from + n;
}

// Starts `specdec ARGS...` (argv without the binary, NULL-terminated) on a new pseudo-terminal; *fd is its other
// side, and s reads from it.
static pid_t spawn_on_terminal(const char *const *argv, int *fd, Screen *s) {
    char bin[PATH_MAX];
    CHECK(realpath(specdec_bin(), bin) != NULL, "%s: not found", specdec_bin());
    const char *full[24] = {bin};
    for (int i = 0; argv[i] && i < 22; i++) full[i + 1] = argv[i];
    const pid_t pid = forkpty(fd, NULL, NULL, NULL);
    if (pid == 0) {
        execv(bin, (char *const *)full);
        _exit(127);
    }
    CHECK(pid > 0, "forkpty: %s", strerror(errno));
    *s = (Screen){.fd = *fd};
    return pid;
}

// A chat on a pseudo-terminal: its checkpoint's folder and path, the terminal's other side, what it printed, and its
// process.
typedef struct {
    char *dir, *ckpt;
    int fd;
    Screen s;
    pid_t pid;
} TerminalChat;

// `specdec chat -m CKPT -n N --stats --threads 1` started on a new pseudo-terminal (spawn_on_terminal), CKPT the
// endless checkpoint in a new folder (the caller removes it); returns where its first prompt ends on the screen, or
// -1 where no prompt came (c->pid -1: it did not start).
static long spawn_chat(TerminalChat *c, const char *n) {
    *c = (TerminalChat){.pid = -1};
    if (!(c->ckpt = endless_checkpoint(&c->dir))) return -1;
    c->pid = spawn_on_terminal((const char *[]){"chat", "-m", c->ckpt, "-n", n, "--stats", "--threads", "1", NULL},
                               &c->fd, &c->s);
    const long at = c->pid < 0 ? -1 : screen_wait(&c->s, 0, "> ");
    CHECK(at >= 0, "no prompt: %s", c->s.text ? c->s.text : "");
    return at;
}

// Reads what the run prints until it ends (killed if it is silent for WAIT_S), then its exit status.
static int screen_finish(Screen *s, pid_t pid) {
    while (screen_read(s, WAIT_S)) {}
    if (!s->ended) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(s->fd);
    return status;
}

static void type(int fd, const char *keys) {
    CHECK(write(fd, keys, strlen(keys)) == (ssize_t)strlen(keys), "typing \"%s\": %s", keys, strerror(errno));
}

// The value of "key": N in the --stats line of turn `turn` on the screen (-1 if absent). (The replies of a random
// model may hold NUL bytes: the line is found with memmem.)
static int turn_stat(const Screen *s, int turn, const char *key) {
    char start[32], pattern[64];
    snprintf(start, sizeof start, "{\"turn\": %d,", turn);
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    const char *line = s->text ? memmem(s->text, s->len, start, strlen(start)) : NULL;
    const char *at = line ? strstr(line, pattern) : NULL;
    const char *end = line ? strchr(line, '}') : NULL;
    return at && at < end ? atoi(at + strlen(pattern)) : -1;
}

// Waits until /proc/PID/<file> reads as `ready` says (read again each millisecond); false if not within WAIT_S.
static bool wait_proc(pid_t pid, const char *file, bool (*ready)(const char *text)) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    for (const double deadline = now_s() + WAIT_S; now_s() < deadline;) {
        FILE *f = fopen(path, "r");
        const size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f) fclose(f);
        text[n] = '\0';
        if (ready(text)) return true;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return false;
}

// /proc/PID/stat ("pid (name) S ..."): the process sleeps. A chat whose terminal was stopped by Ctrl-S sleeps in its
// next write.
static bool asleep(const char *stat) {
    const char *state = strrchr(stat, ')');
    return state && state[1] == ' ' && state[2] == 'S';
}

// /proc/PID/syscall ("1 0x1 ..."): the process waits in write(2).
static bool in_write(const char *syscall) { return atol(syscall) == SYS_write && strchr(syscall, ' '); }

// One reply cut short: the message typed, some of the reply seen, Ctrl-C; the turn's --stats line and the prompt
// come back. Returns where the prompt ends (-1: it did not come back). With `stalled`, the terminal stops taking
// output first (Ctrl-S, XOFF) and Ctrl-C comes once the chat sleeps in its write: the write goes on (the terminal
// starts again at Ctrl-C) and the reply ends at its next token, as any.
static long interrupt_reply(Screen *s, int fd, pid_t pid, size_t from, const char *message, int turn, bool stalled) {
    type(fd, message);
    type(fd, "\r");
    const long echoed = screen_wait(s, from, "\033[?2004l");  // the line read (bracketed paste off), then the reply
    CHECK(echoed >= 0 && screen_wait_bytes(s, (size_t)echoed, 16), "turn %d: no reply: %s", turn, s->text);
    if (stalled) type(fd, "\x13");
    CHECK(!stalled || wait_proc(pid, "stat", asleep), "turn %d: the chat went on writing to a stopped terminal", turn);
    type(fd, "\x03");
    char stats[32];
    snprintf(stats, sizeof stats, "{\"turn\": %d,", turn);
    const long line = screen_wait(s, from, stats);
    const long prompt = line < 0 ? -1 : screen_wait(s, (size_t)line, "}");
    const long again = prompt < 0 ? -1 : screen_wait(s, (size_t)prompt, "> ");
    CHECK(again >= 0, "turn %d: after Ctrl-C, no statistics line and prompt: %s", turn, s->text ? s->text : "");
    return again;
}

TEST(chat_ctrl_c_cuts_the_reply_short_and_clears_the_line) {
    TerminalChat c;
    long at = spawn_chat(&c, ENDLESS);
    if (c.pid < 0) return;
    if (at >= 0) at = interrupt_reply(&c.s, c.fd, c.pid, (size_t)at, "h\xC3\xA9llo", 1, false);  // "héllo"
    // Ctrl-C at the prompt: the line typed is dropped (an empty line then sends nothing) and the prompt comes back.
    if (at >= 0) {
        type(c.fd, "abc");
        CHECK(screen_wait(&c.s, (size_t)at, "abc") >= 0, "no echo of abc: %s", c.s.text);
        type(c.fd, "\x03");
        at = screen_wait(&c.s, (size_t)at, "> ");
        CHECK(at >= 0, "Ctrl-C at the prompt: no new prompt: %s", c.s.text);
    }
    if (at >= 0) {
        type(c.fd, "\r");
        at = screen_wait(&c.s, (size_t)at, "> ");
        CHECK(at >= 0, "an empty line: no new prompt: %s", c.s.text);
    }
    if (at >= 0) at = interrupt_reply(&c.s, c.fd, c.pid, (size_t)at, "x", 2, true);
    if (at >= 0) type(c.fd, "/exit\r");
    const int status = screen_finish(&c.s, c.pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "chat ended with status %d: %s", status,
          c.s.len > 300 ? c.s.text + c.s.len - 300 : c.s.text);
    // Two turns ("abc" was never sent), each cut short. The second kept the first's caches (it reused at least the
    // first turn's prompt), and its conversation holds the reply cut short: a byte a token, and the random model's
    // bytes that are not UTF-8 each become U+FFFD (3 bytes), so at least generated1 tokens more than without it.
    const int prompt1 = turn_stat(&c.s, 1, "prompt_tokens"), generated1 = turn_stat(&c.s, 1, "generated_tokens");
    const int reused2 = turn_stat(&c.s, 2, "reused_tokens"), generated2 = turn_stat(&c.s, 2, "generated_tokens");
    const int prompt2 = turn_stat(&c.s, 2, "prompt_tokens"), message2 = (int)strlen("\nuser: x\nassistant: ");
    // The first message came whole, é as its two bytes: "user: héllo\nassistant: ", a token a byte.
    CHECK(prompt1 == (int)strlen("user: h\xC3\xA9llo\nassistant: "), "turn 1: %d tokens", prompt1);
    CHECK(generated1 > 0 && generated1 < atoi(ENDLESS) && generated2 > 0 && generated2 < atoi(ENDLESS),
          "replies of %d and %d tokens", generated1, generated2);
    CHECK(reused2 >= prompt1 && prompt2 >= prompt1 + generated1 + message2,
          "turn 2: %d tokens, %d reused, after turn 1's %d + %d", prompt2, reused2, prompt1, generated1);
    CHECK(turn_stat(&c.s, 3, "prompt_tokens") < 0, "a third turn: %s", c.s.text);
    free(c.s.text);
    free(c.ckpt);
    fixture_remove_dir(c.dir);
}

// A SIGINT (kill -INT, or a Ctrl-C the terminal sends) while the chat's line editor waits to write — here the echo of
// a key held by a stopped terminal (Ctrl-S) — fails no write: it drops the line once the key is echoed, as Ctrl-C at
// the prompt does, and the chat ends with status 0. (Caught then without SA_RESTART, it failed the echo, stdout kept
// the error, and /exit ended the chat with "stdout: write error", status 2.)
TEST(chat_sigint_while_the_prompt_writes_fails_no_write) {
    TerminalChat c;
    long at = spawn_chat(&c, "3");
    if (c.pid < 0) return;
    if (at >= 0) {
        type(c.fd, "\x13" "a");  // Ctrl-S, then a key whose echo waits
        CHECK(wait_proc(c.pid, "syscall", in_write), "the chat did not wait in a write to the stopped terminal");
        kill(c.pid, SIGINT);
        type(c.fd, "\x11");  // Ctrl-Q: the terminal takes output again
        at = screen_wait(&c.s, (size_t)at, "> ");
        CHECK(at >= 0, "after the signal, no new prompt: %s", c.s.text);
    }
    if (at >= 0) type(c.fd, "/exit\r");
    const int status = screen_finish(&c.s, c.pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "chat ended with status %d: %s", status,
          c.s.len > 300 ? c.s.text + c.s.len - 300 : c.s.text);
    CHECK(turn_stat(&c.s, 1, "prompt_tokens") < 0, "the line typed was sent: %s", c.s.text);
    free(c.s.text);
    free(c.ckpt);
    fixture_remove_dir(c.dir);
}

// The --stats value of `key` for the first turn whose line comes at or after byte `from` of the screen.
static int turn_stat_after(const Screen *s, size_t from, const char *key) {
    const Screen rest = {.text = s->text + from, .len = s->len - from};
    return turn_stat(&rest, 1, key);
}

// Bracketed paste: the chat turns the terminal's mode on while it reads, and a block pasted (ESC [200~ ... ESC [201~,
// its lines ended by CR as a terminal sends them) joins the line being edited, newlines and tab kept, sent as one
// message by Enter. Other escape sequences still reach libedit: an arrow key (ESC [ D) moves the cursor.
TEST(chat_a_paste_is_one_message) {
    TerminalChat c;
    long at = spawn_chat(&c, "3");
    if (c.pid < 0) return;
    CHECK(at < 0 || memmem(c.s.text, c.s.len, "\033[?2004h> ", 10), "no bracketed paste mode: %s", c.s.text);
    const char *message = "the first line\ns\xC3\xA9" "cond\tline\n\nafter a blank line";
    if (at >= 0) {
        type(c.fd, "say: \033[200~the first line\rs\xC3\xA9" "cond\tline\r\rafter a blank line\033[201~");
        CHECK(screen_wait(&c.s, (size_t)at, "blank line") >= 0, "no echo of the paste: %s", c.s.text);
        type(c.fd, "\r");
        at = screen_wait(&c.s, (size_t)at, "{\"turn\": 1,");
        at = at < 0 ? -1 : screen_wait(&c.s, (size_t)at, "> ");
        CHECK(at >= 0, "the paste: no reply and prompt: %s", c.s.text);
    }
    const size_t paste_at = 0, arrow_at = at < 0 ? 0 : (size_t)at;
    if (at >= 0) type(c.fd, "/reset\r");
    if (at >= 0) at = screen_wait(&c.s, (size_t)at, "> ");
    if (at >= 0) {
        type(c.fd, "abc\033[D\033[D\x0b\r");  // two steps left, Ctrl-K: "a"
        at = screen_wait(&c.s, arrow_at, "{\"turn\": 1,");
        at = at < 0 ? -1 : screen_wait(&c.s, (size_t)at, "> ");
    }
    if (at >= 0) type(c.fd, "/exit\r");
    const int status = screen_finish(&c.s, c.pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "chat ended with status %d", status);
    // A byte a token: the whole paste in the first turn's prompt, and no second turn before /reset.
    const int pasted = turn_stat_after(&c.s, paste_at, "prompt_tokens");
    CHECK(pasted == (int)(strlen("user: say: \nassistant: ") + strlen(message)), "the paste's turn: %d tokens: %s",
          pasted, c.s.text);
    CHECK(turn_stat(&c.s, 2, "prompt_tokens") < 0, "the paste became several turns: %s", c.s.text);
    const int arrowed = turn_stat_after(&c.s, arrow_at, "prompt_tokens");
    CHECK(arrowed == (int)strlen("user: a\nassistant: "), "after the arrow keys: %d tokens", arrowed);
    CHECK(c.s.text && strstr(c.s.text, "\033[?2004l"), "bracketed paste mode left on: %s", c.s.text);
    free(c.s.text);
    free(c.ckpt);
    fixture_remove_dir(c.dir);
}

// Waits until process `pid` has taken signal `signo` sent to it (no longer pending in /proc/PID/status: a system
// call it interrupted has returned, or gone back to wait); false if not within WAIT_S.
static bool wait_signal_taken(pid_t pid, int signo) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    for (const double deadline = now_s() + WAIT_S; now_s() < deadline;) {
        FILE *f = fopen(path, "r");
        unsigned long long pending = 0, mask;
        while (f && fgets(line, sizeof line, f))
            if ((sscanf(line, "SigPnd: %llx", &mask) == 1 || sscanf(line, "ShdPnd: %llx", &mask) == 1)) pending |= mask;
        if (f) fclose(f);
        if (!f || !(pending & 1ull << (signo - 1))) return f != NULL;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    return false;
}

// Bytes waiting in pipe `fd` (FIONREAD).
static int pipe_holds(int fd) {
    int n = 0;
    return ioctl(fd, FIONREAD, &n) == 0 ? n : -1;
}

// generate dies by SIGINT, its stdout holding the tokens decided before it, the printer finished: the start of what
// it prints uninterrupted; nothing on stderr. With `stalled`, its stdout is a pipe of one page that nobody reads
// until SIGINT has come: the pipe full and generate asleep (in its write: nothing else of a generation on one thread
// sleeps); the test reads once generate has taken the signal, and the write goes on (SA_RESTART: no "stdout:
// Interrupted system call", which generate printed, exit status 2, where SIGINT ended the write).
static void generate_interrupted(bool stalled) {
    char *dir, *ckpt = endless_checkpoint(&dir), bin[PATH_MAX], errors[PATH_MAX];
    CHECK(ckpt && realpath(specdec_bin(), bin) != NULL, "%s: not found", specdec_bin());
    if (test_failures()) return;
    snprintf(errors, sizeof errors, "%s/stderr.txt", dir);
    int out[2];
    CHECK(pipe(out) == 0, "pipe");
    const int pipe_size = stalled ? fcntl(out[1], F_SETPIPE_SZ, 4096) : 0;
    CHECK(pipe_size > 0 || !stalled, "F_SETPIPE_SZ: %s", strerror(errno));
    // The pipe all but full before generate starts (its last 64 bytes left to it: a few ids, soon written even at
    // -O0 under the sanitizers), of bytes its output never holds.
    const int filler = stalled ? pipe_size - 64 : 0;
    for (int i = 0; i < filler; i++) CHECK(write(out[1], "#", 1) == 1, "filling the pipe: %s", strerror(errno));
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        const int err_fd = open(errors, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (err_fd >= 0) dup2(err_fd, STDERR_FILENO);
        close(out[0]);
        execl(bin, bin, "generate", "-m", ckpt, "--ids", "1 2 3", "-n", ENDLESS, "--print-ids", "--threads", "1",
              (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    Screen s = {.fd = out[0]};
    if (stalled) {
        const double deadline = now_s() + WAIT_S;
        while (pipe_holds(out[0]) == filler && now_s() < deadline)  // (a write that does not fit waits whole)
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        CHECK(pipe_holds(out[0]) > filler && wait_proc(pid, "stat", asleep),
              "generate did not write to its pipe and wait: %d bytes", pipe_holds(out[0]));
    } else {
        CHECK(screen_wait_bytes(&s, 0, 16), "no output: \"%s\"", s.text ? s.text : "");
    }
    kill(pid, SIGINT);
    CHECK(!stalled || wait_signal_taken(pid, SIGINT), "generate did not take SIGINT");  // before the pipe has room
    const int status = screen_finish(&s, pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "status %d: not killed by SIGINT", status);
    CHECK(s.len >= (size_t)filler && strspn(s.text ? s.text : "", "#") == (size_t)filler, "the filler is not whole");
    if (s.len >= (size_t)filler && filler) memmove(s.text, s.text + filler, (s.len -= (size_t)filler) + 1);
    char *said = NULL;
    size_t said_len = 0;
    FILE *f = fopen(errors, "r");
    if (f) said_len = fread(said = calloc(1, 4096), 1, 4095, f), fclose(f);
    CHECK(said && said_len == 0, "stderr: \"%s\"", said ? said : "(none)");
    free(said);
    unlink(errors);
    int n = 0;
    for (const char *p = s.text; p && *p; p++) n += *p != ' ' && (p == s.text || p[-1] == ' ');
    CHECK(n > 0 && n < atoi(ENDLESS), "%d ids printed", n);
    char args[PATH_MAX + 128], *full, *err;
    snprintf(args, sizeof args, "generate -m %s --ids \"1 2 3\" -n %d --print-ids --threads 1", ckpt, n);
    CHECK(run_specdec(args, &full, &err) == 0, "%s", err);
    // The printer was finished before the end (its last newline written): nothing it held back was lost.
    CHECK(s.text && s.len > 0 && s.text[s.len - 1] == '\n', "the output does not end its line: \"%s\"",
          s.text ? s.text : "");
    full[strcspn(full, "\n")] = '\0';
    if (s.text) s.text[strcspn(s.text, "\n")] = '\0';
    CHECK(s.text && strcmp(s.text, full) == 0, "interrupted: \"%.200s\", uninterrupted -n %d: \"%.200s\"", s.text, n,
          full);
    free(full);
    free(err);
    free(s.text);
    free(ckpt);
    fixture_remove_dir(dir);
}

TEST(generate_ctrl_c_dies_with_the_output_printed) { generate_interrupted(false); }

TEST(generate_ctrl_c_while_its_write_waits_on_a_full_pipe) { generate_interrupted(true); }

// A load shows its progress on a terminal (one line on stderr, erased at the end), and nothing elsewhere.
TEST(load_progress_on_a_terminal_only) {
    char *dir, *ckpt = endless_checkpoint(&dir);
    if (!ckpt) return;
    int fd;
    Screen s;
    const pid_t pid = spawn_on_terminal((const char *[]){"logits", "-m", ckpt, "--ids", "1", "--quant", "q4", NULL},
                                        &fd, &s);
    if (pid < 0) return;
    const int status = screen_finish(&s, pid);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "\rspecdec: loading %s (q4): ", ckpt);
    const char *line = s.text ? strstr(s.text, want) : NULL;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && line && strstr(line, " MB\033[K") &&
              strstr(line, "\r\033[K"),
          "status %d, the terminal showed: %s", status, s.text ? s.text : "");
    char args[PATH_MAX + 64], *out, *err;
    snprintf(args, sizeof args, "logits -m %s --ids 1 --quant q4", ckpt);
    CHECK(run_specdec(args, &out, &err) == 0 && err[0] == '\0', "stderr not a terminal: \"%s\"", err);
    free(out);
    free(err);
    free(s.text);
    free(ckpt);
    fixture_remove_dir(dir);
}
