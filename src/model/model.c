// model.c — a decoder-only transformer (GPT-2, Radford et al. 2019; Llama, Touvron et al. 2023, and its kin
// Mistral, Qwen2, Qwen3): loading a Hugging Face checkpoint, and the one forward pass they share.
//
// Dimension key: T new tokens, d model width, H query heads, Hkv key/value heads, hd head width, F MLP width,
// V vocabulary, L layers, S positions attended to, P = n_positions.
//
// The forward pass, for each new token at position p (pre-norm transformer):
//   x = wte[token] (+ wpe[p] with learned positions)
//   for each block:  x = x + Attn(Norm1(x))     Attn: causal self-attention over positions ≤ p; H query heads
//                                               share Hkv key/value heads in groups (Ainslie et al. 2023);
//                                               with rotary positions q and k of each head are rotated by p
//                    x = x + MLP(Norm2(x))      MLP(h) = act(h W_up) W_down, or gated: (SiLU(h W_gate) ⊙ h W_up) W_down
//   logits = Norm_f(x) W_lmᵀ                    W_lm = wte unless the checkpoint unties the head
// Norm is LayerNorm or RMSNorm. What differs between the families is data in Config and Model (which norm, which
// positions, which MLP, which biases, how many KV heads), never a second copy of this loop.
// The new tokens are a chain (prefill, decode, verification of one draft) or a token tree (SpecInfer): a tree's
// node is at position p = cache length + its depth and attends to the cache and to its own ancestors only. The
// chain is the tree in which each token follows the one before it: the same loop, with no mask to pass.
#include "model/model.h"

#include <cblas.h>
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "checkpoint/safetensors.h"

enum {
    CHUNK_T = TREE_MAX_ROWS,  // a forward processes at most this many tokens at a time (bounds the scratch memory)
    ROW_BLOCK = 16,     // matmul output columns are split between threads on multiples of this
    ALIGN = 64,
    ATTENTION_ROWS = 16,  // at most this many query rows (heads × tokens) of one key/value head per attention task
};
_Static_assert(CHUNK_T <= 64, "a row's path (ForwardScratch.path) is a 64-bit set of the chunk's rows");

// Activations for one chunk of up to CHUNK_T tokens. The matmuls' inputs h, att and mlp have rows ld_d, ld_att
// and ld_f floats apart (see row_stride in kernels.h).
typedef struct ForwardScratch {
    float *x;       // [CHUNK_T, d]        the residual stream
    float *h;       // [CHUNK_T, ld_d]     normalised x
    float *qkv;     // [CHUNK_T, n_qkv]    queries, keys, values: (H + 2·Hkv)·hd
    float *att;     // [CHUNK_T, ld_att]   attention output (heads concatenated, H·hd)
    float *mlp;     // [CHUNK_T, ld_f]     MLP hidden layer (gated: [gate | up], the product in the gate's place)
    float *cos, *sin;  // [CHUNK_T, hd/2]  rotary angles of the chunk's positions
    float *scores;  // [threads, ATTENTION_ROWS, P]     attention weights, a task's rows per thread
    float *att_rows;  // [threads, 2, ATTENTION_ROWS, hd]  a task's queries, then its outputs, gathered
    Q8Block *xq;    // [CHUNK_T, q8_blocks(max(d, H·hd, F))]  a q8 or q4 matmul's input, quantized (QUANT_Q8, Q4)
    uint16_t *xb;   // [CHUNK_T, panel_row_length(max(d, H·hd, F))]  a BF16 matmul's input, rounded (QUANT_BF16 only)
    int ld_d, ld_att, ld_f, n_qkv;

    // The chunk's rows: row t goes to cache row pos0 + t (pos0: the cache's length before the chunk). They are
    // rows of a token tree whose row j is cache row base + j (base = pos0, unless model_extend_tree adds them to
    // rows already there): row t sits at position[t] = base + its depth in the tree, and path[t] has bit j set
    // for each tree row j on its path, itself included. It attends to the cache's first `base` rows and to those.
    // A chain's row t: base = pos0, position pos0 + t, rows 0..t.
    int base;
    int position[CHUNK_T];
    uint64_t path[CHUNK_T];
    bool tree;      // some row's path leaves out a row before it: attention passes the paths to the kernel
    bool blas;      // OpenBLAS may take over the matmuls of many rows (model_forward; never model_forward_tree)
} ForwardScratch;

// ---- loading ------------------------------------------------------------------------------------------------

// Everything model_load needs while it reads tensors out of the checkpoint into the arena.
typedef struct {
    const StCheckpoint *ckpt;
    const char *dir;
    const char *prefix;     // GPT-2: "transformer." or ""; the Llama family: "model." or ""
    const Kernels *kernels; // the selected kernels, whose weight layout the matrices take (kernels.h)
    Quant quant;            // QUANT_Q8, Q4: matrices are quantized as they are read, on the pool's threads;
                            // QUANT_BF16: F32 and F16 matrices are rounded to BF16 as they are read
    ThreadPool *pool;       // the model's
    uint8_t *arena;         // bump allocator over model->arena
    size_t used, size;
    Err *err;
} Loader;

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static void *arena_take(Loader *ld, size_t bytes) {
    void *p = ld->arena + ld->used;
    ld->used += align_up(bytes);
    return p;
}

static WeightType weight_type(StDtype dtype) {
    return dtype == ST_F16 ? WEIGHT_F16 : dtype == ST_BF16 ? WEIGHT_BF16 : WEIGHT_F32;
}

static size_t weight_size(WeightType type) { return type == WEIGHT_F32 ? 4 : type == WEIGHT_Q8 ? 1 : 2; }

