// bench.c — how fast specdec runs here, and how close that is to the physical limit.
//
// Decoding one token streams every weight from memory once, so its time is bounded below by
// weight bytes / memory bandwidth. This program measures the read bandwidth of this machine, then decodes with a
// random-weight model of GPT-2-small's shape (12 layers, d = 768, V = 50257) in F32 and BF16 and reports the
// fraction of that bandwidth reached, and the cost of a forward over T tokens relative to T = 1 — what
// verifying γ + 1 draft tokens costs — and where OpenBLAS overtakes our matmul kernel.
//
//   build/release/run-bench [--threads N] [--quick]
#include <cblas.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_tokenizer.h"
#include "model.h"
#include "random_checkpoint.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// ---- memory bandwidth ---------------------------------------------------------------------------------------

typedef struct {
    const uint64_t *data;
    size_t n;               // words
    uint64_t sink[64];      // one result per thread, so the reads cannot be optimised away
} ReadJob;

// Sums this thread's share of the buffer (the loads are the whole cost). Where the CPU has AVX-512, with 64-byte
// loads — as the matmul kernels read weights — so that the limit is not understated.
#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint64_t *p, size_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (size_t i = 0; i + 32 <= n; i += 32) {
        a = _mm512_add_epi64(a, _mm512_load_si512(p + i));
        b = _mm512_add_epi64(b, _mm512_load_si512(p + i + 8));
        c = _mm512_add_epi64(c, _mm512_load_si512(p + i + 16));
        d = _mm512_add_epi64(d, _mm512_load_si512(p + i + 24));
    }
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a, b), _mm512_add_epi64(c, d)));
}
#endif

static void read_thread(void *ctx, int thread, int n_threads) {
    ReadJob *job = ctx;
    size_t begin = job->n * thread / n_threads / 32 * 32, end = job->n * (thread + 1) / n_threads / 32 * 32;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) {
        job->sink[thread] = read_avx512(job->data + begin, end - begin);
        return;
    }
#endif
    uint64_t acc[8] = {0};
    for (size_t i = begin; i < end; i += 8)
        for (int k = 0; k < 8; k++) acc[k] += job->data[i + k];
    job->sink[thread] = acc[0] ^ acc[1] ^ acc[2] ^ acc[3] ^ acc[4] ^ acc[5] ^ acc[6] ^ acc[7];
}

// A buffer far larger than the caches, and one timed pass over it: GB/s.
typedef struct {
    ReadJob job;
    uint64_t *data;
    size_t bytes;
} Stream;

static void stream_init(Stream *st, size_t bytes) {
    st->bytes = bytes;
    st->data = aligned_alloc(64, bytes);
    memset(st->data, 1, bytes);
    st->job = (ReadJob){.data = st->data, .n = bytes / 8};
}

static double stream_read(Stream *st, ThreadPool *pool) {
    double t0 = now();
    pool_run(pool, read_thread, &st->job);
    return st->bytes / (now() - t0) / 1e9;
}

// ---- measurements -------------------------------------------------------------------------------------------

