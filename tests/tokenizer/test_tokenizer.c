// test_tokenizer.c — the tokenizer on small hand-made vocabularies: the pre-tokenizer's split, BPE against a naive
// reference, both file formats, the special-token policy, decoding and streaming decoding, and each rejection of
// bad input. Parity with the real GPT-2 tokenizer is in test_tokenizer_parity.c.
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"
#include "base/utf8.h"

static const Merge small_merges[] = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}, {" w", "or"}, {" wor", "l"},
    {" worl", "d"}, {"\xC3", "\xA9"}, {"\xE2", "\x82"}, {"\xE2\x82", "\xAC"}, {"'", "s"},
};
enum { N_SMALL = sizeof small_merges / sizeof *small_merges };

// Writes root as dir/tokenizer.json and loads the folder; returns the rc, the message in err.
static int load_json_dir(Tokenizer *tok, const json_t *root, Err *err) {
    char *dir = fixture_dir();
    free(fixture_write_json(dir, "tokenizer.json", root));
    int rc = tokenizer_load_dir(tok, dir, err);
    fixture_remove_dir(dir);
    return rc;
}

// Loads the small fixture tokenizer (tokenizer.json form).
static void load_small(Tokenizer *tok) {
    json_t *root = fixture_tokenizer_json(small_merges, N_SMALL);
    Err err = {""};
    CHECK(load_json_dir(tok, root, &err) == 0, "loading the fixture: %s", err.msg);
    json_decref(root);
}

// Encodes text (a C string) and checks that it succeeds.
static int *encode(const Tokenizer *tok, const char *text, bool allow_special, int *n) {
    int *ids = NULL;
    Err err = {""};
    CHECK(tokenizer_encode(tok, text, strlen(text), allow_special, &ids, n, &err) == 0, "encode \"%s\": %s", text,
          err.msg);
    return ids;
}

// Checks that ids[0..n) equals want[0..n_want).
static void check_ids(const char *what, const int *ids, int n, const int *want, int n_want) {
    bool same = n == n_want;
    for (int i = 0; same && i < n; i++) same = ids[i] == want[i];
    CHECK(same, "%s: got %d ids, wanted %d (first: %d vs %d)", what, n, n_want, n ? ids[0] : -1,
          n_want ? want[0] : -1);
}

