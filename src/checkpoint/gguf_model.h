// gguf_model.h — a GGUF file (gguf.h) seen as a Hugging Face checkpoint: its metadata as the Config that
// config.json would give, its tensors under transformers' names and shapes, so that the one loader (model/load.c)
// and the one forward read either.
//
// Architectures (general.architecture): llama (Llama 2/3.x, Mistral, SmolLM, TinyLlama as llama.cpp converts
// them), qwen2, qwen3, gpt2. The hyper-parameters come from `<arch>.*` keys as llama.cpp's converter writes them
// (context_length, embedding_length, block_count, feed_forward_length, attention.head_count[_kv],
// attention.key_length, attention.layer_norm[_rms]_epsilon, rope.freq_base, rope.scaling.*), the token ids from
// tokenizer.ggml.*; biases, Qwen3's q/k norms and an untied head from the tensors present. What the converter
// changed is undone: a llama's q and k rows are read back in transformers' order (StTensor.rotary_rows), GPT-2's
// matrices are [n_out, n_in] (StCheckpoint.linear_gpt2), and `rope_freqs.weight` (Llama 3's rope scaling as
// per-frequency divisors) stays under its name for the loader.
#ifndef SPECDEC_GGUF_MODEL_H
#define SPECDEC_GGUF_MODEL_H

#include "checkpoint/config.h"
#include "checkpoint/gguf.h"
#include "checkpoint/safetensors.h"

// The Config of the model in f. Unknown keys are ignored; a missing size, an architecture not listed above, a
// rope scaling or a partial rotation not implemented are errors naming the file and key.
int gguf_config(Config *cfg, const GgufFile *f, Err *err);

// The tensors of f as a checkpoint (st_find by transformers' names; st_close frees the view, not f, which must
// outlive it). Tensors of types specdec does not read are refused by name, listing those it reads.
int gguf_view(StCheckpoint *ckpt, const GgufFile *f, const Config *cfg, Err *err);

// transformers' name for GGUF tensor `name` (of a GPT-2 or of the Llama family) into out (size bytes): mapped, or
// the name itself when unknown (the loader then reports it unused).
void gguf_hf_name(char *out, size_t size, const char *name, bool gpt2);

#endif