// Seconds of one forward over T tokens appended after `context` cached positions (the cache is cut back first).
static double time_forward(Model *m, KVCache *cache, int context, int T, float *logits) {
    int tokens[16];
    for (int t = 0; t < T; t++) tokens[t] = (t * 7919 + 13) % m->cfg.vocab_size;
    Err err;
    kv_truncate(cache, context);
    double t0 = now();
    if (model_forward(m, cache, tokens, T, logits, T > 1, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    return now() - t0;
}

// Decode speed and its fraction of the bandwidth, and the cost of T tokens relative to 1. The machine is shared
// and its bandwidth drifts, so every figure is a median of ratios of paired runs, one right after the other:
// (decode step, bandwidth pass) for the fraction, (T = 1, T = k) for the verification cost.
static void bench_model(ThreadPool *pool, Stream *stream, const char *dir, const char *label, int reps) {
    Model m;
    KVCache cache;
    Err err;
    double t0 = now();
    if (model_load(&m, dir, pool, &err) || model_kv_init(&m, &cache, &err)) {
        fprintf(stderr, "bench: %s\n", err.msg);
        exit(1);
    }
    double load_s = now() - t0;
    // A realistic context: 64 cached positions before the measured steps.
    int prompt[64];
    for (int i = 0; i < 64; i++) prompt[i] = (i * 31 + 7) % m.cfg.vocab_size;
    float *logits = malloc(sizeof(float) * m.cfg.vocab_size * 16);
    if (model_forward(&m, &cache, prompt, 64, logits, false, &err)) exit(1);
    time_forward(&m, &cache, 64, 1, logits);  // warm-up

    double *t1 = malloc(sizeof(double) * reps), *fraction = malloc(sizeof(double) * reps);
    double *ratio = malloc(sizeof(double) * reps);
    for (int r = 0; r < reps; r++) {
        t1[r] = time_forward(&m, &cache, 64, 1, logits);
        fraction[r] = m.weight_bytes / t1[r] / 1e9 / stream_read(stream, pool);
    }
    double decode = median(t1, reps), gbs = m.weight_bytes / decode / 1e9;
    printf("| %-5s | %8.1f MB | %6.0f ms | %9.1f | %8.2f | %6.1f GB/s | %5.0f%% |", label, m.weight_bytes / 1e6,
           load_s * 1e3, 1.0 / decode, decode * 1e3, gbs, 100 * median(fraction, reps));
    static const int Ts[] = {2, 4, 8, 16};
    for (int i = 0; i < 4; i++) {
        for (int r = 0; r < reps; r++) {
            double one = time_forward(&m, &cache, 64, 1, logits);
            ratio[r] = time_forward(&m, &cache, 64, Ts[i], logits) / one;
        }
        printf(" %5.2f |", median(ratio, reps));
    }
    printf("\n");
    free(t1), free(fraction), free(ratio), free(logits);
    kv_free(&cache);
    model_free(&m);
}

// Our kernel against OpenBLAS's sgemm on one F32 matrix of GPT-2's MLP, [3072, 768], for T activation rows.
// Both split the output columns between the pool's threads; OpenBLAS runs single-threaded in each, as in model.c.
typedef struct {
    const Kernels *k;
    const float *w, *x;
    float *out;
    int T, n_in, n_out;
    bool blas;
} MatmulJob;

static void matmul_thread(void *ctx, int thread, int n_threads) {
    MatmulJob *job = ctx;
    int j0, j1;
    pool_share(job->n_out, 16, thread, n_threads, &j0, &j1);
    if (job->blas)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, job->T, j1 - j0, job->n_in, 1.0f, job->x, job->n_in,
                    job->w + (size_t)j0 * job->n_in, job->n_in, 0.0f, job->out + j0, job->n_out);
    else
        job->k->matmul[WEIGHT_F32](job->out, job->x, job->w, NULL, job->T, job->n_in, job->n_out, j0, j1);
}

static void bench_blas_crossover(ThreadPool *pool, int reps) {
    const int n_in = 768, n_out = 3072, max_T = 512;
    float *w = aligned_alloc(64, sizeof(float) * n_in * n_out), *x = aligned_alloc(64, sizeof(float) * max_T * n_in);
    float *out = aligned_alloc(64, sizeof(float) * max_T * n_out);
    for (int i = 0; i < n_in * n_out; i++) w[i] = (float)((i * 7919LL) % 2001 - 1000) * 1e-3f;
    for (int i = 0; i < max_T * n_in; i++) x[i] = (float)((i * 104729LL) % 2001 - 1000) * 1e-3f;
    const char *why;
    MatmulJob job = {kernels_select(&why), w, x, out, 0, n_in, n_out, false};
    printf("\nOur matmul kernel vs OpenBLAS sgemm, W: [%d, %d] F32, %d threads (median µs)\n\n", n_out, n_in,
           pool_size(pool));
    printf("| T | %s kernel | OpenBLAS | kernel / BLAS |\n|---:|---:|---:|---:|\n", job.k->name);
    double *a = malloc(sizeof(double) * reps), *b = malloc(sizeof(double) * reps);
    for (int T = 1; T <= max_T; T *= 2) {
        job.T = T;
        for (int r = -1; r < reps; r++) {  // alternate the two, so that drift hits both alike
            double t0 = now();
            job.blas = false;
            pool_run(pool, matmul_thread, &job);
            double t1 = now();
            job.blas = true;
            pool_run(pool, matmul_thread, &job);
            double t2 = now();
            if (r >= 0) a[r] = t1 - t0, b[r] = t2 - t1;
        }
        double ka = median(a, reps), kb = median(b, reps);
        printf("| %d | %.0f | %.0f | %.2f |\n", T, ka * 1e6, kb * 1e6, ka / kb);
    }
    free(a), free(b), free(w), free(x), free(out);
}

// A few MB of real text for the tokenizer: the Python standard library's sources (every Debian machine has
// them), concatenated into a temporary file. Returns its path, or NULL.
static const char *write_text_sample(char *path, size_t want_bytes) {
    const char *dir_path = "/usr/lib/python3.11";
    DIR *dir = opendir(dir_path);
    int fd = mkstemp(path);
    if (!dir || fd < 0) {
        if (dir) closedir(dir);
        return NULL;
    }
    FILE *out = fdopen(fd, "wb");
    size_t written = 0;
    struct dirent *e;
    while (written < want_bytes && (e = readdir(dir))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".py") != 0) continue;
        char file[512];
        snprintf(file, sizeof file, "%s/%s", dir_path, e->d_name);
        FILE *in = fopen(file, "rb");
        char buf[1 << 16];
        size_t n;
        while (in && (n = fread(buf, 1, sizeof buf, in)) > 0) written += fwrite(buf, 1, n, out);
        if (in) fclose(in);
    }
    closedir(dir);
    fclose(out);
    return written ? path : NULL;
}

