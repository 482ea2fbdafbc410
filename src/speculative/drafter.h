// drafter.h — where drafts come from: the Drafter interface the scheduler (speculative.c) calls, and the drafters
// behind it, each in a file of its own:
//   draft_model.c   a small model, sampled by the scheduler's rule (Leviathan et al. 2023, §2.2);
//   draft_lookup.c  n-gram lookup over the prompt and the text so far: no model, a deterministic proposal;
//   draft_staged.c  both: per round, the lookup's run or the draft model's drafts.
#ifndef SPECDEC_DRAFTER_H
#define SPECDEC_DRAFTER_H

#include <stdbool.h>

#include "model/model.h"
#include "speculative/sampling.h"
#include "tokenizer/bytesmap.h"

struct SpecParams;

enum { GAMMA_MAX = 16 };  // the most tokens drafted in one round (a verify forward is T = γ + 1 ≤ 17 rows)

// The n-gram lengths --lookup matches, and the shortest match whose run the staged drafter (-d … --lookup) takes.
// Measured on the shipped pair (greedy, γ = 8, 64 tokens, both bench prompt sets): n from 1 gives the most tokens
// per target call (held-out 4.14 for 1–4, 3.66 for 2–4, 3.25 for 3–6), and lengths beyond 2–4 change almost
// nothing; staged minimum matches 1 and 2 give the same tokens per call (5.16, 5.24), 2 slightly more at
// temperature 0.7 under auto (2.47, 2.42). The γ policy learns the acceptance of a lookup's drafts per match length
// 1 .. LOOKUP_MATCH_SLOTS − 1 (longer ones count as the longest).
enum { LOOKUP_N_MIN = 1, LOOKUP_N_MAX = 4, LOOKUP_STAGED_MIN_MATCH = 2, LOOKUP_MATCH_SLOTS = LOOKUP_N_MAX + 1 };

// The scheduler calls propose() once per round and rollback() after verification.
typedef struct Drafter {
    // Optional: reads context[0..n) ahead of the first round (the prompt), so that propose() times are steady.
    int (*prefill)(struct Drafter *self, const int *context, int n, Err *err);
    // Proposes up to `gamma` tokens continuing the committed tokens context[0..n): ids into draft[0..k), and
    // their distributions q[i·V .. (i+1)·V) — except for the first n_one_hot of them (set by every call), which
    // are deterministic: their q_i is one-hot at draft[i], and the scheduler uses it without a row of q.
    // Returns k (0 ≤ k ≤ gamma; a drafter may stop early), or −1 with err set.
    int (*propose)(struct Drafter *self, const int *context, int n, int gamma, int *draft, double *q, Err *err);
    // Forget whatever was cached at positions ≥ n: the tokens there were rejected, or are not yet final.
    void (*rollback)(struct Drafter *self, int n);
    // Optional: checks what the drafter caches after rollback() against the committed tokens context[0..), whose
    // first n_prefill went to prefill() (model_check_rollback). The debug build calls it after every rollback.
    int (*check_rollback)(struct Drafter *self, const int *context, int n_prefill, Err *err);
    int n_one_hot;          // of the last proposal: how many leading tokens are deterministic (see propose)
    bool has_lookup;        // proposes a lookup's one-hot run (lookup, staged)
    // Set by the scheduler before each propose() (the γ policy's choice of whichever pays more), for a drafter with
    // a lookup: lookup_gamma[m], the most tokens of the lookup's run to propose when its match is m tokens long
    // (a longer match counts as LOOKUP_MATCH_SLOTS − 1 long; 0: not that run — the staged drafter's model drafts
    // instead, the lookup drafter proposes nothing); model_gamma, the most model drafts when no run is proposed.
    int lookup_gamma[LOOKUP_MATCH_SLOTS];
    int model_gamma;
    // Of the last proposal: the lookup's run run[0..n_run) after a match of match_length tokens (n_run = 0: no
    // match), whether it was proposed, or part of it; a run not proposed teaches the γ policy how often it would
    // have been kept, at no verification's cost (speculative.c).
    int run[GAMMA_MAX];
    int n_run, match_length;
    bool run_proposed;
    double step_cost;       // one draft token in spec_forward_cost's units (a model's forward; 0: a lookup)
    double seconds;         // time spent in propose(), for the cost estimates (the scheduler adds it up)
    int calls;              // draft model forward passes made (a lookup makes none)
} Drafter;

