// queue.c — the jobs, their queue, the slots and the one worker that runs them in a batch (see queue.h).
#include "serve/queue.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "base/clock.h"
#include "base/threads.h"

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
    engine_result_free(&job->result);
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
        char *event = api_chunk_sse(&job->response, text, len, !job->streamed, marks, logprobs);
        job->streamed = true;
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
// them): what the worker sends a client that half-closed, to learn whether its socket is still open. Once a
// stream's headers went, an SSE comment (a line that begins with a colon, which clients skip: the HTML standard's
// server-sent events, §9.2.6) in the stream is the probe instead.
static const char PROBE[] = "HTTP/1.1 100 Continue\r\n\r\n", STREAM_PROBE[] = ": still there?\n\n";

// The socket's state: POLLHUP or POLLERR (closed: a reset came back), POLLRDHUP (the client's side sent its end:
// a close, or only a half-close), or 0.
static short socket_events(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

// Between rounds (and between a prefill's steps): is anybody still waiting? Not when the connection ended, or its
// socket was closed. A client that half-closed (shutdown(SHUT_WR) after its request, as some clients and proxies do)
// still reads, though its side has ended (POLLRDHUP) as a closed socket's has; TCP tells the two apart only once
// something is sent, to which a closed socket answers with a reset. So when the client's side has ended, the worker
// sends a probe, once, and looks again: PROBE where nothing of the response went yet; in a stream whose headers went
// (and whose events would probe as they go, but none goes while its prompt is prefilled) STREAM_PROBE, which the
// connection writes — its reset comes back by the next look.
static bool job_cancelled(void *ctx) {
    Job *job = ctx;
    pthread_mutex_lock(&job->lock);
    const bool gone = job->gone, answering = job->req.stream && job->started;
    const int fd = job->fd;
    pthread_mutex_unlock(&job->lock);
    if (gone) return true;
    if (fd < 0) return false;
    short events = socket_events(fd);
    if ((events & POLLRDHUP) && !job->probed && answering) {
        job->probed = true;
        pthread_mutex_lock(&job->lock);
        append_out(job, STREAM_PROBE, sizeof STREAM_PROBE - 1);
        pthread_cond_broadcast(&job->changed);
        pthread_mutex_unlock(&job->lock);
    } else if ((events & POLLRDHUP) && !job->probed) {
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

// ---- the slots ----------------------------------------------------------------------------------------------

// A request's place in the batch: its generation, and the conversation (the target's KV cache and the ids it holds)
// that the slot keeps for the next request.
struct Slot {
    Conversation conv;
    unsigned long long used;    // the queue's tick when a request last took it (least recently used: the smallest)
    Job *job;                   // generating here, or NULL: free
    EngineSink sink;
    EngineRun *run;
    BatchJob batch_job;
    EngineResult result;
    int *prompt, n_prompt;
    int place;                  // its sequence in the batch
};

// The free slot for a request under `key` with ids[0..n_ids): the one whose conversation shares its longest prefix
// with them, else (none shares any) the least recently used.
static Slot *pick_slot(JobQueue *q, const char *key, const int *ids, int n_ids) {
    Slot *best = NULL;
    int best_shared = 0;
    for (int i = 0; i < q->parallel; i++) {
        Slot *slot = &q->slots[i];
        if (slot->job) continue;
        const int shared = conversation_shared(&slot->conv, key, ids, n_ids);
        if (!best || shared > best_shared || (shared == best_shared && slot->used < best->used)) {
            best = slot;
            best_shared = shared;
        }
    }
    return best;
}

// The slot is free again (its conversation kept, or reset where the generation failed).
static void free_slot(Slot *slot, bool failed) {
    if (failed) conversation_reset(&slot->conv);
    free(slot->prompt);
    *slot = (Slot){.conv = slot->conv, .used = slot->used};
}

// The slot's generation joins the batch, on the slot's conversation: what it shares with the prompt stays in the
// cache (the rest is prefilled in the batch's steps).
static int join(JobQueue *q, Slot *slot, Err *err) {
    if (conversation_claim(&slot->conv, slot->job->req.cache_salt, err) ||
        conversation_prepare(&slot->conv, slot->prompt, slot->n_prompt, slot->batch_job.params->max_tokens,
                             &slot->result.cached_tokens, err))
        return -1;
    slot->batch_job.cache = &slot->conv.cache;
    slot->place = batch_join(q->batch, &slot->batch_job, err);
    return slot->place < 0 ? -1 : 0;
}

// The job's generation joins the batch in a free slot; −1 with e when it cannot (its prompt refused: 400; 500).
static int admit(JobQueue *q, Job *job, ApiError *e) {
    int *prompt = NULL, n_prompt = 0;
    if (job_cancelled(job)) return api_error(e, 499, NULL, NULL, "the client went away before its turn");
    if (engine_prompt(q->engine, &job->req, &prompt, &n_prompt, e)) {
        free(prompt);
        return -1;
    }
    Slot *slot = pick_slot(q, job->req.cache_salt, prompt, n_prompt);
    *slot = (Slot){.conv = slot->conv, .used = ++q->tick, .job = job, .prompt = prompt, .n_prompt = n_prompt,
                   .sink = {.on_text = job_on_text, .cancelled = job_cancelled, .ctx = job}};
    pthread_mutex_lock(&job->lock);
    job->started = true;
    pthread_cond_broadcast(&job->changed);
    pthread_mutex_unlock(&job->lock);
    job->response.tok = q->engine->tok;  // (the logprobs' token strings)
    slot->run = engine_begin(q->engine, &job->req, prompt, n_prompt, &slot->sink, &slot->result, &slot->batch_job, e);
    Err err;
    if (slot->run && join(q, slot, &err)) {
        api_error(e, 500, NULL, NULL, "generation failed: %s", err.msg);
        engine_abort(slot->run);
        slot->run = NULL;
    }
    if (!slot->run) {
        free_slot(slot, true);
        return -1;
    }
    return 0;
}

// A job's end: the queue counts it out (so that a client holding its answer finds the place free), then its answer.
static void end_job(JobQueue *q, Job *job, const EngineResult *result, const ApiError *error) {
    pthread_mutex_lock(&q->lock);
    q->running--;
    pthread_mutex_unlock(&q->lock);
    finish(job, result, error);
    job_release(job);
}

// The slot's sequence leaves the batch — done, failed, or (prefilling) its client gone — and its job is answered.
static void leave(JobQueue *q, Slot *slot) {
    int n_out;
    Err err;
    ApiError e;
    const bool prefilling = batch_state(q->batch, slot->place) == BATCH_PREFILLING;
    bool failed = batch_leave(q->batch, slot->place, &n_out, &slot->result.stats, &err) != 0;
    if (failed) {
        engine_abort(slot->run);
        api_error(&e, 500, NULL, NULL, "generation failed: %s", err.msg);
    } else {
        conversation_commit(&slot->conv, slot->batch_job.out, n_out);
        failed = engine_end(slot->run, n_out, &e) != 0;
        slot->result.cancelled |= prefilling;
    }
    Job *job = slot->job;
    EngineResult result = slot->result;
    free_slot(slot, failed || prefilling);  // (a prefill left midway leaves a cache shorter than its ids)
    end_job(q, job, failed ? NULL : &result, failed ? &e : NULL);
}

// One step of the batch, then the sequences that ended (or whose client went away while prefilling) leave it;
// *leaving gets the seconds their answers took.
static void step(JobQueue *q, double *leaving) {
    Err err;
    if (q->before_step) q->before_step(q->before_step_ctx);
    batch_step(q->batch, &err);  // (a failed forward fails its sequences: they leave with err below)
    const double t0 = now_seconds();
    for (int i = 0; i < q->parallel; i++) {
        Slot *slot = &q->slots[i];
        if (!slot->job) continue;
        const BatchState state = batch_state(q->batch, slot->place);
        if (state >= BATCH_DONE || (state == BATCH_PREFILLING && job_cancelled(slot->job))) leave(q, slot);
    }
    *leaving = now_seconds() - t0;
}

// The worker: takes waiting jobs into free slots, steps the batch while anything runs; when stopping, ends once the
// running generations have.
static void *worker(void *arg) {
    JobQueue *q = arg;
    double admitting = 0, leaving = 0;  // the last turn's (under the lock from the next turn on: queue_times)
    for (;;) {
        pthread_mutex_lock(&q->lock);
        q->times.batch = batch_times(q->batch);
        q->times.admit_seconds += admitting;
        q->times.leave_seconds += leaving;
        admitting = leaving = 0;
        q->idle_since = now_seconds();
        while (!q->running && !q->head && !q->stopping) pthread_cond_wait(&q->nonempty, &q->lock);
        q->times.idle_seconds += now_seconds() - q->idle_since;
        q->idle_since = 0;
        if (q->stopping && !q->running) {
            pthread_mutex_unlock(&q->lock);
            break;
        }
        Job *job = NULL;
        if (q->head && q->running < q->parallel && !q->stopping) {
            job = q->head;
            q->head = job->next;
            if (!q->head) q->tail = NULL;
            q->waiting--;
            q->running++;
        }
        const bool more = job && q->head && q->running < q->parallel;  // (all that can join, before the step)
        pthread_mutex_unlock(&q->lock);
        ApiError e;
        const double t0 = now_seconds();
        if (job && admit(q, job, &e)) end_job(q, job, NULL, &e);
        admitting = now_seconds() - t0;
        if (!more) step(q, &leaving);
    }
    return NULL;
}

int queue_start(JobQueue *q, const Engine *engine, int parallel, int capacity, Err *err) {
    *q = (JobQueue){.capacity = capacity, .parallel = parallel, .engine = engine};
    pthread_mutex_init(&q->lock, NULL);
    pthread_cond_init(&q->nonempty, NULL);
    q->slots = calloc((size_t)parallel, sizeof *q->slots);
    if (!q->slots) return err_fmt(err, "out of memory for %d slots", parallel);
    if (!(q->batch = batch_open(engine->target, parallel, err))) return -1;
    for (; q->n_slots < parallel; q->n_slots++)
        if (conversation_init(&q->slots[q->n_slots].conv, engine->target, NULL, err)) return -1;
    if (thread_start(&q->worker, worker, q) != 0) return err_fmt(err, "cannot start the worker thread");
    q->started = true;
    return 0;
}

size_t queue_cache_bytes(const JobQueue *q) {
    return q->n_slots ? (size_t)q->n_slots * kv_bytes(&q->slots[0].conv.cache) : 0;
}

bool queue_submit(JobQueue *q, Job *job) {
    pthread_mutex_lock(&q->lock);
    const bool room = q->waiting < q->capacity + (q->parallel - q->running) && !q->stopping;  // + the free slots
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

void queue_state(JobQueue *q, int *waiting, int *running) {
    pthread_mutex_lock(&q->lock);
    *waiting = q->waiting;
    *running = q->running;
    pthread_mutex_unlock(&q->lock);
}

WorkerTimes queue_times(JobQueue *q) {
    pthread_mutex_lock(&q->lock);
    WorkerTimes times = q->times;
    if (q->idle_since > 0) times.idle_seconds += now_seconds() - q->idle_since;  // (waiting now)
    pthread_mutex_unlock(&q->lock);
    return times;
}

void queue_stop(JobQueue *q) {
    pthread_mutex_lock(&q->lock);
    q->stopping = true;
    pthread_cond_signal(&q->nonempty);
    pthread_mutex_unlock(&q->lock);
    if (q->started) pthread_join(q->worker, NULL);
    ApiError e;
    api_error(&e, 503, "server_stopping", NULL, "the server is stopping");
    for (Job *job = q->head, *next; job; job = next) {
        next = job->next;
        finish(job, NULL, &e);
        job_release(job);
    }
    batch_close(q->batch);
    for (int i = 0; i < q->n_slots; i++) conversation_free(&q->slots[i].conv);
    free(q->slots);
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->nonempty);
}
