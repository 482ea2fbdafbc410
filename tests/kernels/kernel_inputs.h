// kernel_inputs.h — random inputs, output sentinels and the awkward sizes that the kernel tests (test_kernels.c,
// test_q8.c, test_q4.c) share. Every array is allocated at exactly its size, so that AddressSanitizer sees any access past
// the end.
#ifndef SPECDEC_KERNEL_INPUTS_H
#define SPECDEC_KERNEL_INPUTS_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static inline float *random_floats(int n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = test_rand_uniform(lo, hi);
    return x;
}

static inline int random_odd(int lo, int hi) { return 2 * test_rand_int(lo / 2, (hi - 1) / 2) + 1; }

// Output buffers start out full of this value, so that writes outside [j0, j1) show.
static const float UNTOUCHED = -1234.5f;

static inline float *untouched_floats(int n) {
    float *x = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) x[i] = UNTOUCHED;
    return x;
}

static inline bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// Input widths: vector tails, one and several blocks of 32, GPT-2's widths.
static const int n_in_sizes[] = {1, 3, 15, 16, 17, 31, 33, 64, 100, 768 + 5, 2 * 768 + 5, 3072};
// 65 rows of 3072 inputs (780 kB of activations) take the AVX-512 matmul's chunk-by-chunk path (avx512.c).
static const int T_sizes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 33, 65};
enum { N_IN_SIZES = sizeof n_in_sizes / sizeof *n_in_sizes, T_SIZES = sizeof T_sizes / sizeof *T_sizes };

#endif
