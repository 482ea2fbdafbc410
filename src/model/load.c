// load.c — a Hugging Face checkpoint folder → a Model: config.json, then every tensor of the safetensors files
// into one arena in the layout the selected kernels read (model.h's Linear): GPT-2's Conv1D matrices transposed,
// q, k and v (and gate and up) stacked into one matrix, rows or 4-row panels, pair order for BF16 where the kernels
// want it, and the matrices converted as Quant says (F32/F16/BF16 as stored, rounded to BF16, or quantized to q8
// or q4).
// The forward (forward.c) only ever reads what this file built.
//
// Dimension key: d model width, H query heads, Hkv key/value heads, hd head width, F MLP width, V vocabulary,
// L layers, P = n_positions.
#include "model/forward.h"

#include "base/pages.h"
#include "checkpoint/gguf_model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_ALIGN = 64 };  // every tensor in the arena starts on a cache line (and a 512-bit vector)

// Everything model_load needs while it reads tensors out of the checkpoint into the arena.
typedef struct {
    const StCheckpoint *ckpt;
    const char *dir;
    const char *prefix;     // GPT-2: "transformer." or ""; the Llama family: "model." or ""
    const Kernels *kernels; // the selected kernels, whose weight layout the matrices take (kernels.h)
    Quant quant;            // QUANT_Q8, Q4: matrices are quantized as they are read, on the pool's threads;
                            // QUANT_BF16: F32 and F16 matrices are rounded to BF16 as they are read
    bool as_stored;         // a GGUF file read without --quant: its quantized matrices are held as the file's
                            // blocks (WEIGHT_Q8_0 ... WEIGHT_Q6_K: kernels.h), repacked into panels, not
                            // quantized again
    ThreadPool *pool;       // the model's
    const LoadProgress *progress;  // told of every tensor read, or NULL
    size_t read, total;     // bytes of the checkpoint's tensors read so far, of all of them
    uint8_t *arena;         // bump allocator over model->arena
    size_t used, size;
    Err *err;
} Loader;

static size_t align_up(size_t n) { return (n + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN; }

static void *arena_take(Loader *ld, size_t bytes) {
    void *p = ld->arena + ld->used;
    ld->used += align_up(bytes);
    return p;
}

// The tensor `prefix + name` with the expected shape [dim0] or [dim0, dim1] (dim1 = 0 for a vector), stored as
// F32, F16 or BF16; NULL with an error naming the file and tensor otherwise.
static const StTensor *fetch(Loader *ld, const char *name, int64_t dim0, int64_t dim1) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", ld->prefix, name);
    const StTensor *t = st_find(ld->ckpt, full);
    if (!t) {
        err_fmt(ld->err, "%s: tensor \"%s\" is missing from the checkpoint", ld->dir, full);
        return NULL;
    }
    ld->read += t->n_bytes;  // (a tied head is read twice: the count may pass the total)
    if (ld->progress)
        ld->progress->report(ld->progress->ctx, ld->read < ld->total ? ld->read : ld->total, ld->total);
    int ndim = dim1 ? 2 : 1;
    if (t->ndim != ndim || t->shape[0] != dim0 || (ndim == 2 && t->shape[1] != dim1)) {
        char got[128] = "[";
        for (int i = 0; i < t->ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        strncat(got, "]", sizeof got - strlen(got) - 1);
        if (ndim == 2)
            err_fmt(ld->err, "%s: tensor \"%s\" has shape %s, expected [%lld, %lld] from config.json", t->file, full,
                    got, (long long)dim0, (long long)dim1);
        else
            err_fmt(ld->err, "%s: tensor \"%s\" has shape %s, expected [%lld] from config.json", t->file, full, got,
                    (long long)dim0);
        return NULL;
    }
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && !t->blocks) {
        err_fmt(ld->err, "%s: tensor \"%s\" has dtype %s, expected F32, F16 or BF16", t->file, full,
                st_dtype_name(t->dtype));
        return NULL;
    }
    return t;
}

// A vector (bias, norm parameter, position table) as F32 at out.
static int read_f32(Loader *ld, float *out, const char *name, int64_t dim0, int64_t dim1) {
    const StTensor *t = fetch(ld, name, dim0, dim1);
    if (!t) return -1;
    if (!dim1 && !t->rotary_rows) {  // a vector: one row (of whole blocks, if quantized)
        st_row_to_f32(out, t, 0, (size_t)dim0);
    } else if (t->blocks && !dim1) {
        return err_fmt(ld->err, "%s: tensor \"%s%s\" is a quantized vector whose elements are permuted (not read)",
                       t->file, ld->prefix, name);
    } else {
        const size_t row = (size_t)(dim1 ? dim1 : 1);
        for (int64_t j = 0; j < dim0; j++) st_row_to_f32(out + (size_t)j * row, t, j, row);
    }
    st_release(t);
    return 0;
}

// The same, in the arena.
static const float *load_f32(Loader *ld, const char *name, int64_t dim0, int64_t dim1) {
    float *out = arena_take(ld, (size_t)dim0 * (dim1 ? dim1 : 1) * sizeof(float));
    return read_f32(ld, out, name, dim0, dim1) ? NULL : out;
}

