// error.h — how failures travel in specdec.
//
// Every function that can fail on bad input takes an `Err *` as its last argument, returns -1 (or NULL) on
// failure and leaves one line in err->msg that names the file, the field or tensor, and expected vs actual.
// Nothing below main() prints or exits: main prints err->msg and exits with EXIT_BAD_INPUT.
//
// Messages quote what they read (paths, tensor names, vocabulary tokens, JSON parser errors), and input can hold
// anything, so err_fmt escapes the formatted message: the message that reaches a terminal is always one line of
// valid UTF-8 without control characters, whatever the file held. The notation:
//     \n \r \t     for those three characters,
//     \xNN         for every other control byte (00..1F, 7F) and every byte that is not part of valid UTF-8,
//     \u0080..\u009F for the C1 control characters (valid UTF-8, but terminals act on them),
// everything else as is (a backslash too, so that escaping a message twice changes nothing). A message longer than
// the buffer is cut at a character boundary and ends in "...".
#ifndef SPECDEC_ERROR_H
#define SPECDEC_ERROR_H

#include <stddef.h>

enum { EXIT_BAD_INPUT = 2 };

typedef struct {
    char msg[1024];
} Err;

// Formats the message into err (if err is not NULL), escaped as above, and returns -1, so that callers can write
// `return err_fmt(err, "%s: ...", path);`. err->msg may be one of the arguments.
int err_fmt(Err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Input quoted in a message is cut short so that the rest of the message (what is wrong) fits: err_quote copies at
// most ERR_QUOTE_LEN bytes of s into buf, cut at a character boundary and followed by "..." when s is longer,
// e.g. `err_fmt(err, "%s: vocab[\"%s\"]: ...", path, err_quote(q, key))`. Returns buf.
enum { ERR_QUOTE_LEN = 64 };
const char *err_quote(char buf[ERR_QUOTE_LEN + 4], const char *s);

// Input printed outside an error message (`specdec inspect`'s tensor names) gets the same escaping: s escaped into
// out (size ≥ 4 bytes), cut short with "..." when it does not fit. Returns out.
const char *err_escape(char *out, size_t size, const char *s);

// The plural ending of a count in a message: `"%d token%s", n, plural(n)` says "1 token", "2 tokens".
static inline const char *plural(long n) { return n == 1 ? "" : "s"; }

#endif
