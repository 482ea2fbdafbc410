// gguf.c — memory-map and strictly validate GGUF files (see gguf.h).
//
// The checks, in the order they run:
//   1. the magic "GGUF", a version of 2 or 3 (1 used 32-bit counts; a byte-swapped version is a big-endian file);
//   2. the counts of metadata entries and tensors each at most the bytes left / the least bytes one can take;
//   3. every key and name a string inside the file, without NUL bytes, not empty, no key or name twice; every
//      value of a known type, an array's elements inside the file (arrays of arrays refused), strings in arrays
//      each inside the file;
//   4. general.alignment, if there, a u32 power of two;
//   5. every tensor of 1..4 positive dimensions and a type GGUF defines with a block size, ne[0] a whole number of
//      blocks, its bytes computed without overflow, its offset a multiple of the alignment, and its extent inside
//      the data area, which starts at the first multiple of the alignment after the tensor infos; no two tensors
//      overlap. Only then is any data pointer formed.
#include "checkpoint/gguf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The ggml types GGUF defines: name, block elements and bytes (ggml's type traits; 0: no longer defined).
static const struct {
    const char *name;
    int block;
    size_t bytes;
} TYPES[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},          [2] = {"Q4_0", 32, 18},      [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},       [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 40},
    [10] = {"Q2_K", 256, 84},    [11] = {"Q3_K", 256, 110},    [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},    [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},   [23] = {"IQ4_XS", 256, 136},  [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},         [28] = {"F64", 1, 8},        [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
    [40] = {"NVFP4", 64, 36},    [41] = {"Q1_0", 128, 18},     [42] = {"Q2_0", 64, 18},
};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

static const struct {
    const char *name;
    size_t size;  // bytes of one value (strings and arrays: of their length prefix)
} VALUE_TYPES[GGUF_VALUE_TYPES] = {
    [GGUF_U8] = {"u8", 1},   [GGUF_I8] = {"i8", 1},         [GGUF_U16] = {"u16", 2},    [GGUF_I16] = {"i16", 2},
    [GGUF_U32] = {"u32", 4}, [GGUF_I32] = {"i32", 4},       [GGUF_F32] = {"f32", 4},    [GGUF_BOOL] = {"bool", 1},
    [GGUF_STRING] = {"string", 8}, [GGUF_ARRAY] = {"array", 12}, [GGUF_U64] = {"u64", 8}, [GGUF_I64] = {"i64", 8},
    [GGUF_F64] = {"f64", 8},
};

enum { DEFAULT_ALIGNMENT = 32, MAX_ALIGNMENT = 1 << 16 };

const char *gguf_type_name(uint32_t type) {
    return type < N_TYPES && TYPES[type].name ? TYPES[type].name : "?";
}

int gguf_type_block(uint32_t type, size_t *bytes) {
    *bytes = type < N_TYPES ? TYPES[type].bytes : 0;
    return type < N_TYPES ? TYPES[type].block : 0;
}

const char *gguf_value_type_name(GgufValueType type) {
    return (unsigned)type < GGUF_VALUE_TYPES ? VALUE_TYPES[type].name : "?";
}

// ---------------------------------------------------------------------------------------------------------------
// Reading the header: a cursor that never passes the file's end

typedef struct {
    const GgufFile *f;
    size_t at;          // the next byte to read
    Err *err;
} Cursor;

static uint64_t load_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

// Takes `bytes` bytes at the cursor into *out (little-endian); −1 naming `what` when the file ends first.
static int take(Cursor *c, int bytes, uint64_t *out, const char *what) {
    *out = 0;
    if (c->f->size - c->at < (size_t)bytes)
        return err_fmt(c->err, "%s: %s at byte %zu runs past the end of the file (%zu bytes); is it truncated?",
                       c->f->path, what, c->at, c->f->size);
    *out = load_le(c->f->map + c->at, bytes);
    c->at += (size_t)bytes;
    return 0;
}

