// round_trip.h — one side of a cache line's round trips between two threads: the sender writes from, from + 2, …
// and waits for each to be answered; the answerer answers each with the next value. A round trip is two transfers
// of the line between the threads' caches, so its time says how far apart their cores sit (run-bench's threads
// suite, bench/threads.c; tools/placement_probe.c, which includes this header alone).
#pragma once

#include <stdatomic.h>
#include <stdbool.h>

static inline void cache_line_round_trips(atomic_long *line, bool answering, long from, long trips) {
    for (long n = from; n < from + 2 * trips; n += 2) {
        if (answering) {
            while (atomic_load_explicit(line, memory_order_acquire) != n) {
            }
            atomic_store_explicit(line, n + 1, memory_order_release);
        } else {
            atomic_store_explicit(line, n, memory_order_release);
            while (atomic_load_explicit(line, memory_order_acquire) != n + 1) {
            }
        }
    }
}
