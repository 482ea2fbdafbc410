// text_out.h — a generation's text as it is given out: each committed token decoded by the tokenizer's streaming
// decoder (no character split between pieces), scanned for stop strings (stop.h), and what no stop string can
// start in handed to a sink, in order. The CLI's --stop printer and the server's engine give their text out
// through it.
#ifndef SPECDEC_CHAT_TEXT_OUT_H
#define SPECDEC_CHAT_TEXT_OUT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/error.h"
#include "chat/stop.h"
#include "tokenizer/tokenizer.h"

// Receives text given out, text[0..len); `last`: generation ended, no more text comes.
typedef void TextSink(void *ctx, const char *text, size_t len, bool last);

typedef struct {
    TokenStream stream;
    StopScan scan;          // scan.taken: the bytes given out so far
    TextSink *sink;
    void *ctx;
} TextOut;

// Stop strings stops[0..n_stops) (each non-empty; none: n_stops = 0). -1 with err for an empty one or when out of
// memory (text_out_free then still frees what was made).
int text_out_init(TextOut *o, const Tokenizer *tok, const char *const *stops, int n_stops, TextSink *sink, void *ctx,
                  Err *err);

// Token id's text decoded — *piece[0..*n), valid until the next call, for a caller that counts the text — and
// scanned; *stopped: a stop string now occurs (the text is cut at its start). -1 with err when out of memory.
int text_out_token(TextOut *o, int id, const char **piece, size_t *n, bool *stopped, Err *err);

// At the end of generation: the bytes the decoder still held (an incomplete character, as U+FFFD), scanned, as
// text_out_token gives a token's.
int text_out_end(TextOut *o, const char **piece, size_t *n, bool *stopped, Err *err);

// Hands the sink what can be given out now: everything not yet given once `last` or a stop string occurred, else
// all but the tail that could start one.
void text_out_give(TextOut *o, bool last);

void text_out_free(TextOut *o);

#endif