// Skips a string at the cursor, checking that it fits: *s and *len receive it.
static int take_string(Cursor *c, const uint8_t **s, uint64_t *len, const char *what) {
    *s = NULL;
    if (take(c, 8, len, what)) return -1;
    if (*len > c->f->size - c->at)
        return err_fmt(c->err, "%s: %s: a string of %llu bytes at byte %zu runs past the end of the file (%zu bytes)",
                       c->f->path, what, (unsigned long long)*len, c->at - 8, c->f->size);
    *s = c->f->map + c->at;
    c->at += (size_t)*len;
    return 0;
}

// A key or tensor name: a non-empty string without NUL bytes, copied NUL-terminated to *strings.
static int take_name(Cursor *c, char **strings, const char **out, const char *what) {
    const uint8_t *s;
    uint64_t len;
    if (take_string(c, &s, &len, what)) return -1;
    if (len == 0) return err_fmt(c->err, "%s: %s at byte %zu is empty", c->f->path, what, c->at - 8);
    if (memchr(s, 0, (size_t)len))
        return err_fmt(c->err, "%s: %s at byte %zu holds a NUL byte", c->f->path, what, c->at - (size_t)len);
    memcpy(*strings, s, (size_t)len);
    (*strings)[len] = 0;
    *out = *strings;
    *strings += len + 1;
    return 0;
}

// Skips one value of type `type` (not an array) at the cursor.
static int skip_value(Cursor *c, GgufValueType type, const char *key) {
    char what[128];
    snprintf(what, sizeof what, "metadata \"%.64s\": its value", key);
    if (type == GGUF_STRING) {
        const uint8_t *s;
        uint64_t len;
        return take_string(c, &s, &len, what);
    }
    const size_t size = VALUE_TYPES[type].size;
    if (c->f->size - c->at < size)
        return err_fmt(c->err, "%s: %s at byte %zu runs past the end of the file", c->f->path, what, c->at);
    if (type == GGUF_BOOL && c->f->map[c->at] > 1)
        return err_fmt(c->err, "%s: metadata \"%.64s\": a bool of value %u (expected 0 or 1)", c->f->path, key,
                       c->f->map[c->at]);
    c->at += size;
    return 0;
}

// A value type read at the cursor, checked.
static int take_value_type(Cursor *c, GgufValueType *type, const char *key, const char *what) {
    uint64_t t;
    *type = GGUF_U8;
    if (take(c, 4, &t, what)) return -1;
    if (t >= GGUF_VALUE_TYPES)
        return err_fmt(c->err, "%s: metadata \"%.64s\": %s %llu is not a GGUF value type (0..12)", c->f->path, key,
                       what, (unsigned long long)t);
    *type = (GgufValueType)t;
    return 0;
}

// One metadata entry at the cursor (rule 3) into *kv.
static int take_kv(Cursor *c, char **strings, GgufKv *kv) {
    if (take_name(c, strings, &kv->key, "a metadata key") ||
        take_value_type(c, &kv->type, kv->key, "value type"))
        return -1;
    kv->count = 1;
    if (kv->type != GGUF_ARRAY) {
        kv->value = c->f->map + c->at;
        return skip_value(c, kv->type, kv->key);
    }
    if (take_value_type(c, &kv->elem_type, kv->key, "array element type") ||
        take(c, 8, &kv->count, "an array's count"))
        return -1;
    if (kv->elem_type == GGUF_ARRAY)
        return err_fmt(c->err, "%s: metadata \"%.64s\": an array of arrays (not read)", c->f->path, kv->key);
    const size_t least = kv->elem_type == GGUF_STRING ? 8 : VALUE_TYPES[kv->elem_type].size;
    if (kv->count > (c->f->size - c->at) / least)
        return err_fmt(c->err, "%s: metadata \"%.64s\": %llu elements of %s cannot fit in the %zu bytes left",
                       c->f->path, kv->key, (unsigned long long)kv->count, VALUE_TYPES[kv->elem_type].name,
                       c->f->size - c->at);
    kv->value = c->f->map + c->at;
    if (kv->elem_type != GGUF_STRING) {
        c->at += (size_t)kv->count * least;
        for (uint64_t i = 0; kv->elem_type == GGUF_BOOL && i < kv->count; i++)
            if (kv->value[i] > 1)
                return err_fmt(c->err, "%s: metadata \"%.64s\": element %llu is a bool of value %u", c->f->path,
                               kv->key, (unsigned long long)i, kv->value[i]);
        return 0;
    }
    for (uint64_t i = 0; i < kv->count; i++)
        if (skip_value(c, GGUF_STRING, kv->key)) return -1;
    return 0;
}

