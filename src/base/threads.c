// threads.c — a persistent worker pool. Workers poll a job counter for a while (a forward pass hands out dozens
// of short jobs per token, too short for a sleep/wake round trip, which costs tens of microseconds in a virtual
// machine), then sleep on a condition variable; the caller polls its workers' count of finished work, then sleeps
// likewise. How long they poll is the process's poll budget (base/poll_budget.h), which the drafting thread's
// hand-off follows too: it shrinks where pollers are switched out (a machine busier than it has CPUs, where a polling
// thread burns its time slice while the thread it waits for waits to run) and grows back where polls see their job.
// A pool with more threads than the CPUs it may run on (cpus_available) polls one batch before sleeping, its caller
// too: a spinning thread would hold a CPU that a thread with work is waiting for.
// A job of pool_run_on ends when each of its threads has run it; a chunked job (pool_run_chunks) when its chunks
// are done, which the threads claim one at a time from one counter: it waits for no thread that is not working
// on it.
#include "base/threads.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/poll_budget.h"

#define COUNT_BITS 20        // of the job word (below): a pool has fewer than 2²⁰ threads
#define CHUNKED (1ull << COUNT_BITS)  // the job word's flag of a chunked job (pool_run_chunks)
#define NUMBER_SHIFT (COUNT_BITS + 1)
#define WORKER_POLL_SECONDS 200e-6  // a worker's longest poll for its next job: longer than the gaps between the
                                    // jobs of one token, including sampling
#define CALLER_POLL_SECONDS 10e-3   // the caller's longest poll for its job to end: longer than a worker's share of
                                    // any job (beyond it, a wake-up's tens of microseconds are under 1% of the job)

struct ThreadPool {
    // What the job is: written by the caller, read by the workers, which poll `job` and `stopping` between jobs
    // on this cache line. Nothing a worker writes is on it: a write there would take the line from every thread
    // polling it.
    int n_threads;              // including the caller, thread 0
    bool oversubscribed;        // more threads than CPUs available: poll one POLL_BATCH, then sleep
    pthread_t *workers;         // [n_threads − 1]
    PoolFn *fn;                 // the current job: pool_run_on's
    PoolChunkFn *chunk_fn;      // or pool_run_chunks'
    void *ctx;
    atomic_ullong job;          // (job number << NUMBER_SHIFT) | CHUNKED? | threads it runs on: one load tells a
                                // worker all three
    atomic_bool stopping;
    atomic_bool caller_asleep;  // the caller sleeps on `done` (its poll over): whoever ends the job signals it
    PoolTally *tally;           // the caller's waits, counted while pool_tally is on
    // What the workers write as they work, each on a cache line of its own: the workers still running the current
    // job (pool_run_on); a chunked job's claims, (n_chunks << 32) | the next chunk to hand out; its chunks finished.
    _Alignas(64) atomic_int busy;
    _Alignas(64) atomic_ullong claims;
    _Alignas(64) atomic_int chunks_done;
    _Alignas(64) pthread_mutex_t lock;  // guards sleeping on `wake` and `done`
    pthread_cond_t wake;        // a new job (or stopping), for the workers
    pthread_cond_t done;        // the job is over, for the caller asleep
};
_Static_assert(offsetof(struct ThreadPool, busy) == 64, "what the idle workers poll fits one cache line");

typedef struct {
    ThreadPool *pool;
    int index;
} WorkerArg;

// How long a poll lasts at most: the waiter's own ceiling, or one batch of polls in an oversubscribed pool.
static double longest_poll(const ThreadPool *pool, double seconds) { return pool->oversubscribed ? 0 : seconds; }

// Whether the job word, loaded into *job, has moved past `seen`, or the pool stops.
static bool moved_on(ThreadPool *pool, unsigned long long seen, unsigned long long *job) {
    *job = atomic_load(&pool->job);
    return *job != seen || atomic_load(&pool->stopping);
}

// Waits until the job word moves past `seen` (or the pool stops): polling (the poll budget), then asleep on `wake`;
// returns the new word. A first look that sees the next job (a worker late from the last) is no poll: it tells
// nothing of the machine.
static unsigned long long wait_for_job(ThreadPool *pool, unsigned long long seen) {
    unsigned long long job;
    if (moved_on(pool, seen, &job)) return job;
    Poll poll;
    poll_begin(&poll, longest_poll(pool, WORKER_POLL_SECONDS));
    while (poll_on(&poll))
        if (moved_on(pool, seen, &job)) {
            poll_saw(&poll);
            return job;
        }
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->job) == seen && !atomic_load(&pool->stopping))
        pthread_cond_wait(&pool->wake, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    return atomic_load(&pool->job);
}

