// memory.c — memory bandwidth: read, copy and triad passes over arrays far larger than the caches (bench.h).
//
// Decoding one token streams every weight once, so weight bytes / read bandwidth is the least time a decode step
// can take. Read is the figure to compare decoding with; copy (a = b) and triad (a = b + s·c) are STREAM's, for
// comparison with published numbers.
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bench.h"
#include "kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

// Σ p[0..n) with 64-byte loads, prefetching ahead at the same distances — as the AVX-512 matmul kernels read
// weights — so that the limit is not understated (without the prefetches this pass read more slowly than decoding
// streamed). n is a multiple of 32.
__attribute__((target("avx512f"))) static double read_avx512(const double *p, size_t n) {
    __m512d s0 = _mm512_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (size_t i = 0; i < n; i += 32) {
        for (int line = 0; line < 4; line++) {  // the 4 lines of this step's 256 bytes, ahead
            _mm_prefetch((const char *)(p + i) + PREFETCH_L1_AHEAD + 64 * line, _MM_HINT_T0);
            _mm_prefetch((const char *)(p + i) + PREFETCH_L2_AHEAD + 64 * line, _MM_HINT_T1);
        }
        s0 = _mm512_add_pd(s0, _mm512_load_pd(p + i));
        s1 = _mm512_add_pd(s1, _mm512_load_pd(p + i + 8));
        s2 = _mm512_add_pd(s2, _mm512_load_pd(p + i + 16));
        s3 = _mm512_add_pd(s3, _mm512_load_pd(p + i + 24));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(_mm512_add_pd(s0, s1), _mm512_add_pd(s2, s3)));
}
#endif

// Σ p[0..n), n a multiple of 32.
static double read_sum(const double *p, size_t n) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) return read_avx512(p, n);
#endif
    double s[8] = {0};
    for (size_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += p[i + k];
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

typedef struct {
    const MemoryPass *pass;
    double sums[64];    // one per thread, so that the reads cannot be optimised away
} PassJob;

static void pass_thread(void *ctx, int thread, int n_threads) {
    PassJob *job = ctx;
    const Memory *m = job->pass->memory;
    size_t begin = m->n * thread / n_threads / 32 * 32, end = m->n * (thread + 1) / n_threads / 32 * 32;
    double *restrict a = m->a;
    const double *restrict b = m->b, *restrict c = m->c;
    switch (job->pass->op) {
    case MEM_READ: job->sums[thread % 64] = read_sum(a + begin, end - begin); break;
    case MEM_COPY:
        for (size_t i = begin; i < end; i++) a[i] = b[i];
        break;
    case MEM_TRIAD:
        for (size_t i = begin; i < end; i++) a[i] = b[i] + 3.0 * c[i];
        break;
    case MEM_OPS: break;
    }
}

// An array on 2 MB huge pages where the kernel allows, as the model's weights are (load.c): with 4 kB pages the
// hardware prefetchers stop at every page's end and the read pass measured slower than decoding streamed.
static double *huge_array(size_t n) {
    const size_t huge = 2 << 20, bytes = (n * sizeof(double) + huge - 1) / huge * huge;
    double *p = aligned_alloc(huge, bytes);
    if (p) madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it the pages are simply 4 kB
    return p;
}

size_t memory_array_bytes(void) {
    const size_t least = (size_t)256 << 20, memory = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    const long described = l3_bytes(), reported = sysconf(_SC_LEVEL3_CACHE_SIZE);  // sysfs's, cpuid's (glibc)
    const long l3 = described > reported ? described : reported;                    // (sysconf: −1 or 0 if unknown)
    size_t bytes = l3 > 0 ? 4 * (size_t)l3 : 0;
    bytes = bytes < memory / 16 ? bytes : memory / 16;
    return bytes > least ? bytes : least;
}

void memory_init(Memory *m, size_t array_bytes) {
    *m = (Memory){.n = array_bytes / sizeof(double) / 32 * 32};
    m->a = huge_array(m->n), m->b = huge_array(m->n), m->c = huge_array(m->n);
    if (!m->a || !m->b || !m->c) die("out of memory for the bandwidth arrays (%zu bytes each)", array_bytes);
    for (size_t i = 0; i < m->n; i++) m->a[i] = 1.0, m->b[i] = 2.0, m->c[i] = 0.5;
}

void memory_free(Memory *m) {
    free(m->a), free(m->b), free(m->c);
    *m = (Memory){0};
}

const char *memory_op_name(MemoryOp op) {
    static const char *names[MEM_OPS] = {"read (Σ a)", "copy (a = b)", "triad (a = b + s·c)"};
    return names[op];
}

size_t memory_op_bytes(const Memory *m, MemoryOp op) {
    static const size_t arrays[MEM_OPS] = {1, 2, 3};
    return arrays[op] * m->n * sizeof(double);
}

double memory_pass(void *pass, int rep) {
    (void)rep;
    PassJob job = {.pass = pass};
    double t0 = now_seconds();
    pool_run(job.pass->pool, pass_thread, &job);
    return now_seconds() - t0;
}

// (bench.h) A read pass over arrays far larger than the caches, scaled to the weights' bytes.
double weights_read_seconds(Bench *b, const Model *target, double *gbs) {
    Memory memory;
    memory_init(&memory, memory_array_bytes());
    MemoryPass pass = {&memory, MEM_READ, b->pool};
    const Trial trial = {memory_pass, &pass};
    double *seconds = malloc(sizeof(double) * b->opt.reps);
    measure_rounds(b, "read pass", &trial, 1, b->opt.reps, 0.05, seconds);
    *gbs = memory_op_bytes(&memory, MEM_READ) / summarize(seconds, b->opt.reps).median / 1e9;
    free(seconds);
    memory_free(&memory);
    return target->weight_bytes / (*gbs * 1e9);
}
