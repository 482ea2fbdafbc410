// server.c — the HTTP side of specdec serve (see server.h).
#include "serve/server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "serve/web.h"

// One request on a connection, from its headers to its log line.
typedef struct {
    double t0;
    char method[16], path[256];     // escaped (error.h), for the log
    int status;
    char *body;                     // the body as it arrives
    size_t len;
    bool too_large;
    const char *allow;              // the method a 405 names in its Allow header
    Job *job;                       // a completion's, once queued
} Exchange;

// ---- responses ----------------------------------------------------------------------------------------------

// Queues body (malloc'd, taken over; NULL: out of memory → 500) with `status`.
static enum MHD_Result respond(struct MHD_Connection *c, Exchange *x, int status, const char *type, char *body) {
    if (!body) {
        status = 500;
        body = strdup("{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\"}}");
        if (!body) return MHD_NO;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) return free(body), MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (status == 405) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, x->allow);
    x->status = status;
    const enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result respond_error(struct MHD_Connection *c, Exchange *x, const ApiError *e) {
    return respond(c, x, e->status == 499 ? 400 : e->status, "application/json", api_error_json(e));
}

static enum MHD_Result refuse(struct MHD_Connection *c, Exchange *x, int status, const char *code, const char *fmt,
                              const char *arg) {
    ApiError e;
    api_error(&e, status, code, NULL, fmt, arg);
    return respond_error(c, x, &e);
}

