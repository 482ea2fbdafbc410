// queue.c — the jobs, their queue and the one worker that runs them (see queue.h).
#include "serve/queue.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

// ---- jobs ---------------------------------------------------------------------------------------------------

Job *job_new(Request *req, const char *model, int fd) {
    static atomic_ullong serial;
    Job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_mutex_init(&job->lock, NULL);
    pthread_cond_init(&job->changed, NULL);
    job->refs = 1;
    job->req = *req;
    *req = (Request){0};
    job->fd = fd;
    snprintf(job->id, sizeof job->id, "%s-%llu", job->req.kind == API_CHAT ? "chatcmpl" : "cmpl",
             (unsigned long long)atomic_fetch_add(&serial, 1) + 1);
    job->response = (ApiResponse){.kind = job->req.kind, .id = job->id, .created = (long long)time(NULL),
                                  .model = model};
    return job;
}

void job_release(Job *job) {
    pthread_mutex_lock(&job->lock);
    const bool last = --job->refs == 0;
    pthread_mutex_unlock(&job->lock);
    if (!last) return;
    request_free(&job->req);
    free(job->out);
    token_reports_free(&job->reports);
    pthread_mutex_destroy(&job->lock);
    pthread_cond_destroy(&job->changed);
    free(job);
}

void job_hang_up(Job *job) {
    pthread_mutex_lock(&job->lock);
    job->gone = true;
    pthread_mutex_unlock(&job->lock);
}

void job_wait_started(Job *job) {
    pthread_mutex_lock(&job->lock);
    while (!job->started && !job->done) pthread_cond_wait(&job->changed, &job->lock);
    pthread_mutex_unlock(&job->lock);
}

void job_wait_done(Job *job) {
    pthread_mutex_lock(&job->lock);
    while (!job->done) pthread_cond_wait(&job->changed, &job->lock);
    pthread_mutex_unlock(&job->lock);
}

// Appends bytes to job->out (under the lock); out of memory they are dropped and the job fails at its end.
static void append_out(Job *job, const char *bytes, size_t n) {
    if (!bytes) return;
    if (job->out_len + n + 1 > job->out_cap) {
        const size_t cap = 2 * (job->out_len + n + 1);
        char *grown = realloc(job->out, cap);
        if (!grown) return;
        job->out = grown, job->out_cap = cap;
    }
    memcpy(job->out + job->out_len, bytes, n);
    job->out_len += n;
    job->out[job->out_len] = '\0';
}

// ---- the engine's sink --------------------------------------------------------------------------------------

// Text as it becomes final: a stream's SSE chunk (chat's first names the role; with its marks and logprobs when
// asked for), or more of the whole text and its logprobs.
static void job_on_text(void *ctx, const char *text, size_t len, const TextMarks *marks,
                        const TokenReports *logprobs) {
    Job *job = ctx;
    pthread_mutex_lock(&job->lock);
    if (job->req.stream) {
        char *event = api_chunk_sse(&job->response, text, len, job->out_len == 0 && job->out_read == 0, marks,
                                    logprobs);
        append_out(job, event, event ? strlen(event) : 0);
        free(event);
    } else {
        append_out(job, text, len);
        if (logprobs && token_reports_append(&job->reports, logprobs)) job->reports_lost = true;
    }
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
}

// An interim response (RFC 9110 §15.2: a client parses any number of 1xx before the final response, and skips
// them): what the worker sends a client that half-closed, to learn whether its socket is still open.
static const char PROBE[] = "HTTP/1.1 100 Continue\r\n\r\n";

