// safetensors.c — memory-map and strictly validate .safetensors checkpoints (see safetensors.h).
//
// The checks follow the reference implementation (huggingface/safetensors, `SafeTensors::read_metadata`):
//   1. the file holds the 8-byte header length N, N ≤ 100,000,000 and 8 + N ≤ file size;
//   2. the header is UTF-8 and a JSON object without duplicate keys;
//   3. each entry but "__metadata__" is {"dtype", "shape", "data_offsets"} and nothing else, with a known dtype,
//      at most ST_MAX_DIMS non-negative dimensions and offsets [begin, end] with begin ≤ end;
//   4. end − begin == (product of shape) × dtype size, computed without overflow;
//   5. sorted by offset, the tensors tile the data area exactly: from 0, no gap, no overlap, up to the end of the
//      file. Only then is any data pointer formed, so every tensor lies inside the mapping.
#include "checkpoint/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels.h"
#include "qk.h"
#include "base/utf8.h"

enum { MAX_HEADER_BYTES = 100000000 };  // the reference implementation's limit

static const char INDEX_NAME[] = "model.safetensors.index.json";
static const char SINGLE_NAME[] = "model.safetensors";

struct StFile {
    char *path;
    const uint8_t *map;  // the whole file, read-only
    size_t size;         // bytes in the file
    size_t header_len;   // N; the data area starts at byte 8 + N
    json_t *header;      // the parsed header; owns the tensor names and the metadata strings
    int n_tensors;
};

// One header entry while its file is validated: the tensor and where its bytes lie in the data area.
typedef struct {
    StTensor t;
    unsigned long long begin, end;  // data_offsets
} Entry;

static const struct {
    const char *name;
    size_t size;
} DTYPES[] = {
    [ST_BOOL] = {"BOOL", 1},       [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},
    [ST_F8_E5M2] = {"F8_E5M2", 1}, [ST_F8_E4M3] = {"F8_E4M3", 1},
    [ST_I16] = {"I16", 2},         [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2},
    [ST_I32] = {"I32", 4},         [ST_U32] = {"U32", 4},   [ST_F32] = {"F32", 4},
    [ST_F64] = {"F64", 8},         [ST_I64] = {"I64", 8},   [ST_U64] = {"U64", 8},
};
enum { N_DTYPES = sizeof DTYPES / sizeof DTYPES[0] };

const char *st_dtype_name(StDtype dtype) { return (unsigned)dtype < N_DTYPES ? DTYPES[dtype].name : "?"; }

size_t st_dtype_size(StDtype dtype) { return (unsigned)dtype < N_DTYPES ? DTYPES[dtype].size : 0; }

// ---------------------------------------------------------------------------------------------------------------
// Error wording

const char *st_json_brief(char *buf, size_t size, const json_t *value) {
    char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(10));
    const char *shown = text ? text : "(unprintable)";
    if (strlen(shown) < size) {
        snprintf(buf, size, "%s", shown);
    } else {
        snprintf(buf, size, "%.*s...", (int)size - 4, shown);
    }
    free(text);
    return buf;
}

