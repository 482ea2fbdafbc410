// sdfx.h — expected logits from the PyTorch reference, as tools/make_fixtures.py and tools/export.py write them
// (tests/fixtures/README.md). Little-endian:
//
//     "SDFX"  u32 version (1)  u32 T  u32 V  i32 tokens[T]  f32 logits[T][V]
#ifndef SPECDEC_SDFX_H
#define SPECDEC_SDFX_H

#include <stdbool.h>

typedef struct {
    int T, V;
    int *tokens;    // [T]
    float *logits;  // [T, V]
} Expected;

// Reads path; false (e left empty) if it is missing or not a well-formed version 1 file. The caller reports.
bool expected_read(Expected *e, const char *path);
void expected_free(Expected *e);

#endif
