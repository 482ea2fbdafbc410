// penalties.h — repetition, presence and frequency penalties: a row of logits adjusted by the text before it, the
// step ahead of the sampler (sampling.h), for the target's rows and the draft's alike.
//
// vLLM's definitions (its SamplingParams and apply_penalties), which take OpenAI's for presence and frequency. For a
// token x with logit l, seen in the prompt or in the output, occurring count(x) times in the output:
//   1. repetition r > 0: l / r if l > 0, else l · r — CTRL's penalty (Keskar et al. 2019, §4.1), which divides
//      every logit, with the sign rule of transformers and vLLM, so that r > 1 lowers a negative logit too;
//   2. frequency f: l − f · count(x);
//   3. presence a: l − a if count(x) > 0.
// Other tokens keep their logits. "The output" is the text after the prompt: the tokens committed so far and, in a
// speculative round, the drafts on the path from the committed text to the row — a row is penalised as a target-only
// run would penalise the same position, which is what keeps speculation exact (docs/cli.md, "Sampling controls").
#ifndef SPECDEC_PENALTIES_H
#define SPECDEC_PENALTIES_H

#include <stdbool.h>

#include "base/error.h"

typedef struct {
    float repetition;   // r: a finite number > 0; 1 = off
    float presence;     // a: finite; 0 = off (OpenAI and vLLM take [−2, 2])
    float frequency;    // f: finite; 0 = off (the same)
} Penalties;

extern const Penalties PENALTIES_OFF;  // {1, 0, 0}

// Checks p (repetition finite and > 0, presence and frequency finite). Returns 0, or −1 with err set.
int penalties_check(const Penalties *p, Err *err);

// Whether any of the three changes a logit.
bool penalties_on(const Penalties *p);

// The text before a row of logits: the committed tokens context[0..n), of which the first n_prompt are the prompt,
// then path[0..n_path), the drafts from the committed text down to the row (output tokens).
typedef struct {
    const int *context;
    int n, n_prompt;
    const int *path;
    int n_path;
} History;

// Applies the penalties to rows of V logits. Made once per vocabulary: penalising allocates nothing.
typedef struct {
    Penalties params;
    int V;
    int *count;             // [V] scratch, all 0 between calls: a token's occurrences in the output
    unsigned char *seen;    // [V] scratch, all 0 between calls: 1 once a call has penalised the token
} Penalizer;

// Checks params (penalties_check) and allocates the scratch for V tokens.
int penalizer_init(Penalizer *z, const Penalties *params, int V, Err *err);
void penalizer_free(Penalizer *z);

// logits[x] penalised for every token x that history holds: time O(history's length), not O(V). Ids outside
// [0, V) in history are no token of these logits, and change none.
void penalize(Penalizer *z, float *logits, const History *history);

#endif
