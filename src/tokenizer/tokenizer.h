// tokenizer.h — GPT-2's byte-level BPE tokenizer: text ↔ token ids.
//
// Files. A checkpoint folder holds either a Hugging Face `tokenizer.json` (model BPE, its "type" may be absent;
// merges as "a b" strings or ["a", "b"] pairs; a ByteLevel pre-tokenizer; added tokens), or `vocab.json` +
// `merges.txt`, which are OpenAI's `encoder.json` + `vocab.bpe` under other names.
//
// Encoding. Text (UTF-8) is split into pieces by GPT-2's pattern (pretokenize.h); each piece's bytes become
// byte-level symbols, which are merged pairwise, always the adjacent pair of lowest merge rank first, until no
// pair has a merge; the symbols left are the piece's token ids.
//
// Special tokens. In plain text, special tokens such as "<|endoftext|>" are ordinary text: the string is encoded
// like any other ("<", "|", "end", "of", "text", "|", ">"), so that text from users cannot smuggle in control
// tokens. With allow_special (the CLI's --allow-special), each occurrence of a special token's text becomes that
// token's id. Special tokens are the tokenizer.json added tokens marked "special"; added tokens that are not
// special are always matched, as Hugging Face does. With vocab.json + merges.txt, "<|endoftext|>" is the one
// special token, if the vocabulary has it.
//
// A Tokenizer is read-only once loaded: any number of threads may encode and decode with it at once.
#ifndef SPECDEC_TOKENIZER_H
#define SPECDEC_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/bytesmap.h"
#include "base/error.h"

typedef struct {
    int id;
    bool special;    // matched only with allow_special
    char *text;      // its bytes, matched verbatim in the input
    size_t len;
} AddedToken;

typedef struct {
    int vocab_size;          // V: every id in 0..V-1 is a token
    uint32_t *token_off;     // [V + 1]: token id's bytes are token_bytes[token_off[id] .. token_off[id + 1])
    char *token_bytes;
    int byte_id[256];        // the one-byte token of each byte value, where merging starts
    BytesMap merges;         // (left id, right id) as two uint32 → rank << 32 | merged id
    BytesMap vocab;          // vocabulary token bytes → id, for tokenizer_find and ignore_merges
    bool ignore_merges;      // tokenizer.json option: a piece that is itself a token is not merged
    AddedToken *added;       // [n_added]
    int n_added;
} Tokenizer;

// Loads the tokenizer in checkpoint folder dir: tokenizer.json if present, else vocab.json + merges.txt, else
// encoder.json + vocab.bpe. Returns 0, or -1 with err naming the file and the field at fault.
int tokenizer_load_dir(Tokenizer *tok, const char *dir, Err *err);

// Loads a Hugging Face tokenizer.json.
int tokenizer_load_json(Tokenizer *tok, const char *path, Err *err);

// Loads vocab.json (token → id) and merges.txt (one "a b" merge a line, highest priority first, an optional
// "#version" line first); also OpenAI's encoder.json and vocab.bpe.
int tokenizer_load_files(Tokenizer *tok, const char *vocab_path, const char *merges_path, Err *err);

void tokenizer_free(Tokenizer *tok);

int tokenizer_vocab_size(const Tokenizer *tok);

// The id of the token whose bytes are exactly text (an added token's text, or a vocabulary token), or -1.
int tokenizer_find(const Tokenizer *tok, const char *text);

// The id of "<|endoftext|>", GPT-2's end-of-text token, or -1 if the vocabulary lacks it.
int tokenizer_eot_id(const Tokenizer *tok);

// Encodes text[0..len) (UTF-8; a NUL byte is an ordinary character) into *ids (malloc'd, the caller frees) and
// *n_ids. Special tokens are text unless allow_special (see the top of this file). Returns -1 with err for
// invalid UTF-8 (naming the byte offset) or when out of memory.
int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, bool allow_special, int **ids,
                     int *n_ids, Err *err);

// The bytes of token id (not NUL-terminated), in *len; NULL if id is out of range.
const char *tokenizer_token(const Tokenizer *tok, int id, size_t *len);

// Concatenates the bytes of ids[0..n_ids) into *text (malloc'd and NUL-terminated; the caller frees), *len bytes
// without the NUL. The bytes are exactly the encoded text, so they may be invalid UTF-8 when a multi-byte
// character is split over ids that are not all there. Returns -1 with err for an id out of range.
int tokenizer_decode(const Tokenizer *tok, const int *ids, int n_ids, char **text, size_t *len, Err *err);

// Streaming decoder for generation: takes ids one at a time and gives back text that is always valid UTF-8. The
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