// Bytes of arena a [n_out, n_in] matrix held as `type` takes in the kernels' layout, padding included.
static size_t matrix_bytes(const Kernels *k, WeightType type, int n_out, int n_in) {
    if (type == WEIGHT_Q8) return q8_matrix_bytes(n_out, n_in);
    if (type == WEIGHT_Q4) return q4_matrix_bytes(n_out, n_in);
    return weight_elements(k->panels, n_out, n_in) * weight_size(type);
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
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) {
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
    st_to_f32(out, t->data, t->dtype, (size_t)t->n_elements);
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
                           t->data + ((size_t)j * n_in + i) * stored, t->dtype, n_in - i < 16 ? n_in - i : 16, pairs);
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

// Quantizing a matrix stacked from parts to q8 or q4 as a pool job: each thread its share of the 16-row panels
// (Q8_PANEL = Q4_PANEL).
enum { MAX_PARTS = 3 };  // q, k and v
typedef struct {
    const Part *parts;
    const StTensor *tensors[MAX_PARTS];
    int n_parts;
    WeightType type;            // WEIGHT_Q8 or WEIGHT_Q4
    uint8_t *w;                 // q8_matrix_bytes or q4_matrix_bytes(n_out, n_in)
    float *rows;                // [threads, 16, n_in]: each thread's panel as floats
    int n_out, n_in;
} QuantizeJob;

static void quantize_thread(void *ctx, int thread, int n_threads) {
    QuantizeJob *job = ctx;
    const int n_out = job->n_out, n_in = job->n_in;
    int p0, p1;
    pool_share((n_out + Q8_PANEL - 1) / Q8_PANEL, 1, thread, n_threads, &p0, &p1);
    float *rows = job->rows + (size_t)thread * Q8_PANEL * n_in;  // [16, n_in]
    for (int p = p0; p < p1; p++) {
        const int j0 = p * Q8_PANEL, j1 = n_out - j0 < Q8_PANEL ? n_out : j0 + Q8_PANEL;
        // Rows [j0, j1) of W, from every part that holds some of them: part q holds [row0, row0 + rows).
        for (int q = 0, row0 = 0; q < job->n_parts; row0 += job->parts[q++].rows) {
            const StTensor *t = job->tensors[q];
            const size_t elem = st_dtype_size(t->dtype);
            const int n_part = job->parts[q].rows, a = j0 > row0 ? j0 : row0,
                      b = j1 < row0 + n_part ? j1 : row0 + n_part;  // [a, b): the overlap
            for (int j = a; j < b && !job->parts[q].conv1d; j++)
                st_to_f32(rows + (size_t)(j - j0) * n_in, t->data + (size_t)(j - row0) * n_in * elem, t->dtype,
                          (size_t)n_in);
            for (int i = 0; i < n_in && job->parts[q].conv1d && a < b; i++) {
                float column[Q8_PANEL];  // stored[i, a..b) = W[a..b, i], consecutive in Conv1D's [n_in, rows]
                st_to_f32(column, t->data + ((size_t)i * n_part + (a - row0)) * elem, t->dtype, (size_t)(b - a));
                for (int j = a; j < b; j++) rows[(size_t)(j - j0) * n_in + i] = column[j - a];
            }
        }
        if (job->type == WEIGHT_Q4)
            q4_quantize_panel(job->w + (size_t)p * q4_panel_bytes(n_in), rows, j1 - j0, n_in, n_in);
        else
            q8_quantize_panel(job->w + (size_t)p * q8_panel_bytes(n_in), rows, j1 - j0, n_in, n_in);
    }
}

// lin's matrix (lin->w) quantized to q8 or q4 panels of 16 rows (kernels.h; lin->type) from its parts in any
// stored dtype, on the pool's threads: each panel's rows gathered as floats — 16 consecutive weights of each
// input at a time from Conv1D's [n_in, rows]; a panel may straddle two parts — then quantized.
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
    pool_run(ld->pool, quantize_thread, &job);
    free(job.rows);
    for (int p = 0; p < n_parts; p++) st_release(job.tensors[p]);  // as load_part: the file's copy is done with
    return 0;
}

// A linear layer [Σ rows, n_in] stacked from parts[0..n_parts), in the first part's dtype or quantized to q8 or
// q4 as ld->quant says, with the parts' biases ("<name>.bias" for "<name>.weight") when with_bias.
static int load_linear(Loader *ld, Linear *lin, int n_in, const Part *parts, int n_parts, bool with_bias) {
    int n_out = 0;
    for (int p = 0; p < n_parts; p++) n_out += parts[p].rows;
    const StTensor *first = fetch(ld, parts[0].name, parts[0].conv1d ? n_in : parts[0].rows,
                                  parts[0].conv1d ? parts[0].rows : n_in);
    if (!first) return -1;
    const bool quantized = ld->quant == QUANT_Q8 || ld->quant == QUANT_Q4;
    *lin = (Linear){.type = ld->quant == QUANT_Q8     ? WEIGHT_Q8
                            : ld->quant == QUANT_Q4   ? WEIGHT_Q4
                            : ld->quant == QUANT_BF16 ? WEIGHT_BF16
                                                      : weight_type(first->dtype),
                    .n_out = n_out, .n_in = n_in};
    // zero-filled (fresh anonymous pages): the panels' padding
    lin->w = arena_take(ld, matrix_bytes(ld->kernels, lin->type, n_out, n_in));
    float *bias = with_bias ? arena_take(ld, (size_t)n_out * sizeof(float)) : NULL;
    lin->bias = bias;
    if (quantized && quantize_linear(ld, lin, parts, n_parts)) return -1;
    for (int p = 0, row0 = 0; p < n_parts; row0 += parts[p++].rows) {
        if (!quantized && load_part(ld, lin, row0, &parts[p])) return -1;
        if (!bias) continue;
        char name[192];
        snprintf(name, sizeof name, "%.*s.bias", (int)(strlen(parts[p].name) - strlen(".weight")), parts[p].name);
        if (read_f32(ld, bias + row0, name, parts[p].rows, 0)) return -1;
    }
    return 0;
}

