// config.h — GPT-2 hyper-parameters from a Hugging Face config.json, with transformers' GPT2Config defaults.
#ifndef SPECDEC_CONFIG_H
#define SPECDEC_CONFIG_H

#include <stdbool.h>

#include "base/error.h"

typedef enum {
    ACT_GELU_TANH,  // "gelu_new", "gelu_pytorch_tanh", "gelu_fast": 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
    ACT_GELU_ERF,   // "gelu": 0.5x(1 + erf(x/√2))
} Activation;

typedef struct {
    int n_embd;                            // d, model width                      (default 768)
    int n_head;                            // H, attention heads; d % H == 0      (default 12)
    int n_layer;                           // L, transformer blocks               (default 12)
    int n_positions;                       // context length                      (default 1024)
    int vocab_size;                        // V                                   (default 50257)
    int n_inner;                           // MLP width; null or absent = 4·d
    float layer_norm_epsilon;              //                                     (default 1e-5)
    Activation activation;                 //                                     (default gelu_new)
    bool scale_attn_weights;               // divide scores by √(d/H)             (default true)
    bool scale_attn_by_inverse_layer_idx;  // also divide by (layer index + 1)    (default false)
    bool tie_word_embeddings;              // LM head = wte when lm_head.weight is absent (default true)
    int bos_token_id;                      //                                     (default 50256)
    int eos_token_id;                      //                                     (default 50256)
} Config;

// Reads and validates config.json. Unknown fields are ignored; known fields with unsupported values
// (another model_type, an activation other than the GELUs, cross-attention, non-positive sizes, n_embd not
// divisible by n_head, ...) are errors naming the file and the field.
// Sizes must be integers in [1, 2^20] (so that 4·n_embd fits an int and a product of two sizes an int64_t).
// "n_ctx" (older transformers) and the aliases hidden_size, max_position_embeddings, num_attention_heads and
// num_hidden_layers are never used, only checked: if present they must equal the field they stand for.
// bos/eos_token_id: null means none (-1); a given id must be in [0, vocab_size); an absent one defaults to 50256,
// or to -1 when vocab_size is smaller.
int config_load(Config *cfg, const char *path, Err *err);

#endif