// One tensor info at the cursor (rule 5, but its place in the data area) into *t; t->data holds its offset.
static int take_tensor(Cursor *c, char **strings, GgufTensor *t, uint64_t *offset) {
    uint64_t n_dims, type;
    if (take_name(c, strings, &t->name, "a tensor name") || take(c, 4, &n_dims, "a tensor's n_dims")) return -1;
    const char *path = c->f->path;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS)
        return err_fmt(c->err, "%s: tensor \"%.64s\": %llu dimensions (expected 1 to %d)", path, t->name,
                       (unsigned long long)n_dims, GGUF_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t count = 1;
    for (int i = 0; i < GGUF_MAX_DIMS; i++) {
        uint64_t ne = 1;
        if (i < t->n_dims && take(c, 8, &ne, "a tensor's dimension")) return -1;
        if (ne < 1 || ne > INT64_MAX || __builtin_mul_overflow(count, ne, &count) || count > INT64_MAX)
            return err_fmt(c->err, "%s: tensor \"%.64s\": dimension %d is %llu (the element count must be in [1, "
                           "2^63))", path, t->name, i, (unsigned long long)ne);
        t->ne[i] = (int64_t)ne;
    }
    t->n_elements = (int64_t)count;
    if (take(c, 4, &type, "a tensor's type") || take(c, 8, offset, "a tensor's offset")) return -1;
    size_t block_bytes;
    const int block = type <= UINT32_MAX ? gguf_type_block((uint32_t)type, &block_bytes) : 0;
    if (!block)
        return err_fmt(c->err, "%s: tensor \"%.64s\": type %llu is not a ggml type GGUF defines", path, t->name,
                       (unsigned long long)type);
    t->type = (uint32_t)type;
    if (t->ne[0] % block)
        return err_fmt(c->err, "%s: tensor \"%.64s\": rows of %lld elements are not whole %s blocks of %d", path,
                       t->name, (long long)t->ne[0], gguf_type_name(t->type), block);
    uint64_t bytes;
    if (__builtin_mul_overflow(count / (uint64_t)block, (uint64_t)block_bytes, &bytes) || bytes > SIZE_MAX)
        return err_fmt(c->err, "%s: tensor \"%.64s\": its size overflows", path, t->name);
    t->n_bytes = (size_t)bytes;
    return 0;
}

