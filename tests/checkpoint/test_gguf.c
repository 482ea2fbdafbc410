// test_gguf.c — the GGUF reader (src/checkpoint/gguf.c): a valid file's metadata and tensors read back, and each
// validation rule rejecting its malformed file with one line that names the file and what is wrong; then the
// metadata → Config mapping's refusals, and a folder holding one .gguf standing for it.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "harness.h"
#include "checkpoint/gguf_model.h"

// ---------------------------------------------------------------------------------------------------------------
// A GGUF file, built field by field

typedef struct {
    uint8_t bytes[4096];
    size_t n;
} Buf;

static void put(Buf *b, uint64_t v, int n) {
    for (int i = 0; i < n; i++) b->bytes[b->n++] = (uint8_t)(v >> (8 * i));
}
static void put_str(Buf *b, const char *s) {
    put(b, strlen(s), 8);
    memcpy(b->bytes + b->n, s, strlen(s));
    b->n += strlen(s);
}
static void put_kv_str(Buf *b, const char *key, const char *value) {
    put_str(b, key);
    put(b, GGUF_STRING, 4);
    put_str(b, value);
}
static void put_kv_u32(Buf *b, const char *key, uint32_t value) {
    put_str(b, key);
    put(b, GGUF_U32, 4);
    put(b, value, 4);
}
// A tensor info: name, dims (ne order), ggml type, offset.
static void put_tensor(Buf *b, const char *name, int n_dims, const uint64_t *ne, uint32_t type, uint64_t offset) {
    put_str(b, name);
    put(b, (uint64_t)n_dims, 4);
    for (int i = 0; i < n_dims; i++) put(b, ne[i], 8);
    put(b, type, 4);
    put(b, offset, 8);
}
static void put_header(Buf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    put(b, 0x46554747u, 4);
    put(b, version, 4);
    put(b, n_tensors, 8);
    put(b, n_kv, 8);
}
// Pads to the alignment, then appends `n` data bytes.
static void put_data(Buf *b, size_t alignment, size_t n) {
    while (b->n % alignment) b->bytes[b->n++] = 0;
    for (size_t i = 0; i < n; i++) b->bytes[b->n++] = (uint8_t)(i * 7);
}

// A valid file: an architecture, two F32 tensors a [4] and b [2, 3].
static void valid_file(Buf *b) {
    put_header(b, 3, 2, 1);
    put_kv_str(b, "general.architecture", "llama");
    put_tensor(b, "a", 1, (uint64_t[]){4}, GGML_F32, 0);
    put_tensor(b, "b", 2, (uint64_t[]){2, 3}, GGML_F32, 32);
    put_data(b, 32, 32 + 24);
}

static char *write_buf(const Buf *b) {
    char *path = strdup("/tmp/specdec-gguf-XXXXXX.gguf");
    const int fd = mkstemps(path, 5);
    if (fd < 0 || write(fd, b->bytes, b->n) != (ssize_t)b->n) abort();
    close(fd);
    return path;
}

// Opening b must fail with one line holding `needle` and the file's path.
static void check_refused(const Buf *b, const char *needle) {
    char *path = write_buf(b);
    GgufFile f;
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == -1, "expected \"%s\", the file was accepted", needle);
    CHECK(strstr(err.msg, needle) && strstr(err.msg, path) && !strchr(err.msg, '\n'), "expected \"%s\", got \"%s\"",
          needle, err.msg);
    gguf_close(&f);
    unlink(path);
    free(path);
}

TEST(gguf_reads_a_valid_file) {
    Buf b;
    valid_file(&b);
    char *path = write_buf(&b);
    GgufFile f;
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == 0, "%s", err.msg);
    const char *arch;
    size_t len;
    CHECK(f.n_tensors == 2 && f.n_kv == 1 && f.version == 3 && f.alignment == 32, "header misread");
    CHECK(gguf_get_string(&f, "general.architecture", &arch, &len, NULL, &err) == 0 && len == 5 &&
              memcmp(arch, "llama", 5) == 0, "architecture misread");
    const GgufTensor *t = gguf_tensor(&f, "b");
    CHECK(t && t->ne[0] == 2 && t->ne[1] == 3 && t->n_elements == 6 && t->n_bytes == 24 &&
              t->data == f.map + f.data_offset + 32, "tensor b misread");
    int64_t v;
    CHECK(gguf_get_int(&f, "general.architecture", 0, 1, &v, NULL, &err) == -1 && strstr(err.msg, "is a string"),
          "a string read as an integer: %s", err.msg);
    gguf_close(&f);
    unlink(path);
    free(path);
}

