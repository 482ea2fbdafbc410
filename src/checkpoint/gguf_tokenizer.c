// gguf_tokenizer.c — a GGUF file's tokenizer metadata as tokenizer.json (see gguf_tokenizer.h).
#include "checkpoint/gguf_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SPACE_MARK "\xE2\x96\x81"  // U+2581 "▁", SentencePiece's mark of a space

// llama.cpp's token types (tokenizer.ggml.token_type).
enum { TYPE_NORMAL = 1, TYPE_UNKNOWN = 2, TYPE_CONTROL = 3, TYPE_USER_DEFINED = 4, TYPE_UNUSED = 5, TYPE_BYTE = 6 };

// The pre-tokenizers llama.cpp names (tokenizer.ggml.pre), as the tokenizer.json of the family that uses each
// writes them: a normalizer (or none), the Split pattern before a ByteLevel (none: ByteLevel's own GPT-2 pattern),
// and whether a piece that is itself a token skips the merges (ignore_merges).
static const struct {
    const char *name, *normalizer, *pattern;
    bool ignore_merges;
} PRE_TOKENIZERS[] = {
    {"llama-bpe", NULL,  // Llama 3, 3.1, 3.2
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", true},
    {"qwen2", "NFC",  // Qwen2, Qwen2.5, Qwen3
     "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+", false},
    {"gpt-2", NULL, NULL, false},
};
enum { N_PRE = sizeof PRE_TOKENIZERS / sizeof *PRE_TOKENIZERS };

// The pre_tokenizer, normalizer and model flag of the pre-tokenizer named in f, into root and model.
static int add_pre_tokenizer(json_t *root, json_t *model, const GgufFile *f, Err *err) {
    const char *name;
    size_t len;
    bool found;
    if (gguf_get_string(f, "tokenizer.ggml.pre", &name, &len, &found, err)) return -1;
    if (!found) name = "gpt-2", len = 5;  // (what older converters meant by writing none)
    int p = 0;
    while (p < N_PRE && (strlen(PRE_TOKENIZERS[p].name) != len || memcmp(PRE_TOKENIZERS[p].name, name, len)))
        p++;
    if (p == N_PRE)
        return err_fmt(err, "%s: tokenizer.ggml.pre \"%.*s\" is not a pre-tokenizer specdec knows (llama-bpe, qwen2, "
                       "gpt-2); give the model's tokenizer.json instead", f->path, (int)(len < 32 ? len : 32), name);
    json_t *byte_level = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                                   "use_regex", PRE_TOKENIZERS[p].pattern == NULL);
    if (PRE_TOKENIZERS[p].pattern)
        json_object_set_new(root, "pre_tokenizer",
                            json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers",
                                      "type", "Split", "pattern", "Regex", PRE_TOKENIZERS[p].pattern, "behavior",
                                      "Isolated", "invert", 0, byte_level));
    else
        json_object_set_new(root, "pre_tokenizer", byte_level);
    if (PRE_TOKENIZERS[p].normalizer)
        json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", PRE_TOKENIZERS[p].normalizer));
    json_object_set_new(model, "ignore_merges", json_boolean(PRE_TOKENIZERS[p].ignore_merges));
    return 0;
}

// The next string of an array at *at, as a JSON string; NULL when it holds a NUL byte or is not valid UTF-8.
// *s and *len receive its bytes.
static json_t *next_json_string(const uint8_t **at, const char **s, size_t *len) {
    gguf_next_string(at, s, len);
    return memchr(*s, 0, *len) ? NULL : json_stringn(*s, *len);
}

// Token i's type, from the types array (absent: every token normal).
static int token_type(const GgufKv *types, uint64_t i) {
    if (!types) return TYPE_NORMAL;
    const uint8_t *p = types->value + 4 * i;
    return (int)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24);
}

