// server.h — specdec serve's HTTP side: GNU libmicrohttpd, one thread per connection, in front of the job queue.
//
//   GET  /health                 {"status": "ok", "waiting": N, "running": N, "parallel": N} (no key: for monitors)
//   GET  /v1/models              the one model served
//   POST /v1/completions         a prompt (request.h) → a completion, or server-sent events with "stream": true
//   POST /v1/chat/completions    messages → a chat completion, or events
// Unknown paths get 404, known paths with another method 405 (with Allow), all in OpenAI's error shape (request.h).
//
// Safety: with an API key every path but /health wants `Authorization: Bearer KEY` (compared in time that does not
// depend on where the bytes differ), else 401; a body longer than max_body bytes gets 413 before any of it is
// parsed (at once when Content-Length says so, else as soon as it passes the limit); a connection idle for `timeout`
// seconds is closed, and so is one whose request is not whole `timeout` seconds after it could start (deadlines.h:
// a slow client);
// a request beyond the queue gets 503 with Retry-After. One log line per request on stderr: method, path, status,
// tokens generated and time, its text escaped as error.h escapes messages.
#ifndef SPECDEC_SERVE_SERVER_H
#define SPECDEC_SERVE_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "serve/deadlines.h"
#include "serve/engine.h"
#include "serve/queue.h"

typedef struct {
    const char *host;       // an address (127.0.0.1, ::1, 0.0.0.0) or a name that resolves to one
    int port;               // 0: any free port (server_port says which)
    const char *api_key;    // NULL: none
    int parallel;           // requests generating at once, in one batch
    int queue;              // requests that may wait beside those generating
    size_t max_body;        // bytes
    int timeout;            // seconds a connection may stay idle, and a request may take to arrive whole
    const char *model;      // the name /v1/models and the responses give (the checkpoint folder's)
} ServeOptions;

typedef struct {
    struct MHD_Daemon *daemon;
    JobQueue queue;
    Deadlines deadlines;    // every request due whole within options.timeout
    ServeOptions options;
    long long started;      // Unix seconds
} Server;

// Starts the worker and the HTTP daemon; returns once it listens.
int server_start(Server *s, const Engine *engine, const ServeOptions *options, Err *err);
int server_port(const Server *s);
// Stops listening, lets the running generation finish, refuses what waits (503).
void server_stop(Server *s);

// Whether `given` equals `key`, in time that depends on the key's length only.
bool same_secret(const char *given, const char *key);

#endif
