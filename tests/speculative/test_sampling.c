// test_sampling.c — sampling.c against an independent reference, and its random numbers.
//
//   - the adjusted distribution (temperature, min-p, top-k with ties, top-p at its boundary and after top-k, greedy)
//     equals tests/support/sampling_reference.c — every token sorted, double sums, transformers' formulation — on
//     random logits and on adversarial ones (all equal, one huge, −inf entries, V = 1), and bad input is rejected;
//   - hand-worked cases, so that the reference is checked too;
//   - the inverse-CDF draw at the edges of [0, 1);
//   - the Gumbel-max draw: the same token as the full race, the law p (chi-square), and the acceptance of two
//     distributions coupled by shared noise against its closed form and Daliri, Musco & Suresh's bound.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "sampling_reference.h"
#include "speculative/sampling.h"

enum { V_MAX = 1024 };

// Probabilities match when |got − want| ≤ 2e-5 · want + 1e-30: the sampler computes (logit − max) / T in float and
// exp with the kernels' polynomial (relative error 2e-7), the reference in double; an exponent of −28 in float is
// off by up to 2e-6, and so is its probability, relatively.
static const double PROB_TOLERANCE = 2e-5;

// A kernel variant this CPU runs, at random: the sampler's row passes are theirs (Kernels.row_range, exp_sum).
static const Kernels *any_kernels(void) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    return list[test_rand_int(0, n - 1)];
}

// Compares sampler_adjust with the reference on one input; returns 1 if a top-p or min-p boundary was too close to call
// (the probabilities are then not compared), else 0. A token of logit −inf must get exactly 0; one whose
// probability underflows (below e^−88 of the top one, where the kernels' exp stops) may get up to 1e-30.
static int check_against_reference(const float *logits, int V, const SamplingParams *params, const char *label) {
    static double got[V_MAX], want[V_MAX];
    Sampler s;
    Err err;
    CHECK(sampler_init(&s, params, V, any_kernels(), &err) == 0, "%s: %s", label, err.msg);
    double margin;
    int rc_want = reference_adjust(want, logits, V, params, &margin);
    int rc_got = sampler_adjust(&s, got, logits);
    sampler_free(&s);
    CHECK(rc_got == rc_want, "%s: sampler_adjust returned %d, the reference %d", label, rc_got, rc_want);
    if (rc_want != 0 || rc_got != 0) return 0;
    const int close_call = margin < 1e-6;
    double sum = 0;
    for (int i = 0; i < V && test_failures() < 5; i++) {
        sum += got[i];
        CHECK(logits[i] > -INFINITY || got[i] == 0, "%s: token %d has logit -inf and p %g", label, i, got[i]);
        if (close_call) continue;
        CHECK(fabs(got[i] - want[i]) <= PROB_TOLERANCE * want[i] + 1e-30,
              "%s (V %d, T %g, k %d, p %g, min-p %g): token %d has p %.9g, reference %.9g", label, V,
              params->temperature, params->top_k, params->top_p, params->min_p, i, got[i], want[i]);
    }
    CHECK(fabs(sum - 1.0) < 1e-12, "%s: the probabilities sum to %.17g", label, sum);
    return close_call;
}

// Logits in one of several shapes: spread widely or narrowly, on a coarse grid (many ties), with −inf entries.
static void random_logits(float *logits, int V) {
    const int shape = test_rand_int(0, 3);
    const float scale = test_rand_uniform(0.5f, 20.0f);
    for (int i = 0; i < V; i++) {
        logits[i] = test_rand_uniform(-scale, scale);
        if (shape == 1) logits[i] = floorf(logits[i] / scale * 3);             // 7 distinct values: ties
        if (shape == 2 && test_rand_int(0, 4) == 0) logits[i] = -INFINITY;   // masked tokens
    }
    if (shape == 2) logits[test_rand_int(0, V - 1)] = 0.0f;  // at least one finite
}

