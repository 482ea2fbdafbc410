// gguf_tokenizer.h — the tokenizer and chat template in a GGUF file's metadata, as the Hugging Face files they were
// converted from (tokenizer.json, tokenizer_config.json's chat_template), for the loaders that read those.
//
// llama.cpp's converter writes a byte-level BPE tokenizer as tokenizer.ggml.model "gpt2": the tokens
// (tokenizer.ggml.tokens, in GPT-2's byte-level alphabet, the id their index), their types
// (tokenizer.ggml.token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte), the merges
// (tokenizer.ggml.merges, "a b" each, highest priority first), bos/eos/pad ids, add_bos_token, and the
// pre-tokenizer by name (tokenizer.ggml.pre) in place of tokenizer.json's pattern. Read back: normal and byte
// tokens are the BPE vocabulary, control tokens special added tokens, user-defined ones added tokens matched in any
// text; the pre-tokenizer's name gives the pattern and steps of the family's tokenizer.json (PRE_TOKENIZERS in
// gguf_tokenizer.c lists those known); add_bos puts the BOS before a prompt (a TemplateProcessing). A
// SentencePiece vocabulary (tokenizer.ggml.model "llama", as Llama 2 / TinyLlama GGUFs carry) is refused by name.
#ifndef SPECDEC_GGUF_TOKENIZER_H
#define SPECDEC_GGUF_TOKENIZER_H

#include <jansson.h>

#include "checkpoint/gguf.h"

// The tokenizer.json equivalent of f's tokenizer metadata (a new reference), or NULL with an error naming the
// file and key.
json_t *gguf_tokenizer_json(const GgufFile *f, Err *err);

// f's tokenizer.chat_template: its bytes, NUL-terminated (malloc'd), or NULL with an error (none in the file, or
// not a string).
char *gguf_chat_template(const GgufFile *f, Err *err);

// The text of the token whose id the metadata entry `id_key` holds (tokenizer.ggml.bos_token_id, ...), NUL-terminated
// (malloc'd); NULL when either is missing or out of range.
char *gguf_token_text(const GgufFile *f, const char *id_key);

#endif
