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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model.h"

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

// Best-of-reps read bandwidth in GB/s over a buffer far larger than the caches.
static double read_bandwidth(ThreadPool *pool, size_t bytes, int reps) {
    ReadJob job = {.n = bytes / 8};
    uint64_t *data = aligned_alloc(64, bytes);
    memset(data, 1, bytes);
    job.data = data;
    double best = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        pool_run(pool, read_thread, &job);
        double gbs = bytes / (now() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    free(data);
    return best;
}

// ---- a random GPT-2-small checkpoint ------------------------------------------------------------------------

typedef struct {
    const char *name;
    int64_t rows, cols;     // cols = 0 for a vector
    float scale;            // values uniform in [−scale, scale], or exactly `scale` for LayerNorm gammas
    bool constant;
} TensorSpec;

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static float random_uniform(void) {
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (float)((rng_state * 0x2545F4914F6CDD1DULL) >> 40) * 0x1.0p-24f * 2.0f - 1.0f;
}

// Writes `count` values as F32 or BF16 (rounded to nearest even), through a buffer.
static void put_values(FILE *f, const TensorSpec *spec, size_t count, bool bf16) {
    uint8_t buf[1 << 16];
    size_t used = 0, elem = bf16 ? 2 : 4;
    for (size_t k = 0; k < count; k++) {
        float v = spec->constant ? spec->scale : spec->scale * random_uniform();
        uint32_t bits;
        memcpy(&bits, &v, 4);
        if (bf16) {
            uint16_t half = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
            memcpy(buf + used, &half, 2);
        } else {
            memcpy(buf + used, &bits, 4);
        }
        used += elem;
        if (used == sizeof buf || k + 1 == count) {
            fwrite(buf, 1, used, f);
            used = 0;
        }
    }
}

// Writes config.json and model.safetensors for GPT-2-small's shape into dir.
static int write_checkpoint(const char *dir, bool bf16, int n_layer, int d, int V, int P) {
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    fprintf(f, "{\"model_type\": \"gpt2\", \"n_embd\": %d, \"n_head\": %d, \"n_layer\": %d, \"n_positions\": %d, "
            "\"vocab_size\": %d}\n", d, d / 64, n_layer, P, V);
    fclose(f);

    int n = 0, cap = 4 + 12 * n_layer;
    TensorSpec *specs = calloc((size_t)cap, sizeof *specs);
    char (*names)[64] = calloc((size_t)cap, 64);
    specs[n++] = (TensorSpec){"wte.weight", V, d, 0.05f, false};
    specs[n++] = (TensorSpec){"wpe.weight", P, d, 0.01f, false};
    for (int l = 0; l < n_layer; l++) {
        const struct { const char *suffix; int64_t rows, cols; float scale; bool constant; } block[] = {
            {"ln_1.weight", d, 0, 1.0f, true}, {"ln_1.bias", d, 0, 0.02f, false},
            {"attn.c_attn.weight", d, 3 * d, 0.05f, false}, {"attn.c_attn.bias", 3 * d, 0, 0.02f, false},
            {"attn.c_proj.weight", d, d, 0.05f, false}, {"attn.c_proj.bias", d, 0, 0.02f, false},
            {"ln_2.weight", d, 0, 1.0f, true}, {"ln_2.bias", d, 0, 0.02f, false},
            {"mlp.c_fc.weight", d, 4 * d, 0.05f, false}, {"mlp.c_fc.bias", 4 * d, 0, 0.02f, false},
            {"mlp.c_proj.weight", 4 * d, d, 0.03f, false}, {"mlp.c_proj.bias", d, 0, 0.02f, false},
        };
        for (size_t k = 0; k < sizeof block / sizeof block[0]; k++) {
            snprintf(names[n], 64, "h.%d.%s", l, block[k].suffix);
            specs[n] = (TensorSpec){names[n], block[k].rows, block[k].cols, block[k].scale, block[k].constant};
            n++;
        }
    }
    specs[n++] = (TensorSpec){"ln_f.weight", d, 0, 1.0f, true};
    specs[n++] = (TensorSpec){"ln_f.bias", d, 0, 0.02f, false};

    // Header: {"name": {"dtype": .., "shape": [..], "data_offsets": [b, e]}, ...}
    size_t hcap = (size_t)n * 160 + 64, hlen = 0, offset = 0, elem = bf16 ? 2 : 4;
    char *header = malloc(hcap);
    hlen += snprintf(header + hlen, hcap - hlen, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)specs[i].rows * (specs[i].cols ? specs[i].cols : 1) * elem;
        if (specs[i].cols)
            hlen += snprintf(header + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],", i ? "," : "",
                             specs[i].name, bf16 ? "BF16" : "F32", (long long)specs[i].rows, (long long)specs[i].cols);
        else
            hlen += snprintf(header + hlen, hcap - hlen, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],", i ? "," : "",
                             specs[i].name, bf16 ? "BF16" : "F32", (long long)specs[i].rows);
        hlen += snprintf(header + hlen, hcap - hlen, "\"data_offsets\":[%zu,%zu]}", offset, offset + bytes);
        offset += bytes;
    }
    hlen += snprintf(header + hlen, hcap - hlen, "}");
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    f = fopen(path, "wb");
    uint64_t header_len = hlen;
    fwrite(&header_len, 8, 1, f);
    fwrite(header, 1, hlen, f);
    for (int i = 0; i < n; i++) {
        size_t count = (size_t)specs[i].rows * (specs[i].cols ? specs[i].cols : 1);
        put_values(f, &specs[i], count, bf16);
    }
    int rc = ferror(f) ? -1 : 0;
    fclose(f);
    free(header);
    free(specs);
    free(names);
    return rc;
}