// ---------------------------------------------------------------------------------------------------------------
// The file

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// Rule 3's uniqueness: n names (each the first field of a record of `stride` bytes) without a repeat.
static int check_unique(const GgufFile *f, const void *records, int64_t n, size_t stride, const char *what,
                        Err *err) {
    const char **names = malloc(sizeof *names * (size_t)(n ? n : 1));
    if (!names) return err_fmt(err, "%s: out of memory", f->path);
    for (int64_t i = 0; i < n; i++) names[i] = *(const char *const *)((const uint8_t *)records + (size_t)i * stride);
    qsort(names, (size_t)n, sizeof *names, by_name);
    int rc = 0;
    for (int64_t i = 1; i < n && !rc; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = err_fmt(err, "%s: %s \"%.64s\" appears twice", f->path, what, names[i]);
    free(names);
    return rc;
}

// general.alignment (rule 4) into f->alignment.
static int read_alignment(GgufFile *f, Err *err) {
    f->alignment = DEFAULT_ALIGNMENT;
    const GgufKv *kv = gguf_find(f, "general.alignment");
    if (!kv) return 0;
    if (kv->type != GGUF_U32)
        return err_fmt(err, "%s: general.alignment is a %s, expected a u32", f->path, VALUE_TYPES[kv->type].name);
    const uint64_t a = load_le(kv->value, 4);
    if (a == 0 || (a & (a - 1)) || a > MAX_ALIGNMENT)
        return err_fmt(err, "%s: general.alignment %llu is not a power of two up to %d", f->path,
                       (unsigned long long)a, MAX_ALIGNMENT);
    f->alignment = (size_t)a;
    return 0;
}

typedef struct {
    uint64_t begin, end;
    const char *name;
} Extent;

static int by_begin(const void *a, const void *b) {
    const Extent *x = a, *y = b;
    return (x->begin > y->begin) - (x->begin < y->begin);
}

// Rule 5's placement: offsets aligned, extents inside the data area and apart; then the data pointers.
static int place_tensors(GgufFile *f, const uint64_t *offsets, Err *err) {
    const size_t data_size = f->size - f->data_offset;
    Extent *ext = malloc(sizeof *ext * (size_t)(f->n_tensors ? f->n_tensors : 1));
    if (!ext) return err_fmt(err, "%s: out of memory", f->path);
    int rc = 0;
    for (int64_t i = 0; i < f->n_tensors && !rc; i++) {
        const GgufTensor *t = &f->tensors[i];
        ext[i] = (Extent){.begin = offsets[i], .end = offsets[i] + t->n_bytes, .name = t->name};
        if (offsets[i] % f->alignment)
            rc = err_fmt(err, "%s: tensor \"%.64s\": offset %llu is not a multiple of the alignment %zu", f->path,
                         t->name, (unsigned long long)offsets[i], f->alignment);
        else if (offsets[i] > data_size || t->n_bytes > data_size - offsets[i])
            rc = err_fmt(err, "%s: tensor \"%.64s\": bytes [%llu, %llu) of the data area run past its end (%zu bytes "
                         "from byte %zu); is the file truncated?", f->path, t->name, (unsigned long long)offsets[i],
                         (unsigned long long)offsets[i] + t->n_bytes, data_size, f->data_offset);
    }
    if (!rc) qsort(ext, (size_t)f->n_tensors, sizeof *ext, by_begin);
    for (int64_t i = 1; i < f->n_tensors && !rc; i++)
        if (ext[i].begin < ext[i - 1].end)
            rc = err_fmt(err, "%s: tensor \"%.64s\" [%llu, %llu) overlaps tensor \"%.64s\" [%llu, %llu)", f->path,
                         ext[i].name, (unsigned long long)ext[i].begin, (unsigned long long)ext[i].end,
                         ext[i - 1].name, (unsigned long long)ext[i - 1].begin, (unsigned long long)ext[i - 1].end);
    free(ext);
    for (int64_t i = 0; i < f->n_tensors && !rc; i++) f->tensors[i].data = f->map + f->data_offset + offsets[i];
    return rc;
}

// Rules 1 to 5 over the mapped file.
static int read_header(GgufFile *f, Err *err) {
    Cursor c = {.f = f, .err = err};
    uint64_t magic, version, n_tensors, n_kv;
    if (take(&c, 4, &magic, "the magic") || take(&c, 4, &version, "the version")) return -1;
    if (magic != 0x46554747u) return err_fmt(err, "%s: not a GGUF file (it does not start with \"GGUF\")", f->path);
    if (version != 2 && version != 3)
        return err_fmt(err, "%s: GGUF version %llu%s; specdec reads versions 2 and 3", f->path,
                       (unsigned long long)version,
                       version == 0x03000000 || version == 0x02000000 ? " (a big-endian file)" : "");
    f->version = (uint32_t)version;
    if (take(&c, 8, &n_tensors, "the tensor count") || take(&c, 8, &n_kv, "the metadata count")) return -1;
    const size_t left = f->size - c.at;  // a metadata entry takes at least 13 bytes, a tensor info 29
    if (n_kv > left / 13 || n_tensors > left / 29)
        return err_fmt(err, "%s: %llu metadata entries and %llu tensors cannot fit in the file's %zu bytes", f->path,
                       (unsigned long long)n_kv, (unsigned long long)n_tensors, f->size);
    f->n_kv = (int64_t)n_kv, f->n_tensors = (int64_t)n_tensors;
    f->kv = calloc((size_t)n_kv + 1, sizeof *f->kv);
    f->tensors = calloc((size_t)n_tensors + 1, sizeof *f->tensors);
    f->strings = malloc(f->size);  // every copied string is shorter than its place in the file
    uint64_t *offsets = calloc((size_t)n_tensors + 1, sizeof *offsets);
    int rc = !f->kv || !f->tensors || !f->strings || !offsets ? err_fmt(err, "%s: out of memory", f->path) : 0;
    char *strings = f->strings;
    for (int64_t i = 0; i < f->n_kv && !rc; i++) rc = take_kv(&c, &strings, &f->kv[i]);
    for (int64_t i = 0; i < f->n_tensors && !rc; i++) rc = take_tensor(&c, &strings, &f->tensors[i], &offsets[i]);
    if (!rc) rc = check_unique(f, f->kv, f->n_kv, sizeof *f->kv, "metadata key", err) ||
                  check_unique(f, f->tensors, f->n_tensors, sizeof *f->tensors, "tensor", err) ||
                  read_alignment(f, err);
    if (!rc) {
        f->data_offset = (c.at + f->alignment - 1) / f->alignment * f->alignment;
        if (f->n_tensors && f->data_offset > f->size)
            rc = err_fmt(err, "%s: the data area would start at byte %zu, past the end of the file (%zu bytes)",
                         f->path, f->data_offset, f->size);
    }
    if (!rc) rc = place_tensors(f, offsets, err);
    free(offsets);
    return rc;
}

bool gguf_is_gguf(const char *path) {
    struct stat st;  // only a regular file can be one: opening a FIFO or a terminal would wait for a writer
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    char magic[4];
    FILE *in = fopen(path, "rb");
    const bool yes = in && fread(magic, 1, 4, in) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (in) fclose(in);
    return yes;
}

int gguf_open(GgufFile *f, const char *path, Err *err) {
    *f = (GgufFile){0};
    if (!(f->path = strdup(path))) return err_fmt(err, "%s: out of memory", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        err_fmt(err, "%s: cannot open: %s", path, strerror(errno));
        gguf_close(f);
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) rc = err_fmt(err, "%s: not a regular file", path);
    else if (st.st_size < 24) rc = err_fmt(err, "%s: file is %lld bytes, too short for a GGUF header (24)", path,
                                           (long long)st.st_size);
    if (!rc) {
        f->size = (size_t)st.st_size;
        void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) rc = err_fmt(err, "%s: cannot map: %s", path, strerror(errno));
        else f->map = map;
    }
    close(fd);
    if (rc || read_header(f, err)) {
        gguf_close(f);
        return -1;
    }
    return 0;
}