static SamplingParams random_params(int V) {
    static const float temperatures[] = {0.0f, 0.3f, 0.7f, 1.0f, 1.5f};
    static const float top_ps[] = {1.0f, 1.0f, 0.05f, 0.5f, 0.9f, 0.99f};
    SamplingParams p = {temperatures[test_rand_int(0, 4)], 0, top_ps[test_rand_int(0, 5)], 0};
    switch (test_rand_int(0, 4)) {
    case 0: p.top_k = 0; break;
    case 1: p.top_k = 1; break;
    case 2: p.top_k = test_rand_int(1, V); break;
    case 3: p.top_k = V + test_rand_int(0, 3); break;
    default: p.top_k = test_rand_int(1, 8); break;
    }
    if (test_rand_int(0, 3) == 0) p.top_p = test_rand_uniform(0.01f, 1.0f);
    static const float min_ps[] = {0.0f, 0.0f, 0.01f, 0.1f, 0.5f, 1.0f};
    p.min_p = test_rand_int(0, 3) == 0 ? test_rand_uniform(0.0f, 1.0f) : min_ps[test_rand_int(0, 5)];
    return p;
}

TEST(sampling_matches_reference_on_random_logits) {
    static float logits[V_MAX];
    int close_calls = 0, trials = 3000;
    for (int t = 0; t < trials && !test_failures(); t++) {
        const int V = test_rand_int(0, 9) == 0 ? test_rand_int(1, 3) : test_rand_int(1, V_MAX);
        random_logits(logits, V);
        SamplingParams params = random_params(V);
        close_calls += check_against_reference(logits, V, &params, "random");
    }
    // Close calls are few but not rare (top-p's alone: 11 to 32 of 3000 over 150 seeds, mean 21, the grid-shaped
    // logits' ties; with min-p's, 24 to 34 over 6 seeds): the bound is there to catch a test that has stopped
    // deciding, so it sits far above that spread.
    printf("    %d of %d top-p or min-p boundaries too close to call\n", close_calls, trials);
    CHECK(close_calls < trials / 50, "%d of %d top-p or min-p boundaries too close to call", close_calls, trials);
}

// The cases the reference could get wrong in the same way, worked by hand. (Logits such as logf(0.4f) are floats,
// so the probabilities are the worked ones to about 1e-8.)
static void check_exact(const float *logits, int V, const SamplingParams *params, const double *want,
                        const char *label) {
    double got[16];
    Sampler s;
    Err err;
    CHECK(sampler_init(&s, params, V, any_kernels(), &err) == 0, "%s", err.msg);
    CHECK(sampler_adjust(&s, got, logits) == 0, "%s: rejected", label);
    double ref[16];
    CHECK(reference_adjust(ref, logits, V, params, NULL) == 0, "%s: reference rejected", label);
    for (int i = 0; i < V; i++) {
        CHECK(fabs(got[i] - want[i]) <= 1e-6, "%s: token %d has p %.9g, want %.9g", label, i, got[i], want[i]);
        CHECK(fabs(ref[i] - want[i]) <= 1e-7, "%s: the reference gives token %d p %.9g, want %.9g", label, i, ref[i],
              want[i]);
    }
    sampler_free(&s);
}

TEST(sampling_top_k_keeps_ties_at_the_kth_value) {
    const float logits[] = {1, 3, 3, 2, 3, 0};
    check_exact(logits, 6, &(SamplingParams){1, 2, 1, 0}, (double[]){0, 1. / 3, 1. / 3, 0, 1. / 3, 0}, "k 2, 3 tied");
    check_exact(logits, 6, &(SamplingParams){1, 1, 1, 0}, (double[]){0, 1. / 3, 1. / 3, 0, 1. / 3, 0}, "k 1, 3 tied");
    const double e = exp(-1.0), z = 3 + e;
    check_exact(logits, 6, &(SamplingParams){1, 4, 1, 0}, (double[]){0, 1 / z, 1 / z, e / z, 1 / z, 0}, "k 4");
    const float flat[] = {5, 5, 5, 5};
    check_exact(flat, 4, &(SamplingParams){0.5f, 2, 1, 0}, (double[]){0.25, 0.25, 0.25, 0.25}, "all equal, k 2");
}