static int load_block(Loader *ld, Block *b, int layer, const Config *c) {
    const int d = c->n_embd, F = c->n_inner, hd = c->head_dim, q_rows = c->n_head * hd, kv_rows = c->n_kv_head * hd;
    char n[8][128];  // tensor names
#define NAME(i, suffix) (snprintf(n[i], sizeof n[i], "%s%d.%s", c->model_type == MODEL_GPT2 ? "h." : "layers.", \
                                  layer, suffix), n[i])
    if (c->model_type == MODEL_GPT2) {
        // h.N.attn.bias and h.N.attn.masked_bias (the causal mask as a buffer, in old exports) are never read.
        if (!(b->norm1.gamma = load_f32(ld, NAME(0, "ln_1.weight"), d, 0)) ||
            !(b->norm1.beta = load_f32(ld, NAME(1, "ln_1.bias"), d, 0)) ||
            load_linear(ld, &b->attn_qkv, d, &(Part){NAME(2, "attn.c_attn.weight"), 3 * d, true}, 1, true) ||
            load_linear(ld, &b->attn_out, d, &(Part){NAME(3, "attn.c_proj.weight"), d, true}, 1, true) ||
            !(b->norm2.gamma = load_f32(ld, NAME(4, "ln_2.weight"), d, 0)) ||
            !(b->norm2.beta = load_f32(ld, NAME(5, "ln_2.bias"), d, 0)) ||
            load_linear(ld, &b->mlp_up, d, &(Part){NAME(6, "mlp.c_fc.weight"), F, true}, 1, true) ||
            load_linear(ld, &b->mlp_down, F, &(Part){NAME(7, "mlp.c_proj.weight"), d, true}, 1, true))
            return -1;
        return 0;
    }
    const Part qkv[] = {{NAME(0, "self_attn.q_proj.weight"), q_rows, false},
                        {NAME(1, "self_attn.k_proj.weight"), kv_rows, false},
                        {NAME(2, "self_attn.v_proj.weight"), kv_rows, false}};
    const Part gate_up[] = {{NAME(3, "mlp.gate_proj.weight"), F, false}, {NAME(4, "mlp.up_proj.weight"), F, false}};
    if (!(b->norm1.gamma = load_f32(ld, NAME(5, "input_layernorm.weight"), d, 0)) ||
        load_linear(ld, &b->attn_qkv, d, qkv, 3, c->qkv_bias) ||
        load_linear(ld, &b->attn_out, q_rows, &(Part){NAME(6, "self_attn.o_proj.weight"), d, false}, 1,
                    c->out_bias) ||
        !(b->norm2.gamma = load_f32(ld, NAME(7, "post_attention_layernorm.weight"), d, 0)) ||
        load_linear(ld, &b->mlp_up, d, gate_up, 2, c->mlp_bias) ||
        load_linear(ld, &b->mlp_down, F, &(Part){NAME(0, "mlp.down_proj.weight"), d, false}, 1, c->mlp_bias))
        return -1;
    if (c->qk_norm && (!(b->q_norm = load_f32(ld, NAME(1, "self_attn.q_norm.weight"), hd, 0)) ||
                       !(b->k_norm = load_f32(ld, NAME(2, "self_attn.k_norm.weight"), hd, 0))))
        return -1;
#undef NAME
    return 0;
}

// Room for every tensor as F32 (the most a weight takes), with the panel layout's padding: rows to 16 weights,
// and 3 more rows; or as q8 panels, either way round, where a tiny matrix's padding makes those larger (a matrix
// stacked from parts takes no more q8 panels than its parts would alone; q4 panels take fewer bytes than q8's).
static size_t arena_bound(const StCheckpoint *ckpt) {
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
    return total;
}

// Bytes of the layer's weights and bias (q8, q4: the quants and scales of the panels, padding included).
static size_t linear_bytes(const Linear *lin) {
    const size_t w = lin->type == WEIGHT_Q8   ? q8_matrix_bytes(lin->n_out, lin->n_in)
                     : lin->type == WEIGHT_Q4 ? q4_matrix_bytes(lin->n_out, lin->n_in)
                                              : (size_t)lin->n_out * lin->n_in * weight_size(lin->type);
    return w + (lin->bias ? lin->n_out * sizeof(float) : 0);
}

// Memory for the weights: anonymous pages, 2 MB huge pages where the kernel allows (fewer TLB misses while the
// weights stream through; some 8% faster decoding here). NULL if out of memory.
static void *alloc_weights(size_t bytes) {
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: without it the pages are simply 4 kB
    return p;
}

