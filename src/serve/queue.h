// queue.h — one worker thread runs up to `parallel` generations at once, in one batch (speculative/batch.h: each
// step, one target forward for all of them), taking requests (jobs) from a bounded queue in order of arrival into
// free slots; a request that finds the queue full is refused (the server answers 503). Each slot keeps the
// conversation (speculative/conversation.h: the target's KV cache and its ids) its last request left; a request
// takes the free slot that shares the longest prefix with its prompt, else the least recently used. Each response is
// what its request gives alone (batch.h says why).
//
// A job is shared by the connection that made it (which waits on it, and for a stream reads its events as they
// come) and by the worker; each holds a reference, and the last to let go frees it. The worker asks between
// rounds whether the client is still there — the connection's end (job_hang_up) or its socket closed (a client
// that only half-closed, shutdown(SHUT_WR) after its request, is still reading: queue.c, job_cancelled) — and ends
// the generation when not, so a client that goes away frees its slot at the next round, or while its prompt is
// prefilled, at the next step.
#ifndef SPECDEC_SERVE_QUEUE_H
#define SPECDEC_SERVE_QUEUE_H

#include <pthread.h>
#include <stdbool.h>

#include "serve/api.h"
#include "serve/engine.h"
#include "serve/request.h"

typedef struct Job {
    pthread_mutex_t lock;
    pthread_cond_t changed;     // signalled at every change below
    int refs;
    Request req;
    ApiResponse response;       // id, created, model of the response objects
    char id[40];
    int fd;                     // the client's socket (−1: none to watch)
    // Written by the worker under the lock:
    bool started;               // the prompt was read: the generation runs (a stream's headers may go)
    bool done;                  // finished (or failed: error set)
    bool failed;
    ApiError error;
    EngineResult result;
    bool probed;                // the worker's alone: it sent the half-closed client its probe (job_cancelled)
    bool streamed;              // a stream's first event with text is written (chat's first names the role)
    char *out;                  // stream: SSE events not yet read; else the text so far
    size_t out_len, out_cap, out_read;
    TokenReportList reports;    // not a stream: the tokens' logprobs so far, with the request's logprobs
    bool reports_lost;          // ... some were dropped (out of memory): the response is an error
    // Written by the connection:
    bool gone;                  // the connection ended: cancel
    struct Job *next;
} Job;

// A job for req (taken over: the job frees it) with one reference, the connection's.
Job *job_new(Request *req, const char *model, int fd);
// Drops a reference; the last frees the job.
void job_release(Job *job);
// The connection ended: the worker cancels the job at its next round, or skips it if not started.
void job_hang_up(Job *job);
// Waits until the job has started or is done.
void job_wait_started(Job *job);
// Waits until the job is done.
void job_wait_done(Job *job);

typedef struct Slot Slot;  // a generation's place in the batch, with the conversation it keeps (queue.c)

// Where the worker's time went since it started (wall-clock seconds): stepping the batch (batch_times' split; the
// rest of a step holds the text given out to the connections), taking requests into slots (admit: the prompt's
// ids, the drafter, the slot's conversation), answering those that ended (leave: the final event or response, the
// slot's conversation kept), and waiting while no request generates or waits (idle).
typedef struct {
    BatchTimes batch;
    double admit_seconds, leave_seconds, idle_seconds;
} WorkerTimes;

typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t nonempty;
    Job *head, *tail;
    int waiting, capacity;
    int running, parallel;      // jobs taken into slots (generating, or about to), of `parallel` slots
    bool started, stopping;
    pthread_t worker;
    const Engine *engine;
    // The worker's alone:
    Slot *slots;                // [parallel]
    int n_slots;                // of them, those whose caches are allocated
    Batch *batch;               // the slots' generations, stepping together
    unsigned long long tick;    // jobs taken so far
    WorkerTimes times;          // under the lock: as of the worker's last step
    double idle_since;          // under the lock: when the worker began to wait for a request (0: it is not waiting)
    // A test's hold on the worker (NULL in the server; set under the lock): called before each step, outside the
    // lock, it may block until an event the test waits for (tests/serve/test_parallel.c: a client gone while its
    // prompt is prefilled, the prefill held until it is gone).
    void (*before_step)(void *ctx);
    void *before_step_ctx;
} JobQueue;

// Starts the worker on engine with `parallel` slots, each with a KV cache of the target's context; at most capacity
// jobs wait beside those generating. −1 with err (then queue_stop frees what was made).
int queue_start(JobQueue *q, const Engine *engine, int parallel, int capacity, Err *err);
// The bytes of the slots' KV caches (allocated at start: the server's memory beside the models').
size_t queue_cache_bytes(const JobQueue *q);
// Queues job (taking a reference); false when the queue is full.
bool queue_submit(JobQueue *q, Job *job);
// The jobs waiting and those generating (for /health).
void queue_state(JobQueue *q, int *waiting, int *running);
// Where the worker's time went so far (as of its last step, or its last wait).
WorkerTimes queue_times(JobQueue *q);

// Stops taking jobs, and the worker once the generations running have ended; the jobs still waiting fail with 503.
void queue_stop(JobQueue *q);

#endif
