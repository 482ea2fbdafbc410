// gguf_write.h — writing a GGUF file (version 3, little-endian; the layout gguf.h reads): the metadata and the tensor
// infos are gathered first, then written with the header; the tensors' data follow one by one, streamed by the
// caller, each at an offset that is a multiple of the alignment (32, general.alignment's default), as llama.cpp's
// writers place them.
#ifndef SPECDEC_GGUF_WRITE_H
#define SPECDEC_GGUF_WRITE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "checkpoint/gguf.h"

enum { GGUF_WRITE_ALIGNMENT = 32 };

typedef struct {
    char *name;
    uint32_t type;              // ggml type
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];  // ne[0]: a row's elements
    uint64_t offset;            // from the data area's start
    size_t n_bytes;
} GgufOutTensor;

typedef struct {
    uint8_t *kv;                // the metadata as the file holds it
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    uint64_t array_left;        // elements an open array still expects
    GgufOutTensor *tensors;     // [n_tensors], in file order
    int n_tensors, tensors_cap;
    uint64_t data_size;         // the data area so far, padded
    bool out_of_memory;
} GgufWriter;

void gguf_writer_init(GgufWriter *w);
void gguf_writer_free(GgufWriter *w);

// Metadata entries, in the order added.
void gguf_kv_string(GgufWriter *w, const char *key, const char *s, size_t len);
void gguf_kv_u32(GgufWriter *w, const char *key, uint32_t v);
void gguf_kv_f32(GgufWriter *w, const char *key, float v);
void gguf_kv_bool(GgufWriter *w, const char *key, bool v);
// An array entry of count elements of elem (GGUF_STRING, GGUF_I32 or GGUF_F32), which gguf_put_string /
// gguf_put_i32 / gguf_put_f32 then append, exactly count of them, before the next entry.
void gguf_kv_array(GgufWriter *w, const char *key, GgufValueType elem, uint64_t count);
void gguf_put_string(GgufWriter *w, const char *s, size_t len);
void gguf_put_i32(GgufWriter *w, int32_t v);
void gguf_put_f32(GgufWriter *w, float v);

// A tensor of `type` and shape ne[n_dims] (ne[0] a whole number of the type's blocks), placed after the previous
// one. Returns its bytes.
size_t gguf_add_tensor(GgufWriter *w, const char *name, uint32_t type, int n_dims, const int64_t *ne);

// Writes the header, the metadata, the tensor infos and the padding before the data area to out (path names it in
// errors). Then the caller writes each tensor's n_bytes in order, each followed by gguf_write_padding.
int gguf_write_header(GgufWriter *w, FILE *out, const char *path, Err *err);
int gguf_write_padding(FILE *out, size_t n_bytes, const char *path, Err *err);

#endif
