// served.c — specdec serve as a child process on a free loopback port, and raw HTTP to it (served.h).
#include "served.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define TARGET "weights/pystd/target"  // the shipped target: its tokenizer serves the tiny checkpoint

// ---- the server as a child process --------------------------------------------------------------------------

// A whole file's text (malloc'd; "" when it cannot be read).
char *read_text(const char *path) {
    char *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    size_t cap = 1 << 16, n = 0, got;
    out = malloc(cap);
    while ((got = fread(out + n, 1, cap - n - 1, f)) > 0)
        if ((n += got) == cap - 1) out = realloc(out, cap *= 2);
    out[n] = '\0';
    fclose(f);
    return out;
}

// Starts `specdec serve --port 0 -m DIR OPTIONS` and waits for its "listening on" line; false if it exits first.
bool serve(Served *s, const char *dir, const char *options) {
    snprintf(s->log, sizeof s->log, "/tmp/specdec-serve-XXXXXX");
    const int fd = mkstemp(s->log);
    char *command;
    if (fd < 0 || asprintf(&command, "exec %s serve --port 0 -m %s %s", specdec_bin(), dir, options) < 0) return false;
    if ((s->pid = fork()) == 0) {
        dup2(fd, STDERR_FILENO);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    close(fd);
    free(command);
    for (;;) {
        char *log = read_text(s->log);
        const char *at = strstr(log, "listening on http://127.0.0.1:");
        s->port = at ? atoi(at + strlen("listening on http://127.0.0.1:")) : 0;
        free(log);
        if (s->port > 0) return true;
        int status;
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) return false;
        usleep(20000);
    }
}

// SIGTERM, then its exit status; *log: what it wrote on stderr (caller frees).
int stop_serving(Served *s, char **log) {
    kill(s->pid, SIGTERM);
    int status;
    waitpid(s->pid, &status, 0);
    *log = read_text(s->log);
    unlink(s->log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// ---- raw HTTP -----------------------------------------------------------------------------------------------

int connect_to(int port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

// Reads from fd until the server closes it (or `until` appears in what came); malloc'd.
char *read_reply(int fd, const char *until) {
    size_t cap = 1 << 14, n = 0;
    char *out = malloc(cap);
    ssize_t got;
    while ((got = read(fd, out + n, cap - n - 1)) > 0) {
        n += (size_t)got;
        out[n] = '\0';
        if (until && strstr(out, until)) break;
        if (n + 1 == cap) out = realloc(out, cap *= 2);
    }
    out[n] = '\0';
    return out;
}

// Sends raw bytes (a whole request, with "Connection: close") and returns everything the server sent back.
char *exchange(int port, const char *raw) {
    const int fd = connect_to(port);
    if (fd < 0) return strdup("(cannot connect)");
    if (write(fd, raw, strlen(raw)) < 0) return close(fd), strdup("(cannot send)");
    char *reply = read_reply(fd, NULL);
    close(fd);
    return reply;
}

char *post(int port, const char *path, const char *headers, const char *body) {
    char *raw, *reply;
    if (asprintf(&raw, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n%s"
                       "Content-Length: %zu\r\n\r\n%s", path, headers, strlen(body), body) < 0)
        return NULL;
    reply = exchange(port, raw);
    free(raw);
    return reply;
}

// The final response's status: interim ones (1xx, such as the probe a half-closed client gets: queue.c) skipped.
int status_of(const char *reply) {
    int status = 0;
    while (sscanf(reply, "HTTP/1.%*d %d", &status) == 1 && status >= 100 && status < 200 && strstr(reply, "\r\n\r\n"))
        reply = strstr(reply, "\r\n\r\n") + 4;
    return sscanf(reply, "HTTP/1.%*d %d", &status) == 1 ? status : 0;
}

// Waits until /health says a generation runs (running) or that nothing runs and nothing waits (!running); gives up
// (a failure) after a minute, so that a server that never gets there fails the test instead of hanging the suite.
void wait_health(int port, bool running) {
    for (int tries = 0; tries < 3000; tries++) {
        char *reply = exchange(port, "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        const char *count = strstr(reply, "\"running\": ");
        const int n = count ? atoi(count + strlen("\"running\": ")) : -1;
        const bool there = running ? n > 0 : n == 0 && strstr(reply, "\"waiting\": 0");
        free(reply);
        if (there) return;
        usleep(20000);
    }
    CHECK(false, "/health never said %s", running ? "running" : "idle");
}

// A checkpoint folder of the fixture f32_tied_prefix (vocabulary 61, context 32) with the shipped tokenizer, whose
// first 61 ids decode: prompts of such ids (given as ids, or as text like PROMPT) run through the whole server in
// milliseconds, even in the sanitizers' build.
// With a chat template, each message's content in parentheses and the assistant's turn an @ (characters whose ids
// are below 61, and which no merge joins to PROMPT's).
void tiny_checkpoint(char dir[64], bool chat_template) {
    snprintf(dir, 64, "/tmp/specdec-tiny-XXXXXX");
    CHECK(mkdtemp(dir), "mkdtemp");
    char *command;
    if (asprintf(&command, "d=%s; f=$(pwd)/tests/fixtures/f32_tied_prefix; w=$(pwd)/" TARGET "; "
                 "ln -s $f/config.json $f/model.safetensors $w/tokenizer.json $d/%s", dir,
                 chat_template ? " && printf '%s' '{% for m in messages %}({{ m.content }}){% endfor %}{% if "
                                 "add_generation_prompt %}@{% endif %}' > $d/chat_template.jinja" : "") < 0)
        return;
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
    free(command);
}

void remove_dir(const char *dir) {
    char *command;
    if (asprintf(&command, "rm -rf %s", dir) < 0) return;
    run_command(command, NULL, NULL);
    free(command);
}