static int alloc_scratch(Model *m, Err *err) {
    const Config *c = &m->cfg;
    const size_t d = c->n_embd, ld_d = row_stride(d), ld_att = row_stride((size_t)c->n_head * c->head_dim),
                 n_qkv = (size_t)(c->n_head + 2 * c->n_kv_head) * c->head_dim,
                 ld_f = row_stride((c->mlp == MLP_GATED ? 2 : 1) * (size_t)c->n_inner), half = c->head_dim / 2,
                 T = CHUNK_T;
    const size_t per_thread = (size_t)ATTENTION_ROWS * (c->n_positions + 2 * (size_t)c->head_dim);
    size_t floats = T * (d + ld_d + n_qkv + ld_att + ld_f + 2 * half) + (size_t)pool_size(m->pool) * per_thread;
    int n_in_max = c->n_embd > c->n_inner ? c->n_embd : c->n_inner;  // the widest matmul input: d, H·hd or F
    n_in_max = n_in_max > c->n_head * c->head_dim ? n_in_max : c->n_head * c->head_dim;
    const size_t q8_blocks_max = (size_t)q8_blocks(n_in_max);
    ForwardScratch *s = m->scratch = calloc(1, sizeof *s);
    float *mem = s ? aligned_alloc(ALIGN, align_up(floats * sizeof(float))) : NULL;
    const bool quantized = m->quant == QUANT_Q8 || m->quant == QUANT_Q4;
    if (s && quantized) s->xq = malloc(T * q8_blocks_max * sizeof(Q8Block));
    if (s && m->quant == QUANT_BF16) s->xb = malloc(T * panel_row_length(n_in_max) * sizeof(uint16_t));
    if (!mem || (quantized && !s->xq) || (m->quant == QUANT_BF16 && !s->xb)) {
        free(mem);
        return err_fmt(err, "out of memory for activations (%zu MB)", floats * 4 >> 20);
    }
    s->ld_d = (int)ld_d;
    s->ld_att = (int)ld_att;
    s->ld_f = (int)ld_f;
    s->n_qkv = (int)n_qkv;
    s->x = mem;
    s->h = s->x + T * d;
    s->qkv = s->h + T * ld_d;
    s->att = s->qkv + T * n_qkv;
    s->mlp = s->att + T * ld_att;
    s->cos = s->mlp + T * ld_f;
    s->sin = s->cos + T * half;
    s->scores = s->sin + T * half;
    s->att_rows = s->scores + (size_t)pool_size(m->pool) * ATTENTION_ROWS * c->n_positions;
    return 0;
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

// The weights of the checkpoint in ckpt, for the config in model->cfg, into model's arena.
static int load_weights(Model *model, Loader *ld) {
    const Config *c = &model->cfg;
    const bool gpt2 = c->model_type == MODEL_GPT2;
    const int d = c->n_embd;
    ld->prefix = gpt2 ? (st_find(ld->ckpt, "transformer.wte.weight") ? "transformer." : "")
                      : (st_find(ld->ckpt, "model.embed_tokens.weight") ? "model." : "");
    // Under q4 the embeddings and the head are held in q8 (as llama.cpp's Q4_0 files keep theirs in 6 bits): on
    // the shipped target, in q4 too they cost 2.6 points of top-1 agreement and 2.5 × the KL (docs/quantization.md).
    const Quant body = ld->quant;
    ld->quant = body == QUANT_Q4 ? QUANT_Q8 : body;
    if (load_linear(ld, &model->wte, d, &(Part){gpt2 ? "wte.weight" : "embed_tokens.weight", c->vocab_size, false},
                    1, false))
        return -1;
    ld->quant = body;
    if (c->positions == POSITIONS_LEARNED && !(model->wpe = load_f32(ld, "wpe.weight", c->n_positions, d)))
        return -1;
    if (c->positions == POSITIONS_ROTARY) {
        model->inv_freq = arena_take(ld, sizeof(float) * (size_t)c->head_dim / 2);
        rope_frequencies(model->inv_freq, c);
    }
    for (int l = 0; l < c->n_layer; l++)
        if (load_block(ld, &model->blocks[l], l, c)) return -1;
    if (!(model->norm_f.gamma = load_f32(ld, gpt2 ? "ln_f.weight" : "norm.weight", d, 0))) return -1;
    if (gpt2 && !(model->norm_f.beta = load_f32(ld, "ln_f.bias", d, 0))) return -1;
    // As in transformers: a tied model uses wte as its head even if the file also has lm_head.weight.
    model->lm_head = model->wte;
    if (c->tie_word_embeddings) return 0;
    if (!st_find(ld->ckpt, "lm_head.weight"))
        return err_fmt(ld->err, "%s: config.json sets tie_word_embeddings to false but tensor \"lm_head.weight\" is "
                       "missing", ld->dir);
    ld->prefix = "";  // the head is never under the body's prefix
    ld->quant = body == QUANT_Q4 ? QUANT_Q8 : body;
    return load_linear(ld, &model->lm_head, d, &(Part){"lm_head.weight", c->vocab_size, false}, 1, false);
}

int model_load(Model *model, const char *dir, ThreadPool *pool, Err *err) {
    return model_load_quantized(model, dir, pool, QUANT_NONE, err);
}

int model_load_quantized(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err) {
    *model = (Model){.pool = pool, .quant = quant, .max_threads = pool_size(pool),
                     .work_per_thread = MODEL_WORK_PER_THREAD};
    const char *why = NULL;
    if (!(model->kernels = kernels_select(&why))) return err_fmt(err, "%s", why);
    if (quant == QUANT_BF16 && !model->kernels->matmul_bf16_dot)
        return err_fmt(err, "bf16 arithmetic needs BF16 dot-product instructions (AVX512_BF16: Zen 4, Sapphire Rapids, "
                       "Cooper Lake), which the %s kernels lack", model->kernels->name);

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (config_load(&model->cfg, path, err)) return -1;
    snprintf(path, sizeof path, "%s/generation_config.json", dir);
    if (config_load_generation(&model->cfg, path, err)) return -1;
    const Config *c = &model->cfg;

    StCheckpoint ckpt;
    if (st_open(&ckpt, dir, err)) return -1;
    model->arena_size = arena_bound(&ckpt);
    model->arena = alloc_weights(model->arena_size);
    model->blocks = calloc((size_t)c->n_layer, sizeof(Block));
    if (!model->arena || !model->blocks) {
        st_close(&ckpt);
        model_free(model);
        return err_fmt(err, "%s: out of memory for %zu MB of weights", dir, model->arena_size >> 20);
    }
    Loader ld = {.ckpt = &ckpt, .dir = dir, .arena = model->arena, .size = model->arena_size, .err = err,
                 .kernels = model->kernels, .quant = quant, .pool = pool};
    int rc = load_weights(model, &ld);
    st_close(&ckpt);
    if (!rc) rc = alloc_scratch(model, err);
    if (rc) {
        model_free(model);
        return -1;
    }
    model->n_vocab = c->vocab_size;

    // Bytes one decode step streams: every block matrix, the head and the small vectors.
    const size_t norm_bytes = (c->norm == NORM_LAYER ? 2 : 1) * c->n_embd * sizeof(float);
    size_t bytes = linear_bytes(&model->lm_head) + norm_bytes;
    for (int l = 0; l < c->n_layer; l++) {
        const Block *b = &model->blocks[l];
        bytes += linear_bytes(&b->attn_qkv) + linear_bytes(&b->attn_out) + linear_bytes(&b->mlp_up) +
                 linear_bytes(&b->mlp_down) + 2 * norm_bytes;
    }
    model->weight_bytes = bytes;
    return 0;
}

const char *quant_name(Quant quant) {
    return quant == QUANT_Q8 ? "q8" : quant == QUANT_BF16 ? "bf16" : quant == QUANT_Q4 ? "q4" : "none";
}

int quant_from_name(Quant *quant, const char *name, const char *option, Err *err) {
    for (Quant q = QUANT_NONE; q <= QUANT_Q4; q++)
        if (strcmp(name, quant_name(q)) == 0) return *quant = q, 0;
    return err_fmt(err, "%s: expected none, q8, bf16 or q4, got \"%s\"", option, name);
}

static void free_scratch(Model *model) {
    if (model->scratch) free(model->scratch->x), free(model->scratch->xq), free(model->scratch->xb);
    free(model->scratch);
    model->scratch = NULL;
}

void model_free(Model *model) {
    free_scratch(model);
    free(model->blocks);
    if (model->arena) munmap(model->arena, model->arena_size);
    *model = (Model){0};
}

void model_limit_vocab(Model *model, int n_vocab) {
    if (n_vocab < 1 || n_vocab > model->cfg.vocab_size) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "model_limit_vocab: %d outside [1, %d]\n", n_vocab, model->cfg.vocab_size);
        abort();
    }
    model->weight_bytes -= linear_bytes(&model->lm_head);
    model->n_vocab = model->lm_head.n_out = n_vocab;  // the first rows of any layout are the first ids
    model->weight_bytes += linear_bytes(&model->lm_head);
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

