// vocabulary.h — a tokenizer's vocabulary as the token masks read it (mask.h): each id's decoded bytes, special
// tokens and the ids past the tokenizer's (a model's padding rows) without any, and the end-of-text ids.
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

// The vocabulary of a model with V ids whose tokenizer is tok, ending at end_ids[0..n_end). -1 with err (memory).
int token_bytes_init(TokenBytes *tb, const Tokenizer *tok, int V, const int *end_ids, int n_end, Err *err);
void token_bytes_free(TokenBytes *tb);

#endif
