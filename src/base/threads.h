// threads.h — a small persistent pool of worker threads.
//
// pool_run(pool, fn, ctx) calls fn(ctx, i, n) on every thread i of n (the caller is thread 0) and returns when
// all have finished. Callers split their work by thread index, in fixed shares (pool_share) or in chunks that the
// threads claim as they go (pool_next_chunk); the split must not change results (kernels are batch-invariant,
// and splits fall on fixed block boundaries), so output never depends on the thread count.
#ifndef SPECDEC_THREADS_H
#define SPECDEC_THREADS_H

#include <stdatomic.h>
#include <stdbool.h>

#include "base/error.h"

typedef struct ThreadPool ThreadPool;
typedef void PoolFn(void *ctx, int thread, int n_threads);

// The CPUs this process may run on: its affinity mask (sched_getaffinity), and no more than a cgroup v2 cpu.max
// quota of its cgroup or an ancestor's, rounded up.
int cpus_available(void);

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

// Dynamic shares. A job's n items cut into chunks — POOL_CHUNKS_PER_THREAD per thread of the job (one on a single
// thread; no more than there are blocks), each a contiguous run of whole blocks of `block` items, cut as
// pool_share cuts them — that its threads take in turn: thread i computes chunk i first, then claims the next
// chunk that no thread has taken yet, until none is left. A thread that runs late (descheduled, or slower to get
// its memory) leaves its later chunks to the others, where with a fixed share every thread would wait for it at
// the job's end. Which thread computes a chunk varies from run to run; a job whose items are each computed alone
// (a matmul's output rows) gives the same results whatever thread computes them.
enum { POOL_CHUNKS_PER_THREAD = 4 };

// A job's claims: zero before the job (a designated initialiser does it), on a cache line of its own so that
// claiming leaves the job's other fields in every thread's cache.
typedef struct {
    _Alignas(64) atomic_int claimed;  // chunks claimed after the threads' first ones
} PoolChunks;

// The next chunk for thread `thread` of a job on n_threads: *chunk < 0 before its first call, then the chunk it
// last computed; its items [*begin, *end). False when no chunk is left.
//     for (int c = -1, j0, j1; pool_next_chunk(&job->chunks, n, block, thread, n_threads, &c, &j0, &j1);) ...
bool pool_next_chunk(PoolChunks *chunks, int n, int block, int thread, int n_threads, int *chunk, int *begin,
                     int *end);

#endif
