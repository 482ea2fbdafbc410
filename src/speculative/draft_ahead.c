// draft_ahead.c — the drafting thread (draft_ahead.h): one job at a time — drafting ahead, or the round's proposal —
// handed over and handed back through one job word. Posting and finishing change the word under a mutex and
// broadcast a condition variable, so that a thread asleep on it is never missed. With a CPU of its own the thread
// and its caller poll the word before they sleep: a hand-off then costs the time a cache line takes to move
// between cores, where a wake-up costs tens of microseconds in a virtual machine (docs/performance.md, "The draft
// on a core of its own"). Without one they sleep, as a spinning thread would hold a CPU that another needs.
//
// "A CPU of its own" is judged from the CPU count and the process's own threads, and the machine's other processes
// may take it back: on a machine busier than it has CPUs, a poller burns its time slice while the thread it waits
// for waits to run, and every hand-off then costs a scheduler period. So how long a waiter polls follows what
// polling gets (the process's poll budget, base/poll_budget.h, which the target's pool follows too): a poll during
// which the waiter lost its CPU to another thread ends there, and halves the next poll's budget; a poll that sees
// the hand-off doubles it, back up to POLL_SECONDS. And the caller does not wait for the thread to be given a CPU:
// a job the thread has not taken up by the time the caller waits for it (or within the poll budget, for a proposal,
// which the caller waits for at once) the caller takes back and runs itself (job_result). On a machine with a CPU free
// the thread takes up every job at once and the waiters keep polling; on a busy one they soon poll for a batch or two
// and sleep, and the jobs the thread is too late for run on the caller, in the order they would have run in.
#include "speculative/draft_ahead.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/poll_budget.h"
#include "base/threads.h"

// How long a thread with a CPU of its own polls at most before it sleeps: longer than the gaps between a round's jobs
// on any model of interest here (beyond it, a wake-up's tens of microseconds are under 1% of the round). The caller
// polls as long for a job to end.
#define POLL_SECONDS 10e-3

// The job word: no job (none posted, or the last one finished), a job posted and not taken yet, or a job taken —
// by the thread, which runs it; a job the caller takes back it runs itself and leaves the word JOB_NONE.
typedef enum { JOB_NONE, JOB_AHEAD, JOB_PROPOSE, JOB_STOP, JOB_RUNNING } JobKind;

static bool is_posted(JobKind job) { return job != JOB_NONE && job != JOB_RUNNING; }

// What a waiter waits for the job word to be.
typedef enum {
    FOR_POSTED,  // the thread: a job posted
    FOR_TAKEN,   // the caller, before it takes the job back: the thread has taken it, or finished it
    FOR_DONE,    // the caller: the job finished (JOB_NONE)
} Awaited;

static bool is_awaited(JobKind job, Awaited awaited) {
    return awaited == FOR_POSTED ? is_posted(job) : awaited == FOR_TAKEN ? !is_posted(job) : job == JOB_NONE;
}

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
    atomic_int job;             // the JobKind (posted, taken, finished: changed under lock, but for taking)
    int *context;               // [max_committed + GAMMA_MAX]: the committed tokens, then the round's drafts
    int copied;                 // the committed tokens context holds already (they never change in a generation)
    int n, depth;               // a JOB_AHEAD: the text context[0..n), the chain's depth
    Proposal proposal;          // a JOB_PROPOSE's arguments
    int rc;                     // the job's result: the drafts held, or −1 with err
    Err err;
};

// Polls the job word for at most the poll budget (poll_budget.h) until it is what the waiter awaits: true, with the
// word in *job, once it is; false once the poll is over (the budget spent, or this thread switched out).
static bool poll_job(DraftAhead *a, Awaited awaited, JobKind *job) {
    Poll poll;
    poll_begin(&poll, POLL_SECONDS);
    do {
        *job = atomic_load_explicit(&a->job, memory_order_acquire);
        if (is_awaited(*job, awaited)) {
            poll_saw(&poll);
            return true;
        }
    } while (poll_on(&poll));
    return false;
}

// Waits until the job word is a job posted (the thread) or JOB_NONE (the caller, for its job to finish), and returns
// it: polling first where the thread has a CPU of its own (poll_job), then asleep on `changed`. The acquire pairs
// with the release of the store that changed the word: what its writer wrote before is seen.
static JobKind await_job(DraftAhead *a, Awaited awaited) {
    JobKind job = atomic_load_explicit(&a->job, memory_order_acquire);
    if (is_awaited(job, awaited) || (a->own_cpu && poll_job(a, awaited, &job))) return job;
    pthread_mutex_lock(&a->lock);
    while (!is_awaited(job = atomic_load_explicit(&a->job, memory_order_acquire), awaited))
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

// Takes the job posted (`posted`, from the word), for the thread (JOB_RUNNING) or back for the caller (JOB_NONE):
// false where the other took it first. The acquire pairs with the post's release: its arguments are seen.
static bool take_job(DraftAhead *a, JobKind posted, JobKind taken) {
    return atomic_compare_exchange_strong_explicit(&a->job, &posted, taken, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void run_job(DraftAhead *a, JobKind job) {
    const Proposal *p = &a->proposal;
    a->rc = job == JOB_AHEAD ? a->drafter->draft_ahead(a->drafter, a->context, a->n, a->depth, &a->err)
                             : a->drafter->propose(a->drafter, p->context, p->n, p->request, p->tree, p->q,
                                                   p->report, &a->err);
}

// draft_ahead_hold_back's: drafting threads take up no job.
static atomic_bool held_back;

void draft_ahead_hold_back(bool held) { atomic_store(&held_back, held); }

// A thread held back leaves the posted `job` to the caller: it sleeps while the word is still `job`. The caller's
// taking back (a compare-and-swap) wakes no one; the next job posted, or the stop, does (set_job).
static void sleep_while_posted(DraftAhead *a, JobKind job) {
    pthread_mutex_lock(&a->lock);
    while ((JobKind)atomic_load_explicit(&a->job, memory_order_acquire) == job)
        pthread_cond_wait(&a->changed, &a->lock);
    pthread_mutex_unlock(&a->lock);
}

static void *drafting_thread(void *arg) {
    DraftAhead *a = arg;
    for (;;) {
        const JobKind job = await_job(a, FOR_POSTED);
        if (job == JOB_STOP) return NULL;
        if (atomic_load(&held_back)) {
            sleep_while_posted(a, job);
        } else if (take_job(a, job, JOB_RUNNING)) {  // (false: the caller took it back)
            run_job(a, job);
            set_job(a, JOB_NONE);
        }
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

// The result of the job posted last: 0, or −1 with err set. Where the thread has not taken the job up — at once
// without a CPU of its own, else within the poll budget (poll_job) — the caller takes it back and runs it itself
// rather than wait for the thread to be given a CPU: on a busy machine every hand-off left to the kernel's scheduler
// costs a wait for another thread's time slice to end. Else it waits for the thread to finish the job.
static int job_result(DraftAhead *a, Err *err) {
    JobKind job = atomic_load_explicit(&a->job, memory_order_acquire);
    if (is_posted(job) && a->own_cpu) poll_job(a, FOR_TAKEN, &job);
    if (is_posted(job) && take_job(a, job, JOB_NONE)) run_job(a, job);
    else await_job(a, FOR_DONE);
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
    await_job(a, FOR_DONE);
    set_job(a, JOB_STOP);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->changed);
    free(a->context);
    free(a);
}