int model_limit_context(Model *model, int n_ctx, Err *err) {
    if (n_ctx < 1) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "model_limit_context: %d positions\n", n_ctx);
        abort();
    }
    if (n_ctx >= model->cfg.n_positions) return 0;
    model->cfg.n_positions = n_ctx;  // (learned position embeddings past it are simply never read)
    free_scratch(model);
    return alloc_scratch(model, err);  // the attention scores: [threads, ATTENTION_ROWS, n_ctx]
}

int model_kv_init(const Model *model, KVCache *cache, Err *err) {
    const Config *c = &model->cfg;
    return kv_init(cache, c->n_layer, c->n_kv_head, c->n_positions, c->head_dim, err);
}

// ---- the forward pass ---------------------------------------------------------------------------------------

// Runs fn on as many threads as the job pays for: one per work_per_thread multiply-adds, at least one, at most
// max_threads (a hand-off to a thread and the wait for it cost microseconds, more than a small draft's matmul
// on it). Every job splits its outputs on fixed boundaries and each output is computed alone, so the thread
// count never changes a result.
static void run_job(const Model *m, PoolFn *fn, void *ctx, size_t multiply_adds) {
    size_t pays = m->work_per_thread ? multiply_adds / m->work_per_thread : (size_t)m->max_threads;
    pool_run_on(m->pool, pays < (size_t)m->max_threads ? (int)pays : m->max_threads, fn, ctx);
}

typedef enum { EPILOGUE_NONE, EPILOGUE_GELU_TANH, EPILOGUE_GELU_ERF, EPILOGUE_ADD } Epilogue;

// One matmul as a pool job: out = x Wᵀ + b, then the epilogue on the same columns by the same thread.
typedef struct {
    const Kernels *k;
    const Linear *lin;
    const float *x;     // [T, ld_x]
    const Q8Block *xq;  // [T, q8_blocks(n_in)]: x quantized, for q8 and q4 weights
    const uint16_t *xb; // [T, panel_row_length(n_in)]: x rounded to BF16, for QUANT_BF16
    float *out;         // [T, ld_out]
    int T, ld_x, ld_out;
    bool blas;          // OpenBLAS sgemm (single-threaded, on this thread's columns) instead of our kernel
    Epilogue epilogue;
    float *residual;    // EPILOGUE_ADD: residual[t, j] += out[t, j]    [T, n_out]
} LinearJob;

static void linear_thread(void *ctx, int thread, int n_threads) {
    const LinearJob *job = ctx;
    const Linear *lin = job->lin;
    int j0, j1;
    pool_share(lin->n_out, ROW_BLOCK, thread, n_threads, &j0, &j1);
    if (j0 == j1) return;
    const int n = j1 - j0;
    if (job->blas) {
        // Debian's single-threaded OpenBLAS is built without USE_LOCKING: its calls share one buffer pool, and two
        // threads inside sgemm at once corrupt each other's panels (OpenBLAS issue #2126; the rollback check's test
        // saw wrong keys after a 40-token prefill with the AVX2 kernels in 4 of 60 runs). So our threads take turns.
        static pthread_mutex_t openblas = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&openblas);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, job->T, n, lin->n_in, 1.0f, job->x, job->ld_x,
                    (const float *)lin->w + (size_t)j0 * lin->n_in, lin->n_in, 0.0f, job->out + j0, job->ld_out);
        pthread_mutex_unlock(&openblas);
        for (int t = 0; t < job->T && lin->bias; t++) job->k->add(job->out + (size_t)t * job->ld_out + j0, lin->bias + j0, n);
    } else if (lin->type == WEIGHT_Q8 || lin->type == WEIGHT_Q4) {
        MatmulQ8Fn *matmul = lin->type == WEIGHT_Q8 ? job->k->matmul_q8 : job->k->matmul_q4;
        matmul(job->out, job->xq, lin->w, lin->bias, job->T, lin->n_in, job->ld_out, j0, j1);
    } else if (job->xb) {
        job->k->matmul_bf16_dot(job->out, job->xb, lin->w, lin->bias, job->T, lin->n_in, job->ld_out, j0, j1);
    } else {
        job->k->matmul[lin->type](job->out, job->x, lin->w, lin->bias, job->T, lin->n_in, job->ld_x, job->ld_out, j0,
                                  j1);
    }
    for (int t = 0; t < job->T; t++) {
        float *row = job->out + (size_t)t * job->ld_out + j0;
        switch (job->epilogue) {
        case EPILOGUE_GELU_TANH: job->k->gelu_tanh(row, n); break;
        case EPILOGUE_GELU_ERF: job->k->gelu_erf(row, n); break;
        case EPILOGUE_ADD: job->k->add(job->residual + (size_t)t * lin->n_out + j0, row, n); break;
        case EPILOGUE_NONE: break;
        }
    }
}

