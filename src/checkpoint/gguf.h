// gguf.h — memory-map and strictly validate GGUF files (llama.cpp's format, versions 2 and 3, little-endian).
//
// File format (ggml's docs/gguf.md): the magic "GGUF", u32 version, u64 tensor count, u64 metadata count; then
// the metadata, each a key (string) with a u32 value type and the value; then each tensor's info: name (string),
// u32 n_dims, u64 ne[n_dims] (ne[0] the innermost: a row's elements), u32 ggml type, u64 offset into the data
// area; then padding to `general.alignment` (default 32) and the data area. A string is a u64 length and that many
// bytes (no NUL); an array is a u32 element type, a u64 count and the elements. Every read below is checked
// against the file's end before it is made, every count against the bytes left, and every tensor's extent
// (whole blocks of its type, overflow-checked) against the data area, before any data pointer is formed.
// Rejections leave one line in Err naming the file and what is wrong.
#ifndef SPECDEC_GGUF_H
#define SPECDEC_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "qk.h"

// The metadata value types of GGUF.
typedef enum {
    GGUF_U8, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY,
    GGUF_U64, GGUF_I64, GGUF_F64, GGUF_VALUE_TYPES
} GgufValueType;

// The ggml tensor types that specdec reads are qk.h's GGML_* (gguf.c knows the block sizes of every other type, to
// validate a file's extents, and the loader refuses them by name).

enum { GGUF_MAX_DIMS = 4 };

typedef struct {
    const char *key;            // NUL-terminated copy
    GgufValueType type;
    GgufValueType elem_type;    // GGUF_ARRAY: its elements' type
    uint64_t count;             // GGUF_ARRAY: its elements; else 1
    const uint8_t *value;       // the value's bytes in the mapping (an array's: after its type and count)
} GgufKv;

typedef struct {
    const char *name;           // NUL-terminated copy
    uint32_t type;              // ggml type
    int n_dims;
    int64_t ne[GGUF_MAX_DIMS];  // ne[0]: elements of a row (innermost); unused dimensions 1
    int64_t n_elements;
    const uint8_t *data;        // n_bytes inside the mapping, at a multiple of the alignment from the data area
    size_t n_bytes;
} GgufTensor;

typedef struct {
    char *path;
    const uint8_t *map;         // the whole file, read-only
    size_t size;
    uint32_t version;           // 2 or 3
    GgufKv *kv;                 // [n_kv], in file order
    int64_t n_kv;
    GgufTensor *tensors;        // [n_tensors], in file order
    int64_t n_tensors;
    size_t alignment;           // general.alignment, or 32
    size_t data_offset;         // where the data area starts
    char *strings;              // the keys' and names' copies
} GgufFile;

// Opens and validates the file at path. On failure *f is left closed (gguf_close is harmless) and err says why.
int gguf_open(GgufFile *f, const char *path, Err *err);
void gguf_close(GgufFile *f);

// Whether path names a GGUF file by its first four bytes.
bool gguf_is_gguf(const char *path);

// If path is a GGUF file, or a folder holding exactly one .gguf file and no config.json: that file's path in
// out (size bytes), true. Otherwise false (a Hugging Face folder, or nothing).
bool gguf_checkpoint_path(const char *path, char *out, size_t size);

// The metadata entry `key`, or NULL.
const GgufKv *gguf_find(const GgufFile *f, const char *key);
// The tensor called `name`, or NULL.
const GgufTensor *gguf_tensor(const GgufFile *f, const char *name);

// Typed reads of an entry, each −1 with an error naming the file and key when the entry is missing (and not
// optional: *found says whether it was there) or of another type. An integer of any integer type that fits.
int gguf_get_int(const GgufFile *f, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *found, Err *err);
int gguf_get_float(const GgufFile *f, const char *key, float *out, bool *found, Err *err);
// A string's bytes (not NUL-terminated) and length; *s = NULL when absent and optional.
int gguf_get_string(const GgufFile *f, const char *key, const char **s, size_t *len, bool *found, Err *err);
// An array of `elem` elements: its entry, or NULL when absent and optional.
int gguf_get_array(const GgufFile *f, const char *key, GgufValueType elem, const GgufKv **kv, bool *found, Err *err);

// Element i of a string array (bounds checked by gguf_open): its bytes and length. Strings of an array are read in
// order by a cursor: *at starts at kv->value and moves past each string read.
void gguf_next_string(const uint8_t **at, const char **s, size_t *len);

// The name of a ggml type ("Q4_K"), "?" for one GGUF does not define; its block's elements and bytes.
const char *gguf_type_name(uint32_t type);
int gguf_type_block(uint32_t type, size_t *bytes);
const char *gguf_value_type_name(GgufValueType type);

// A summary for `specdec inspect`: version, alignment, the metadata (arrays by count, long strings cut), then one
// row per tensor: name, type, shape (ne order), bytes.
void gguf_print(FILE *out, const GgufFile *f);

#endif