// The tokens into model.vocab (normal, byte, unknown and unused ones; with every_piece, all of them, as a
// SentencePiece model's tokenizer.json lists its control pieces too) and root.added_tokens (control and, with
// every_piece, unknown: special; user-defined: not special).
static int add_tokens(json_t *root, json_t *model, const GgufFile *f, bool every_piece, Err *err) {
    const GgufKv *tokens, *types;
    bool found;
    if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, NULL, err) ||
        gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_I32, &types, &found, err))
        return -1;
    if (types && types->count != tokens->count)
        return err_fmt(err, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens", f->path,
                       (unsigned long long)types->count, (unsigned long long)tokens->count);
    if (tokens->count > (1u << 24))
        return err_fmt(err, "%s: tokenizer.ggml.tokens: %llu tokens, more than specdec reads", f->path,
                       (unsigned long long)tokens->count);
    json_t *vocab = json_object(), *added = json_array();
    json_object_set_new(model, "vocab", vocab);
    json_object_set_new(root, "added_tokens", added);
    const uint8_t *at = tokens->value;
    for (uint64_t i = 0; i < tokens->count; i++) {
        const char *s;
        size_t len;
        json_t *text = next_json_string(&at, &s, &len);
        const int type = token_type(types, i);
        if (!text)
            return err_fmt(err, "%s: tokenizer.ggml.tokens[%llu] is not valid UTF-8 without NUL bytes", f->path,
                           (unsigned long long)i);
        if (type < TYPE_NORMAL || type > TYPE_BYTE) {
            json_decref(text);
            return err_fmt(err, "%s: tokenizer.ggml.token_type[%llu] is %d (expected 1 to 6)", f->path,
                           (unsigned long long)i, type);
        }
        const bool is_added = type == TYPE_CONTROL || type == TYPE_USER_DEFINED || (every_piece && type == TYPE_UNKNOWN);
        if (is_added)
            json_array_append_new(added, json_pack("{s:I, s:O, s:b}", "id", (json_int_t)i, "content", text, "special",
                                                   type != TYPE_USER_DEFINED));
        if (is_added && !every_piece) {
            json_decref(text);
            continue;
        }
        if (json_object_getn(vocab, s, len)) {
            json_decref(text);
            return err_fmt(err, "%s: tokenizer.ggml.tokens[%llu] \"%.*s\" appears twice", f->path,
                           (unsigned long long)i, (int)(len < 32 ? len : 32), s);
        }
        json_object_setn_new(vocab, s, len, json_integer((json_int_t)i));
        json_decref(text);
        if (type == TYPE_UNKNOWN) json_object_set_new(model, "unk_token", json_stringn(s, len));
    }
    return 0;
}

// tokenizer.ggml.merges into model.merges.
static int add_merges(json_t *model, const GgufFile *f, Err *err) {
    const GgufKv *merges;
    if (gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, NULL, err)) return -1;
    json_t *list = json_array();
    json_object_set_new(model, "merges", list);
    const uint8_t *at = merges->value;
    const char *s;
    size_t len;
    for (uint64_t i = 0; i < merges->count; i++) {
        json_t *merge = next_json_string(&at, &s, &len);  // "a b"
        if (!merge)
            return err_fmt(err, "%s: tokenizer.ggml.merges[%llu] is not valid UTF-8 without NUL bytes", f->path,
                           (unsigned long long)i);
        json_array_append_new(list, merge);
    }
    return 0;
}

