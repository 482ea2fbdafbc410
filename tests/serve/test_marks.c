// test_marks.c — where each piece of a streamed text came from (src/serve/marks.c), call by call as the engine makes
// the calls: committed tokens' text lengths first, their kinds after the round, pieces given out in any lengths.
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "serve/marks.h"

#define TOKENIZER "weights/pystd/target"

// Whether out's marks are, in order, kinds[i] with texts[i].
static bool marks_are(const TextMarks *out, int n, const TokenKind *kinds, const char *const *texts) {
    if (out->n_marks != n) return false;
    for (int i = 0; i < n; i++)
        if (out->marks[i].kind != kinds[i] || out->marks[i].len != strlen(texts[i]) ||
            memcmp(out->marks[i].text, texts[i], out->marks[i].len) != 0)
            return false;
    return true;
}

TEST(serve_marks_follow_the_text_given_out) {
    Tokenizer tok;
    Err err;
    CHECK(tokenizer_load_dir(&tok, TOKENIZER, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    size_t n;
    const char *x = tokenizer_token(&tok, 55, &n);  // "X"
    char rejected[16];
    snprintf(rejected, sizeof rejected, "%.*s", (int)n, x);
    int lone = -1;  // a token that is one byte of a character, alone: ill-formed UTF-8
    for (int id = 0; id < 512 && lone < 0; id++)
        if (tokenizer_token(&tok, id, &n)[0] & 0x80 && n == 1) lone = id;
    CHECK(lone >= 0, "no token of one byte ≥ 0x80 among the first 512");

    Marks m;
    marks_init(&m);
    TextMarks out;
    // A round: "abc" (a kept draft), then "de" (the correction) after a rejected draft; given out as "abcd", "e".
    CHECK(marks_committed(&m, 3) == 0 && marks_committed(&m, 2) == 0, "committed");
    CHECK(marks_token(&m, &tok, 7, TOKEN_ACCEPTED) == 0 && marks_token(&m, &tok, 55, TOKEN_REJECTED) == 0 &&
              marks_token(&m, &tok, 8, TOKEN_RESAMPLED) == 0,
          "kinds");
    const RoundOutcome round = {.gamma = 2, .width = 1, .drafted = 2, .accepted = 1, .committed = 2};
    CHECK(marks_round(&m, &round) == 0, "round");
    CHECK(marks_take(&m, "abcd", 4, &out) == 0, "take");
    CHECK(marks_are(&out, 3, (TokenKind[]){TOKEN_ACCEPTED, TOKEN_REJECTED, TOKEN_RESAMPLED},
                    (const char *[]){"abc", rejected, "d"}) &&
              out.n_rounds == 1 && out.rounds[0].accepted == 1,
          "abcd: %d marks, %d rounds", out.n_marks, out.n_rounds);
    CHECK(marks_take(&m, "e", 1, &out) == 0 && marks_are(&out, 1, (TokenKind[]){TOKEN_RESAMPLED},
                                                         (const char *[]){"e"}) && out.n_rounds == 0,
          "e: the correction's rest, no new round");
    // A round whose correction a stop string held back: the rejected draft waits with it; the decoder's last bytes
    // take the newest token's kind; what is never given out is never marked.
    CHECK(marks_committed(&m, 2) == 0 && marks_token(&m, &tok, lone, TOKEN_REJECTED) == 0 &&
              marks_token(&m, &tok, 9, TOKEN_BONUS) == 0 && marks_flushed(&m, 3) == 0,
          "the second round");
    CHECK(marks_take(&m, "", 0, &out) == 0 && out.n_marks == 0, "nothing given out: no marks");
    CHECK(marks_take(&m, "fgh", 3, &out) == 0 &&
              marks_are(&out, 2, (TokenKind[]){TOKEN_REJECTED, TOKEN_BONUS}, (const char *[]){"\xef\xbf\xbd", "fgh"}),
          "the ill-formed draft as U+FFFD, then the bonus token's text as far as given out: %d marks", out.n_marks);
    marks_free(&m);
    tokenizer_free(&tok);
}
