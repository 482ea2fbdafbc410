// matmul_ab.c — the q4 and q8 matmuls of one x86 variant (avx512, avx2 or avxvnni), or GGUF's Q4_K, Q5_K and Q6_K
// ones (the K-panels of kernels.h, their weights random GGUF blocks packed as the loader packs them), at T activation
// rows (1: one decode step's products; 8: a verification's) against an earlier commit's (run.sh builds those,
// renamed base_*), in one process: for each format, workload and thread count, A and B alternate `rounds` times;
// each round times REPS passes over the workload with each, and the ratio base time / new time is taken within
// the round. Prints the medians [min–max], the ratio of the fastest rounds and their multiply-adds a second (T ·
// the workload's n_out · n_in over the fastest round's time: in the L2, the kernel's own pace, to set beside the
// core's clock and ports), and checks that both give the same bits.
//   matmul_ab BASE ISA T FORMATS [l2] [--workload l2|memory|layers] [--rounds N] [--threads N] [--chunks N]
// By default all three workloads below, ROUNDS rounds each, on 1 thread and then on 2. `--workload` measures one
// of them alone; the L2's alone (`l2` is the same) in L2_ROUNDS short rounds of few passes, whose fastest ones say
// the kernels' own speed on a machine that other work shares. `--rounds N` (1..MAX_ROUNDS) sets the rounds,
// `--threads N` (1..MAX_THREADS) the one thread count measured. `--chunks N` (1..MAX_CHUNKS) cuts each thread's
// share into N chunks, one call of the matmul each, run in the order 0, 2, 4, …, 1, 3, 5, …: each chunk then starts
// where the previous one's prefetches did not reach, as a forward's do on two threads (it cuts a matrix into 4
// chunks a thread, and the threads' chunks alternate) — the cold starts of two threads' chunks, on one thread.
//   in the L2:    [1024, 1024], 1.1 MB in q8, 0.6 MB in q4 (and Q4_K), 0.7 MB in Q5_K, 0.9 MB in Q6_K: the
//                 kernel's own speed
//   from memory:  [32768, 4096], 136 MB in q8, 72 MB in q4, 76 MB in Q4_K, 92 MB in Q5_K, 106 MB in Q6_K (over
//                 twice a 32 MiB L3, not a larger one)
//   16 layers:    a Llama-3.2-1B layer's matrices ([3072, 2048] QKV, [2048, 2048] O, [16384, 2048] gate and up,
//                 [2048, 8192] down) 16 times over, one after the other as a decode step reads them: 1.0 GB in q8,
//                 0.55 GB in q4, 0.58 GB in Q4_K, 0.67 GB in Q5_K, 0.8 GB in Q6_K
// As in the model, each matrix is one job on the pool, each thread its share of the matrix's panels.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "base/error.h"
#include "base/threads.h"
#include "kernels.h"

// The earlier commit's, of the variant run.sh was given (only those of the formats asked for are linked in).
extern MatmulQ8Fn base_q4_matmul __attribute__((weak)), base_q8_matmul __attribute__((weak)),
    base_q4_k_matmul __attribute__((weak)), base_q5_k_matmul __attribute__((weak)),
    base_q6_k_matmul __attribute__((weak));

// The formats measured: their names on the command line and in the table, and their weight types.
static const struct {
    const char *name;
    WeightType type;
} FORMATS[] = {{"q4", WEIGHT_Q4}, {"q8", WEIGHT_Q8}, {"q4_k", WEIGHT_Q4_K}, {"q5_k", WEIGHT_Q5_K},
               {"q6_k", WEIGHT_Q6_K}};
enum { N_FORMATS = sizeof FORMATS / sizeof FORMATS[0] };

enum { ROUNDS = 15, L2_ROUNDS = 301, MAX_ROUNDS = 1001, MAX_THREADS = 64, MAX_CHUNKS = 64, MAX_MATRICES = 64,
       MAX_IN = 8192, MAX_T = 16 };

// The workloads in the order they are measured (the header's table), as `--workload` names them.
enum { IN_THE_L2, FROM_MEMORY, LAYERS, N_WORKLOADS };
static const char *const WORKLOAD_WORDS[N_WORKLOADS] = {"l2", "memory", "layers"};

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
    uint8_t *w;    // [n_out, n_in] in the format measured
    float *out;    // [n_out]
    size_t bytes;  // of w
} Matrix;

typedef struct {
    const char *name;
    int n, reps;  // matrices, and passes over them per round
    Matrix m[MAX_MATRICES];
    size_t bytes;
} Workload;

