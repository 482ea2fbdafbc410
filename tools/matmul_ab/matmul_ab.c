// matmul_ab.c — the q4 and q8 matmuls of one x86 variant (avx512, avx2 or avxvnni) at T activation rows (1: one
// decode step's products; 8: a verification's) against an earlier commit's (run.sh builds those, renamed base_*),
// in one process: for each format, workload and thread count, A and B alternate ROUNDS times; each round times REPS passes over the workload with each, and the ratio base time / new
// time is taken within the round. Prints the medians [min–max] and checks that both give the same bits.
//   in the L2:    [1024, 1024], 0.6 MB in q8, 0.3 MB in q4: the kernel's own speed
//   from memory:  [32768, 4096], 136 MB in q8, 72 MB in q4 (over twice a 32 MiB L3)
//   16 layers:    a Llama-3.2-1B layer's matrices ([3072, 2048] QKV, [2048, 2048] O, [16384, 2048] gate and up,
//                 [2048, 8192] down) 16 times over, one after the other as a decode step reads them: 1.0 GB in q8,
//                 0.55 GB in q4
// As in the model, each matrix is one job on the pool, each thread its share of the matrix's panels.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/threads.h"
#include "kernels.h"

MatmulQ8Fn base_q4_matmul, base_q8_matmul;  // the earlier commit's, of the variant run.sh was given

enum { ROUNDS = 15, MAX_MATRICES = 64, MAX_IN = 8192, MAX_T = 16 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// The median of v [n]; sorts v, so that v[0] and v[n - 1] are then its smallest and largest.
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

typedef struct {
    int n_out, n_in;
    uint8_t *w;    // [n_out, n_in] in q4 or q8
    float *out;    // [n_out]
    size_t bytes;  // of w
} Matrix;

typedef struct {
    const char *name;
    int n, reps;  // matrices, and passes over them per round
    Matrix m[MAX_MATRICES];
    size_t bytes;
} Workload;

// One product out = x Wᵀ on the pool, each thread its share of W's panels.
typedef struct {
    MatmulQ8Fn *matmul;
    const Matrix *m;
    const Q8Block *x;  // [T, q8_blocks(m->n_in)]
    int T;
} Product;

static void product_share(void *ctx, int thread, int n_threads) {
    const Product *p = ctx;
    int j0, j1;
    pool_share(p->m->n_out, Q8_PANEL, thread, n_threads, &j0, &j1);
    if (j0 < j1) p->matmul(p->m->out, p->x, p->m->w, NULL, p->T, p->m->n_in, p->m->n_out, j0, j1);
}

// Seconds of one pass over the workload's matrices, the mean of `reps`.
static double seconds_of(ThreadPool *pool, MatmulQ8Fn *matmul, const Workload *wl, const Q8Block *x, int T) {
    const double t0 = now();
    for (int r = 0; r < wl->reps; r++)
        for (int i = 0; i < wl->n; i++) pool_run(pool, product_share, &(Product){matmul, &wl->m[i], x, T});
    return (now() - t0) / wl->reps;
}

// Memory for a matrix's weights in huge pages where the kernel gives them, as the model's weights are (load.c).
static uint8_t *weights_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("matmul_ab: mmap");
        exit(2);
    }
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint
    return p;
}

