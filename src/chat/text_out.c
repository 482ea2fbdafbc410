// text_out.c — a generation's text as it is given out (text_out.h).
#include "chat/text_out.h"

int text_out_init(TextOut *o, const Tokenizer *tok, const char *const *stops, int n_stops, TextSink *sink, void *ctx,
                  Err *err) {
    *o = (TextOut){.sink = sink, .ctx = ctx};
    token_stream_init(&o->stream, tok);
    return stop_scan_init(&o->scan, stops, n_stops, err);
}

int text_out_token(TextOut *o, int id, const char **piece, size_t *n, bool *stopped, Err *err) {
    if (token_stream_push(&o->stream, id, piece, n, err)) return -1;
    return stop_scan_push(&o->scan, *piece, *n, stopped, err);
}

int text_out_end(TextOut *o, const char **piece, size_t *n, bool *stopped, Err *err) {
    token_stream_flush(&o->stream, piece, n);
    return stop_scan_push(&o->scan, *piece, *n, stopped, err);
}

void text_out_give(TextOut *o, bool last) {
    const char *text;
    size_t len;
    stop_scan_take(&o->scan, last, &text, &len);
    o->sink(o->ctx, text, len, last);
}

void text_out_free(TextOut *o) {
    token_stream_free(&o->stream);
    stop_scan_free(&o->scan);
}
