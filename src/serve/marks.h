// marks.h — where each piece of a streamed text came from: the paper's Figure 1 as data, for the server's
// `specdec.marks` extension (docs/server.md) and the page that draws it (src/serve/web/).
//
// The scheduler decodes each committed token's text as it commits it (SpecParams.stop), and tells the kinds of a
// round's tokens only after the round (SpecParams.on_token, the rejected drafts included, each just before the
// token that took its place; then .on_round); the text is given out once no stop string can start in it
// (chat/stop.h). Marks joins the two: the text not yet given out as a list of spans, each of one kind, with the
// rejected drafts' own texts between them, from which each piece given out takes its marks, byte for byte.
//
// A character split across tokens takes the kind of the token that completes it (the streaming decoder gives its
// bytes out then). A rejected draft is its token's own bytes, ill-formed UTF-8 as U+FFFD; it is given out with
// the text its replacement begins, so a draft whose replacement a stop string cut off is never given out.
#ifndef SPECDEC_SERVE_MARKS_H
#define SPECDEC_SERVE_MARKS_H

#include <stddef.h>

#include "speculative/params.h"
#include "tokenizer/tokenizer.h"

// One mark of a piece: a part of its text, or a rejected draft's text (never part of the text).
typedef struct {
    TokenKind kind;         // TOKEN_ACCEPTED, _REJECTED, _RESAMPLED, _BONUS or _TARGET
    const char *text;       // [len] valid UTF-8
    size_t len;
} TextMark;

// What a piece of text given out carries: its marks in order (the texts of all but the rejected, joined, are the
// piece) and the rounds finished since the piece before.
typedef struct {
    const TextMark *marks;
    int n_marks;
    const RoundOutcome *rounds;
    int n_rounds;
} TextMarks;

typedef struct {
    TokenKind kind;
    size_t len;             // bytes of the text (a rejected draft: of own)
    char *own;              // a rejected draft's text (malloc'd), else NULL
} MarkSpan;

typedef struct {
    MarkSpan *spans;                    // [n_spans] the text not given out yet, in order
    int n_spans, cap_spans;
    size_t *pending;                    // [n_pending] committed tokens' text lengths, their kinds still to come
    int n_pending, first_pending, cap_pending;
    TokenKind last_kind;                // of the newest committed token
    RoundOutcome *rounds, *rounds_out;  // finished since the last piece; the last piece's
    int n_rounds, cap_rounds, n_rounds_out, cap_rounds_out;
    TextMark *out;                      // [cap_out] the last piece's marks
    int cap_out;
    char **given;                       // [n_given] the rejected texts the last piece holds (freed at the next)
    int n_given, cap_given;
} Marks;

void marks_init(Marks *m);
void marks_free(Marks *m);

// A committed token added `bytes` of decoded text (its kind comes later, by marks_token). -1 out of memory.
int marks_committed(Marks *m, size_t bytes);

// A token as the scheduler decided it (SpecParams.on_token's order): a rejected draft's text becomes a mark of its
// own; any other kind labels the oldest committed token still unlabelled. -1 out of memory.
int marks_token(Marks *m, const Tokenizer *tok, int id, TokenKind kind);

// A round finished. -1 out of memory.
int marks_round(Marks *m, const RoundOutcome *round);

// The decoder's last bytes (held for a character that never completed) joined the text, of the newest token's kind.
int marks_flushed(Marks *m, size_t bytes);

// The next text[0..len) is given out: *out holds its marks and the rounds finished since the last call (valid
// until the next). Spans past the text given out wait for the next call. -1 out of memory.
int marks_take(Marks *m, const char *text, size_t len, TextMarks *out);

#endif
