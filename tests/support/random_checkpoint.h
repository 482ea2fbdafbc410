// random_checkpoint.h — writes a checkpoint folder (config.json + model.safetensors) with random weights, in the
// Hugging Face layout of GPT-2 or of the Llama family (llama, mistral, qwen2 with its q/k/v biases, qwen3 with its
// q/k norms).
//
// For the benchmark (models of published shapes without downloading one) and for the tests of the speculative
// scheduler (pairs of tiny models with a small vocabulary). The weights are seeded, so the same spec always
// writes the same bytes; each tensor's values come from a stream seeded by the seed and the tensor's name, so that
// a draft with the target's seed and fewer layers shares the target's embeddings, head and first blocks (and, with
// a shorter embedding table, its first rows).
#ifndef SPECDEC_RANDOM_CHECKPOINT_H
#define SPECDEC_RANDOM_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"

typedef struct {
    const char *model_type;     // "gpt2" (or NULL), "llama", "mistral", "qwen2", "qwen3"
    int n_layer, n_embd, n_head, vocab_size, n_positions;
    int n_kv_head;              // the Llama family: key/value heads (0 = n_head)
    int n_inner;                // the Llama family: MLP width (0 = 4·n_embd)
    bool untied;                // the Llama family: a separate lm_head.weight
    bool bf16;          // store BF16 (neither this nor f16: F32)
    bool f16;           // store F16
    float scale;        // weights uniform in [−scale, scale]; larger scales give peakier distributions
    uint64_t seed;
    // The Llama family, untied: a token whose logit leads everywhere (0: none). Dimension 0 of every embedding is
    // large (the residual stream's dimension 0 stays positive, and leads its norm), and so is that token's lm_head
    // weight on it: the model writes the token wherever it may — what a test needs to make a model open a tool call.
    int favoured_token;
} RandomCheckpoint;

int random_checkpoint_write(const char *dir, const RandomCheckpoint *spec, Err *err);

// Removes what random_checkpoint_write wrote, and the folder.
void random_checkpoint_remove(const char *dir);

#endif
