// harness.h — the test runner's few pieces.
//
//   TEST(name) { ... CHECK(cond, "fmt", ...); ... }
//
// Tests register themselves at start-up; the runner (harness.c) runs each one in a child process, so a crash is
// reported as that test's failure, and ends with the line "N passed, N failed" (exit status 1 if any failed).
// `build/tests PATTERN` runs only the tests whose name contains PATTERN.
#ifndef SPECDEC_HARNESS_H
#define SPECDEC_HARNESS_H

#include <stddef.h>
#include <stdint.h>

typedef void (*TestFn)(void);
void test_register(const char *name, TestFn fn);

// Records a failure of the running test (the test goes on, so that one run shows every broken check).
void test_fail(const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int test_failures(void);  // failures so far in the running test

#define TEST(name)                                                                  \
    static void test_##name(void);                                                  \
    __attribute__((constructor)) static void register_##name(void) {               \
        test_register(#name, test_##name);                                          \
    }                                                                               \
    static void test_##name(void)

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                    \
    } while (0)

// Runs `sh -c command`, captures stdout and stderr (each NUL-terminated, malloc'd, caller frees) and returns the
// exit status (or 128 + signal number). Used by the CLI tests.
int run_command(const char *command, char **out, char **err);

// Path of the specdec binary under test: $SPECDEC_BIN, else "build/release/specdec".
const char *specdec_bin(void);

// Runs `specdec ARGS` (specdec_bin) through sh, as run_command does.
int run_specdec(const char *args, char **out, char **err);

// The number of lines in s: its newlines.
int count_lines(const char *s);

// A small deterministic generator for test inputs: xorshift64*, seeded per test from the test's name and
// $TEST_SEED (default: a fresh seed printed at start, so that every run sees new inputs and a failure can be
// replayed).
uint64_t test_rand_u64(void);
float test_rand_uniform(float lo, float hi);
int test_rand_int(int lo, int hi);  // inclusive

// Upper quantile of the chi-square distribution with k degrees of freedom at tail probability 1e-4
// (Wilson–Hilferty: χ² ≈ k (1 − 2/(9k) + z √(2/(9k)))³, z = 3.719 for 1e-4): the critical value of the sampling
// tests, which a correct sampler exceeds once in 10^4 calls.
double chi_square_critical(int k);

// The forward pass's error measure against a reference (why, in tests/model/test_forward.c): logit a against the
// reference b, in a reference row of logits whose largest magnitude is row_max:
//     err = |a − b| / max(|b|, 0.1 · row_max)
// and the tolerance the fixtures and the shipped weights are held to.
#define LOGIT_TOLERANCE 1e-4
double logit_row_max(const float *want, int V);  // max_j |want_j|
double logit_error(float got, float want, double row_max);

// A prompt that repeats itself, so that the n-gram lookup proposes runs from its first round: as C text, for a
// command line's -p '…', and as a JSON string's contents, for a request's "prompt".
#define REPEATING "for i in range(10):\n    print(i)\nfor i in range(10):\n    print(i)\nfor i in range(10):\n"
#define REPEATING_JSON \
    "for i in range(10):\\n    print(i)\\nfor i in range(10):\\n    print(i)\\nfor i in range(10):\\n"

#endif
