// speculative_support.h — what the tests of speculative decoding share (tests/speculative: test_speculative.c,
// test_tree_decoding.c, test_drafters.c, test_generation.c): the tiny model pairs, the drafters under test, a
// generation by one of them, random prompts, the sampled-losslessness check, and the shipped pair's greedy cases.
//
// The models are tiny random GPT-2s, and pairs of the Llama family (one with embedding tables padded to different
// sizes), written at test time (random_checkpoint.h). A draft with the target's seed and fewer layers shares the
// target's embeddings and first blocks, so it agrees with the target often but not always — both the accept and
// the resample paths are exercised. A failure anywhere here is a test failure (CHECK).
#ifndef SPECDEC_SPECULATIVE_SUPPORT_H
#define SPECDEC_SPECULATIVE_SUPPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "model_pair.h"
#include "speculative/speculative.h"

// ---- tiny model pairs -----------------------------------------------------------------------------------------

// Whether this CPU's kernels run `quant`: QUANT_BF16 needs a BF16 dot product (model.h).
bool quant_runs_here(Quant quant);

// A target of 3 blocks and a draft of 1 block with the same seed and vocabulary, their matrices held as `quant`
// says (pair_open: as stored).
void pair_open_quantized(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale, Quant quant);
void pair_open(ModelPair *pair, int vocab_size, int n_positions, int threads, float scale);

// Pairs of the Llama family (random weights, tiny shapes): a Qwen2 target with its q/k/v biases and one key/value
// head, to pair with a one-block draft of it; a Llama target with grouped-query attention, to pair with the Qwen3
// draft. All of a vocabulary of 97 ids and 128 positions.
extern const RandomCheckpoint QWEN2_TARGET, LLAMA_TARGET, QWEN3_DRAFT;

// ---- generation -----------------------------------------------------------------------------------------------

// The drafters under test: the draft model, n-gram lookup, and both (staged; here taking every match, a
// single token's too, so that lookup and model tokens mix in rounds on the tiny models).
typedef enum {
    DRAFT_NONE = DRAFTER_NONE, DRAFT_MODEL = DRAFTER_MODEL, DRAFT_LOOKUP = DRAFTER_LOOKUP, DRAFT_STAGED = DRAFTER_STAGED,
    N_DRAFT_KINDS
} DraftKind;
extern const char *const DRAFT_NAMES[N_DRAFT_KINDS];  // "target-only", "draft model", ...

// Generates with the pair by one of the drafters (the draft stopping below top probability p_min), or the target
// alone, into out[params->max_tokens]; returns the number of tokens.
int generate_with(ModelPair *pair, DraftKind kind, const int *prompt, int n_prompt, const SpecParams *params,
                  uint64_t seed, int *out, SpecStats *stats, float p_min);

// The same with the draft model (speculative) or the target alone; generate with p_min 0.
int generate_p_min(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed,
                   int *out, SpecStats *stats, bool speculative, float p_min);
int generate(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, uint64_t seed, int *out,
             SpecStats *stats, bool speculative);

// A random prompt of 2 to 8 ids into prompt[8]: any ids below V − 1 on odd trials; on even ones ids 0..5 ending in
// the first (repetitive text). Returns its length.
int random_prompt(int prompt[8], int trial, int V);

// ---- sampled losslessness -------------------------------------------------------------------------------------

enum { V_SMALL = 5 };  // the vocabulary of the sampled tests' pairs: V_SMALL³ sequences of 3 tokens

// Samples many speculative generations of 3 tokens with a draft tree of `width` (1: a chain) and γ = 3, and
// compares the counts of the sequences with the target's exact joint distribution by a chi-square test
// (false-alarm rate of a correct implementation: 1e-4 per call); checks too that both the accept and the resample
// path were taken, and with a tree that a child after a rejected sibling was kept. The pair shares V_SMALL ids.
void check_sampled_on_width(ModelPair *pair, DraftKind kind, const SamplingParams *sp, SpecSampler sampler, int width,
                            const char *label);

// The target's exact joint distribution [V_SMALL³] of the first 3 tokens after the prompt, sampled as params says
// (its sampling and penalties), by enumeration with the independent reference (sampling_reference.h).
void exact_joint(ModelPair *pair, const int *prompt, int n_prompt, const SpecParams *params, double *joint);

// The same test over the first 3 tokens of generations run as `params` says (its sampling, penalties, sampler, γ,
// width, pipelining and max_tokens, 3 to 16; its seeds and end-of-text are the test's). With pipelining on, checks too that
// rounds took drafts drafted ahead.
void check_sampled_with(ModelPair *pair, DraftKind kind, const SpecParams *params, const char *label);

// ---- the shipped pair ---------------------------------------------------------------------------------------

// The shipped pair's greedy target-only output on a prompt, handed to a check that runs speculative configurations
// against it.
typedef struct {
    ModelPair *pair;
    const int *prompt;
    int n_prompt, p, threads;     // the prompt's index, the thread count
    const int *expect;            // target-only's output [n_expect]
    int n_expect;
    SpecParams params;            // greedy, n_tokens
} ShippedCase;

// Loads weights/pystd at 1 and 2 threads and calls check(case, ctx) on each of the prompts' cases, the first
// n_prompts, of n_tokens (at most 32) each; stops at the first failure.
void on_shipped_pair(const char *const *prompts, int n_prompts, int n_tokens,
                     void (*check)(ShippedCase *c, void *ctx), void *ctx);

#endif