// One of the page's files (web.h), from the binary's own bytes, under the page's Content-Security-Policy.
static enum MHD_Result respond_file(struct MHD_Connection *c, Exchange *x, const WebFile *file) {
    struct MHD_Response *r = MHD_create_response_from_buffer(file->len, (void *)file->bytes, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, file->type);
    MHD_add_response_header(r, "Content-Security-Policy", WEB_CONTENT_SECURITY_POLICY);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    x->status = 200;
    const enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

// After an answer sent with the request's rest unread: what arrives is read and dropped until the client closes (it
// has the answer), for LINGER_SECONDS at most — closing a socket with unread bytes resets the connection, and a reset
// can discard the answer before the client reads it (Apache's "lingering close").
enum { LINGER_SECONDS = 2 };
static void linger(int fd) {
    const double until = now_seconds() + LINGER_SECONDS;
    char sink[4096];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (now_seconds() < until && poll(&p, 1, 100) >= 0)
        if ((p.revents & POLLIN) && recv(fd, sink, sizeof sink, MSG_DONTWAIT) == 0) return;
}

// A body past --max-body that announced no length (chunked): 413 at once, written to the socket itself, and the
// connection closed with the rest unread — libmicrohttpd (0.9.75) queues a response only before a body or after its
// end, which a client could put off for as long as it likes.
static enum MHD_Result refuse_mid_body(struct MHD_Connection *c, Exchange *x) {
    ApiError e;
    api_error(&e, 413, "request_too_large", NULL, "%s", "the body is longer than --max-body");
    char *body = api_error_json(&e), *response = NULL;
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (body && info && asprintf(&response, "HTTP/1.1 413 Payload Too Large\r\nConnection: close\r\nContent-Type: "
                                 "application/json\r\nContent-Length: %zu\r\n\r\n%s", strlen(body), body) >= 0) {
        send(info->connect_fd, response, strlen(response), MSG_NOSIGNAL);
        shutdown(info->connect_fd, SHUT_WR);  // the answer's end
        linger(info->connect_fd);
    }
    free(response);
    free(body);
    x->status = 413;
    return MHD_NO;
}

// ---- a stream's events --------------------------------------------------------------------------------------

// libmicrohttpd asks for more of the body: the events the worker wrote, waiting for the next when there is none.
static ssize_t read_events(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    Job *job = cls;
    pthread_mutex_lock(&job->lock);
    while (job->out_read == job->out_len && !job->done) pthread_cond_wait(&job->changed, &job->lock);
    const size_t n = job->out_len - job->out_read < max ? job->out_len - job->out_read : max;
    memcpy(buf, job->out + job->out_read, n);
    job->out_read += n;
    pthread_mutex_unlock(&job->lock);
    return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

// The stream's response is let go (sent, or the client went away): the generation, if it runs, is cancelled.
static void events_done(void *cls) {
    job_hang_up(cls);
    job_release(cls);
}

static enum MHD_Result respond_stream(struct MHD_Connection *c, Exchange *x, Job *job) {
    pthread_mutex_lock(&job->lock);
    job->refs++;  // the response's
    pthread_mutex_unlock(&job->lock);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, read_events, job, events_done);
    if (!r) {
        events_done(job);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    x->status = 200;
    const enum MHD_Result ok = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ok;
}

// ---- the endpoints ------------------------------------------------------------------------------------------

static enum MHD_Result complete(Server *s, struct MHD_Connection *c, Exchange *x, ApiKind kind) {
    Request req;
    ApiError e;
    if (request_parse(&req, kind, x->body ? x->body : "", x->len, &e)) {
        request_free(&req);
        return respond_error(c, x, &e);
    }
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    Job *job = job_new(&req, s->options.model, info ? info->connect_fd : -1);
    if (!job) return request_free(&req), respond(c, x, 500, "application/json", NULL);
    if (!queue_submit(&s->queue, job)) {
        job_release(job);
        return refuse(c, x, 503, "server_busy", "%s", "the server is busy: one generation runs at a time and the "
                      "queue is full; retry later");
    }
    x->job = job;
    job_wait_started(job);
    if (job->req.stream && job->started) return respond_stream(c, x, job);
    job_wait_done(job);
    if (job->result.cancelled) {  // the client went away: nobody to answer (the log says 499, nginx's code for it)
        x->status = 499;
        return MHD_NO;
    }
    if (job->failed) return respond_error(c, x, &job->error);
    if (job->reports_lost) return respond(c, x, 500, "application/json", NULL);  // (out of memory)
    const TokenReports logprobs = {.tokens = job->reports.tokens, .n = job->reports.n};
    return respond(c, x, 200, "application/json",
                   api_completion_json(&job->response, job->out ? job->out : "", job->out_len, &job->result,
                                       job->req.logprobs ? &logprobs : NULL));
}

static enum MHD_Result health(Server *s, struct MHD_Connection *c, Exchange *x) {
    int waiting, running;
    queue_state(&s->queue, &waiting, &running);
    char *body = NULL;
    if (asprintf(&body, "{\"status\": \"ok\", \"waiting\": %d, \"running\": %d, \"parallel\": %d}", waiting,
                 running, s->options.parallel) < 0)
        body = NULL;
    return respond(c, x, 200, "application/json", body);
}

typedef enum { ROUTE_HEALTH, ROUTE_MODELS, ROUTE_COMPLETIONS, ROUTE_CHAT, ROUTE_PAGE, ROUTE_NONE } Route;

static const struct {
    const char *path, *method;
} routes[] = {
    [ROUTE_HEALTH] = {"/health", "GET"},
    [ROUTE_MODELS] = {"/v1/models", "GET"},
    [ROUTE_COMPLETIONS] = {"/v1/completions", "POST"},
    [ROUTE_CHAT] = {"/v1/chat/completions", "POST"},
    [ROUTE_PAGE] = {"/", "GET"},  // and the page's other files (web.h)
};

static Route find_route(const char *url) {
    for (int r = 0; r < ROUTE_NONE; r++)
        if (strcmp(url, routes[r].path) == 0) return (Route)r;
    WebFile file;
    return web_file(url, &file) ? ROUTE_PAGE : ROUTE_NONE;
}

bool same_secret(const char *given, const char *key) {
    const size_t n = strlen(given), m = strlen(key);
    unsigned char differ = n != m;
    for (size_t i = 0; i < m; i++) differ |= (unsigned char)(key[i] ^ given[i < n ? i : n]);
    return differ == 0;
}

static bool authorized(const Server *s, struct MHD_Connection *c) {
    if (!s->options.api_key) return true;
    const char *given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    return given && strncasecmp(given, "Bearer ", 7) == 0 && same_secret(given + 7, s->options.api_key);
}

// The headers are in: route, method, key and announced length are checked before any body is read. The page's
// files, like /health, need no key: the page asks for it (and keeps it) to call the API.
static enum MHD_Result on_headers(Server *s, struct MHD_Connection *c, Exchange *x, const char *url, Route route,
                                  const char *method) {
    if (route == ROUTE_NONE) return refuse(c, x, 404, "unknown_url", "%s: no such endpoint (/, /health, "
                                           "/v1/models, /v1/completions, /v1/chat/completions)", x->path);
    if (strcmp(method, routes[route].method) != 0) {
        x->allow = routes[route].method;
        return refuse(c, x, 405, "method_not_allowed", "%s takes only the method its Allow header names", x->path);
    }
    WebFile file;
    if (route == ROUTE_PAGE && web_file(url, &file)) return respond_file(c, x, &file);
    if (route != ROUTE_HEALTH && !authorized(s, c))
        return refuse(c, x, 401, "invalid_api_key", "%s", "missing or wrong API key (Authorization: Bearer KEY)");
    const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (length && strtoull(length, NULL, 10) > s->options.max_body) x->too_large = true;
    if (x->too_large) return refuse(c, x, 413, "request_too_large", "%s", "the body is longer than --max-body");
    if (route == ROUTE_HEALTH) return health(s, c, x);
    if (route == ROUTE_MODELS)
        return respond(c, x, 200, "application/json", api_models_json(s->options.model, s->started, s->queue.engine));
    return MHD_YES;  // a POST: its body next
}

// The connection's entry in the deadlines (on_connection's), or NULL.
static Watched *watched(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void)version;
    Server *s = cls;
    Exchange *x = *state;
    if (!x) {
        if (!(x = calloc(1, sizeof *x))) return MHD_NO;
        *state = x;
        x->t0 = now_seconds();
        err_escape(x->method, sizeof x->method, method);
        err_escape(x->path, sizeof x->path, url);
        return on_headers(s, c, x, url, find_route(url), method);
    }
    if (x->status) {  // answered already (413, 401...): the rest of the body is dropped
        *upload_size = 0;
        return MHD_YES;
    }
    if (*upload_size) {
        if (x->len + *upload_size > s->options.max_body) x->too_large = true;
        char *grown = x->too_large ? NULL : realloc(x->body, x->len + *upload_size + 1);
        if (grown) {
            memcpy(grown + x->len, upload, *upload_size);
            x->body = grown;
            x->len += *upload_size;
            x->body[x->len] = '\0';
        }
        *upload_size = 0;
        return grown ? MHD_YES : refuse_mid_body(c, x);
    }
    deadlines_arrived(&s->deadlines, watched(c));
    return complete(s, c, x, find_route(url) == ROUTE_CHAT ? API_CHAT : API_COMPLETIONS);
}

// ---- the log ------------------------------------------------------------------------------------------------

static void on_completed(void *cls, struct MHD_Connection *c, void **state, enum MHD_RequestTerminationCode why) {
    Server *s = cls;
    Exchange *x = *state;
    deadlines_rearm(&s->deadlines, watched(c));  // (the next request on this connection, if it is kept)
    if (!x) return;
    int tokens = 0;
    bool cancelled = false;
    if (x->job) {
        job_hang_up(x->job);
        pthread_mutex_lock(&x->job->lock);
        tokens = x->job->result.completion_tokens;
        cancelled = x->job->result.cancelled;
        pthread_mutex_unlock(&x->job->lock);
        job_release(x->job);
    }
    const char *end = why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection lost)";
    fprintf(stderr, "specdec serve: %s %s %d %d tokens %.1f ms%s\n", x->method, x->path, x->status, tokens,
            (now_seconds() - x->t0) * 1e3, cancelled ? " (cancelled: the client went away)" : end);
    free(x->body);
    free(x);
    *state = NULL;
}

