// fuzz.h — what the libFuzzer targets share (one target a file in this folder; README.md lists them).
//
// A target that reads files writes its input to a scratch folder made once per process and calls the loader's
// public function on the path, as specdec does. An input that stands for several files (an index and its shards,
// vocab.json and merges.txt, a tokenizer and a text to encode) holds them one after the other, separated by
// FUZZ_SEPARATOR. Besides the sanitizers' memory and undefined-behaviour checks, every target checks that a
// rejection leaves a clean one-line message (fuzz_check_message) and what the API promises of an accepted input;
// a broken promise aborts with a line on stderr, which libFuzzer reports as a crash.
#ifndef SPECDEC_FUZZ_H
#define SPECDEC_FUZZ_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/utf8.h"
#include "tokenizer/tokenizer.h"
#include <utf8proc.h>

#define FUZZ_SEPARATOR "\n|||\n"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

// Reports a broken promise and aborts: libFuzzer saves the input as a crash.
__attribute__((format(printf, 1, 2), noreturn))
static inline void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("fuzz: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

// One part of an input: bytes data[0..size).
typedef struct {
    const uint8_t *data;
    size_t size;
} FuzzPart;

// Splits data[0..size) at each FUZZ_SEPARATOR into at most max parts (the last part keeps any further separators);
// returns the number of parts, at least 1.
static inline int fuzz_split(const uint8_t *data, size_t size, FuzzPart *parts, int max) {
    static const char sep[] = FUZZ_SEPARATOR;
    int n = 0;
    while (n < max - 1) {
        const uint8_t *hit = memmem(data, size, sep, sizeof sep - 1);
        if (!hit) break;
        parts[n++] = (FuzzPart){data, (size_t)(hit - data)};
        size -= (size_t)(hit - data) + sizeof sep - 1;
        data = hit + sizeof sep - 1;
    }
    parts[n++] = (FuzzPart){data, size};
    return n;
}

static inline void fuzz_remove_scratch(void);

// The scratch folder of this process: made on first use in $TMPDIR, else in /dev/shm (memory: on a busy disk, writing
// each input to /tmp made the targets 10× slower), else in /tmp; removed at exit.
static inline const char *fuzz_scratch(void) {
    static char dir[64];
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        if (!tmp || strlen(tmp) > 32) tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/specdec-fuzz-XXXXXX", tmp);
        if (!mkdtemp(dir)) fuzz_fail("cannot make a scratch folder %s", dir);
        atexit(fuzz_remove_scratch);
    }
    return dir;
}

// The path of file `name` in the scratch folder (a static buffer, valid until the next call with the same slot).
static inline const char *fuzz_path(const char *name, int slot) {
    static char paths[8][128];
    snprintf(paths[slot], sizeof paths[slot], "%s/%s", fuzz_scratch(), name);
    return paths[slot];
}

// Writes part to scratch file `name`; returns its path (see fuzz_path).
static inline const char *fuzz_write(const char *name, int slot, FuzzPart part) {
    const char *path = fuzz_path(name, slot);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(part.data, 1, part.size, f) != part.size || fclose(f) != 0) fuzz_fail("cannot write %s", path);
    return path;
}

static inline void fuzz_remove_scratch(void) {
    char command[128];
    snprintf(command, sizeof command, "rm -rf '%s'", fuzz_scratch());
    if (system(command) != 0) fprintf(stderr, "fuzz: could not remove %s\n", fuzz_scratch());
}

// The promise of error.h: a failure leaves one non-empty line of valid UTF-8 without control characters.
static inline void fuzz_check_message(const Err *err) {
    size_t n = strnlen(err->msg, sizeof err->msg);
    if (n == 0 || n == sizeof err->msg) fuzz_fail("error message empty or not NUL-terminated");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)err->msg[i] < 0x20 || err->msg[i] == 0x7F)
            fuzz_fail("control byte 0x%02X at %zu in error message: %s", (unsigned char)err->msg[i], i, err->msg);
    if (utf8_invalid_offset(err->msg, n) != n) fuzz_fail("invalid UTF-8 in error message: %s", err->msg);
}

// ---- what encoding must give: a model of the pipeline's effect on the text -----------------------------------

// A growing byte string (malloc'd), for the model below.
typedef struct {
    char *s;
    size_t len, cap;
} FuzzText;

