// file.h — reading a whole file into memory: prompts, message lists, chat templates, grammars, merges.txt.
#ifndef SPECDEC_FILE_H
#define SPECDEC_FILE_H

#include <stddef.h>

#include "base/error.h"

// The longest file read whole: 64 MiB is about 16M tokens of text, the most positions --ctx allows. A longer one
// (/dev/zero, say) is refused rather than read until memory runs out.
#define READ_FILE_MAX (64 << 20)

// Reads all of path (standard input for "-") into *text (malloc'd, NUL-terminated; the file may hold NUL bytes
// too, so *len is its length). 0, or -1 with err naming the path and the cause.
int read_file(const char *path, char **text, size_t *len, Err *err);

// read_file for a file that may be absent: 1 (and nothing read) where path does not exist.
int read_file_if_present(const char *path, char **text, size_t *len, Err *err);

#endif
