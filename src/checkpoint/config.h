// config.h — a model's hyper-parameters from a Hugging Face config.json (and generation_config.json), with
// transformers' field names and defaults for each model_type: gpt2 (GPT2Config), llama (LlamaConfig), mistral
// (MistralConfig), qwen2 (Qwen2Config), qwen3 (Qwen3Config).
//
// The families differ only in data that the one forward pass (forward.c) reads: which normalisation, which position
// encoding, which MLP, which biases, how many key/value heads.
#ifndef SPECDEC_CONFIG_H
#define SPECDEC_CONFIG_H

#include <stdbool.h>

#include "base/error.h"

typedef enum { MODEL_GPT2, MODEL_LLAMA, MODEL_MISTRAL, MODEL_QWEN2, MODEL_QWEN3 } ModelType;

typedef enum {
    ACT_GELU_TANH,  // "gelu_new", "gelu_pytorch_tanh", "gelu_fast": 0.5x(1 + tanh(√(2/π)(x + 0.044715x³)))
    ACT_GELU_ERF,   // "gelu": 0.5x(1 + erf(x/√2))
    ACT_SILU,       // "silu", "swish": x · σ(x)
} Activation;

typedef enum {
    NORM_LAYER,     // LayerNorm: (x − μ)/√(σ² + eps) · γ + β                  (GPT-2)
    NORM_RMS,       // RMSNorm: x/√(mean(x²) + eps) · γ                        (the Llama family)
} NormKind;

typedef enum {
    POSITIONS_LEARNED,  // a table of position embeddings added to the token embeddings (GPT-2's wpe)
    POSITIONS_ROTARY,   // rotary embeddings applied to each head's q and k (Su et al. 2021)
} PositionKind;

typedef enum {
    MLP_PLAIN,      // act(x W_up) W_down                                      (GPT-2)
    MLP_GATED,      // (act(x W_gate) ⊙ x W_up) W_down: SwiGLU with act = SiLU (Shazeer 2020)
} MlpKind;

typedef enum {
    ROPE_DEFAULT,   // inverse frequencies θ^(−2i/hd)
    ROPE_LINEAR,    // all divided by factor (position interpolation)
    ROPE_LLAMA3,    // low frequencies divided by factor, high ones kept, a smooth blend between (Llama 3.1)
} RopeType;

enum { MAX_EOS = 8 };  // end-of-sequence ids a config may list

typedef struct {
    RopeType type;
    float factor;                       // linear, llama3
    float low_freq_factor;              // llama3
    float high_freq_factor;             // llama3
    int original_max_position;          // llama3: original_max_position_embeddings
} RopeScaling;

typedef struct {
    ModelType model_type;
    // Sizes (GPT-2 name / Llama name)
    int n_embd;                            // d, model width                   (n_embd / hidden_size)
    int n_head;                            // H, query heads                   (n_head / num_attention_heads)
    int n_kv_head;                         // key/value heads, dividing H      (num_key_value_heads; GPT-2: H)
    int head_dim;                          // hd, width of a head              (head_dim; absent: d / H)
    int n_layer;                           // L, transformer blocks            (n_layer / num_hidden_layers)
    int n_positions;                       // context length                   (n_positions / max_position_embeddings;
                                           //  a loaded model's is cut to sliding_window: config_fit_window)
    int sliding_window;                    // attention's window, where one applies (sliding_window; 0: none)
    int vocab_size;                        // V, rows of the embedding table
    int n_inner;                           // F, MLP width                     (n_inner / intermediate_size)
    // The forward pass, as data
    NormKind norm;
    float norm_epsilon;                    // (layer_norm_epsilon / rms_norm_eps)
    PositionKind positions;
    MlpKind mlp;
    Activation activation;                 // (activation_function / hidden_act)
    bool qkv_bias;                         // q, k, v projections have biases (GPT-2, Qwen2, attention_bias)
    bool out_bias;                         // the attention output projection has a bias (GPT-2, attention_bias)
    bool mlp_bias;                         // the MLP's projections have biases (GPT-2, mlp_bias)
    bool qk_norm;                          // RMSNorm of each head's q and k before the rotation (Qwen3)
    float rope_theta;                      // rotary base θ
    RopeScaling rope;
    bool scale_attn_weights;               // divide scores by √hd             (GPT-2 option; always for the others)
    bool scale_attn_by_inverse_layer_idx;  // also divide by (layer index + 1) (GPT-2 option)
    bool tie_word_embeddings;              // LM head = token embeddings
    // Token ids; −1 = none
    int bos_token_id;
    int eos_token_id;                      // the first of eos_ids, or −1
    int eos_ids[MAX_EOS];                  // every end-of-sequence id: generation stops at any of them
    int n_eos;
    char warning[512];                     // a one-line note for the user ("" if none): ids outside the vocabulary
} Config;

// Reads and validates config.json. Unknown fields are ignored; known fields with unsupported values (another
// model_type, an activation the family does not use, a rope_scaling type not implemented, heads that do not divide
// the width or each other, non-positive sizes, ...) are errors naming the file, the field and the value.
// Sizes must be integers in [1, 2^20] (so that products of two sizes fit an int64_t).
// GPT-2: "n_ctx" (older transformers) and the aliases hidden_size, max_position_embeddings, num_attention_heads
// and num_hidden_layers are never used, only checked: if present they must equal the field they stand for.
// bos/eos_token_id: null means none; eos may be a list; an id outside [0, vocab_size) (transformers writes 50256 for
// GPT-2 models of any vocabulary) is dropped with a note in cfg->warning, as transformers warns and loads it.
int config_load(Config *cfg, const char *path, Err *err);

// Reads generation_config.json at `path`, if the file exists: its bos/eos_token_id, when present, replace
// config.json's (as transformers' generate() uses them). A missing file changes nothing.
int config_load_generation(Config *cfg, const char *path, Err *err);

// Cuts the context to the sliding window, where one applies. specdec's attention has no window, and within a context
// no longer than the window sliding-window attention is plain causal attention; the checkpoint's readers (config.json
// and GGUF alike) keep the length it declares, which `convert` writes on, and the model's load cuts it here.
void config_fit_window(Config *cfg);

#endif
