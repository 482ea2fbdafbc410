// model.h — a decoder-only transformer: weights loaded from a Hugging Face checkpoint folder (GPT-2, Llama,
// Mistral, Qwen2, Qwen3; load.c), and one forward function for all of them (forward.c).
//
// Dimension key (used in every shape comment): T new tokens in this forward, d model width (n_embd), H query
// heads, Hkv key/value heads, hd head width, F MLP width (n_inner), V vocabulary, L layers, S positions in the
// cache.
#ifndef SPECDEC_MODEL_H
#define SPECDEC_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "checkpoint/config.h"
#include "base/error.h"
#include "kernels.h"
#include "model/kvcache.h"
#include "base/threads.h"

// A linear layer y = x Wᵀ + b. W is the matrix [n_out, n_in] of torch.nn.Linear (GPT-2's Conv1D weights, [n_in,
// n_out] on disk, are transposed once at load), kept in its checkpoint's dtype, 64-byte aligned, in the layout of
// the selected kernels (Kernels.panels, kernels.h): rows, [n_out, n_in] row-major; or panels, [⌈n_out/4⌉,
// ⌈n_in/16⌉, 4, 16] — 4 rows at a time, their 16-weight slices alternating, zero-padded — with W[j, i] at
// weight_index(); or quantized to q8 or q4 at load, or GGUF's blocks as stored, in their own layouts (kernels.h).
// A GGUF stack whose last parts are stored in another block type (a Q4_K_M file's v in Q6_K after q and k in Q4_K)
// is held as stored in two matrices: W's first n_out − tail_rows rows in w as `type`, the last tail_rows in tail_w
// as tail_type.
// The shapes in the comments below are those of the matrix W, whatever its layout.
typedef struct {
    const void *w;      // W [n_out − tail_rows, n_in] in the kernels' layout: weight_elements() elements of dtype
                        // `type`, or quantized_matrix_bytes() bytes of panels (weight_quantized types)
    WeightType type;
    int n_out, n_in;
    const float *bias;  // [n_out], or NULL
    int tail_rows;          // 0, or W's last rows held apart (both types then GGUF's blocks as stored)
    WeightType tail_type;
    const void *tail_w;     // W [n_out − tail_rows : n_out] as tail_type, or NULL
} Linear;

// A normalisation's parameters: LayerNorm has both, RMSNorm only gamma (cfg.norm says which).
typedef struct {
    const float *gamma;                 // [d]
    const float *beta;                  // [d], or NULL (RMSNorm)
} Norm;

typedef struct {
    Norm norm1;
    Linear attn_qkv;                    // [(H + 2·Hkv)·hd, d]: q, k, v stacked (GPT-2's c_attn; q/k/v_proj)
    const float *q_norm, *k_norm;       // [hd]: RMSNorm of each head's q and k (Qwen3), else NULL
    Linear attn_out;                    // [d, H·hd]
    Norm norm2;
    Linear mlp_up;                      // [F, d], or gated [2F, d]: the gate's F rows, then up's F rows
    Linear mlp_down;                    // [d, F]
} Block;

