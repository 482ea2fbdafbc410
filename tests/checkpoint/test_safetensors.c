// test_safetensors.c — the safetensors loader: valid files (single and sharded) round-trip, and every validation
// rule rejects its malformed file with one line that names the file and the offending tensor or field.
//
// Test files are written into a fresh folder under /tmp. Headers are spelled with single quotes for legibility
// ({'a': ...}); write_header_file turns them into double quotes.
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "kernels.h"
#include "checkpoint/safetensors.h"

// ---------------------------------------------------------------------------------------------------------------
// Temporary folders and files

// A new empty folder /tmp/specdec-st-XXXXXX (malloc'd path).
static char *make_tmpdir(void) {
    char *dir = strdup("/tmp/specdec-st-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        abort();
    }
    return dir;
}

// Deletes the files of folder `dir` (no subfolders), the folder itself, and frees `dir`.
static void remove_tmpdir(char *dir) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char *path;
        if (e->d_name[0] == '.' || asprintf(&path, "%s/%s", dir, e->d_name) < 0) continue;
        unlink(path);
        free(path);
    }
    if (d) closedir(d);
    rmdir(dir);
    free(dir);
}

// Writes the n bytes at `bytes` as file dir/name; returns its path (malloc'd).
static char *write_file(const char *dir, const char *name, const void *bytes, size_t n) {
    char *path;
    if (asprintf(&path, "%s/%s", dir, name) < 0) abort();
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        abort();
    }
    return path;
}

// Writes a safetensors file dir/name: the u64 `declared_len`, then `header` (header_len bytes), then data_len
// bytes of `data` (NULL: a byte pattern). declared_len may differ from header_len, to test that check.
static char *write_raw(const char *dir, const char *name, uint64_t declared_len, const char *header,
                       size_t header_len, const uint8_t *data, size_t data_len) {
    size_t size = 8 + header_len + data_len;
    uint8_t *bytes = malloc(size);
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)(declared_len >> (8 * i));
    memcpy(bytes + 8, header, header_len);
    for (size_t i = 0; i < data_len; i++) bytes[8 + header_len + i] = data ? data[i] : (uint8_t)(7 * i + 1);
    char *path = write_file(dir, name, bytes, size);
    free(bytes);
    return path;
}

// Writes a safetensors file dir/name with `header` (single quotes become double quotes) and data_len bytes.
static char *write_header_file(const char *dir, const char *name, const char *header, size_t data_len) {
    char *json = strdup(header);
    for (char *c = json; *c; c++) *c = *c == '\'' ? '"' : *c;
    char *path = write_raw(dir, name, strlen(json), json, strlen(json), NULL, data_len);
    free(json);
    return path;
}

// A tensor of a test file.
typedef struct {
    const char *name;
    StDtype dtype;
    int ndim;
    int64_t shape[4];
} Spec;

static size_t spec_bytes(const Spec *s) {
    size_t n = st_dtype_size(s->dtype);
    for (int i = 0; i < s->ndim; i++) n *= (size_t)s->shape[i];
    return n;
}

// Where write_spec_file puts tensor i of specs in the data area: after tensors 0..i-1.
static size_t spec_offset(const Spec *specs, int i) {
    size_t offset = 0;
    while (i-- > 0) offset += spec_bytes(&specs[i]);
    return offset;
}