// The special tokens put around a text: the BOS before it where tokenizer.ggml.add_bos_token says so (absent:
// bos_default, as llama.cpp defaults it by tokenizer kind), the EOS after it where add_eos_token does (absent: no),
// as a TemplateProcessing; with neither, ByteLevel's post-processor, which adds nothing.
static int add_post_processor(json_t *root, const GgufFile *f, bool bos_default, Err *err) {
    static const struct {
        const char *flag, *id, *name;
    } ENDS[2] = {{"tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", "<bos>"},
                 {"tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", "<eos>"}};
    json_t *single = json_array(), *specials = json_object();
    json_t *post = json_pack("{s:s, s:o, s:o}", "type", "TemplateProcessing", "single", single, "special_tokens",
                             specials);
    for (int end = 0; end < 2; end++) {
        const GgufKv *flag = gguf_find(f, ENDS[end].flag);
        if (flag && flag->type != GGUF_BOOL) {
            json_decref(post);
            return err_fmt(err, "%s: %s is a %s, expected a bool", f->path, ENDS[end].flag,
                           gguf_value_type_name(flag->type));
        }
        if (end == 1) json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
        if (flag ? !flag->value[0] : end == 1 || !bos_default) continue;
        int64_t id;
        bool found;
        if (gguf_get_int(f, ENDS[end].id, 0, INT32_MAX, &id, &found, err) ||
            (!found && err_fmt(err, "%s: %s is true without a %s", f->path, ENDS[end].flag, ENDS[end].id))) {
            json_decref(post);
            return -1;
        }
        json_array_insert_new(single, end ? json_array_size(single) : 0,
                              json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", ENDS[end].name, "type_id", 0));
        json_object_set_new(specials, ENDS[end].name, json_pack("{s:s, s:[I], s:[s]}", "id", ENDS[end].name, "ids",
                                                                (json_int_t)id, "tokens", ENDS[end].name));
    }
    if (json_object_size(specials) == 0) {
        json_decref(post);
        post = json_pack("{s:s}", "type", "ByteLevel");
    }
    json_object_set_new(root, "post_processor", post);
    return 0;
}

// The byte-level BPE that llama.cpp calls "gpt2": tokenizer.json's model, pre-tokenizer and decoder as the families
// of PRE_TOKENIZERS write them.
static int byte_level_json(json_t *root, json_t *model, const GgufFile *f, Err *err) {
    json_object_set_new(root, "decoder", json_pack("{s:s}", "type", "ByteLevel"));
    return add_pre_tokenizer(root, model, f, err) || add_tokens(root, model, f, false, err) ||
           add_merges(model, f, err) || add_post_processor(root, f, false, err);
}

// ---- SentencePiece: tokenizer.ggml.model "llama" ---------------------------------------------------------------
// A SentencePiece BPE model stores pieces with scores (tokenizer.ggml.scores) and merges, at each step, the adjacent
// pair whose concatenation is the piece of highest score; a tokenizer.json lists merges in rank order instead.
// Hugging Face's converter (transformers' SentencePieceExtractor) makes that list from the pieces and scores: every
// split of a piece, at a character boundary, into two pieces of the vocabulary is a merge; merges are ranked by the
// merged piece's score, highest first, then by its id, then by the left and right pieces' ids. Rebuilt so here, the
// list is the same one, merge for merge (tests/tokenizer/test_gguf_tokenizer.c checks it on Llama 2's), and the
// file then encodes through the tokenizer.json path: Llama 2's normalizer (a "▁" before the text unless
// add_space_prefix is false, every space "▁"), byte fallback to the <0xXX> tokens, the unknown token, and the
// decoder that undoes them.

typedef struct {
    float score;                // the merged piece's
    uint32_t piece, left, right;  // ids
} Candidate;

// Rank order: the merged piece's score, highest first; then its id; then the left and right pieces' ids.
static int by_rank(const void *pa, const void *pb) {
    const Candidate *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->piece != b->piece) return a->piece < b->piece ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return a->right < b->right ? -1 : a->right > b->right;
}

static float score_of(const GgufKv *scores, uint64_t i) {
    const uint8_t *p = scores->value + 4 * i;
    const uint32_t bits = p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
    float x;
    memcpy(&x, &bits, sizeof x);
    return x;
}

// tokenizer.ggml.scores, checked: one finite score per token, and not one score for every normal token (llama.cpp
// writes -1000 for all when it converts a tokenizer.json without its tokenizer.model: no order to rebuild).
static int get_scores(const GgufFile *f, const GgufKv *tokens, const GgufKv *types, const GgufKv **scores, Err *err) {
    bool found;
    if (gguf_get_array(f, "tokenizer.ggml.scores", GGUF_F32, scores, &found, err)) return -1;
    if (!found)
        return err_fmt(err, "%s: tokenizer.ggml.scores is missing: a SentencePiece vocabulary's merges are rebuilt "
                       "from its scores", f->path);
    if ((*scores)->count != tokens->count)
        return err_fmt(err, "%s: tokenizer.ggml.scores has %llu entries for %llu tokens", f->path,
                       (unsigned long long)(*scores)->count, (unsigned long long)tokens->count);
    uint64_t n_normal = 0;
    bool differ = false;
    float first = 0;
    for (uint64_t i = 0; i < tokens->count; i++) {
        const float x = score_of(*scores, i);
        if (x != x || x - x != 0)
            return err_fmt(err, "%s: tokenizer.ggml.scores[%llu] is not a finite number", f->path,
                           (unsigned long long)i);
        if (token_type(types, i) != TYPE_NORMAL) continue;
        if (n_normal++ == 0) first = x;
        differ |= x != first;
    }
    if (n_normal > 1 && !differ)
        return err_fmt(err, "%s: tokenizer.ggml.scores: every normal token scores %g (as llama.cpp writes a vocabulary "
                       "converted from tokenizer.json alone), so the merges' order cannot be rebuilt; give the model's "
                       "tokenizer.json instead", f->path, (double)first);
    return 0;
}

