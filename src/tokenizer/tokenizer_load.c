// tokenizer_load.c — reading tokenizer.json, or vocab.json + merges.txt, into a Tokenizer (see tokenizer.h).
//
// Both formats write tokens in GPT-2's byte-level alphabet: every byte is one printable code point (the printable
// Latin-1 bytes stand for themselves, the 68 others for U+0100..U+0143, in byte order; " " is "Ġ", "\n" is "Ċ").
// Loading turns each token back into its bytes, checks that the ids run 0..V-1 without holes or repeats and that
// every merge names known tokens, and builds the tables that encoding needs.
#include <ctype.h>
#include <jansson.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "checkpoint/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "base/utf8.h"

enum { BYTE_LEVEL_CHARS = 256 + 68 };  // the alphabet's code points all lie below this

typedef struct {
    const char *path;                       // the file being read, for messages
    Tokenizer *tok;
    json_t *vocab;                          // token string → id
    int char_byte[BYTE_LEVEL_CHARS];        // byte-level alphabet: code point → byte, or -1 when not in it
    char byte_char[256][UTF8_MAX + 1];      // byte → its code point, as a NUL-terminated UTF-8 string
} Loader;

// Bytes that GPT-2 writes as themselves: the printable ones of Latin-1, except U+00AD (soft hyphen).
static bool printable_byte(int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

// Fills the loader's two views of the byte-level alphabet.
static void byte_level_alphabet(Loader *ld) {
    for (int c = 0; c < BYTE_LEVEL_CHARS; c++) ld->char_byte[c] = -1;
    int n_shifted = 0;
    for (int b = 0; b < 256; b++) {
        int c = printable_byte(b) ? b : 256 + n_shifted++;
        ld->char_byte[c] = b;
        int len = utf8_encode((uint32_t)c, ld->byte_char[b]);
        ld->byte_char[b][len] = '\0';
    }
}

// Writes the bytes that byte-level string s stands for to out (at least strlen(s) bytes); returns their number,
// or -1 if s has a character outside the alphabet.
static long byte_level_decode(const Loader *ld, const char *s, char *out) {
    size_t n = strlen(s);
    long len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c;
        int k = utf8_decode((const unsigned char *)s + i, n - i, &c);
        if (k == 0 || c >= BYTE_LEVEL_CHARS || ld->char_byte[c] < 0) return -1;
        out[len++] = (char)ld->char_byte[c];
        i += (size_t)k;
    }
    return len;
}

// True for a field that is absent or holds nothing: null, false, 0 or "".
static bool is_unset(const json_t *v) {
    return !v || json_is_null(v) || json_is_false(v) || (json_is_number(v) && json_number_value(v) == 0) ||
           (json_is_string(v) && json_string_length(v) == 0);
}

// Reads tokenizer.json's "added_tokens" (absent, or an array of {id, content, special, ...}) into tok->added.
static int load_added_tokens(Loader *ld, const json_t *added, Err *err) {
    Tokenizer *tok = ld->tok;
    if (!added) return 0;
    if (!json_is_array(added)) return err_fmt(err, "%s: added_tokens: expected an array", ld->path);
    tok->added = calloc(json_array_size(added) + 1, sizeof *tok->added);
    if (!tok->added) return err_fmt(err, "%s: out of memory", ld->path);
    size_t i;
    const json_t *a;
    json_array_foreach(added, i, a) {
        const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return err_fmt(err, "%s: added_tokens[%zu].id: expected an integer id >= 0", ld->path, i);
        if (!json_is_string(content) || json_string_length(content) == 0)
            return err_fmt(err, "%s: added_tokens[%zu].content: expected a non-empty string", ld->path, i);
        static const char *const unsupported[] = {"single_word", "lstrip", "rstrip"};
        for (size_t k = 0; k < sizeof unsupported / sizeof *unsupported; k++)
            if (!is_unset(json_object_get(a, unsupported[k])))
                return err_fmt(err, "%s: added_tokens[%zu].%s: not supported (only false)", ld->path, i,
                               unsupported[k]);
        AddedToken *t = &tok->added[tok->n_added++];
        t->id = (int)json_integer_value(id);
        t->special = json_is_true(json_object_get(a, "special"));
        t->len = json_string_length(content);
        t->text = malloc(t->len + 1);  // NUL-terminated for messages
        if (!t->text) return err_fmt(err, "%s: out of memory", ld->path);
        memcpy(t->text, json_string_value(content), t->len + 1);
    }
    return 0;
}


