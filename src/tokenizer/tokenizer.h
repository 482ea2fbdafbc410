// tokenizer.h — byte-pair encoding tokenizers as Hugging Face's tokenizer.json describes them: text ↔ token ids.
//
// Files. A checkpoint folder holds either a Hugging Face `tokenizer.json`, or `vocab.json` + `merges.txt` (GPT-2's
// files, which are OpenAI's `encoder.json` + `vocab.bpe` under other names).
//
// tokenizer.json. The model is BPE (its "type" may be absent; merges as "a b" strings or ["a", "b"] pairs). Around
// it, the parts that GPT-2, Llama 2/3, TinyLlama, Mistral, SmolLM and Qwen 2/2.5/3 use (pipeline.h lists them): a
// normalizer (NFC, Prepend, Replace, a Sequence of them), a pre-tokenizer (Split by the file's own regular
// expression, run by PCRE2; Digits; ByteLevel; Metaspace; a Sequence of them), a decoder (ByteLevel, or Replace /
// ByteFallback / Fuse / Strip / Metaspace as SentencePiece-style files have) and a post-processor (ByteLevel,
// TemplateProcessing: the special tokens put around the text, such as Llama's BOS). Any other kind of model,
// normalizer, pre-tokenizer, decoder or post-processor is refused at load, naming the field and its value.
//
// Two alphabets. With a ByteLevel pre-tokenizer (GPT-2, Llama 3, Qwen) the vocabulary's tokens are written in
// GPT-2's byte-level alphabet and BPE starts from one symbol per byte. Without it (Llama 2, TinyLlama, Mistral:
// "SentencePiece-style") tokens are plain UTF-8 ("▁the"), BPE starts from one symbol per character, and a
// character outside the vocabulary becomes its bytes' <0xNN> tokens (byte_fallback) or the unknown token.
//
// Encoding. The input is first split on added tokens (below); each stretch of text between them is normalized and
// pre-tokenized into pieces, and each piece is byte-pair encoded: symbols are merged pairwise, always the adjacent
// pair of lowest merge rank first, until no pair has a merge; with ignore_merges (Llama 3) a piece that is itself
// a vocabulary token is that token. Added tokens are matched leftmost, longest first, in the text before
// normalization (Hugging Face matches those marked "normalized" after it: the same unless the normalizer changes
// their text).
//
// Unicode versions. The patterns' classes (\p{L}, \p{N}) come from PCRE2's tables (Unicode 14 in Debian 12), NFC
// from utf8proc's (15), GPT-2's scanner from utf8proc's; Hugging Face uses Oniguruma's and older NFC tables: its
// NFC leaves combining marks encoded since Unicode 13 where they are, where specdec orders them as Unicode says
// (test_tokenizer_parity.c tests this and parity on characters assigned in Unicode 14). \s means Unicode's
// White_Space, as in Oniguruma.
//
// Special tokens. In plain text, special tokens such as "<|endoftext|>" are ordinary text: the string is encoded
// like any other ("<", "|", "end", "of", "text", "|", ">"), so that text from users cannot smuggle in control
// tokens. With allow_special (the CLI's --allow-special), each occurrence of a special token's text becomes that
// token's id. Special tokens are the tokenizer.json added tokens marked "special"; added tokens that are not
// special are always matched, as Hugging Face does. With vocab.json + merges.txt, "<|endoftext|>" is the one
// special token, if the vocabulary has it. tokenizer_encode never adds tokens that are not in the text (Hugging
// Face's add_special_tokens=False); tokenizer_add_special_tokens adds the post-processor's, as a checkpoint's
// own tokenizer does when it encodes a prompt.
//
// Decoding gives each token's bytes: byte-level tokens' bytes, or SentencePiece tokens after the decoder ("▁" →
// " ", "<0x0A>" → "\n"), added tokens' text verbatim; tokenizer_decode then strips what the decoder's Strip (or
// Metaspace) strips at the start of the text.
//
// A Tokenizer is read-only once loaded: any number of threads may encode and decode with it at once.
#ifndef SPECDEC_TOKENIZER_H
#define SPECDEC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytesmap.h"
#include "tokenizer/pipeline.h"
#include "base/error.h"

#define WORD_START "\xE2\x96\x81"  // U+2581 "▁", SentencePiece's mark of a space (3 bytes of UTF-8)

typedef struct {
    int id;
    bool special;    // matched only with allow_special
    char *text;      // its bytes, matched verbatim in the input
    size_t len;
} AddedToken;

typedef struct {
    int vocab_size;          // V: every id in 0..V-1 is a token
    uint32_t *token_off;     // [V + 1]: token id's decoded bytes are token_bytes[token_off[id] .. token_off[id + 1])
    char *token_bytes;
    bool byte_level;         // BPE starts from bytes (byte_id), else from characters (looked up in vocab)
    int byte_id[256];        // byte level: the one-byte token of each byte value
    bool byte_fallback_enabled;  // SentencePiece style: a character without a token becomes its bytes' tokens
    int byte_fallback[256];  // with byte_fallback: the <0xNN> token of each byte, else -1
    int unk_id;              // the unknown token, for a character without a token; -1: such characters are dropped
    bool fuse_unk;           // consecutive unknown characters become one unknown token
    BytesMap merges;         // (left id, right id) as two uint32 → rank << 32 | merged id
    BytesMap vocab;          // the model's tokens → id: their bytes (byte level) or their UTF-8 names
    bool ignore_merges;      // tokenizer.json option: a piece that is itself a token is not merged
    bool split_words;        // SentencePiece style: BPE may run word by word, each word cut before a WORD_START
                             // that follows another character, since no token spans such a cut (the result is
                             // the same; the words repeat, so the cache serves them)
    AddedToken *added;       // [n_added]
    int n_added;
    Pipeline pipeline;       // normalizer and pre-tokenizer steps, the decoder's strip, the post-processor's tokens
} Tokenizer;