// The merges that split piece i (text s[len]) at a character boundary into two pieces of vocab, appended to *found.
static int add_splits(Candidate **found, size_t *n, size_t *cap, const json_t *vocab, uint32_t i, const char *s,
                      size_t len, float score) {
    for (size_t cut = 1; cut < len; cut++) {
        if (((unsigned char)s[cut] & 0xC0) == 0x80) continue;  // inside a character
        const json_t *left = json_object_getn(vocab, s, cut), *right = json_object_getn(vocab, s + cut, len - cut);
        if (!left || !right) continue;
        if (*n == *cap) {
            Candidate *grown = realloc(*found, (*cap = *cap ? 2 * *cap : 1024) * sizeof **found);
            if (!grown) return -1;
            *found = grown;
        }
        (*found)[(*n)++] = (Candidate){.score = score, .piece = i, .left = (uint32_t)json_integer_value(left),
                                       .right = (uint32_t)json_integer_value(right)};
    }
    return 0;
}

// model.merges rebuilt from the pieces (model.vocab: every token) and their scores, as [left, right] pairs.
static int add_sentencepiece_merges(json_t *model, const GgufFile *f, const GgufKv *tokens, const GgufKv *scores,
                                    Err *err) {
    const json_t *vocab = json_object_get(model, "vocab");
    const char **text = malloc(tokens->count * sizeof *text);  // [n_tokens]: each token's bytes, in the mapping
    size_t *len = malloc(tokens->count * sizeof *len), n = 0, cap = 0;
    Candidate *found = NULL;
    int rc = text && len ? 0 : -1;
    const uint8_t *at = tokens->value;
    for (uint64_t i = 0; i < tokens->count && rc == 0; i++) {
        gguf_next_string(&at, &text[i], &len[i]);
        rc = add_splits(&found, &n, &cap, vocab, (uint32_t)i, text[i], len[i], score_of(scores, i));
    }
    if (rc == 0) {
        qsort(found, n, sizeof *found, by_rank);
        json_t *merges = json_array();
        json_object_set_new(model, "merges", merges);
        for (size_t k = 0; k < n; k++)
            json_array_append_new(merges, json_pack("[s#, s#]", text[found[k].left], (int)len[found[k].left],
                                                    text[found[k].right], (int)len[found[k].right]));
    }
    free(text);
    free(len);
    free(found);
    return rc ? err_fmt(err, "%s: out of memory", f->path) : 0;
}

// The byte a token named <0xXX> (XX in upper case, as llama.cpp names them) stands for, or -1.
static int byte_token_value(const char *s, size_t len) {
    static const char HEX[] = "0123456789ABCDEF";
    const char *high, *low;
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>' || !s[3] || !s[4] || !(high = strchr(HEX, s[3])) ||
        !(low = strchr(HEX, s[4])))
        return -1;
    return (int)((high - HEX) << 4 | (low - HEX));
}

// The byte tokens (type 6) are named <0xXX>; byte fallback needs all 256 of them, or none (then a character
// without a piece becomes the unknown token).
static int check_byte_tokens(const GgufFile *f, const GgufKv *tokens, const GgufKv *types, bool *byte_fallback,
                             Err *err) {
    bool seen[256] = {false};
    int n_seen = 0;
    const uint8_t *at = tokens->value;
    for (uint64_t i = 0; i < tokens->count; i++) {
        const char *s;
        size_t len;
        gguf_next_string(&at, &s, &len);
        if (token_type(types, i) != TYPE_BYTE) continue;
        const int b = byte_token_value(s, len);
        if (b < 0)
            return err_fmt(err, "%s: tokenizer.ggml.tokens[%llu] \"%.*s\" is a byte token (type 6) not named <0xXX>",
                           f->path, (unsigned long long)i, (int)(len < 32 ? len : 32), s);
        n_seen += !seen[b];
        seen[b] = true;
    }
    *byte_fallback = n_seen > 0;
    for (int b = 0; b < 256 && n_seen > 0; b++)
        if (!seen[b])
            return err_fmt(err, "%s: tokenizer.ggml.tokens has no byte token <0x%02X> (%d of the 256 that byte "
                           "fallback needs)", f->path, b, n_seen);
    return 0;
}