// The id that the vocabulary gives token string s, or -1.
static int vocab_id(const Loader *ld, const char *s) {
    const json_t *id = json_object_get(ld->vocab, s);
    return id ? (int)json_integer_value(id) : -1;
}

// Sets tok->vocab_size, each token's name (vocabulary string, or NULL for an added token that is not in the
// vocabulary) and added token (or NULL) after checking that the ids of vocabulary and added tokens together run
// 0..V-1. The caller frees both arrays.
static int number_tokens(Loader *ld, const char ***names, const AddedToken ***added, Err *err) {
    Tokenizer *tok = ld->tok;
    size_t n_listed = json_object_size(ld->vocab) + (size_t)tok->n_added;
    long max_id = -1;
    const char *key;
    const json_t *value;
    json_object_foreach(ld->vocab, key, value) {
        char q[ERR_QUOTE_LEN + 4];
        if (!json_is_integer(value) || json_integer_value(value) < 0 ||
            (size_t)json_integer_value(value) >= n_listed)
            return err_fmt(err, "%s: vocab[\"%s\"]: expected an id in 0..%zu (the number of tokens listed)",
                           ld->path, err_quote(q, key), n_listed - 1);
        if (json_integer_value(value) > max_id) max_id = (long)json_integer_value(value);
    }
    for (int i = 0; i < tok->n_added; i++) {
        if ((size_t)tok->added[i].id >= n_listed)
            return err_fmt(err, "%s: added_tokens[%d].id %d: beyond the %zu tokens listed", ld->path, i,
                           tok->added[i].id, n_listed);
        if (tok->added[i].id > max_id) max_id = tok->added[i].id;
    }
    tok->vocab_size = (int)(max_id + 1);
    *names = calloc((size_t)tok->vocab_size + 1, sizeof **names);
    *added = calloc((size_t)tok->vocab_size + 1, sizeof **added);
    if (!*names || !*added) return err_fmt(err, "%s: out of memory", ld->path);
    int rc = 0;
    json_object_foreach(ld->vocab, key, value) {
        int id = (int)json_integer_value(value);
        char q1[ERR_QUOTE_LEN + 4], q2[ERR_QUOTE_LEN + 4];
        if ((*names)[id] && rc == 0)
            rc = err_fmt(err, "%s: vocab: tokens \"%s\" and \"%s\" share id %d", ld->path,
                         err_quote(q1, (*names)[id]), err_quote(q2, key), id);
        (*names)[id] = key;
    }
    for (int i = 0; i < tok->n_added && rc == 0; i++) {
        if ((*added)[tok->added[i].id])
            rc = err_fmt(err, "%s: added_tokens: id %d listed twice", ld->path, tok->added[i].id);
        (*added)[tok->added[i].id] = &tok->added[i];
    }
    for (int id = 0; id < tok->vocab_size && rc == 0; id++)
        if (!(*names)[id] && !(*added)[id]) rc = err_fmt(err, "%s: vocab: no token has id %d", ld->path, id);
    return rc;
}

enum { MAX_DECODED_TOKEN = 1 << 16 };  // the most bytes one token may decode to

// Scratch for sentencepiece_decode: two buffers of cap bytes each.
typedef struct {
    char *out, *tmp;
    size_t cap;
} DecodeBuf;