// One part of a weight matrix, in the kernels' layout (rows, or panels of 4 rows whose 16-weight slices alternate:
// kernels.h): a linear layer's weights may be stacked from several tensors (q, k and v; gate and up).
typedef struct {
    const char *name;       // the tensor, without the prefix
    int rows;               // its output rows
    bool conv1d;            // stored [n_in, rows] (GPT-2's Conv1D): transposed here, once; else [rows, n_in]
} Part;

// Up to 16 consecutive weights of a row, from `from` (stored as `dtype`), into the slice that holds them
// (kernels.h) as `type`: as they are, or rounded to BF16 (QUANT_BF16); in order, or in pair order.
static void copy_slice(uint8_t *slice, WeightType type, const uint8_t *from, StDtype dtype, int count, bool pairs) {
    uint16_t rounded[16];
    if (type != weight_type(dtype)) {  // F32 or F16 to BF16
        float f[16];
        st_to_f32(f, from, dtype, (size_t)count);
        for (int e = 0; e < count; e++) rounded[e] = f32_to_bf16(f[e]);
        from = (const uint8_t *)rounded;
    }
    const size_t elem = weight_size(type);
    if (!pairs) {
        memcpy(slice, from, (size_t)count * elem);
        return;
    }
    for (int e = 0; e < count; e++) memcpy(slice + (size_t)slice_place(true, e) * elem, from + (size_t)e * elem, elem);
}

// Rows [row0, row0 + part->rows) of lin from the part's tensor, which must have lin's dtype (or any, QUANT_BF16).
static int load_part(Loader *ld, Linear *lin, int row0, const Part *part) {
    const int n_in = lin->n_in, rows = part->rows;
    const StTensor *t = part->conv1d ? fetch(ld, part->name, n_in, rows) : fetch(ld, part->name, rows, n_in);
    if (!t) return -1;
    if (weight_type(t->dtype) != lin->type && ld->quant != QUANT_BF16)
        return err_fmt(ld->err, "%s: tensor \"%s%s\" has dtype %s, unlike the tensors stacked with it", t->file,
                       ld->prefix, part->name, st_dtype_name(t->dtype));
    const size_t elem = weight_size(lin->type), stored = st_dtype_size(t->dtype);
    const bool panels = ld->kernels->panels, pairs = in_pair_order(ld->kernels, lin->type);
    uint8_t *w = (uint8_t *)lin->w;
    if (!part->conv1d) {  // 16 consecutive weights of a row stay in one slice in either layout
        for (int j = 0; j < rows; j++)
            for (int i = 0; i < n_in; i += 16)
                copy_slice(w + weight_index(panels, pairs, n_in, row0 + j, i) * elem, lin->type,
                           st_row(t, j, (size_t)n_in * stored) + (size_t)i * stored, t->dtype,
                           n_in - i < 16 ? n_in - i : 16, pairs);
        st_release(t);  // the file's copy is no longer needed: peak memory stays near the weights' size
        return 0;
    }
    // W[j, i] = stored[i, j], in 32 × 32 tiles so that both sides stay in cache.
    for (int i0 = 0; i0 < n_in; i0 += 32)
        for (int j0 = 0; j0 < rows; j0 += 32)
            for (int i = i0; i < i0 + 32 && i < n_in; i++)
                for (int j = j0; j < j0 + 32 && j < rows; j++)
                    copy_slice(w + weight_index(panels, pairs, n_in, row0 + j, i) * elem, lin->type,
                               t->data + ((size_t)i * rows + j) * stored, t->dtype, 1, false);
    st_release(t);
    return 0;
}

// Quantizing a matrix stacked from parts to q8 or q4, or repacking GGUF's Q8_0 or Q4_0 blocks, as a chunked pool job
// (pool_run_chunks): each chunk a run of 16-row panels (Q8_PANEL = Q4_PANEL), each panel computed alone, so that
// the bytes never depend on which thread takes a chunk.
enum { MAX_PARTS = 3 };  // q, k and v
typedef struct {
    const Part *parts;
    const StTensor *tensors[MAX_PARTS];
    int n_parts;
    WeightType type;            // WEIGHT_Q8, WEIGHT_Q4, or (every part's blocks as they are) one of GGUF's
    uint8_t *w;                 // quantized_matrix_bytes(type, n_out, n_in)
    float *rows;                // [pool threads, 16, n_in]: each thread's panel as floats
    int n_out, n_in;
} QuantizeJob;

// Row r of a panel of `type` from the file's row of the ggml blocks it holds as stored (kernels.h; stored_type).
static void pack_gguf_row(uint8_t *panel, WeightType type, int r, const uint8_t *blocks, int n_in) {
    if (type == WEIGHT_Q8_0) q8_0_pack_row(panel, r, blocks, n_in);
    else if (type == WEIGHT_Q4_0) q4_0_pack_row(panel, r, blocks, n_in);
    else if (in_q5_panels(type)) q5_pack_row(panel, type, r, blocks, n_in);
    else k_pack_row(panel, type, r, blocks, n_in);
}

static int panel_count(int n_out) { return (n_out + Q8_PANEL - 1) / Q8_PANEL; }