// Writes a valid safetensors file dir/name holding the n tensors of specs back to back, in that order, with data
// `data` (NULL: a byte pattern). `extra` (may be NULL) is added to the header as is, e.g. a "__metadata__" entry.
// The header is padded with spaces, as the reference writer does, so that the data area starts at a byte offset
// ≡ data_mod8 (mod 8).
static char *write_spec_file(const char *dir, const char *name, const Spec *specs, int n, const char *extra,
                             int data_mod8, const uint8_t *data) {
    char *header;
    size_t header_len;
    FILE *h = open_memstream(&header, &header_len);
    fputc('{', h);
    for (int i = 0; i < n; i++) {
        fprintf(h, "%s\"%s\": {\"dtype\": \"%s\", \"shape\": [", i ? ", " : "", specs[i].name,
                st_dtype_name(specs[i].dtype));
        for (int d = 0; d < specs[i].ndim; d++) fprintf(h, "%s%lld", d ? ", " : "", (long long)specs[i].shape[d]);
        fprintf(h, "], \"data_offsets\": [%zu, %zu]}", spec_offset(specs, i), spec_offset(specs, i + 1));
    }
    fprintf(h, "%s%s}", extra && n ? ", " : "", extra ? extra : "");
    fflush(h);
    while ((8 + header_len) % 8 != (size_t)data_mod8) {
        fputc(' ', h);
        fflush(h);
    }
    fclose(h);
    char *path = write_raw(dir, name, header_len, header, header_len, data, spec_offset(specs, n));
    free(header);
    return path;
}

// ---------------------------------------------------------------------------------------------------------------
// Checking rejections

// Checks that st_open(path) fails with a one-line message that names `path` and contains every string of wants.
static void check_rejected(const char *path, const char *const *wants) {
    StCheckpoint ckpt;
    Err err = {{0}};
    int rc = st_open(&ckpt, path, &err);
    CHECK(rc == -1, "st_open(%s) = %d, expected -1", path, rc);
    CHECK(ckpt.n_tensors == 0 && ckpt.n_files == 0, "a failed st_open left %d files open", ckpt.n_files);
    CHECK(strstr(err.msg, path), "message does not name %s: %s", path, err.msg);
    CHECK(!strchr(err.msg, '\n'), "message is not one line: %s", err.msg);
    for (int i = 0; wants[i]; i++) CHECK(strstr(err.msg, wants[i]), "message lacks '%s': %s", wants[i], err.msg);
    st_close(&ckpt);
}
#define CHECK_REJECTED(path, ...) check_rejected(path, (const char *const[]){__VA_ARGS__, NULL})

// Writes `header` (single quotes for double) and data_len bytes of data as a file, and checks that st_open
// rejects it with one line that names the file and contains every further argument.
#define CHECK_HEADER_REJECTED(header, data_len, ...)                                \
    do {                                                                            \
        char *dir_ = make_tmpdir();                                                 \
        char *path_ = write_header_file(dir_, "bad.safetensors", header, data_len); \
        CHECK_REJECTED(path_, __VA_ARGS__);                                         \
        free(path_);                                                                \
        remove_tmpdir(dir_);                                                        \
    } while (0)

// ---------------------------------------------------------------------------------------------------------------
// Valid files