// Llama 2's normalizer and decoder: "▁" before the text (add_space_prefix, absent: true) and for every space;
// back, "▁" is a space, <0xXX> its byte, and the first space goes.
static int add_sentencepiece_pipeline(json_t *root, const GgufFile *f, Err *err) {
    const GgufKv *prefix = gguf_find(f, "tokenizer.ggml.add_space_prefix"),
                 *collapse = gguf_find(f, "tokenizer.ggml.remove_extra_whitespaces");
    if ((prefix && prefix->type != GGUF_BOOL) || (collapse && collapse->type != GGUF_BOOL))
        return err_fmt(err, "%s: tokenizer.ggml.%s is a %s, expected a bool", f->path,
                       prefix && prefix->type != GGUF_BOOL ? "add_space_prefix" : "remove_extra_whitespaces",
                       gguf_value_type_name(prefix && prefix->type != GGUF_BOOL ? prefix->type : collapse->type));
    if (collapse && collapse->value[0])
        return err_fmt(err, "%s: tokenizer.ggml.remove_extra_whitespaces is true: SentencePiece's collapsing of spaces "
                       "is not read; give the model's tokenizer.json", f->path);
    const bool space_prefix = !prefix || prefix->value[0];
    json_t *steps = json_array(), *decoders = json_array();
    if (space_prefix) json_array_append_new(steps, json_pack("{s:s, s:s}", "type", "Prepend", "prepend", SPACE_MARK));
    json_array_append_new(steps, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ",
                                           "content", SPACE_MARK));
    json_array_append_new(decoders, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String",
                                              SPACE_MARK, "content", " "));
    json_array_append_new(decoders, json_pack("{s:s}", "type", "ByteFallback"));
    json_array_append_new(decoders, json_pack("{s:s}", "type", "Fuse"));
    if (space_prefix)
        json_array_append_new(decoders, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content", " ", "start", 1,
                                                  "stop", 0));
    json_object_set_new(root, "normalizer", json_pack("{s:s, s:o}", "type", "Sequence", "normalizers", steps));
    json_object_set_new(root, "decoder", json_pack("{s:s, s:o}", "type", "Sequence", "decoders", decoders));
    return 0;
}

// A SentencePiece BPE vocabulary as Llama 2's tokenizer.json writes it.
static int sentencepiece_json(json_t *root, json_t *model, const GgufFile *f, Err *err) {
    const GgufKv *tokens, *types, *scores;
    bool found, byte_fallback;
    if (add_tokens(root, model, f, true, err) ||
        gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, NULL, err) ||
        gguf_get_array(f, "tokenizer.ggml.token_type", GGUF_I32, &types, &found, err) ||
        get_scores(f, tokens, types, &scores, err) || check_byte_tokens(f, tokens, types, &byte_fallback, err) ||
        add_sentencepiece_merges(model, f, tokens, scores, err) || add_sentencepiece_pipeline(root, f, err))
        return -1;
    json_object_set_new(model, "byte_fallback", json_boolean(byte_fallback));
    json_object_set_new(model, "fuse_unk", json_true());
    return add_post_processor(root, f, true, err);
}

