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
// gguf_tokenizer.c lists those known); add_bos puts the BOS before a prompt (a TemplateProcessing).
//
// A SentencePiece vocabulary (tokenizer.ggml.model "llama", as Llama 2 / TinyLlama / Mistral GGUFs carry: the
// pieces, their scores in tokenizer.ggml.scores, <0xXX> byte tokens) becomes the tokenizer.json that Hugging
// Face's converter makes of the same tokenizer.model: the merges rebuilt from the scores (gguf_tokenizer.c says
// how), byte fallback, Llama 2's normalizer and decoder, the BOS added unless add_bos_token is false. A vocabulary
// whose merges cannot be rebuilt (no scores, or one score for all) is refused, saying so.
#ifndef SPECDEC_GGUF_TOKENIZER_H
#define SPECDEC_GGUF_TOKENIZER_H

#include <jansson.h>

#include "checkpoint/gguf.h"
#include "checkpoint/gguf_write.h"

// The tokenizer.json equivalent of f's tokenizer metadata (a new reference), or NULL with an error naming the
// file and key.
json_t *gguf_tokenizer_json(const GgufFile *f, Err *err);

// f's tokenizer.chat_template: its bytes, NUL-terminated (malloc'd), or NULL with an error (none in the file, or
// not a string).
char *gguf_chat_template(const GgufFile *f, Err *err);

// The text of the token whose id the metadata entry `id_key` holds (tokenizer.ggml.bos_token_id, ...), NUL-terminated
// (malloc'd); NULL when either is missing or out of range.
char *gguf_token_text(const GgufFile *f, const char *id_key);

// The other way, for `specdec convert`: the byte-level BPE tokenizer of folder dir's tokenizer.json as llama.cpp's
// converter writes it into w's metadata: tokenizer.ggml.model "gpt2", pre (the name of its pre-tokenizer's pattern
// above; any other refused), tokens [n_vocab] (vocabulary and added tokens by id, "[PADi]" where neither has one),
// token_type (normal; added tokens control where special, else user-defined; unused), merges ("a b"), bos and eos
// ids (when ≥ 0), add_bos_token (tokenizer_config.json's, else whether its TemplateProcessing begins with a special
// token). 1 (nothing written) without a tokenizer.json; 0; or -1 with an error naming the file and field.
int gguf_write_tokenizer(GgufWriter *w, const char *dir, int n_vocab, int bos, int eos, Err *err);

#endif
