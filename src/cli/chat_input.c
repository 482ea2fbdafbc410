// chat_input.c — the chat's reads of its user (chat_input.h).
#include <editline/readline.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/utf8.h"
#include "cli/chat_input.h"
#include "cli/interrupt.h"

// xterm's bracketed paste: the modes that turn it on and off, and the marks around what is pasted.
#define PASTE_MODE_ON "\033[?2004h"
#define PASTE_MODE_OFF "\033[?2004l"
#define PASTE_START "\033[200~"
#define PASTE_END "\033[201~"

// The bytes read after an ESC that began no paste (an arrow key's ESC [ A): libedit's next keys. File-scope, as the
// key reader libedit calls takes no context.
static struct {
    unsigned char bytes[sizeof PASTE_START];
    int n, next;
} held;

// SIGINT alone, as a signal set.
static sigset_t sigint_set(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    return set;
}

// The terminal opened a second time, non-blocking (its own open file description: stdin's, shared with the shell,
// keeps its flags), for the key reader's reads; -1 where it could not be opened (stdin is read, blocking).
static int keys_fd = -1;

// The next byte from the terminal, EOF at its end or on Ctrl-C. (libedit's own read retries a read that a signal
// interrupted, so that a Ctrl-C could wait for a key; this one ends the line at once: readline returns what was
// typed, which read_line drops.) SIGINT is blocked but while ppoll waits, so that one that comes between the check
// of the flag and the wait still ends the wait. The read after the wait does not block: a Ctrl-C typed once ppoll
// saw keys waiting discards them (the terminal flushes its input with the signal), and a blocking read would then
// wait, the signal held, for a key nobody types; this one finds nothing and goes back to the wait, which the signal
// ends.
static int read_terminal_byte(FILE *in) {
    const int fd = keys_fd >= 0 ? keys_fd : fileno(in);
    const sigset_t sigint = sigint_set();
    sigset_t outside, waiting;
    pthread_sigmask(SIG_BLOCK, &sigint, &outside);
    waiting = outside;
    sigdelset(&waiting, SIGINT);
    struct pollfd ready = {.fd = fd, .events = POLLIN};
    unsigned char byte;
    ssize_t got = -1;
    for (;;) {
        int polled = 0;
        while (!interrupt_requested() && (polled = ppoll(&ready, 1, NULL, &waiting)) < 0 && errno == EINTR) {}
        if (polled <= 0 || interrupt_requested()) break;
        if ((got = read(fd, &byte, 1)) >= 0 || errno != EAGAIN) break;  // (EAGAIN: the keys seen went)
    }
    pthread_sigmask(SIG_SETMASK, &outside, NULL);
    return got == 1 ? byte : EOF;
}

static int read_byte(FILE *in) {
    return held.next < held.n ? held.bytes[held.next++] : read_terminal_byte(in);
}

// Reads a paste up to its end mark and inserts it into the line being edited, as if typed, newlines kept: the CR a
// terminal sends for a newline becomes LF (where the terminal's driver has not made it one), NUL bytes are dropped,
// what is not UTF-8 becomes U+FFFD. 0, or EOF where the
// input ended or Ctrl-C came first (the paste is then dropped with the line).
static int insert_paste(FILE *in) {
    const size_t end_len = strlen(PASTE_END);
    char *text = NULL, *repaired = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (bool ended = false; rc == 0 && !ended;) {
        const int byte = read_terminal_byte(in);
        char *grown = len == cap ? realloc(text, cap = 2 * cap + 4096) : text;
        if (byte == EOF || !grown) {
            rc = EOF;
            break;
        }
        text = grown;
        text[len++] = (char)byte;
        ended = len >= end_len && memcmp(text + len - end_len, PASTE_END, end_len) == 0;
        if (ended) len -= end_len;
    }
    size_t kept = 0, repaired_len = 0;
    for (size_t i = 0; rc == 0 && i < len; i++)
        if (text[i] != '\0') text[kept++] = text[i] == '\r' ? '\n' : text[i];
    if (rc == 0 && kept > 0 && (repaired = malloc(3 * kept + 1)) != NULL) {
        utf8_repair((const unsigned char *)text, kept, true, repaired, &repaired_len);
        repaired[repaired_len] = '\0';
        rl_insert_text(repaired);
    }
    free(repaired);
    free(text);
    return rc;
}