json_t *gguf_tokenizer_json(const GgufFile *f, Err *err) {
    const char *kind;
    size_t len;
    if (gguf_get_string(f, "tokenizer.ggml.model", &kind, &len, NULL, err)) return NULL;
    const bool byte_level = len == 4 && memcmp(kind, "gpt2", 4) == 0,
               sentencepiece = len == 5 && memcmp(kind, "llama", 5) == 0;
    if (!byte_level && !sentencepiece) {
        err_fmt(err, "%s: tokenizer.ggml.model \"%.*s\" is not read (only gpt2: byte-level BPE, and llama: "
                "SentencePiece BPE)", f->path, (int)(len < 32 ? len : 32), kind);
        return NULL;
    }
    json_t *root = json_object(), *model = json_pack("{s:s}", "type", "BPE");
    json_object_set_new(root, "model", model);
    if (byte_level ? byte_level_json(root, model, f, err) : sentencepiece_json(root, model, f, err)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

char *gguf_chat_template(const GgufFile *f, Err *err) {
    const char *s;
    size_t len;
    if (gguf_get_string(f, "tokenizer.chat_template", &s, &len, NULL, err)) return NULL;
    if (memchr(s, 0, len)) {
        err_fmt(err, "%s: tokenizer.chat_template holds a NUL byte", f->path);
        return NULL;
    }
    char *copy = malloc(len + 1);
    if (!copy) {
        err_fmt(err, "%s: out of memory", f->path);
        return NULL;
    }
    memcpy(copy, s, len);
    copy[len] = 0;
    return copy;
}

char *gguf_token_text(const GgufFile *f, const char *id_key) {
    const GgufKv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
    int64_t id;
    bool found;
    if (gguf_get_int(f, id_key, 0, INT64_MAX, &id, &found, NULL) || !found || !tokens || tokens->type != GGUF_ARRAY ||
        tokens->elem_type != GGUF_STRING || (uint64_t)id >= tokens->count)
        return NULL;
    const uint8_t *at = tokens->value;
    const char *s = NULL;
    size_t len = 0;
    for (int64_t i = 0; i <= id; i++) gguf_next_string(&at, &s, &len);
    return strndup(s, len);
}

// ---------------------------------------------------------------------------------------------------------------
// The other way: a folder's tokenizer.json into GGUF metadata, as llama.cpp's converter writes a byte-level BPE

// The llama.cpp name of tokenizer.json's pre-tokenizer (PRE_TOKENIZERS), or NULL: a Sequence of a Split by one of
// the patterns above and a ByteLevel without its own regex, with the family's normalizer; or GPT-2's ByteLevel alone.
static const char *pre_tokenizer_name(const json_t *root) {
    const json_t *pre = json_object_get(root, "pre_tokenizer"), *normalizer = json_object_get(root, "normalizer");
    const char *type = json_string_value(json_object_get(pre, "type"));
    const char *norm = json_string_value(json_object_get(normalizer, "type"));
    if (type && strcmp(type, "ByteLevel") == 0 && !norm) return "gpt-2";
    const json_t *steps = json_object_get(pre, "pretokenizers");
    if (!type || strcmp(type, "Sequence") != 0 || json_array_size(steps) != 2) return NULL;
    const char *pattern = json_string_value(json_object_get(json_object_get(json_array_get(steps, 0), "pattern"), "Regex"));
    const char *second = json_string_value(json_object_get(json_array_get(steps, 1), "type"));
    if (!pattern || !second || strcmp(second, "ByteLevel") != 0) return NULL;
    for (int p = 0; p < N_PRE; p++)
        if (PRE_TOKENIZERS[p].pattern && strcmp(PRE_TOKENIZERS[p].pattern, pattern) == 0 &&
            (PRE_TOKENIZERS[p].normalizer ? norm && strcmp(norm, PRE_TOKENIZERS[p].normalizer) == 0 : !norm))
            return PRE_TOKENIZERS[p].name;
    return NULL;
}

// Whether the folder's tokenizer puts the BOS before a text: tokenizer_config.json's add_bos_token where it is a
// bool, else whether tokenizer.json's TemplateProcessing begins with a special token (as llama.cpp's converter
// decides).
static bool adds_bos(const json_t *root, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    json_t *config = json_load_file(path, JSON_DECODE_INT_AS_REAL, NULL);
    const json_t *flag = json_object_get(config, "add_bos_token");
    const bool configured = json_is_boolean(flag), value = json_is_true(flag);
    json_decref(config);
    if (configured) return value;
    const json_t *post = json_object_get(root, "post_processor");
    const char *type = json_string_value(json_object_get(post, "type"));
    const json_t *first = json_array_get(json_object_get(post, "single"), 0);
    return type && strcmp(type, "TemplateProcessing") == 0 && json_object_get(first, "SpecialToken");
}

// Text of tokens [n]: tokenizer.json's vocabulary and added tokens by id, "[PADi]" (unused) where neither has one;
// types [n] likewise.
static int vocabulary_by_id(const json_t *root, const char *path, const char **text, int32_t *types, int n, Err *err) {
    const json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab"), *added = json_object_get(root,
                                                                                                      "added_tokens");
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)vocab, key, value) {
        const json_int_t id = json_integer_value(value);
        if (!json_is_integer(value) || id < 0 || id >= n)
            return err_fmt(err, "%s: model.vocab: \"%.32s\" has id %s, expected 0 to %d", path, key,
                           json_is_integer(value) ? "out of range" : "not an integer", n - 1);
        text[id] = key, types[id] = TYPE_NORMAL;
    }
    size_t i;
    json_array_foreach(added, i, value) {
        const json_t *id = json_object_get(value, "id"), *content = json_object_get(value, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= n || !json_is_string(content))
            return err_fmt(err, "%s: added_tokens[%zu]: expected an id in 0 to %d and a content string", path, i, n - 1);
        text[json_integer_value(id)] = json_string_value(content);
        types[json_integer_value(id)] = json_is_true(json_object_get(value, "special")) ? TYPE_CONTROL : TYPE_USER_DEFINED;
    }
    return 0;
}