TEST(sampling_top_p_keeps_the_token_that_crosses) {
    // p = 0.5, 0.3, 0.2: the nucleus of 0.6 is {0, 1} (0.5 before token 1 is < 0.6, 0.8 before token 2 is not).
    const float logits[] = {logf(0.5f), logf(0.3f), logf(0.2f)};
    check_exact(logits, 3, &(SamplingParams){1, 0, 0.6f, 0}, (double[]){0.625, 0.375, 0, 0}, "top-p 0.6");
    check_exact(logits, 3, &(SamplingParams){1, 0, 0.45f, 0}, (double[]){1, 0, 0, 0}, "top-p 0.45: token 0 passes it");
    check_exact(logits, 3, &(SamplingParams){1, 0, 0.01f, 0}, (double[]){1, 0, 0, 0}, "top-p 0.01: one token stays");
    // Four equal tokens, 0.25 each: exactly at the boundary. Cumulative 0.5 before the third token is not < 0.5;
    // ties rank the lower id first.
    const float flat[] = {2, 2, 2, 2};
    check_exact(flat, 4, &(SamplingParams){1, 0, 0.5f, 0}, (double[]){0.5, 0.5, 0, 0}, "equal, top-p 0.5");
    check_exact(flat, 4, &(SamplingParams){1, 0, 0.25f, 0}, (double[]){1, 0, 0, 0}, "equal, top-p 0.25");
    check_exact(flat, 4, &(SamplingParams){1, 0, 0.5001f, 0}, (double[]){1. / 3, 1. / 3, 1. / 3, 0}, "equal, 0.5001");
}

TEST(sampling_top_p_applies_after_top_k) {
    // p = 0.4, 0.3, 0.2, 0.1. Top-k 2 keeps 0.4, 0.3 → 4/7, 3/7; top-p 0.5 over those keeps only token 0 (4/7 is
    // already ≥ 0.5). Top-p first would have kept {0, 1} (0.4 < 0.5).
    const float logits[] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    check_exact(logits, 4, &(SamplingParams){1, 2, 0.5f, 0}, (double[]){1, 0, 0, 0}, "top-k 2 then top-p 0.5");
    check_exact(logits, 4, &(SamplingParams){1, 2, 0.6f, 0}, (double[]){4. / 7, 3. / 7, 0, 0}, "top-k 2, top-p 0.6");
    check_exact(logits, 4, &(SamplingParams){1, 0, 0.5f, 0}, (double[]){4. / 7, 3. / 7, 0, 0}, "top-p 0.5 alone");
    // Min-p: relative to the most likely token, after the temperature, before top-k and top-p.
    const float ranked[] = {logf(0.5f), logf(0.3f), logf(0.15f), logf(0.05f)};
    check_exact(ranked, 4, &(SamplingParams){1, 0, 1, 0.5f}, (double[]){0.625, 0.375, 0, 0}, "min-p 0.5");
    check_exact(ranked, 4, &(SamplingParams){1, 0, 1, 0.29f}, (double[]){0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0},
                "min-p 0.29: 0.15 is 0.3 of 0.5, and stays");
    check_exact(ranked, 4, &(SamplingParams){0.5f, 0, 1, 0.3f}, (double[]){25. / 34, 9. / 34, 0, 0},
                "min-p 0.3 at T 0.5: 0.3² / 0.5² = 0.36, 0.15² / 0.5² = 0.09");
    check_exact(ranked, 4, &(SamplingParams){1, 0, 0.6f, 0.2f}, (double[]){0.625, 0.375, 0, 0},
                "min-p 0.2 then top-p 0.6 of the 0.95 kept");
    check_exact(ranked, 4, &(SamplingParams){1, 1, 1, 0.01f}, (double[]){1, 0, 0, 0}, "min-p and top-k 1");
    check_exact(ranked, 4, &(SamplingParams){1, 0, 1, 1.0f}, (double[]){1, 0, 0, 0}, "min-p 1: the top token");
    check_exact(ranked, 4, &(SamplingParams){0, 0, 1, 0.9f}, (double[]){1, 0, 0, 0}, "greedy ignores min-p");
}

TEST(sampling_temperature) {
    const float logits[] = {0, 1, 2};
    for (float t = 0.25f; t <= 4; t *= 2) {
        double z = 1 + exp(1 / t) + exp(2 / t);
        check_exact(logits, 3, &(SamplingParams){t, 0, 1, 0}, (double[]){1 / z, exp(1 / t) / z, exp(2 / t) / z}, "T");
    }
}

