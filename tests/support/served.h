// served.h — specdec serve as a child process on a free loopback port, raw HTTP to it, and the tiny checkpoint that
// runs through a whole server in milliseconds: for the server's tests (tests/serve/).
#ifndef SPECDEC_TESTS_SERVED_H
#define SPECDEC_TESTS_SERVED_H

#include <stdbool.h>
#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char log[64];   // its stderr
} Served;

// A whole file's text (malloc'd; "" when it cannot be read).
char *read_text(const char *path);
// Starts `specdec serve --port 0 -m DIR OPTIONS` and waits for its "listening on" line; false if it exits first.
bool serve(Served *s, const char *dir, const char *options);
// SIGTERM, then its exit status; *log: what it wrote on stderr (caller frees).
int stop_serving(Served *s, char **log);

// A connected socket to 127.0.0.1:port, or −1.
int connect_to(int port);
// Reads from fd until the server closes it (or `until` appears in what came); malloc'd.
char *read_reply(int fd, const char *until);
// Sends raw bytes (a whole request, with "Connection: close") and returns everything the server sent back.
char *exchange(int port, const char *raw);
// POSTs body (JSON) to path with extra header lines (each ending "\r\n"); the whole reply.
char *post(int port, const char *path, const char *headers, const char *body);
// The final status of a reply (interim 1xx responses skipped), or 0.
int status_of(const char *reply);
// Waits until /health says a generation runs (running) or that nothing runs and nothing waits (!running); gives up
// (a failure) after a minute.
void wait_health(int port, bool running);

// A checkpoint folder (dir: room for 64 bytes) of the fixture f32_tied_prefix (vocabulary 61, context 32) with the
// shipped tokenizer, with a chat template if asked (tests/serve/test_server.c says which).
void tiny_checkpoint(char dir[64], bool chat_template);
void remove_dir(const char *dir);

#endif
