// measure.c — timing, summaries, measurement in rounds, and the progress bar (see bench.h).
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

// ---- summaries ----------------------------------------------------------------------------------------------

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

Summary summarize(const double *v, int n) {
    if (n <= 0) return (Summary){0};
    double *sorted = malloc(sizeof(double) * n);
    if (!sorted) die("out of memory");
    memcpy(sorted, v, sizeof(double) * n);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_doubles);
    Summary s = {n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]), sorted[0], sorted[n - 1], n};
    free(sorted);
    return s;
}

Summary summarize_ratio(const double *num, const double *den, int n) {
    double *ratio = malloc(sizeof(double) * (n > 0 ? n : 1));
    if (!ratio) die("out of memory");
    for (int i = 0; i < n; i++) ratio[i] = num[i] / den[i];
    Summary s = summarize(ratio, n);
    free(ratio);
    return s;
}

Summary summary_scaled(Summary s, double factor) {
    return (Summary){s.median * factor, s.min * factor, s.max * factor, s.n};
}

Summary summary_inverse(Summary s, double numerator) {  // a decreasing map: the range's ends swap
    return (Summary){numerator / s.median, numerator / s.max, numerator / s.min, s.n};
}

// ---- rounds -------------------------------------------------------------------------------------------------

// The mean cost of `calls` calls.
static double sample(const Trial *t, int rep, int calls) {
    double sum = 0;
    for (int c = 0; c < calls; c++) sum += t->run(t->ctx, rep);
    return sum / calls;
}

void measure_rounds(Bench *b, const char *label, const Trial *trials, int k, int reps, double min_seconds,
                    double *values) {
    // Warm-up, then (when samples have a minimum length) one timed call per trial to decide how many calls a
    // sample needs.
    int *calls = malloc(sizeof(int) * k);
    if (!calls) die("out of memory");
    for (int i = 0; i < k; i++) {
        trials[i].run(trials[i].ctx, 0);
        calls[i] = 1;
        if (min_seconds <= 0) continue;
        double t0 = now_seconds();
        trials[i].run(trials[i].ctx, 0);
        double once = now_seconds() - t0;
        calls[i] = once >= min_seconds ? 1 : (int)fmin(ceil(min_seconds / fmax(once, 1e-9)), 1e6);
    }
    for (int r = 0; r < reps; r++) {
        for (int j = 0; j < k; j++) {
            int i = (r + j) % k;
            values[(size_t)i * reps + r] = sample(&trials[i], r, calls[i]);
            progress_show(&b->progress, label, (double)(r * k + j + 1) / (reps * k));
        }
    }
    b->progress.step++;
    free(calls);
}

// ---- progress -----------------------------------------------------------------------------------------------

static void progress_start(Progress *p, const char *suite, int steps) {
    *p = (Progress){.suite = suite, .steps = steps, .start = now_seconds(), .tty = isatty(STDERR_FILENO)};
    progress_show(p, "", 0);
}

void progress_show(Progress *p, const char *label, double part) {
    double done = p->steps > 0 ? (p->step + part) / p->steps : 1;
    done = done < 1 ? done : 1;
    int elapsed = (int)(now_seconds() - p->start);
    if (p->tty) {
        enum { WIDTH = 30 };
        char bar[WIDTH + 1];
        for (int i = 0; i < WIDTH; i++) bar[i] = i < (int)(done * WIDTH) ? '#' : '.';
        bar[WIDTH] = '\0';
        fprintf(stderr, "\r\033[K%-11s [%s] %3d%% %3d s  %.60s", p->suite, bar, (int)(done * 100), elapsed, label);
    } else if (elapsed >= p->printed + 15) {
        p->printed = elapsed;
        fprintf(stderr, "%s: %d%% after %d s (%s)\n", p->suite, (int)(done * 100), elapsed, label);
    }
    fflush(stderr);
}

static void progress_end(Progress *p) {
    if (p->tty) fprintf(stderr, "\r\033[K");
    fprintf(stderr, "%s: done in %.0f s\n", p->suite, now_seconds() - p->start);
}

// ---- suites -------------------------------------------------------------------------------------------------

// Seconds of a fixed chain of dependent multiply-adds on this thread (about 20 ms): the machine's speed now.
static double probe_seconds(void) {
    double x = 1.0, t0 = now_seconds();
    for (int i = 0; i < 5000000; i++) x = x * 1.0000001 + 1e-9;
    volatile double sink = x;
    (void)sink;
    return now_seconds() - t0;
}

static double probe(Bench *b) {
    double seconds = probe_seconds();
    b->probe_best = b->probe_best > 0 && b->probe_best < seconds ? b->probe_best : seconds;
    return seconds;
}

// The 1-minute load average, −1 where getloadavg fails.
static double load_average(void) {
    double load;
    return getloadavg(&load, 1) == 1 ? load : -1.0;
}

void suite_begin(Bench *b, const char *name, int steps) {
    b->probe_begin = probe(b);
    b->load_begin = load_average();
    progress_start(&b->progress, name, steps);
}

// The load average at the suite's start and end, beside its figures: other work on the cores inflates speed-ups
// (a memory-bound target-only run whose threads are preempted slows more than a speculative one). The end's
// includes up to the pool's size of this run's own threads, which is taken off before comparing with
// LOAD_WARNING per core.
static void record_load(Bench *b, json_t *j) {
    const double end = load_average(), cores = (double)sysconf(_SC_NPROCESSORS_ONLN);
    const double others = fmax(b->load_begin, end - pool_size(b->pool));
    json_object_set_new(j, "load_average", json_pack("{s:f, s:f, s:f}", "begin", b->load_begin, "end", end,
                                                     "cores", cores));
    if (others > LOAD_WARNING * cores)
        out(b, "\n**Warning**: the load average was %.2f at the start of this suite and %.2f at its end (this run's "
               "own %d threads count in the latter), on %.0f cores: other work shared the machine, and speed-ups "
               "measured now read high.\n", b->load_begin, end, pool_size(b->pool), cores);
    else
        out(b, "\nLoad average %.2f at the start, %.2f at the end (this run's own %d threads count in the latter), "
               "on %.0f cores.\n", b->load_begin, end, pool_size(b->pool), cores);
}

void suite_end(Bench *b, json_t *j) {
    const double end_seconds = probe(b);
    const double begin = b->probe_best / b->probe_begin, end = b->probe_best / end_seconds;
    json_object_set_new(j, "machine_speed", json_pack("{s:f, s:f}", "begin", begin, "end", end));
    if (begin < 0.75 || end < 0.75)
        out(b, "\n**Warning**: the machine ran at %.0f%% (start) and %.0f%% (end) of its best speed in this run during "
               "this suite: something else slowed it down, and these figures are not representative.\n",
            100 * begin, 100 * end);
    record_load(b, j);
    json_object_set_new(b->results, b->progress.suite, j);
    progress_end(&b->progress);
}