// Whether a and b have the same bits (so -0 ≠ +0, and a nan equals the same nan).
static bool same_bits(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

// The little-endian u16 at p.
static uint16_t u16_at(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

// A file whose data area starts at an odd offset (≡ 7 mod 8), as the published gpt2 file's does: every tensor
// keeps its dtype, shape and bytes, is found by name, and reads through st_to_f32 from its unaligned address.
TEST(st_round_trip_unaligned) {
    const Spec specs[] = {
        {"u", ST_U8, 1, {3}},   {"w", ST_F32, 2, {3, 2}}, {"h", ST_F16, 1, {5}},
        {"b", ST_BF16, 1, {4}}, {"s", ST_F32, 0, {0}},    {"z", ST_F32, 2, {0, 5}},
    };
    enum { N = sizeof specs / sizeof specs[0] };
    uint8_t data[3 + 24 + 10 + 8 + 4];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)test_rand_u64();
    char *dir = make_tmpdir();
    char *path = write_spec_file(dir, "model.safetensors", specs, N, "\"__metadata__\": {\"format\": \"pt\"}", 7,
                                 data);

    StCheckpoint ckpt;
    Err err = {{0}};
    CHECK(st_open(&ckpt, dir, &err) == 0, "st_open: %s", err.msg);
    CHECK(ckpt.n_files == 1 && ckpt.n_tensors == N, "%d files, %d tensors", ckpt.n_files, ckpt.n_tensors);
    for (int i = 1; i < ckpt.n_tensors; i++) {
        CHECK(strcmp(ckpt.tensors[i - 1].name, ckpt.tensors[i].name) < 0, "tensors not sorted by name");
    }
    for (int i = 0; i < N; i++) {
        const StTensor *t = st_find(&ckpt, specs[i].name);
        CHECK(t != NULL, "tensor %s not found", specs[i].name);
        if (!t) continue;
        CHECK(t->dtype == specs[i].dtype && t->ndim == specs[i].ndim, "%s: dtype or ndim", t->name);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == specs[i].shape[d], "%s: shape[%d]", t->name, d);
        CHECK(t->n_bytes == spec_bytes(&specs[i]), "%s: %zu bytes", t->name, t->n_bytes);
        CHECK(t->n_elements == (int64_t)(t->n_bytes / st_dtype_size(t->dtype)) && (t->ndim || t->n_elements == 1),
              "%s: %lld elements", t->name, (long long)t->n_elements);
        CHECK(memcmp(t->data, data + spec_offset(specs, i), t->n_bytes) == 0, "%s: data differs", t->name);
        CHECK(strcmp(t->file, path) == 0, "%s: file %s", t->name, t->file);
    }
    CHECK(st_find(&ckpt, "missing") == NULL && st_find(&ckpt, "a") == NULL, "st_find of an absent name");

    const StTensor *w = st_find(&ckpt, "w"), *h = st_find(&ckpt, "h"), *b = st_find(&ckpt, "b");
    CHECK((uintptr_t)w->data % 4 != 0, "the F32 data should start at an unaligned address");
    float got[6];
    st_to_f32(got, w->data, ST_F32, 6);
    CHECK(memcmp(got, w->data, sizeof got) == 0, "F32 values differ");  // the host is little-endian too
    st_to_f32(got, h->data, ST_F16, 5);
    for (int i = 0; i < 5; i++) CHECK(same_bits(got[i], f16_to_f32(u16_at(h->data + 2 * i))), "F16 element %d", i);
    st_to_f32(got, b->data, ST_BF16, 4);
    for (int i = 0; i < 4; i++) CHECK(same_bits(got[i], bf16_to_f32(u16_at(b->data + 2 * i))), "BF16 element %d", i);

    char *text;
    size_t text_len;
    FILE *f = open_memstream(&text, &text_len);
    st_print(f, &ckpt);
    fclose(f);
    const char *wants[] = {path, "format = pt", "not 8-byte aligned", "[3, 2]", "F16", "[]", "[0, 5]", "6 tensors"};
    for (size_t i = 0; i < sizeof wants / sizeof wants[0]; i++) {
        CHECK(strstr(text, wants[i]), "st_print lacks '%s':\n%s", wants[i], text);
    }
    free(text);
    st_close(&ckpt);
    free(path);
    remove_tmpdir(dir);
}

// st_to_f32 of F16 (normals, subnormals, ±0, ±inf, nan), BF16 and F32 from an odd address, as little-endian.
TEST(st_to_f32_special_values) {
    static const uint16_t f16[] = {0x3c00, 0xc000, 0x0001, 0x03ff, 0x0400, 0x7bff,
                                   0x7c00, 0xfc00, 0x7e00, 0x8000, 0x3555, 0x8001};
    const float f16_want[] = {1.0f, -2.0f, 0x1p-24f, 0x3ffp-24f, 0x1p-14f, 65504.0f,
                              INFINITY, -INFINITY, NAN, -0.0f, 0x1.554p-2f, -0x1p-24f};
    static const uint16_t bf16[] = {0x3f80, 0xc040, 0x7f80, 0x0001, 0x8000};
    const float bf16_want[] = {1.0f, -3.0f, INFINITY, 0x1p-133f, -0.0f};
    static const uint32_t f32[] = {0x3f800000, 0x00000001, 0xff800000, 0x80000000};
    const float f32_want[] = {1.0f, 0x1p-149f, -INFINITY, -0.0f};
    uint8_t bytes[1 + 2 * 12];
    float got[12];

    for (int i = 0; i < 12; i++) bytes[1 + 2 * i] = (uint8_t)f16[i], bytes[2 + 2 * i] = (uint8_t)(f16[i] >> 8);
    st_to_f32(got, bytes + 1, ST_F16, 12);
    for (int i = 0; i < 12; i++) {
        CHECK(same_bits(got[i], f16_want[i]), "F16 0x%04x -> %a, expected %a", f16[i], got[i], f16_want[i]);
    }
    for (int i = 0; i < 5; i++) bytes[1 + 2 * i] = (uint8_t)bf16[i], bytes[2 + 2 * i] = (uint8_t)(bf16[i] >> 8);
    st_to_f32(got, bytes + 1, ST_BF16, 5);
    for (int i = 0; i < 5; i++) CHECK(same_bits(got[i], bf16_want[i]), "BF16 0x%04x -> %a", bf16[i], got[i]);
    for (int i = 0; i < 16; i++) bytes[1 + i] = (uint8_t)(f32[i / 4] >> (8 * (i % 4)));
    st_to_f32(got, bytes + 1, ST_F32, 4);
    for (int i = 0; i < 4; i++) CHECK(same_bits(got[i], f32_want[i]), "F32 0x%08x -> %a", f32[i], got[i]);
}