static void quantize_chunk(void *ctx, int chunk, int n_chunks, int thread) {
    QuantizeJob *job = ctx;
    const int n_out = job->n_out, n_in = job->n_in;
    const bool repack = job->type != WEIGHT_Q8 && job->type != WEIGHT_Q4;  // GGUF's blocks, as stored
    int p0, p1;
    pool_share(panel_count(n_out), 1, chunk, n_chunks, &p0, &p1);
    float *rows = job->rows + (size_t)thread * Q8_PANEL * n_in;  // [16, n_in]
    for (int p = p0; p < p1; p++) {
        const int j0 = p * Q8_PANEL, j1 = n_out - j0 < Q8_PANEL ? n_out : j0 + Q8_PANEL;
        uint8_t *panel = job->w + (size_t)p * quantized_panel_bytes(job->type, n_in);
        // Rows [j0, j1) of W, from every part that holds some of them: part q holds [row0, row0 + rows).
        for (int q = 0, row0 = 0; q < job->n_parts; row0 += job->parts[q++].rows) {
            const StTensor *t = job->tensors[q];
            const size_t elem = st_dtype_size(t->dtype);
            const int n_part = job->parts[q].rows, a = j0 > row0 ? j0 : row0,
                      b = j1 < row0 + n_part ? j1 : row0 + n_part;  // [a, b): the overlap
            for (int j = a; j < b && repack; j++)  // (GGUF's tensors are never Conv1D's)
                pack_gguf_row(panel, job->type, j - j0,
                              st_row(t, j - row0, qk_row_bytes(t->blocks, (size_t)n_in)), n_in);
            for (int j = a; j < b && !repack && !job->parts[q].conv1d; j++)
                st_row_to_f32(rows + (size_t)(j - j0) * n_in, t, j - row0, (size_t)n_in);
            for (int i = 0; i < n_in && job->parts[q].conv1d && a < b; i++) {
                float column[Q8_PANEL];  // stored[i, a..b) = W[a..b, i], consecutive in Conv1D's [n_in, rows]
                st_to_f32(column, t->data + ((size_t)i * n_part + (a - row0)) * elem, t->dtype, (size_t)(b - a));
                for (int j = a; j < b; j++) rows[(size_t)(j - j0) * n_in + i] = column[j - a];
            }
        }
        if (job->type == WEIGHT_Q4) q4_quantize_panel(panel, rows, j1 - j0, n_in, n_in);
        if (job->type == WEIGHT_Q8) q8_quantize_panel(panel, rows, j1 - j0, n_in, n_in);
    }
}

// lin's matrix (lin->w) quantized to q8 or q4 panels of 16 rows (kernels.h; lin->type) from its parts in any
// stored dtype, on the pool's threads: each panel's rows gathered as floats — 16 consecutive weights of each
// input at a time from Conv1D's [n_in, rows]; a panel may straddle two parts — then quantized. Or (GGUF's types)
// each row's blocks packed into the panel as they are.
static int quantize_linear(Loader *ld, Linear *lin, const Part *parts, int n_parts) {
    QuantizeJob job = {.parts = parts, .n_parts = n_parts, .type = lin->type, .w = (uint8_t *)lin->w,
                       .n_out = lin->n_out, .n_in = lin->n_in};
    for (int p = 0; p < n_parts; p++) {
        const Part *part = &parts[p];
        job.tensors[p] = part->conv1d ? fetch(ld, part->name, lin->n_in, part->rows)
                                      : fetch(ld, part->name, part->rows, lin->n_in);
        if (!job.tensors[p]) return -1;
    }
    job.rows = malloc(sizeof(float) * (size_t)pool_size(ld->pool) * Q8_PANEL * lin->n_in);
    if (!job.rows) return err_fmt(ld->err, "%s: out of memory quantizing \"%s%s\"", ld->dir, ld->prefix, parts[0].name);
    const int threads = pool_size(ld->pool);
    pool_run_chunks(ld->pool, threads, pool_chunk_count(panel_count(lin->n_out), 1, threads), quantize_chunk, &job);
    free(job.rows);
    for (int p = 0; p < n_parts; p++) st_release(job.tensors[p]);  // as load_part: the file's copy is done with
    return 0;
}

// ---- the one place a Quant becomes a layout: a new weight format adds a case to held_type, matrix_bytes,
// fill_matrix and linear_bytes (and makes sure arena_bound leaves it room) ----

// The type a matrix is held as under `quant`, its parts stored as `stored` (and GGUF's blocks: held_type_of).
static WeightType held_type(Quant quant, StDtype stored) {
    switch (quant) {
    case QUANT_Q8: return WEIGHT_Q8;
    case QUANT_BF16: return WEIGHT_BF16;
    case QUANT_Q4: return WEIGHT_Q4;
    case QUANT_NONE: case QUANT_STORED: break;
    }
    return weight_type(stored);
}

// The weight type that holds GGUF's blocks of ggml `type` as stored (kernels.h); WEIGHT_TYPES for none.
static WeightType stored_type(uint32_t type) {
    switch (type) {
    case GGML_Q8_0: return WEIGHT_Q8_0;
    case GGML_Q4_0: return WEIGHT_Q4_0;
    case GGML_Q5_0: return WEIGHT_Q5_0;
    case GGML_Q5_1: return WEIGHT_Q5_1;
    case GGML_Q4_1: return WEIGHT_Q4_1;
    case GGML_Q4_K: return WEIGHT_Q4_K;
    case GGML_Q5_K: return WEIGHT_Q5_K;
    case GGML_Q6_K: return WEIGHT_Q6_K;
    }
    return WEIGHT_TYPES;
}