// The socket's state: POLLHUP or POLLERR (closed: a reset came back), POLLRDHUP (the client's side sent its end:
// a close, or only a half-close), or 0.
static short socket_events(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

// Between rounds: is anybody still waiting? Not when the connection ended, or its socket was closed. A client that
// half-closed (shutdown(SHUT_WR) after its request, as some clients and proxies do) still reads, though its side
// has ended (POLLRDHUP) as a closed socket's has; TCP tells the two apart only once something is sent, to which a
// closed socket answers with a reset. So when the client's side has ended and nothing of the response went yet (a
// stream's events, once they go, are such probes themselves), the worker sends PROBE, once, and looks again.
static bool job_cancelled(void *ctx) {
    Job *job = ctx;
    pthread_mutex_lock(&job->lock);
    const bool gone = job->gone, answering = job->req.stream && job->started;
    const int fd = job->fd;
    pthread_mutex_unlock(&job->lock);
    if (gone) return true;
    if (fd < 0) return false;
    short events = socket_events(fd);
    if ((events & POLLRDHUP) && !answering && !job->probed) {
        job->probed = true;
        if (send(fd, PROBE, sizeof PROBE - 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) return true;
        events = socket_events(fd);
    }
    return events & (POLLHUP | POLLERR);
}

// ---- the worker ---------------------------------------------------------------------------------------------

static void finish(Job *job, const EngineResult *result, const ApiError *error) {
    pthread_mutex_lock(&job->lock);
    if (error) {
        job->failed = true;
        job->error = *error;
    }
    if (result) job->result = *result;
    if (job->req.stream && job->started) {  // the headers went: the end (or the error) as events
        char *error_body = error ? api_error_json(error) : NULL, *event = NULL;
        if (error_body && asprintf(&event, "data: %s\n\ndata: [DONE]\n\n", error_body) < 0) event = NULL;
        if (!error) event = api_stream_end_sse(&job->response, result, job->req.include_usage);
        append_out(job, event, event ? strlen(event) : 0);
        free(event);
        free(error_body);
    }
    job->done = true;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
}

// Runs a job to its result or its error (returns -1); finish() is the worker's to call, once the queue knows it is
// free — so that a client holding its answer finds the slot free.
static int run_job(const Engine *engine, Job *job, EngineResult *result, ApiError *e) {
    int *prompt = NULL, n_prompt = 0;
    if (job_cancelled(job)) return api_error(e, 499, NULL, NULL, "the client went away before its turn");
    if (engine_prompt(engine, &job->req, &prompt, &n_prompt, e)) {
        free(prompt);
        return -1;
    }
    pthread_mutex_lock(&job->lock);
    job->started = true;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
    job->response.tok = engine->tok;  // (the logprobs' token strings)
    EngineSink sink = {.on_text = job_on_text, .cancelled = job_cancelled, .ctx = job};
    const int rc = engine_run(engine, &job->req, prompt, n_prompt, &sink, result, e);
    free(prompt);
    return rc;
}

static void *worker(void *arg) {
    JobQueue *q = arg;
    pthread_mutex_lock(&q->lock);
    for (;;) {
        while (!q->head && !q->stopping) pthread_cond_wait(&q->nonempty, &q->lock);
        if (q->stopping) break;
        Job *job = q->head;
        q->head = job->next;
        if (!q->head) q->tail = NULL;
        q->waiting--;
        q->running = true;
        pthread_mutex_unlock(&q->lock);
        EngineResult result;
        ApiError e;
        const bool ok = run_job(q->engine, job, &result, &e) == 0;
        pthread_mutex_lock(&q->lock);
        q->running = false;
        pthread_mutex_unlock(&q->lock);
        finish(job, ok ? &result : NULL, ok ? NULL : &e);
        job_release(job);
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

int queue_start(JobQueue *q, const Engine *engine, int capacity, Err *err) {
    *q = (JobQueue){.capacity = capacity, .engine = engine};
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    if (pthread_create(&q->worker, NULL, worker, q) != 0) return err_fmt(err, "cannot start the worker thread");
    return 0;
}

bool queue_submit(JobQueue *q, Job *job) {
    pthread_mutex_lock(&q->lock);
    const bool room = q->waiting + q->running <= q->capacity && !q->stopping;  // capacity waiting + 1 running
    if (room) {
        pthread_mutex_lock(&job->lock);
        job->refs++;
        pthread_mutex_unlock(&job->lock);
        job->next = NULL;
        if (q->tail) q->tail->next = job;
        else q->head = job;
        q->tail = job;
        q->waiting++;
        pthread_cond_signal(&q->nonempty);
    }
    pthread_mutex_unlock(&q->lock);
    return room;
}

void queue_state(JobQueue *q, int *waiting, bool *running) {
    pthread_mutex_lock(&q->lock);
    *waiting = q->waiting;
    *running = q->running;
    pthread_mutex_unlock(&q->lock);
}

void queue_stop(JobQueue *q) {
    pthread_mutex_lock(&q->lock);
    q->stopping = true;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
    pthread_join(q->worker, NULL);
    ApiError e;
    api_error(&e, 503, "server_stopping", NULL, "the server is stopping");
    for (Job *job = q->head, *next; job; job = next) {
        next = job->next;
        finish(job, NULL, &e);
        job_release(job);
    }
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->nonempty);
}
