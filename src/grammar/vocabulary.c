// vocabulary.c — a tokenizer's vocabulary for the token masks (vocabulary.h).
#include "grammar/vocabulary.h"

#include <stdlib.h>
#include <string.h>

int token_bytes_init(TokenBytes *tb, const Tokenizer *tok, int V, const int *end_ids, int n_end, Err *err) {
    *tb = (TokenBytes){0};
    const int n_tok = tokenizer_vocab_size(tok);
    bool *special = calloc((size_t)V + 1, sizeof *special);
    tb->offset = malloc(((size_t)V + 1) * sizeof *tb->offset);
    tb->bytes = malloc((size_t)tok->token_off[n_tok] + 1);
    tb->end_ids = malloc(((size_t)n_end + 1) * sizeof *tb->end_ids);
    if (!special || !tb->offset || !tb->bytes || !tb->end_ids) {
        free(special);
        return err_fmt(err, "out of memory for the grammar's vocabulary");
    }
    for (int i = 0; i < tok->n_added; i++)
        if (tok->added[i].special && tok->added[i].id >= 0 && tok->added[i].id < V) special[tok->added[i].id] = true;
    tb->offset[0] = 0;
    for (int t = 0; t < V; t++) {
        size_t n = 0;
        const char *b = t < n_tok && !special[t] ? tokenizer_token(tok, t, &n) : NULL;
        if (b && n) memcpy(tb->bytes + tb->offset[t], b, n);
        tb->offset[t + 1] = tb->offset[t] + (uint32_t)(b ? n : 0);
    }
    free(special);
    if (n_end) memcpy(tb->end_ids, end_ids, (size_t)n_end * sizeof *end_ids);
    tb->vocab = (Vocabulary){.V = V, .offset = tb->offset, .bytes = tb->bytes, .end_ids = tb->end_ids, .n_end = n_end};
    return 0;
}

void token_bytes_free(TokenBytes *tb) {
    free(tb->offset);
    free(tb->bytes);
    free(tb->end_ids);
    *tb = (TokenBytes){0};
}