TEST(tokenizer_pretokenize_matches_gpt2_pattern) {
    static const struct {
        const char *text;
        const char *pieces[6];
    } cases[] = {
        {"Hello world", {"Hello", " world"}},
        {"  x", {" ", " x"}},                               // a space run leaves its last space to the word
        {"a  \nb", {"a", "  ", "\n", "b"}},
        {"x   ", {"x", "   "}},                             // trailing white space stays together
        {"\t\tx", {"\t", "\t", "x"}},
        {"a\r\n\r\nb", {"a", "\r\n\r", "\n", "b"}},
        {"it's", {"it", "'s"}},
        {"IT'S", {"IT", "'", "S"}},                         // contractions are lower case only
        {"we'll they'RE", {"we", "'ll", " they", "'", "RE"}},
        {"''s !'s", {"''", "s", " !'", "s"}},               // an "other" run does not stop at a contraction
        {" 's", {" '", "s"}},
        {"123abc 45", {"123", "abc", " 45"}},
        {"\xC2\xA0" "a", {"\xC2\xA0", "a"}},                // NBSP is white space, not the optional space
        {"caf\xC3\xA9 na\xC3\xAFve", {"caf\xC3\xA9", " na\xC3\xAFve"}},
        {"e\xCC\x81", {"e", "\xCC\x81"}},                   // a combining mark (Mn) is "other"
        {"\xE4\xB8\xAD\xE6\x96\x87 x", {"\xE4\xB8\xAD\xE6\x96\x87", " x"}},
        {"\xF0\x9F\x98\x80!", {"\xF0\x9F\x98\x80!"}},       // emoji (So) and punctuation: one "other" run
        {"\xD9\xA3\xE2\x85\xA0x", {"\xD9\xA3\xE2\x85\xA0", "x"}},  // Arabic-Indic 3 (Nd), Roman numeral I (Nl)
        {"a \xC2\x85" "b", {"a", " ", "\xC2\x85", "b"}},    // U+0085 is White_Space (not in JavaScript's \s)
        {"x\xC2\x85\xC2\x85 ", {"x", "\xC2\x85\xC2\x85 "}},
        {" \xEF\xBB\xBF" "b", {" \xEF\xBB\xBF", "b"}},      // U+FEFF is not White_Space (JavaScript's \s is)
        {"\xEF\xBB\xBF ", {"\xEF\xBB\xBF", " "}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const char *text = cases[c].text;
        size_t len = strlen(text), pos = 0;
        for (int k = 0; k < 6 && cases[c].pieces[k]; k++) {
            const char *want = cases[c].pieces[k];
            size_t end = pos < len ? pretokenize_next(text, len, pos) : pos;
            CHECK(end - pos == strlen(want) && memcmp(text + pos, want, end - pos) == 0,
                  "case %zu piece %d: got \"%.*s\", wanted \"%s\"", c, k, (int)(end - pos), text + pos, want);
            pos = end;
        }
        CHECK(pos == len, "case %zu: pieces left after offset %zu", c, pos);
    }
}

// The naive BPE that every reference describes: merge the leftmost adjacent pair of lowest rank until none is
// left. Appends the ids of piece[0..len) to ids.
static void naive_bpe(const Merge *merges, size_t n_merges, const char *piece, size_t len, int *ids, int *n) {
    char sym[128][64];
    int n_sym = 0;
    for (size_t i = 0; i < len; i++) snprintf(sym[n_sym++], sizeof sym[0], "%c", piece[i]);
    for (;;) {
        size_t best_rank = n_merges;
        int best = -1;
        for (int i = 0; i + 1 < n_sym; i++)
            for (size_t r = 0; r < best_rank; r++)
                if (strcmp(sym[i], merges[r].left) == 0 && strcmp(sym[i + 1], merges[r].right) == 0) {
                    best_rank = r;
                    best = i;
                }
        if (best < 0) break;
        char joined[2 * sizeof sym[0]];  // (test merges are short: the join always fits in sym[best])
        snprintf(joined, sizeof joined, "%s%s", sym[best], sym[best + 1]);
        snprintf(sym[best], sizeof sym[0], "%.63s", joined);
        memmove(sym[best + 1], sym[best + 2], (size_t)(n_sym - best - 2) * sizeof sym[0]);
        n_sym--;
    }
    for (int i = 0; i < n_sym; i++) ids[(*n)++] = fixture_id(merges, n_merges, sym[i]);
}

TEST(tokenizer_bpe_matches_naive_reference) {
    for (int round = 0; round < 5; round++) {
        // Random merges over a small alphabet, some making the same token in two ways.
        static const char *const alphabet[] = {"a", "b", "c", " "};
        char *tokens[64];
        int n_tokens = 0;
        for (int i = 0; i < 4; i++) tokens[n_tokens++] = strdup(alphabet[i]);
        Merge merges[48];
        size_t n_merges = 0;
        for (int tries = 0; tries < 200 && n_merges < 48 && n_tokens < 64; tries++) {
            const char *x = tokens[test_rand_int(0, n_tokens - 1)], *y = tokens[test_rand_int(0, n_tokens - 1)];
            bool known = strlen(x) + strlen(y) > 10;
            for (size_t m = 0; m < n_merges && !known; m++)
                known = strcmp(merges[m].left, x) == 0 && strcmp(merges[m].right, y) == 0;
            if (known) continue;
            merges[n_merges++] = (Merge){x, y};
            char *joined = NULL;
            if (asprintf(&joined, "%s%s", x, y) < 0) return;
            bool is_new = true;
            for (int t = 0; t < n_tokens && is_new; t++) is_new = strcmp(tokens[t], joined) != 0;
            if (is_new) tokens[n_tokens++] = joined;
            else free(joined);
        }
        json_t *root = fixture_tokenizer_json(merges, n_merges);
        Tokenizer tok;
        Err err = {""};
        CHECK(load_json_dir(&tok, root, &err) == 0, "%s", err.msg);
        json_decref(root);
        for (int t = 0; t < 200 && test_failures() == 0; t++) {
            char text[128];
            int len = test_rand_int(0, 100);
            for (int i = 0; i < len; i++) text[i] = "abc \n"[test_rand_int(0, 4)];
            text[len] = '\0';
            int want[128], n_want = 0, n;
            for (size_t pos = 0, end; pos < (size_t)len; pos = end) {
                end = pretokenize_next(text, (size_t)len, pos);
                naive_bpe(merges, n_merges, text + pos, end - pos, want, &n_want);
            }
            int *ids = encode(&tok, text, false, &n);
            check_ids(text, ids, n, want, n_want);
            free(ids);
        }
        tokenizer_free(&tok);
        for (int i = 0; i < n_tokens; i++) free(tokens[i]);
    }
}

TEST(tokenizer_file_formats_agree) {
    static const char text[] = "hello world, it's caf\xC3\xA9 \xE2\x82\xAC 5";
    int want[] = {fixture_id(small_merges, N_SMALL, "hello"), fixture_id(small_merges, N_SMALL, " world"), ',',
                  ' ', 'i', 't', fixture_id(small_merges, N_SMALL, "'s"), ' ', 'c', 'a', 'f',
                  fixture_id(small_merges, N_SMALL, "\xC3\xA9"), ' ', fixture_id(small_merges, N_SMALL, "\xE2\x82\xAC"),
                  ' ', '5'};
    int n_want = sizeof want / sizeof *want;
    // tokenizer.json: merges as strings; as pairs; without model.type
    for (int variant = 0; variant < 3; variant++) {
        json_t *root = fixture_tokenizer_json(small_merges, N_SMALL);
        json_t *model = json_object_get(root, "model"), *merges = json_object_get(model, "merges");
        if (variant == 1) {
            for (size_t i = 0; i < json_array_size(merges); i++) {
                char *s = strdup(json_string_value(json_array_get(merges, i))), *space = strchr(s, ' ');
                *space = '\0';
                json_array_set_new(merges, i, json_pack("[s, s]", s, space + 1));
                free(s);
            }
        }
        if (variant == 2) json_object_del(model, "type");
        Tokenizer tok;
        Err err = {""};
        CHECK(load_json_dir(&tok, root, &err) == 0, "variant %d: %s", variant, err.msg);
        json_decref(root);
        int n, *ids = encode(&tok, text, false, &n);
        check_ids("tokenizer.json", ids, n, want, n_want);
        free(ids);
        tokenizer_free(&tok);
    }
    // vocab.json + merges.txt, and the same files under OpenAI's names
    for (int variant = 0; variant < 2; variant++) {
        char *dir = fixture_dir();
        fixture_write_vocab_merges(dir, small_merges, N_SMALL);
        char *cmd = NULL;
        if (variant == 1 && asprintf(&cmd, "cd '%s' && mv vocab.json encoder.json && mv merges.txt vocab.bpe", dir) > 0)
            CHECK(run_command(cmd, NULL, NULL) == 0, "renaming the files");
        free(cmd);
        Tokenizer tok;
        Err err = {""};
        CHECK(tokenizer_load_dir(&tok, dir, &err) == 0, "variant %d: %s", variant, err.msg);
        if (test_failures()) {
            fixture_remove_dir(dir);
            break;
        }
        int n, *ids = encode(&tok, text, false, &n);
        check_ids("vocab.json + merges.txt", ids, n, want, n_want);
        CHECK(tokenizer_eot_id(&tok) == fixture_id(small_merges, N_SMALL, "<|endoftext|>"), "eot id");
        free(ids);
        tokenizer_free(&tok);
        fixture_remove_dir(dir);
    }
}

TEST(tokenizer_special_tokens_are_text_unless_allowed) {
    Tokenizer tok;
    load_small(&tok);
    int eot = fixture_id(small_merges, N_SMALL, "<|endoftext|>");
    int pad = fixture_id(small_merges, N_SMALL, "<pad>");
    int hello = fixture_id(small_merges, N_SMALL, "hello"), world = fixture_id(small_merges, N_SMALL, " world");
    CHECK(tokenizer_eot_id(&tok) == eot, "eot id %d, wanted %d", tokenizer_eot_id(&tok), eot);
    CHECK(tokenizer_find(&tok, "hello") == hello && tokenizer_find(&tok, "nope") == -1, "tokenizer_find");

    int n, *ids = encode(&tok, "hello<|endoftext|> world", false, &n);
    int plain[] = {hello, '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|', '>', world};
    check_ids("special token as text", ids, n, plain, sizeof plain / sizeof *plain);
    free(ids);

    ids = encode(&tok, "hello<|endoftext|> world<|endoftext|>", true, &n);
    int special[] = {hello, eot, world, eot};
    check_ids("special token allowed", ids, n, special, sizeof special / sizeof *special);
    free(ids);

    ids = encode(&tok, "hello<pad> world", false, &n);  // an added token that is not special: always matched
    int added[] = {hello, pad, world};
    check_ids("added token", ids, n, added, sizeof added / sizeof *added);
    free(ids);
    tokenizer_free(&tok);
}

// The post-processor's template puts its special tokens before and after the text, only when asked.
TEST(tokenizer_add_special_tokens_follows_the_template) {
    int eot = fixture_id(small_merges, N_SMALL, "<|endoftext|>"), pad = fixture_id(small_merges, N_SMALL, "<pad>");
    char template[512];
    snprintf(template, sizeof template,
             "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\"}, {\"type\": \"TemplateProcessing\", "
             "\"single\": [{\"SpecialToken\": {\"id\": \"<pad>\"}}, {\"Sequence\": {\"id\": \"A\"}}, {\"SpecialToken\": "
             "{\"id\": \"eot\"}}], \"special_tokens\": {\"<pad>\": {\"ids\": [%d]}, \"eot\": {\"ids\": [%d, %d]}}}]}",
             pad, eot, eot);
    json_t *root = fixture_tokenizer_json(small_merges, N_SMALL);
    json_object_set_new(root, "post_processor", json_loads(template, 0, NULL));
    Tokenizer tok;
    Err err = {""};
    int rc = load_json_dir(&tok, root, &err);
    json_decref(root);
    CHECK(rc == 0, "%s", err.msg);
    if (rc) return;
    int n, *ids = encode(&tok, "hello", false, &n);
    int hello = fixture_id(small_merges, N_SMALL, "hello"), plain[] = {hello}, wrapped[] = {pad, hello, eot, eot};
    check_ids("encode adds nothing", ids, n, plain, 1);
    CHECK(tokenizer_add_special_tokens(&tok, &ids, &n, &err) == 0, "%s", err.msg);
    check_ids("the template", ids, n, wrapped, 4);
    free(ids);
    tokenizer_free(&tok);
}

TEST(tokenizer_encode_rejects_invalid_utf8) {
    static const struct {
        const char *text;
        size_t offset;
    } cases[] = {
        {"ab\x80", 2},              // a lone continuation byte
        {"\xC0\xAF", 0},            // overlong "/"
        {"x\xE0\x80\xAF", 1},       // overlong, 3 bytes
        {"\xED\xA0\x80", 0},        // a surrogate
        {"\xF4\x90\x80\x80", 0},    // above U+10FFFF
        {"\xF5\x80\x80\x80", 0},    // a lead byte that starts nothing
        {"hello \xE2\x82", 6},      // cut short
        {"\xC3\xA9\xC3", 2},
    };
    Tokenizer tok;
    load_small(&tok);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int *ids = NULL, n = -1;
        Err err = {""};
        CHECK(tokenizer_encode(&tok, cases[c].text, strlen(cases[c].text), false, &ids, &n, &err) == -1,
              "case %zu accepted", c);
        char want[64];
        snprintf(want, sizeof want, "invalid UTF-8 at byte %zu", cases[c].offset);
        CHECK(strstr(err.msg, want) && !ids && n == 0, "case %zu: \"%s\", wanted \"%s\"", c, err.msg, want);
    }
    tokenizer_free(&tok);
}

