// error.h — how failures travel in specdec.
//
// Every function that can fail on bad input takes an `Err *` as its last argument, returns -1 (or NULL) on
// failure and leaves one line in err->msg that names the file, the field or tensor, and expected vs actual.
// Nothing below main() prints or exits: main prints err->msg and exits with EXIT_BAD_INPUT.
#ifndef SPECDEC_ERROR_H
#define SPECDEC_ERROR_H

enum { EXIT_BAD_INPUT = 2 };

typedef struct {
    char msg[1024];
} Err;

// Formats the message into err (if err is not NULL) and returns -1, so that callers can write
// `return err_fmt(err, "%s: ...", path);`.
int err_fmt(Err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