TEST(st_accepts_empty_header) {
    char *dir = make_tmpdir(), *path = write_header_file(dir, "empty.safetensors", "{}", 0);
    StCheckpoint ckpt;
    Err err = {{0}};
    CHECK(st_open(&ckpt, path, &err) == 0 && ckpt.n_tensors == 0, "st_open: %s", err.msg);
    st_close(&ckpt);
    free(path);
    remove_tmpdir(dir);
}

// ---------------------------------------------------------------------------------------------------------------
// One test per rejection rule

TEST(st_rejects_missing_path) {
    char *dir = make_tmpdir(), *path;
    if (asprintf(&path, "%s/nothing.safetensors", dir) < 0) abort();
    CHECK_REJECTED(path, "cannot open");
    free(path);
    remove_tmpdir(dir);
}

TEST(st_rejects_folder_without_checkpoint) {
    char *dir = make_tmpdir();
    CHECK_REJECTED(dir, "model.safetensors", "model.safetensors.index.json");
    remove_tmpdir(dir);
}

TEST(st_rejects_file_shorter_than_8_bytes) {
    char *dir = make_tmpdir(), *path = write_file(dir, "short.safetensors", "\x02\0\0\0\0", 5);
    CHECK_REJECTED(path, "5 bytes", "at least 8");
    free(path);
    remove_tmpdir(dir);
}

TEST(st_rejects_header_over_100mb) {
    char *dir = make_tmpdir(), *path = write_raw(dir, "big.safetensors", 200000000, "{}", 2, NULL, 0);
    CHECK_REJECTED(path, "not a safetensors file: its first 8 bytes give a header length of 200000000 bytes",
                   "100000000");
    free(path);
    remove_tmpdir(dir);
}

TEST(st_rejects_header_beyond_file) {
    char *dir = make_tmpdir(), *path = write_raw(dir, "cut.safetensors", 100, "{}    ", 6, NULL, 0);
    CHECK_REJECTED(path, "header length 100", "file is 14 bytes");
    free(path);
    remove_tmpdir(dir);
}

TEST(st_rejects_invalid_utf8) {
    CHECK_HEADER_REJECTED("{'a\xff': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1]}}", 1, "UTF-8", "0xff");
}

TEST(st_rejects_invalid_json) { CHECK_HEADER_REJECTED("{'a': {'dtype': ", 0, "not valid JSON"); }

TEST(st_rejects_json_not_object) { CHECK_HEADER_REJECTED("[1, 2]", 0, "expected a JSON object", "[1,2]"); }

TEST(st_rejects_duplicate_key) {
    CHECK_HEADER_REJECTED("{'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1]}, "
                          "'a': {'dtype': 'U8', 'shape': [1], 'data_offsets': [1, 2]}}", 2, "duplicate", "\"a\"");
}

