// poll_budget.c — the process's poll budget (poll_budget.h): poll while polling pays.
#include "base/poll_budget.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "base/clock.h"
#include "base/threads.h"

// h of poll_budget.h: the budget is a waiter's longest poll · 2^−poll_halvings.
static atomic_int poll_halvings;

// The times this thread has been switched out while it could have run on: its CPU given to another thread (a
// sched_yield that hands it over counts too).
static long involuntary_switches(void) {
    struct rusage usage;
    return getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : 0;
}

static void change_halvings(int halvings, int change) {
    const int next = halvings + change;
    if (next >= 0 && next <= POLL_MAX_HALVINGS) atomic_store_explicit(&poll_halvings, next, memory_order_relaxed);
}

void poll_begin(Poll *poll, double longest_seconds) {
    const int halvings = atomic_load_explicit(&poll_halvings, memory_order_relaxed);
    *poll = (Poll){.give_up = now_seconds() + ldexp(longest_seconds, -halvings), .halvings = halvings};
}

// The switches are counted at the first look at the clock, not at poll_begin: a hand-off within a batch makes no
// system call.
bool poll_on(Poll *poll) {
    cpu_relax();
    if (++poll->polls % POLL_BATCH != 0) return true;
    const long switches = involuntary_switches();
    if (poll->polls == POLL_BATCH) poll->switches = switches;
    else if (switches != poll->switches) {
        change_halvings(poll->halvings, +1);
        return false;
    }
    if (now_seconds() > poll->give_up) return false;
    sched_yield();
    return true;
}

void poll_saw(const Poll *poll) { change_halvings(poll->halvings, -1); }