// Loads the tokenizer in checkpoint folder dir: tokenizer.json if present, else vocab.json + merges.txt, else
// encoder.json + vocab.bpe; or, where dir is a GGUF file (or a folder of one: gguf_checkpoint_path), the tokenizer
// in its metadata (tokenizer_load_gguf). Returns 0, or -1 with err naming the file and the field at fault.
int tokenizer_load_dir(Tokenizer *tok, const char *dir, Err *err);

// Loads the tokenizer in a GGUF file's metadata (checkpoint/gguf_tokenizer.h says what is read).
int tokenizer_load_gguf(Tokenizer *tok, const char *path, Err *err);

// Loads a Hugging Face tokenizer.json.
int tokenizer_load_json(Tokenizer *tok, const char *path, Err *err);

// The same from a parsed tokenizer.json `root` (a GGUF file's, gguf_tokenizer.h); path names it in messages.
struct json_t;
int tokenizer_load_json_value(Tokenizer *tok, const char *path, const struct json_t *root, Err *err);

// Loads vocab.json (token → id) and merges.txt (one "a b" merge a line, highest priority first, an optional
// "#version" line first); also OpenAI's encoder.json and vocab.bpe.
int tokenizer_load_files(Tokenizer *tok, const char *vocab_path, const char *merges_path, Err *err);

void tokenizer_free(Tokenizer *tok);

int tokenizer_vocab_size(const Tokenizer *tok);

// The id of the token that is exactly text — an added token's text, or a vocabulary token as the model has it: its
// bytes (byte level) or its name ("▁the", SentencePiece style) — or -1.
int tokenizer_find(const Tokenizer *tok, const char *text);

// The added token whose text is exactly text (special or not), or NULL.
const AddedToken *tokenizer_added(const Tokenizer *tok, const char *text);

// The id of "<|endoftext|>", GPT-2's end-of-text token, or -1 if the vocabulary lacks it.
int tokenizer_eot_id(const Tokenizer *tok);

// Encodes text[0..len) (UTF-8; a NUL byte is an ordinary character) into *ids (malloc'd, the caller frees) and
// *n_ids. Special tokens are text unless allow_special (see the top of this file); no token is added that is not
// in the text. Returns -1 with err for invalid UTF-8 (naming the byte offset), a regular expression that fails
// on this text (PCRE2's message), or when out of memory.
int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, bool allow_special, int **ids,
                     int *n_ids, Err *err);

// Encodes a text whose bytes come from two sources, as a chat template's rendering does (chat/template.h): each
// special token's text becomes its id only where every byte of it has from_data[i] = 0 (the template's own
// text); elsewhere it is ordinary text. Everything else is as tokenizer_encode with allow_special: the stretches
// between special tokens are encoded whole, whichever source their bytes come from, so that a text with no
// special-token text in its data encodes exactly as tokenizer_encode(..., allow_special = true) encodes it.
int tokenizer_encode_marked(const Tokenizer *tok, const char *text, size_t len, const unsigned char *from_data,
                            int **ids, int *n_ids, Err *err);

// Puts the post-processor's special tokens around an encoded text, as the checkpoint's tokenizer does for a
// prompt (Llama's BOS before it, for instance): *ids (malloc'd, as tokenizer_encode gives it) is replaced by a
// longer array. Returns -1 with err when out of memory, *ids unchanged.
int tokenizer_add_special_tokens(const Tokenizer *tok, int **ids, int *n_ids, Err *err);

// The decoded bytes of token id (not NUL-terminated; see Decoding at the top), in *len; NULL if id is out of
// range.
const char *tokenizer_token(const Tokenizer *tok, int id, size_t *len);

// Concatenates the decoded bytes of ids[0..n_ids) into *text (malloc'd and NUL-terminated; the caller frees),
// *len bytes without the NUL, less the decoder's Strip at the start. For a lossless tokenizer these are exactly
// the encoded text, so they may be invalid UTF-8 when a multi-byte character is split over ids that are not all
// there. Returns -1 with err for an id out of range.
int tokenizer_decode(const Tokenizer *tok, const int *ids, int n_ids, char **text, size_t *len, Err *err);

// Streaming decoder for generation: takes ids one at a time and gives back text that is always valid UTF-8 (the
// tokens' decoded bytes; no Strip, since generated text continues a prompt). The
// bytes of a character split across tokens are held back until the character is complete; bytes that cannot be
// part of valid UTF-8 become U+FFFD, one for each maximal subpart (utf8.h).
typedef struct {
    const Tokenizer *tok;
    unsigned char held[3];  // the start of a multi-byte character still waiting for its last bytes
    size_t n_held;
    char *in, *out;         // scratch: the held bytes and the new token's; the text to give back
    size_t in_cap, out_cap;
} TokenStream;

void token_stream_init(TokenStream *ts, const Tokenizer *tok);

// Adds token id; *text (valid until the next call) and *len receive the text now complete, possibly empty.
// Returns -1 with err for an id out of range or when out of memory.
int token_stream_push(TokenStream *ts, int id, const char **text, size_t *len, Err *err);

// At the end of generation: gives back the held bytes, as U+FFFD since they are an incomplete character.
void token_stream_flush(TokenStream *ts, const char **text, size_t *len);

void token_stream_free(TokenStream *ts);

#endif