TEST(st_rejects_entry_not_object) { CHECK_HEADER_REJECTED("{'x': [0, 4]}", 4, "tensor \"x\"", "expected an object"); }

TEST(st_rejects_unknown_field) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'U8', 'shape': [1], 'data_offsets': [0, 1], 'strides': [1]}}", 1,
                          "tensor \"x\"", "unknown field \"strides\"");
}

TEST(st_rejects_missing_field) {
    CHECK_HEADER_REJECTED("{'x': {'shape': [1], 'data_offsets': [0, 1]}}", 1, "tensor \"x\"",
                          "missing field \"dtype\"");
}

TEST(st_rejects_unknown_dtype) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F17', 'shape': [1], 'data_offsets': [0, 4]}}", 4, "tensor \"x\"",
                          "\"F17\"", "BF16");
}

TEST(st_rejects_negative_dimension) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [2, -1], 'data_offsets': [0, 8]}}", 8, "tensor \"x\"",
                          "\"shape\"", "element 1 is -1");
}

TEST(st_rejects_non_integer_dimension) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [2.5], 'data_offsets': [0, 8]}}", 8, "tensor \"x\"",
                          "\"shape\"", "element 0 is 2.5");
}

TEST(st_rejects_too_many_dimensions) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'U8', 'shape': [1,1,1,1,1,1,1,1,1], 'data_offsets': [0, 1]}}", 1,
                          "tensor \"x\"", "\"shape\"", "at most 8");
}

TEST(st_rejects_negative_offset) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'U8', 'shape': [4], 'data_offsets': [-4, 0]}}", 4, "tensor \"x\"",
                          "\"data_offsets\"", "-4");
}

TEST(st_rejects_offsets_not_a_pair) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'U8', 'shape': [4], 'data_offsets': [4]}}", 4, "tensor \"x\"",
                          "[begin, end]");
}

TEST(st_rejects_begin_after_end) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'U8', 'shape': [0], 'data_offsets': [8, 4]}}", 8, "tensor \"x\"",
                          "[8, 4]", "begin > end");
}

TEST(st_rejects_gap_at_start) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [1], 'data_offsets': [4, 8]}}", 8, "tensor \"x\"",
                          "gap of 4 bytes", "start");
}

TEST(st_rejects_gap_between_tensors) {
    CHECK_HEADER_REJECTED("{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}, "
                          "'b': {'dtype': 'F32', 'shape': [1], 'data_offsets': [12, 16]}}", 16, "tensor \"b\"",
                          "gap of 4 bytes", "\"a\" [0, 8]");
}

TEST(st_rejects_overlap) {
    CHECK_HEADER_REJECTED("{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}, "
                          "'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}", 12, "tensor \"b\"",
                          "overlap", "\"a\" [0, 8]");
}

TEST(st_rejects_wrong_byte_count) {
    CHECK_HEADER_REJECTED("{'h.0.attn.c_attn.weight': {'dtype': 'F32', 'shape': [3, 32], 'data_offsets': [0, 96]}}",
                          96, "tensor \"h.0.attn.c_attn.weight\"", "span 96 bytes", "3×32×4 = 384 bytes (F32)");
}

TEST(st_rejects_size_overflow) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [4611686018427387904, 2], 'data_offsets': [0, 8]}}", 8,
                          "tensor \"x\"", "overflows");
}

TEST(st_rejects_trailing_bytes) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}", 12, "4 trailing bytes",
                          "\"x\"");
}

TEST(st_rejects_data_beyond_eof) {
    CHECK_HEADER_REJECTED("{'x': {'dtype': 'F32', 'shape': [4], 'data_offsets': [0, 16]}}", 8, "tensor \"x\"",
                          "beyond the data area of 8 bytes");
}

TEST(st_rejects_metadata_not_object) {
    CHECK_HEADER_REJECTED("{'__metadata__': 'pt'}", 0, "\"__metadata__\"", "object of strings");
}

TEST(st_rejects_metadata_non_string_value) {
    CHECK_HEADER_REJECTED("{'__metadata__': {'format': 'pt', 'step': 3}}", 0, "\"__metadata__\"", "\"step\"",
                          "got 3");
}