// err_fmt for a message about one tensor: `PATH: tensor "NAME": ...`. Returns -1.
__attribute__((format(printf, 4, 5)))
static int tensor_err(Err *err, const char *path, const char *name, const char *fmt, ...) {
    char detail[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    char q[ERR_QUOTE_LEN + 4];
    return err_fmt(err, "%s: tensor \"%s\": %s", path, err_quote(q, name), detail);
}

// Writes the dimensions joined by `sep` into buf ("768, 2304" or "3×8"); a scalar gives `scalar`. Returns buf.
static const char *format_dims(char *buf, size_t size, const int64_t *shape, int ndim, const char *sep,
                               const char *scalar) {
    size_t len = (size_t)snprintf(buf, size, "%s", ndim == 0 ? scalar : "");
    for (int i = 0; i < ndim && len < size; i++) {
        len += (size_t)snprintf(buf + len, size - len, "%s%lld", i ? sep : "", (long long)shape[i]);
    }
    return buf;
}

// ---------------------------------------------------------------------------------------------------------------
// One header entry

// Reads field `field` of a tensor entry, a JSON array of at most max_n non-negative integers, into out[0..*n).
static int read_uint_array(unsigned long long *out, int *n, int max_n, const json_t *array, const char *path,
                           const char *name, const char *field, Err *err) {
    char got[64];
    if (!json_is_array(array)) {
        return tensor_err(err, path, name, "field \"%s\": expected an array of non-negative integers, got %s",
                          field, st_json_brief(got, sizeof got, array));
    }
    if (json_array_size(array) > (size_t)max_n) {
        return tensor_err(err, path, name, "field \"%s\": %zu elements, at most %d supported", field,
                          json_array_size(array), max_n);
    }
    *n = (int)json_array_size(array);
    for (int i = 0; i < *n; i++) {
        const json_t *v = json_array_get(array, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            return tensor_err(err, path, name, "field \"%s\": element %d is %s, expected a non-negative integer",
                              field, i, st_json_brief(got, sizeof got, v));
        }
        out[i] = (unsigned long long)json_integer_value(v);
    }
    return 0;
}

// Checks the entry's dtype field, a dtype name, and stores it in e->t.dtype.
static int parse_dtype(Entry *e, const json_t *value, const char *path, Err *err) {
    for (int d = 0; d < N_DTYPES; d++) {
        if (json_is_string(value) && strcmp(json_string_value(value), DTYPES[d].name) == 0) {
            e->t.dtype = (StDtype)d;
            return 0;
        }
    }
    char known[160] = "", got[64];
    for (int d = 0; d < N_DTYPES; d++) strcat(strcat(known, d ? " " : ""), DTYPES[d].name);
    return tensor_err(err, path, e->t.name, "field \"dtype\": %s is not a dtype (expected one of %s)",
                      st_json_brief(got, sizeof got, value), known);
}

// Checks that the entry's byte range holds exactly (product of shape) × (dtype size) bytes, and sets
// e->t.n_elements and e->t.n_bytes.
static int check_span(Entry *e, const char *path, Err *err) {
    StTensor *t = &e->t;
    unsigned long long count = 1, bytes;
    bool overflow = false;
    for (int i = 0; i < t->ndim; i++) {
        overflow |= __builtin_mul_overflow(count, (unsigned long long)t->shape[i], &count);
    }
    overflow |= __builtin_mul_overflow(count, (unsigned long long)st_dtype_size(t->dtype), &bytes);
    char dims[256];
    format_dims(dims, sizeof dims, t->shape, t->ndim, "×", "1");
    if (overflow) {
        return tensor_err(err, path, t->name, "shape %s × %zu bytes (%s) overflows 64 bits", dims,
                          st_dtype_size(t->dtype), st_dtype_name(t->dtype));
    }
    if (e->end - e->begin != bytes) {
        return tensor_err(err, path, t->name, "data_offsets [%llu, %llu] span %llu bytes, expected %s×%zu = %llu "
                          "bytes (%s)", e->begin, e->end, e->end - e->begin, dims, st_dtype_size(t->dtype),
                          bytes, st_dtype_name(t->dtype));
    }
    t->n_elements = (int64_t)count;  // fits: count ≤ bytes = end − begin ≤ LLONG_MAX
    t->n_bytes = (size_t)bytes;
    return 0;
}

// Validates one tensor entry `name: value` of a header (rules 3 and 4) into *e.
static int parse_entry(Entry *e, const char *name, json_t *value, const char *path, Err *err) {
    static const char *const FIELDS[] = {"dtype", "shape", "data_offsets"};
    char got[64];
    memset(e, 0, sizeof *e);
    e->t.name = name;
    if (!json_is_object(value)) {
        return tensor_err(err, path, name, "expected an object {\"dtype\", \"shape\", \"data_offsets\"}, got %s",
                          st_json_brief(got, sizeof got, value));
    }
    const char *key;
    json_t *field;
    json_object_foreach(value, key, field) {
        if (strcmp(key, FIELDS[0]) && strcmp(key, FIELDS[1]) && strcmp(key, FIELDS[2])) {
            return tensor_err(err, path, name, "unknown field \"%s\" (expected only dtype, shape, data_offsets)",
                              key);
        }
    }
    for (int i = 0; i < 3; i++) {
        if (!json_object_get(value, FIELDS[i])) return tensor_err(err, path, name, "missing field \"%s\"", FIELDS[i]);
    }
    if (parse_dtype(e, json_object_get(value, "dtype"), path, err)) return -1;

    unsigned long long dims[ST_MAX_DIMS], offsets[2];
    if (read_uint_array(dims, &e->t.ndim, ST_MAX_DIMS, json_object_get(value, "shape"), path, name, "shape", err)) {
        return -1;
    }
    for (int i = 0; i < e->t.ndim; i++) e->t.shape[i] = (int64_t)dims[i];

    int n_offsets;
    const json_t *offsets_json = json_object_get(value, "data_offsets");
    if (read_uint_array(offsets, &n_offsets, 2, offsets_json, path, name, "data_offsets", err)) return -1;
    if (n_offsets != 2) {
        return tensor_err(err, path, name, "field \"data_offsets\": expected [begin, end], got %s",
                          st_json_brief(got, sizeof got, offsets_json));
    }
    e->begin = offsets[0], e->end = offsets[1];
    if (e->begin > e->end) {
        return tensor_err(err, path, name, "data_offsets [%llu, %llu]: begin > end", e->begin, e->end);
    }
    return check_span(e, path, err);
}

// Checks "__metadata__": an object of string values.
static int check_metadata(json_t *metadata, const char *path, Err *err) {
    char got[64];
    if (!json_is_object(metadata)) {
        return err_fmt(err, "%s: \"__metadata__\": expected an object of strings, got %s", path,
                       st_json_brief(got, sizeof got, metadata));
    }
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value) {
        if (!json_is_string(value)) {
            return err_fmt(err, "%s: \"__metadata__\" key \"%s\": expected a string value, got %s", path, key,
                           st_json_brief(got, sizeof got, value));
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// One file

static int by_offsets(const void *a, const void *b) {
    const Entry *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

// Rule 5: sorted by offset, the entries cover [0, data_size) exactly once. Sorts entries by offset.
static int check_layout(Entry *entries, int n, const StFile *f, Err *err) {
    qsort(entries, (size_t)n, sizeof *entries, by_offsets);
    unsigned long long data_size = f->size - 8 - f->header_len, expected = 0;
    char q[ERR_QUOTE_LEN + 4];
    for (int i = 0; i < n; i++) {
        const Entry *e = &entries[i], *prev = i > 0 ? &entries[i - 1] : NULL;
        if (i == 0 && e->begin != 0) {
            return tensor_err(err, f->path, e->t.name, "data_offsets [%llu, %llu] leave a gap of %llu bytes at the "
                              "start of the data area (the first tensor must begin at 0)", e->begin, e->end,
                              e->begin);
        }
        if (e->begin > expected) {
            return tensor_err(err, f->path, e->t.name, "data_offsets [%llu, %llu] leave a gap of %llu bytes after "
                              "tensor \"%s\" [%llu, %llu]", e->begin, e->end, e->begin - expected, err_quote(q, prev->t.name),
                              prev->begin, prev->end);
        }
        if (e->begin < expected) {
            return tensor_err(err, f->path, e->t.name, "data_offsets [%llu, %llu] overlap tensor \"%s\" [%llu, %llu]",
                              e->begin, e->end, err_quote(q, prev->t.name), prev->begin, prev->end);
        }
        expected = e->end;
    }
    const char *last = n > 0 ? entries[n - 1].t.name : "(none)";
    if (expected > data_size) {
        return tensor_err(err, f->path, last, "ends at data offset %llu, beyond the data area of %llu bytes "
                          "(file %zu bytes − 8 − header %zu); is the file truncated?", expected, data_size,
                          f->size, f->header_len);
    }
    if (expected < data_size) {
        return err_fmt(err, "%s: %llu trailing bytes: the tensors end at data offset %llu (last tensor \"%s\") but "
                       "the data area is %llu bytes (file %zu bytes − 8 − header %zu)", f->path,
                       data_size - expected, expected, last, data_size, f->size, f->header_len);
    }
    return 0;
}

// Maps f->path read-only and checks rule 1.
static int map_file(StFile *f, Err *err) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_fmt(err, "%s: cannot open: %s", f->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return err_fmt(err, "%s: not a regular file", f->path);
    }
    f->size = (size_t)st.st_size;
    if (f->size < 8) {
        close(fd);
        return err_fmt(err, "%s: file is %zu bytes, expected at least 8 (the header length)", f->path, f->size);
    }
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return err_fmt(err, "%s: cannot map: %s", f->path, strerror(errno));
    f->map = map;
    if (memcmp(f->map, "GGUF", 4) == 0)  // its magic: a first header length of 0x....46554747 would be refused anyway
        return err_fmt(err, "%s: a GGUF file (llama.cpp's format): specdec reads safetensors checkpoints (a Hugging "
                       "Face folder: config.json + model.safetensors)", f->path);

    unsigned long long n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | f->map[i];  // little-endian u64
    if (n > MAX_HEADER_BYTES) {
        return err_fmt(err, "%s: not a safetensors file: its first 8 bytes give a header length of %llu bytes, more "
                       "than the limit of %d", f->path, n, MAX_HEADER_BYTES);
    }
    if (8 + n > f->size) {
        return err_fmt(err, "%s: header length %llu needs 8 + %llu = %llu bytes, but the file is %zu bytes", f->path,
                       n, n, 8 + n, f->size);
    }
    f->header_len = (size_t)n;
    return 0;
}

// Appends the n validated entries of file f to ckpt->tensors, pointing into f's data area.
static int add_tensors(StCheckpoint *ckpt, StFile *f, const Entry *entries, int n, Err *err) {
    if (n == 0) return 0;
    StTensor *grown = realloc(ckpt->tensors, (size_t)(ckpt->n_tensors + n) * sizeof *grown);
    if (!grown) return err_fmt(err, "%s: out of memory", f->path);
    ckpt->tensors = grown;
    const uint8_t *data_area = f->map + 8 + f->header_len;
    for (int i = 0; i < n; i++) {
        StTensor t = entries[i].t;
        t.file = f->path;
        t.data = data_area + entries[i].begin;
        ckpt->tensors[ckpt->n_tensors++] = t;
    }
    f->n_tensors = n;
    return 0;
}

// Parses and checks the header of a mapped file (rules 2 to 5), then appends its tensors to ckpt (unsorted).
static int read_header(StCheckpoint *ckpt, StFile *f, Err *err) {
    const uint8_t *text = f->map + 8;
    size_t bad = utf8_invalid_offset((const char *)text, f->header_len);
    if (bad < f->header_len) {
        return err_fmt(err, "%s: header is not valid UTF-8 (byte 0x%02x at header offset %zu)", f->path, text[bad],
                       bad);
    }
    json_error_t jerr;
    f->header = json_loadb((const char *)text, f->header_len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!f->header) {
        return err_fmt(err, "%s: header is not valid JSON: %s (header line %d, column %d)", f->path, jerr.text,
                       jerr.line, jerr.column);
    }
    char got[64];
    if (!json_is_object(f->header)) {
        return err_fmt(err, "%s: header is %s, expected a JSON object", f->path,
                       st_json_brief(got, sizeof got, f->header));
    }

    Entry *entries = malloc((json_object_size(f->header) + 1) * sizeof *entries);
    if (!entries) return err_fmt(err, "%s: out of memory", f->path);
    int n = 0, rc = 0;
    const char *key;
    json_t *value;
    json_object_foreach(f->header, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            rc = check_metadata(value, f->path, err);
        } else {
            rc = parse_entry(&entries[n++], key, value, f->path, err);
        }
        if (rc) break;
    }
    if (rc == 0) rc = check_layout(entries, n, f, err);
    if (rc == 0) rc = add_tensors(ckpt, f, entries, n, err);
    free(entries);
    return rc;
}

// Opens, maps and validates the .safetensors file at `path`, adding it to ckpt->files and its tensors to
// ckpt->tensors (unsorted; see sort_tensors).
static int open_file(StCheckpoint *ckpt, const char *path, Err *err) {
    StFile **files = realloc(ckpt->files, (size_t)(ckpt->n_files + 1) * sizeof *files);
    StFile *f = calloc(1, sizeof *f);
    if (files) ckpt->files = files;
    if (!files || !f || !(f->path = strdup(path))) {
        free(f);
        return err_fmt(err, "%s: out of memory", path);
    }
    ckpt->files[ckpt->n_files++] = f;
    return map_file(f, err) || read_header(ckpt, f, err) ? -1 : 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The checkpoint

static int by_name(const void *a, const void *b) {
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

// Sorts the tensors by name for st_find and checks that no name appears twice (in two shards).
static int sort_tensors(StCheckpoint *ckpt, Err *err) {
    if (ckpt->n_tensors > 0) qsort(ckpt->tensors, (size_t)ckpt->n_tensors, sizeof *ckpt->tensors, by_name);
    for (int i = 1; i < ckpt->n_tensors; i++) {
        const StTensor *a = &ckpt->tensors[i - 1], *b = &ckpt->tensors[i];
        if (strcmp(a->name, b->name) == 0) {
            return tensor_err(err, a->file, a->name, "also in shard %s; a tensor must be in one shard only",
                              b->file);
        }
    }
    return 0;
}

// "dir/name" in a new string (dir's trailing '/' not doubled), or NULL when out of memory.
static char *path_join(const char *dir, const char *name) {
    size_t len = strlen(dir);
    char *path = malloc(len + strlen(name) + 2);
    if (path) sprintf(path, "%s%s%s", dir, len > 0 && dir[len - 1] == '/' ? "" : "/", name);
    return path;
}

// Index of shard file name `shard` in names[0..n), or -1.
static int find_shard(const char *const *names, int n, const char *shard) {
    for (int i = 0; i < n; i++) {
        if (strcmp(names[i], shard) == 0) return i;
    }
    return -1;
}

static int compare_names(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Checks the weight_map of an index (an object of plain shard file names) and collects its distinct shards,
// sorted by name (model-00001-of-00009 first, as inspect lists them), into *shards (malloc'd; the strings belong to
// weight_map).
static int list_shards(const char ***shards, int *n_shards, json_t *weight_map, const char *index, Err *err) {
    char got[64], q[ERR_QUOTE_LEN + 4];
    if (!json_is_object(weight_map) || json_object_size(weight_map) == 0) {
        return err_fmt(err, "%s: field \"weight_map\": expected a non-empty object {\"tensor name\": \"shard file\"}, "
                       "got %s", index, weight_map ? st_json_brief(got, sizeof got, weight_map) : "nothing");
    }
    *shards = malloc(json_object_size(weight_map) * sizeof **shards);
    if (!*shards) return err_fmt(err, "%s: out of memory", index);
    const char *name;
    json_t *shard;
    json_object_foreach(weight_map, name, shard) {
        const char *file = json_string_value(shard);
        if (!file || !*file || strchr(file, '/') || strstr(file, "..")) {
            return err_fmt(err, "%s: weight_map[\"%s\"]: expected a file name in the index's folder (no '/' or "
                           "\"..\"), got %s", index, err_quote(q, name), st_json_brief(got, sizeof got, shard));
        }
        if (find_shard(*shards, *n_shards, file) < 0) (*shards)[(*n_shards)++] = file;
    }
    qsort(*shards, (size_t)*n_shards, sizeof **shards, compare_names);
    return 0;
}

// Opens the shards of the index at `index` (in folder `dir`) and checks that they agree with its weight_map.
static int open_shards(StCheckpoint *ckpt, json_t *weight_map, const char *index, const char *dir, Err *err) {
    const char **shards = NULL;
    int n_shards = 0, rc = list_shards(&shards, &n_shards, weight_map, index, err);
    for (int i = 0; rc == 0 && i < n_shards; i++) {
        char *path = path_join(dir, shards[i]);
        rc = path ? open_file(ckpt, path, err) : err_fmt(err, "%s: out of memory", index);
        free(path);
    }
    if (rc == 0) rc = sort_tensors(ckpt, err);

    char q[ERR_QUOTE_LEN + 4];
    const char *name;
    json_t *shard;
    json_object_foreach(weight_map, name, shard) {
        if (rc) break;
        const StTensor *t = st_find(ckpt, name);
        const char *want = ckpt->files[find_shard(shards, n_shards, json_string_value(shard))]->path;
        if (!t) {
            rc = err_fmt(err, "%s: weight_map puts tensor \"%s\" in %s, which does not hold it", index,
                         err_quote(q, name), want);
        } else if (t->file != want) {
            rc = err_fmt(err, "%s: weight_map puts tensor \"%s\" in %s, but it is in %s", index, err_quote(q, name), want,
                         t->file);
        }
    }
    for (int i = 0; rc == 0 && i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        if (!json_object_get(weight_map, t->name)) {
            rc = tensor_err(err, t->file, t->name, "not listed in the weight_map of %s", index);
        }
    }
    free(shards);
    return rc;
}

// Opens a sharded checkpoint from its index file, in folder `dir`.
static int open_index(StCheckpoint *ckpt, const char *index, const char *dir, Err *err) {
    if (!(ckpt->index_path = strdup(index))) return err_fmt(err, "%s: out of memory", index);
    json_error_t jerr;
    json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root) return err_fmt(err, "%s: not a valid index: %s (line %d, column %d)", index, jerr.text, jerr.line,
                              jerr.column);
    char got[64];
    const json_t *metadata = json_object_get(root, "metadata");
    int rc = 0;
    if (!json_is_object(root)) {
        rc = err_fmt(err, "%s: expected a JSON object {\"metadata\": {...}, \"weight_map\": {...}}, got %s", index,
                     st_json_brief(got, sizeof got, root));
    } else if (metadata && !json_is_object(metadata)) {
        rc = err_fmt(err, "%s: field \"metadata\": expected an object, got %s", index,
                     st_json_brief(got, sizeof got, metadata));
    } else {
        rc = open_shards(ckpt, json_object_get(root, "weight_map"), index, dir, err);
    }
    json_decref(root);
    return rc;
}

// Opens the checkpoint in folder `dir`: model.safetensors, else model.safetensors.index.json and its shards.
static int open_folder(StCheckpoint *ckpt, const char *dir, Err *err) {
    char *single = path_join(dir, SINGLE_NAME), *index = path_join(dir, INDEX_NAME);
    struct stat st;
    int rc;
    if (!single || !index) {
        rc = err_fmt(err, "%s: out of memory", dir);
    } else if (stat(single, &st) == 0) {
        rc = open_file(ckpt, single, err) || sort_tensors(ckpt, err) ? -1 : 0;
    } else if (stat(index, &st) == 0) {
        rc = open_index(ckpt, index, dir, err);
    } else if (errno != ENOENT) {  // a folder it may not search, say
        rc = err_fmt(err, "%s: cannot read the folder: %s", dir, strerror(errno));
    } else {
        rc = err_fmt(err, "%s: folder holds neither %s nor %s (expected a Hugging Face checkpoint folder)", dir,
                     SINGLE_NAME, INDEX_NAME);
    }
    free(single);
    free(index);
    return rc;
}

int st_open(StCheckpoint *ckpt, const char *path, Err *err) {
    memset(ckpt, 0, sizeof *ckpt);
    struct stat st;
    const char *slash = strrchr(path, '/');
    int rc;
    if (stat(path, &st) != 0) {
        rc = err_fmt(err, "%s: cannot open: %s", path, strerror(errno));
    } else if (S_ISDIR(st.st_mode)) {
        rc = open_folder(ckpt, path, err);
    } else if (strcmp(slash ? slash + 1 : path, INDEX_NAME) == 0) {
        char *dir = slash ? strndup(path, (size_t)(slash - path) + 1) : strdup(".");
        rc = dir ? open_index(ckpt, path, dir, err) : err_fmt(err, "%s: out of memory", path);
        free(dir);
    } else {
        rc = open_file(ckpt, path, err) || sort_tensors(ckpt, err) ? -1 : 0;
    }
    if (!rc && !(ckpt->fetched = calloc((size_t)ckpt->n_tensors + 1, 1))) rc = err_fmt(err, "%s: out of memory", path);
    if (rc) st_close(ckpt);
    return rc;
}

void st_close(StCheckpoint *ckpt) {
    for (int i = 0; i < ckpt->n_files; i++) {
        StFile *f = ckpt->files[i];
        if (f->map) munmap((void *)f->map, f->size);
        json_decref(f->header);
        free(f->path);
        free(f);
    }
    free(ckpt->files);
    free(ckpt->tensors);
    free(ckpt->index_path);
    free(ckpt->fetched);
    free(ckpt->names);
    memset(ckpt, 0, sizeof *ckpt);
}

void st_release(const StTensor *t) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), begin = ((uintptr_t)t->data + page - 1) / page * page,
                    end = ((uintptr_t)t->data + t->n_bytes) / page * page;  // the pages wholly inside the tensor
    if (end > begin) madvise((void *)begin, end - begin, MADV_DONTNEED);  // advice: failure changes nothing
}

const StTensor *st_find(const StCheckpoint *ckpt, const char *name) {
    int lo = 0, hi = ckpt->n_tensors;  // the answer, if any, is in [lo, hi)
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(ckpt->tensors[mid].name, name);
        if (c == 0) {
            if (ckpt->fetched) ckpt->fetched[mid] = 1;  // (st_open's own checks run before it exists)
            return &ckpt->tensors[mid];
        }
        if (c < 0) lo = mid + 1; else hi = mid;
    }
    return NULL;
}

// Tensors that exports carry and that no forward pass reads, by family (NULL: any) and name suffix.
static const struct {
    const char *family, *suffix;
} KNOWN_BUFFERS[] = {
    {"gpt2", ".attn.bias"},          // the causal mask, in older GPT-2 exports
    {"gpt2", ".attn.masked_bias"},   // the value masked scores take, likewise
    {NULL, ".rotary_emb.inv_freq"},  // rotary frequencies, which follow from config.json
};

static bool is_known_buffer(const char *name, const char *family) {
    const size_t len = strlen(name);
    for (size_t i = 0; i < sizeof KNOWN_BUFFERS / sizeof *KNOWN_BUFFERS; i++) {
        const char *suffix = KNOWN_BUFFERS[i].suffix;
        if ((!KNOWN_BUFFERS[i].family || strcmp(KNOWN_BUFFERS[i].family, family) == 0) && len > strlen(suffix) &&
            strcmp(name + len - strlen(suffix), suffix) == 0)
            return true;
    }
    return false;
}

// The layer number in a tensor name ("h.3.…", "model.layers.3.…"), or -1.
static long layer_of(const char *name) {
    for (const char *p = name; *p; p++) {
        if (p != name && p[-1] != '.') continue;  // a word's start
        const char *digits = strncmp(p, "layers.", 7) == 0 ? p + 7 : strncmp(p, "h.", 2) == 0 ? p + 2 : NULL;
        if (digits && *digits >= '0' && *digits <= '9') return strtol(digits, NULL, 10);
    }
    return -1;
}

int st_check_all_fetched(const StCheckpoint *ckpt, const char *family, int n_layer, Err *err) {
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        if ((ckpt->fetched && ckpt->fetched[i]) || is_known_buffer(t->name, family)) continue;
        const long layer = layer_of(t->name);
        char q[ERR_QUOTE_LEN + 4];
        return err_fmt(err, "%s: tensor \"%s\" is not used by a %d-layer %s: %s", t->file, err_quote(q, t->name),
                       n_layer, family,
                       layer >= n_layer ? (strcmp(family, "gpt2") == 0 ? "n_layer in config.json may be wrong"
                                                                       : "num_hidden_layers in config.json may be wrong")
                                        : "config.json may not describe this checkpoint");
    }
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// Reading data

// Little-endian loads from any address, whatever the host's byte order and alignment.
static uint16_t load_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t load_u32(const uint8_t *p) { return (uint32_t)load_u16(p) | (uint32_t)load_u16(p + 2) << 16; }

void st_to_f32(float *out, const uint8_t *data, StDtype dtype, size_t n) {
    switch (dtype) {
    case ST_F32:
        for (size_t i = 0; i < n; i++) {
            uint32_t bits = load_u32(data + 4 * i);
            memcpy(&out[i], &bits, sizeof bits);
        }
        break;
    case ST_F16:
        for (size_t i = 0; i < n; i++) out[i] = f16_to_f32(load_u16(data + 2 * i));
        break;
    case ST_BF16:
        for (size_t i = 0; i < n; i++) out[i] = bf16_to_f32(load_u16(data + 2 * i));
        break;
    default:
        abort();  // a caller that did not check the dtype
    }
}

void st_row_to_f32(float *out, const StTensor *t, int64_t j, size_t n) {
    if (t->blocks) qk_dequantize_row(out, st_row(t, j, qk_row_bytes(t->blocks, n)), t->blocks, n);
    else st_to_f32(out, st_row(t, j, n * st_dtype_size(t->dtype)), t->dtype, n);
}

// ---------------------------------------------------------------------------------------------------------------
// Printing

static void print_file(FILE *out, const StFile *f) {
    size_t data_offset = 8 + f->header_len;
    char path[512];
    fprintf(out, "%s\n", err_escape(path, sizeof path, f->path));
    fprintf(out, "  file size    %zu bytes\n", f->size);
    fprintf(out, "  header       %zu bytes\n", f->header_len);
    fprintf(out, "  data offset  %zu%s\n", data_offset,
            data_offset % 8 ? " (not 8-byte aligned: tensors are read with memcpy or copied)" : "");
    fprintf(out, "  tensors      %d\n", f->n_tensors);
    json_t *metadata = json_object_get(f->header, "__metadata__");
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value) {
        char k[256], v[512];  // escaped (error.h), as everything printed from a header
        const char *text = json_string_value(value);
        fprintf(out, "  metadata     %s = %s\n", err_escape(k, sizeof k, key), err_escape(v, sizeof v, text ? text : ""));
    }
}

