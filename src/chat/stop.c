// stop.c — stop strings over growing text (stop.h).
#include <stdlib.h>
#include <string.h>

#include "chat/stop.h"

int stop_scan_init(StopScan *s, const char *const *stops, int n, Err *err) {
    *s = (StopScan){.n = n};
    s->stops = calloc((size_t)n + 1, sizeof *s->stops);
    s->lens = calloc((size_t)n + 1, sizeof *s->lens);
    if (!s->stops || !s->lens) {
        stop_scan_free(s);
        return err_fmt(err, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (!stops[i][0]) {
            stop_scan_free(s);
            return err_fmt(err, "--stop: an empty stop string would stop before the first token");
        }
        s->lens[i] = strlen(stops[i]);
        if (!(s->stops[i] = strdup(stops[i]))) {
            stop_scan_free(s);
            return err_fmt(err, "out of memory");
        }
    }
    return 0;
}

void stop_scan_free(StopScan *s) {
    for (int i = 0; s->stops && i < s->n; i++) free(s->stops[i]);
    free(s->stops);
    free(s->lens);
    free(s->text);
    *s = (StopScan){0};
}

int stop_scan_push(StopScan *s, const char *p, size_t len, bool *stopped, Err *err) {
    *stopped = s->stopped;
    if (s->stopped || len == 0) return 0;
    if (s->len + len + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + len + 1) cap *= 2;
        char *text = realloc(s->text, cap);
        if (!text) return err_fmt(err, "out of memory scanning for stop strings");
        s->text = text;
        s->cap = cap;
    }
    size_t old = s->len;
    memcpy(s->text + s->len, p, len);
    s->len += len;
    // Only occurrences that end in the new piece are new: each starts at most len_i − 1 bytes before it.
    size_t cut = s->len;
    for (int i = 0; i < s->n; i++) {
        size_t from = old >= s->lens[i] - 1 ? old - (s->lens[i] - 1) : 0;
        const char *hit = memmem(s->text + from, s->len - from, s->stops[i], s->lens[i]);
        if (hit && (size_t)(hit - s->text) < cut) cut = (size_t)(hit - s->text);
    }
    if (cut < s->len) {
        s->len = cut;
        s->stopped = *stopped = true;
    }
    return 0;
}

// The length of the longest tail of the text that is a proper prefix of a stop string (it might still become one).
static size_t held_tail(const StopScan *s) {
    size_t held = 0;
    for (int i = 0; i < s->n; i++)
        for (size_t k = s->lens[i] - 1; k > held; k--)
            if (k <= s->len && memcmp(s->text + s->len - k, s->stops[i], k) == 0) {
                held = k;
                break;
            }
    return held;
}

void stop_scan_take(StopScan *s, bool final, const char **p, size_t *len) {
    size_t end = s->stopped || final ? s->len : s->len - held_tail(s);
    if (end < s->taken) end = s->taken;
    *p = s->text ? s->text + s->taken : "";
    *len = end - s->taken;
    s->taken = end;
}