// The weight type that holds `part`'s blocks as stored (stored_type), or WEIGHT_TYPES where they are quantized
// again (or are not a GGUF's blocks, or the file is not read as stored).
static WeightType part_stored_type(const Loader *ld, const Part *part) {
    char full[256];
    snprintf(full, sizeof full, "%s%s", ld->prefix, part->name);
    const StTensor *t = st_find(ld->ckpt, full);
    return ld->as_stored && t && t->blocks ? stored_type(t->blocks) : WEIGHT_TYPES;
}

// How a matrix stacked from parts (the first of them `first`) is held. A GGUF read as stored whose parts all hold
// blocks held as one type keeps them (stored_type); one whose parts change type once, at a row that begins a panel,
// keeps both as two matrices (Q4_K_M's q and k in Q4_K with v in Q6_K, or, where its rows are not whole K-blocks,
// in Q5_0 with v in Q8_0: *tail_part the first part of the second type). Otherwise held_type's: a stack mixing
// types another way is quantized again.
static WeightType held_type_of(const Loader *ld, const Part *parts, int n_parts, const StTensor *first,
                               int *tail_part, WeightType *tail_type) {
    *tail_part = n_parts;
    WeightType head = part_stored_type(ld, &parts[0]);
    int rows = parts[0].rows;
    for (int p = 1; p < n_parts && head != WEIGHT_TYPES; rows += parts[p++].rows) {
        const WeightType type = part_stored_type(ld, &parts[p]);
        const bool split = *tail_part < n_parts;
        if (type == (split ? *tail_type : head)) continue;
        if (type == WEIGHT_TYPES || split || rows % Q8_PANEL) {  // a second change, or not at a panel's first row
            head = WEIGHT_TYPES;
        } else {
            *tail_part = p;
            *tail_type = type;
        }
    }
    if (head != WEIGHT_TYPES) return head;
    *tail_part = n_parts;
    return held_type(ld->quant, first->dtype);
}

// Bytes of arena a [n_out, n_in] matrix held as `type` takes in the kernels' layout, padding included.
static size_t matrix_bytes(const Kernels *k, WeightType type, int n_out, int n_in) {
    if (weight_quantized(type)) return quantized_matrix_bytes(type, n_out, n_in);
    return weight_elements(k->panels, n_out, n_in) * weight_size(type);
}

// lin's matrix (lin->w, zero-filled, lin->type set) from its parts, converted to lin->type on the way.
static int fill_matrix(Loader *ld, Linear *lin, const Part *parts, int n_parts) {
    if (weight_quantized(lin->type)) return quantize_linear(ld, lin, parts, n_parts);
    for (int p = 0, row0 = 0; p < n_parts; row0 += parts[p++].rows)
        if (load_part(ld, lin, row0, &parts[p])) return -1;
    return 0;
}

// Bytes of the layer's weights and bias one forward streams (quantized: the quants and scales of the panels,
// padding included).
static size_t linear_bytes(const Linear *lin) {
    const int rows = lin->n_out - lin->tail_rows;
    const size_t w = weight_quantized(lin->type) ? quantized_matrix_bytes(lin->type, rows, lin->n_in)
                                                 : (size_t)rows * lin->n_in * weight_size(lin->type);
    const size_t tail = lin->tail_rows ? quantized_matrix_bytes(lin->tail_type, lin->tail_rows, lin->n_in) : 0;
    return w + tail + (lin->bias ? lin->n_out * sizeof(float) : 0);
}

// Bytes of the head one decode step streams: lm_head, or with a coarse head all of it and the q8 panels of the
// HEAD_REFINED rows recomputed (each row's whole panel: the kernels read 16 rows at a time).
static size_t head_bytes(const Model *model) {
    if (!model->lm_head_coarse.n_out) return linear_bytes(&model->lm_head);
    return linear_bytes(&model->lm_head_coarse) + HEAD_REFINED * q8_panel_bytes(model->lm_head.n_in);
}

// ------------------------------------------------------------------------------------------------------------

// A linear layer [Σ rows, n_in] stacked from parts[0..n_parts), held as ld->quant says (held_type_of), with the
// parts' biases ("<name>.bias" for "<name>.weight") when with_bias.
static int load_linear(Loader *ld, Linear *lin, int n_in, const Part *parts, int n_parts, bool with_bias) {
    int n_out = 0;
    for (int p = 0; p < n_parts; p++) n_out += parts[p].rows;
    const StTensor *first = fetch(ld, parts[0].name, parts[0].conv1d ? n_in : parts[0].rows,
                                  parts[0].conv1d ? parts[0].rows : n_in);
    if (!first) return -1;
    int tail_part;
    WeightType tail_type;
    *lin = (Linear){.type = held_type_of(ld, parts, n_parts, first, &tail_part, &tail_type), .n_out = n_out,
                    .n_in = n_in};
    for (int p = tail_part; p < n_parts; p++) lin->tail_rows += parts[p].rows;
    // zero-filled (fresh anonymous pages): the panels' padding
    lin->w = arena_take(ld, matrix_bytes(ld->kernels, lin->type, n_out - lin->tail_rows, n_in));
    float *bias = with_bias ? arena_take(ld, (size_t)n_out * sizeof(float)) : NULL;
    lin->bias = bias;
    if (lin->tail_rows) {  // the two matrices, each filled from its own parts
        lin->tail_type = tail_type;
        lin->tail_w = arena_take(ld, matrix_bytes(ld->kernels, tail_type, lin->tail_rows, n_in));
        Linear head = {.w = lin->w, .type = lin->type, .n_out = n_out - lin->tail_rows, .n_in = n_in};
        Linear tail = {.w = lin->tail_w, .type = tail_type, .n_out = lin->tail_rows, .n_in = n_in};
        if (fill_matrix(ld, &head, parts, tail_part) || fill_matrix(ld, &tail, parts + tail_part, n_parts - tail_part))
            return -1;
    } else if (fill_matrix(ld, lin, parts, n_parts)) {
        return -1;
    }
    for (int p = 0, row0 = 0; p < n_parts && bias; row0 += parts[p++].rows) {
        char name[192];
        snprintf(name, sizeof name, "%.*s.bias", (int)(strlen(parts[p].name) - strlen(".weight")), parts[p].name);
        if (read_f32(ld, bias + row0, name, parts[p].rows, 0)) return -1;
    }
    return 0;
}