// ---- measurements -------------------------------------------------------------------------------------------

// Median seconds of one forward over T tokens appended after `context` cached positions.
static double time_forward(Model *m, KVCache *cache, int context, int T, bool all_logits, int reps) {
    int tokens[64];
    for (int t = 0; t < T; t++) tokens[t] = (t * 7919 + 13) % m->cfg.vocab_size;
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab_size * T);
    double *times = malloc(sizeof(double) * reps);
    Err err;
    for (int r = -1; r < reps; r++) {  // r = −1 warms up
        kv_truncate(cache, context);
        double t0 = now();
        if (model_forward(m, cache, tokens, T, logits, all_logits, &err)) {
            fprintf(stderr, "bench: %s\n", err.msg);
            exit(1);
        }
        if (r >= 0) times[r] = now() - t0;
    }
    double med = median(times, reps);
    free(times);
    free(logits);
    return med;
}

static void bench_model(ThreadPool *pool, const char *dir, const char *label, double bandwidth, bool quick) {
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
    float *logits = malloc(sizeof(float) * m.cfg.vocab_size);
    if (model_forward(&m, &cache, prompt, 64, logits, false, &err)) exit(1);
    free(logits);

    int reps = quick ? 5 : 20;
    double t1 = time_forward(&m, &cache, 64, 1, false, reps);
    double gbs = m.weight_bytes / t1 / 1e9;
    printf("| %-5s | %8.1f MB | %6.0f ms | %9.1f | %8.2f | %6.1f GB/s | %5.0f%% |", label, m.weight_bytes / 1e6,
           load_s * 1e3, 1.0 / t1, t1 * 1e3, gbs, 100 * gbs / bandwidth);
    static const int Ts[] = {2, 4, 8, 16};
    for (int i = 0; i < 4; i++) printf(" %5.2f |", time_forward(&m, &cache, 64, Ts[i], true, reps) / t1);
    printf("\n");
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
    for (int i = 0; i < n_in * n_out; i++) w[i] = random_uniform();
    for (int i = 0; i < max_T * n_in; i++) x[i] = random_uniform();
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
    double bw = read_bandwidth(pool, (size_t)1 << 30, quick ? 3 : 10);
    ThreadPool *one = pool_create(1, &err);
    double bw1 = read_bandwidth(one, (size_t)1 << 30, quick ? 3 : 10);
    pool_free(one);
    printf("Memory read bandwidth (1 GiB buffer, best of runs): %.1f GB/s with %d threads, %.1f GB/s with 1\n\n", bw,
           pool_size(pool), bw1);

    printf("GPT-2-small-sized model, random weights, 64 cached positions; decode = one token (T = 1);\n"
           "T = k: one forward over k new tokens with logits for all k, as a time ratio to T = 1\n\n");
    printf("| dtype | weights | load | tokens/s | ms/token | weights streamed | of bandwidth | T=2 | T=4 | T=8 | T=16 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    char dir[] = "/tmp/specdec-bench-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    static const char *labels[] = {"F32", "BF16"};
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        if (write_checkpoint(dir, bf16, 12, 768, 50257, 1024)) {
            fprintf(stderr, "bench: cannot write a checkpoint to %s\n", dir);
            return 1;
        }
        bench_model(pool, dir, labels[bf16], bw, quick);
    }
    char path[600];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);

    bench_blas_crossover(pool, quick ? 5 : 15);
    pool_free(pool);
    return 0;
}
