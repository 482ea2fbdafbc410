// file.c — reading a whole file into memory (file.h).
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"

int read_file_if_present(const char *path, char **text, size_t *len, Err *err) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return errno == ENOENT ? 1 : err_fmt(err, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap), *grown;
    errno = 0;
    // The buffer grows to READ_FILE_MAX + 2 bytes at most: a file's bytes, one past the limit, and the NUL.
    while (buf && n <= (size_t)READ_FILE_MAX && (got = fread(buf + n, 1, cap - n - 1, f)) > 0)
        if ((n += got) == cap - 1 && n <= (size_t)READ_FILE_MAX) {
            cap = cap * 2 > (size_t)READ_FILE_MAX + 2 ? (size_t)READ_FILE_MAX + 2 : cap * 2;
            grown = realloc(buf, cap);
            if (!grown) free(buf);
            buf = grown;
        }
    const int cause = ferror(f) ? errno : 0;
    const bool no_memory = !buf;
    if (f != stdin) fclose(f);
    if (no_memory || cause || n > (size_t)READ_FILE_MAX) {
        free(buf);
        if (n > (size_t)READ_FILE_MAX)
            return err_fmt(err, "%s: longer than %d MiB: not a text file that specdec reads whole", path,
                           READ_FILE_MAX >> 20);
        return err_fmt(err, "%s: cannot read: %s", path, no_memory ? "out of memory" : strerror(cause));
    }
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

int read_file(const char *path, char **text, size_t *len, Err *err) {
    const int rc = read_file_if_present(path, text, len, err);
    return rc == 1 ? err_fmt(err, "%s: cannot open: %s", path, strerror(ENOENT)) : rc;
}