// One product out = x Wᵀ on the pool, each thread its share of W's panels, in `chunks` chunks (--chunks).
typedef struct {
    MatmulQ8Fn *matmul;
    const Matrix *m;
    const Q8Block *x;  // [T, q8_blocks(m->n_in)]
    int T, chunks;
} Product;

static void product_share(void *ctx, int thread, int n_threads) {
    const Product *p = ctx;
    int j0, j1;
    pool_share(p->m->n_out, Q8_PANEL, thread, n_threads, &j0, &j1);
    for (int i = 0; i < p->chunks; i++) {
        const int evens = (p->chunks + 1) / 2, c = i < evens ? 2 * i : 2 * (i - evens) + 1;  // 0, 2, …, 1, 3, …
        int c0, c1;
        pool_share(j1 - j0, Q8_PANEL, c, p->chunks, &c0, &c1);
        if (c0 < c1) p->matmul(p->m->out, p->x, p->m->w, NULL, p->T, p->m->n_in, p->m->n_out, j0 + c0, j0 + c1);
    }
}

// Seconds of one pass over the workload's matrices, the mean of `reps`.
static double seconds_of(ThreadPool *pool, MatmulQ8Fn *matmul, const Workload *wl, const Q8Block *x, int T,
                         int chunks) {
    const double t0 = now();
    for (int r = 0; r < wl->reps; r++)
        for (int i = 0; i < wl->n; i++) pool_run(pool, product_share, &(Product){matmul, &wl->m[i], x, T, chunks});
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

// Row r of a K-panel from a random GGUF row of n_in / 256 blocks of `type` (Q4_K, Q5_K or Q6_K): random quants
// and integer scales, and F16 d (and dmin) in [2⁻¹⁰, 2⁻⁶), so that every weight is finite.
static void k_random_row(uint8_t *panel, WeightType type, int r, int n_in) {
    const bool with_dmin = type != WEIGHT_Q6_K;  // Q4_K and Q5_K: d, dmin at 0 and 2; Q6_K: d at 208
    const int block_bytes = type == WEIGHT_Q4_K ? 144 : type == WEIGHT_Q5_K ? 176 : 210, d_at = with_dmin ? 0 : 208;
    uint8_t *blocks = malloc((size_t)n_in / K_SUPER * block_bytes);
    for (int s = 0; s < n_in / K_SUPER; s++) {
        uint8_t *b = blocks + (size_t)s * block_bytes;
        for (int i = 0; i < block_bytes; i++) b[i] = (uint8_t)rand();
        for (int h = 0; h < (with_dmin ? 2 : 1); h++) {  // d, then dmin: exponents 5..8
            b[d_at + 2 * h + 1] = (uint8_t)(0x14 + rand() % 16);
        }
    }
    k_pack_row(panel, type, r, blocks, n_in);
    free(blocks);
}

// Adds a random [n_out, n_in] matrix of `type` (FORMATS) to the workload.
static void add_matrix(Workload *wl, WeightType type, int n_out, int n_in) {
    Matrix *m = &wl->m[wl->n++];
    const size_t bytes = quantized_matrix_bytes(type, n_out, n_in), panel_bytes = quantized_panel_bytes(type, n_in);
    *m = (Matrix){n_out, n_in, weights_alloc(bytes), malloc(sizeof(float) * MAX_T * (size_t)n_out), bytes};
    float *rows = malloc(sizeof(float) * Q8_PANEL * (size_t)n_in);
    for (int p = 0; p < n_out / Q8_PANEL; p++) {
        uint8_t *panel = m->w + (size_t)p * panel_bytes;
        if (k_quant(type)) {
            for (int r = 0; r < Q8_PANEL; r++) k_random_row(panel, type, r, n_in);
            continue;
        }
        for (int i = 0; i < Q8_PANEL * n_in; i++) rows[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        if (type == WEIGHT_Q4) q4_quantize_panel(panel, rows, Q8_PANEL, n_in, n_in);
        else q8_quantize_panel(panel, rows, Q8_PANEL, n_in, n_in);
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

// What the command line asks for: the workloads measured, the rounds of each, the thread counts [first, last],
// the chunks of a thread's share.
typedef struct {
    bool workload[N_WORKLOADS];
    int rounds, first_threads, last_threads, chunks;
} Plan;

static void measure(const Workload *wl, const char *format, MatmulQ8Fn *base, MatmulQ8Fn *new, const Q8Block *x,
                    int T, const Plan *plan) {
    const int rounds = plan->rounds;
    for (int threads = plan->first_threads; threads <= plan->last_threads; threads++) {
        Err err = {""};
        ThreadPool *pool = pool_create(threads, &err);
        if (!pool) {
            fprintf(stderr, "matmul_ab: %s\n", err.msg);
            exit(2);
        }
        static double t_base[MAX_ROUNDS], t_new[MAX_ROUNDS], ratio[MAX_ROUNDS];
        size_t n;
        float *from_base = NULL, *from_new = NULL;  // the outputs of the first round, which runs base first
        for (int r = 0; r < rounds; r++) {
            const bool base_first = r % 2 == 0;
            const double a = seconds_of(pool, base_first ? base : new, wl, x, T, plan->chunks);
            if (r == 0) from_base = outputs(wl, T, &n);
            const double b = seconds_of(pool, base_first ? new : base, wl, x, T, plan->chunks);
            if (r == 0) from_new = outputs(wl, T, &n);
            t_base[r] = base_first ? a : b, t_new[r] = base_first ? b : a;
            ratio[r] = t_base[r] / t_new[r];
        }
        if (memcmp(from_base, from_new, sizeof(float) * n) != 0) {
            fprintf(stderr, "matmul_ab: base and new differ\n");
            exit(1);
        }
        const double mb = median(t_base, rounds), mn = median(t_new, rounds), mr = median(ratio, rounds);
        double multiply_adds = 0;  // of one activation row through the workload
        for (int i = 0; i < wl->n; i++) multiply_adds += (double)wl->m[i].n_out * wl->m[i].n_in;
        printf("| %s | %s | %d | %.1f | %.1f | %.1f | %.2f [%.2f–%.2f] | %.2f | %.1f, %.1f |\n", format, wl->name,
               threads, mb * 1e6, mn * 1e6, (double)wl->bytes / mn / 1e9, mr, ratio[0], ratio[rounds - 1],
               t_base[0] / t_new[0], T * multiply_adds / t_base[0] / 1e9, T * multiply_adds / t_new[0] / 1e9);
        fflush(stdout);
        free(from_base);
        free(from_new);
        pool_free(pool);
    }
}

// The variant's own matmuls, which this CPU must run.
static const Kernels *variant(const char *isa) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int i = 0; i < n; i++)
        if (strcmp(list[i]->name, isa) == 0) return list[i];
    return NULL;
}

// Whether `format` is in the comma-separated list.
static bool listed(const char *list, const char *format) {
    const size_t n = strlen(format);
    for (const char *at = list; at; at = strchr(at, ',') ? strchr(at, ',') + 1 : NULL)
        if (strncmp(at, format, n) == 0 && (at[n] == ',' || at[n] == '\0')) return true;
    return false;
}

// A whole number in [low, high] from `text`, or -1.
static int number_in(const char *text, int low, int high) {
    char *end;
    const long v = strtol(text, &end, 10);
    return end != text && *end == '\0' && v >= low && v <= high ? (int)v : -1;
}

// The plan from the options after FORMATS (argv[first..]); false, having said which option is wrong, if one is.
static bool read_options(Plan *plan, int argc, char **argv, int first) {
    int only = -1, rounds = 0, threads = 0, chunks = 1;
    char said[ERR_QUOTE_LEN + 4];  // an option or value quoted in a message, escaped (err_escape)
    for (int a = first; a < argc; a++) {
        const bool valued = a + 1 < argc;
        if (strcmp(argv[a], "l2") == 0) {
            only = IN_THE_L2;
        } else if (strcmp(argv[a], "--workload") == 0 && valued) {
            only = -1;
            for (int w = 0; w < N_WORKLOADS; w++)
                if (strcmp(argv[a + 1], WORKLOAD_WORDS[w]) == 0) only = w;
            if (only < 0) {
                fprintf(stderr, "matmul_ab: --workload is l2, memory or layers, not %s\n",
                        err_escape(said, sizeof said, argv[a + 1]));
                return false;
            }
            a++;
        } else if (strcmp(argv[a], "--rounds") == 0 && valued) {
            if ((rounds = number_in(argv[++a], 1, MAX_ROUNDS)) < 0) {
                fprintf(stderr, "matmul_ab: --rounds is a whole number in 1..%d, not %s\n", MAX_ROUNDS,
                        err_escape(said, sizeof said, argv[a]));
                return false;
            }
        } else if (strcmp(argv[a], "--threads") == 0 && valued) {
            if ((threads = number_in(argv[++a], 1, MAX_THREADS)) < 0) {
                fprintf(stderr, "matmul_ab: --threads is a whole number in 1..%d, not %s\n", MAX_THREADS,
                        err_escape(said, sizeof said, argv[a]));
                return false;
            }
        } else if (strcmp(argv[a], "--chunks") == 0 && valued) {
            if ((chunks = number_in(argv[++a], 1, MAX_CHUNKS)) < 0) {
                fprintf(stderr, "matmul_ab: --chunks is a whole number in 1..%d, not %s\n", MAX_CHUNKS,
                        err_escape(said, sizeof said, argv[a]));
                return false;
            }
        } else {
            fprintf(stderr, "matmul_ab: unknown option %s (l2, --workload W, --rounds N, --threads N, --chunks N)\n",
                    err_escape(said, sizeof said, argv[a]));
            return false;
        }
    }
    for (int w = 0; w < N_WORKLOADS; w++) plan->workload[w] = only < 0 || only == w;
    plan->rounds = rounds ? rounds : only == IN_THE_L2 ? L2_ROUNDS : ROUNDS;
    plan->first_threads = threads ? threads : 1, plan->last_threads = threads ? threads : 2;
    plan->chunks = chunks;
    return true;
}

int main(int argc, char **argv) {
    const char *isa = argc > 2 ? argv[2] : "avx512", *formats = argc > 4 ? argv[4] : "q4,q8";
    const int T = argc > 3 ? atoi(argv[3]) : 1;
    const Kernels *k = variant(isa);
    MatmulQ8Fn *const base[N_FORMATS] = {base_q4_matmul, base_q8_matmul, base_q4_k_matmul, base_q5_k_matmul,
                                         base_q6_k_matmul};
    bool known = k != NULL;
    for (int f = 0; f < N_FORMATS; f++) known &= !listed(formats, FORMATS[f].name) || base[f];
    if (T < 1 || T > MAX_T || !known) {
        fprintf(stderr, "matmul_ab: usage: matmul_ab BASE avx512|avx2|avxvnni T (1..%d) q4,q8,q4_k,q5_k,q6_k "
                "[OPTIONS]: a variant this CPU runs, formats whose base run.sh built\n", MAX_T);
        return 2;
    }
    Plan plan;
    if (!read_options(&plan, argc, argv, 5)) return 2;
    // The L2's workload alone: short rounds, many of them (L2_ROUNDS unless --rounds says otherwise).
    const bool l2_only = !plan.workload[FROM_MEMORY] && !plan.workload[LAYERS];
    float *x = malloc(sizeof(float) * MAX_T * MAX_IN);  // activation rows [T, MAX_IN]; a matrix of n_in < MAX_IN
                                                        // takes each row's first blocks
    for (int i = 0; i < MAX_T * MAX_IN; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
    Q8Block *xq = aligned_alloc(64, sizeof(Q8Block) * MAX_T * (size_t)q8_blocks(MAX_IN));
    k->quantize_q8(xq, x, T, MAX_IN, MAX_IN);
    printf("%s matmuls at T = %d, %s (base) against this build (new); %d rounds alternating, each the mean of "
           "its passes; each thread's share in %d chunk%s, evens first\n\n| format | workload | threads | base µs | "
           "new µs | new GB/s | base / new | fastest base / fastest new | fastest G multiply-adds/s, base, new |\n"
           "|---|---|---:|---:|---:|---:|---:|---:|---:|\n",
           isa, T, argc > 1 ? argv[1] : "base", plan.rounds, plan.chunks, plan.chunks == 1 ? "" : "s");
    for (int f = 0; f < N_FORMATS; f++) {
        if (!listed(formats, FORMATS[f].name)) continue;
        const WeightType type = FORMATS[f].type;
        Workload wl[N_WORKLOADS] = {
            [IN_THE_L2] = {.name = "[1024, 1024] in the L2", .reps = l2_only ? (40 + T - 1) / T : 2000 / T},
            [FROM_MEMORY] = {.name = "[32768, 4096] from memory", .reps = 4},
            [LAYERS] = {.name = "16 Llama-3.2-1B layers", .reps = 2}};
        if (plan.workload[IN_THE_L2]) add_matrix(&wl[IN_THE_L2], type, 1024, 1024);
        if (plan.workload[FROM_MEMORY]) add_matrix(&wl[FROM_MEMORY], type, 32768, 4096);
        for (int layer = 0; layer < (plan.workload[LAYERS] ? 16 : 0); layer++) {
            add_matrix(&wl[LAYERS], type, 3072, 2048);
            add_matrix(&wl[LAYERS], type, 2048, 2048);
            add_matrix(&wl[LAYERS], type, 16384, 2048);
            add_matrix(&wl[LAYERS], type, 2048, 8192);
        }
        for (int i = 0; i < N_WORKLOADS; i++) {
            if (wl[i].n) measure(&wl[i], FORMATS[f].name, base[f], quantized_matmul(k, type), xq, T, &plan);
            for (int j = 0; j < wl[i].n; j++) munmap(wl[i].m[j].w, wl[i].m[j].bytes), free(wl[i].m[j].out);
        }
    }
    free(x);
    free(xq);
    return 0;
}
