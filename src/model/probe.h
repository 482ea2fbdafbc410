// probe.h — the thread count on which a model's decode steps run fastest, measured at load.
//
// A small model (a draft: a few MB of weights) gains little from more threads and pays a hand-off and a wait for
// each one in every job, so its fastest count is often 1 or 2 where the target's is all of them. The probe times
// its steps at 1, 2, 4, … and the most it may use, and prefers fewer threads unless more are clearly faster: the
// probe's steps run back to back, with the pool's threads hot, where a speculative round puts the target's forward
// and the sampling between the draft's steps — a count that only ties in the probe has nothing to gain there
// (docs/performance-history.md, "Measurements behind the thread counts").
#ifndef SPECDEC_MODEL_PROBE_H
#define SPECDEC_MODEL_PROBE_H

#include "model/model.h"

// A larger count is chosen over a smaller one only when its median step takes at most this fraction of the
// smaller's: hysteresis toward fewer threads.
#define PROBE_MARGIN 0.85

// The choice from measured figures: counts[0..n) ascending, median_seconds[i] the median step at counts[i]. The
// fewest threads, replaced by each larger count whose median is at most PROBE_MARGIN × the chosen one's.
int probe_choose_threads(const int *counts, const double *median_seconds, int n);

// Times m's decode steps (PROBE_STEPS steps after PROBE_CONTEXT positions, a fresh cache) at each count of 1, 2,
// 4, … and m->max_threads (model_load: the pool's size), in PROBE_ROUNDS rounds whose order rotates, and returns
// probe_choose_threads' count over the medians (-1 on error). Leaves m->max_threads as it found it. Output never
// depends on the choice (model.h: batch and thread invariance). *median_seconds, when not NULL, receives the chosen
// count's median seconds per step.
int probe_fastest_threads(Model *m, double *median_seconds, Err *err);

#endif