// The merges, each written "a b" (tokenizer.json holds strings or [a, b] pairs).
static int write_merges(GgufWriter *w, const json_t *merges, const char *path, Err *err) {
    gguf_kv_array(w, "tokenizer.ggml.merges", GGUF_STRING, json_array_size(merges));
    size_t i;
    const json_t *m;
    json_array_foreach(merges, i, m) {
        if (json_is_string(m)) {
            gguf_put_string(w, json_string_value(m), json_string_length(m));
            continue;
        }
        const json_t *a = json_array_get(m, 0), *b = json_array_get(m, 1);
        if (json_array_size(m) != 2 || !json_is_string(a) || !json_is_string(b))
            return err_fmt(err, "%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"]", path, i);
        char pair[1024];
        const int len = snprintf(pair, sizeof pair, "%s %s", json_string_value(a), json_string_value(b));
        if (len < 0 || (size_t)len >= sizeof pair) return err_fmt(err, "%s: model.merges[%zu] is too long", path, i);
        gguf_put_string(w, pair, (size_t)len);
    }
    return 0;
}

int gguf_write_tokenizer(GgufWriter *w, const char *dir, int n_vocab, int bos, int eos, Err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return access(path, F_OK) == 0 ? err_fmt(err, "%s: line %d: %s", path, jerr.line, jerr.text) : 1;
    const json_t *model = json_object_get(root, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    const char *pre = pre_tokenizer_name(root);
    const char **text = calloc((size_t)n_vocab, sizeof *text);
    int32_t *types = calloc((size_t)n_vocab, sizeof *types);
    int rc = 0;
    if (!text || !types) rc = err_fmt(err, "out of memory");
    else if ((type && strcmp(type, "BPE") != 0) || !json_is_object(json_object_get(model, "vocab")) ||
             !json_is_array(json_object_get(model, "merges")))
        rc = err_fmt(err, "%s: model: expected a BPE model with a vocab and merges", path);
    else if (!pre)
        rc = err_fmt(err, "%s: pre_tokenizer: not a byte-level one llama.cpp names (llama-bpe, qwen2, gpt-2); "
                     "convert writes those only", path);
    else
        rc = vocabulary_by_id(root, path, text, types, n_vocab, err);
    if (rc == 0) {
        gguf_kv_string(w, "tokenizer.ggml.model", "gpt2", 4);
        gguf_kv_string(w, "tokenizer.ggml.pre", pre, strlen(pre));
        gguf_kv_array(w, "tokenizer.ggml.tokens", GGUF_STRING, (uint64_t)n_vocab);
        for (int i = 0; i < n_vocab; i++) {
            char pad[32];
            const int len = text[i] ? (int)strlen(text[i]) : snprintf(pad, sizeof pad, "[PAD%d]", i);
            gguf_put_string(w, text[i] ? text[i] : pad, (size_t)len);
        }
        gguf_kv_array(w, "tokenizer.ggml.token_type", GGUF_I32, (uint64_t)n_vocab);
        for (int i = 0; i < n_vocab; i++) gguf_put_i32(w, types[i] ? types[i] : TYPE_UNUSED);
        rc = write_merges(w, json_object_get(model, "merges"), path, err);
    }
    if (rc == 0) {
        if (bos >= 0) gguf_kv_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
        if (eos >= 0) gguf_kv_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
        gguf_kv_bool(w, "tokenizer.ggml.add_bos_token", adds_bos(root, dir));
    }
    free(text);
    free(types);
    json_decref(root);
    return rc;
}
