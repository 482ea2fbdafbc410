// test_threads.c — the worker pool (threads.h): pool_run_on runs a job on exactly the threads it names, each once
// and told their number, however the counts of consecutive jobs alternate (a worker left out of one job must not
// run it, nor miss the next one it is in); cpus_available follows the affinity mask; a pool with more threads
// than CPUs still runs its jobs, and the command line with one gives the same tokens in bounded time.
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
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

// Runs JOBS jobs of scrambled thread counts on a pool of `size` ≥ POOL threads: each runs on exactly the threads
// it names.
static void check_pool_runs_jobs(int size) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(size, &err);
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
    pool_free(pool);
}

TEST(threads_pool_run_on_runs_exactly_the_threads_named) {
    check_pool_runs_jobs(POOL);
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    CountJob job = {.n_threads = POOL};  // more threads than the pool's: all of them
    pool_run_on(pool, 99, count_thread, &job);
    for (int t = 0; t < POOL; t++) CHECK(atomic_load(&job.calls[t]) == 1, "99 threads asked: thread %d", t);
    pool_free(pool);
}

TEST(threads_cpus_available_follows_the_affinity_mask) {
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity failed");
    CHECK(cpus_available() >= 1 && cpus_available() <= CPU_COUNT(&all), "%d CPUs available of an affinity of %d",
          cpus_available(), CPU_COUNT(&all));
    int first = 0;
    while (!CPU_ISSET(first, &all)) first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity failed");
    CHECK(cpus_available() == 1, "pinned to one CPU: %d available", cpus_available());
    Err err = {{0}};
    ThreadPool *pool = pool_create(0, &err);  // the default: one thread per CPU available
    CHECK(pool && pool_size(pool) == 1 && !pool_oversubscribed(pool), "default pool on one CPU: %d threads",
          pool ? pool_size(pool) : -1);
    pool_free(pool);
    sched_setaffinity(0, sizeof all, &all);
}

TEST(threads_oversubscribed_pool_runs_jobs) {
    // Threads beyond the CPUs sleep between jobs instead of spinning; the jobs still run as named.
    check_pool_runs_jobs(4 * cpus_available() > POOL ? 4 * cpus_available() : POOL);
}

// Seconds `specdec generate` of the shipped pair takes on `threads` threads; its ids in *ids (caller frees).
static double time_generation(int threads, char **ids) {
    char command[256], *err;
    snprintf(command, sizeof command, "%s generate -p 'def f' -n 4 --print-ids --threads %d", specdec_bin(), threads);
    double start = now_seconds();
    int status = run_command(command, ids, &err);
    double seconds = now_seconds() - start;
    CHECK(status == 0, "--threads %d: exit status %d: %s", threads, status, err);
    free(err);
    return seconds;
}

TEST(threads_more_than_the_cpus_finish_with_the_same_tokens) {
    // The bound is generous (the issue asks for one): a pool that spins on busy CPUs took minutes here.
    char *few_ids, *many_ids;
    const int many = 2 * cpus_available() > 64 ? 2 * cpus_available() : 64;
    double few = time_generation(cpus_available(), &few_ids), seconds = time_generation(many, &many_ids);
    CHECK(strcmp(few_ids, many_ids) == 0, "%d threads: \"%s\", %d: \"%s\"", cpus_available(), few_ids, many,
          many_ids);
    CHECK(seconds < 10 * few + 3, "%d threads took %.1f s, %d threads %.1f s", many, seconds, cpus_available(), few);
    free(few_ids);
    free(many_ids);
}
