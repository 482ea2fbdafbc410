// placement_probe.c — where the host has put two CPUs: the round trip of a cache line between a thread on each.
//
//   cc -O2 -pthread -o placement_probe tools/placement_probe.c && ./placement_probe [CPU_A CPU_B]
//
// Two threads, pinned to CPU_A and CPU_B (default 0 and 1), hand a counter back and forth through one cache line:
// A writes n, B waits to see it and writes n + 1, A waits to see that (src/base/round_trip.h, shared with run-bench).
// A round trip is two transfers of the line between the CPUs' caches, so its time says how far apart they sit: on
// this project's 2-vCPU Zen 5 VM it read
// 83–88 ns where the host ran both in one core complex (they share an L3) and 353–395 ns where it ran them in two
// (docs/performance-history.md, "The side-by-side by placement"). Prints one line, the median over ROUNDS rounds of
// TRIPS round trips each: `round_trip_ns 87.1` on stdout. run-bench's threads suite times the same inside its own
// pool (round_trip_run, bench/threads.c); this stands alone so that tools/vs_llamacpp.sh can run it around
// llama.cpp's turns as around specdec's. Errors: one line on stderr, exit 2.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../src/base/round_trip.h"

enum { ROUNDS = 15, TRIPS = 2000 };

typedef struct {
    _Alignas(64) atomic_long line;  // the cache line handed back and forth
    long answers;                   // how many values the answering thread answers
} Shared;

static cpu_set_t only(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return set;
}

// Thread B: answers every round's round trips.
static void *answer(void *arg) {
    Shared *s = arg;
    cache_line_round_trips(&s->line, true, 1, s->answers);
    return NULL;
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int cpu_argument(const char *text, const char *name) {
    char *end;
    const long cpu = strtol(text, &end, 10);
    if (end == text || *end || cpu < 0 || cpu >= CPU_SETSIZE) {
        fprintf(stderr, "placement_probe: %s: expected a CPU number, got \"%.40s\"\n", name, text);
        exit(2);
    }
    return (int)cpu;
}

int main(int argc, char **argv) {
    if (argc != 1 && argc != 3) {
        fprintf(stderr, "placement_probe: usage: placement_probe [CPU_A CPU_B]\n");
        return 2;
    }
    const int cpu_a = argc == 3 ? cpu_argument(argv[1], "CPU_A") : 0;
    const int cpu_b = argc == 3 ? cpu_argument(argv[2], "CPU_B") : 1;
    if (cpu_a == cpu_b) {
        fprintf(stderr, "placement_probe: CPU_A and CPU_B are both %d: the probe needs two CPUs\n", cpu_a);
        return 2;
    }
    const cpu_set_t set_a = only(cpu_a), set_b = only(cpu_b);
    if (pthread_setaffinity_np(pthread_self(), sizeof set_a, &set_a)) {
        fprintf(stderr, "placement_probe: CPU_A: cannot run on CPU %d (not one this process may use)\n", cpu_a);
        return 2;
    }
    static Shared s = {.answers = (long)ROUNDS * TRIPS};
    pthread_attr_t on_b;
    pthread_t b;
    if (pthread_attr_init(&on_b) || pthread_attr_setaffinity_np(&on_b, sizeof set_b, &set_b) ||
        pthread_create(&b, &on_b, answer, &s)) {
        fprintf(stderr, "placement_probe: CPU_B: cannot start a thread on CPU %d (not one this process may use)\n",
                cpu_b);
        return 2;
    }
    double per_trip[ROUNDS];
    long n = 1;
    for (int r = 0; r < ROUNDS; r++) {
        const double start = now_ns();
        cache_line_round_trips(&s.line, false, n, TRIPS);
        n += 2L * TRIPS;
        per_trip[r] = (now_ns() - start) / TRIPS;
    }
    pthread_join(b, NULL);
    qsort(per_trip, ROUNDS, sizeof per_trip[0], by_value);
    printf("round_trip_ns %.1f\n", per_trip[ROUNDS / 2]);
    return 0;
}
