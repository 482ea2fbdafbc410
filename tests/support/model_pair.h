// model_pair.h — a tiny target and draft for the tests of speculative decoding: written from their specs
// (random_checkpoint.h) into a fresh folder under /tmp, loaded on a thread pool of their own, and removed again.
#ifndef SPECDEC_MODEL_PAIR_H
#define SPECDEC_MODEL_PAIR_H

#include "base/threads.h"
#include "model/model.h"
#include "random_checkpoint.h"

typedef struct {
    char dir[64];  // the folder: target/ and draft/
    ThreadPool *pool;
    Model target, draft;
} ModelPair;

// Writes both checkpoints and loads them on a pool of `threads`, their matrices held as `quant` says. With
// vocabularies of different sizes both are limited to the ids they share, n_shared (as specdec does for a pair
// with one tokenizer). A failure is a test failure (CHECK).
void model_pair_open(ModelPair *pair, const RandomCheckpoint *target, const RandomCheckpoint *draft, int n_shared,
                     int threads, Quant quant);

// Frees the models and the pool, and removes the folder.
void model_pair_close(ModelPair *pair);

#endif
