// float_ab.c — the AVX2 (or AVX-512) F32, F16 and BF16 matmuls of this build against an earlier commit's (run.sh
// builds them; the variant is the fourth argument),
// in one process, one thread: for each workload and type, A and B alternate ROUNDS times, each timed in the thread's
// CPU time (less disturbed than wall time by other processes on a shared machine), the ratio new / base taken
// within the round; prints medians [min–max], and whether both gave the same bits (they should, from a base that
// has the canonical order, e54d4c1 or later; from an earlier one, at n_in ≤ MATMUL_CHUNK only).
//   large, from memory:  [8192, 4096] (128 MB in F32), T = 1 and 8 (a decode step, a verification)
//   in the caches:       [1024, 1024], T = 8
//   in the L3:           [8192, 384] (12.6 MB in F32: the shipped target's LM head), T = 8
//   GPT-2's MLP prompt:  [3072, 768] and [768, 3072], T = 512
//   from memory, "x at one address": [8192, 4096] at T = 8 with its 8 activation rows all read from one row's
//                        memory (a row stride of 0, passed at run time: the same instructions, an eighth of the
//                        activations' footprint), beside the plain T = 8 row: how much of a verification's time
//                        from memory the activations' traffic through the caches costs (docs/kernels.md)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels.h"

// the earlier commit's tables; their matmul[] at BASE_MATMUL_OFFSET
extern const char base_kernels_avx2[], base_kernels_avx512[];

static int ascending(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint32_t lcg_state = 1;
static float random_unit(void) {  // in [−0.5, 0.5)
    lcg_state = lcg_state * 1664525u + 1013904223u;
    return (float)(lcg_state >> 8) * 0x1p-24f - 0.5f;
}

typedef struct {
    const char *name;
    int n_out, n_in, T, reps;  // reps: products per timing
    bool one_address;          // every activation row read from the first's memory (ld_x = 0)
} Workload;

// Seconds of this thread's CPU time for `reps` products out = x Wᵀ with fn.
static double seconds_of(MatmulFn *fn, const Workload *wl, float *out, const float *x, const void *w) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    const int ld_x = wl->one_address ? 0 : wl->n_in;
    for (int i = 0; i < wl->reps; i++) fn(out, x, w, NULL, wl->T, wl->n_in, ld_x, wl->n_out, 0, wl->n_out);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

int main(int argc, char **argv) {
    const int rounds = argc > 2 ? atoi(argv[2]) : 11;
    const char *filter = argc > 3 ? argv[3] : "";
    const char *isa = argc > 4 ? argv[4] : "avx2";
    if (rounds < 1 || rounds > 101) return fprintf(stderr, "float_ab: ROUNDS must be in [1, 101]\n"), 2;
    if (strcmp(isa, "avx2") != 0 && strcmp(isa, "avx512") != 0)
        return fprintf(stderr, "float_ab: ISA must be avx2 or avx512, not '%s'\n", isa), 2;
    const bool avx512 = strcmp(isa, "avx512") == 0;
    const Kernels *now = avx512 ? &kernels_avx512 : &kernels_avx2;
    const char *base_table = avx512 ? base_kernels_avx512 : base_kernels_avx2;
    MatmulFn *const *base = (MatmulFn *const *)(base_table + BASE_MATMUL_OFFSET);
    const Workload workloads[] = {{"[8192, 4096] T=1", 8192, 4096, 1, 2},   {"[8192, 4096] T=8", 8192, 4096, 8, 1},
                                  {"[1024, 1024] T=8", 1024, 1024, 8, 40},  {"[8192, 384] T=8", 8192, 384, 8, 10},
                                  {"[3072, 768] T=512", 3072, 768, 512, 1},
                                  {"[768, 3072] T=512", 768, 3072, 512, 1},
                                  {"[8192, 4096] T=8, x at one address", 8192, 4096, 8, 1, true}};
    const char *type_names[WEIGHT_TYPES] = {"F32", "F16", "BF16"};
    printf("%s matmuls, one thread, %s (base) against this build (new): %d rounds alternating\n\n"
           "| weights | workload | base ms | new ms | new / base | same bits |\n|---|---|---:|---:|---:|---|\n",
           avx512 ? "AVX-512" : "AVX2", argc > 1 ? argv[1] : "base", rounds);
    for (size_t i = 0; i < sizeof workloads / sizeof *workloads; i++)
        for (int type = 0; type < WEIGHT_TYPES; type++) {
            const Workload *wl = &workloads[i];
            char label[96];
            snprintf(label, sizeof label, "%s %s", type_names[type], wl->name);
            if (!strstr(label, filter)) continue;
            // Any bits do for timing: random values, F16 and BF16 ones small normals, in the panel layout's size.
            const size_t elements = weight_elements(true, wl->n_out, wl->n_in);
            void *w = aligned_alloc(64, (elements * (type == WEIGHT_F32 ? 4 : 2) + 63) / 64 * 64);
            for (size_t e = 0; e < elements; e++)
                if (type == WEIGHT_F32) ((float *)w)[e] = random_unit();
                else if (type == WEIGHT_BF16) ((uint16_t *)w)[e] = f32_to_bf16(random_unit());
                else ((uint16_t *)w)[e] = (uint16_t)(0x3000 | (lcg_state = lcg_state * 1664525u + 1013904223u) >> 16 & 0x83ff);
            float *x = malloc(sizeof(float) * (size_t)wl->T * wl->n_in);
            float *out_base = malloc(sizeof(float) * (size_t)wl->T * wl->n_out);
            float *out_new = malloc(sizeof(float) * (size_t)wl->T * wl->n_out);
            for (size_t e = 0; e < (size_t)wl->T * wl->n_in; e++) x[e] = random_unit();
            double t_base[101], t_new[101], ratio[101];
            for (int r = 0; r < rounds; r++) {
                const bool base_first = r % 2 == 0;
                const double a = seconds_of(base_first ? base[type] : now->matmul[type], wl,
                                            base_first ? out_base : out_new, x, w);
                const double b = seconds_of(base_first ? now->matmul[type] : base[type], wl,
                                            base_first ? out_new : out_base, x, w);
                t_base[r] = base_first ? a : b, t_new[r] = base_first ? b : a;
                ratio[r] = t_new[r] / t_base[r];
            }
            const bool same = memcmp(out_base, out_new, sizeof(float) * (size_t)wl->T * wl->n_out) == 0;
            qsort(t_base, (size_t)rounds, sizeof(double), ascending);
            qsort(t_new, (size_t)rounds, sizeof(double), ascending);
            qsort(ratio, (size_t)rounds, sizeof(double), ascending);
            printf("| %s | %s | %.2f | %.2f | %.3f [%.3f–%.3f] | %s |\n", type_names[type], wl->name,
                   t_base[rounds / 2] * 1e3 / wl->reps, t_new[rounds / 2] * 1e3 / wl->reps, ratio[rounds / 2], ratio[0],
                   ratio[rounds - 1], same ? "yes" : "no");
            fflush(stdout);
            free(w), free(x), free(out_base), free(out_new);
        }
    return 0;
}