static inline void fuzz_append(FuzzText *t, const void *bytes, size_t n) {
    if (t->len + n + 1 > t->cap) {
        t->cap = 2 * (t->len + n + 1);
        if (!(t->s = realloc(t->s, t->cap))) fuzz_fail("out of memory");
    }
    if (n) memcpy(t->s + t->len, bytes, n);
    t->len += n;
}

// The text that pipeline steps NFC, PREPEND and REPLACE make of one stretch s[0..len) between added tokens
// (at_start: it begins the input), applied to the whole stretch, in order: NFC by one utf8proc call (the encoder
// normalizes run by run), PREPEND and REPLACE by plain string operations. A SPLIT changes no text, unless it drops
// its delimiters (Removed) or a step that changes text follows it (then each piece is changed alone): false for
// those, which this does not model. An empty text ends the steps, as an empty piece vanishes.
static inline bool fuzz_model_steps(const Pipeline *p, const char *s, size_t len, bool at_start, FuzzText *out) {
    FuzzText t = {0};
    fuzz_append(&t, s, len);
    for (int k = 0; k < p->n_steps && t.len > 0; k++) {
        const Step *st = &p->steps[k];
        if (st->kind == STEP_SPLIT) continue;
        FuzzText next = {0};
        if (st->kind == STEP_NFC) {
            utf8proc_uint8_t *nfc = NULL;
            utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)t.s, (utf8proc_ssize_t)t.len, &nfc,
                                              UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            if (n < 0) fuzz_fail("utf8proc_map: %s", utf8proc_errmsg(n));
            fuzz_append(&next, nfc, (size_t)n);
            free(nfc);
        } else if (st->kind == STEP_PREPEND) {
            bool present = t.len >= st->text_len && memcmp(t.s, st->text, st->text_len) == 0;
            if (!(st->unless_present && present) && !(st->only_at_start && !at_start))
                fuzz_append(&next, st->text, st->text_len);
            fuzz_append(&next, t.s, t.len);
        } else {  // REPLACE: each occurrence, left to right, not overlapping
            for (size_t i = 0; i < t.len;) {
                if (i + st->text_len <= t.len && memcmp(t.s + i, st->text, st->text_len) == 0) {
                    fuzz_append(&next, st->with, st->with_len);
                    i += st->text_len;
                } else {
                    fuzz_append(&next, t.s + i++, 1);
                }
            }
        }
        free(t.s);
        t = next;
    }
    bool modelled = true, split = false;  // (decided on the steps, not on where an empty text ended them)
    for (int k = 0; k < p->n_steps; k++) {
        if (p->steps[k].kind == STEP_SPLIT) modelled &= p->steps[k].behavior != SPLIT_REMOVED;
        else modelled &= !split;
        split |= p->steps[k].kind == STEP_SPLIT;
    }
    if (modelled) fuzz_append(out, t.s, t.len);
    free(t.s);
    return modelled;
}

// The decoded bytes of the tokens that BPE makes of normalized, pre-tokenized text t[0..len). Byte level: t itself
// (every byte has a token, each token decodes to its bytes). SentencePiece style: each character that is a
// vocabulary token gives its name after the decoder's Replace steps, each other character its bytes (ByteFallback):
// this holds whatever BPE merges, since a merged token's name is its parts' names joined, when each Replace
// replaces one character. False where that does not hold: a Replace of several characters, a character with
// neither a token nor byte tokens (the unknown token, or nothing), byte tokens that the decoder does not turn back
// into bytes, or text spelling "<0x" (merges could make a token named "<0x41>", which ByteFallback decodes to "A").
static inline bool fuzz_model_decode(const Tokenizer *tok, const char *t, size_t len, FuzzText *out) {
    if (tok->byte_level) {
        fuzz_append(out, t, len);
        return true;
    }
    const Pipeline *p = &tok->pipeline;
    for (int k = 0; k < p->n_decode_replace; k++) {
        uint32_t c;
        size_t n = strlen(p->decode_from[k]);
        if (utf8_decode((const unsigned char *)p->decode_from[k], n, &c) != (int)n) return false;
    }
    if (p->decode_byte_fallback && memmem(t, len, "<0x", 3)) return false;
    for (size_t i = 0, n; i < len; i += n) {
        uint32_t c;
        n = (size_t)utf8_decode((const unsigned char *)t + i, len - i, &c);
        uint64_t id;
        if (bytesmap_get(&tok->vocab, t + i, n, &id)) {
            FuzzText name = {0};
            fuzz_append(&name, t + i, n);
            for (int k = 0; k < p->n_decode_replace; k++) {
                FuzzText next = {0};
                size_t from = strlen(p->decode_from[k]);
                for (size_t j = 0; j < name.len;) {
                    if (j + from <= name.len && memcmp(name.s + j, p->decode_from[k], from) == 0) {
                        fuzz_append(&next, p->decode_to[k], strlen(p->decode_to[k]));
                        j += from;
                    } else {
                        fuzz_append(&next, name.s + j++, 1);
                    }
                }
                free(name.s);
                name = next;
            }
            fuzz_append(out, name.s, name.len);
            free(name.s);
            continue;
        }
        for (size_t b = 0; b < n; b++)
            if (!tok->byte_fallback_enabled || tok->byte_fallback[(unsigned char)t[i + b]] < 0 ||
                !p->decode_byte_fallback)
                return false;
        fuzz_append(out, t + i, n);
    }
    return true;
}

