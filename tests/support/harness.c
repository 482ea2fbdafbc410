// harness.c — registers tests, runs each in a child process, prints one line per test and the summary line.
#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_TESTS = 1024 };

static struct {
    const char *name;
    TestFn fn;
} tests[MAX_TESTS];
static int n_tests;
static int n_failures;      // in the running test (child process)
static uint64_t rng_state;  // per test

void test_register(const char *name, TestFn fn) {
    if (n_tests == MAX_TESTS) {
        fprintf(stderr, "harness: more than %d tests\n", MAX_TESTS);
        exit(1);
    }
    tests[n_tests].name = name;
    tests[n_tests].fn = fn;
    n_tests++;
}

void test_fail(const char *file, int line, const char *fmt, ...) {
    n_failures++;
    if (n_failures > 10) return;  // the first few failures tell the story
    fprintf(stderr, "    %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int test_failures(void) { return n_failures; }

uint64_t test_rand_u64(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

float test_rand_uniform(float lo, float hi) {
    return lo + (hi - lo) * (float)((test_rand_u64() >> 40) * 0x1.0p-24);
}

int test_rand_int(int lo, int hi) { return lo + (int)(test_rand_u64() % (uint64_t)(hi - lo + 1)); }

double chi_square_critical(int k) {
    const double h = 2.0 / (9.0 * k);
    return k * pow(1.0 - h + 3.719 * sqrt(h), 3);
}

const char *specdec_bin(void) {
    const char *bin = getenv("SPECDEC_BIN");
    return bin && *bin ? bin : "build/release/specdec";
}

static char *read_all(FILE *f) {
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len < 2) buf = realloc(buf, cap *= 2);
    }
    if (buf) buf[len] = '\0';
    return buf;
}

int run_command(const char *command, char **out, char **err) {
    char err_path[] = "/tmp/specdec-test-XXXXXX";
    int err_fd = mkstemp(err_path);
    if (err_fd < 0) return -1;
    char *full = NULL;
    if (asprintf(&full, "(%s) 2>%s", command, err_path) < 0) return -1;
    FILE *p = popen(full, "r");
    free(full);
    char *o = p ? read_all(p) : NULL;
    int status = p ? pclose(p) : -1;
    FILE *e = fdopen(err_fd, "r");
    char *ee = e ? read_all(e) : NULL;
    if (e) fclose(e);
    unlink(err_path);
    if (out) *out = o; else free(o);
    if (err) *err = ee; else free(ee);
    if (status == -1) return -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

int run_specdec(const char *args, char **out, char **err) {
    char *command;
    if (asprintf(&command, "%s %s", specdec_bin(), args) < 0) return -1;
    int status = run_command(command, out, err);
    free(command);
    return status;
}

int count_lines(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++) n += *p == '\n';
    return n;
}

static uint64_t seed_for(const char *name, uint64_t base) {
    uint64_t h = base ^ 0x9E3779B97F4A7C15ULL;
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001B3ULL;
    return h ? h : 1;
}

int main(int argc, char **argv) {
    const char *pattern = argc > 1 ? argv[1] : NULL;
    const char *seed_env = getenv("TEST_SEED");
    uint64_t base_seed = seed_env ? strtoull(seed_env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    printf("test seed: TEST_SEED=%llu\n", (unsigned long long)base_seed);
    int passed = 0, failed = 0;
    for (int i = 0; i < n_tests; i++) {
        if (pattern && !strstr(tests[i].name, pattern)) continue;
        fflush(stdout);
        fflush(stderr);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pid_t pid = fork();
        if (pid == 0) {
            rng_state = seed_for(tests[i].name, base_seed);
            tests[i].fn();
            fflush(stdout);
            fflush(stderr);
            _exit(n_failures ? 1 : 0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            passed++;
            printf("PASS %s (%.0f ms)\n", tests[i].name, ms);
        } else {
            failed++;
            if (WIFSIGNALED(status))
                printf("FAIL %s (killed by signal %d)\n", tests[i].name, WTERMSIG(status));
            else
                printf("FAIL %s\n", tests[i].name);
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

double logit_row_max(const float *want, int V) {
    double row_max = 0;
    for (int j = 0; j < V; j++) row_max = fmax(row_max, fabs(want[j]));
    return row_max;
}

double logit_error(float got, float want, double row_max) {
    return fabs((double)got - want) / fmax(fabs(want), 0.1 * row_max);
}