TEST(sampling_temperature_zero_is_the_argmax) {
    const float tied[] = {1, 7, -INFINITY, 7, 3};
    check_exact(tied, 5, &(SamplingParams){0, 0, 1, 0}, (double[]){0, 1, 0, 0, 0}, "greedy, tie: the lower id");
    check_exact(tied, 5, &(SamplingParams){0, 3, 0.1f, 0}, (double[]){0, 1, 0, 0, 0}, "greedy ignores top-k / top-p");
    const float masked[] = {-INFINITY, -INFINITY, -5};
    check_exact(masked, 3, &(SamplingParams){0, 0, 1, 0}, (double[]){0, 0, 1, 0}, "greedy past -inf");
}

// The argmax and the NaN / +inf check are one pass of vectors (Kernels.row_range: 64 logits at a time in AVX-512,
// then one at a time for the rest): every row length to 140 in every kernel variant, with the maximum (twice: the
// lower id wins), a NaN or a +inf at every offset, against a plain scan; the greedy token (sampling_greedy) is the
// greedy row's, and refused where the row is.
TEST(sampling_argmax_and_bad_logits_at_every_offset) {
    float logits[140];
    double probs[140];
    Sampler s;
    Err err;
    int n_kernels;
    const Kernels *const *list = kernels_available(&n_kernels);
    for (int v = 0; v < n_kernels; v++)
        for (int V = 1; V <= 140; V++) {
            const Kernels *k = list[v];
            CHECK(sampler_init(&s, &(SamplingParams){0, 0, 1, 0}, V, k, &err) == 0, "%s", err.msg);
            for (int at = 0; at < V; at++) {
                for (int i = 0; i < V; i++) logits[i] = (float)test_rand_int(-50, 50) / 8.0f;
                logits[at] = 9.0f;
                logits[V - 1 - at / 2] = 9.0f;  // a tie at or after `at`
                const int want = at < V - 1 - at / 2 ? at : V - 1 - at / 2;
                CHECK(sampler_adjust(&s, probs, logits) == 0 && probs[want] == 1.0, "%s, V = %d: greedy row misses %d",
                      k->name, V, want);
                CHECK(sampling_greedy(k, logits, V) == want, "%s, V = %d: greedy token %d, want %d", k->name, V,
                      sampling_greedy(k, logits, V), want);
                const float bad[2] = {NAN, INFINITY};
                for (int b = 0; b < 2; b++) {
                    logits[at] = bad[b];
                    CHECK(sampler_adjust(&s, probs, logits) == -1, "%s, V = %d: %g at %d accepted", k->name, V, bad[b],
                          at);
                    CHECK(sampling_greedy(k, logits, V) == -1, "%s, V = %d: greedy took %g at %d", k->name, V, bad[b],
                          at);
                }
                logits[at] = NAN;  // a NaN never wins the argmax
                const int rest = at == V - 1 - at / 2 ? -1 : V - 1 - at / 2;
                if (rest >= 0)
                    CHECK(k->row_range(logits, V).argmax == rest, "%s, V = %d: NaN at %d won", k->name, V, at);
            }
            sampler_free(&s);
        }
}

// sampling_top_probability (--draft-p-min's test of the draft's confidence) against the plain double-precision
// max softmax, in every kernel variant, to the exponentials' relative 1e-6 plus rounding.
TEST(sampling_top_probability_is_the_largest_softmax_entry) {
    static float logits[V_MAX], scratch[V_MAX];
    int n_kernels;
    const Kernels *const *list = kernels_available(&n_kernels);
    for (int trial = 0; trial < 200; trial++) {
        const int V = test_rand_int(1, V_MAX);
        random_logits(logits, V);
        double max = -INFINITY, sum = 0.0;
        for (int i = 0; i < V; i++) max = logits[i] > max ? logits[i] : max;
        for (int i = 0; i < V; i++) sum += exp((double)logits[i] - max);
        for (int v = 0; v < n_kernels; v++) {
            const double got = sampling_top_probability(list[v], logits, V, scratch);
            CHECK(fabs(got - 1.0 / sum) <= 2e-6 / sum, "%s, V = %d: top probability %.17g, want %.17g",
                  list[v]->name, V, got, 1.0 / sum);
        }
    }
}