// After an ESC from the terminal: a paste (ESC [200~), inserted into the line; or the ESC itself. Either way the
// bytes read after the ESC are held for libedit's next keys: the paste's start mark is bound to ed-redisplay
// (chat_input_start), which shows the line with what was inserted.
static int paste_or_escape(FILE *in) {
    const char *mark = PASTE_START + 1;  // what follows the ESC
    held.n = held.next = 0;
    while (mark[held.n] != '\0') {
        const int byte = read_terminal_byte(in);
        if (byte == EOF) return EOF;
        held.bytes[held.n++] = (unsigned char)byte;
        if (byte != mark[held.n - 1]) return '\033';
    }
    held.next = 0;
    return insert_paste(in) == 0 ? '\033' : EOF;
}

// libedit's reads of the terminal: a character, its UTF-8 bytes decoded (U+FFFD where they are not UTF-8), or a
// paste inserted whole.
static int read_key(FILE *in) {
    const bool fresh = held.next == held.n;  // the byte comes from the terminal, not from what an ESC held
    int byte = read_byte(in);
    if (byte == '\033' && fresh) byte = paste_or_escape(in);
    if (byte == EOF) return byte;
    unsigned char bytes[UTF8_MAX] = {(unsigned char)byte};
    int n = 1, want = 1;  // the bytes read, and those the first byte announces
    if (byte >= 0xF0) want = 4;
    else if (byte >= 0xE0) want = 3;
    else if (byte >= 0xC0) want = 2;
    for (; n < want; n++)
        if ((byte = read_byte(in)) == EOF) return EOF;
        else bytes[n] = (unsigned char)byte;
    uint32_t cp;
    return utf8_decode(bytes, (size_t)n, &cp) == n ? (int)cp : 0xFFFD;
}

void chat_input_start(bool terminal) {
    setlocale(LC_CTYPE, "C.UTF-8");  // libedit's characters back to bytes: UTF-8, as messages are (before its start)
    rl_getc_function = read_key;
    const char *name = terminal ? ttyname(STDIN_FILENO) : NULL;
    if (name) keys_fd = open(name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);  // (open for the chat's life)
    if (terminal && rl_initialize() == 0) rl_parse_and_bind("bind ^[[200~ ed-redisplay");
}

// The next line of input without its newline (malloc'd), NULL at the end: through libedit on a terminal, with
// bracketed paste on while it waits; plain lines otherwise. Ctrl-C while it waits drops what was typed:
// *interrupted, and an empty line.
static char *read_line(bool terminal, const char *prompt, bool *interrupted) {
    char *line = NULL;
    if (terminal) {
        // SIGINT stays blocked but while a key is awaited (read_terminal_byte): a Ctrl-C (or a kill -INT) that comes
        // while libedit writes — a prompt or an echo held by a stopped terminal (Ctrl-S) — would fail that write
        // (libedit catches SIGINT without SA_RESTART while it reads a line), and stdout would keep the error to the
        // end of the chat, which then exits with status 2 ("stdout: write error"). Held, it ends the wait that follows.
        const sigset_t sigint = sigint_set();
        sigset_t before;
        pthread_sigmask(SIG_BLOCK, &sigint, &before);
        const bool paste_mode = isatty(STDOUT_FILENO);  // (the modes are for the terminal, not a file)
        if (paste_mode) fputs(PASTE_MODE_ON, stdout);
        held.n = held.next = 0;
        line = readline(prompt);
        if (paste_mode) fputs(PASTE_MODE_OFF, stdout);
        fflush(stdout);
        pthread_sigmask(SIG_SETMASK, &before, NULL);
    } else {
        size_t cap = 0;
        ssize_t n = getline(&line, &cap, stdin);
        if (n < 0) {
            free(line);
            line = NULL;
        } else {
            if (n > 0 && line[n - 1] == '\n') line[--n] = '\0';
            if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
        }
    }
    if (!(*interrupted = interrupt_requested())) return line;
    interrupt_clear();
    clearerr(stdin);
    if (terminal) fputc('\n', stderr);
    free(line);
    return strdup("");
}

// A line; or the lines between a line """ and the next such line, joined by newlines (Ctrl-C drops them, and the
// end of input ends the chat without them).
char *chat_read_message(bool terminal) {
    bool interrupted;
    char *first = read_line(terminal, "> ", &interrupted);
    if (!first || strcmp(first, "\"\"\"") != 0) {
        if (terminal && first && *first) add_history(first);
        return first;
    }
    free(first);
    char *message = NULL;
    size_t len = 0;
    FILE *joined = open_memstream(&message, &len);
    bool empty = true;
    for (char *line; joined && (line = read_line(terminal, ". ", &interrupted)) != NULL; free(line)) {
        if (interrupted || strcmp(line, "\"\"\"") == 0) {
            fclose(joined);
            if (interrupted) message[0] = '\0';
            free(line);
            return message;
        }
        fprintf(joined, "%s%s", empty ? "" : "\n", line);
        empty = false;
    }
    if (joined) fclose(joined);
    free(message);
    return NULL;
}
