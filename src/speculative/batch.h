// batch.h — several generations advancing together, each round's verifications in one target forward (continuous
// batching: Orca, Yu et al. 2022, with speculative rounds). Each step, every running sequence drafts (its own
// drafter and draft cache; the draft model's j-th forward of every sequence that drafts is one forward of the
// draft over all their rows), then one model_forward_batch feeds the target every sequence's rows — the newest
// committed token and the drafts, a chain or a tree, on the sequence's own KV cache — and each sequence accepts or
// resamples, commits and rolls back as alone (scheduler.h: the same steps). The sequences that join prefill their
// prompts BATCH_PREFILL_CHUNK tokens a step between them, the earliest joined first, in the same forwards as the
// others' rounds, so running sequences do not stall behind a long prompt and the first to join is not held behind
// the prompts that joined with it; one that ends, or leaves (cancelled), is out of the next step. Its drafter reads the
// prompt in its first draft forward, beside the other sequences' draft rows (no prefill of its own: scheduler_start),
// or never, if its rounds never draft.
//
// Bit-identical to alone: a sequence's tokens are those speculative_generate (speculative_continue, with a cache)
// gives its prompt, parameters and drafter alone, whatever else runs and whenever it joins. The forward's rows do
// not depend on the batch (model.h: model_forward_batch; OpenBLAS, which may take a long prompt alone under the
// AVX2 kernels with F32 weights, never takes a batch — there a prompt's prefill alone, the target's or an F32
// draft's, may differ in its last bits),
// random numbers are keyed by the sequence's seed and position (params.h), and the γ policy at temperature > 0
// under rejection sampling plans from the cost model alone, never from timings that the batch would change; where
// text does not depend on γ (greedy, coupled) it plans for the whole batch's rate (policy.h: rate_batch), told
// before each step what the other sequences put into the last one (share_loads, batch.c; a prefill chunk's rows
// left out: work the batch does whatever γ is) and what the batch's forwards cost, timed by row count as it steps.
// Pipelined drafting is off in a batch (it changes no token).
#ifndef SPECDEC_BATCH_H
#define SPECDEC_BATCH_H

#include "speculative/speculative.h"

enum { BATCH_PREFILL_CHUNK = 64 };  // the prompt tokens the joining sequences feed per step, all together

typedef struct Batch Batch;

// One generation: what speculative_generate (with a cache, speculative_continue) is given. Its pointers stay the
// caller's, and live, until the sequence leaves.
typedef struct {
    const int *prompt;
    int n_prompt;
    const SpecParams *params;
    Drafter *drafter;       // its own (a drafter holds one sequence's state), or NULL: plain decoding
    KVCache *cache;         // as speculative_continue's (handed back when it leaves), or NULL: one of its own
    int *out;               // room for params->max_tokens
} BatchJob;

typedef enum { BATCH_FREE, BATCH_PREFILLING, BATCH_RUNNING, BATCH_DONE, BATCH_FAILED } BatchState;

// A batch of up to `capacity` sequences on the target (a model's forwards run one at a time: the batch owns the
// target while it steps).
Batch *batch_open(Model *target, int capacity, Err *err);

// Every sequence leaves, then the batch is freed.
void batch_close(Batch *b);

// A sequence joins: its id (a free place in [0, capacity)), or −1 with err set — no free place, or a prompt that
// speculative_generate would refuse.
int batch_join(Batch *b, const BatchJob *job, Err *err);

// One step: the prefilling sequences' next chunks (BATCH_PREFILL_CHUNK rows in all, the earliest joined first) and
// every running sequence's round, one target forward over them all. A sequence whose drafter or accept step fails
// becomes BATCH_FAILED (the others go on); −1 with err set when the forward fails, and then every sequence it carried
// failed.
int batch_step(Batch *b, Err *err);

// Sequences prefilling or running.
int batch_active(const Batch *b);

// The draft model forwards the batch has run, every step's: one per level that any sequence drafted in that step
// (where all share one draft model), however many sequences drafted it.
int batch_draft_forwards(const Batch *b);

// Where the batch's steps so far went (wall-clock seconds): the target's forwards (with the rows they carried), the
// draft model's forwards (with each drafter's work on their logits: q rows, its next drafts; a sequence's first
// carries its prompt), and the rest — γ planning, drafts that need no forward (a lookup's index of the prompt, built
// at its first proposal), the accept steps, commits and rollbacks.
typedef struct {
    int steps;              // target forwards
    long rows;              // the rows they carried, prefill chunks included
    long prefill_rows;      // ... of them, prompts' chunks
    long sequences;         // the sequences they carried, each counted once a step
    double target_seconds, draft_seconds, rest_seconds;
} BatchTimes;

BatchTimes batch_times(const Batch *b);

BatchState batch_state(const Batch *b, int id);

// The sequence leaves (finished, failed, or cancelled while running: its tokens so far), and its place is free:
// 0 with *n_out tokens in its job's out and its statistics in *stats, or −1 with its error in err (BATCH_FAILED).
int batch_leave(Batch *b, int id, int *n_out, SpecStats *stats, Err *err);

#endif
