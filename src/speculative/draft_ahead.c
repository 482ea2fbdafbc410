// draft_ahead.c — the drafting thread of pipelined drafting (draft_ahead.h): one job at a time, handed over and
// waited for under one mutex, the thread asleep on a condition variable in between. A hand-off costs a wake-up
// (tens of microseconds), small beside the target's verification it overlaps; the caller waits only when the
// thread is still drafting once the accept step is done.
#include "speculative/draft_ahead.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct DraftAhead {
    Drafter *drafter;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed;     // a job posted or finished, or the thread told to stop
    bool posted, stopping;      // under lock: a job waits or runs; the thread is to end
    int *context;               // [max_committed + GAMMA_MAX]: the committed tokens, then the round's drafts
    int copied;                 // the committed tokens context holds already (they never change in a generation)
    int n, depth;               // the job: the text context[0..n), the chain's depth
    int rc;                     // its result: the drafts held, or −1 with err
    Err err;
};

static void *drafting_thread(void *arg) {
    DraftAhead *a = arg;
    pthread_mutex_lock(&a->lock);
    for (;;) {
        while (!a->posted && !a->stopping) pthread_cond_wait(&a->changed, &a->lock);
        if (!a->posted) break;
        pthread_mutex_unlock(&a->lock);
        const int rc = a->drafter->draft_ahead(a->drafter, a->context, a->n, a->depth, &a->err);
        pthread_mutex_lock(&a->lock);
        a->rc = rc;
        a->posted = false;
        pthread_cond_broadcast(&a->changed);
    }
    pthread_mutex_unlock(&a->lock);
    return NULL;
}

DraftAhead *draft_ahead_open(Drafter *drafter, int max_committed, Err *err) {
    DraftAhead *a = malloc(sizeof *a);
    if (a) *a = (DraftAhead){.drafter = drafter, .context = malloc(sizeof(int) * ((size_t)max_committed + GAMMA_MAX))};
    if (!a || !a->context) {
        if (a) free(a->context);
        free(a);
        err_fmt(err, "out of memory for the drafting thread's text");
        return NULL;
    }
    pthread_mutex_init(&a->lock, NULL);
    pthread_cond_init(&a->changed, NULL);
    if (pthread_create(&a->thread, NULL, drafting_thread, a) != 0) {
        pthread_mutex_destroy(&a->lock);
        pthread_cond_destroy(&a->changed);
        free(a->context);
        free(a);
        err_fmt(err, "could not start the drafting thread");
        return NULL;
    }
    return a;
}

void draft_ahead_start(DraftAhead *a, const int *committed, int n, const int *drafts, int gamma, int depth) {
    memcpy(a->context + a->copied, committed + a->copied, sizeof(int) * (n - a->copied));
    a->copied = n;
    memcpy(a->context + n, drafts, sizeof(int) * gamma);
    pthread_mutex_lock(&a->lock);
    a->n = n + gamma;
    a->depth = depth;
    a->posted = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
}

// Waits, holding the lock, until no job is posted.
static void wait_idle(DraftAhead *a) {
    while (a->posted) pthread_cond_wait(&a->changed, &a->lock);
}

int draft_ahead_wait(DraftAhead *a, int *held, Err *err) {
    pthread_mutex_lock(&a->lock);
    wait_idle(a);
    pthread_mutex_unlock(&a->lock);
    *held = a->rc > 0 ? a->rc : 0;
    if (a->rc < 0) *err = a->err;
    return a->rc < 0 ? -1 : 0;
}

void draft_ahead_close(DraftAhead *a) {
    if (!a) return;
    pthread_mutex_lock(&a->lock);
    wait_idle(a);
    a->stopping = true;
    pthread_cond_broadcast(&a->changed);
    pthread_mutex_unlock(&a->lock);
    pthread_join(a->thread, NULL);
    pthread_mutex_destroy(&a->lock);
    pthread_cond_destroy(&a->changed);
    free(a->context);
    free(a);
}
