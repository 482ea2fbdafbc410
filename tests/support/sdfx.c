#include "sdfx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// (Read with fread: specdec assumes a little-endian host throughout.)
bool expected_read(Expected *e, const char *path) {
    *e = (Expected){0};
    FILE *f = fopen(path, "rb");
    char magic[4], extra;
    uint32_t version, T, V;
    bool ok = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "SDFX", 4) == 0 && fread(&version, 4, 1, f) == 1 &&
              version == 1 && fread(&T, 4, 1, f) == 1 && fread(&V, 4, 1, f) == 1 && T >= 1 && T <= 4096 &&
              V >= 1 && V <= 1u << 20;
    if (ok) {
        e->T = (int)T;
        e->V = (int)V;
        e->tokens = malloc(sizeof(int) * T);
        e->logits = malloc(sizeof(float) * T * V);
        ok = fread(e->tokens, sizeof(int), T, f) == T &&  // the file must end right after the logits
             fread(e->logits, sizeof(float), (size_t)T * V, f) == (size_t)T * V && fread(&extra, 1, 1, f) == 0;
    }
    if (f) fclose(f);
    if (!ok) expected_free(e);
    return ok;
}

void expected_free(Expected *e) {
    free(e->tokens);
    free(e->logits);
    *e = (Expected){0};
}
