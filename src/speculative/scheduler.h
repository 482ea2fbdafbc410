// scheduler.h — internal to src/speculative: one generation's scheduler and its round cut at the target's forward,
// so that the same steps run one generation alone (scheduler.c, speculative_generate) and several side by side,
// whose verifications go through one batched forward (batch.c). Between the two halves of a round the caller runs
// the target over scheduler_verify_rows' rows and hands the logits to scheduler_finish_round.
#ifndef SPECDEC_SCHEDULER_H
#define SPECDEC_SCHEDULER_H

#include "speculative/policy.h"
#include "speculative/speculative.h"

typedef struct Scheduler Scheduler;

// A scheduler for the generation after prompt[0..n_prompt), as speculative_continue's when cache is not NULL (its
// rows [0, cache->len) hold the prompt's first tokens), else on a cache of its own. With may_pipeline false it never
// drafts ahead (pipelining changes no token: params.h). Checks the prompt as speculative_generate does. NULL with
// err set on failure. The caller then feeds the target's cache prompt[scheduler_cached(s)..n_prompt − 1) (the
// prefill, in as many forwards as it likes) and calls scheduler_start.
Scheduler *scheduler_open(Model *target, KVCache *cache, Drafter *drafter, const int *prompt, int n_prompt,
                          const SpecParams *params, int *out, SpecStats *stats, bool may_pipeline, Err *err);

// The target's cache, which the prefill feeds.
KVCache *scheduler_cache(Scheduler *s);

// After the prefill: the drafter's prefill, and the clock of the rounds starts. prefill_seconds: the prefill's time.
// With drafter_prefill false the drafter reads the prompt when it first drafts instead: a draft model's first forward
// of a proposal feeds every committed token it has not read (draft_model.c), so a batch's sequences read their
// prompts in the draft forwards their rounds share (batch.c), and one whose rounds never draft never reads it.
int scheduler_start(Scheduler *s, double prefill_seconds, bool drafter_prefill, Err *err);

// Whether another round is due: no end-of-text or stop yet, tokens still wanted, room in the context.
bool scheduler_running(const Scheduler *s);

// The rest of the batch this sequence's next round shares its forward with, and what the batch's forwards cost
// (policy.h: BatchLoad, BatchCosts; the γ policy plans for them where the shape changes no token).
void scheduler_share(Scheduler *s, BatchLoad others, BatchCosts costs);

// What the last round cost the batch beside its verification: the draft forwards it waited for.
int scheduler_draft_forwards(const Scheduler *s);

// The first half of a round: choose γ and draft (and start drafting ahead). Where the drafter waits for a draft
// model's forward, *forward names it (rows.T > 0): the caller runs it — alone, or beside other sequences' draft rows
// in one model_forward_batch — with the logits where it says, and calls scheduler_draft_more, until it names none.
int scheduler_draft(Scheduler *s, DraftForward *forward, Err *err);
int scheduler_draft_more(Scheduler *s, DraftForward *forward, Err *err);

// The rows the target verifies in this round: a tree (or chain) fed onto the target's cache, every row's logits.
SequenceRows scheduler_verify_rows(Scheduler *s);

// The target's logits of those rows: [rows, V], where the scheduler keeps them (a batch of one writes there).
float *scheduler_logits(Scheduler *s);

// The second half: accept or resample, commit and roll back, record — after the target's forward, which took
// target_seconds.
int scheduler_finish_round(Scheduler *s, double target_seconds, Err *err);

// Ends the run: *n_out tokens emitted, the statistics finished, the cache handed back (speculative_continue's) or
// freed. Also after a failure (then *n_out as far as it went).
void scheduler_close(Scheduler *s, int *n_out);

#endif
