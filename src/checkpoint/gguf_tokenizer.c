// gguf_tokenizer.c — a GGUF file's tokenizer metadata as tokenizer.json (see gguf_tokenizer.h).
#include "checkpoint/gguf_tokenizer.h"

#include <stdlib.h>
#include <string.h>

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

// The tokens into model.vocab (normal, byte, unknown and unused ones) and root.added_tokens (control: special;
// user-defined: not special).
static int add_tokens(json_t *root, json_t *model, const GgufFile *f, Err *err) {
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
        if (type == TYPE_CONTROL || type == TYPE_USER_DEFINED) {
            json_array_append_new(added, json_pack("{s:I, s:o, s:b}", "id", (json_int_t)i, "content", text, "special",
                                                   type == TYPE_CONTROL));
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

// add_bos_token (default: no): a TemplateProcessing that puts the BOS before the text; else ByteLevel's, which
// adds nothing.
static int add_post_processor(json_t *root, const GgufFile *f, Err *err) {
    const GgufKv *add_bos = gguf_find(f, "tokenizer.ggml.add_bos_token");
    if (add_bos && add_bos->type != GGUF_BOOL)
        return err_fmt(err, "%s: tokenizer.ggml.add_bos_token is a %s, expected a bool", f->path,
                       gguf_value_type_name(add_bos->type));
    int64_t bos;
    bool found;
    if (gguf_get_int(f, "tokenizer.ggml.bos_token_id", 0, INT32_MAX, &bos, &found, err)) return -1;
    if (!add_bos || !add_bos->value[0]) {
        json_object_set_new(root, "post_processor", json_pack("{s:s}", "type", "ByteLevel"));
        return 0;
    }
    if (!found) return err_fmt(err, "%s: tokenizer.ggml.add_bos_token is true without a bos_token_id", f->path);
    json_object_set_new(root, "post_processor",
                        json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:{s:{s:s, s:[I], s:[s]}}}", "type",
                                  "TemplateProcessing", "single", "SpecialToken", "id", "<bos>", "type_id", 0,
                                  "Sequence", "id", "A", "type_id", 0, "special_tokens", "<bos>", "id", "<bos>",
                                  "ids", (json_int_t)bos, "tokens", "<bos>"));
    return 0;
}

json_t *gguf_tokenizer_json(const GgufFile *f, Err *err) {
    const char *kind;
    size_t len;
    if (gguf_get_string(f, "tokenizer.ggml.model", &kind, &len, NULL, err)) return NULL;
    if (len == 5 && memcmp(kind, "llama", 5) == 0) {
        err_fmt(err, "%s: tokenizer.ggml.model \"llama\" (a SentencePiece vocabulary, as Llama 2 and TinyLlama GGUFs "
                "carry) is not read: give the model's tokenizer.json (a folder with it and the .gguf)", f->path);
        return NULL;
    }
    if (len != 4 || memcmp(kind, "gpt2", 4) != 0) {
        err_fmt(err, "%s: tokenizer.ggml.model \"%.*s\" is not read (only gpt2: byte-level BPE)", f->path,
                (int)(len < 32 ? len : 32), kind);
        return NULL;
    }
    json_t *root = json_object(), *model = json_pack("{s:s}", "type", "BPE");
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "decoder", json_pack("{s:s}", "type", "ByteLevel"));
    if (add_pre_tokenizer(root, model, f, err) || add_tokens(root, model, f, err) || add_merges(model, f, err) ||
        add_post_processor(root, f, err)) {
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
