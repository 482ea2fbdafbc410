// random_checkpoint.h — writes a GPT-2 checkpoint folder (config.json + model.safetensors) with random weights.
//
// For the benchmark (a model of GPT-2-small's shape without downloading one) and for the tests of the
// speculative scheduler (pairs of tiny models with a small vocabulary). The weights are seeded, so the same
// spec always writes the same bytes.
#ifndef SPECDEC_RANDOM_CHECKPOINT_H
#define SPECDEC_RANDOM_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
    int n_layer, n_embd, n_head, vocab_size, n_positions;
    bool bf16;          // store BF16 (else F32)
    float scale;        // weights uniform in [−scale, scale]; larger scales give peakier distributions
    uint64_t seed;
} RandomCheckpoint;

int random_checkpoint_write(const char *dir, const RandomCheckpoint *spec, Err *err);

// Removes what random_checkpoint_write wrote, and the folder.
void random_checkpoint_remove(const char *dir);

#endif