// How the weight matrices are held and multiplied (vectors — biases, norms, position embeddings — stay F32):
//   QUANT_NONE  as stored (F32, F16 or BF16), with F32 arithmetic: transformers' float32 results, within 1e-4;
//   QUANT_Q8    quantized to 8 bits at load, activations too (q8, kernels.h);
//   QUANT_BF16  in BF16 (F32 and F16 tensors rounded at load), multiplied with activations rounded to BF16 —
//               as transformers computes a bfloat16 model's matmuls — by the kernels' BF16 dot product
//               (Kernels.matmul_bf16_dot): twice the multiply-adds per instruction of F32 on AVX512_BF16, for
//               verifications and prompts, whose pace the arithmetic sets. Needs a variant that has one.
//   QUANT_Q4    the blocks' matrices quantized to 4 bits at load (q4, kernels.h), except the first and the last
//               layer's attention, which go to 8 bits (q8) with the embeddings; the head held in both, its q4 copy
//               read for every logit and its q8 one for each row's largest (HEAD_REFINED); activations to 8
//               bits, as for q8 (docs/quantization.md).
//   QUANT_STORED another name for QUANT_NONE, which holds a GGUF file's quantized matrices (Q8_0, Q4_0, and the
//               K-quants Q4_K, Q5_K, Q6_K) as the file's blocks, multiplied by kernels of their own (until the
//               K kernels decoded faster than q8, only --quant stored held the K-quants so; scripts still name it).
//               model_load holds no model as QUANT_STORED (Model.quant says QUANT_NONE or, for a file of blocks,
//               QUANT_Q8).
typedef enum { QUANT_NONE, QUANT_Q8, QUANT_BF16, QUANT_Q4, QUANT_STORED } Quant;

// "none", "q8", "bf16", "q4", "stored": the names the CLI and the bench take (--quant, --draft-quant)
const char *quant_name(Quant quant);

// The Quant named `name`; −1 with an error naming `option` (the flag that gave it) if it names none.
int quant_from_name(Quant *quant, const char *name, const char *option, Err *err);

// A job (a matmul, attention) runs on one thread per this many multiply-adds, up to max_threads: handing
// a small draft's matmul to a second thread costs more than it saves. 16K was as fast as any value tried for the
// drafts (64K slower for one), and no value changed the target's pace (docs/performance-history.md, "Measurements
// behind the kernels' choices").
#define MODEL_WORK_PER_THREAD ((size_t)1 << 14)

// Under --quant q4 the LM head reads 4 bits a weight for every logit of a row, then its 8-bit copy recomputes the
// row's HEAD_REFINED largest logits, so that the top of each distribution (its argmax, most of its mass) is the q8
// head's for little more than the bytes of a q4 head (docs/quantization.md, "The head").
enum { HEAD_REFINED = 32 };

// ids [≤ k] of the k highest logits of a row [V], highest first, the lower id first on a tie (the sampler's rank
// order); a logit of −inf or NaN is never taken. Returns how many: min(k, the logits above −inf). The q4 head's
// refinement ranks a row's coarse logits this way, and the greedy tree its children (tree_top_children).
int model_top_logits(int *ids, const float *logits, int V, int k);

// The activations of a forward (forward.c): its own to write, one forward at a time.
typedef struct ForwardScratch ForwardScratch;

typedef struct {
    Config cfg;
    const Kernels *kernels;
    Quant quant;                // how the weight matrices are held
    ThreadPool *pool;           // shared, not owned
    int max_threads;            // threads of the pool its jobs may use (model_load: all; a draft: --draft-threads)
    size_t work_per_thread;     // multiply-adds a job needs per thread it runs on (model_load:
                                // MODEL_WORK_PER_THREAD; 0: every job on max_threads, as tests of the split do)
    Linear wte;                 // token embeddings [V, d]; also the LM head when tied
    Linear lm_head;             // [n_vocab, d]: wte, or lm_head.weight when the checkpoint has it
    Linear lm_head_coarse;      // under QUANT_Q4, the head again in q4 (lm_head is q8): every logit comes from it,
                                // then lm_head recomputes the HEAD_REFINED largest of each row (forward.c,
                                // head_logits); otherwise n_out = 0: no coarse head
    int n_vocab;                // logits per position: V, or fewer after model_limit_vocab
    const float *wpe;           // learned position embeddings [n_positions, d], or NULL (rotary)
    float *inv_freq;            // rotary inverse frequencies [hd/2], or NULL (learned positions)
    Block *blocks;              // [L]
    Norm norm_f;                // the final normalisation
    size_t weight_bytes;        // bytes of weights one decode step streams (all matrices + vectors)
    void *arena;                // owns every weight above
    size_t arena_size;
    ForwardScratch *scratch;    // what every forward writes: the activations of up to TREE_MAX_ROWS rows
} Model;

