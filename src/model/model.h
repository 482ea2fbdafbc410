// model.h — a GPT-2 model: weights loaded from a Hugging Face checkpoint folder, and one forward function.
//
// Dimension key (used in every shape comment): T new tokens in this forward, d model width (n_embd), H heads,
// hd = d / H head width, F MLP width (n_inner), V vocabulary, L layers, S positions in the cache.
#ifndef SPECDEC_MODEL_H
#define SPECDEC_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "checkpoint/config.h"
#include "base/error.h"
#include "kernels.h"
#include "model/kvcache.h"
#include "base/threads.h"

// A linear layer y = x Wᵀ + b, with W [n_out, n_in] (as torch.nn.Linear), 64-byte aligned, in its checkpoint's
// dtype and the kernels' layout — or quantized to q8 at load (kernels.h). GPT-2's Conv1D weights are
// [n_in, n_out] on disk and are transposed once at load.
typedef struct {
    const void *w;      // [n_out, n_in], dtype `type`
    WeightType type;
    int n_out, n_in;
    const float *bias;  // [n_out], or NULL
} Linear;

typedef struct {
    const float *ln1_gamma, *ln1_beta;  // [d]
    Linear attn_qkv;                    // [3d, d]: q, k, v stacked
    Linear attn_proj;                   // [d, d]
    const float *ln2_gamma, *ln2_beta;  // [d]
    Linear mlp_up;                      // [F, d]
    Linear mlp_down;                    // [d, F]
} Block;

// How the weight matrices are held: as stored (F32, F16 or BF16), or quantized to 8 bits at load (q8, kernels.h;
// vectors — biases, LayerNorm, position embeddings — stay F32).
typedef enum { QUANT_NONE, QUANT_Q8 } Quant;

typedef struct {
    Config cfg;
    const Kernels *kernels;
    Quant quant;                // how the weight matrices are held
    ThreadPool *pool;           // shared, not owned
    Linear wte;                 // token embeddings [V, d]; also the LM head when tied
    Linear lm_head;             // [V, d]: wte, or lm_head.weight when the checkpoint has it
    const float *wpe;           // position embeddings [n_positions, d]
    Block *blocks;              // [L]
    const float *lnf_gamma, *lnf_beta;  // [d]
    size_t weight_bytes;        // bytes of weights one decode step streams (all matrices + vectors)
    void *arena;                // owns every weight above
    size_t arena_size;
    struct ForwardScratch *scratch;
} Model;

// Loads config.json and the safetensors weights of a checkpoint folder (model.safetensors, or
// model.safetensors.index.json + shards). Every key variant of the published GPT-2 files is accepted.
int model_load(Model *model, const char *dir, ThreadPool *pool, Err *err);

// The same, with the weight matrices held as `quant` says (model_load: QUANT_NONE).
int model_load_quantized(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err);
void model_free(Model *model);

// The forward pass. Feeds T new tokens at positions [cache->len, cache->len + T), appends their K/V rows to the
// cache and writes logits: [T, V] when all_logits, else only the last position's [V]. The same function serves
// prefill (T = prompt length), decode (T = 1) and the verification of γ draft tokens (T = γ + 1).
//
// Batch invariance: the logits of a position are bit-identical whatever T it was computed in and whatever the
// thread count — below the kernel variant's blas_min_rows, where OpenBLAS may take over for long prompts — so
// greedy speculative output equals greedy target output.
int model_forward(Model *model, KVCache *cache, const int *tokens, int T, float *logits, bool all_logits,
                  Err *err);

// A cache sized for this model.
int model_kv_init(const Model *model, KVCache *cache, Err *err);

#endif
