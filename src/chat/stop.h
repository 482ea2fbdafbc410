// stop.h — stop strings (--stop TEXT): generated text is scanned as it grows, and ends where the first of the
// strings occurs; the string and anything after it are never given out.
//
// Text is given out as soon as no stop string can start in it: all but the longest tail that is a proper prefix
// of one of the strings is held back, until the next piece decides it. A stop string is matched as bytes of the
// decoded text, whichever tokens it spans; generation stops after the token in which one completes (the scheduler's
// SpecParams.stop), so a token's text past the string is cut off too.
#ifndef SPECDEC_CHAT_STOP_H
#define SPECDEC_CHAT_STOP_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef struct {
    char **stops;       // [n] the strings (copies)
    size_t *lens;       // [n]
    int n;
    char *text;         // the text so far, cut at the stop string once one occurred
    size_t len, cap;
    size_t taken;       // bytes of text given out by stop_scan_take
    bool stopped;       // a stop string occurred: text ends where it starts
} StopScan;

// Copies stops[0..n) (each non-empty). Returns 0, or -1 with err for an empty string or when out of memory.
int stop_scan_init(StopScan *s, const char *const *stops, int n, Err *err);

// Appends p[0..len) to the text; *stopped says whether a stop string now occurs (the text is then cut at its start
// — the earliest start among those that completed — and later pieces are ignored). -1 with err when out of memory.
int stop_scan_push(StopScan *s, const char *p, size_t len, bool *stopped, Err *err);

// The text that can be given out now, *p[0..*len) (valid until the next call): everything not yet given out once
// stopped or when final (generation ended), else all but the tail that could start a stop string.
void stop_scan_take(StopScan *s, bool final, const char **p, size_t *len);

void stop_scan_free(StopScan *s);

#endif