TEST(gguf_refuses_malformed_files) {
    Buf b;
    valid_file(&b);
    b.n = 100;  // inside tensor a's info
    check_refused(&b, "runs past the end of the file");
    valid_file(&b);
    b.n -= 8;
    check_refused(&b, "run past its end");
    put_header(&b, 1, 0, 0);
    put_data(&b, 1, 8);
    check_refused(&b, "GGUF version 1");
    put_header(&b, 0x03000000, 0, 0);
    put_data(&b, 1, 8);
    check_refused(&b, "(a big-endian file)");
    put_header(&b, 3, 1u << 30, 0);
    check_refused(&b, "cannot fit in the file");
    put_header(&b, 3, 0, 1);
    put(&b, 1000, 8);  // a key's length past the end
    put(&b, 0, 8);
    check_refused(&b, "runs past the end of the file");
    put_header(&b, 3, 0, 1);
    put(&b, 3, 8);
    put(&b, 'a' | 'b' << 16, 3);  // "a\0b"
    put(&b, GGUF_U8, 4);
    put(&b, 0, 8);
    check_refused(&b, "holds a NUL byte");
    put_header(&b, 3, 0, 1);
    put_str(&b, "");
    put(&b, GGUF_U8, 4);
    put(&b, 0, 8);
    check_refused(&b, "is empty");
    put_header(&b, 3, 0, 2);
    put_kv_u32(&b, "k", 1);
    put_kv_u32(&b, "k", 2);
    check_refused(&b, "metadata key \"k\" appears twice");
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put(&b, 13, 4);
    put(&b, 0, 8);
    check_refused(&b, "value type 13 is not a GGUF value type");
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put(&b, GGUF_ARRAY, 4);
    put(&b, GGUF_ARRAY, 4);
    put(&b, 0, 8);
    check_refused(&b, "an array of arrays");
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put(&b, GGUF_ARRAY, 4);
    put(&b, GGUF_U64, 4);
    put(&b, 1u << 20, 8);
    check_refused(&b, "1048576 elements of u64 cannot fit");
    put_header(&b, 3, 0, 1);
    put_str(&b, "k");
    put(&b, GGUF_BOOL, 4);
    put(&b, 2, 8);
    check_refused(&b, "a bool of value 2");
    put_header(&b, 3, 0, 1);
    put_kv_u32(&b, "general.alignment", 48);
    check_refused(&b, "general.alignment 48 is not a power of two");
    put_header(&b, 3, 2, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){4}, GGML_F32, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){4}, GGML_F32, 32);
    put_data(&b, 32, 64);
    check_refused(&b, "tensor \"t\" appears twice");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 5, (uint64_t[]){1, 1, 1, 1, 1}, GGML_F32, 0);
    check_refused(&b, "5 dimensions");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 2, (uint64_t[]){4, 0}, GGML_F32, 0);
    check_refused(&b, "dimension 1 is 0");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 2, (uint64_t[]){1ull << 40, 1ull << 40}, GGML_F32, 0);
    check_refused(&b, "the element count must be in");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){4}, 4, 0);
    check_refused(&b, "type 4 is not a ggml type GGUF defines");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){48}, GGML_Q4_K, 0);
    check_refused(&b, "rows of 48 elements are not whole Q4_K blocks of 256");
    put_header(&b, 3, 1, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){4}, GGML_F32, 8);
    put_data(&b, 32, 64);
    check_refused(&b, "offset 8 is not a multiple of the alignment 32");
    put_header(&b, 3, 2, 0);
    put_tensor(&b, "t", 1, (uint64_t[]){16}, GGML_F32, 0);
    put_tensor(&b, "u", 1, (uint64_t[]){4}, GGML_F32, 32);
    put_data(&b, 32, 96);
    check_refused(&b, "overlaps tensor");
}

// ---------------------------------------------------------------------------------------------------------------
// The metadata as a Config

// gguf_config on b must fail with `needle`.
static void check_config_refused(const Buf *b, const char *needle) {
    char *path = write_buf(b);
    GgufFile f;
    Config cfg;
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == 0, "%s", err.msg);
    CHECK(gguf_config(&cfg, &f, &err) == -1 && strstr(err.msg, needle) && !strchr(err.msg, '\n'),
          "expected \"%s\", got \"%s\"", needle, err.msg);
    gguf_close(&f);
    unlink(path);
    free(path);
}

