// test_threads.c — the worker pool (threads.h): pool_run_on runs a job on exactly the threads it names, each once
// and told their number, however the counts of consecutive jobs alternate (a worker left out of one job must not
// run it, nor miss the next one it is in); cpus_available follows the affinity mask; a pool with more threads
// than CPUs still runs its jobs, and the command line with one gives the same tokens in bounded time; a chunked
// job (pool_run_chunks) runs each of its chunks once, on the threads that are free; the tally counts the caller's
// waits at jobs' ends; a caller asleep at a job's end (its poll over) is woken by whoever ends it; workers never take
// the signals a user sends the process (thread_start).
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

// ---- dynamic shares (pool_run_chunks) --------------------------------------------------------------------------

enum { MAX_CHUNKS = 500, MAX_POOL = 1024 };

// A chunked job that records who ran what.
typedef struct {
    int late;                       // the thread that waits, in the first chunk it runs, for all the others; or −1
    atomic_int runs[MAX_CHUNKS];    // runs of each chunk
    atomic_int by[MAX_POOL];        // chunks each thread ran
    atomic_int wrong;               // calls told another chunk count or a chunk outside it, or on no thread of the pool
    atomic_int done;                // chunks finished
    int n_chunks, pool_size;
} ChunkJob;

static void chunk_run(void *ctx, int chunk, int n_chunks, int thread) {
    ChunkJob *job = ctx;
    if (n_chunks != job->n_chunks || chunk < 0 || chunk >= n_chunks || thread < 0 || thread >= job->pool_size) {
        atomic_fetch_add(&job->wrong, 1);
        return;
    }
    atomic_fetch_add(&job->runs[chunk], 1);
    if (atomic_fetch_add(&job->by[thread], 1) == 0 && thread == job->late)
        while (atomic_load(&job->done) < n_chunks - 1) sched_yield();
    atomic_fetch_add(&job->done, 1);
}

// One chunked job of n_chunks on n_threads of `pool`: every chunk run once, told the job's chunk count, on a thread
// of the pool; the late thread, if it came, ran one chunk only — the others took the rest without waiting for it.
static void check_chunk_job(ThreadPool *pool, int n_threads, int n_chunks, int late) {
    ChunkJob *job = calloc(1, sizeof *job);
    job->late = late;
    job->n_chunks = n_chunks;
    job->pool_size = pool_size(pool);
    pool_run_chunks(pool, n_threads, n_chunks, chunk_run, job);
    for (int c = 0; c < n_chunks; c++)
        CHECK(atomic_load(&job->runs[c]) == 1, "%d chunks on %d threads: chunk %d ran %d times", n_chunks,
              n_threads, c, atomic_load(&job->runs[c]));
    CHECK(atomic_load(&job->wrong) == 0, "%d chunks on %d threads: a call told another count or a chunk outside it, "
          "or on no thread of the pool", n_chunks, n_threads);
    if (late >= 0)
        CHECK(atomic_load(&job->by[late]) <= 1, "%d chunks on %d threads: the late thread %d ran %d chunks",
              n_chunks, n_threads, late, atomic_load(&job->by[late]));
    free(job);
}

// A pool with more threads than CPUs: its caller sleeps until the last thread to count its chunks done wakes it
// (take_chunks counts a thread's chunks at once, after its last).
TEST(threads_oversubscribed_pool_runs_chunked_jobs) {
    const int size = 4 * cpus_available() > POOL ? 4 * cpus_available() : POOL;
    Err err = {{0}};
    ThreadPool *pool = pool_create(size, &err);
    CHECK(pool != NULL && pool_oversubscribed(pool) && size <= MAX_POOL, "a pool of %d threads: %s", size, err.msg);
    if (!pool || size > MAX_POOL) return;
    for (int j = 0; j < 300 && !test_failures(); j++) check_chunk_job(pool, size, test_rand_int(0, MAX_CHUNKS), -1);
    pool_free(pool);
}

// Chunked jobs between jobs of every thread (pool_run_on), their thread and chunk counts scrambled: a worker late
// from one job must neither run a chunk twice nor lose one of the next.
TEST(threads_chunks_run_each_chunk_once) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    for (int j = 0; j < JOBS && !test_failures(); j++) {
        const int n = 1 + (j * 7 / 3 + j / 5) % POOL;
        check_chunk_job(pool, n, j % 3 == 0 ? test_rand_int(0, MAX_CHUNKS) : test_rand_int(0, 4 * POOL), -1);
        if (j % 2) {
            CountJob count = {.n_threads = n};
            pool_run_on(pool, n, count_thread, &count);
            for (int t = 0; t < POOL; t++)
                CHECK(atomic_load(&count.calls[t]) == (t < n), "job %d on %d threads after a chunked one: thread %d "
                      "called %d times", j, n, t, atomic_load(&count.calls[t]));
        }
    }
    pool_free(pool);
}

// A thread that falls behind in its first chunk (each thread in turn, the caller too) leaves all the others to
// the rest of the pool, which does not wait for it.
TEST(threads_chunks_go_to_the_threads_that_are_free) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    for (int round = 0; round < 20 && !test_failures(); round++)
        for (int late = 0; late < POOL; late++) check_chunk_job(pool, POOL, 4 * POOL, late);
    pool_free(pool);
}

static void sleep_seconds(double seconds) {
    const struct timespec span = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
    nanosleep(&span, NULL);
}