// ---- a small model (draft_model.c) --------------------------------------------------------------------------

// A small model as drafter. It samples with the scheduler's SamplingParams ("standardized sampling", §2.2), by the
// scheduler's rule and seed (SpecParams.sampler, .seed); it stops drafting early when its top probability (softmax
// of its logits at temperature 1, whatever the sampling settings) falls below p_min (0 = never). Tokens the draft
// has not read yet (the text committed while the scheduler decoded plainly, the accepted drafts) are fed in one
// forward when it is next used: keeping it in sync costs no forward per plain token.
typedef struct {
    Drafter base;
    Model *model;
    KVCache cache;
    Sampler sampler;
    const struct SpecParams *params;    // not owned: sampler and seed
    float p_min;
    float *logits;          // [V]
    int *feed;              // [n_positions]: the tokens of one forward
    RollbackCheck check;    // the debug build's check of `cache` (check_rollback)
} ModelDrafter;

int model_drafter_init(ModelDrafter *d, Model *draft, const struct SpecParams *params, float p_min, Err *err);
void model_drafter_free(ModelDrafter *d);

// Drafts up to gamma − n_given tokens after context[0..n) followed by given[0..n_given), into
// draft[n_given..k) with q rows n_given..k; returns k (n_given when it drafts nothing), or −1 with err set.
// draft[0..n_given) is `given`, as the staged drafter uses it; propose() is this with n_given = 0.
int model_drafter_extend(ModelDrafter *d, const int *context, int n, int n_given, int gamma, int *draft, double *q,
                         Err *err);

// ---- n-gram lookup (draft_lookup.c) -------------------------------------------------------------------------

// Prompt lookup decoding: finds the longest n-gram (n from n_max down to n_min) that ends the committed text and
// occurred before, and proposes the tokens that followed its latest occurrence — copying on from there, so a
// repeating span is proposed whole. Deterministic (one-hot q), costs no forward. The index maps every n-gram of
// the committed text (as its token ids' bytes, hashed with xxHash) to the position after its latest occurrence.
// It proposes as much of the run as the scheduler asks for a match of its length (Drafter.lookup_gamma).
typedef struct {
    Drafter base;
    int n_min, n_max;
    BytesMap index;         // n-gram → position after its latest occurrence
    int indexed;            // the n-grams ending at positions ≤ indexed are in the index
    int last_match;         // the length of the n-gram the last lookup_run matched (0: none)
} LookupDrafter;

int lookup_drafter_init(LookupDrafter *d, int n_min, int n_max, Err *err);
void lookup_drafter_free(LookupDrafter *d);

// The lookup's run after the committed tokens context[0..n): GAMMA_MAX tokens into run[0..GAMMA_MAX) from the
// longest match (d->last_match long), or 0 when nothing matches; −1 with err set.
int lookup_run(LookupDrafter *d, const int *context, int n, int *run, Err *err);

// Of a run self->run[0..n_run) found after a match of m tokens, proposes into draft[0..k) as much as the scheduler
// asks (Drafter.lookup_gamma, and at most gamma), and records it (match_length, n_run, run_proposed); returns k.
int lookup_take(Drafter *self, int m, int n_run, int gamma, int *draft);

// ---- the lookup or the draft model, by turns (draft_staged.c) ----------------------------------------------

// Lookup and the draft model, round by round whichever is predicted to pay more: the lookup's run from a match of
// at least min_match tokens, as much of it as the scheduler asks for a match of its length (Drafter.lookup_gamma:
// the γ policy learns how often each length's drafts are kept), else the draft model's drafts, up to
// Drafter.model_gamma. The draft model reads the tokens a run committed in the batch that catches it up.
typedef struct {
    Drafter base;
    LookupDrafter *lookup;  // not owned
    ModelDrafter *model;    // not owned
    int min_match;          // the shortest match whose run the staged drafter takes
} StagedDrafter;

void staged_drafter_init(StagedDrafter *d, LookupDrafter *lookup, ModelDrafter *model, int min_match);

#endif
