// pretokenize.h — GPT-2's pre-tokenizer: the split of text into the pieces that BPE encodes one by one.
//
// The pieces are exactly the matches of GPT-2's pattern, applied left to right:
//
//     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// where \p{L} is a letter (general category L*), \p{N} a number (N*) and \s the Unicode White_Space property, as
// in Python's `regex` (OpenAI's encoder), Rust's `regex` (tiktoken) and Oniguruma (Hugging Face). JavaScript's \s
// differs on two code points (it excludes U+0085 and includes U+FEFF); this scanner follows Unicode. Letters and
// numbers come from utf8proc, so from the Unicode version it implements (utf8proc_unicode_version()).
//
// It is the split of a ByteLevel pre-tokenizer with use_regex (GPT-2's own files, pipeline.h). Every other
// pattern runs in PCRE2; this scanner stays because it is faster than PCRE2 running the same pattern (about 1.5×
// on Python sources, bench/bench_tokenizer.c: `build/release/run-bench -s tokenizer`); both give Hugging Face's
// pieces on the Llama 3 vocabulary (the pipeline variants of test_tokenizer_parity.c).
#ifndef SPECDEC_PRETOKENIZE_H
#define SPECDEC_PRETOKENIZE_H

#include <stddef.h>

// The end of the piece that starts at text[pos], for pos < len and text[0..len) valid UTF-8 (utf8.h). Every
// piece is at least one character long, so `for (p = 0; p < len; p = e) e = pretokenize_next(text, len, p);`
// visits the pieces in order and they tile the text.
size_t pretokenize_next(const char *text, size_t len, size_t pos);

#endif
