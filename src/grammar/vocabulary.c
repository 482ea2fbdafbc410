// vocabulary.c — a tokenizer's vocabulary for the token masks (vocabulary.h).
#include "grammar/vocabulary.h"

#include <stdlib.h>
#include <string.h>

// Token t's bytes for the masks: NULL for none. marker[t]: its marker's byte, or 0.
static const char *mask_bytes(const Tokenizer *tok, int t, const bool *special, const unsigned char *marker,
                              size_t *n) {
    *n = 0;
    if (marker[t]) {
        *n = 1;
        return (const char *)&marker[t];
    }
    if (t >= tokenizer_vocab_size(tok) || special[t]) return NULL;
    const char *b = tokenizer_token(tok, t, n);
    for (size_t i = 0; b && i < *n; i++)
        if ((unsigned char)b[i] >= GRAMMAR_MARKER_BYTE) b = NULL;  // (in no valid UTF-8 text)
    if (!b) *n = 0;
    return b;
}

const char *token_bytes_missing_marker(const Tokenizer *tok, int V, const Grammar *g) {
    for (int k = 0; g && k < g->n_markers; k++) {
        const AddedToken *a = tokenizer_added(tok, g->markers[k]);
        if (!a || a->id < 0 || a->id >= V) return g->markers[k];
    }
    return NULL;
}

int token_bytes_init(TokenBytes *tb, const Tokenizer *tok, int V, const int *end_ids, int n_end, const Grammar *g,
                     Err *err) {
    *tb = (TokenBytes){0};
    const int n_tok = tokenizer_vocab_size(tok);
    bool *special = calloc((size_t)V + 1, sizeof *special);
    unsigned char *marker = calloc((size_t)V + 1, 1);
    tb->offset = malloc(((size_t)V + 1) * sizeof *tb->offset);
    tb->bytes = malloc((size_t)tok->token_off[n_tok] + GRAMMAR_MARKERS_MAX + 1);  // (a marker past the tokenizer's ids)
    tb->end_ids = malloc(((size_t)n_end + 1) * sizeof *tb->end_ids);
    int rc = special && marker && tb->offset && tb->bytes && tb->end_ids
                 ? 0
                 : err_fmt(err, "out of memory for the grammar's vocabulary");
    for (int i = 0; rc == 0 && i < tok->n_added; i++)
        if (tok->added[i].special && tok->added[i].id >= 0 && tok->added[i].id < V) special[tok->added[i].id] = true;
    const char *missing = token_bytes_missing_marker(tok, V, g);
    if (rc == 0 && missing)
        rc = err_fmt(err, "grammar: the token %s%s%s it references is no added token of the tokenizer",
                     missing[0] == '<' ? "" : "<", missing, missing[0] == '<' ? "" : ">");
    for (int k = 0; rc == 0 && g && k < g->n_markers; k++)
        marker[tokenizer_added(tok, g->markers[k])->id] = (unsigned char)(GRAMMAR_MARKER_BYTE + k);
    if (rc == 0) {
        tb->offset[0] = 0;
        for (int t = 0; t < V; t++) {
            size_t n;
            const char *b = mask_bytes(tok, t, special, marker, &n);
            if (n) memcpy(tb->bytes + tb->offset[t], b, n);
            tb->offset[t + 1] = tb->offset[t] + (uint32_t)n;
        }
        if (n_end) memcpy(tb->end_ids, end_ids, (size_t)n_end * sizeof *end_ids);
        tb->vocab = (Vocabulary){.V = V, .offset = tb->offset, .bytes = tb->bytes, .end_ids = tb->end_ids,
                                 .n_end = n_end};
    }
    free(special);
    free(marker);
    if (rc) token_bytes_free(tb);
    return rc;
}

void token_bytes_free(TokenBytes *tb) {
    free(tb->offset);
    free(tb->bytes);
    free(tb->end_ids);
    *tb = (TokenBytes){0};
}