TEST(sampling_adversarial_logits) {
    static float logits[V_MAX];
    static const SamplingParams settings[] = {{1, 0, 1, 0}, {0.7f, 0, 0.9f, 0}, {1, 10, 1, 0}, {1.5f, 3, 0.5f, 0}, {0, 0, 1, 0},
                                              {0.05f, 0, 0.99f, 0}, {1, 0, 1, 0.5f}, {0.7f, 5, 0.9f, 0.05f}};
    for (size_t s = 0; s < sizeof settings / sizeof settings[0]; s++) {
        const SamplingParams *p = &settings[s];
        for (int i = 0; i < V_MAX; i++) logits[i] = 4.0f;
        check_against_reference(logits, V_MAX, p, "all equal");
        logits[77] = 3e38f;
        check_against_reference(logits, V_MAX, p, "one huge");
        for (int i = 0; i < V_MAX; i++) logits[i] = i == 77 ? 3e38f : -3e38f;  // (logit − max) overflows to −inf
        check_against_reference(logits, V_MAX, p, "one huge, the rest hugely negative");
        for (int i = 0; i < V_MAX; i++) logits[i] = i % 3 ? -INFINITY : (float)(i % 7);
        check_against_reference(logits, V_MAX, p, "-inf entries");
        logits[0] = 1.0f;
        check_against_reference(logits, 1, p, "V = 1");
        logits[0] = -INFINITY;
        logits[1] = 2.0f;
        check_against_reference(logits, 2, p, "V = 2, one -inf");
    }
    // −inf is a masked token: probability exactly 0, never drawn, whatever the settings.
    const float masked[] = {-INFINITY, 0, -INFINITY, 0.5f, -INFINITY};
    double probs[5];
    Sampler s;
    Err err;
    CHECK(sampler_init(&s, &(SamplingParams){100, 0, 1, 0}, 5, any_kernels(), &err) == 0, "%s", err.msg);
    CHECK(sampler_adjust(&s, probs, masked) == 0 && probs[0] == 0 && probs[2] == 0 && probs[4] == 0,
          "-inf at temperature 100: p = %g, %g, %g", probs[0], probs[2], probs[4]);
    sampler_free(&s);
}

TEST(sampling_rejects_non_finite_logits_and_bad_params) {
    Sampler s;
    Err err;
    double probs[4];
    const float bad[][4] = {{0, NAN, 1, 2}, {0, INFINITY, 1, 2}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY}};
    const SamplingParams settings[] = {{1, 0, 1, 0}, {0, 0, 1, 0}, {0.5f, 2, 0.5f, 0}};
    for (int b = 0; b < 3; b++) {
        CHECK(sampling_greedy(any_kernels(), bad[b], 4) == -1, "bad logits %d give a greedy token", b);
        for (int p = 0; p < 3; p++) {
            CHECK(sampler_init(&s, &settings[p], 4, any_kernels(), &err) == 0, "%s", err.msg);
            CHECK(sampler_adjust(&s, probs, bad[b]) == -1, "bad logits %d accepted with settings %d", b, p);
            CHECK(reference_adjust(probs, bad[b], 4, &settings[p], NULL) == -1, "the reference accepts %d", b);
            sampler_free(&s);
        }
    }
    const SamplingParams invalid[] = {{-1, 0, 1, 0}, {NAN, 0, 1, 0}, {INFINITY, 0, 1, 0}, {1, -1, 1, 0}, {1, 0, 0, 0},
                                      {1, 0, 1.5f, 0}, {1, 0, NAN, 0}, {1, 0, 1, -0.1f}, {1, 0, 1, 1.5f},
                                      {1, 0, 1, NAN}};
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        CHECK(sampler_init(&s, &invalid[i], 4, any_kernels(), &err) == -1, "invalid settings %zu accepted", i);
        CHECK(strchr(err.msg, '\n') == NULL && strncmp(err.msg, "sampling: ", 10) == 0, "message: %s", err.msg);
    }
}

// ---- drawing -------------------------------------------------------------------------------------------------

