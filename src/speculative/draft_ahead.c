// draft_ahead.c — the drafting thread (draft_ahead.h): one job at a time — drafting ahead, or the round's proposal —
// handed over and handed back through one job word. Posting and finishing change the word under a mutex and
// broadcast a condition variable, so that a thread asleep on it is never missed. With a CPU of its own the thread
// and its caller poll the word instead of sleeping: a hand-off then costs the time a cache line takes to move
// between cores, where a wake-up costs tens of microseconds in a virtual machine (docs/performance.md, "The draft
// on a core of its own"). Without one they sleep, as a spinning thread would hold a CPU that another needs.
#include "speculative/draft_ahead.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/threads.h"

// How long a thread with a CPU of its own polls before it sleeps: longer than the gaps between a round's jobs on any
// model of interest here (beyond it, a wake-up's tens of microseconds are under 1% of the round). The caller polls
// as long for a job to end.
#define POLL_SECONDS 10e-3
// Polls between looks at the clock, each look with a sched_yield: the kernel may have put the two threads on one
// CPU for a while (a thread just started, or another process's), and a poller that never yields would hold it
// until its time slice ends, while the thread it waits for waits to run.
#define POLL_BATCH 64

typedef enum { JOB_NONE, JOB_AHEAD, JOB_PROPOSE, JOB_STOP } JobKind;

// The arguments of a proposal run on the drafting thread (Drafter.propose's).
typedef struct {
    const int *context;
    int n;
    const DraftRequest *request;
    DraftTree *tree;
    double *q;
    DraftReport *report;
} Proposal;

struct DraftAhead {
    Drafter *drafter;
    bool own_cpu;               // poll between jobs instead of sleeping, and take the rounds' proposals
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;     // the job word changed
    atomic_int job;             // the JobKind posted and not finished yet, JOB_NONE once it is (changed under lock)
    int *context;               // [max_committed + GAMMA_MAX]: the committed tokens, then the round's drafts
    int copied;                 // the committed tokens context holds already (they never change in a generation)
    int n, depth;               // a JOB_AHEAD: the text context[0..n), the chain's depth
    Proposal proposal;          // a JOB_PROPOSE's arguments
    int rc;                     // the job's result: the drafts held, or −1 with err
    Err err;
};

// Waits until the job word is JOB_NONE (want_job false: the caller, for a job to end) or not (the thread, for a job
// to come), and returns it: polling first where the thread has a CPU of its own, then asleep on `changed`. The
// acquire pairs with the release of the store that changed the word: what its writer wrote before is seen.
static JobKind await_job(DraftAhead *a, bool want_job) {
    if (a->own_cpu) {
        const double give_up = now_seconds() + POLL_SECONDS;
        for (unsigned i = 1;; i++) {
            const JobKind job = atomic_load_explicit(&a->job, memory_order_acquire);
            if ((job != JOB_NONE) == want_job) return job;
            cpu_relax();
            if (i % POLL_BATCH != 0) continue;
            if (now_seconds() > give_up) break;
            sched_yield();
        }
    }
    pthread_mutex_lock(&a->lock);
    JobKind job;
    while (((job = atomic_load_explicit(&a->job, memory_order_acquire)) != JOB_NONE) != want_job)
        pthread_cond_wait(&a->changed, &a->lock);
    pthread_mutex_unlock(&a->lock);
    return job;
}

static void set_job(DraftAhead *a, JobKind job) {
    pthread_mutex_lock(&a->lock);
    atomic_store_explicit(&a->job, job, memory_order_release);
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
}

static void *drafting_thread(void *arg) {
    DraftAhead *a = arg;
    for (;;) {
        const JobKind job = await_job(a, true);
        if (job == JOB_STOP) return NULL;
        const Proposal *p = &a->proposal;
        a->rc = job == JOB_AHEAD ? a->drafter->draft_ahead(a->drafter, a->context, a->n, a->depth, &a->err)
                                 : a->drafter->propose(a->drafter, p->context, p->n, p->request, p->tree, p->q,
                                                       p->report, &a->err);
        set_job(a, JOB_NONE);
    }
}

DraftAhead *draft_ahead_open(Drafter *drafter, int max_committed, bool own_cpu, Err *err) {
    DraftAhead *a = malloc(sizeof *a);
    if (a) *a = (DraftAhead){.drafter = drafter, .own_cpu = own_cpu,
                             .context = malloc(sizeof(int) * ((size_t)max_committed + GAMMA_MAX))};
    if (!a || !a->context) {
        if (a) free(a->context);
        free(a);
        err_fmt(err, "out of memory for the drafting thread's text");
        return NULL;
    }
    atomic_init(&a->job, JOB_NONE);
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, NULL);
    if (thread_start(&a->thread, drafting_thread, a) != 0) {
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->changed);
        free(a->context);
        free(a);
        err_fmt(err, "could not start the drafting thread");
        return NULL;
    }
    return a;
}

bool draft_ahead_takes_proposals(const DraftAhead *a) { return a && a->own_cpu; }

void draft_ahead_start(DraftAhead *a, const int *committed, int n, const int *drafts, int gamma, int depth) {
    memcpy(a->context + a->copied, committed + a->copied, sizeof(int) * (n - a->copied));
    a->copied = n;
    memcpy(a->context + n, drafts, sizeof(int) * gamma);
    a->n = n + gamma;
    a->depth = depth;
    set_job(a, JOB_AHEAD);
}

// Waits for the job posted last to end; its result: 0, or −1 with err set.
static int job_result(DraftAhead *a, Err *err) {
    await_job(a, false);
    if (a->rc < 0) *err = a->err;
    return a->rc < 0 ? -1 : 0;
}

int draft_ahead_wait(DraftAhead *a, int *held, Err *err) {
    const int rc = job_result(a, err);
    *held = a->rc > 0 ? a->rc : 0;
    return rc;
}

int draft_ahead_propose(DraftAhead *a, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                        double *q, DraftReport *report, Err *err) {
    a->proposal = (Proposal){context, n, request, tree, q, report};
    set_job(a, JOB_PROPOSE);
    return job_result(a, err);
}

void draft_ahead_close(DraftAhead *a) {
    if (!a) return;
    await_job(a, false);
    set_job(a, JOB_STOP);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->changed);
    free(a->context);
    free(a);
}