void gguf_close(GgufFile *f) {
    if (f->map) munmap((void *)f->map, f->size);
    free(f->path);
    free(f->kv);
    free(f->tensors);
    free(f->strings);
    *f = (GgufFile){0};
}

bool gguf_checkpoint_path(const char *path, char *out, size_t size) {
    struct stat st;
    if (stat(path, &st) != 0) return false;
    if (!S_ISDIR(st.st_mode)) {
        snprintf(out, size, "%s", path);
        return gguf_is_gguf(path);
    }
    char config[4096];
    snprintf(config, sizeof config, "%s/config.json", path);
    DIR *dir = access(config, F_OK) == 0 ? NULL : opendir(path);
    if (!dir) return false;
    int found = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        const size_t len = strlen(e->d_name);
        if (len > 5 && strcmp(e->d_name + len - 5, ".gguf") == 0 && found++ == 0)
            snprintf(out, size, "%s/%s", path, e->d_name);
    }
    closedir(dir);
    return found == 1;
}

const GgufKv *gguf_find(const GgufFile *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, key) == 0) return &f->kv[i];
    return NULL;
}

const GgufTensor *gguf_tensor(const GgufFile *f, const char *name) {
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

// ---------------------------------------------------------------------------------------------------------------
// Typed reads

// The entry `key` for a typed read: NULL, with *found = false, when absent (an error unless found is given).
static const GgufKv *entry(const GgufFile *f, const char *key, bool *found, Err *err) {
    const GgufKv *kv = gguf_find(f, key);
    if (found) *found = kv != NULL;
    if (!kv && !found) err_fmt(err, "%s: metadata \"%s\" is missing", f->path, key);
    return kv;
}

static int wrong_type(const GgufFile *f, const GgufKv *kv, const char *expected, Err *err) {
    return err_fmt(err, "%s: metadata \"%s\" is a %s, expected %s", f->path, kv->key, VALUE_TYPES[kv->type].name,
                   expected);
}

int gguf_get_int(const GgufFile *f, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *found, Err *err) {
    const GgufKv *kv = entry(f, key, found, err);
    if (!kv) return found ? 0 : -1;
    static const bool is_signed[GGUF_VALUE_TYPES] = {[GGUF_I8] = 1, [GGUF_I16] = 1, [GGUF_I32] = 1, [GGUF_I64] = 1};
    if (kv->type == GGUF_F32 || kv->type == GGUF_F64 || kv->type == GGUF_BOOL || kv->type == GGUF_STRING ||
        kv->type == GGUF_ARRAY)
        return wrong_type(f, kv, "an integer", err);
    const int bytes = (int)VALUE_TYPES[kv->type].size;
    const uint64_t raw = load_le(kv->value, bytes);
    const bool negative = is_signed[kv->type] && raw >> (8 * bytes - 1);
    if (!is_signed[kv->type] && raw > INT64_MAX)
        return err_fmt(err, "%s: metadata \"%s\" is %llu, expected [%lld, %lld]", f->path, key,
                       (unsigned long long)raw, (long long)lo, (long long)hi);
    const int64_t v = negative && bytes < 8 ? (int64_t)(raw | ~0ull << (8 * bytes)) : (int64_t)raw;
    if (v < lo || v > hi)
        return err_fmt(err, "%s: metadata \"%s\" is %lld, expected [%lld, %lld]", f->path, key, (long long)v,
                       (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

// An f32 or f64 entry's value, as a float.
static float float_value(const GgufKv *kv) {
    if (kv->type == GGUF_F32) {
        const uint32_t bits = (uint32_t)load_le(kv->value, 4);
        float v;
        memcpy(&v, &bits, 4);
        return v;
    }
    const uint64_t bits = load_le(kv->value, 8);
    double d;
    memcpy(&d, &bits, 8);
    return (float)d;
}

int gguf_get_float(const GgufFile *f, const char *key, float *out, bool *found, Err *err) {
    const GgufKv *kv = entry(f, key, found, err);
    if (!kv) return found ? 0 : -1;
    if (kv->type != GGUF_F32 && kv->type != GGUF_F64) return wrong_type(f, kv, "a float", err);
    *out = float_value(kv);
    return 0;
}

int gguf_get_string(const GgufFile *f, const char *key, const char **s, size_t *len, bool *found, Err *err) {
    *s = NULL, *len = 0;
    const GgufKv *kv = entry(f, key, found, err);
    if (!kv) return found ? 0 : -1;
    if (kv->type != GGUF_STRING) return wrong_type(f, kv, "a string", err);
    const uint8_t *at = kv->value;
    gguf_next_string(&at, s, len);
    return 0;
}

int gguf_get_array(const GgufFile *f, const char *key, GgufValueType elem, const GgufKv **kv, bool *found,
                   Err *err) {
    *kv = entry(f, key, found, err);
    if (!*kv) return found ? 0 : -1;
    if ((*kv)->type != GGUF_ARRAY || (*kv)->elem_type != elem) {
        char want[32];
        snprintf(want, sizeof want, "an array of %s", VALUE_TYPES[elem].name);
        const int rc = (*kv)->type == GGUF_ARRAY
                           ? err_fmt(err, "%s: metadata \"%s\" is an array of %s, expected %s", f->path, key,
                                     VALUE_TYPES[(*kv)->elem_type].name, want)
                           : wrong_type(f, *kv, want, err);
        *kv = NULL;
        return rc;
    }
    return 0;
}

void gguf_next_string(const uint8_t **at, const char **s, size_t *len) {
    *len = (size_t)load_le(*at, 8);
    *s = (const char *)*at + 8;
    *at += 8 + *len;
}

// ---------------------------------------------------------------------------------------------------------------
// Printing

// A metadata value in brief: a number, a string (escaped, cut), or an array's element type and count.
static void print_value(FILE *out, const GgufKv *kv) {
    char text[256], copy[200];
    if (kv->type == GGUF_ARRAY) {
        fprintf(out, "[%llu × %s]", (unsigned long long)kv->count, VALUE_TYPES[kv->elem_type].name);
    } else if (kv->type == GGUF_STRING) {
        const uint8_t *at = kv->value;
        const char *s;
        size_t len;
        gguf_next_string(&at, &s, &len);
        snprintf(copy, sizeof copy, "%.*s", (int)(len < sizeof copy - 1 ? len : sizeof copy - 1), s);
        for (char *p = copy; p < copy + (len < sizeof copy - 1 ? len : sizeof copy - 1); p++)
            if (!*p) *p = ' ';  // (a NUL in a value: shown as a space)
        fprintf(out, "\"%s\"%s", err_escape(text, sizeof text, copy), len >= sizeof copy - 1 ? " (cut)" : "");
    } else if (kv->type == GGUF_F32 || kv->type == GGUF_F64) {
        fprintf(out, "%g", float_value(kv));
    } else {
        const int bytes = (int)VALUE_TYPES[kv->type].size;
        const uint64_t raw = load_le(kv->value, bytes);
        const bool negative = (kv->type == GGUF_I8 || kv->type == GGUF_I16 || kv->type == GGUF_I32 ||
                               kv->type == GGUF_I64) && raw >> (8 * bytes - 1);
        if (negative) fprintf(out, "%lld", (long long)(bytes < 8 ? raw | ~0ull << (8 * bytes) : raw));
        else fprintf(out, "%llu", (unsigned long long)raw);
    }
}

void gguf_print(FILE *out, const GgufFile *f) {
    char text[512];
    fprintf(out, "%s\n", err_escape(text, sizeof text, f->path));
    fprintf(out, "  file size    %zu bytes\n  GGUF version %u\n  alignment    %zu\n  data offset  %zu\n", f->size,
            f->version, f->alignment, f->data_offset);
    fprintf(out, "  tensors      %lld\n", (long long)f->n_tensors);
    for (int64_t i = 0; i < f->n_kv; i++) {
        fprintf(out, "  metadata     %s = ", err_escape(text, sizeof text, f->kv[i].key));
        print_value(out, &f->kv[i]);
        fputc('\n', out);
    }
    fprintf(out, "\n");
    size_t total = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const GgufTensor *t = &f->tensors[i];
        char shape[128] = "";
        for (int d = 0; d < t->n_dims; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", d ? ", " : "", (long long)t->ne[d]);
        fprintf(out, "%-40s  %-5s  [%s]  %zu\n", err_escape(text, sizeof text, t->name), gguf_type_name(t->type),
                shape, t->n_bytes);
        total += t->n_bytes;
    }
    fprintf(out, "%lld tensors, %zu bytes\n", (long long)f->n_tensors, total);
}