TEST(tokenizer_decode_round_trip_and_range) {
    Tokenizer tok;
    load_small(&tok);
    static const char text[] = "hello\0 world \xE2\x82\xAC\n\n  x'S <|endoftext|>";
    int *ids = NULL, n = 0;
    Err err = {""};
    CHECK(tokenizer_encode(&tok, text, sizeof text - 1, true, &ids, &n, &err) == 0, "%s", err.msg);
    char *out = NULL;
    size_t len = 0;
    CHECK(tokenizer_decode(&tok, ids, n, &out, &len, &err) == 0, "%s", err.msg);
    CHECK(len == sizeof text - 1 && memcmp(out, text, len) == 0 && out[len] == '\0', "round trip differs");
    free(out);
    free(ids);
    int bad[] = {5, tokenizer_vocab_size(&tok)};
    CHECK(tokenizer_decode(&tok, bad, 2, &out, &len, &err) == -1 && strstr(err.msg, "out of range"),
          "id %d accepted: %s", bad[1], err.msg);
    bad[1] = -1;
    CHECK(tokenizer_decode(&tok, bad, 2, &out, &len, &err) == -1 && !out, "id -1 accepted");
    tokenizer_free(&tok);
}

// Streams the bytes of s as one-byte tokens; returns everything given back, flush included (malloc'd).
static char *stream_bytes(const Tokenizer *tok, const char *s, size_t n, size_t *out_len) {
    TokenStream ts;
    token_stream_init(&ts, tok);
    char *all = malloc(3 * n + 4);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const char *text;
        size_t len;
        Err err = {""};
        CHECK(token_stream_push(&ts, tok->byte_id[(unsigned char)s[i]], &text, &len, &err) == 0, "%s", err.msg);
        memcpy(all + total, text, len);
        total += len;
    }
    const char *text;
    size_t len;
    token_stream_flush(&ts, &text, &len);
    memcpy(all + total, text, len);
    *out_len = total + len;
    token_stream_free(&ts);
    return all;
}