// Loads config.json (and generation_config.json, if present) and the safetensors weights of a checkpoint folder
// (model.safetensors, or model.safetensors.index.json + shards). Every key variant of the published GPT-2 files is
// accepted; the Llama family's names are those of transformers (model.embed_tokens, model.layers.N.self_attn.q_proj,
// ...). Weights may be F32, F16 or BF16.
int model_load(Model *model, const char *dir, ThreadPool *pool, Err *err);

// The same, with the weight matrices held as `quant` says (model_load: QUANT_NONE).
int model_load_quantized(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err);

// A load's progress: report(ctx, read, total) after each tensor is read from the checkpoint (before it is converted
// or quantized), with the bytes of tensors read so far and of all the checkpoint's (read ≤ total; the last report
// may fall short of it by tensors no model reads).
typedef struct {
    void (*report)(void *ctx, size_t read, size_t total);
    void *ctx;
} LoadProgress;

// model_load_quantized, telling `progress` (unless NULL) of every tensor read.
int model_load_reporting(Model *model, const char *dir, ThreadPool *pool, Quant quant, const LoadProgress *progress,
                         Err *err);
void model_free(Model *model);

// Keeps only the logits of ids [0, n_vocab), 1 ≤ n_vocab ≤ V: the LM head computes no more rows. For a pair of
// models whose embedding tables are padded to different sizes, or past the tokenizer's vocabulary — ids that
// must never be sampled. Under q4 the head's refinement then picks the largest logits among those ids.
void model_limit_vocab(Model *model, int n_vocab);

// Multiply-adds of the weight matrices per token: every layer's and the LM head's weights, each once (a forward
// over T tokens does T times as many). Attention's products over the cached positions are not counted.
double model_matrix_multiply_adds(const Model *model);

// The context a generation uses when it names none: the model's own, at most this many positions. A KV cache
// holds K and V of every position for every layer and key/value head — Llama-3.1-8B's 131072 positions would
// take 17 GB each for K and V (F32); 4096 positions take 512 MB each, room for a long prompt and its continuation.
enum { DEFAULT_CONTEXT = 4096 };

// Runs the model with a context of min(n_ctx, its own) positions: cfg.n_positions becomes that, and the KV
// caches (model_kv_init) and the attention scratch hold only those positions. 1 ≤ n_ctx.
int model_limit_context(Model *model, int n_ctx, Err *err);

// The forward pass. Feeds T new tokens at positions [cache->len, cache->len + T), appends their K/V rows to the
// cache and writes logits: [T, n_vocab] when all_logits, else only the last position's [n_vocab]. The same function serves
// prefill (T = prompt length), decode (T = 1) and the verification of γ draft tokens (T = γ + 1): it is the chain
// case of model_forward_tree, and both are a batch of one sequence (model_forward_batch), through the same code.
//
// Batch invariance: the logits of a position are bit-identical whatever T it was computed in and whatever the
// thread count — and whatever the kernel variant (kernels.h, the canonical order) — so greedy speculative output
// equals greedy target output.
int model_forward(Model *model, KVCache *cache, const int *tokens, int T, float *logits, bool all_logits,
                  Err *err);

// The most rows a token tree's forward takes.
enum { TREE_MAX_ROWS = 64 };

// The forward pass over a token tree of T ≤ TREE_MAX_ROWS new rows (SpecInfer, Miao et al. 2024: one forward
// verifies every node of a tree under a tree attention mask). parent[i] ∈ [−1, i) is the row that row i follows, −1
// for the cache's last position; depth(i) = 0 for parent −1, else depth(parent) + 1. Row i sits at position
// cache->len + depth(i) (learned position embeddings and rotary angles alike), attends to the cache's rows
// [0, len) and to the rows on its own path from the cache, itself included, and its K/V go to cache row
// len + i; afterwards cache->len += T (kv_keep_path keeps one path). Writes logits [T, n_vocab], every row.
//
// Batch invariance extends to trees, at every T: row i's logits are bit-identical to those of the last row of a
// chain over its path — model_forward of the path's tokens on the same cache — whatever the thread count.
int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err);

