// poll_budget.h — poll while polling pays: how long a thread waiting for another (a pool worker for its next job,
// the pool's caller for its workers, the drafting thread and its caller for each other's hand-off) polls before it
// sleeps.
//
// A waiter that polls sees a hand-off in the time a cache line takes to move between cores; one that sleeps on a
// condition variable needs a wake-up, tens of microseconds in a virtual machine — more than a pool's job or a
// draft's step takes on small models. But polling pays only while both threads have CPUs: on a machine busier than
// it has CPUs (a desktop compiling, parallel test suites) a poller burns its time slice while the thread it waits
// for waits to run, and every hand-off then costs a scheduler period. So the budget follows what polling gets:
//
//   budget = longest · 2^−h,   0 ≤ h ≤ POLL_MAX_HALVINGS, one h for the process,
//
// where `longest` is the waiter's own ceiling and h moves with each poll's outcome:
//   - the poll sees what it waits for:                               h ← h − 1 (the budget doubles);
//   - a look at the clock finds the poller switched out since the
//     poll's first look (its CPU given to another thread: the
//     thread's involuntary context switches, ru_nivcsw, grew):      h ← h + 1 (halves), and the poll ends there;
//   - the poll spends its budget:                                    h kept (the other side's work was long).
// h is one for the process: whether a poller keeps its CPU is the machine's state, not one waiter's, and every
// waiter's polls tell the same. Its updates are read-modify-writes without a lock: one lost to a race is one poll's
// lesson missed, never a wrong result (what a waiter waits for alone decides what it does). At POLL_MAX_HALVINGS a
// poll is about one batch of POLL_BATCH polls, under a microsecond to a few: about a wake-up's cost, never more.
//
// Use:  Poll poll;  poll_begin(&poll, longest);
//       do { if (what is awaited is there) { poll_saw(&poll); return it; } } while (poll_on(&poll));
//       ... sleep on a condition variable ...
#ifndef SPECDEC_POLL_BUDGET_H
#define SPECDEC_POLL_BUDGET_H

#include <stdbool.h>

// Polls between looks at the clock, each look with a sched_yield: the kernel may have put the two threads on one CPU
// for a while (a thread just started, or another process's), and a poller that never yields would hold it until its
// time slice ends, while the thread it waits for waits to run.
#define POLL_BATCH 64
// The budget's halvings at most: 2⁻¹⁰ of the longest poll (10 ms: about 10 µs, less than a wake-up costs).
#define POLL_MAX_HALVINGS 10

// One poll in progress.
typedef struct {
    double give_up;     // the clock's time at which the budget is spent
    long switches;      // the thread's involuntary context switches at the poll's first look at the clock
    int halvings;       // h when the poll began
    unsigned polls;     // looks at what is awaited so far
} Poll;

// Begins a poll with the budget longest_seconds · 2^−h (0: one batch of polls).
void poll_begin(Poll *poll, double longest_seconds);

// After a look that did not see what is awaited: pauses the CPU (and every POLL_BATCH polls looks at the clock and
// yields) and returns whether to look again — false once the budget is spent, or where the poller was switched out
// (the budget halved).
bool poll_on(Poll *poll);

// What is awaited was seen: the budget doubles.
void poll_saw(const Poll *poll);

#endif
