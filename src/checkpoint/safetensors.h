// safetensors.h — memory-map and strictly validate Hugging Face .safetensors checkpoints.
//
// File format: [u64 little-endian N][N bytes of UTF-8 JSON header][tensor data]. The header maps tensor names to
// {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]} (offsets relative to the data area), plus an
// optional "__metadata__" object of string values. Validation follows the reference implementation; every
// rejection leaves one line in Err naming the file, the tensor or field, and expected vs actual.
//
// Tensor data is NOT aligned in general (the published gpt2 file's data area starts at byte 14291): read it
// through memcpy or the conversion helpers below, never through a cast to float *.
#ifndef SPECDEC_SAFETENSORS_H
#define SPECDEC_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_F8_E5M2, ST_F8_E4M3, ST_I16, ST_U16, ST_F16, ST_BF16,
    ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64,
} StDtype;

enum { ST_MAX_DIMS = 8 };

typedef struct {
    const char *name;           // tensor name as in the header, e.g. "h.0.attn.c_attn.weight"
    const char *file;           // path of the file that holds it (for error messages)
    StDtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    int64_t n_elements;         // product of shape (1 for a scalar)
    const uint8_t *data;        // n_bytes of raw little-endian data inside the mapping; may be unaligned
    size_t n_bytes;
    int rotary_rows;            // 0; or (a GGUF llama's q and k) the rows of each head are stored in llama.cpp's
                                // rotary order, heads of this many rows: st_row undoes it
    uint32_t blocks;            // 0; or (a GGUF tensor) the type of quantized blocks its rows hold (qk.h's GGML_*),
                                // dtype then U8
} StTensor;

// Row j (of row_bytes bytes) of a tensor [rows, ...] in the model's order. llama.cpp's converter stores a llama's
// q and k rows per head of hd rows interleaved — row 2i + s of a head holds row s·hd/2 + i of Hugging Face's —
// so that its rotation pairs neighbouring rows where transformers pairs rows hd/2 apart (rotate-half).
static inline const uint8_t *st_row(const StTensor *t, int64_t j, size_t row_bytes) {
    if (t->rotary_rows) {
        const int64_t hd = t->rotary_rows, half = hd / 2, within = j % hd;
        j = j - within + (within % half) * 2 + within / half;
    }
    return t->data + (size_t)j * row_bytes;
}

typedef struct StFile StFile;   // one mapped file

// A checkpoint: one model.safetensors, or the shards listed by model.safetensors.index.json.
typedef struct {
    StFile **files;
    int n_files;
    StTensor *tensors;          // all tensors of all files, sorted by name
    int n_tensors;
    char *index_path;           // the model.safetensors.index.json read, or NULL for a single file
    unsigned char *fetched;     // [n_tensors]: whether st_find has returned tensors[i] since st_open
    char *names;                // a view of a GGUF file's tensors (gguf_model.h): their names here, else NULL
    bool linear_gpt2;           // GPT-2's Conv1D matrices stored as [n_out, n_in], as llama.cpp's converter does
} StCheckpoint;

// Opens one .safetensors file, or a folder holding model.safetensors or model.safetensors.index.json + shards
// (a path ending in model.safetensors.index.json also works). A folder with both uses model.safetensors.
// Sharded checkpoints are checked for consistency: every tensor of weight_map is in the shard it names, every
// tensor of every shard is in weight_map, no tensor is in two shards, and shard names are plain file names of
// the folder (no '/' or "..").
// On failure *ckpt is left empty (st_close is harmless) and err says what is wrong.
int st_open(StCheckpoint *ckpt, const char *path, Err *err);
void st_close(StCheckpoint *ckpt);

// The tensor called `name`, or NULL. It counts as fetched (st_check_all_fetched).
const StTensor *st_find(const StCheckpoint *ckpt, const char *name);

// After loading a model of config.json's model_type `family` ("gpt2", "llama", ...) with n_layer layers: -1 with
// an error naming the first tensor (by name) that no st_find fetched, as transformers warns of unused weights,
// except the buffers each family's exports are known to carry and no forward reads (safetensors.c's
// KNOWN_BUFFERS). A layer number ≥ n_layer in its name says the config's layer count may be wrong.
int st_check_all_fetched(const StCheckpoint *ckpt, const char *family, int n_layer, Err *err);

// Done with tensor t: its whole pages leave this process's memory (madvise MADV_DONTNEED on the read-only
// mapping; the data stays valid, a later read faults it back in from the file). A loader that copies tensors out
// one by one and releases each keeps the file's pages and its copies from piling up: the peak stays near the
// copies' size.
void st_release(const StTensor *t);

const char *st_dtype_name(StDtype dtype);
size_t st_dtype_size(StDtype dtype);

// Converts n elements of a F32, F16 or BF16 tensor's raw data (possibly unaligned) to floats.
// Any other dtype is a programming error (callers check the dtype first) and aborts.
void st_to_f32(float *out, const uint8_t *data, StDtype dtype, size_t n);

// Row j (n elements; st_row's order) of a tensor [rows, n] as floats: F32, F16, BF16, or GGUF's quantized blocks
// dequantized (qk.h).
void st_row_to_f32(float *out, const StTensor *t, int64_t j, size_t n);

// A human summary for `specdec inspect`: per file its path, size, header length, data offset (and whether it is
// aligned), tensor count and metadata; then one aligned row per tensor: name, dtype, shape, bytes.
void st_print(FILE *out, const StCheckpoint *ckpt);

// ---- Shared with config.c: wording of the JSON readers' error messages ----

struct json_t;

// `value` as compact one-line JSON, e.g. "12" (with its quotes) or [1, 2], cut short with "..." to fit buf.
// Returns buf.
const char *st_json_brief(char *buf, size_t size, const struct json_t *value);

#endif