// What tokenizer_decode(tokenizer_encode(text[0..len))) must be, computed apart from the encoder (tokenizer.h,
// pipeline.h): the text cut at added tokens (at each position the longest that applies starting there, the
// first such position first; special ones only with allow_special), each stretch between them through
// fuzz_model_steps and fuzz_model_decode, each added token as its text, then the decoder's Strip at the start.
// Sets *out (malloc'd) and returns true, or false where the model does not apply (see the two functions). For a
// lossless tokenizer (byte level, no normalizer, no Removed split: GPT-2, Llama 3, Qwen without NFC) that is
// the text itself.
static inline bool fuzz_expected_decode(const Tokenizer *tok, const char *text, size_t len, bool allow_special,
                                        FuzzText *out) {
    *out = (FuzzText){0};
    fuzz_append(out, "", 0);
    size_t start = 0;  // the stretch not yet modelled
    for (size_t i = 0; i <= len;) {
        const AddedToken *best = NULL;
        for (int a = 0; a < tok->n_added && i < len; a++) {
            const AddedToken *t = &tok->added[a];
            if ((!t->special || allow_special) && t->len <= len - i && memcmp(text + i, t->text, t->len) == 0 &&
                (!best || t->len > best->len))
                best = t;
        }
        if (!best && i < len) {
            i++;
            continue;
        }
        FuzzText normalized = {0};
        bool ok = fuzz_model_steps(&tok->pipeline, text + start, i - start, start == 0, &normalized) &&
                  fuzz_model_decode(tok, normalized.s, normalized.len, out);
        free(normalized.s);
        if (!ok) {
            free(out->s);
            return false;
        }
        if (!best) break;
        fuzz_append(out, best->text, best->len);
        start = i += best->len;
    }
    size_t strip = 0;
    while ((int)strip < tok->pipeline.strip_count && strip < out->len && out->s[strip] == tok->pipeline.strip_char)
        strip++;
    memmove(out->s, out->s + strip, out->len - strip);
    out->len -= strip;
    return true;
}

