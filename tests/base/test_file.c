// test_file.c — the one whole-file reader (base/file.h): a file's bytes whole (NUL bytes too) and NUL-terminated,
// one that grows its buffer, an absent file told apart from one that cannot be read, and a file longer than
// READ_FILE_MAX refused by name.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "harness.h"
#include "tokenizer_fixtures.h"

TEST(read_file_reads_every_byte_and_refuses_by_name) {
    char *dir = fixture_dir(), path[4096], *text = NULL;
    size_t len = 0;
    Err err = {{0}};
    // A file with a NUL byte, longer than the first buffer (64 KiB) so that it grows.
    snprintf(path, sizeof path, "%s/bytes", dir);
    const size_t n = 200000;
    unsigned char *bytes = malloc(n);
    for (size_t i = 0; i < n; i++) bytes[i] = (unsigned char)(i * 7 + (i >> 8));
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(bytes, 1, n, f) == n && fclose(f) == 0, "%s: cannot write", path);
    CHECK(read_file(path, &text, &len, &err) == 0, "%s", err.msg);
    CHECK(text && len == n && memcmp(text, bytes, n) == 0 && text[n] == '\0', "%zu bytes read of %zu", len, n);
    free(text);
    // An empty file: "" and 0.
    char *empty = fixture_write_text(dir, "empty", "");
    text = NULL;
    CHECK(read_file(empty, &text, &len, &err) == 0 && text && len == 0 && text[0] == '\0', "empty: %s", err.msg);
    free(text);
    // Absent: 1 without a message from read_file_if_present, -1 naming the path from read_file.
    snprintf(path, sizeof path, "%s/absent", dir);
    CHECK(read_file_if_present(path, &text, &len, &err) == 1, "an absent file is not told apart");
    CHECK(read_file(path, &text, &len, &err) == -1 && strstr(err.msg, path) && strstr(err.msg, "cannot open"),
          "absent: \"%s\"", err.msg);
    // A folder opens but cannot be read; /dev/zero never ends and is refused at READ_FILE_MAX.
    CHECK(read_file(dir, &text, &len, &err) == -1 && strstr(err.msg, "cannot read"), "a folder: \"%s\"", err.msg);
    CHECK(read_file_if_present("/dev/zero", &text, &len, &err) == -1 &&
              strstr(err.msg, "/dev/zero: longer than 64 MiB"),
          "/dev/zero: \"%s\"", err.msg);
    free(bytes);
    free(empty);
    fixture_remove_dir(dir);
}
