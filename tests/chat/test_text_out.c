// test_text_out.c — a generation's text as it is given out (src/chat/text_out.c): tokens decoded, scanned for stop
// strings, and handed to the sink in order, held back only while a stop string may be starting.
#include <stdlib.h>
#include <string.h>

#include "chat/text_out.h"
#include "harness.h"

typedef struct {
    char text[256];
    size_t len;
    int calls, last_calls;
} Collected;

static void collect(void *ctx, const char *text, size_t len, bool last) {
    Collected *c = ctx;
    if (c->len + len < sizeof c->text) {
        memcpy(c->text + c->len, text, len);
        c->len += len;
    }
    c->calls++;
    c->last_calls += last;
}

// `text` encoded, then given out token by token under the stop strings stops[0..n_stops) into *got, until a stop
// string occurs.
static void give_out_text(const Tokenizer *tok, const char *text, const char *const *stops, int n_stops, Collected *got) {
    Err err;
    int *ids, n_ids;
    TextOut o;
    CHECK(tokenizer_encode(tok, text, strlen(text), false, &ids, &n_ids, &err) == 0, "%s", err.msg);
    CHECK(text_out_init(&o, tok, stops, n_stops, collect, got, &err) == 0, "%s", err.msg);
    bool stopped = false;
    for (int i = 0; i < n_ids && !stopped; i++) {
        const char *piece;
        size_t n;
        CHECK(text_out_token(&o, ids[i], &piece, &n, &stopped, &err) == 0, "%s", err.msg);
        text_out_give(&o, false);
    }
    const char *piece;
    size_t n;
    CHECK(text_out_end(&o, &piece, &n, &stopped, &err) == 0, "%s", err.msg);
    text_out_give(&o, true);
    text_out_free(&o);
    free(ids);
}

TEST(text_out_gives_text_in_order_and_cuts_at_a_stop_string) {
    Tokenizer tok;
    Err err;
    CHECK(tokenizer_load_dir(&tok, "weights/pystd/target", &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    const char text[] = "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n";
    Collected all = {.len = 0};
    give_out_text(&tok, text, NULL, 0, &all);
    CHECK(all.len == strlen(text) && !memcmp(all.text, text, all.len) && all.last_calls == 1,
          "without stop strings, every piece at once: \"%.*s\"", (int)all.len, all.text);
    const char *const stops[] = {"\n\n", "xyz"};
    Collected cut = {.len = 0};
    give_out_text(&tok, text, stops, 2, &cut);
    const size_t want = strlen("def add(a, b):\n    return a + b");
    CHECK(cut.len == want && !memcmp(cut.text, text, want), "cut before the stop string: \"%.*s\"", (int)cut.len,
          cut.text);
    CHECK(cut.last_calls == 1, "the sink told the text ended once, not %d times", cut.last_calls);
    tokenizer_free(&tok);
}
