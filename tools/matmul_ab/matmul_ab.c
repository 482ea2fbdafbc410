// matmul_ab.c — the AVX-512 q4 and q8 matmuls at T = 1 (one decode step's product) against an earlier commit's
// (run.sh builds those, renamed base_*), in one process: for each format, matrix and thread count, A and B
// alternate ROUNDS times; each round times REPS products of each, and the ratio base time / new time is taken
// within the round. Prints the medians [min–max] and checks that both give the same bits.
//   in the L2:    [1024, 1024], 0.6 MB in q8, 0.3 MB in q4: the kernel's own speed
//   from memory:  [32768, 4096], 136 MB in q8, 72 MB in q4 (over twice a 32 MiB L3)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/threads.h"
#include "kernels.h"

MatmulQ8Fn base_q4_matmul_avx512, base_q8_matmul_avx512;

enum { ROUNDS = 15 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

// One product out = x Wᵀ, each thread its share of W's panels (as the model splits a matmul).
typedef struct {
    MatmulQ8Fn *matmul;
    float *out;
    const Q8Block *x;
    const uint8_t *w;
    int n_out, n_in;
} Product;

static void product_share(void *ctx, int thread, int n_threads) {
    const Product *p = ctx;
    int j0, j1;
    pool_share(p->n_out, Q8_PANEL, thread, n_threads, &j0, &j1);
    if (j0 < j1) p->matmul(p->out, p->x, p->w, NULL, 1, p->n_in, p->n_out, j0, j1);
}

static double seconds_of(ThreadPool *pool, Product *p, int reps) {
    const double t0 = now();
    for (int r = 0; r < reps; r++) pool_run(pool, product_share, p);
    return (now() - t0) / reps;
}

// A random [n_out, n_in] matrix in format q4 or q8, and one activation row, quantized.
static uint8_t *random_matrix(bool q4, int n_out, int n_in, size_t *bytes) {
    *bytes = q4 ? q4_matrix_bytes(n_out, n_in) : q8_matrix_bytes(n_out, n_in);
    uint8_t *w = aligned_alloc(64, (*bytes + 63) / 64 * 64);
    float *rows = malloc(sizeof(float) * Q8_PANEL * (size_t)n_in);
    for (int p = 0; p < n_out / Q8_PANEL; p++) {
        for (int i = 0; i < Q8_PANEL * n_in; i++) rows[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        if (q4) q4_quantize_panel(w + (size_t)p * q4_panel_bytes(n_in), rows, Q8_PANEL, n_in, n_in);
        else q8_quantize_panel(w + (size_t)p * q8_panel_bytes(n_in), rows, Q8_PANEL, n_in, n_in);
    }
    free(rows);
    return w;
}

int main(int argc, char **argv) {
    const Kernels *k = kernels_select(NULL);
    if (strcmp(k->name, "avx512") != 0 || k->matmul_q4 != q4_matmul_avx512) {
        fprintf(stderr, "matmul_ab: this CPU does not run the AVX-512 VNNI kernels\n");
        return 2;
    }
    const struct {
        const char *where;
        int n_out, n_in, reps;
    } sizes[] = {{"in the L2", 1024, 1024, 2000}, {"from memory", 32768, 4096, 4}};
    printf("AVX-512 matmuls at T = 1, %s (base) against this build (new); %d rounds alternating, each the mean of "
           "its products\n\n| format | matrix | threads | base µs | new µs | new GB/s | base / new |\n"
           "|---|---|---:|---:|---:|---:|---:|\n", argc > 1 ? argv[1] : "base", ROUNDS);
    for (int f = 0; f < 2; f++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            const bool q4 = f == 0;
            const int n_out = sizes[s].n_out, n_in = sizes[s].n_in;
            size_t bytes;
            uint8_t *w = random_matrix(q4, n_out, n_in, &bytes);
            float *x = malloc(sizeof(float) * (size_t)n_in), *out_base = malloc(sizeof(float) * (size_t)n_out),
                  *out_new = malloc(sizeof(float) * (size_t)n_out);
            for (int i = 0; i < n_in; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
            Q8Block *xq = aligned_alloc(64, sizeof(Q8Block) * (size_t)q8_blocks(n_in));
            k->quantize_q8(xq, x, 1, n_in, n_in);
            for (int threads = 1; threads <= 2; threads++) {
                Err err = {""};
                ThreadPool *pool = pool_create(threads, &err);
                if (!pool) {
                    fprintf(stderr, "matmul_ab: %s\n", err.msg);
                    return 2;
                }
                Product base = {q4 ? base_q4_matmul_avx512 : base_q8_matmul_avx512, out_base, xq, w, n_out, n_in};
                Product new = {q4 ? q4_matmul_avx512 : q8_matmul_avx512, out_new, xq, w, n_out, n_in};
                double t_base[ROUNDS], t_new[ROUNDS], ratio[ROUNDS];
                for (int r = 0; r < ROUNDS; r++) {
                    const bool base_first = r % 2 == 0;
                    const double a = seconds_of(pool, base_first ? &base : &new, sizes[s].reps);
                    const double b = seconds_of(pool, base_first ? &new : &base, sizes[s].reps);
                    t_base[r] = base_first ? a : b, t_new[r] = base_first ? b : a;
                    ratio[r] = t_base[r] / t_new[r];
                }
                if (memcmp(out_base, out_new, sizeof(float) * (size_t)n_out) != 0) {
                    fprintf(stderr, "matmul_ab: base and new differ\n");
                    return 1;
                }
                // median() sorts: ratio[0] and ratio[ROUNDS - 1] are then the smallest and the largest
                const double mb = median(t_base, ROUNDS), mn = median(t_new, ROUNDS), mr = median(ratio, ROUNDS);
                printf("| %s | [%d, %d] %s | %d | %.1f | %.1f | %.1f | %.2f [%.2f–%.2f] |\n", q4 ? "q4" : "q8", n_out,
                       n_in, sizes[s].where, threads, mb * 1e6, mn * 1e6, (double)bytes / mn / 1e9, mr, ratio[0],
                       ratio[ROUNDS - 1]);
                fflush(stdout);
                pool_free(pool);
            }
            free(w), free(x), free(out_base), free(out_new), free(xq);
        }
    return 0;
}