TEST(tokenizer_stream_replaces_maximal_subparts) {
#define FFFD "\xEF\xBF\xBD"
    static const struct {
        const char *in, *out;
    } cases[] = {
        // The Unicode Standard's example (§3.9, Table 3-8)
        {"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d"},
        {"\xF4\x90\x80\x80", FFFD FFFD FFFD FFFD},  // F4 90: above U+10FFFF, so F4 alone is the subpart
        {"\xED\xA0\x80x", FFFD FFFD FFFD "x"},      // a surrogate
        {"\xC0\xAF", FFFD FFFD},                    // overlong
        {"\xE2\x82", FFFD},                         // cut short by the end: one U+FFFD at the flush
        {"\xF0\x9F\x98", FFFD},
        {"\xE2\x82\xAC\xC3\xA9", "\xE2\x82\xAC\xC3\xA9"},
    };
    Tokenizer tok;
    load_small(&tok);
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        size_t len;
        char *got = stream_bytes(&tok, cases[c].in, strlen(cases[c].in), &len);
        CHECK(len == strlen(cases[c].out) && memcmp(got, cases[c].out, len) == 0, "case %zu: got \"%.*s\"", c,
              (int)len, got);
        free(got);
    }
    tokenizer_free(&tok);
#undef FFFD
}