TEST(sampling_draw_at_the_edges_of_the_unit_interval) {
    const double probs[] = {0, 0.25, 0, 0.25, 0.5, 0};
    const double below_one = nextafter(1.0, 0.0);
    CHECK(sampling_draw(probs, 6, 0.0) == 1, "u = 0: the first token of positive probability");
    CHECK(sampling_draw(probs, 6, below_one) == 4, "u = 1 - 2^-53: the last token of positive probability");
    CHECK(sampling_draw(probs, 6, 0.25) == 3, "u = 0.25: Σ_{y<x} p ≤ u");
    CHECK(sampling_draw(probs, 6, nextafter(0.25, 0.0)) == 1, "u just below 0.25");
    CHECK(sampling_draw(probs, 6, 0.5) == 4, "u = 0.5");
    const double one[] = {0, 0, 1};
    CHECK(sampling_draw(one, 3, 0.0) == 2 && sampling_draw(one, 3, below_one) == 2, "one-hot");
    // Unnormalised input draws from probs / Σ probs; tokens of probability 0 are never drawn.
    double rough[64];
    for (int t = 0; t < 2000; t++) {
        for (int i = 0; i < 64; i++) rough[i] = test_rand_int(0, 2) ? 0.0 : test_rand_uniform(0, 3);
        rough[test_rand_int(0, 63)] = 1e-300;
        const double u = t % 2 ? below_one : test_rand_uniform(0, 1);
        const int x = sampling_draw(rough, 64, u);
        CHECK(x >= 0 && x < 64 && rough[x] > 0, "drew token %d of probability %g", x, x >= 0 && x < 64 ? rough[x] : -1);
    }
    // The counter-based numbers stay inside their intervals, and depend on every part of their key.
    for (uint64_t i = 0; i < 100000; i++) {
        const double u = random_uniform(i, i >> 3, i & 7), v = random_open_uniform(i, i >> 3, i & 7);
        CHECK(u >= 0 && u < 1 && v > 0 && v < 1, "u = %.17g, open u = %.17g", u, v);
    }
    CHECK(random_bits(1, 2, 3) != random_bits(2, 2, 3) && random_bits(1, 2, 3) != random_bits(1, 3, 3) &&
              random_bits(1, 2, 3) != random_bits(1, 2, 4) && random_bits(1, 2, 3) == random_bits(1, 2, 3),
          "seed, position and stream each change the bits");
}

// The race over every token, −log U_x / p(x), with no shortcut.
static int full_race(const double *p, int V, uint64_t seed, uint64_t position) {
    int best = -1;
    double best_time = INFINITY;
    for (int x = 0; x < V; x++) {
        if (p[x] <= 0) continue;
        double time = -log(random_open_uniform(seed, position, (uint64_t)x)) / p[x];
        if (time < best_time) best_time = time, best = x;
    }
    return best;
}

static void random_distribution(double *p, int V, int zeros) {
    double sum = 0;
    for (int i = 0; i < V; i++)
        sum += p[i] = zeros > 0 && i > 0 && test_rand_int(0, zeros) == 0 ? 0.0 : pow(test_rand_uniform(0, 1), 4);
    p[0] += 1e-3, sum += 1e-3;
    for (int i = 0; i < V; i++) p[i] /= sum;
}


// The draw sums by blocks (sampling.c); it is the inverse CDF of one sum from the first token, taken here in long
// double, but where u·Σ probs lies within rounding of a boundary. Lengths of one block, several, a short last one,
// and more tokens than blocks of 64 can hold (wider blocks); rows with zeros, tiny and unnormalised masses; u at 0,
// random, and just below 1.
TEST(sampling_draw_by_blocks_is_the_inverse_cdf) {
    static const int lengths[] = {1, 7, 64, 65, 1000, 8192, 128256, 300000};
    static double probs[300000];
    static long double cdf[300000];
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++) {
        const int V = lengths[l];
        for (int trial = 0; trial < 40; trial++) {
            const double scale = trial % 3 == 0 ? 1e-30 : trial % 3 == 1 ? 1.0 : 7.5;
            for (int i = 0; i < V; i++) probs[i] = test_rand_int(0, 3) ? test_rand_uniform(0, 1) * scale : 0.0;
            probs[test_rand_int(0, V - 1)] = scale;  // at least one token of positive mass
            long double sum = 0;
            for (int i = 0; i < V; i++) cdf[i] = sum += probs[i];
            const double u = trial % 4 == 0 ? 0.0 : trial % 4 == 1 ? nextafter(1.0, 0.0) : test_rand_uniform(0, 1);
            const long double target = u * sum;
            int want = -1;
            for (int i = 0; i < V && want < 0; i++)
                if (probs[i] > 0 && target < cdf[i]) want = i;
            for (int i = V - 1; want < 0; i--)
                if (probs[i] > 0) want = i;
            const int x = sampling_draw(probs, V, u);
            const int first = x < want ? x : want;
            CHECK(x >= 0 && x < V && probs[x] > 0, "V = %d: drew token %d", V, x);
            CHECK(x == want || fabsl(cdf[first] - target) <= 1e-12L * sum,
                  "V = %d, u = %.17g: token %d where the inverse CDF gives %d, not at a boundary", V, u, x, want);
        }
    }
}
TEST(sampling_gumbel_max_is_the_full_race) {
    static double p[V_MAX];
    for (int t = 0; t < 300 && !test_failures(); t++) {
        const int V = test_rand_int(1, V_MAX);
        random_distribution(p, V, test_rand_int(0, 4));
        const uint64_t seed = test_rand_u64();
        for (uint64_t pos = 0; pos < 20; pos++)
            CHECK(sampling_gumbel_max(p, V, seed, pos) == full_race(p, V, seed, pos), "V %d, position %d", V, (int)pos);
    }
}

