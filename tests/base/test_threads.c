// test_threads.c — the worker pool (threads.h): pool_run_on runs a job on exactly the threads it names, each once
// and told their number, however the counts of consecutive jobs alternate (a worker left out of one job must not
// run it, nor miss the next one it is in).
#include <stdatomic.h>
#include <string.h>

#include "base/threads.h"
#include "harness.h"

enum { POOL = 3, JOBS = 3000 };

typedef struct {
    atomic_int calls[POOL];     // calls of this job per thread
    atomic_int wrong_count;     // calls told another n_threads than the job's
    int n_threads;              // the job's
} CountJob;

static void count_thread(void *ctx, int thread, int n_threads) {
    CountJob *job = ctx;
    atomic_fetch_add(&job->calls[thread], 1);
    if (n_threads != job->n_threads) atomic_fetch_add(&job->wrong_count, 1);
}

TEST(threads_pool_run_on_runs_exactly_the_threads_named) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    for (int j = 0; j < JOBS && !test_failures(); j++) {
        // 1, 3, 2, 2, 1, 1, ...: a scrambled order, so that each count follows each other and itself
        const int n = 1 + (j * 7 / 3 + j / 5) % POOL;
        CountJob job = {.n_threads = n};
        pool_run_on(pool, n, count_thread, &job);
        for (int t = 0; t < POOL; t++)
            CHECK(atomic_load(&job.calls[t]) == (t < n), "job %d on %d threads: thread %d called %d times", j, n, t,
                  atomic_load(&job.calls[t]));
        CHECK(atomic_load(&job.wrong_count) == 0, "job %d: a thread was told another count than %d", j, n);
    }
    CountJob job = {.n_threads = POOL};  // more threads than the pool's: all of them
    pool_run_on(pool, 99, count_thread, &job);
    for (int t = 0; t < POOL; t++) CHECK(atomic_load(&job.calls[t]) == 1, "99 threads asked: thread %d", t);
    pool_free(pool);
}
