// interrupt.c — Ctrl-C as a request to stop (interrupt.h).
#include "cli/interrupt.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

static volatile sig_atomic_t interrupted;

static void on_sigint(int signo) {
    (void)signo;
    interrupted = 1;
}

void interrupt_catch(bool resume) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = resume ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, NULL);
}

bool interrupt_requested(void) { return interrupted != 0; }

void interrupt_clear(void) { interrupted = 0; }

void interrupt_die_if_requested(void) {
    if (!interrupted) return;
    fflush(stdout);
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
}

bool interrupt_stop(void *ctx, int id) {
    const InterruptStop *wrapped = ctx;
    const bool stop = wrapped->stop && wrapped->stop(wrapped->stop_ctx, id);  // (the stop strings see every token)
    return stop || interrupted;
}

void interrupt_wrap_stop(SpecParams *params, InterruptStop *wrapped) {
    *wrapped = (InterruptStop){.stop = params->stop, .stop_ctx = params->stop_ctx};
    params->stop = interrupt_stop;
    params->stop_ctx = wrapped;
}