// out = x Wᵀ + b (then the epilogue)      x: [T, ld_x]   out: [T, ld_out]
// Our kernels stream W once for all T rows and are batch-invariant. Where OpenBLAS is faster — F32 weights,
// many rows (long prompts), a kernel variant that says so — it takes over; each of our threads then runs a
// single-threaded sgemm on its own columns, one thread at a time (linear_thread says why), so OpenBLAS's threads
// never compete with ours for the cores.
// q8 and q4 weights take x quantized (kernels.h), QUANT_BF16's x rounded to BF16, once, here, for all threads; a row's
// quantization or rounding depends on that row alone, so batch invariance holds.
static void linear(const Model *m, float *out, int ld_out, const float *x, int ld_x, const Linear *lin, int T,
                   Epilogue ep, float *residual) {
    int blas_min = m->kernels->blas_min_rows;
    // (sgemm reads rows: a variant whose weights are in panels never names a crossover)
    bool blas = m->scratch->blas && lin->type == WEIGHT_F32 && blas_min > 0 && T >= blas_min && !m->kernels->panels;
    if (lin->type == WEIGHT_Q8 || lin->type == WEIGHT_Q4) m->kernels->quantize_q8(m->scratch->xq, x, T, lin->n_in, ld_x);
    uint16_t *xb = m->quant == QUANT_BF16 ? m->scratch->xb : NULL;
    if (xb) bf16_round_rows(xb, x, T, lin->n_in, ld_x, in_pair_order(m->kernels, WEIGHT_BF16));
    LinearJob job = {m->kernels, lin, x, m->scratch->xq, xb, out, T, ld_x, ld_out, blas, ep, residual};
    run_job(m, linear_thread, &job, (size_t)T * lin->n_out * lin->n_in);
}

// Causal self-attention for the chunk's T rows, whose K and V are already in the cache at rows pos0..pos0+T−1:
// att[t, head] = Σ_{s seen} softmax_s(q·k_s · scale) v_s over the cache rows row t sees — the first `base` and
// the rows of its path (ForwardScratch; a chain's row t: all rows ≤ pos0 + t) — with k and v those of the
// head's key/value head, head / (H / Hkv) (grouped-query attention). A path's leading run of rows 0..m−1 is
// passed as part of the row's first S = base + m positions, the rest as the kernel's tree bits: a chain passes
// no bits at all. The query rows that share a key/value head — its group's
// H / Hkv heads for each of the T tokens — go to the kernel together, which reads that head's keys and values
// once for all of them. A task is one key/value head and a share of its rows (at most ATTENTION_ROWS; more
// shares where there are more threads than key/value heads), key/value head major.
typedef struct {
    const Model *m;
    const KVCache *cache;
    int layer, T;
    float scale;
} AttentionJob;

static void attention_thread(void *ctx, int thread, int n_threads) {
    const AttentionJob *job = ctx;
    const Model *m = job->m;
    const ForwardScratch *s = m->scratch;
    const int Hkv = m->cfg.n_kv_head, hd = m->cfg.head_dim, group = m->cfg.n_head / Hkv, rows = group * job->T;
    int shares = (rows + ATTENTION_ROWS - 1) / ATTENTION_ROWS, want = (n_threads + Hkv - 1) / Hkv;
    if (shares < want) shares = want < rows ? want : rows;
    float *scores = s->scores + (size_t)thread * ATTENTION_ROWS * m->cfg.n_positions;
    float *q = s->att_rows + (size_t)thread * 2 * ATTENTION_ROWS * hd, *out = q + ATTENTION_ROWS * hd;  // [n, hd]
    int S[ATTENTION_ROWS], begin, end;
    uint64_t tree[ATTENTION_ROWS];
    pool_share(Hkv * shares, 1, thread, n_threads, &begin, &end);
    for (int task = begin; task < end; task++) {
        const int kv_head = task / shares, share = task % shares;
        const int r0 = (int)((long)rows * share / shares), n = (int)((long)rows * (share + 1) / shares) - r0;
        for (int g = 0; g < n; g++) {  // row r0 + g: token t, query head kv_head · group + (r0 + g) % group
            const int t = (r0 + g) / group, head = kv_head * group + (r0 + g) % group;
            memcpy(q + (size_t)g * hd, s->qkv + (size_t)t * s->n_qkv + head * hd, sizeof(float) * hd);
            const int leading = s->path[t] == UINT64_MAX ? 64 : __builtin_ctzll(~s->path[t]);  // rows 0..leading−1
            S[g] = s->base + leading;
            tree[g] = leading == 64 ? 0 : s->path[t] >> leading;
        }
        m->kernels->attention(out, hd, q, hd, S, s->tree ? tree : NULL, n, kv_keys(job->cache, job->layer, kv_head),
                              job->cache->ld_k, kv_values(job->cache, job->layer, kv_head), hd, job->scale, scores,
                              m->cfg.n_positions);
        for (int g = 0; g < n; g++) {
            const int t = (r0 + g) / group, head = kv_head * group + (r0 + g) % group;
            memcpy(s->att + (size_t)t * s->ld_att + head * hd, out + (size_t)g * hd, sizeof(float) * hd);
        }
    }
}