// A connection opens (its first request due, deadlines.h) or closes.
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    Server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        deadlines_forget(&s->deadlines, *socket_context);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = info ? deadlines_watch(&s->deadlines, info->connect_fd) : NULL;
}

// libmicrohttpd's own messages (malformed requests, sockets), one escaped line each.
static void log_library(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    char text[512], escaped[1024];
    vsnprintf(text, sizeof text, fmt, ap);
    size_t n = strlen(text);
    while (n && text[n - 1] == '\n') text[--n] = '\0';
    fprintf(stderr, "specdec serve: libmicrohttpd: %s\n", err_escape(escaped, sizeof escaped, text));
}

// ---- the daemon ---------------------------------------------------------------------------------------------

// The listening address: host (numeric or a name) and port.
static int resolve(const char *host, int port, struct sockaddr_storage *addr, Err *err) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *found;
    const int rc = getaddrinfo(host, NULL, &hints, &found);
    if (rc != 0) return err_fmt(err, "--host %s: %s", host, gai_strerror(rc));
    memcpy(addr, found->ai_addr, found->ai_addrlen);
    freeaddrinfo(found);
    if (addr->ss_family == AF_INET) ((struct sockaddr_in *)addr)->sin_port = htons((uint16_t)port);
    else ((struct sockaddr_in6 *)addr)->sin6_port = htons((uint16_t)port);
    return 0;
}

