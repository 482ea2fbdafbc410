// gguf_convert.h — a Hugging Face folder (any family config.h reads) written as a GGUF file, as llama.cpp's tools
// write it: `bf16` as its convert_hf_to_gguf.py does (the kit's to_gguf.py for a llama: tensors renamed, a llama's
// q and k rows permuted per head into llama.cpp's rotary order, GPT-2's Conv1D matrices transposed, Llama 3's rope
// scaling as rope_freqs.weight, vectors F32, matrices BF16); `q8_0`, `q4_0`, `q4_k_m`, `q5_k_m`, `q6_k` as
// llama-quantize then writes that file with the same type (without an importance matrix): tensors sorted by layer
// then name, each matrix quantized by ggml's reference arithmetic (gguf_quantize.h) to the type its rules give:
//
//   every matrix                       the type (Q8_0, Q4_0; Q4_K for q4_k_m, Q5_K for q5_k_m, Q6_K for q6_k)
//   output.weight (token_embd if tied) Q8_0 for q8_0; else Q6_K (Q8_0 when its rows are not whole 256-blocks)
//   q4_k_m, q5_k_m: attn_v, ffn_down   Q6_K in the layers llama.cpp's use_more_bits picks (the first and last
//                                      eighth, and every third between); GPT-2's attn_qkv as attn_v
//   a row not whole blocks             Q6_K → Q8_0; Q4_K → Q5_0; Q5_K → Q5_1 (llama-quant.cpp's
//                                      tensor_type_fallback); not whole 32-blocks: F16
//   norms, biases, position_embd       as the bf16 file holds them (F32; position_embd BF16)
//
// A BF16 folder so gives the tensors the kit's to_gguf.py (then llama-quantize) writes, byte for byte; F32 and F16
// folders are quantized from their own values. Metadata: general.*, the `<arch>.*` hyper-parameters, the tokenizer
// (gguf_tokenizer.h) and the chat template given. The tensors are read, converted and written one at a time (peak
// memory a chunk of rows, whatever the model's size), to a temporary file renamed over path at the end.
#ifndef SPECDEC_GGUF_CONVERT_H
#define SPECDEC_GGUF_CONVERT_H

#include "base/error.h"
#include "base/threads.h"

typedef enum { CONVERT_BF16, CONVERT_Q8_0, CONVERT_Q4_0, CONVERT_Q4_K_M, CONVERT_Q5_K_M, CONVERT_Q6_K } ConvertType;

// "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m" or "q6_k"; anything else an error listing them.
int convert_type_parse(const char *text, ConvertType *type, Err *err);

// Writes folder dir as a GGUF file at path; chat_template (NULL: none) as tokenizer.chat_template. The rows of each
// tensor are converted by pool's threads (NULL: the caller alone), each row by one thread: the same bytes whatever
// their number.
int gguf_convert(const char *dir, const char *path, ConvertType type, const char *chat_template, ThreadPool *pool,
                 Err *err);

#endif