// A token tree fed over several forwards (a drafter's, one level at a time): the tree's rows [0, cache->len − base)
// are in the cache already, at rows base.., from earlier calls; T more rows follow them. parent[j] covers every row
// j < cache->len − base + T of the tree, those in the cache with the parents they were fed with, and tokens and
// logits the T new rows only. Each row sees the cache's first `base` rows and its own path, as in one
// model_forward_tree of the whole tree: its logits are bit-identical to that forward's. At most TREE_MAX_ROWS rows
// in all; model_forward_tree is the case base = cache->len.
int model_extend_tree(Model *model, KVCache *cache, int base, const int *tokens, const int *parent, int T,
                      float *logits, Err *err);

// One sequence's new rows in a batched forward (model_forward_batch): T tokens fed onto its own cache, as a chain
// (parent NULL: model_forward's rows) or as rows of a token tree (parent and base: model_extend_tree's).
typedef struct {
    KVCache *cache;         // the sequence's own; no other sequence of the batch names it
    const int *tokens;      // [T]
    int T;
    const int *parent;      // NULL (a chain), or [cache->len − base + T], as model_extend_tree's
    int base;               // a tree's first cache row (parent not NULL)
    bool all_logits;        // logits of every row, else of the last row only
} SequenceRows;

// The forward pass over a batch of n sequences (continuous batching: Orca, Yu et al. 2022): each sequence's rows
// as model_forward (a chain) or model_extend_tree (a tree) would feed them onto its own cache, all in one pass —
// every weight matrix read once for all the batch's rows, each row attending to its own sequence's cache only. A
// batch is rows with a sequence each, as a tree is rows with a parent each: model_forward, model_extend_tree and
// model_forward_tree are this function over a batch of one. logits: for each sequence in turn, [T, n_vocab] when
// all_logits, else its last row's [n_vocab]. Nothing is fed when it fails (each sequence's checks, as those of
// the function it stands for, and no two sequences sharing a cache are checked first).
//
// Batch invariance extends to batches: a sequence's logits and K/V rows are bit-identical to those of its rows fed
// alone, whatever else is in the batch and whatever the thread count.
int model_forward_batch(Model *model, const SequenceRows *seqs, int n, float *logits, Err *err);

// A cache sized for this model.
int model_kv_init(const Model *model, KVCache *cache, Err *err);
// The bytes such a cache takes.
size_t model_kv_bytes(const Model *model);

// The rollback check (rollback_check.c): compares a cache after a rollback with a forward over the committed tokens
// in a cache of its own, and returns −1 with an error naming `name` (the model), the position and the largest
// difference if anything differs. cache holds tokens[0..cache->len); tokens[cache->len] is the next committed token
// (needed unless the cache is full); the cache received its first n_prefill tokens (≤ cache->len) in one forward,
// the prompt's prefill. `check` starts zeroed and serves one cache, over one sequence of committed tokens, until
// rollback_check_free. The debug build (SPECDEC_DEBUG) runs it after every rollback of either model
// (scheduler.c); it is compiled, and tested, in both builds. The cache keeps its length and its rows [0, len).
typedef struct {
    KVCache fresh;      // the committed tokens' rows, computed without rollbacks
    int *fed;           // [P]: the tokens `fresh` holds
    float *want, *got;  // [V]: logits from `fresh`, from the checked cache
} RollbackCheck;

int model_check_rollback(Model *model, KVCache *cache, RollbackCheck *check, const int *tokens, int n_prefill,
                         const char *name, Err *err);
void rollback_check_free(RollbackCheck *check);

#endif