// Writes the decoded bytes of SentencePiece-style token `name` to b->out and returns their number: the decoder's
// Replace steps, then ByteFallback's "<0xNN>" → byte. Each Replace may lengthen the name (repeated ones, without
// bound: "a" → "aa" ten times is 1024 bytes), so the buffers grow as needed. Returns -1 when the bytes would exceed
// MAX_DECODED_TOKEN, -2 when out of memory.
static long sentencepiece_decode(const Pipeline *p, const char *name, DecodeBuf *b) {
    unsigned hex;
    char end;
    size_t len = strlen(name);
    if (len + 1 > b->cap) {
        char *out = realloc(b->out, len + 1), *tmp = out ? realloc(b->tmp, len + 1) : NULL;
        if (out) b->out = out;
        if (!tmp) return -2;
        b->tmp = tmp;
        b->cap = len + 1;
    }
    if (p->decode_byte_fallback && len == 6 && sscanf(name, "<0x%2X%c", &hex, &end) == 2 && end == '>' &&
        isxdigit((unsigned char)name[3]) && isxdigit((unsigned char)name[4])) {
        b->out[0] = (char)hex;
        return 1;
    }
    memcpy(b->out, name, len);
    for (int k = 0; k < p->n_decode_replace; k++) {
        const char *from = p->decode_from[k], *to = p->decode_to[k];
        size_t from_len = strlen(from), to_len = strlen(to), o = 0, n_hits = 0;
        for (size_t i = 0; i + from_len <= len;)  // count the occurrences: the new length
            if (memcmp(b->out + i, from, from_len) == 0) n_hits++, i += from_len;
            else i++;
        size_t new_len = len - n_hits * from_len;
        if (to_len && n_hits > (MAX_DECODED_TOKEN - new_len) / to_len) return -1;
        new_len += n_hits * to_len;
        if (new_len + 1 > b->cap) {
            char *out = realloc(b->out, new_len + 1), *tmp = out ? realloc(b->tmp, new_len + 1) : NULL;
            if (out) b->out = out;
            if (!tmp) return -2;
            b->tmp = tmp;
            b->cap = new_len + 1;
        }
        memcpy(b->tmp, b->out, len);
        for (size_t i = 0; i < len;) {
            if (i + from_len <= len && memcmp(b->tmp + i, from, from_len) == 0) {
                memcpy(b->out + o, to, to_len);
                o += to_len;
                i += from_len;
            } else {
                b->out[o++] = b->tmp[i++];
            }
        }
        len = o;
    }
    return (long)len;
}

// True if SentencePiece-style pieces may be cut before each word (tokenizer.h: split_words): "▁" is a token, and
// no token has a "▁" after a character other than "▁" — so no merge, which makes a token, joins across a cut.
static bool words_are_independent(const Loader *ld) {
    if (vocab_id(ld, WORD_START) < 0) return false;
    const char *name;
    const json_t *id;
    json_object_foreach(ld->vocab, name, id) {
        for (const char *at = strstr(name, WORD_START); at; at = strstr(at + 1, WORD_START))
            if (at > name && (at - name < 3 || memcmp(at - 3, WORD_START, 3) != 0)) return false;
    }
    return true;
}

// Room for every token's decoded bytes, in *total: an added token's content or the model's token decoded (byte
// level: at most one byte per character of its name), whichever is longer.
static int vocab_room(Loader *ld, const char **names, const AddedToken **added, DecodeBuf *decoded, size_t *total,
                      Err *err) {
    const Tokenizer *tok = ld->tok;
    *total = 0;
    for (int id = 0; id < tok->vocab_size; id++) {
        const AddedToken *a = added[id];
        long room = names[id] ? (long)strlen(names[id]) : 0;
        if (names[id] && !tok->byte_level) room = sentencepiece_decode(&tok->pipeline, names[id], decoded);
        if (room == -2) return err_fmt(err, "%s: out of memory", ld->path);
        if (room < 0) {
            char q[ERR_QUOTE_LEN + 4];
            return err_fmt(err, "%s: vocab[\"%s\"]: the decoder's Replace steps make more than %d bytes of it",
                           ld->path, err_quote(q, names[id]), MAX_DECODED_TOKEN);
        }
        *total += a && a->len > (size_t)room ? a->len : (size_t)room;
    }
    return 0;
}