// Signals the caller, asleep on `done`, that the job is over. The caller sets caller_asleep before its last look at
// the count, and whoever ends the job reads it after its count: with both sequentially consistent, one of the two
// sees the other's write — no lost wake-up.
static void signal_done(ThreadPool *pool) {
    if (!atomic_load(&pool->caller_asleep)) return;
    pthread_mutex_lock(&pool->lock);
    pthread_cond_signal(&pool->done);
    pthread_mutex_unlock(&pool->lock);
}

// Claims chunks of the current chunked job and runs them, on thread `thread`, until none is left; then counts them
// done, all at once. A chunk's claim names its job (the claims word is the current job's): a thread late from an
// earlier job claims, if anything, a chunk of the current one, whose fn and ctx stay put until that chunk is done.
// The chunks a thread runs in one call are of one job: that job cannot end, and the claims word cannot become the
// next job's, before this thread counts them. One count a thread, not one a chunk: fewer writes to the cache line
// every thread of the job writes (on 16 threads a matmul has up to 64 chunks).
static void take_chunks(ThreadPool *pool, int thread) {
    int ran = 0, n_chunks = 0;
    for (;;) {
        const unsigned long long claim = atomic_fetch_add(&pool->claims, 1);
        const int chunk = (int)(claim & 0xffffffffu);
        n_chunks = (int)(claim >> 32);
        if (chunk >= n_chunks) break;
        pool->chunk_fn(pool->ctx, chunk, n_chunks, thread);
        ran++;
        if (chunk == n_chunks - 1) break;  // the last chunk to hand out: no claim after it can succeed
    }
    if (ran > 0 && atomic_fetch_add(&pool->chunks_done, ran) + ran == n_chunks) signal_done(pool);
}

static void *worker_main(void *p) {
    WorkerArg *arg = p;
    ThreadPool *pool = arg->pool;
    int index = arg->index;
    free(arg);
    unsigned long long seen = 0;
    for (;;) {
        seen = wait_for_job(pool, seen);
        if (atomic_load(&pool->stopping)) return NULL;
        // A job on fewer threads than the pool's leaves this worker out: it neither runs it nor counts in
        // `busy`, so the caller may publish the next job while this worker is still looking at this one's word
        // (it reads fn and ctx only for jobs it is counted in). A chunked job counts no one: it is over when its
        // chunks are, whichever threads came to take them.
        int n_threads = (int)(seen & (CHUNKED - 1));
        if (index >= n_threads) continue;
        if (seen & CHUNKED) {
            take_chunks(pool, index);
            continue;
        }
        pool->fn(pool->ctx, index, n_threads);
        if (atomic_fetch_sub(&pool->busy, 1) == 1) signal_done(pool);
    }
}

int thread_start(pthread_t *thread, void *(*run)(void *), void *arg) {
    sigset_t users, before;
    sigemptyset(&users);
    sigaddset(&users, SIGINT);
    sigaddset(&users, SIGTERM);
    sigaddset(&users, SIGHUP);
    sigaddset(&users, SIGQUIT);
    pthread_sigmask(SIG_BLOCK, &users, &before);  // (a new thread starts with its creator's mask)
    const int rc = pthread_create(thread, NULL, run, arg);
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    return rc;
}

ThreadPool *pool_create(int n_threads, Err *err) {
    const int cpus = cpus_available();
    if (n_threads <= 0) n_threads = cpus;
    if (n_threads >= 1 << COUNT_BITS) {
        err_fmt(err, "a pool of %d threads: at most %d", n_threads, (1 << COUNT_BITS) - 1);
        return NULL;
    }
    ThreadPool *pool = aligned_alloc(_Alignof(ThreadPool), sizeof *pool);  // (its counters' cache lines: 64 bytes)
    if (pool) *pool = (ThreadPool){0};
    if (!pool || !(pool->workers = calloc((size_t)n_threads, sizeof(pthread_t)))) {
        free(pool);
        err_fmt(err, "out of memory creating a pool of %d threads", n_threads);
        return NULL;
    }
    pool->n_threads = 1;
    pool->oversubscribed = n_threads > cpus;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done, NULL);
    for (int i = 1; i < n_threads; i++) {
        WorkerArg *arg = malloc(sizeof *arg);
        if (!arg) break;
        *arg = (WorkerArg){pool, i};
        if (thread_start(&pool->workers[i - 1], worker_main, arg) != 0) {
            free(arg);
            break;
        }
        pool->n_threads++;
    }
    if (pool->n_threads != n_threads) {
        err_fmt(err, "could start only %d of %d threads", pool->n_threads, n_threads);
        pool_free(pool);
        return NULL;
    }
    return pool;
}

void pool_free(ThreadPool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->stopping, true);
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->workers[i], NULL);
    pthread_mutex_destroy(&pool->lock);
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done);
    free(pool->workers);
    free(pool);
}

int pool_size(const ThreadPool *pool) { return pool->n_threads; }

