// attention_ab.c — the attention over a Llama-3.2-1B-shaped KV cache (16 layers, 32 query heads in 8 groups of
// 4, hd 64, 1000 positions), in one process: A = the kernel before grouped-query attention, called once per query
// row (each query head re-reads its KV head's keys and values); B = Kernels.attention called once per KV head
// with all its group's rows (× T tokens). One thread, A and B alternating, medians of 21. Build and run with
// tools/attention_ab/run.sh.
#include "kernels.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
// The previous kernel tables (run.sh builds them, renamed); their attention field sits at OLD_ATTENTION_OFFSET.
extern const char old_kernels_avx2[], old_kernels_avx512[];
typedef void OldAttention(float *out, const float *q, const float *kt, int ld_k, const float *v, float *scores, int S, int hd, float scale);
int main(int argc, char **argv) {
    const int L = 16, Hkv = 8, group = 4, hd = 64, P = 1024, pos0 = 1000, T = argc > 1 ? atoi(argv[1]) : 1, REPS = 21;
    const char *why; const Kernels *k = kernels_select(&why);
    const char *oldtab = strcmp(k->name, "avx512") == 0 ? old_kernels_avx512 : old_kernels_avx2;
    OldAttention *old = *(OldAttention *const *)(oldtab + OLD_ATTENTION_OFFSET);
    const int ld_k = (int)row_stride(P), rows = group * T;
    float *K = malloc(sizeof(float) * (size_t)L * Hkv * hd * ld_k), *V = malloc(sizeof(float) * (size_t)L * Hkv * P * hd);
    for (size_t i = 0; i < (size_t)L * Hkv * hd * ld_k; i++) K[i] = (float)rand() / RAND_MAX - 0.5f;
    for (size_t i = 0; i < (size_t)L * Hkv * P * hd; i++) V[i] = (float)rand() / RAND_MAX - 0.5f;
    float *q = malloc(sizeof(float) * rows * hd), *out = malloc(sizeof(float) * rows * hd), *scores = malloc(sizeof(float) * rows * P);
    for (int i = 0; i < rows * hd; i++) q[i] = (float)rand() / RAND_MAX - 0.5f;
    int S[64]; for (int g = 0; g < rows; g++) S[g] = pos0 + g / group + 1;
    double ta[REPS], tb[REPS];
    for (int r = 0; r < REPS; r++) {
        for (int ab = 0; ab < 2; ab++) {
            double t0 = now();
            for (int l = 0; l < L; l++) for (int h = 0; h < Hkv; h++) {
                const float *kt = K + ((size_t)l * Hkv + h) * hd * ld_k, *v = V + ((size_t)l * Hkv + h) * P * hd;
                if (ab == 0) for (int g = 0; g < rows; g++) old(out + g * hd, q + g * hd, kt, ld_k, v, scores, S[g], hd, 0.125f);
                else k->attention(out, hd, q, hd, S, NULL, rows, kt, ld_k, v, hd, 0.125f, scores, P);
            }
            (ab == 0 ? ta : tb)[r] = now() - t0;
        }
    }
    qsort(ta, REPS, sizeof(double), cmp); qsort(tb, REPS, sizeof(double), cmp);
    printf("%s T=%d S=%d: before (per query row) %.3f ms, grouped %.3f ms per token-step (all 16 layers); ratio %.2f\n", k->name, T, pos0, ta[REPS/2]*1e3, tb[REPS/2]*1e3, ta[REPS/2]/tb[REPS/2]);
    return 0;
}