// The name of layer `layer`'s tensor `suffix` (without the prefix), in name: "h.N.suffix" (GPT-2) or
// "layers.N.suffix".
static const char *layer_name(char name[128], const Config *c, int layer, const char *suffix) {
    snprintf(name, 128, "%s%d.%s", c->model_type == MODEL_GPT2 ? "h." : "layers.", layer, suffix);
    return name;
}

// Layer `layer`'s attention matrices (q, k, v and the output projection), held as ld->quant says, except under
// q4 in the first and the last layer, whose attention is held in q8: the first and last layers are the most
// sensitive to 4-bit weights (llama.cpp's Q4_K_M gives some of their matrices more bits too); docs/quantization.md
// measures what this buys on the shipped target against the other candidates, and for how many more bytes.
static int load_attention(Loader *ld, Block *b, int layer, const Config *c, const Part *qkv, int n_qkv,
                          const Part *out, bool qkv_bias, bool out_bias) {
    const Quant body = ld->quant;
    if (body == QUANT_Q4 && (layer == 0 || layer == c->n_layer - 1)) ld->quant = QUANT_Q8;
    const int rc = load_linear(ld, &b->attn_qkv, c->n_embd, qkv, n_qkv, qkv_bias) ||
                   load_linear(ld, &b->attn_out, c->n_head * c->head_dim, out, 1, out_bias);  // GPT-2: H·hd = d
    ld->quant = body;
    return rc ? -1 : 0;
}

// GPT-2's layer: h.N.ln_1, attn.c_attn (q, k and v in one Conv1D), attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj, every
// matrix with its bias. h.N.attn.bias and h.N.attn.masked_bias (the causal mask as a buffer, in old exports) are
// never read.
static int load_gpt2_block(Loader *ld, Block *b, int layer, const Config *c) {
    const int d = c->n_embd, F = c->n_inner;
    const bool conv1d = !ld->ckpt->linear_gpt2;
    char n[8][128];  // tensor names
    const Part qkv = {.name = layer_name(n[2], c, layer, "attn.c_attn.weight"), .rows = 3 * d, .conv1d = conv1d},
               out = {.name = layer_name(n[3], c, layer, "attn.c_proj.weight"), .rows = d, .conv1d = conv1d},
               up = {.name = layer_name(n[6], c, layer, "mlp.c_fc.weight"), .rows = F, .conv1d = conv1d},
               down = {.name = layer_name(n[7], c, layer, "mlp.c_proj.weight"), .rows = d, .conv1d = conv1d};
    if (!(b->norm1.gamma = load_f32(ld, layer_name(n[0], c, layer, "ln_1.weight"), d, 0)) ||
        !(b->norm1.beta = load_f32(ld, layer_name(n[1], c, layer, "ln_1.bias"), d, 0)) ||
        load_attention(ld, b, layer, c, &qkv, 1, &out, true, true) ||
        !(b->norm2.gamma = load_f32(ld, layer_name(n[4], c, layer, "ln_2.weight"), d, 0)) ||
        !(b->norm2.beta = load_f32(ld, layer_name(n[5], c, layer, "ln_2.bias"), d, 0)) ||
        load_linear(ld, &b->mlp_up, d, &up, 1, true) || load_linear(ld, &b->mlp_down, F, &down, 1, true))
        return -1;
    return 0;
}