// Writes token id's decoded bytes at `bytes` (*len of them) and enters the model's token into the vocabulary map.
// An added token's text is its content, verbatim; the vocabulary's token of its id, if BPE can make it (even one
// that decodes to nothing), must spell it.
static int fill_token(Loader *ld, int id, const char *name, const AddedToken *a, DecodeBuf *decoded, char *bytes,
                      long *len, Err *err) {
    Tokenizer *tok = ld->tok;
    char q[ERR_QUOTE_LEN + 4], q2[ERR_QUOTE_LEN + 4];
    *len = 0;
    bool in_model = name && !tok->byte_level;  // BPE can make this id (byte level: see below)
    if (name && tok->byte_level) {  // the model's token is its bytes, also its decoded text
        *len = byte_level_decode(ld, name, bytes);
        in_model = *len > 0;
        if (*len <= 0 && !a)  // (an added token's name needs not be byte-level: its content is its text)
            return err_fmt(err, "%s: vocab[\"%s\"]: not byte-level text (GPT-2's alphabet of 256 characters)",
                           ld->path, err_quote(q, name));
        if (*len > 0 && bytesmap_put(&tok->vocab, bytes, (size_t)*len, (uint64_t)id) < 0)
            return err_fmt(err, "%s: out of memory", ld->path);
    } else if (name) {  // SentencePiece style: the model's token is its name; the decoder gives the text
        if (!*name) return err_fmt(err, "%s: vocab[\"\"]: an empty token", ld->path);
        if (bytesmap_put(&tok->vocab, name, strlen(name), (uint64_t)id) < 0)
            return err_fmt(err, "%s: out of memory", ld->path);
        *len = sentencepiece_decode(&tok->pipeline, name, decoded);  // (vocab_room measured it: it fits)
        memcpy(bytes, decoded->out, (size_t)*len);
    }
    if (!a) return 0;
    // An added token that repeats the vocabulary's own entry (Gemma 3's "▁▁" at 138: a SentencePiece name, whose
    // text is the decoder's) is the same token: it decodes as the vocabulary's, and is matched as an added token.
    if (in_model && strcmp(a->text, name) == 0 && strlen(name) == a->len) return 0;
    if (in_model && ((size_t)*len != a->len || memcmp(bytes, a->text, a->len) != 0))
        return err_fmt(err, "%s: added token \"%s\" has id %d, which the vocabulary gives \"%s\"", ld->path,
                       err_quote(q, a->text), id, err_quote(q2, name));
    memcpy(bytes, a->text, a->len);
    *len = (long)a->len;
    return 0;
}

// The ids BPE starts from and falls back to: each byte's token (byte level) or <0xXX> (byte_fallback), and
// model.unk_token's; and the post-processor's special ids checked against the vocabulary.
static int find_start_ids(Loader *ld, const json_t *model, Err *err) {
    Tokenizer *tok = ld->tok;
    const Pipeline *p = &tok->pipeline;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        tok->byte_id[b] = tok->byte_level ? vocab_id(ld, ld->byte_char[b]) : -1;
        tok->byte_fallback[b] = tok->byte_fallback_enabled ? vocab_id(ld, hex) : -1;
        if (tok->byte_level && tok->byte_id[b] < 0)
            return err_fmt(err, "%s: vocab: no token for byte 0x%02X (\"%s\"); byte-level BPE needs all 256",
                           ld->path, b, ld->byte_char[b]);
    }
    tok->split_words = !tok->byte_level && !tok->ignore_merges && words_are_independent(ld);
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    tok->unk_id = unk ? vocab_id(ld, unk) : -1;
    if (unk && tok->unk_id < 0)
        return err_fmt(err, "%s: model.unk_token \"%s\": not in the vocabulary", ld->path, unk);
    for (int i = 0; i < p->n_prefix + p->n_suffix; i++) {
        const int id = i < p->n_prefix ? p->prefix[i] : p->suffix[i - p->n_prefix];
        if (id >= tok->vocab_size)
            return err_fmt(err, "%s: post_processor: special token id %d beyond the vocabulary (%d tokens)",
                           ld->path, id, tok->vocab_size);
    }
    return 0;
}