// SwiGLU's product for T rows of the MLP's hidden layer, in place: mlp[t, :F] = SiLU(gate) ⊙ up, where row t holds
// [gate | up] (F each). Each thread takes its share of the F columns in every row.
typedef struct {
    const Model *m;
    int T;
} GateJob;

static void gate_thread(void *ctx, int thread, int n_threads) {
    const GateJob *job = ctx;
    const ForwardScratch *s = job->m->scratch;
    const int F = job->m->cfg.n_inner;
    int j0, j1;
    pool_share(F, ROW_BLOCK, thread, n_threads, &j0, &j1);
    for (int t = 0; t < job->T && j0 < j1; t++) {
        float *gate = s->mlp + (size_t)t * s->ld_f + j0;
        job->m->kernels->silu_mul(gate, gate, gate + F, j1 - j0);
    }
}

// The normalisation of T rows of the residual stream into h: LayerNorm or RMSNorm.    x: [T, d]   h: [T, ld_d]
static void norm_rows(const Model *m, const float *x, const Norm *norm, int T) {
    const int d = m->cfg.n_embd, ld_d = m->scratch->ld_d;
    for (int t = 0; t < T; t++) {
        float *h = m->scratch->h + (size_t)t * ld_d;
        if (m->cfg.norm == NORM_LAYER)
            m->kernels->layernorm(h, x + (size_t)t * d, norm->gamma, norm->beta, d, m->cfg.norm_epsilon);
        else
            m->kernels->rmsnorm(h, x + (size_t)t * d, norm->gamma, d, m->cfg.norm_epsilon);
    }
}

// The queries and keys of row t (in place in qkv) made ready for attention: Qwen3's per-head RMSNorm, then the
// rotation by the angles of its position; then the key and value of each key/value head go into the cache, at
// cache row `row`.
static void prepare_qkv(const Model *m, const Block *b, KVCache *cache, int layer, int row, int t) {
    const Config *c = &m->cfg;
    const ForwardScratch *s = m->scratch;
    const int hd = c->head_dim, half = hd / 2;
    float *q = s->qkv + (size_t)t * s->n_qkv, *k = q + c->n_head * hd, *v = k + c->n_kv_head * hd;
    for (int head = 0; head < c->n_head + c->n_kv_head; head++) {  // the H query heads, then the Hkv key heads
        float *x = q + head * hd;  // k follows q directly
        if (b->q_norm) m->kernels->rmsnorm(x, x, head < c->n_head ? b->q_norm : b->k_norm, hd, c->norm_epsilon);
        if (c->positions == POSITIONS_ROTARY)
            m->kernels->rope(x, s->cos + (size_t)t * half, s->sin + (size_t)t * half, half);
    }
    for (int head = 0; head < c->n_kv_head; head++) kv_store(cache, layer, head, row, k + head * hd, v + head * hd);
}

// One transformer block over the chunk's T rows, cache rows pos0.. (x: [T, d], updated in place).
static void block_forward(const Model *m, KVCache *cache, int layer, int pos0, int T) {
    const Config *c = &m->cfg;
    const Block *b = &m->blocks[layer];
    ForwardScratch *s = m->scratch;
    const int ld_d = s->ld_d, F = c->n_inner;

    // Attention sub-block: x += Attn(Norm1(x)) W_out + b_out
    norm_rows(m, s->x, &b->norm1, T);
    linear(m, s->qkv, s->n_qkv, s->h, ld_d, &b->attn_qkv, T, EPILOGUE_NONE, NULL);  // qkv: [T, n_qkv] = [q | k | v]
    for (int t = 0; t < T; t++) prepare_qkv(m, b, cache, layer, pos0 + t, t);
    float scale = 1.0f;
    if (c->scale_attn_weights) scale /= sqrtf((float)c->head_dim);
    if (c->scale_attn_by_inverse_layer_idx) scale /= (float)(layer + 1);
    AttentionJob att = {m, cache, layer, T, scale};
    run_job(m, attention_thread, &att, (size_t)T * (pos0 + T) * 2 * c->n_head * c->head_dim);
    linear(m, s->h, ld_d, s->att, s->ld_att, &b->attn_out, T, EPILOGUE_ADD, s->x);

    // MLP sub-block: x += GELU(Norm2(x) W_up + b_up) W_down + b_down, or gated:
    //                x += (SiLU(Norm2(x) W_gate) ⊙ Norm2(x) W_up) W_down
    norm_rows(m, s->x, &b->norm2, T);
    Epilogue act = c->mlp == MLP_GATED ? EPILOGUE_NONE
                   : c->activation == ACT_GELU_ERF ? EPILOGUE_GELU_ERF : EPILOGUE_GELU_TANH;
    linear(m, s->mlp, s->ld_f, s->h, ld_d, &b->mlp_up, T, act, NULL);
    if (c->mlp == MLP_GATED) {
        GateJob gate = {m, T};
        run_job(m, gate_thread, &gate, (size_t)T * F * 16);  // an exp and a division: some 16 multiply-adds
    }
    linear(m, s->h, ld_d, s->mlp, s->ld_f, &b->mlp_down, T, EPILOGUE_ADD, s->x);
}

