// vocabulary.h — a tokenizer's vocabulary as the token masks read it (mask.h): each id's decoded bytes, special
// tokens and the ids past the tokenizer's (a model's padding rows) without any, the tokens a grammar references by
// name with their marker's byte (grammar.h), and the end-of-text ids.
#ifndef SPECDEC_GRAMMAR_VOCABULARY_H
#define SPECDEC_GRAMMAR_VOCABULARY_H

#include "grammar/mask.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    uint32_t *offset;   // [V + 1]
    char *bytes;
    int *end_ids;
    Vocabulary vocab;   // the view mask.h reads, into the arrays above
} TokenBytes;

// The vocabulary of a model with V ids whose tokenizer is tok, ending at end_ids[0..n_end), for grammar g (NULL:
// one that references no token). Each token g references (its markers: added tokens of tok, special or not) is
// spelled by its marker's one byte GRAMMAR_MARKER_BYTE + k, not by its text; an ordinary token holding a byte
// from GRAMMAR_MARKER_BYTE up (no valid UTF-8 text does) spells nothing; the other special tokens spell nothing
// either. -1 with err: a token g references is no added token of tok (named), or out of memory.
// The text of the first token g references that is no added token of tok with an id below V, or NULL.
const char *token_bytes_missing_marker(const Tokenizer *tok, int V, const Grammar *g);

int token_bytes_init(TokenBytes *tb, const Tokenizer *tok, int V, const int *end_ids, int n_end, const Grammar *g,
                     Err *err);
void token_bytes_free(TokenBytes *tb);

#endif