void st_print(FILE *out, const StCheckpoint *ckpt) {
    if (ckpt->index_path) fprintf(out, "%s: %d shards\n", ckpt->index_path, ckpt->n_files);
    for (int i = 0; i < ckpt->n_files; i++) print_file(out, ckpt->files[i]);

    char shape[256], bytes[32];
    int name_w = 4, shape_w = 5, bytes_w = 5;
    size_t total = 0;
    char name[512];  // a tensor's name, escaped (error.h): the header may hold any bytes
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        int w = (int)strlen(err_escape(name, sizeof name, t->name));
        name_w = w > name_w ? w : name_w;
        w = (int)strlen(format_dims(shape, sizeof shape, t->shape, t->ndim, ", ", "")) + 2;
        shape_w = w > shape_w ? w : shape_w;
        w = snprintf(bytes, sizeof bytes, "%zu", t->n_bytes);
        bytes_w = w > bytes_w ? w : bytes_w;
        total += t->n_bytes;
    }
    fprintf(out, "\n%-*s  %-7s  %-*s  %*s\n", name_w, "name", "dtype", shape_w, "shape", bytes_w, "bytes");
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        char bracketed[260];
        snprintf(bracketed, sizeof bracketed, "[%s]", format_dims(shape, sizeof shape, t->shape, t->ndim, ", ", ""));
        fprintf(out, "%-*s  %-7s  %-*s  %*zu\n", name_w, err_escape(name, sizeof name, t->name), st_dtype_name(t->dtype), shape_w, bracketed,
                bytes_w, t->n_bytes);
    }
    fprintf(out, "%d tensors, %zu bytes\n", ckpt->n_tensors, total);
}
