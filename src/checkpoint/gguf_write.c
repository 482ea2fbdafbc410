// gguf_write.c — a GGUF file's header and metadata gathered in memory, its data streamed (see gguf_write.h).
#include "checkpoint/gguf_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void gguf_writer_init(GgufWriter *w) { *w = (GgufWriter){0}; }

void gguf_writer_free(GgufWriter *w) {
    for (int i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->kv);
    *w = (GgufWriter){0};
}

// ---- the metadata, as bytes ------------------------------------------------------------------------------------

static void put_bytes(GgufWriter *w, const void *bytes, size_t n) {
    if (w->out_of_memory) return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 4096;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *grown = realloc(w->kv, cap);
        if (!grown) {
            w->out_of_memory = true;
            return;
        }
        w->kv = grown, w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, bytes, n);
    w->kv_len += n;
}

static void put_u64(GgufWriter *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> 8 * i);
    put_bytes(w, b, 8);
}

static void put_u32(GgufWriter *w, uint32_t v) {
    const uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put_bytes(w, b, 4);
}

static void put_text(GgufWriter *w, const char *s, size_t len) {
    put_u64(w, len);
    put_bytes(w, s, len);
}

// A new entry's key and value type (an open array must have had all its elements).
static void put_key(GgufWriter *w, const char *key, GgufValueType type) {
    if (w->array_left) w->out_of_memory = true;  // (a caller's error; reported as a failed write)
    put_text(w, key, strlen(key));
    put_u32(w, (uint32_t)type);
    w->n_kv++;
}

void gguf_kv_string(GgufWriter *w, const char *key, const char *s, size_t len) {
    put_key(w, key, GGUF_STRING);
    put_text(w, s, len);
}

void gguf_kv_u32(GgufWriter *w, const char *key, uint32_t v) {
    put_key(w, key, GGUF_U32);
    put_u32(w, v);
}

void gguf_kv_f32(GgufWriter *w, const char *key, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put_key(w, key, GGUF_F32);
    put_u32(w, bits);
}

void gguf_kv_bool(GgufWriter *w, const char *key, bool v) {
    put_key(w, key, GGUF_BOOL);
    put_bytes(w, &(uint8_t){v}, 1);
}

void gguf_kv_array(GgufWriter *w, const char *key, GgufValueType elem, uint64_t count) {
    put_key(w, key, GGUF_ARRAY);
    put_u32(w, (uint32_t)elem);
    put_u64(w, count);
    w->array_left = count;
}

void gguf_put_string(GgufWriter *w, const char *s, size_t len) {
    put_text(w, s, len);
    w->array_left--;
}

void gguf_put_i32(GgufWriter *w, int32_t v) {
    put_u32(w, (uint32_t)v);
    w->array_left--;
}

void gguf_put_f32(GgufWriter *w, float v) {
    uint32_t bits;
    memcpy(&bits, &v, sizeof bits);
    gguf_put_i32(w, (int32_t)bits);
}

// ---- tensors ---------------------------------------------------------------------------------------------------

static uint64_t padded(uint64_t n) { return (n + GGUF_WRITE_ALIGNMENT - 1) / GGUF_WRITE_ALIGNMENT * GGUF_WRITE_ALIGNMENT; }

size_t gguf_add_tensor(GgufWriter *w, const char *name, uint32_t type, int n_dims, const int64_t *ne) {
    if (w->n_tensors == w->tensors_cap) {
        const int cap = w->tensors_cap ? 2 * w->tensors_cap : 64;
        GgufOutTensor *grown = realloc(w->tensors, (size_t)cap * sizeof *grown);
        if (!grown) {
            w->out_of_memory = true;
            return 0;
        }
        w->tensors = grown, w->tensors_cap = cap;
    }
    GgufOutTensor *t = &w->tensors[w->n_tensors];
    *t = (GgufOutTensor){.name = strdup(name), .type = type, .n_dims = n_dims, .offset = w->data_size};
    if (!t->name) {
        w->out_of_memory = true;
        return 0;
    }
    int64_t n = 1;
    for (int d = 0; d < GGUF_MAX_DIMS; d++) {
        t->ne[d] = d < n_dims ? ne[d] : 1;
        n *= t->ne[d];
    }
    size_t block_bytes;
    const int block = gguf_type_block(type, &block_bytes);
    t->n_bytes = (size_t)n / (size_t)block * block_bytes;
    w->data_size += padded(t->n_bytes);
    w->n_tensors++;
    return t->n_bytes;
}

// ---- the file --------------------------------------------------------------------------------------------------

static int write_all(FILE *out, const void *bytes, size_t n, const char *path, Err *err) {
    if (n && fwrite(bytes, 1, n, out) != n) return err_fmt(err, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

int gguf_write_padding(FILE *out, size_t n_bytes, const char *path, Err *err) {
    static const uint8_t zeros[GGUF_WRITE_ALIGNMENT];
    return write_all(out, zeros, padded(n_bytes) - n_bytes, path, err);
}

int gguf_write_header(GgufWriter *w, FILE *out, const char *path, Err *err) {
    if (w->array_left) w->out_of_memory = true;
    GgufWriter head = {0};  // magic, version, counts, then the tensor infos
    put_bytes(&head, "GGUF", 4);
    put_u32(&head, 3);
    put_u64(&head, (uint64_t)w->n_tensors);
    put_u64(&head, w->n_kv);
    GgufWriter infos = {0};
    for (int i = 0; i < w->n_tensors; i++) {
        const GgufOutTensor *t = &w->tensors[i];
        put_text(&infos, t->name, strlen(t->name));
        put_u32(&infos, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) put_u64(&infos, (uint64_t)t->ne[d]);
        put_u32(&infos, t->type);
        put_u64(&infos, t->offset);
    }
    int rc = 0;
    if (w->out_of_memory || head.out_of_memory || infos.out_of_memory) rc = err_fmt(err, "%s: out of memory", path);
    else
        rc = write_all(out, head.kv, head.kv_len, path, err) || write_all(out, w->kv, w->kv_len, path, err) ||
             write_all(out, infos.kv, infos.kv_len, path, err) ||
             gguf_write_padding(out, head.kv_len + w->kv_len + infos.kv_len, path, err) ? -1 : 0;
    free(head.kv);
    free(infos.kv);
    return rc;
}