// An `arch` model's sizes and its token_embd [64, 8] (F32); one more u32 entry if extra_key is given.
static void llama_file(Buf *b, const char *arch, const char *extra_key, uint32_t extra) {
    char key[64];
    put_header(b, 3, 1, extra_key ? 7 : 6);
    put_kv_str(b, "general.architecture", arch);
    const char *sizes[] = {"context_length", "embedding_length", "block_count", "feed_forward_length",
                           "attention.head_count"};
    const uint32_t values[] = {32, 64, 1, 128, 4};
    for (int i = 0; i < 5; i++) {
        snprintf(key, sizeof key, "%s.%s", arch, sizes[i]);
        put_kv_u32(b, key, values[i]);
    }
    if (extra_key) put_kv_u32(b, extra_key, extra);
    put_tensor(b, "token_embd.weight", 2, (uint64_t[]){64, 8}, GGML_F32, 0);
    put_data(b, 32, 64 * 8 * 4);
}

TEST(gguf_config_refusals) {
    static Buf b;
    llama_file(&b, "mamba", NULL, 0);
    check_config_refused(&b, "general.architecture is \"mamba\": specdec runs llama, qwen2, qwen3 and gpt2");
    llama_file(&b, "llama", "llama.attention.head_count_kv", 3);
    check_config_refused(&b, "head_count_kv 3 does not divide head_count 4");
    llama_file(&b, "llama", "llama.rope.dimension_count", 8);
    check_config_refused(&b, "a rotation of part of a head");
    llama_file(&b, "llama", "llama.vocab_size", 9);
    check_config_refused(&b, "token_embd.weight has 8 rows, unlike llama.vocab_size 9");
    llama_file(&b, "llama", "llama.attention.sliding_window", 0);
    check_config_refused(&b, "llama.attention.sliding_window");
    llama_file(&b, "llama", "llama.attention.sliding_window", UINT32_MAX);
    check_config_refused(&b, "llama.attention.sliding_window");
    llama_file(&b, "llama", "llama.block_count", 0);  // (a second block_count: refused as a repeat)
    check_refused(&b, "metadata key \"llama.block_count\" appears twice");

    llama_file(&b, "llama", NULL, 0);
    char *path = write_buf(&b);
    GgufFile f;
    Config cfg;
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == 0 && gguf_config(&cfg, &f, &err) == 0, "%s", err.msg);
    CHECK(cfg.model_type == MODEL_LLAMA && cfg.n_embd == 64 && cfg.n_head == 4 && cfg.n_kv_head == 4 &&
              cfg.head_dim == 16 && cfg.vocab_size == 8 && cfg.n_inner == 128 && cfg.tie_word_embeddings,
          "config misread");
    gguf_close(&f);
    unlink(path);
    free(path);
}

TEST(gguf_refuses_types_it_does_not_read) {
    static Buf b;
    put_header(&b, 3, 2, 1);
    put_kv_str(&b, "general.architecture", "llama");
    put_tensor(&b, "token_embd.weight", 2, (uint64_t[]){32, 2}, GGML_F32, 0);
    put_tensor(&b, "blk.0.attn_q.weight", 2, (uint64_t[]){32, 32}, 9 /* Q8_1 */, 256);
    put_data(&b, 32, 256 + 32 * 40);
    char *path = write_buf(&b);
    GgufFile f;
    StCheckpoint ckpt;
    Config cfg = {.model_type = MODEL_LLAMA, .head_dim = 8};
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == 0, "%s", err.msg);
    CHECK(gguf_view(&ckpt, &f, &cfg, &err) == -1 && strstr(err.msg, "tensor \"blk.0.attn_q.weight\" is Q8_1;") &&
              strstr(err.msg, "specdec reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K "
                              "tensors"), "got \"%s\"", err.msg);
    gguf_close(&f);
    unlink(path);
    free(path);
}

