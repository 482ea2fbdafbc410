// threads.c — a persistent worker pool. Workers spin on a job counter for a while (a forward pass hands out
// dozens of short jobs per token, too short for a sleep/wake round trip, which costs tens of microseconds in a
// virtual machine), then sleep on a condition variable.
#include "base/threads.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/clock.h"

#define COUNT_BITS 20        // of the job word (below): a pool has fewer than 2²⁰ threads
#define SPIN_SECONDS 200e-6  // polling before a worker goes to sleep: longer than the gaps between the jobs of
                             // one token, including sampling

struct ThreadPool {
    int n_threads;              // including the caller, thread 0
    pthread_t *workers;         // [n_threads − 1]
    PoolFn *fn;                 // the current job
    void *ctx;
    atomic_ullong job;          // (job number << COUNT_BITS) | threads it runs on: one load tells a worker both
    atomic_int busy;            // workers still running the current job
    atomic_bool stopping;
    pthread_mutex_t lock;       // guards sleeping on `wake`
    pthread_cond_t wake;
};

typedef struct {
    ThreadPool *pool;
    int index;
} WorkerArg;

static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

// Waits until the job word moves past `seen` (or the pool stops); returns the new word.
static unsigned long long wait_for_job(ThreadPool *pool, unsigned long long seen) {
    double give_up = now_seconds() + SPIN_SECONDS;
    for (unsigned i = 1;; i++) {
        unsigned long long job = atomic_load(&pool->job);
        if (job != seen || atomic_load(&pool->stopping)) return job;
        cpu_relax();
        if (i % 64 == 0 && now_seconds() > give_up) break;
    }
    pthread_mutex_lock(&pool->lock);
    while (atomic_load(&pool->job) == seen && !atomic_load(&pool->stopping))
        pthread_cond_wait(&pool->wake, &pool->lock);
    pthread_mutex_unlock(&pool->lock);
    return atomic_load(&pool->job);
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
        // (it reads fn and ctx only for jobs it is counted in).
        int n_threads = (int)(seen & ((1ull << COUNT_BITS) - 1));
        if (index >= n_threads) continue;
        pool->fn(pool->ctx, index, n_threads);
        atomic_fetch_sub(&pool->busy, 1);
    }
}

ThreadPool *pool_create(int n_threads, Err *err) {
    if (n_threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = cpus > 0 ? (int)cpus : 1;
    }
    if (n_threads >= 1 << COUNT_BITS) {
        err_fmt(err, "a pool of %d threads: at most %d", n_threads, (1 << COUNT_BITS) - 1);
        return NULL;
    }
    ThreadPool *pool = calloc(1, sizeof *pool);
    if (!pool || !(pool->workers = calloc((size_t)n_threads, sizeof(pthread_t)))) {
        free(pool);
        err_fmt(err, "out of memory creating a pool of %d threads", n_threads);
        return NULL;
    }
    pool->n_threads = 1;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    for (int i = 1; i < n_threads; i++) {
        WorkerArg *arg = malloc(sizeof *arg);
        if (!arg) break;
        *arg = (WorkerArg){pool, i};
        if (pthread_create(&pool->workers[i - 1], NULL, worker_main, arg) != 0) {
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
    free(pool->workers);
    free(pool);
}

int pool_size(const ThreadPool *pool) { return pool->n_threads; }

void pool_run(ThreadPool *pool, PoolFn *fn, void *ctx) { pool_run_on(pool, pool->n_threads, fn, ctx); }

void pool_run_on(ThreadPool *pool, int n_threads, PoolFn *fn, void *ctx) {
    if (n_threads > pool->n_threads) n_threads = pool->n_threads;
    if (n_threads <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->ctx = ctx;
    atomic_store(&pool->busy, n_threads - 1);
    unsigned long long number = (atomic_load(&pool->job) >> COUNT_BITS) + 1;  // wraps after 2⁴⁴ jobs
    pthread_mutex_lock(&pool->lock);
    atomic_store(&pool->job, number << COUNT_BITS | (unsigned)n_threads);  // publishes fn and ctx to the workers
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    fn(ctx, 0, n_threads);
    while (atomic_load(&pool->busy) > 0) cpu_relax();
}

void pool_share(int n, int block, int thread, int n_threads, int *begin, int *end) {
    int n_blocks = (n + block - 1) / block;
    int b0 = (int)((long long)n_blocks * thread / n_threads);
    int b1 = (int)((long long)n_blocks * (thread + 1) / n_threads);
    *begin = b0 * block < n ? b0 * block : n;
    *end = b1 * block < n ? b1 * block : n;
}
