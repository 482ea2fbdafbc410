// threads.h — a small persistent pool of worker threads.
//
// pool_run(pool, fn, ctx) calls fn(ctx, i, n) on every thread i of n (the caller is thread 0) and returns when
// all have finished. Callers split their work by thread index (pool_share); pool_run_chunks instead runs a job's
// chunks on whichever threads claim them. The split must not change results (kernels are batch-invariant, and
// splits fall on fixed block boundaries), so output never depends on the thread count.
#ifndef SPECDEC_THREADS_H
#define SPECDEC_THREADS_H

#include <pthread.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct ThreadPool ThreadPool;
typedef void PoolFn(void *ctx, int thread, int n_threads);

// The CPUs this process may run on: its affinity mask (sched_getaffinity), and no more than a cgroup v2 cpu.max
// quota of its cgroup or an ancestor's, rounded up.
int cpus_available(void);

// A hint to the CPU, inside a loop that polls memory another thread will write, that this thread is waiting.
static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

// pthread_create, with the signals a user sends the process (SIGINT, SIGTERM, SIGHUP, SIGQUIT) blocked in the new
// thread, so that the kernel delivers them to the main thread only. A signal taken by a worker would set the handler's
// flag without waking the main thread's wait for input (chat's ppoll, a server's poll): Ctrl-C would then be lost
// until the next key. Returns pthread_create's result.
int thread_start(pthread_t *thread, void *(*run)(void *), void *arg);

// n_threads ≥ 1 (the caller counts as one); 0 means cpus_available(). More threads than that is allowed: the
// pool is then oversubscribed, and its threads sleep between jobs instead of spinning (slower, never stuck).
ThreadPool *pool_create(int n_threads, Err *err);
void pool_free(ThreadPool *pool);
int pool_size(const ThreadPool *pool);
bool pool_oversubscribed(const ThreadPool *pool);
void pool_run(ThreadPool *pool, PoolFn *fn, void *ctx);

// The same on threads 0..n_threads−1 only (at most the pool's; 1: fn(ctx, 0, 1) on the caller, no hand-off):
// a small job pays for the hand-off and the wait of only the threads it uses.
void pool_run_on(ThreadPool *pool, int n_threads, PoolFn *fn, void *ctx);

// The [begin, end) share of thread `thread` among n_threads when n items are cut into blocks of `block`
// items (the last block may be short): boundaries always fall on multiples of `block`.
void pool_share(int n, int block, int thread, int n_threads, int *begin, int *end);

// Dynamic shares: a job of n_chunks chunks, fn(ctx, chunk, n_chunks, thread) once for each, on threads
// 0..n_threads−1 (at most the pool's; on 1 or for 1 chunk: every chunk in order on the caller, no hand-off). Each
// thread claims the next chunk that no thread has taken yet, runs it and claims again, until none is left, and
// the job is over when its chunks are: a thread that runs late (descheduled, or slower to get its memory) leaves
// the chunks it has not claimed to the others, where with fixed shares every thread would wait for it at the
// job's end — and one that has not come to the job by then takes no part in it. (A thread of the pool still
// claiming chunks of an earlier job may take one of this job's too, whatever its index: `thread` is any of the
// pool's.) Which thread runs a chunk varies from run to run (`thread` is given for per-thread scratch space); a job
// whose items are each computed alone (a matmul's output columns) gives the same results whatever thread computes
// them.
typedef void PoolChunkFn(void *ctx, int chunk, int n_chunks, int thread);
void pool_run_chunks(ThreadPool *pool, int n_threads, int n_chunks, PoolChunkFn *fn, void *ctx);

// The chunks of a job of n items cut into whole blocks of `block` items on n_threads: POOL_CHUNKS_PER_THREAD per
// thread, one on a single thread, no more than there are blocks. Chunk c of them is pool_share(n, block, c,
// chunks): contiguous, so that a thread still streams.
enum { POOL_CHUNKS_PER_THREAD = 4 };
int pool_chunk_count(int n, int block, int n_threads);

// What the calling thread spent at the end of the jobs it handed off (on 2 threads or more), counted while
// pool_tally(pool, &tally) is on: the jobs, and the seconds between finishing its own part and the last thread
// finishing theirs — the hand-off's wake-up for a small job, else the tail of the split (a chunked job's last
// chunks, a fixed share's slowest thread). pool_tally(pool, NULL) stops counting; the bench reads it.
typedef struct {
    long jobs;
    double waiting_seconds;
} PoolTally;
void pool_tally(ThreadPool *pool, PoolTally *tally);

#endif