// Row `token` of the embedding table as floats, 16 consecutive weights at a time (together in either layout).
static void embedding_row(const Model *m, float *out, int token) {
    const Linear *wte = &m->wte;
    if (wte->type == WEIGHT_Q8) {  // d · q: the q8 head and the embeddings are one matrix
        for (int i = 0; i < wte->n_in; i++) out[i] = q8_weight(wte->w, wte->n_in, token, i);
        return;
    }
    if (wte->type == WEIGHT_Q4) {  // the same for q4
        for (int i = 0; i < wte->n_in; i++) out[i] = q4_weight(wte->w, wte->n_in, token, i);
        return;
    }
    const size_t elem = weight_size(wte->type);
    const StDtype dtype = wte->type == WEIGHT_F16 ? ST_F16 : wte->type == WEIGHT_BF16 ? ST_BF16 : ST_F32;
    const bool pairs = in_pair_order(m->kernels, wte->type);
    for (int i = 0; i < wte->n_in; i += 16) {
        const size_t at = weight_index(m->kernels->panels, pairs, wte->n_in, token, i);
        const int count = wte->n_in - i < 16 ? wte->n_in - i : 16;
        uint8_t slice[16 * sizeof(float)];  // the slice's weights in order
        for (int e = 0; e < count; e++)
            memcpy(slice + (size_t)e * elem, (const uint8_t *)wte->w + (at + (size_t)slice_place(pairs, e)) * elem,
                   elem);
        st_to_f32(out + i, slice, dtype, (size_t)count);
    }
}

// The rotary angles p·ω_i of the chunk's rows' positions p (cos, sin: [T, hd/2]). The angle is a float product,
// as in transformers; its cosine and sine are rounded from double, so a position's angles never depend on T.
static void rope_angles(const Model *m, int T) {
    const int half = m->cfg.head_dim / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float angle = (float)m->scratch->position[t] * m->inv_freq[i];
            m->scratch->cos[(size_t)t * half + i] = (float)cos(angle);
            m->scratch->sin[(size_t)t * half + i] = (float)sin(angle);
        }
}

// The rows of a chunk into the scratch (ForwardScratch): rows [n_before, n_before + T) of a tree from cache row
// base, n_before + T ≤ 64, in which row j follows row parent[j] ∈ [−1, j), −1 the cache row before base
// (parent NULL: a chain, parent[j] = j − 1).
static void chunk_rows(ForwardScratch *s, const int *parent, int base, int n_before, int T) {
    int depth[64];
    uint64_t path[64];
    s->base = base;
    s->tree = false;
    for (int j = 0; j < n_before + T; j++) {
        const int p = parent ? parent[j] : j - 1;
        depth[j] = p < 0 ? 0 : depth[p] + 1;
        path[j] = (p < 0 ? 0 : path[p]) | (uint64_t)1 << j;
        if (j < n_before) continue;
        s->position[j - n_before] = base + depth[j];
        s->path[j - n_before] = path[j];
        s->tree |= path[j] != UINT64_MAX >> (63 - j);  // not all of rows 0..j
    }
}

// The forward pass over T rows (model_forward; model_extend_tree, parent as in chunk_rows with n_before =
// cache->len − base, n_before + T ≤ CHUNK_T), in chunks of up to CHUNK_T rows.
static int forward(Model *model, KVCache *cache, int base, const int *tokens, const int *parent, int T, float *logits,
                   bool all_logits, const char *caller, Err *err) {
    const Config *c = &model->cfg;
    const int d = c->n_embd, V = model->n_vocab;
    if (T < 1) return err_fmt(err, "%s: no tokens to process", caller);
    if (cache->len + T > c->n_positions)
        return err_fmt(err, "context full: %d cached + %d new tokens exceed the model's context of %d positions "
                       "(n_positions or max_position_embeddings in config.json, or less: --ctx)", cache->len, T, c->n_positions);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= c->vocab_size)
            return err_fmt(err, "token id %d is outside the vocabulary [0, %d)", tokens[t], c->vocab_size);

    ForwardScratch *s = model->scratch;
    s->blas = !parent;
    for (int first = 0; first < T; first += CHUNK_T) {
        const int n = T - first < CHUNK_T ? T - first : CHUNK_T, pos0 = cache->len;
        chunk_rows(s, parent, parent ? base : pos0, parent ? pos0 - base : 0, n);
        for (int t = 0; t < n; t++) {  // x = wte[token] (+ wpe[position])
            embedding_row(model, s->x + (size_t)t * d, tokens[first + t]);
            if (model->wpe) model->kernels->add(s->x + (size_t)t * d, model->wpe + (size_t)s->position[t] * d, d);
        }
        if (model->inv_freq) rope_angles(model, n);
        for (int l = 0; l < c->n_layer; l++) block_forward(model, cache, l, pos0, n);
        cache->len += n;

        // logits = Norm_f(x) W_lmᵀ, for every row or for the very last one only
        if (all_logits) {
            norm_rows(model, s->x, &model->norm_f, n);
            linear(model, logits + (size_t)first * V, V, s->h, s->ld_d, &model->lm_head, n, EPILOGUE_NONE, NULL);
        } else if (first + n == T) {
            norm_rows(model, s->x + (size_t)(n - 1) * d, &model->norm_f, 1);
            linear(model, logits, V, s->h, s->ld_d, &model->lm_head, 1, EPILOGUE_NONE, NULL);
        }
    }
    return 0;
}

int model_forward(Model *model, KVCache *cache, const int *tokens, int T, float *logits, bool all_logits,
                  Err *err) {
    return forward(model, cache, cache->len, tokens, NULL, T, logits, all_logits, "model_forward", err);
}

int model_extend_tree(Model *model, KVCache *cache, int base, const int *tokens, const int *parent, int T,
                      float *logits, Err *err) {
    const int before = cache->len - base;  // the tree's rows in the cache already
    if (base < 0 || before < 0)
        return err_fmt(err, "token tree: its first row %d is outside the cache's %d rows", base, cache->len);
    if (before + T > TREE_MAX_ROWS)
        return err_fmt(err, "token tree: %d + %d rows, more than TREE_MAX_ROWS = %d", before, T,
                       TREE_MAX_ROWS);
    for (int j = 0; j < before + T; j++)
        if (parent[j] < -1 || parent[j] >= j)
            return err_fmt(err, "token tree: row %d follows row %d, outside [-1, %d)", j, parent[j], j);
    return forward(model, cache, base, tokens, parent, T, logits, true, "token tree", err);
}

int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err) {
    return model_extend_tree(model, cache, cache->len, tokens, parent, T, logits, err);
}