// tokenizer.h's promises about text[0..len) for any loaded tokenizer, with and without special tokens:
//   - invalid UTF-8 is rejected with a message naming the first bad byte; valid UTF-8 encodes (or fails with a
//     clean message only where PCRE2 gives up on a pattern of the file: its match or depth limit);
//   - every id is in the vocabulary; tokenizer_decode gives the ids' bytes (tokenizer_token) joined, less the
//     decoder's Strip; the streaming decoder gives those joined bytes repaired (utf8_repair), however split;
//   - decode(encode(x)) is what the pipeline makes of x (fuzz_expected_decode) wherever that is modelled — x
//     itself for a lossless tokenizer; NFC(x) with an NFC normalizer; Metaspace's "▁" turned back into spaces,
//     its prefix stripped; added tokens' text verbatim. Where it is not modelled, the points above still hold;
//   - tokenizer_add_special_tokens puts the post-processor's prefix and suffix around the ids.
static inline void fuzz_check_round_trip(const Tokenizer *tok, const uint8_t *data, size_t len) {
    const char *text = (const char *)data;
    size_t bad = utf8_invalid_offset(text, len);
    for (int allow_special = 0; allow_special < 2; allow_special++) {
        int *ids, n_ids;
        Err err = {""};
        if (tokenizer_encode(tok, text, len, allow_special, &ids, &n_ids, &err) < 0) {
            fuzz_check_message(&err);
            char want[64];
            snprintf(want, sizeof want, "invalid UTF-8 at byte %zu ", bad);
            if (bad == len ? !strstr(err.msg, "regular expression failed") : !strstr(err.msg, want))
                fuzz_fail("encode failed: %s", err.msg);
            continue;
        }
        if (bad < len) fuzz_fail("encode accepted invalid UTF-8 at byte %zu", bad);
        FuzzText joined = {0};
        fuzz_append(&joined, "", 0);
        for (int i = 0; i < n_ids; i++) {
            size_t n;
            const char *bytes = tokenizer_token(tok, ids[i], &n);
            if (!bytes) fuzz_fail("encode gave id %d, outside the vocabulary of %d", ids[i], tok->vocab_size);
            fuzz_append(&joined, bytes, n);
        }
        char *decoded;
        size_t n_decoded;
        if (tokenizer_decode(tok, ids, n_ids, &decoded, &n_decoded, &err) < 0) fuzz_fail("decode: %s", err.msg);
        if (n_decoded > joined.len) fuzz_fail("decode gave more bytes than the tokens have");
        size_t strip = joined.len - n_decoded;
        if ( memcmp(decoded, joined.s + strip, n_decoded) != 0)
            fuzz_fail("decode is not the tokens' bytes joined (%zu bytes, %zu decoded)", joined.len, n_decoded);
        for (size_t i = 0; i < strip; i++)
            if ((int)strip > tok->pipeline.strip_count || joined.s[i] != tok->pipeline.strip_char)
                fuzz_fail("decode stripped %zu bytes, not the decoder's Strip", strip);
        FuzzText want;
        if (fuzz_expected_decode(tok, text, len, allow_special, &want)) {
            if (want.len != n_decoded || memcmp(want.s, decoded, n_decoded) != 0)
                fuzz_fail("decode(encode(x)) is not what the pipeline makes of x (allow_special %d): %zu bytes in, "
                          "%zu expected, %zu out", allow_special, len, want.len, n_decoded);
            free(want.s);
        }

        char *repaired = malloc(3 * joined.len + 1);
        size_t n_repaired;
        if (!repaired) fuzz_fail("out of memory");
        utf8_repair((const unsigned char *)joined.s, joined.len, true, repaired, &n_repaired);
        TokenStream ts;
        token_stream_init(&ts, tok);
        size_t streamed = 0;
        for (int i = 0; i <= n_ids; i++) {
            const char *piece;
            size_t n;
            if (i < n_ids && token_stream_push(&ts, ids[i], &piece, &n, &err) < 0) fuzz_fail("stream: %s", err.msg);
            if (i == n_ids) token_stream_flush(&ts, &piece, &n);
            if (n > n_repaired - streamed || memcmp(piece, repaired + streamed, n) != 0)
                fuzz_fail("the streamed text differs from the tokens' bytes repaired at byte %zu", streamed);
            streamed += n;
        }
        if (streamed != n_repaired) fuzz_fail("the stream gave %zu of %zu bytes", streamed, n_repaired);
        token_stream_free(&ts);
        free(repaired);

        int n_plain = n_ids;
        int *plain = malloc(((size_t)n_ids + 1) * sizeof *plain);
        if (!plain) fuzz_fail("out of memory");
        if (n_ids) memcpy(plain, ids, (size_t)n_ids * sizeof *ids);
        const Pipeline *p = &tok->pipeline;
        if (tokenizer_add_special_tokens(tok, &ids, &n_ids, &err) < 0) fuzz_fail("add_special_tokens: %s", err.msg);
        if (n_ids != p->n_prefix + n_plain + p->n_suffix ||
            (p->n_prefix && memcmp(ids, p->prefix, (size_t)p->n_prefix * sizeof *ids) != 0) ||
            (n_plain && memcmp(ids + p->n_prefix, plain, (size_t)n_plain * sizeof *ids) != 0) ||
            (p->n_suffix && memcmp(ids + p->n_prefix + n_plain, p->suffix, (size_t)p->n_suffix * sizeof *ids) != 0))
            fuzz_fail("add_special_tokens did not put the template's tokens around the text's");
        free(plain);
        free(joined.s);
        free(decoded);
        free(ids);
    }
}

#endif