// ---------------------------------------------------------------------------------------------------------------
// Sharded checkpoints: a folder with model.safetensors.index.json

static const Spec SHARD1[] = {{"a", ST_F32, 1, {2}}, {"b", ST_F16, 2, {2, 3}}};
static const Spec SHARD2[] = {{"c", ST_BF16, 1, {5}}};
static const char SHARD1_NAME[] = "model-00001-of-00002.safetensors";
static const char SHARD2_NAME[] = "model-00002-of-00002.safetensors";

// A folder with shards SHARD1 and SHARD2 (plus `extra2`, header text for SHARD2, may be NULL) and an index whose
// weight_map is `weight_map` (single quotes for double; 1 and 2 stand for the two shard names).
static char *make_sharded(const char *weight_map, const char *extra2) {
    char *dir = make_tmpdir();
    free(write_spec_file(dir, SHARD1_NAME, SHARD1, 2, NULL, 0, NULL));
    free(write_spec_file(dir, SHARD2_NAME, SHARD2, 1, extra2, 3, NULL));
    char *index = NULL;
    size_t len;
    FILE *f = open_memstream(&index, &len);
    fputs("{\"metadata\": {\"total_size\": 22}, \"weight_map\": ", f);
    for (const char *c = weight_map; *c; c++) {
        if (*c == '1' || *c == '2') fputs(*c == '1' ? SHARD1_NAME : SHARD2_NAME, f);
        else fputc(*c == '\'' ? '"' : *c, f);
    }
    fputc('}', f);
    fclose(f);
    free(write_file(dir, "model.safetensors.index.json", index, len));
    free(index);
    return dir;
}

TEST(st_sharded_ok) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': '2'}", NULL), *index;
    if (asprintf(&index, "%s/model.safetensors.index.json", dir) < 0) abort();
    for (int pass = 0; pass < 2; pass++) {  // the folder, then the index file itself
        StCheckpoint ckpt;
        Err err = {{0}};
        CHECK(st_open(&ckpt, pass ? index : dir, &err) == 0, "st_open: %s", err.msg);
        CHECK(ckpt.n_files == 2 && ckpt.n_tensors == 3, "%d files, %d tensors", ckpt.n_files, ckpt.n_tensors);
        const StTensor *b = st_find(&ckpt, "b"), *c = st_find(&ckpt, "c");
        CHECK(b && strstr(b->file, SHARD1_NAME) && b->n_bytes == 12, "tensor b");
        CHECK(c && strstr(c->file, SHARD2_NAME) && c->n_bytes == 10, "tensor c");
        CHECK(ckpt.index_path && strstr(ckpt.index_path, "model.safetensors.index.json"), "index_path");
        st_close(&ckpt);
    }
    free(index);
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_missing_shard_file) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': 'model-00003-of-00003.safetensors'}", NULL);
    CHECK_REJECTED(dir, "model-00003-of-00003.safetensors", "cannot open");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_tensor_absent_from_its_shard) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': '2', 'd': '2'}", NULL);
    CHECK_REJECTED(dir, "tensor \"d\"", SHARD2_NAME, "does not hold it");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_tensor_in_another_shard) {
    char *dir = make_sharded("{'a': '1', 'b': '2', 'c': '2'}", NULL);
    CHECK_REJECTED(dir, "tensor \"b\"", "but it is in", SHARD1_NAME);
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_tensor_in_two_shards) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': '2'}",
                             "\"a\": {\"dtype\": \"U8\", \"shape\": [0], \"data_offsets\": [10, 10]}");
    CHECK_REJECTED(dir, "tensor \"a\"", SHARD1_NAME, SHARD2_NAME, "one shard only");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_unlisted_tensor) {
    char *dir = make_sharded("{'a': '1', 'c': '2'}", NULL);
    CHECK_REJECTED(dir, "tensor \"b\"", "not listed in the weight_map");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_shard_outside_folder) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': '../2'}", NULL);
    CHECK_REJECTED(dir, "weight_map[\"c\"]", "no '/'");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_bad_weight_map) {
    char *dir = make_sharded("['a', 'b']", NULL);
    CHECK_REJECTED(dir, "model.safetensors.index.json", "\"weight_map\"");
    remove_tmpdir(dir);
}