// The Llama family's layer: layers.N.input_layernorm, self_attn.{q,k,v}_proj (stacked into one matrix), o_proj,
// post_attention_layernorm, mlp.{gate,up}_proj (stacked), down_proj, and Qwen3's self_attn.{q,k}_norm; biases as
// the config says.
static int load_llama_block(Loader *ld, Block *b, int layer, const Config *c) {
    const int d = c->n_embd, F = c->n_inner, hd = c->head_dim, q_rows = c->n_head * hd, kv_rows = c->n_kv_head * hd;
    char n[11][128];  // tensor names
    const Part qkv[] = {{.name = layer_name(n[0], c, layer, "self_attn.q_proj.weight"), .rows = q_rows},
                        {.name = layer_name(n[1], c, layer, "self_attn.k_proj.weight"), .rows = kv_rows},
                        {.name = layer_name(n[2], c, layer, "self_attn.v_proj.weight"), .rows = kv_rows}};
    const Part gate_up[] = {{.name = layer_name(n[3], c, layer, "mlp.gate_proj.weight"), .rows = F},
                            {.name = layer_name(n[4], c, layer, "mlp.up_proj.weight"), .rows = F}};
    const Part out = {.name = layer_name(n[5], c, layer, "self_attn.o_proj.weight"), .rows = d},
               down = {.name = layer_name(n[6], c, layer, "mlp.down_proj.weight"), .rows = d};
    if (!(b->norm1.gamma = load_f32(ld, layer_name(n[7], c, layer, "input_layernorm.weight"), d, 0)) ||
        load_attention(ld, b, layer, c, qkv, 3, &out, c->qkv_bias, c->out_bias) ||
        !(b->norm2.gamma = load_f32(ld, layer_name(n[8], c, layer, "post_attention_layernorm.weight"), d, 0)) ||
        load_linear(ld, &b->mlp_up, d, gate_up, 2, c->mlp_bias) ||
        load_linear(ld, &b->mlp_down, F, &down, 1, c->mlp_bias))
        return -1;
    if (c->qk_norm && (!(b->q_norm = load_f32(ld, layer_name(n[9], c, layer, "self_attn.q_norm.weight"), hd, 0)) ||
                       !(b->k_norm = load_f32(ld, layer_name(n[10], c, layer, "self_attn.k_norm.weight"), hd, 0))))
        return -1;
    return 0;
}

// Room for every tensor as F32 (the most a weight takes), with the panel layout's padding: rows to 16 weights,
// and 3 more rows; or as q8 panels, either way round, where a tiny matrix's padding makes those larger (a matrix
// stacked from parts takes no more q8 panels than its parts would alone; q4 panels take fewer bytes than q8's) —
// and under q4 the head's q4 copy (load_head).
static size_t arena_bound(const StCheckpoint *ckpt, const Config *c, Quant quant) {
    size_t total = 0;
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        size_t padding = t->ndim == 2 ? (size_t)(t->shape[0] + t->shape[1] + 3) * 16 : 0;
        size_t bytes = ((size_t)t->n_elements + padding) * 4;
        if (t->ndim == 2) {
            const int rows = (int)t->shape[0], cols = (int)t->shape[1];
            const size_t q8 = q8_matrix_bytes(rows, cols) > q8_matrix_bytes(cols, rows) ? q8_matrix_bytes(rows, cols)
                                                                                      : q8_matrix_bytes(cols, rows);
            bytes = q8 > bytes ? q8 : bytes;
        }
        total += align_up(bytes);
    }
    return total + (quant == QUANT_Q4 ? align_up(q4_matrix_bytes(c->vocab_size, c->n_embd)) : 0);
}