int main(int argc, char **argv) {
    int threads = 0;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = true;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench [--threads N] [--quick]\n");
            return 2;
        }
    }
    Err err;
    ThreadPool *pool = pool_create(threads, &err);
    if (!pool) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return 1;
    }
    const char *why;
    const Kernels *k = kernels_select(&why);
    printf("specdec bench: %d threads, kernels %s\n\n", pool_size(pool), k ? k->name : "?");
    Stream stream;
    stream_init(&stream, (size_t)1 << 30);
    ThreadPool *one = pool_create(1, &err);
    double bw[15], bw1[15];
    for (int r = 0; r < 15; r++) bw[r] = stream_read(&stream, pool), bw1[r] = stream_read(&stream, one);
    pool_free(one);
    printf("Memory read bandwidth (1 GiB buffer, median of 15): %.1f GB/s with %d threads, %.1f GB/s with 1\n\n",
           median(bw, 15), pool_size(pool), median(bw1, 15));

    printf("GPT-2-small-sized model, random weights, 64 cached positions; decode = one token (T = 1). Bandwidth\n"
           "fraction: median over pairs (decode step, bandwidth pass). T = k: one forward over k new tokens with\n"
           "logits for all k, as the median time ratio to T = 1 over pairs (T = 1, T = k)\n\n");
    printf("| dtype | weights | load | tokens/s | ms/token | weights streamed | of bandwidth | T=2 | T=4 | T=8 | T=16 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    char dir[] = "/tmp/specdec-bench-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    static const char *labels[] = {"F32", "BF16"};
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        RandomCheckpoint gpt2_small = {.n_layer = 12, .n_embd = 768, .n_head = 12, .vocab_size = 50257,
                                       .n_positions = 1024, .bf16 = bf16, .scale = 0.05f, .seed = 1};
        if (random_checkpoint_write(dir, &gpt2_small, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            return 1;
        }
        bench_model(pool, &stream, dir, labels[bf16], quick ? 7 : 25);
    }
    random_checkpoint_remove(dir);

    free(stream.data);
    bench_blas_crossover(pool, quick ? 5 : 15);
    pool_free(pool);

    char text_path[] = "/tmp/specdec-bench-text-XXXXXX";
    printf("\nTokenizer: encode throughput on %s of Python sources\n\n", quick ? "1 MB" : "5 MB");
    if (write_text_sample(text_path, quick ? 1 << 20 : 5 << 20)) {
        bench_tokenizer(text_path);
        unlink(text_path);
    } else {
        printf("(no text sample: /usr/lib/python3.11 is missing)\n");
    }
    return 0;
}