// Whether the address can be listened on, by a socket bound to it and closed again: libmicrohttpd says only that it
// failed, and "in use" and "not this machine's address" need different fixes.
static int check_bind(const struct sockaddr_storage *addr, const char *host, int port, Err *err) {
    const int fd = socket(addr->ss_family, SOCK_STREAM, 0);
    if (fd < 0) return err_fmt(err, "cannot open a socket: %s", strerror(errno));
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // (as libmicrohttpd's listening socket)
    const socklen_t size = addr->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    const int rc = bind(fd, (const struct sockaddr *)addr, size), error = errno;
    close(fd);
    if (rc == 0) return 0;
    if (error == EADDRNOTAVAIL)
        return err_fmt(err, "--host %s: cannot assign the address: no network interface of this machine has it",
                       host);
    if (error == EADDRINUSE) return err_fmt(err, "port %d is in use on %s (--port 0 takes a free one)", port, host);
    return err_fmt(err, "cannot listen on %s port %d: %s", host, port, strerror(error));
}

int server_start(Server *s, const Engine *engine, const ServeOptions *options, Err *err) {
    *s = (Server){.options = *options, .started = (long long)time(NULL)};
    struct sockaddr_storage addr;
    if (resolve(options->host, options->port, &addr, err) || check_bind(&addr, options->host, options->port, err))
        return -1;
    if (deadlines_start(&s->deadlines, options->timeout, err)) return -1;
    if (queue_start(&s->queue, engine, options->parallel, options->queue, err)) {
        queue_stop(&s->queue);
        deadlines_stop(&s->deadlines);
        return -1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
    s->daemon = MHD_start_daemon(flags, (uint16_t)options->port, NULL, NULL, handle, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, log_library, NULL,  // first, or it misses messages
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)options->timeout,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)(options->queue + options->parallel + 64),
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->daemon) {
        queue_stop(&s->queue);
        deadlines_stop(&s->deadlines);
        return err_fmt(err, "cannot listen on %s port %d (in use? --port 0 takes a free one)", options->host,
                       options->port);
    }
    return 0;
}

int server_port(const Server *s) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : -1;
}

void server_stop(Server *s) {
    MHD_quiesce_daemon(s->daemon);
    queue_stop(&s->queue);
    MHD_stop_daemon(s->daemon);
    deadlines_stop(&s->deadlines);
}