// Builds the token table (each id's decoded bytes), the model's map from tokens to ids and the symbols where BPE
// starts (byte_id, or byte_fallback and unk_id) from the vocabulary object and the added tokens already read.
static int load_vocab(Loader *ld, const json_t *model, Err *err) {
    Tokenizer *tok = ld->tok;
    const char **names = NULL;
    const AddedToken **added = NULL;
    DecodeBuf decoded = {0};
    size_t total = 0;
    int rc = number_tokens(ld, &names, &added, err) < 0 ? -1 : vocab_room(ld, names, added, &decoded, &total, err);
    if (rc == 0) {
        tok->token_off = malloc(((size_t)tok->vocab_size + 1) * sizeof *tok->token_off);
        tok->token_bytes = total <= UINT32_MAX ? malloc(total + 1) : NULL;
        if (!tok->token_off || !tok->token_bytes || bytesmap_init(&tok->vocab) < 0)
            rc = err_fmt(err, "%s: out of memory", ld->path);
    }
    uint32_t off = 0;
    for (int id = 0; id < tok->vocab_size && rc == 0; id++) {
        long len;
        tok->token_off[id] = off;
        rc = fill_token(ld, id, names[id], added[id], &decoded, tok->token_bytes + off, &len, err);
        off += (uint32_t)(len > 0 ? len : 0);
    }
    if (rc == 0) tok->token_off[tok->vocab_size] = off;
    free(names);
    free(added);
    free(decoded.out);
    free(decoded.tmp);
    return rc ? rc : find_start_ids(ld, model, err);
}

// Names merge number i for messages: its place in model.merges (tokenizer.json) or its line (merges.txt).
static const char *merge_name(char *buf, size_t size, bool json, size_t i) {
    snprintf(buf, size, json ? "model.merges[%zu]" : "line %zu", i);
    return buf;
}

// Records merge number `rank`: tokens a and b, adjacent, become token a+b. The merge is model.merges[at] (json)
// or line `at` of merges.txt, for messages.
static int add_merge(Loader *ld, const char *a, const char *b, uint32_t rank, bool json, size_t at, Err *err) {
    char merged[1024], where[64];
    size_t len_a = strlen(a), len_b = strlen(b);
    if (len_a + len_b >= sizeof merged)
        return err_fmt(err, "%s: %s: tokens longer than %zu bytes", ld->path,
                       merge_name(where, sizeof where, json, at), sizeof merged - 1);
    memcpy(merged, a, len_a);
    memcpy(merged + len_a, b, len_b + 1);
    const char *names[3] = {a, b, merged};
    int ids[3];
    for (int k = 0; k < 3; k++) {
        ids[k] = vocab_id(ld, names[k]);
        char q[ERR_QUOTE_LEN + 4];
        if (ids[k] < 0)
            return err_fmt(err, "%s: %s: %stoken \"%s\" is not in the vocabulary", ld->path,
                           merge_name(where, sizeof where, json, at), k == 2 ? "merged " : "", err_quote(q, names[k]));
    }
    uint32_t pair[2] = {(uint32_t)ids[0], (uint32_t)ids[1]};
    if (bytesmap_put(&ld->tok->merges, pair, sizeof pair, (uint64_t)rank << 32 | (uint32_t)ids[2]) < 0)
        return err_fmt(err, "%s: out of memory", ld->path);
    return 0;
}

// Reads tokenizer.json's model.merges: "a b" strings or ["a", "b"] pairs.
static int load_json_merges(Loader *ld, const json_t *merges, Err *err) {
    if (!json_is_array(merges)) return err_fmt(err, "%s: model.merges: expected an array", ld->path);
    char pair[1024];
    size_t i;
    const json_t *m;
    json_array_foreach(merges, i, m) {
        const char *a = NULL, *b = NULL;
        if (json_is_string(m) && json_string_length(m) < sizeof pair) {
            strcpy(pair, json_string_value(m));
            char *space = strchr(pair, ' ');
            if (space && !strchr(space + 1, ' ')) {
                *space = '\0';
                a = pair;
                b = space + 1;
            }
        } else if (json_is_array(m) && json_array_size(m) == 2) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
        }
        if (!a || !b || !*a || !*b)
            return err_fmt(err, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"] with two non-empty tokens",
                           ld->path, i);
        if (add_merge(ld, a, b, (uint32_t)i, true, i, err) < 0) return -1;
    }
    return 0;
}