TEST(st_sharded_rejects_invalid_index_json) {
    char *dir = make_sharded("{'a': '1',", NULL);
    CHECK_REJECTED(dir, "model.safetensors.index.json", "not a valid index");
    remove_tmpdir(dir);
}

// ---------------------------------------------------------------------------------------------------------------
// The CLI: `specdec inspect PATH`

// Runs `specdec inspect path` and returns its exit status; *out and *err receive stdout and stderr (malloc'd).
static int run_inspect(const char *path, char **out, char **err) {
    char *command;
    if (asprintf(&command, "%s inspect '%s'", specdec_bin(), path) < 0) abort();
    int status = run_command(command, out, err);
    free(command);
    return status;
}

TEST(st_cli_inspect_prints_tensors) {
    char *dir = make_sharded("{'a': '1', 'b': '1', 'c': '2'}", NULL), *out, *err;
    int status = run_inspect(dir, &out, &err);
    CHECK(status == 0, "exit status %d, stderr: %s", status, err);
    CHECK(out && strstr(out, SHARD2_NAME) && strstr(out, "[2, 3]") && strstr(out, "BF16"), "stdout: %s", out);
    free(out);
    free(err);
    remove_tmpdir(dir);
}

TEST(st_cli_inspect_rejects_bad_file) {
    char *dir = make_tmpdir(), *out, *err;
    char *path = write_header_file(dir, "bad.safetensors", "{'x': {'dtype': 'F32', 'shape': [2], "
                                   "'data_offsets': [0, 8]}}", 12);
    int status = run_inspect(path, &out, &err);
    CHECK(status == 2, "exit status %d, expected 2", status);
    CHECK(err && strstr(err, path) && strstr(err, "trailing bytes"), "stderr: %s", err);
    CHECK(err && strchr(err, '\n') == err + strlen(err) - 1, "stderr is not one line: %s", err);
    CHECK(out && !*out, "stdout not empty: %s", out);
    free(out);
    free(err);
    free(path);
    remove_tmpdir(dir);
}

TEST(st_cli_inspect_rejects_missing_path) {
    char *out, *err;
    int status = run_inspect("/nonexistent/specdec/model.safetensors", &out, &err);
    CHECK(status == 2, "exit status %d, expected 2", status);
    CHECK(err && strstr(err, "/nonexistent/specdec/model.safetensors"), "stderr: %s", err);
    free(out);
    free(err);
}

// st_release drops a tensor's pages from memory, never its data: a later read sees the same bytes, and its
// neighbours (sharing its first and last pages) are untouched.
TEST(st_release_keeps_the_data) {
    const Spec specs[] = {{"a", ST_F32, 1, {3}}, {"big", ST_F32, 1, {5000}}, {"c", ST_BF16, 1, {7}}};
    uint8_t data[12 + 20000 + 14];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)test_rand_u64();
    char *dir = make_tmpdir();
    char *path = write_spec_file(dir, "model.safetensors", specs, 3, NULL, 3, data);
    StCheckpoint ckpt;
    Err err = {{0}};
    CHECK(st_open(&ckpt, dir, &err) == 0, "st_open: %s", err.msg);
    for (int i = 0; i < 3 && !test_failures(); i++) {
        const StTensor *t = st_find(&ckpt, specs[i].name);
        CHECK(memcmp(t->data, data + spec_offset(specs, i), t->n_bytes) == 0, "%s: data differs", t->name);
        st_release(t);
        for (int j = 0; j < 3; j++) {
            const StTensor *u = st_find(&ckpt, specs[j].name);
            CHECK(memcmp(u->data, data + spec_offset(specs, j), u->n_bytes) == 0, "%s after releasing %s: differs",
                  u->name, t->name);
        }
    }
    st_close(&ckpt);
    free(path);
    remove_tmpdir(dir);
}
