// test_stop.c — stop strings over text that arrives in pieces, against a reference that looks at each prefix
// whole: generation stops at the first piece after which a stop string occurs, the text given out is exactly the
// text before the earliest such occurrence, and nothing is held back that no stop string could start.
#include <stdlib.h>
#include <string.h>

#include "chat/stop.h"
#include "harness.h"

// The reference: the end of the first prefix text[0..ends[k]) holding a stop string (k in *piece, -1 if none) and
// the earliest start of one in it (*cut; len if none).
static void reference(const char *text, size_t len, const size_t *ends, int n_pieces, char stops[][8], int n_stops,
                      int *piece, size_t *cut) {
    *piece = -1;
    *cut = len;
    for (int k = 0; k < n_pieces && *piece < 0; k++)
        for (int i = 0; i < n_stops; i++) {
            const char *hit = memmem(text, ends[k], stops[i], strlen(stops[i]));
            if (hit) {
                *piece = k;
                if ((size_t)(hit - text) < *cut) *cut = (size_t)(hit - text);
            }
        }
}

TEST(stop_strings_cut_exactly) {
    static const char alphabet[] = "ab\n<|>";
    for (int trial = 0; trial < 3000; trial++) {
        char text[64], stops[3][8];
        size_t len = (size_t)test_rand_int(0, 40), ends[64];
        for (size_t i = 0; i < len; i++) text[i] = alphabet[test_rand_int(0, 5)];
        int n_stops = test_rand_int(1, 3), n_pieces = 0;
        const char *stop_ptrs[3];
        for (int i = 0; i < n_stops; i++) {
            int sl = test_rand_int(1, 4);
            for (int k = 0; k < sl; k++) stops[i][k] = alphabet[test_rand_int(0, 5)];
            stops[i][sl] = '\0';
            stop_ptrs[i] = stops[i];
        }
        for (size_t at = 0; at < len;) {
            at += (size_t)test_rand_int(1, 4);
            ends[n_pieces++] = at < len ? at : len;
        }
        int want_piece;
        size_t want_cut;
        reference(text, len, ends, n_pieces, stops, n_stops, &want_piece, &want_cut);

        StopScan s;
        Err err = {""};
        CHECK(stop_scan_init(&s, stop_ptrs, n_stops, &err) == 0, "%s", err.msg);
        char given[64];
        size_t n_given = 0;
        int stopped_at = -1;
        for (int k = 0; k < n_pieces && stopped_at < 0; k++) {
            size_t from = k ? ends[k - 1] : 0;
            bool stopped;
            CHECK(stop_scan_push(&s, text + from, ends[k] - from, &stopped, &err) == 0, "%s", err.msg);
            if (stopped) stopped_at = k;
            const char *p;
            size_t n;
            stop_scan_take(&s, false, &p, &n);
            memcpy(given + n_given, p, n);
            n_given += n;
            // Held back: at most the longest stop string less one byte
            if (!stopped) CHECK(ends[k] - n_given < 4, "trial %d: %zu bytes held back", trial, ends[k] - n_given);
        }
        const char *p;
        size_t n;
        stop_scan_take(&s, true, &p, &n);
        memcpy(given + n_given, p, n);
        n_given += n;
        CHECK(stopped_at == want_piece, "trial %d: stopped after piece %d, wanted %d", trial, stopped_at, want_piece);
        CHECK(n_given == want_cut && memcmp(given, text, n_given) == 0, "trial %d: gave %zu bytes, wanted %zu", trial,
              n_given, want_cut);
        stop_scan_free(&s);
        if (test_failures()) break;
    }
}

TEST(stop_strings_refuse_empty) {
    StopScan s;
    Err err = {""};
    const char *stops[] = {"x", ""};
    CHECK(stop_scan_init(&s, stops, 2, &err) < 0 && strstr(err.msg, "empty stop string"), "%s", err.msg);
}
