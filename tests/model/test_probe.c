// test_probe.c — the draft's thread count (model/probe.h): the choice prefers fewer threads unless more are at
// least PROBE_MARGIN faster, and the probe returns one of the counts it times (up to the model's max_threads) and
// leaves the model as it was.
#include <stdlib.h>

#include "harness.h"
#include "model/probe.h"
#include "random_checkpoint.h"

TEST(probe_choice_prefers_fewer_threads) {
    const int counts[] = {1, 2, 4, 8, 16};
    static const struct {
        double median[5];
        int want;
        const char *says;
    } cases[] = {
        {{1.0, 1.0, 1.0, 1.0, 1.0}, 1, "all tie: the fewest"},
        {{1.0, 0.9, 0.88, 0.87, 0.86}, 1, "each within the margin of 1 thread's"},
        {{1.0, 0.5, 0.25, 0.125, 0.0625}, 16, "each count twice as fast"},
        {{1.0, 0.84, 0.8, 0.75, 0.72}, 2, "2 clearly faster, the rest within the margin of 2's"},
        {{1.0, 0.9, 0.8, 0.9, 1.2}, 4, "4 clearly faster than 1, 2 not; more slower again"},
        {{1.0, 1.5, 2.0, 0.9, 3.0}, 1, "8 faster, but not by the margin"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int got = probe_choose_threads(counts, cases[c].median, 5);
        CHECK(got == cases[c].want, "%s: chose %d threads, want %d", cases[c].says, got, cases[c].want);
    }
    CHECK(probe_choose_threads(counts, (double[]){2.0}, 1) == 1, "one count: that one");
}

TEST(probe_returns_a_timed_count_and_restores_the_model) {
    char dir[] = "/tmp/specdec-probe-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    Err err;
    const RandomCheckpoint spec = {.n_layer = 2, .n_embd = 64, .n_head = 4, .vocab_size = 96, .n_positions = 20,
                                   .scale = 0.1f, .seed = 3};  // a context shorter than the probe's 16 + 8
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    ThreadPool *pool = pool_create(2, &err);
    Model m;
    if (pool && model_load(&m, dir, pool, &err) == 0) {
        double median = -1;
        const int n = probe_fastest_threads(&m, &median, &err);
        CHECK(n == 1 || n == 2, "probe: %d threads (%s)", n, n < 0 ? err.msg : "not 1 or 2");
        CHECK(median > 0, "probe: a median step of %g s", median);
        CHECK(m.max_threads == 2, "probe left max_threads at %d, not the 2 it found", m.max_threads);
        m.max_threads = 1;
        CHECK(probe_fastest_threads(&m, NULL, &err) == 1, "at most 1 thread: not 1");
        model_free(&m);
    } else {
        CHECK(false, "%s", err.msg);
    }
    if (pool) pool_free(pool);
    random_checkpoint_remove(dir);
}