bool pool_oversubscribed(const ThreadPool *pool) { return pool->oversubscribed; }

void pool_tally(ThreadPool *pool, PoolTally *tally) { pool->tally = tally; }

// The CPU quota of cgroup v2 folder `dir` (under /sys/fs/cgroup) and its ancestors, rounded up: the smallest
// "QUOTA PERIOD" of their cpu.max files; INT_MAX when none sets one ("max").
static int cgroup_cpu_quota(char *dir) {
    int quota = INT_MAX;
    for (;;) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpu.max", dir);
        FILE *f = fopen(path, "r");
        long long q, period;
        if (f && fscanf(f, "%lld %lld", &q, &period) == 2 && q > 0 && period > 0 && (q + period - 1) / period < quota)
            quota = (int)((q + period - 1) / period);
        if (f) fclose(f);
        char *slash = strrchr(dir, '/');
        if (!slash) return quota;
        *slash = '\0';
    }
}

int cpus_available(void) {
    cpu_set_t set;
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    FILE *f = fopen("/proc/self/cgroup", "r");  // cgroup v2's line: "0::/path"
    char line[PATH_MAX];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            int quota = cgroup_cpu_quota(line + 3);
            if (quota < cpus) cpus = quota;
        }
    if (f) fclose(f);
    return cpus;
}

void pool_run(ThreadPool *pool, PoolFn *fn, void *ctx) { pool_run_on(pool, pool->n_threads, fn, ctx); }

// Publishes the job word of a job on n_threads (flags: CHUNKED or 0) and wakes the sleeping workers.
static void publish(ThreadPool *pool, int n_threads, unsigned long long flags) {
    unsigned long long number = (atomic_load(&pool->job) >> NUMBER_SHIFT) + 1;  // wraps after 2⁴³ jobs
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->job, number << NUMBER_SHIFT | flags | (unsigned)n_threads);  // publishes fn and ctx
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

// Waits until *counter reaches `target`: polling (the poll budget), then asleep on `done`; counted in the tally if
// on. A first look that sees the job over is no poll: it tells nothing of the machine.
static void wait_for(ThreadPool *pool, atomic_int *counter, int target) {
    const double start = pool->tally ? now_seconds() : 0;
    if (atomic_load(counter) != target) {
        Poll poll;
        poll_begin(&poll, longest_poll(pool, CALLER_POLL_SECONDS));
        bool over = false;
        while (!over && poll_on(&poll)) over = atomic_load(counter) == target;
        if (over) {
            poll_saw(&poll);
        } else {
            pthread_mutex_lock(&pool->lock);
            atomic_store(&pool->caller_asleep, true);
            while (atomic_load(counter) != target) pthread_cond_wait(&pool->done, &pool->lock);
            atomic_store(&pool->caller_asleep, false);
            pthread_mutex_unlock(&pool->lock);
        }
    }
    if (pool->tally) pool->tally->jobs++, pool->tally->waiting_seconds += now_seconds() - start;
}

void pool_run_on(ThreadPool *pool, int n_threads, PoolFn *fn, void *ctx) {
    if (n_threads > pool->n_threads) n_threads = pool->n_threads;
    if (n_threads <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->busy, n_threads - 1);
    publish(pool, n_threads, 0);
    fn(ctx, 0, n_threads);
    wait_for(pool, &pool->busy, 0);
}

void pool_run_chunks(ThreadPool *pool, int n_threads, int n_chunks, PoolChunkFn *fn, void *ctx) {
    if (n_threads > pool->n_threads) n_threads = pool->n_threads;
    if (n_threads <= 1 || n_chunks <= 1) {
        for (int chunk = 0; chunk < n_chunks; chunk++) fn(ctx, chunk, n_chunks, 0);
        return;
    }
    pool->chunk_fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->chunks_done, 0);
    atomic_store(&pool->claims, (unsigned long long)n_chunks << 32);  // publishes chunk_fn and ctx to the claims
    publish(pool, n_threads, CHUNKED);
    take_chunks(pool, 0);
    wait_for(pool, &pool->chunks_done, n_chunks);
}

int pool_chunk_count(int n, int block, int n_threads) {
    const int n_blocks = (n + block - 1) / block, chunks = n_threads > 1 ? POOL_CHUNKS_PER_THREAD * n_threads : 1;
    return chunks < n_blocks ? chunks : n_blocks;
}

void pool_share(int n, int block, int thread, int n_threads, int *begin, int *end) {
    int n_blocks = (n + block - 1) / block;
    int b0 = (int)((long long)n_blocks * thread / n_threads);
    int b1 = (int)((long long)n_blocks * (thread + 1) / n_threads);
    *begin = b0 * block < n ? b0 * block : n;
    *end = b1 * block < n ? b1 * block : n;
}