// A job whose worker threads sleep for a while after the caller has done its part.
static void workers_late(void *ctx, int thread, int n_threads) {
    (void)n_threads;
    if (thread > 0) sleep_seconds(*(const double *)ctx);
}

static void chunk_late(void *ctx, int chunk, int n_chunks, int thread) {
    (void)n_chunks, (void)thread;
    if (chunk == 1) sleep_seconds(*(const double *)ctx);
}

// The tally counts the jobs handed off — not those the caller runs alone — and the caller's wait for the late
// threads (at least what they slept, for the job that kept them busy longest), and nothing once turned off.
TEST(threads_tally_counts_the_callers_waits) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    const double late = 0.01, none = 0;
    PoolTally tally = {0};
    pool_tally(pool, &tally);
    pool_run_on(pool, POOL, workers_late, (void *)&late);
    pool_run_on(pool, 2, workers_late, (void *)&none);
    pool_run_on(pool, 1, workers_late, (void *)&late);  // the caller alone: no hand-off, no wait
    pool_run_chunks(pool, POOL, 2, chunk_late, (void *)&none);
    pool_run_chunks(pool, 1, 4, chunk_late, (void *)&late);
    CHECK(tally.jobs == 3, "3 jobs handed off, %ld counted", tally.jobs);
    CHECK(tally.waiting_seconds >= 0.9 * late && tally.waiting_seconds < 1.0,
          "workers %g s late: the caller waited %g s", late, tally.waiting_seconds);
    pool_tally(pool, NULL);
    const PoolTally before = tally;
    pool_run_on(pool, POOL, workers_late, (void *)&late);
    CHECK(tally.jobs == before.jobs && tally.waiting_seconds == before.waiting_seconds, "counted after it was off");
    pool_free(pool);
}

// A job some of whose threads sleep 30 ms, and count their calls.
typedef struct {
    atomic_int calls;
} LongShare;

static void long_share(void *ctx, int thread, int n_threads) {
    (void)n_threads;
    if (thread > 0) sleep_seconds(0.03);
    atomic_fetch_add(&((LongShare *)ctx)->calls, 1);
}

static void long_chunk(void *ctx, int chunk, int n_chunks, int thread) {
    (void)n_chunks, (void)thread;
    if (chunk == 1) sleep_seconds(0.03);
    atomic_fetch_add(&((LongShare *)ctx)->calls, 1);
}

// A worker's share that outlasts the caller's longest poll (10 ms, threads.c): the caller sleeps on `done`, and
// whoever ends the job wakes it — a job on named threads and a chunked one, a few times over (a lost wake-up would
// hang here) — and it returns with every call made.
TEST(threads_caller_asleep_wakes_at_the_jobs_end) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    for (int round = 0; round < 3; round++) {
        LongShare on = {0}, chunks = {0};
        pool_run_on(pool, POOL, long_share, &on);
        CHECK(atomic_load(&on.calls) == POOL, "round %d: %d calls of %d", round, atomic_load(&on.calls), POOL);
        pool_run_chunks(pool, POOL, 2, long_chunk, &chunks);
        CHECK(atomic_load(&chunks.calls) == 2, "round %d: %d chunks of 2", round, atomic_load(&chunks.calls));
    }
    pool_free(pool);
}

// The chunk count: POOL_CHUNKS_PER_THREAD per thread, one on a single thread, never more than the blocks.
TEST(threads_chunk_count) {
    CHECK(pool_chunk_count(1000, 16, 1) == 1, "one thread: %d chunks", pool_chunk_count(1000, 16, 1));
    CHECK(pool_chunk_count(1000, 16, 3) == 3 * POOL_CHUNKS_PER_THREAD, "3 threads: %d chunks",
          pool_chunk_count(1000, 16, 3));
    CHECK(pool_chunk_count(33, 16, 8) == 3, "3 blocks on 8 threads: %d chunks", pool_chunk_count(33, 16, 8));
    CHECK(pool_chunk_count(0, 16, 8) == 0, "no items: %d chunks", pool_chunk_count(0, 16, 8));
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

// Each worker's mask blocks SIGINT, SIGTERM, SIGHUP and SIGQUIT (the caller's is left as it was), so that Ctrl-C
// always interrupts the main thread's wait for input.
typedef struct {
    atomic_int unblocked;  // workers with one of the signals not blocked
} MaskJob;

static void check_mask(void *ctx, int thread, int n_threads) {
    (void)n_threads;
    MaskJob *job = ctx;
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    const int users[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    for (size_t i = 0; thread > 0 && i < sizeof users / sizeof *users; i++)
        if (!sigismember(&mask, users[i])) atomic_fetch_add(&job->unblocked, 1);
}

TEST(threads_workers_leave_users_signals_to_the_main_thread) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(POOL, &err);
    CHECK(pool != NULL, "%s", err.msg);
    if (!pool) return;
    MaskJob job = {0};
    pool_run(pool, check_mask, &job);
    CHECK(atomic_load(&job.unblocked) == 0, "%d signals not blocked in the workers", atomic_load(&job.unblocked));
    sigset_t mine;
    pthread_sigmask(SIG_BLOCK, NULL, &mine);
    CHECK(!sigismember(&mine, SIGINT), "the caller's SIGINT was left blocked");
    pool_free(pool);
}