// Reads merges.txt: lines "a b", a first line "#version ..." skipped, empty lines skipped.
static int load_text_merges(Loader *ld, const char *path, Err *err) {
    size_t len;
    char *text;
    if (read_file(path, &text, &len, err)) return -1;
    if (strlen(text) != len) {
        free(text);
        return err_fmt(err, "%s: contains a NUL byte", path);
    }
    ld->path = path;
    uint32_t rank = 0;
    int line_no = 0, rc = 0;
    for (char *line = text, *next; line && rc == 0; line = next) {
        line_no++;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        size_t n = strlen(line);
        if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
        if (n == 0 || (line_no == 1 && strncmp(line, "#version", 8) == 0)) continue;
        char *space = strchr(line, ' ');
        if (!space || space == line || !space[1] || strchr(space + 1, ' '))
            rc = err_fmt(err, "%s: line %d: expected two tokens separated by one space", path, line_no);
        else {
            *space = '\0';
            rc = add_merge(ld, line, space + 1, rank++, false, (size_t)line_no, err);
        }
    }
    free(text);
    return rc;
}

// Starts a load: the loader's alphabet, an empty tokenizer.
static int loader_init(Loader *ld, Tokenizer *tok, const char *path, Err *err) {
    memset(tok, 0, sizeof *tok);
    ld->path = path;
    ld->tok = tok;
    ld->vocab = NULL;
    byte_level_alphabet(ld);
    if (bytesmap_init(&tok->merges) < 0) return err_fmt(err, "%s: out of memory", path);
    return 0;
}