// Adds a random [n_out, n_in] matrix in format q4 or q8 to the workload.
static void add_matrix(Workload *wl, bool q4, int n_out, int n_in) {
    Matrix *m = &wl->m[wl->n++];
    const size_t bytes = q4 ? q4_matrix_bytes(n_out, n_in) : q8_matrix_bytes(n_out, n_in);
    *m = (Matrix){n_out, n_in, weights_alloc(bytes), malloc(sizeof(float) * MAX_T * (size_t)n_out), bytes};
    float *rows = malloc(sizeof(float) * Q8_PANEL * (size_t)n_in);
    for (int p = 0; p < n_out / Q8_PANEL; p++) {
        for (int i = 0; i < Q8_PANEL * n_in; i++) rows[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        if (q4) q4_quantize_panel(m->w + (size_t)p * q4_panel_bytes(n_in), rows, Q8_PANEL, n_in, n_in);
        else q8_quantize_panel(m->w + (size_t)p * q8_panel_bytes(n_in), rows, Q8_PANEL, n_in, n_in);
    }
    free(rows);
    wl->bytes += bytes;
}

// The workloads' outputs [T, n_out] each, concatenated: the bits base and new must agree on.
static float *outputs(const Workload *wl, int T, size_t *n) {
    *n = 0;
    for (int i = 0; i < wl->n; i++) *n += (size_t)T * (size_t)wl->m[i].n_out;
    float *all = malloc(sizeof(float) * *n);
    size_t at = 0;
    for (int i = 0; i < wl->n; i++) {
        memcpy(all + at, wl->m[i].out, sizeof(float) * (size_t)T * (size_t)wl->m[i].n_out);
        at += (size_t)T * (size_t)wl->m[i].n_out;
    }
    return all;
}

static void measure(const Workload *wl, bool q4, MatmulQ8Fn *new, const Q8Block *x, int T) {
    MatmulQ8Fn *base = q4 ? base_q4_matmul : base_q8_matmul;
    for (int threads = 1; threads <= 2; threads++) {
        Err err = {""};
        ThreadPool *pool = pool_create(threads, &err);
        if (!pool) {
            fprintf(stderr, "matmul_ab: %s\n", err.msg);
            exit(2);
        }
        double t_base[ROUNDS], t_new[ROUNDS], ratio[ROUNDS];
        size_t n;
        float *from_base = NULL;
        for (int r = 0; r < ROUNDS; r++) {
            const bool base_first = r % 2 == 0;
            const double a = seconds_of(pool, base_first ? base : new, wl, x, T);
            if (r == 0) from_base = outputs(wl, T, &n);
            const double b = seconds_of(pool, base_first ? new : base, wl, x, T);
            t_base[r] = base_first ? a : b, t_new[r] = base_first ? b : a;
            ratio[r] = t_base[r] / t_new[r];
        }
        float *from_new = outputs(wl, T, &n);  // the last round ran new second
        if (memcmp(from_base, from_new, sizeof(float) * n) != 0) {
            fprintf(stderr, "matmul_ab: base and new differ\n");
            exit(1);
        }
        const double mb = median(t_base, ROUNDS), mn = median(t_new, ROUNDS), mr = median(ratio, ROUNDS);
        printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.2f [%.2f–%.2f] |\n", q4 ? "q4" : "q8", wl->name, threads,
               mb * 1e6, mn * 1e6, (double)wl->bytes / mn / 1e9, mr, ratio[0], ratio[ROUNDS - 1]);
        fflush(stdout);
        free(from_base);
        free(from_new);
        pool_free(pool);
    }
}

// The variant's own q4 and q8 matmuls, which this CPU must run.
static const Kernels *variant(const char *isa) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(list[i]->name, isa) == 0) return list[i];
    return NULL;
}

int main(int argc, char **argv) {
    const char *isa = argc > 2 ? argv[2] : "avx512";
    const int T = argc > 3 ? atoi(argv[3]) : 1;
    const Kernels *k = variant(isa);
    if (T < 1 || T > MAX_T || !k) {
        fprintf(stderr, "matmul_ab: usage: matmul_ab BASE avx512|avx2|avxvnni T (1..%d), a variant this CPU runs\n",
                MAX_T);
        return 2;
    }
    float *x = malloc(sizeof(float) * MAX_T * MAX_IN);  // activation rows [T, MAX_IN]; a matrix of n_in < MAX_IN
                                                        // takes each row's first blocks
    for (int i = 0; i < MAX_T * MAX_IN; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    Q8Block *xq = aligned_alloc(64, sizeof(Q8Block) * MAX_T * (size_t)q8_blocks(MAX_IN));
    k->quantize_q8(xq, x, T, MAX_IN, MAX_IN);
    printf("%s matmuls at T = %d, %s (base) against this build (new); %d rounds alternating, each the mean of "
           "its passes\n\n| format | workload | threads | base µs | new µs | new GB/s | base / new |\n"
           "|---|---|---:|---:|---:|---:|---:|\n", isa, T, argc > 1 ? argv[1] : "base", ROUNDS);
    for (int f = 0; f < 2; f++) {
        const bool q4 = f == 0;
        Workload wl[3] = {{.name = "[1024, 1024] in the L2", .reps = 2000 / T},
                          {.name = "[32768, 4096] from memory", .reps = 4},
                          {.name = "16 Llama-3.2-1B layers", .reps = 2}};
        add_matrix(&wl[0], q4, 1024, 1024);
        add_matrix(&wl[1], q4, 32768, 4096);
        for (int layer = 0; layer < 16; layer++) {
            add_matrix(&wl[2], q4, 3072, 2048);
            add_matrix(&wl[2], q4, 2048, 2048);
            add_matrix(&wl[2], q4, 16384, 2048);
            add_matrix(&wl[2], q4, 2048, 8192);
        }
        for (int i = 0; i < 3; i++) {
            measure(&wl[i], q4, q4 ? k->matmul_q4 : k->matmul_q8, xq, T);
            for (int j = 0; j < wl[i].n; j++) munmap(wl[i].m[j].w, wl[i].m[j].bytes), free(wl[i].m[j].out);
        }
    }
    free(x);
    free(xq);
    return 0;
}