TEST(tokenizer_stream_holds_split_characters) {
    Tokenizer tok;
    load_small(&tok);
    TokenStream ts;
    token_stream_init(&ts, &tok);
    const char *text;
    size_t len;
    Err err = {""};
    // "€" as two tokens: "\xE2\x82" (a merged token) then "\xAC"
    CHECK(token_stream_push(&ts, fixture_id(small_merges, N_SMALL, "\xE2\x82"), &text, &len, &err) == 0 && len == 0,
          "a partial character was given back");
    CHECK(token_stream_push(&ts, 0xAC, &text, &len, &err) == 0 && len == 3 && memcmp(text, "\xE2\x82\xAC", 3) == 0,
          "the completed character did not come back");
    // "😀" one byte at a time: nothing until the fourth byte
    static const char emoji[] = "\xF0\x9F\x98\x80";
    for (int i = 0; i < 4; i++) {
        CHECK(token_stream_push(&ts, tok.byte_id[(unsigned char)emoji[i]], &text, &len, &err) == 0, "%s", err.msg);
        CHECK(i < 3 ? len == 0 : (len == 4 && memcmp(text, emoji, 4) == 0), "byte %d: %zu bytes back", i, len);
    }
    CHECK(token_stream_push(&ts, -1, &text, &len, &err) == -1 && strstr(err.msg, "out of range"), "id -1 accepted");
    token_stream_flush(&ts, &text, &len);
    CHECK(len == 0, "nothing was held, yet the flush gave %zu bytes", len);
    token_stream_free(&ts);
    tokenizer_free(&tok);
}