// Reads a JSON file; NULL with err on failure (a file it cannot open: the system's reason).
static json_t *load_json(const char *path, Err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        err_fmt(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    json_error_t jerr;
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
    fclose(f);
    if (!root) err_fmt(err, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    return root;
}

// Checks the model: BPE, without the options that none of the supported families sets.
static int check_model(const char *path, const json_t *root, const json_t *model, Err *err) {
    if (!json_is_object(root)) return err_fmt(err, "%s: expected a JSON object", path);
    if (!json_is_object(model)) return err_fmt(err, "%s: model: expected an object", path);
    const json_t *type = json_object_get(model, "type");
    if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
        return err_fmt(err, "%s: model.type: \"%s\" not supported (only BPE)", path,
                       json_is_string(type) ? json_string_value(type) : "(not a string)");
    static const char *const unsupported[] = {"dropout", "continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t k = 0; k < sizeof unsupported / sizeof *unsupported; k++)
        if (!is_unset(json_object_get(model, unsupported[k])))
            return err_fmt(err, "%s: model.%s: not supported (only null or empty)", path, unsupported[k]);
    static const char *const flags[] = {"ignore_merges", "byte_fallback", "fuse_unk"};
    for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
        const json_t *v = json_object_get(model, flags[k]);
        if (v && !json_is_boolean(v)) return err_fmt(err, "%s: model.%s: expected a boolean", path, flags[k]);
    }
    const json_t *unk = json_object_get(model, "unk_token");
    if (unk && !json_is_null(unk) && !json_is_string(unk))
        return err_fmt(err, "%s: model.unk_token: expected a string or null", path);
    if (!json_is_object(json_object_get(model, "vocab")))
        return err_fmt(err, "%s: model.vocab: expected an object (token → id)", path);
    return 0;
}

int tokenizer_load_json(Tokenizer *tok, const char *path, Err *err) {
    json_t *root = load_json(path, err);
    if (!root) {
        memset(tok, 0, sizeof *tok);
        return -1;
    }
    const int rc = tokenizer_load_json_value(tok, path, root, err);
    json_decref(root);
    return rc;
}

int tokenizer_load_json_value(Tokenizer *tok, const char *path, const json_t *root, Err *err) {
    Loader ld;
    if (loader_init(&ld, tok, path, err) < 0) return -1;
    const json_t *model = json_object_get(root, "model");
    int rc = check_model(path, root, model, err);
    if (rc == 0) rc = pipeline_load(&tok->pipeline, path, root, err);
    if (rc == 0) {
        ld.vocab = json_object_get(model, "vocab");
        tok->byte_level = tok->pipeline.byte_level;
        tok->ignore_merges = json_is_true(json_object_get(model, "ignore_merges"));
        tok->byte_fallback_enabled = json_is_true(json_object_get(model, "byte_fallback"));
        tok->fuse_unk = json_is_true(json_object_get(model, "fuse_unk"));
        rc = load_added_tokens(&ld, json_object_get(root, "added_tokens"), err);
    }
    if (rc == 0) rc = load_vocab(&ld, model, err);
    if (rc == 0) rc = load_json_merges(&ld, json_object_get(model, "merges"), err);
    if (rc < 0) tokenizer_free(tok);
    return rc;
}

int tokenizer_load_files(Tokenizer *tok, const char *vocab_path, const char *merges_path, Err *err) {
    Loader ld;
    if (loader_init(&ld, tok, vocab_path, err) < 0) return -1;
    json_t *root = load_json(vocab_path, err);
    int rc = root ? 0 : -1;
    if (rc == 0 && !json_is_object(root)) rc = err_fmt(err, "%s: expected a JSON object (token → id)", vocab_path);
    ld.vocab = root;
    static const char eot[] = "<|endoftext|>";
    int eot_id = rc == 0 ? vocab_id(&ld, eot) : -1;
    if (eot_id >= 0) {  // the one special token of this format
        tok->added = malloc(sizeof *tok->added);
        char *text = malloc(sizeof eot);
        if (!tok->added || !text) {
            free(text);
            rc = err_fmt(err, "%s: out of memory", vocab_path);
        } else {
            memcpy(text, eot, sizeof eot);
            tok->added[0] = (AddedToken){.id = eot_id, .special = true, .text = text, .len = sizeof eot - 1};
            tok->n_added = 1;
        }
    }
    if (rc == 0) rc = pipeline_gpt2(&tok->pipeline, err);
    tok->byte_level = true;
    if (rc == 0) rc = load_vocab(&ld, NULL, err);
    if (rc == 0) rc = load_text_merges(&ld, merges_path, err);
    json_decref(root);
    if (rc < 0) tokenizer_free(tok);
    return rc;
}

// Joins dir and name into buf; true if that file exists.
static bool file_in(char *buf, size_t cap, const char *dir, const char *name) {
    struct stat st;
    return (size_t)snprintf(buf, cap, "%s/%s", dir, name) < cap && stat(buf, &st) == 0 && S_ISREG(st.st_mode);
}

int tokenizer_load_gguf(Tokenizer *tok, const char *path, Err *err) {
    GgufFile f;
    memset(tok, 0, sizeof *tok);
    if (gguf_open(&f, path, err)) return -1;
    json_t *root = gguf_tokenizer_json(&f, err);
    const int rc = root ? tokenizer_load_json_value(tok, path, root, err) : -1;
    json_decref(root);
    gguf_close(&f);
    return rc;
}

int tokenizer_load_dir(Tokenizer *tok, const char *dir, Err *err) {
    char a[4096], b[4096];
    if (gguf_checkpoint_path(dir, a, sizeof a)) return tokenizer_load_gguf(tok, a, err);
    if (file_in(a, sizeof a, dir, "tokenizer.json")) return tokenizer_load_json(tok, a, err);
    static const char *const pairs[][2] = {{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}};
    for (size_t k = 0; k < sizeof pairs / sizeof *pairs; k++)
        if (file_in(a, sizeof a, dir, pairs[k][0]) && file_in(b, sizeof b, dir, pairs[k][1]))
            return tokenizer_load_files(tok, a, b, err);
    memset(tok, 0, sizeof *tok);
    return err_fmt(err, "%s: no tokenizer.json, vocab.json + merges.txt, or encoder.json + vocab.bpe", dir);
}

void tokenizer_free(Tokenizer *tok) {
    free(tok->token_off);
    free(tok->token_bytes);
    bytesmap_free(&tok->merges);
    bytesmap_free(&tok->vocab);
    pipeline_free(&tok->pipeline);
    for (int i = 0; i < tok->n_added; i++) free(tok->added[i].text);
    free(tok->added);
    memset(tok, 0, sizeof *tok);
}
