// pipeline.h — what a tokenizer.json does around its BPE model: the normalizer and pre-tokenizer as one list of
// steps, the decoder's strip and the post-processor's special tokens.
//
// Steps. Hugging Face's normalizers and pre-tokenizers are built here from four kinds of step, each applied to
// the text that the steps before it produced:
//
//   tokenizer.json                                   steps
//   normalizer NFC                                   NFC
//   normalizer Prepend(p)                            PREPEND p
//   normalizer Replace(String a, b)                  REPLACE a → b
//   pre_tokenizer Split(pattern, behavior, invert)   SPLIT by the pattern (a Regex run by PCRE2, or a String)
//   pre_tokenizer Digits(individual_digits)          SPLIT by \p{N}: each digit alone, or runs of them
//   pre_tokenizer ByteLevel(add_prefix_space,        PREPEND " " unless the piece starts with it (if
//                           use_regex)                 add_prefix_space), then SPLIT by GPT-2's pattern (if
//                                                      use_regex; pretokenize.h) — and the byte-level alphabet
//   pre_tokenizer Metaspace(replacement r,           REPLACE " " → r, PREPEND r unless the piece starts with r
//                           prepend_scheme, split)     (always, or "first": only at the start of the text), then
//                                                      SPLIT before each r (if split)
//   Sequence of any of these                         their steps in order
//
// A SPLIT cuts a piece into smaller pieces; the steps after it apply to each. The pieces that come out of the
// last step are what BPE encodes.
#ifndef SPECDEC_PIPELINE_H
#define SPECDEC_PIPELINE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"

typedef enum { STEP_NFC, STEP_PREPEND, STEP_REPLACE, STEP_SPLIT } StepKind;

// What a SPLIT keeps of the pattern's matches ("delimiters") and of the text between them, as Hugging Face's
// SplitDelimiterBehavior: Removed drops the delimiters, Isolated makes each its own piece, MergedWithPrevious /
// MergedWithNext join each to the piece before / after it, Contiguous joins adjacent delimiters into one piece.
typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_WITH_PREVIOUS, SPLIT_MERGED_WITH_NEXT,
               SPLIT_CONTIGUOUS } SplitBehavior;

typedef struct {
    StepKind kind;
    char *text;              // PREPEND: the prefix; REPLACE: what is replaced (NUL-terminated, never empty)
    char *with;              // REPLACE: the replacement
    size_t text_len, with_len;
    bool unless_present;     // PREPEND: not if the piece already starts with the prefix
    bool only_at_start;      // PREPEND: only to a piece at the start of the input text
    pcre2_code *regex;       // SPLIT: the pattern, JIT-compiled; NULL for GPT-2's (pretokenize_next)
    SplitBehavior behavior;  // SPLIT
    bool invert;             // SPLIT: the pattern matches the pieces, not the delimiters
} Step;

typedef struct {
    Step *steps;             // [n_steps], normalizer first
    int n_steps;
    bool byte_level;         // a ByteLevel pre-tokenizer is among the steps' sources
    bool has_regex;          // some SPLIT runs PCRE2 (encoders then make its match data)
    // decoder: Replace steps on each token's name, ByteFallback, and the strip of the decoded text's start
    char **decode_from, **decode_to;  // [n_decode_replace] Replace: each occurrence of from becomes to
    int n_decode_replace;
    bool decode_byte_fallback;        // "<0xNN>" tokens decode to byte NN
    char strip_char;                  // Strip: up to strip_count of this character go from the text's start
    int strip_count;
    // post-processor: the special tokens' ids put before and after an encoded text
    int *prefix, *suffix;             // [n_prefix], [n_suffix]
    int n_prefix, n_suffix;
} Pipeline;

// Reads the normalizer, pre_tokenizer, decoder and post_processor of tokenizer.json (root) at path. Returns 0, or
// -1 with err naming the file, the field and its value for anything not supported (see the top of this file).
int pipeline_load(Pipeline *p, const char *path, const json_t *root, Err *err);

// The pipeline of vocab.json + merges.txt: ByteLevel with GPT-2's pattern.
int pipeline_gpt2(Pipeline *p, Err *err);

void pipeline_free(Pipeline *p);

#endif