TEST(tokenizer_stream_output_does_not_depend_on_the_split) {
    Tokenizer tok;
    load_small(&tok);
    static const char *const pieces[] = {"a", " ", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80", "\xE2\x82",
                                         "\x80", "\xFF", "\xF0\x9F", "\xED\xA0", "\xC2"};
    for (int t = 0; t < 300 && test_failures() == 0; t++) {
        char in[256];
        size_t n = 0;
        bool valid = test_rand_int(0, 1);
        for (int k = test_rand_int(0, 40); k > 0; k--) {
            const char *p = pieces[test_rand_int(0, valid ? 4 : 10)];
            memcpy(in + n, p, strlen(p));
            n += strlen(p);
        }
        size_t len, want_len;
        char *got = stream_bytes(&tok, in, n, &len), want[768];
        utf8_repair((const unsigned char *)in, n, true, want, &want_len);
        CHECK(len == want_len && memcmp(got, want, len) == 0, "streamed text differs from the one-shot repair");
        CHECK(!valid || (len == n && memcmp(got, in, n) == 0), "valid UTF-8 was changed");
        free(got);
    }
    tokenizer_free(&tok);
}

// Sets the value at path ("model/merges/0") in root to the JSON text value, or deletes it when value is NULL.
static void set_path(json_t *root, const char *path, const char *value) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *node = root;
    char *key = buf, *slash;
    while ((slash = strchr(key, '/'))) {
        *slash = '\0';
        node = json_is_array(node) ? json_array_get(node, (size_t)atoi(key)) : json_object_get(node, key);
        key = slash + 1;
    }
    json_t *v = value ? json_loads(value, JSON_DECODE_ANY, NULL) : NULL;
    if (json_is_array(node)) {
        if (v) json_array_set_new(node, (size_t)atoi(key), v);
        else json_array_remove(node, (size_t)atoi(key));
    } else {
        if (v) json_object_set_new(node, key, v);
        else json_object_del(node, key);
    }
}

// Checks a failed load: rc -1, one line naming the file and containing `expect`, the tokenizer left empty.
static void check_rejected(const char *what, int rc, const Tokenizer *tok, const Err *err, const char *file,
                           const char *expect) {
    CHECK(rc == -1, "%s: accepted", what);
    CHECK(strstr(err->msg, file) && strstr(err->msg, expect) && !strchr(err->msg, '\n'),
          "%s: message \"%s\" lacks \"%s\" or \"%s\"", what, err->msg, file, expect);
    CHECK(tok->vocab_size == 0 && !tok->token_off, "%s: tokenizer not left empty", what);
}

