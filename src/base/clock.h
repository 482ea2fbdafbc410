// clock.h — the one clock specdec measures with.
#ifndef SPECDEC_CLOCK_H
#define SPECDEC_CLOCK_H

// Seconds on the monotonic clock (CLOCK_MONOTONIC): differences of two calls are elapsed wall time.
double now_seconds(void);

#endif
