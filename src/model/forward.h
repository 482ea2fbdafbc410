// forward.h — internal to src/model: what load.c and forward.c share. The activations' memory, sized for a model's
// config, threads and Quant (ForwardScratch, forward.c), and the weights' element types as the checkpoint names
// them (StDtype) and as the kernels do (WeightType).
#ifndef SPECDEC_FORWARD_H
#define SPECDEC_FORWARD_H

#include "checkpoint/safetensors.h"
#include "model/model.h"

// *scratch: activations for a forward of up to TREE_MAX_ROWS rows at a time over c->n_positions positions, on up
// to n_threads threads. On failure *scratch may hold a partial allocation: forward_scratch_free frees it.
int forward_scratch_alloc(ForwardScratch **scratch, const Config *c, Quant quant, int n_threads, Err *err);

// Frees *scratch (NULL: nothing to free) and sets it to NULL.
void forward_scratch_free(ForwardScratch **scratch);

// Bytes of one weight of `type` (WEIGHT_Q8: its quant, without the panels' scales).
static inline size_t weight_size(WeightType type) {
    if (type == WEIGHT_F32) return 4;
    if (type == WEIGHT_Q8) return 1;
    return 2;  // F16, BF16
}

// The kernels' type of a tensor stored as `dtype` (F32, F16 or BF16), and back.
static inline WeightType weight_type(StDtype dtype) {
    if (dtype == ST_F16) return WEIGHT_F16;
    if (dtype == ST_BF16) return WEIGHT_BF16;
    return WEIGHT_F32;
}

static inline StDtype st_dtype_of(WeightType type) {
    if (type == WEIGHT_F16) return ST_F16;
    if (type == WEIGHT_BF16) return ST_BF16;
    return ST_F32;
}

#endif