// P(Gumbel-max picks x) = p(x): chi-square over N positions of one seed (false alarm 1e-4 per call).
TEST(sampling_gumbel_max_draws_from_p) {
    enum { V = 8, N = 200000 };
    const double p[V] = {0.35, 0.25, 0, 0.15, 0.12, 0.08, 0.04, 0.01};
    int counts[V] = {0};
    const uint64_t seed = test_rand_u64();
    for (int n = 0; n < N; n++) counts[sampling_gumbel_max(p, V, seed, (uint64_t)n)]++;
    double chi2 = 0;
    for (int x = 0; x < V; x++)
        if (p[x] > 0) chi2 += (counts[x] - N * p[x]) * (counts[x] - N * p[x]) / (N * p[x]);
    CHECK(counts[2] == 0, "a token of probability 0 was drawn %d times", counts[2]);
    CHECK(chi2 < chi_square_critical(V - 2), "chi-square %.1f over %d cells exceeds %.1f", chi2, V - 1,
          chi_square_critical(V - 2));
}

// Two distributions sampled with the same noise agree with probability
//   P(x wins both races) summed over x = Σ_x 1 / Σ_y max(p(y)/p(x), q(y)/q(x))
// (given E_x = e, x wins both iff E_y > e·max(p(y)/p(x), q(y)/q(x)) for every y ≠ x; integrate over e ~ Exp(1)).
// Daliri, Musco & Suresh: at least (1 − δ)/(1 + δ), δ the total variation distance, and at most 1 − δ.
static double coupled_agreement(const double *p, const double *q, int V) {
    double agree = 0;
    for (int x = 0; x < V; x++) {
        if (p[x] <= 0 || q[x] <= 0) continue;
        double rates = 0;
        for (int y = 0; y < V; y++) rates += fmax(p[y] / p[x], q[y] / q[x]);
        agree += 1 / rates;
    }
    return agree;
}

TEST(sampling_gumbel_coupling_agrees_as_predicted) {
    enum { N = 40000 };
    double p[16], q[16];
    for (int t = 0; t < 6; t++) {
        const int V = test_rand_int(2, 16);
        random_distribution(p, V, t % 3);
        random_distribution(q, V, t % 2);
        double delta = 0;
        for (int x = 0; x < V; x++) delta += fabs(p[x] - q[x]) / 2;
        const double predicted = coupled_agreement(p, q, V);
        CHECK(predicted >= (1 - delta) / (1 + delta) - 1e-12 && predicted <= 1 - delta + 1e-12,
              "agreement %.6f outside [(1-δ)/(1+δ), 1-δ] = [%.6f, %.6f]", predicted, (1 - delta) / (1 + delta),
              1 - delta);
        const uint64_t seed = test_rand_u64();
        int agree = 0;
        for (int n = 0; n < N; n++) agree += sampling_gumbel_max(p, V, seed, n) == sampling_gumbel_max(q, V, seed, n);
        const double sigma = sqrt(predicted * (1 - predicted) / N);
        CHECK(fabs((double)agree / N - predicted) <= 4.5 * sigma + 1e-9, "V %d: agreed %.4f, predicted %.4f (σ %.4f)",
              V, (double)agree / N, predicted, sigma);
    }
}