TEST(tokenizer_load_rejects_malformed_tokenizer_json) {
    static const struct {
        const char *path, *value, *path2, *value2, *expect;
    } cases[] = {
        {"model", "\"x\"", 0, 0, "model: expected an object"},
        {"model/type", "\"WordPiece\"", 0, 0, "model.type"},
        {"model/vocab", "[]", 0, 0, "model.vocab"},
        {"model/merges", "{}", 0, 0, "model.merges: expected an array"},
        {"model/merges/0", "\"h\"", 0, 0, "model.merges[0]: expected"},
        {"model/merges/0", "\"h e x\"", 0, 0, "model.merges[0]: expected"},
        {"model/merges/0", "[\"h\"]", 0, 0, "model.merges[0]: expected"},
        {"model/merges/0", "[\"h\", 7]", 0, 0, "model.merges[0]: expected"},
        {"model/merges/1", "\"q zz\"", 0, 0, "model.merges[1]: token \"zz\" is not in the vocabulary"},
        {"model/merges/1", "[\"q\", \"z\"]", 0, 0, "model.merges[1]: merged token \"qz\" is not in the vocabulary"},
        {"model/vocab/h", "-1", 0, 0, "vocab[\"h\"]: expected an id"},
        {"model/vocab/h", "\"104\"", 0, 0, "vocab[\"h\"]: expected an id"},
        {"model/vocab/h", "100000", 0, 0, "vocab[\"h\"]: expected an id"},
        {"model/vocab/h", "105", 0, 0, "share id 105"},
        {"model/vocab/h", NULL, 0, 0, "no token has id 104"},
        {"model/vocab/\xC4\x80", NULL, "model/vocab/zz", "0", "no token for byte 0x00"},
        {"model/vocab/\xC4\x80", NULL, "model/vocab/\xE2\x82\xAC", "0", "not byte-level text"},
        {"model/vocab/\xC4\x80", NULL, "model/vocab/", "0", "not byte-level text"},
        {"model/dropout", "0.1", 0, 0, "model.dropout: not supported"},
        {"model/continuing_subword_prefix", "\"##\"", 0, 0, "model.continuing_subword_prefix"},
        {"model/type", "\"Unigram\"", 0, 0, "model.type: \"Unigram\" not supported"},
        {"model/type", "\"WordLevel\"", 0, 0, "model.type: \"WordLevel\" not supported"},
        {"model/byte_fallback", "\"yes\"", 0, 0, "model.byte_fallback: expected a boolean"},
        {"model/ignore_merges", "\"yes\"", 0, 0, "model.ignore_merges"},
        {"model/unk_token", "\"nope\"", 0, 0, "model.unk_token \"nope\": not in the vocabulary"},
        {"normalizer", "{\"type\": \"NFKC\"}", 0, 0, "normalizer.type: \"NFKC\" not supported"},
        {"normalizer", "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFC\"}, {\"type\": \"Lowercase\"}]}", 0,
         0, "normalizer.normalizers[1].type: \"Lowercase\" not supported"},
        {"normalizer", "{\"type\": \"Replace\", \"pattern\": {\"Regex\": \" +\"}, \"content\": \"_\"}", 0, 0,
         "normalizer.pattern: a Regex is not supported"},
        {"normalizer", "[]", 0, 0, "normalizer: expected null or an object"},
        {"pre_tokenizer", "{\"type\": \"Whitespace\"}", 0, 0, "pre_tokenizer.type: \"Whitespace\" not supported"},
        {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
         "{\"Regex\": \"a\"}, \"behavior\": \"Shuffled\"}]}", 0, 0,
         "pre_tokenizer.pretokenizers[0].behavior: \"Shuffled\" not supported"},
        {"pre_tokenizer", "{\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": \"Isolated\"}", 0,
         0, "pre_tokenizer.pattern: missing closing parenthesis"},
        {"pre_tokenizer", "{\"type\": \"Split\", \"pattern\": {\"Glob\": \"a\"}, \"behavior\": \"Isolated\"}", 0, 0,
         "pre_tokenizer.pattern: expected {\"Regex\""},
        {"pre_tokenizer", "{\"type\": \"Metaspace\", \"prepend_scheme\": \"sometimes\"}", 0, 0,
         "pre_tokenizer.prepend_scheme: \"sometimes\" not supported"},
        {"pre_tokenizer/add_prefix_space", "1", 0, 0, "pre_tokenizer.add_prefix_space: expected true or false"},
        {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"ByteLevel\"}, {\"type\": "
         "\"Metaspace\"}]}", 0, 0, "pre_tokenizer.pretokenizers[1]: a pre-tokenizer after a ByteLevel is not supported"},
        {"decoder", "{\"type\": \"WordPiece\"}", 0, 0, "decoder.type: \"WordPiece\" not supported"},
        {"decoder", "{\"type\": \"Sequence\", \"decoders\": [{\"type\": \"ByteFallback\"}]}", 0, 0,
         "decoder.decoders[0].type: \"ByteFallback\" not supported with a ByteLevel pre_tokenizer"},
        {"decoder", "{\"type\": \"ByteLevel\"}", "pre_tokenizer", "null", "decoder.type: \"ByteLevel\" needs a ByteLevel"},
        {"decoder", "{\"type\": \"Strip\", \"content\": \" \", \"start\": 1, \"stop\": 0}", "pre_tokenizer", "null",
         "decoder: a Strip is supported only after a Fuse"},
        {"post_processor", "{\"type\": \"BertProcessing\"}", 0, 0, "post_processor.type: \"BertProcessing\" not supported"},
        {"post_processor", "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}, "
         "{\"Sequence\": {\"id\": \"A\"}}], \"special_tokens\": {\"<s>\": {\"ids\": [100000]}}}", 0, 0,
         "post_processor: special token id 100000 beyond the vocabulary"},
        {"post_processor", "{\"type\": \"TemplateProcessing\", \"single\": [{\"SpecialToken\": {\"id\": \"<s>\"}}], "
         "\"special_tokens\": {\"<s>\": {\"ids\": [1]}}}", 0, 0, "post_processor.single: no Sequence A"},
        {"added_tokens", "{}", 0, 0, "added_tokens: expected an array"},
        {"added_tokens/0/id", "\"x\"", 0, 0, "added_tokens[0].id"},
        {"added_tokens/1/id", "100000", 0, 0, "added_tokens[1].id 100000: beyond"},
        {"added_tokens/0/content", "\"\"", 0, 0, "added_tokens[0].content"},
        {"added_tokens/0/lstrip", "true", 0, 0, "added_tokens[0].lstrip: not supported"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        json_t *root = fixture_tokenizer_json(small_merges, N_SMALL);
        set_path(root, cases[c].path, cases[c].value);
        if (cases[c].path2) set_path(root, cases[c].path2, cases[c].value2);
        Tokenizer tok;
        Err err = {""};
        int rc = load_json_dir(&tok, root, &err);
        check_rejected(cases[c].path, rc, &tok, &err, "tokenizer.json", cases[c].expect);
        json_decref(root);
    }
}

TEST(tokenizer_load_rejects_malformed_files) {
    static const struct {
        const char *file, *text, *expect;
    } cases[] = {
        {"tokenizer.json", "[]", "tokenizer.json: expected a JSON object"},
        {"tokenizer.json", "{\"model\": ", "tokenizer.json:1:"},                      // cut short
        {"tokenizer.json", "", "tokenizer.json:"},
        {"tokenizer.json", "{\"a\": 1, \"a\": 2}", "duplicate object key"},
        {"merges.txt", "#version: 0.2\nh e\nh\n", "merges.txt: line 3: expected two tokens"},
        {"merges.txt", "h  e\n", "merges.txt: line 1: expected two tokens"},
        {"merges.txt", "h e\nq zz\n", "merges.txt: line 2: token \"zz\" is not in the vocabulary"},
        {"vocab.json", "[1, 2]", "vocab.json: expected a JSON object"},
        {"vocab.json", "{\"a\": 0}", "vocab.json: vocab: no token for byte 0x00"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char *dir = fixture_dir();
        if (strcmp(cases[c].file, "tokenizer.json") != 0) fixture_write_vocab_merges(dir, small_merges, N_SMALL);
        free(fixture_write_text(dir, cases[c].file, cases[c].text));
        Tokenizer tok;
        Err err = {""};
        int rc = tokenizer_load_dir(&tok, dir, &err);
        check_rejected(cases[c].file, rc, &tok, &err, cases[c].file, cases[c].expect);
        fixture_remove_dir(dir);
    }
    // missing files: an empty folder, and vocab.json without merges.txt
    char *dir = fixture_dir();
    Tokenizer tok;
    Err err = {""};
    check_rejected("empty folder", tokenizer_load_dir(&tok, dir, &err), &tok, &err, dir, "no tokenizer.json");
    fixture_write_vocab_merges(dir, small_merges, N_SMALL);
    char *merges = NULL, *vocab = NULL;
    if (asprintf(&merges, "%s/missing.txt", dir) > 0 && asprintf(&vocab, "%s/vocab.json", dir) > 0)
        check_rejected("missing merges", tokenizer_load_files(&tok, vocab, merges, &err), &tok, &err, "missing.txt",
                       "cannot open");
    free(merges);
    free(vocab);
    fixture_remove_dir(dir);
}