// The rotary inverse frequencies ω_i = θ^(−2i/hd), i < hd/2, rescaled as rope_scaling says — in float, as
// transformers computes them (its _compute_default / _linear / _llama3_parameters).
static void rope_frequencies(float *inv_freq, const Config *c) {
    const RopeScaling *r = &c->rope;
    for (int i = 0; i < c->head_dim / 2; i++) {
        float w = 1.0f / powf(c->rope_theta, (float)(2 * i) / (float)c->head_dim);
        if (r->type == ROPE_LINEAR) w /= r->factor;
        if (r->type == ROPE_LLAMA3) {
            // Wavelengths longer than the original context / low_freq_factor are interpolated (ω / factor), those
            // shorter than context / high_freq_factor kept, and those between blended linearly in context / λ.
            const float old = (float)r->original_max_position, wavelen = 2.0f * (float)M_PI / w;
            if (wavelen > old / r->low_freq_factor) {
                w /= r->factor;
            } else if (!(wavelen < old / r->high_freq_factor)) {
                float smooth = (old / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
                w = (1.0f - smooth) * w / r->factor + smooth * w;
            }
        }
        inv_freq[i] = w;
    }
}

// A GGUF's rope_freqs.weight [hd/2]: each rotary frequency divided by its factor, as llama.cpp applies them
// (Llama 3's rope scaling, written by its converter as these divisors).
static int divide_frequencies(float *inv_freq, Loader *ld, const Config *c) {
    float *factors = malloc(sizeof(float) * (size_t)c->head_dim / 2);
    const char *prefix = ld->prefix;
    ld->prefix = "";
    const int rc = factors ? read_f32(ld, factors, "rope_freqs.weight", c->head_dim / 2, 0)
                           : err_fmt(ld->err, "%s: out of memory", ld->dir);
    ld->prefix = prefix;
    for (int i = 0; !rc && i < c->head_dim / 2; i++) inv_freq[i] /= factors[i];
    free(factors);
    return rc;
}

// The weights of the checkpoint in ckpt, for the config in model->cfg, into model's arena.
// The LM head, held as `head`: wte when tied (as in transformers, even if the file also has lm_head.weight), else
// lm_head.weight. Under q4 (body), the same matrix again in q4 as lm_head_coarse (model.h, HEAD_REFINED).
static int load_head(Model *model, Loader *ld, const Part *wte, Quant body, Quant head) {
    const Config *c = &model->cfg;
    const bool tied = c->tie_word_embeddings;
    const Part lm_head = {.name = "lm_head.weight", .rows = c->vocab_size};
    model->lm_head = model->wte;
    if (tied) {
        st_find(ld->ckpt, "lm_head.weight");  // (if there: a copy of wte, which transformers ties over too)
    } else {
        if (!st_find(ld->ckpt, "lm_head.weight"))
            return err_fmt(ld->err, "%s: config.json sets tie_word_embeddings to false but tensor \"lm_head.weight\" "
                           "is missing", ld->dir);
        ld->prefix = "";  // the head is never under the body's prefix
        ld->quant = head;
        if (load_linear(ld, &model->lm_head, c->n_embd, &lm_head, 1, false)) return -1;
    }
    if (body != QUANT_Q4) return 0;
    ld->quant = QUANT_Q4;  // (wte's prefix is still the loader's when tied)
    return load_linear(ld, &model->lm_head_coarse, c->n_embd, tied ? wte : &lm_head, 1, false);
}

static int load_weights(Model *model, Loader *ld) {
    const Config *c = &model->cfg;
    const bool gpt2 = c->model_type == MODEL_GPT2;
    const int d = c->n_embd;
    ld->prefix = gpt2 ? (st_find(ld->ckpt, "transformer.wte.weight") ? "transformer." : "")
                      : (st_find(ld->ckpt, "model.embed_tokens.weight") ? "model." : "");
    // Under q4 the embeddings and the head are held in q8, as llama.cpp's quantizer keeps a Q4_0 model's in Q6_K:
    // on the shipped target, a q4 head alone costs 3.4 points of top-1 agreement and 2.7 × the KL
    // (docs/quantization.md). The head is read in q4 all the same, and refined from q8 (load_head).
    const Quant body = ld->quant, head = body == QUANT_Q4 ? QUANT_Q8 : body;
    const Part wte = {.name = gpt2 ? "wte.weight" : "embed_tokens.weight", .rows = c->vocab_size};
    ld->quant = head;
    if (load_linear(ld, &model->wte, d, &wte, 1, false)) return -1;
    ld->quant = body;
    if (c->positions == POSITIONS_LEARNED && !(model->wpe = load_f32(ld, "wpe.weight", c->n_positions, d)))
        return -1;
    if (c->positions == POSITIONS_ROTARY) {
        model->inv_freq = arena_take(ld, sizeof(float) * (size_t)c->head_dim / 2);
        rope_frequencies(model->inv_freq, c);
        if (st_find(ld->ckpt, "rope_freqs.weight") && divide_frequencies(model->inv_freq, ld, c)) return -1;
    }
    for (int l = 0; l < c->n_layer; l++)
        if ((gpt2 ? load_gpt2_block : load_llama_block)(ld, &model->blocks[l], l, c)) return -1;
    if (!(model->norm_f.gamma = load_f32(ld, gpt2 ? "ln_f.weight" : "norm.weight", d, 0))) return -1;
    if (gpt2 && !(model->norm_f.beta = load_f32(ld, "ln_f.bias", d, 0))) return -1;
    return load_head(model, ld, &wte, body, head);
}

// Whether any tensor of ckpt holds GGUF's quantized blocks.
static bool has_blocks(const StCheckpoint *ckpt) {
    for (int i = 0; i < ckpt->n_tensors; i++)
        if (ckpt->tensors[i].blocks) return true;
    return false;
}

// The config and the tensors of the checkpoint at path: a GGUF file (or a folder of one, gguf_checkpoint_path),
// kept open in *gguf, which the tensors view; else a Hugging Face folder's config.json, generation_config.json
// and safetensors files (*gguf stays closed).
static int open_checkpoint(Config *cfg, StCheckpoint *ckpt, GgufFile *gguf, const char *path, Err *err) {
    char file[4096];
    if (gguf_checkpoint_path(path, file, sizeof file)) {
        if (gguf_open(gguf, file, err) || gguf_config(cfg, gguf, err) || gguf_view(ckpt, gguf, cfg, err)) {
            gguf_close(gguf);
            return -1;
        }
        return 0;
    }
    snprintf(file, sizeof file, "%s/config.json", path);
    if (config_load(cfg, file, err)) return -1;
    snprintf(file, sizeof file, "%s/generation_config.json", path);
    return config_load_generation(cfg, file, err) || st_open(ckpt, path, err) ? -1 : 0;
}

int model_load(Model *model, const char *dir, ThreadPool *pool, Err *err) {
    return model_load_quantized(model, dir, pool, QUANT_NONE, err);
}

int model_load_quantized(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err) {
    return model_load_reporting(model, dir, pool, quant, NULL, err);
}

int model_load_reporting(Model *model, const char *dir, ThreadPool *pool, Quant quant, const LoadProgress *progress,
                         Err *err) {
    *model = (Model){.pool = pool, .quant = quant, .max_threads = pool_size(pool),
                     .work_per_thread = MODEL_WORK_PER_THREAD};
    char why[160];
    if (!(model->kernels = kernels_select(why, sizeof why))) return err_fmt(err, "%s", why);
    if (quant == QUANT_BF16 && !model->kernels->matmul_bf16_dot)
        return err_fmt(err, "bf16 arithmetic needs BF16 dot-product instructions (AVX512_BF16: Zen 4, Sapphire Rapids, "
                       "Cooper Lake), which the %s kernels lack", model->kernels->name);

    GgufFile gguf = {0};
    StCheckpoint ckpt;
    if (open_checkpoint(&model->cfg, &ckpt, &gguf, dir, err)) return -1;
    config_fit_window(&model->cfg);  // (a folder's and a GGUF's alike)
    const Config *c = &model->cfg;
    if (quant == QUANT_STORED) quant = model->quant = QUANT_NONE;
    const bool as_stored = quant == QUANT_NONE;
    if (has_blocks(&ckpt) && (quant == QUANT_NONE || quant == QUANT_BF16)) {
        // A GGUF's quantized blocks are held as stored (Loader.as_stored), but in a matrix whose parts mix types,
        // and its float matrices as q8 (--quant q8 or q4: every matrix quantized so, as a safetensors folder's
        // would be).
        if (quant == QUANT_BF16) {
            st_close(&ckpt);
            gguf_close(&gguf);
            return err_fmt(err, "%s: --quant bf16 reads F32, F16 and BF16 weights, and this file holds quantized "
                           "blocks (q8 or q4 read it)", dir);
        }
        quant = model->quant = QUANT_Q8;
    }
    model->arena_size = arena_bound(&ckpt, c, quant);
    // On huge pages: fewer TLB misses while the weights stream through, faster decoding
    // (docs/performance-history.md, "Measurements behind the kernels' choices").
    model->arena = huge_pages_alloc(model->arena_size);
    model->blocks = calloc((size_t)c->n_layer, sizeof(Block));
    if (!model->arena || !model->blocks) {
        st_close(&ckpt);
        gguf_close(&gguf);
        model_free(model);
        return err_fmt(err, "%s: out of memory for %zu MB of weights", dir, model->arena_size >> 20);
    }
    Loader ld = {.ckpt = &ckpt, .dir = dir, .arena = model->arena, .size = model->arena_size, .err = err,
                 .kernels = model->kernels, .quant = quant, .as_stored = as_stored,
                 .pool = pool,
                 .progress = progress};
    for (int i = 0; i < ckpt.n_tensors; i++) ld.total += ckpt.tensors[i].n_bytes;
    static const char *const family[] = {"gpt2", "llama", "mistral", "qwen2", "qwen3"};  // by ModelType
    int rc = load_weights(model, &ld) || st_check_all_fetched(&ckpt, family[c->model_type], c->n_layer, err);
    st_close(&ckpt);
    gguf_close(&gguf);
    if (!rc) rc = forward_scratch_alloc(&model->scratch, c, quant, pool_size(pool), err);
    if (rc) {
        model_free(model);
        return -1;
    }
    model->n_vocab = c->vocab_size;

    // Bytes one decode step streams: every block matrix, the head and the small vectors.
    const size_t norm_bytes = (c->norm == NORM_LAYER ? 2 : 1) * c->n_embd * sizeof(float);
    size_t bytes = head_bytes(model) + norm_bytes;
    for (int l = 0; l < c->n_layer; l++) {
        const Block *b = &model->blocks[l];
        bytes += linear_bytes(&b->attn_qkv) + linear_bytes(&b->attn_out) + linear_bytes(&b->mlp_up) +
                 linear_bytes(&b->mlp_down) + 2 * norm_bytes;
    }
    model->weight_bytes = bytes;
    return 0;
}

const char *quant_name(Quant quant) {
    switch (quant) {
    case QUANT_Q8: return "q8";
    case QUANT_BF16: return "bf16";
    case QUANT_Q4: return "q4";
    case QUANT_STORED: return "stored";
    case QUANT_NONE: break;
    }
    return "none";
}

int quant_from_name(Quant *quant, const char *name, const char *option, Err *err) {
    for (Quant q = QUANT_NONE; q <= QUANT_STORED; q++)
        if (strcmp(name, quant_name(q)) == 0) {
            *quant = q;
            return 0;
        }
    return err_fmt(err, "%s: expected none, q8, bf16, q4 or stored, got \"%s\"", option, name);
}


void model_free(Model *model) {
    forward_scratch_free(&model->scratch);
    free(model->blocks);
    huge_pages_free(model->arena, model->arena_size);
    *model = (Model){0};
}

void model_limit_vocab(Model *model, int n_vocab) {
    if (n_vocab < 1 || n_vocab > model->cfg.vocab_size) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "model_limit_vocab: %d outside [1, %d]\n", n_vocab, model->cfg.vocab_size);
        abort();
    }
    model->weight_bytes -= head_bytes(model);
    model->n_vocab = model->lm_head.n_out = n_vocab;  // the first rows of any layout are the first ids
    if (model->lm_head_coarse.n_out) model->lm_head_coarse.n_out = n_vocab;
    model->weight_bytes += head_bytes(model);
}

static double multiply_adds_of(const Linear *l) { return (double)l->n_out * l->n_in; }

double model_matrix_multiply_adds(const Model *model) {
    double sum = multiply_adds_of(&model->lm_head);
    for (int l = 0; l < model->cfg.n_layer; l++) {
        const Block *b = &model->blocks[l];
        sum += multiply_adds_of(&b->attn_qkv) + multiply_adds_of(&b->attn_out) + multiply_adds_of(&b->mlp_up) +
               multiply_adds_of(&b->mlp_down);
    }
    return sum;
}


int model_kv_init(const Model *model, KVCache *cache, Err *err) {
    const Config *c = &model->cfg;
    return kv_init(cache, c->n_layer, c->n_kv_head, c->n_positions, c->head_dim, err);
}

size_t model_kv_bytes(const Model *model) {
    const Config *c = &model->cfg;
    return kv_bytes_of(c->n_layer, c->n_kv_head, c->n_positions, c->head_dim);
}
