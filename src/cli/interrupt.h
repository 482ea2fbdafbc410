// interrupt.h — Ctrl-C (SIGINT) as a request to stop what runs, not the process. While caught, SIGINT only sets a
// flag: the generation's stop hook (interrupt_stop) ends the reply at its next committed token, and a blocked read
// (the chat's prompt) returns with EINTR, while the writes of a generation go on. `chat` catches it for its whole
// conversation (a reply cut short, a line cleared); `generate` while it generates, and then dies by SIGINT once the
// tokens decided are printed.
//
// The flag is the one global state of the command line: a signal handler can reach nothing else.
#ifndef SPECDEC_CLI_INTERRUPT_H
#define SPECDEC_CLI_INTERRUPT_H

#include <stdbool.h>

#include "speculative/params.h"

// Catches SIGINT from now on: it sets the flag. With `resume` (SA_RESTART), a system call it interrupts goes on: a
// write blocked on a terminal held by Ctrl-S, or on a full pipe, finishes once there is room, where it would fail
// with EINTR and end the run on "stdout: Interrupted system call". Without, a blocked read (the chat's line from a
// pipe) returns with EINTR. (poll, which the chat's terminal reads wait in, returns EINTR either way.)
void interrupt_catch(bool resume);

// Whether SIGINT came since the last interrupt_clear; and clearing it.
bool interrupt_requested(void);
void interrupt_clear(void);

// Where SIGINT came: the default action restored, standard output flushed, and the signal raised again, so that
// the process ends as killed by it (the shell's status 130).
void interrupt_die_if_requested(void);

// A SpecParams.stop that ends generation at the next committed token once SIGINT came, and otherwise asks the hook
// it wraps (the stop strings', or none).
typedef struct {
    bool (*stop)(void *stop_ctx, int id);
    void *stop_ctx;
} InterruptStop;
bool interrupt_stop(void *ctx, int id);

// Puts interrupt_stop in params' stop hook, keeping params' own in *wrapped.
void interrupt_wrap_stop(SpecParams *params, InterruptStop *wrapped);

#endif