// A real file (llama-quantize's llama_q4_0) changed where a GGUF of another kind differs, then given to `specdec
// generate`: a version-1 file, a big-endian one (its version byte-swapped) and one holding a type not read (its
// first Q4_0 tensor, blk.0.attn_k.weight, retyped IQ4_NL, whose blocks are as long: so every extent still checks),
// each refused with exit 2 and one line naming the file and what is wrong.
TEST(gguf_real_file_refusals_through_the_cli) {
    static const struct {
        const char *change;
        uint32_t value;  // written little-endian at the change's place
        const char *says;
    } CASES[] = {
        {"version", 1, "GGUF version 1; specdec reads versions 2 and 3"},
        {"version", 0x03000000, "GGUF version 50331648 (a big-endian file); specdec reads versions 2 and 3"},
        {"type", 20, "tensor \"blk.0.attn_k.weight\" is IQ4_NL; specdec reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, "
                     "Q5_0, Q5_1, Q4_K, Q5_K and Q6_K tensors"},
    };
    size_t size = 0;
    char *text = NULL;
    Err read_err = {{0}};
    CHECK(read_file("tests/fixtures/gguf/llama_q4_0/model.gguf", &text, &size, &read_err) == 0, "%s", read_err.msg);
    uint8_t *file = (uint8_t *)text, *copy = malloc(size + 1);
    // the tensor info of blk.0.attn_k.weight: its name, u32 n_dims (2), u64 ne[2], then the u32 type
    static const char NAME[] = "blk.0.attn_k.weight";
    const uint8_t *name = file ? memmem(file, size, NAME, sizeof NAME - 1) : NULL;
    const size_t type_at = name ? (size_t)(name - file) + sizeof NAME - 1 + 4 + 16 : 0;
    CHECK(name && type_at + 4 <= size && file[type_at] == GGML_Q4_0, "no Q4_0 tensor %s in the fixture", NAME);
    for (size_t i = 0; !test_failures() && i < sizeof CASES / sizeof *CASES; i++) {
        memcpy(copy, file, size);
        const size_t at = strcmp(CASES[i].change, "version") == 0 ? 4 : type_at;
        for (int k = 0; k < 4; k++) copy[at + k] = (uint8_t)(CASES[i].value >> 8 * k);
        char path[] = "/tmp/specdec-gguf-XXXXXX.gguf", args[128], *out, *err;
        const int fd = mkstemps(path, 5);
        CHECK(fd >= 0 && write(fd, copy, size) == (ssize_t)size, "cannot write %s", path);
        close(fd);
        snprintf(args, sizeof args, "generate -m %s --ids '0 1' -n 2", path);
        const int rc = run_specdec(args, &out, &err);
        CHECK(rc == 2 && count_lines(err) == 1 && strstr(err, CASES[i].says) && strstr(err, path),
              "%s %u: exit %d, stderr \"%s\" (expected \"%s\")", CASES[i].change, CASES[i].value, rc, err,
              CASES[i].says);
        free(out), free(err);
        unlink(path);
    }
    free(copy);
    free(text);
}

TEST(gguf_folder_of_one_file_stands_for_it) {
    char dir[] = "/tmp/specdec-gguf-dir-XXXXXX", out[4096], link[4200], config[4200];
    CHECK(mkdtemp(dir), "mkdtemp");
    char *target = realpath("tests/fixtures/gguf/llama_gqa_f32/model.gguf", NULL);
    snprintf(link, sizeof link, "%s/model.gguf", dir);
    CHECK(target && symlink(target, link) == 0, "symlink");
    CHECK(gguf_checkpoint_path(dir, out, sizeof out) && strcmp(out, link) == 0, "the folder's one .gguf: \"%s\"", out);
    snprintf(config, sizeof config, "%s/config.json", dir);
    FILE *c = fopen(config, "w");
    if (c) fclose(c);
    CHECK(!gguf_checkpoint_path(dir, out, sizeof out), "a folder with config.json is a Hugging Face folder");
    unlink(config);
    char fifo[4200];  // a FIFO is no GGUF, and asking must not wait for a writer
    snprintf(fifo, sizeof fifo, "%s/pipe.gguf", dir);
    CHECK(mkfifo(fifo, 0600) == 0 && !gguf_is_gguf(fifo), "a FIFO taken for a GGUF");
    unlink(fifo);
    char *out_text, *err_text;
    char args[4400];
    snprintf(args, sizeof args, "logits -m %s --ids '0 7 3'", dir);
    const int status = run_specdec(args, &out_text, &err_text);
    CHECK(status == 0 && count_lines(out_text) == 1, "logits -m FOLDER: status %d, %s", status, err_text);
    free(out_text);
    free(err_text);
    unlink(link);
    rmdir(dir);
    free(target);
}
