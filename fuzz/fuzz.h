// fuzz.h — what the libFuzzer targets share (one target a file in this folder; README.md lists them).
//
// A target that reads files writes its input to a scratch folder made once per process and calls the loader's
// public function on the path, as specdec does. An input that stands for several files (an index and its shards,
// vocab.json and merges.txt, a tokenizer and a text to encode) holds them one after the other, separated by
// FUZZ_SEPARATOR. Besides the sanitizers' memory and undefined-behaviour checks, every target checks that a
// rejection leaves a clean one-line message (fuzz_check_message) and what the API promises of an accepted input;
// a broken promise aborts with a line on stderr, which libFuzzer reports as a crash.
#ifndef SPECDEC_FUZZ_H
#define SPECDEC_FUZZ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/tokenizer.h"

#define FUZZ_SEPARATOR "\n|||\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Reports a broken promise and aborts: libFuzzer saves the input as a crash.
__attribute__((format(printf, 1, 2), noreturn))
static inline void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

// One part of an input: bytes data[0..size).
typedef struct {
    const uint8_t *data;
    size_t size;
} FuzzPart;

// Splits data[0..size) at each FUZZ_SEPARATOR into at most max parts (the last part keeps any further separators);
// returns the number of parts, at least 1.
static inline int fuzz_split(const uint8_t *data, size_t size, FuzzPart *parts, int max) {
    static const char sep[] = FUZZ_SEPARATOR;
    int n = 0;
    while (n < max - 1) {
        const uint8_t *hit = memmem(data, size, sep, sizeof sep - 1);
        if (!hit) break;
        parts[n++] = (FuzzPart){data, (size_t)(hit - data)};
        size -= (size_t)(hit - data) + sizeof sep - 1;
        data = hit + sizeof sep - 1;
    }
    parts[n++] = (FuzzPart){data, size};
    return n;
}

static inline void fuzz_remove_scratch(void);

// The scratch folder of this process: made on first use in $TMPDIR, else in /dev/shm (memory: on a busy disk, writing
// each input to /tmp made the targets 10× slower), else in /tmp; removed at exit.
static inline const char *fuzz_scratch(void) {
    static char dir[64];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || strlen(tmp) > 32) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/specdec-fuzz-XXXXXX", tmp);
        if (!mkdtemp(dir)) fuzz_fail("cannot make a scratch folder %s", dir);
        atexit(fuzz_remove_scratch);
    }
    return dir;
}

// The path of file `name` in the scratch folder (a static buffer, valid until the next call with the same slot).
static inline const char *fuzz_path(const char *name, int slot) {
    static char paths[8][128];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_scratch(), name);
    return paths[slot];
}

// Writes part to scratch file `name`; returns its path (see fuzz_path).
static inline const char *fuzz_write(const char *name, int slot, FuzzPart part) {
    const char *path = fuzz_path(name, slot);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(part.data, 1, part.size, f) != part.size || fclose(f) != 0) fuzz_fail("cannot write %s", path);
    return path;
}

static inline void fuzz_remove_scratch(void) {
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", fuzz_scratch());
    if (system(command) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_scratch());
}

// The promise of error.h: a failure leaves one non-empty line of valid UTF-8 without control characters.
static inline void fuzz_check_message(const Err *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    if (n == 0 || n == sizeof err->msg) fuzz_fail("error message empty or not NUL-terminated");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)err->msg[i] < 0x20 || err->msg[i] == 0x7F)
            fuzz_fail("control byte 0x%02X at %zu in error message: %s", (unsigned char)err->msg[i], i, err->msg);
    if (utf8_invalid_offset(err->msg, n) != n) fuzz_fail("invalid UTF-8 in error message: %s", err->msg);
}

// tokenizer.h's promises about text[0..len) for any loaded tokenizer: valid UTF-8 encodes, with and without
// special tokens, to ids that decode to the same bytes and that the streaming decoder turns into the same text;
// invalid UTF-8 is rejected with a message naming the first bad byte.
static inline void fuzz_check_round_trip(const Tokenizer *tok, const uint8_t *data, size_t len) {
    const char *text = (const char *)data;
    size_t bad = utf8_invalid_offset(text, len);
    for (int allow_special = 0; allow_special < 2; allow_special++) {
        int *ids, n_ids;
        Err err = {""};
        if (tokenizer_encode(tok, text, len, allow_special, &ids, &n_ids, &err) < 0) {
            fuzz_check_message(&err);
            char want[64];
            snprintf(want, sizeof want, "invalid UTF-8 at byte %zu ", bad);
            if (bad == len || !strstr(err.msg, want)) fuzz_fail("encode failed: %s", err.msg);
            continue;
        }
        if (bad < len) fuzz_fail("encode accepted invalid UTF-8 at byte %zu", bad);
        char *decoded;
        size_t n_decoded;
        if (tokenizer_decode(tok, ids, n_ids, &decoded, &n_decoded, &err) < 0) fuzz_fail("decode: %s", err.msg);
        if (n_decoded != len || memcmp(decoded, text, len) != 0)
            fuzz_fail("decode(encode(x)) != x (allow_special %d): %zu bytes in, %zu out", allow_special, len,
                      n_decoded);
        TokenStream ts;
        token_stream_init(&ts, tok);
        size_t streamed = 0;
        for (int i = 0; i <= n_ids; i++) {
            const char *piece;
            size_t n;
            if (i < n_ids && token_stream_push(&ts, ids[i], &piece, &n, &err) < 0) fuzz_fail("stream: %s", err.msg);
            if (i == n_ids) token_stream_flush(&ts, &piece, &n);
            if (n > len - streamed || memcmp(piece, text + streamed, n) != 0)
                fuzz_fail("the streamed text differs from the input at byte %zu", streamed);
            streamed += n;
        }
        if (streamed != len) fuzz_fail("the stream gave %zu of %zu bytes", streamed, len);
        token_stream_free(&ts);
        free(decoded);
        free(ids);
    }
}

#endif
