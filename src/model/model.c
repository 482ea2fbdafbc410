// model.c — GPT-2 (Radford et al. 2019): loading a Hugging Face checkpoint, and the forward pass.
//
// Dimension key: T new tokens, d model width, H heads, hd = d/H, F MLP width, V vocabulary, L layers,
// S positions attended to, P = n_positions.
//
// The forward pass, for each new token at position p (pre-LayerNorm GPT-2):
//   x = wte[token] + wpe[p]
//   for each block:  x = x + Attn(LN1(x))        Attn: causal multi-head self-attention over positions ≤ p
//                    x = x + MLP(LN2(x))         MLP(h) = GELU(h W_up + b_up) W_down + b_down
//   logits = LN_f(x) W_lmᵀ                       W_lm = wte unless the checkpoint unties the head
#include "model/model.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "checkpoint/safetensors.h"

enum {
    CHUNK_T = 64,       // a forward processes at most this many tokens at a time (bounds the scratch memory)
    ROW_BLOCK = 16,     // matmul output columns are split between threads on multiples of this
    PARALLEL_MIN_WORK = 1 << 16,  // multiply-adds below which a job runs on the calling thread alone (a hand-off
                                  // to the workers costs microseconds: more than a small draft's matmul)
    ALIGN = 64,
};

// Activations for one chunk of up to CHUNK_T tokens. The matmuls' inputs h, att and mlp have rows ld_d and
// ld_f floats apart (see row_stride in kernels.h).
typedef struct ForwardScratch {
    float *x;       // [CHUNK_T, d]     the residual stream
    float *h;       // [CHUNK_T, ld_d]  LayerNorm output
    float *qkv;     // [CHUNK_T, 3d]    queries, keys, values
    float *att;     // [CHUNK_T, ld_d]  attention output (heads concatenated)
    float *mlp;     // [CHUNK_T, ld_f]  MLP hidden layer
    float *scores;  // [threads, P]     attention weights, one row per thread
    Q8Block *xq;    // [CHUNK_T, q8_blocks(max(d, F))]  a q8 matmul's input, quantized (QUANT_Q8 only)
    int ld_d, ld_f;
} ForwardScratch;

// ---- loading ------------------------------------------------------------------------------------------------

// Everything model_load needs while it reads tensors out of the checkpoint into the arena.
typedef struct {
    const StCheckpoint *ckpt;
    const char *dir;
    const char *prefix;     // "transformer." or ""
    bool panels;            // the weight layout of the selected kernels (kernels.h)
    Quant quant;            // QUANT_Q8: matrices are quantized as they are read, on the pool's threads
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

// A vector (bias, LayerNorm parameter, position table) as F32 in the arena.
static const float *load_f32(Loader *ld, const char *name, int64_t dim0, int64_t dim1) {
    const StTensor *t = fetch(ld, name, dim0, dim1);
    if (!t) return NULL;
    float *out = arena_take(ld, (size_t)t->n_elements * sizeof(float));
    st_to_f32(out, t->data, t->dtype, (size_t)t->n_elements);
    return out;
}

// Quantizing one matrix to q8 as a pool job: each thread its share of the panels.
typedef struct {
    const StTensor *t;
    uint8_t *w;                 // q8_matrix_bytes(n_out, n_in)
    float *rows;                // [threads, 16, n_in]: each thread's panel as floats
    int n_out, n_in;
    bool conv1d;
} QuantizeJob;

static void quantize_thread(void *ctx, int thread, int n_threads) {
    QuantizeJob *job = ctx;
    const StTensor *t = job->t;
    const int n_out = job->n_out, n_in = job->n_in;
    const size_t elem = st_dtype_size(t->dtype);
    int p0, p1;
    pool_share((n_out + Q8_PANEL - 1) / Q8_PANEL, 1, thread, n_threads, &p0, &p1);
    float *rows = job->rows + (size_t)thread * Q8_PANEL * n_in;  // [16, n_in]
    for (int p = p0; p < p1; p++) {
        const int j0 = p * Q8_PANEL, n_rows = n_out - j0 < Q8_PANEL ? n_out - j0 : Q8_PANEL;
        for (int r = 0; r < n_rows && !job->conv1d; r++)
            st_to_f32(rows + (size_t)r * n_in, t->data + (size_t)(j0 + r) * n_in * elem, t->dtype, (size_t)n_in);
        for (int i = 0; i < n_in && job->conv1d; i++) {
            float column[Q8_PANEL];  // stored[i, j0..j0+n_rows) = W[j0..j0+n_rows, i]
            st_to_f32(column, t->data + ((size_t)i * n_out + j0) * elem, t->dtype, (size_t)n_rows);
            for (int r = 0; r < n_rows; r++) rows[(size_t)r * n_in + i] = column[r];
        }
        q8_quantize_panel(job->w + (size_t)p * q8_panel_bytes(n_in), rows, n_rows, n_in, n_in);
    }
}

// The matrix of tensor t quantized to q8 panels of 16 rows (kernels.h), from any stored dtype, on the pool's
// threads: each panel's rows gathered as floats — 16 consecutive weights of each input at a time from Conv1D's
// [n_in, n_out] — then quantized.
static int load_matrix_q8(Loader *ld, Linear *lin, const StTensor *t, bool conv1d) {
    QuantizeJob job = {t, arena_take(ld, q8_matrix_bytes(lin->n_out, lin->n_in)),
                       malloc(sizeof(float) * (size_t)pool_size(ld->pool) * Q8_PANEL * lin->n_in), lin->n_out,
                       lin->n_in, conv1d};
    if (!job.rows) return err_fmt(ld->err, "out of memory quantizing \"%s\"", t->name);
    pool_run(ld->pool, quantize_thread, &job);
    free(job.rows);
    lin->type = WEIGHT_Q8;
    lin->w = job.w;
    return 0;
}

// A weight matrix [n_out, n_in] in its stored dtype, in the kernels' layout (rows, or panels of 4 rows whose
// 16-weight slices alternate: kernels.h), or quantized to q8. `conv1d`: stored [n_in, n_out] (GPT-2's Conv1D),
// so it is transposed here, once; otherwise stored [n_out, n_in] already (embeddings, lm_head).
static int load_matrix(Loader *ld, Linear *lin, const char *name, int n_out, int n_in, bool conv1d) {
    const StTensor *t = conv1d ? fetch(ld, name, n_in, n_out) : fetch(ld, name, n_out, n_in);
    if (!t) return -1;
    lin->type = weight_type(t->dtype);
    lin->n_out = n_out;
    lin->n_in = n_in;
    lin->bias = NULL;
    if (ld->quant == QUANT_Q8) return load_matrix_q8(ld, lin, t, conv1d);
    const size_t elem = weight_size(lin->type), bytes = weight_elements(ld->panels, n_out, n_in) * elem;
    uint8_t *w = arena_take(ld, bytes);  // zero-filled (fresh anonymous pages): the panels' padding
    lin->w = w;
    if (!conv1d) {  // 16 consecutive weights of a row stay together in either layout
        for (int j = 0; j < n_out; j++)
            for (int i = 0; i < n_in; i += 16)
                memcpy(w + weight_index(ld->panels, n_in, j, i) * elem, t->data + ((size_t)j * n_in + i) * elem,
                       (size_t)(n_in - i < 16 ? n_in - i : 16) * elem);
        return 0;
    }
    // W[j, i] = stored[i, j], in 32 × 32 tiles so that both sides stay in cache.
    for (int i0 = 0; i0 < n_in; i0 += 32)
        for (int j0 = 0; j0 < n_out; j0 += 32)
            for (int i = i0; i < i0 + 32 && i < n_in; i++)
                for (int j = j0; j < j0 + 32 && j < n_out; j++)
                    memcpy(w + weight_index(ld->panels, n_in, j, i) * elem,
                           t->data + ((size_t)i * n_out + j) * elem, elem);
    return 0;
}

// A Conv1D layer: "<name>.weight" [n_in, n_out] and "<name>.bias" [n_out].
static int load_conv1d(Loader *ld, Linear *lin, const char *name, int n_in, int n_out) {
    char key[160];
    snprintf(key, sizeof key, "%s.weight", name);
    if (load_matrix(ld, lin, key, n_out, n_in, true)) return -1;
    snprintf(key, sizeof key, "%s.bias", name);
    return (lin->bias = load_f32(ld, key, n_out, 0)) ? 0 : -1;
}

static int load_block(Loader *ld, Block *b, int layer, const Config *c) {
    const int d = c->n_embd, F = c->n_inner;
    char name[128];
#define KEY(suffix) (snprintf(name, sizeof name, "h.%d.%s", layer, suffix), name)
    if (!(b->ln1_gamma = load_f32(ld, KEY("ln_1.weight"), d, 0))) return -1;
    if (!(b->ln1_beta = load_f32(ld, KEY("ln_1.bias"), d, 0))) return -1;
    if (load_conv1d(ld, &b->attn_qkv, KEY("attn.c_attn"), d, 3 * d)) return -1;
    if (load_conv1d(ld, &b->attn_proj, KEY("attn.c_proj"), d, d)) return -1;
    if (!(b->ln2_gamma = load_f32(ld, KEY("ln_2.weight"), d, 0))) return -1;
    if (!(b->ln2_beta = load_f32(ld, KEY("ln_2.bias"), d, 0))) return -1;
    if (load_conv1d(ld, &b->mlp_up, KEY("mlp.c_fc"), d, F)) return -1;
    if (load_conv1d(ld, &b->mlp_down, KEY("mlp.c_proj"), F, d)) return -1;
#undef KEY
    return 0;
    // h.N.attn.bias and h.N.attn.masked_bias (the causal mask as a buffer, in old exports) are never read.
}

// Upper bound of the arena: every tensor of the checkpoint, F32-sized and aligned.
// Room for every tensor as F32 (the most a weight takes), with the panel layout's padding: rows to 16 weights,
// and 3 more rows; or as q8 panels, either way round, where a tiny matrix's padding makes those larger.
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

// Bytes of the layer's weights and bias (q8: the quants and scales of the panels, padding included).
static size_t linear_bytes(const Linear *lin) {
    const size_t w = lin->type == WEIGHT_Q8 ? q8_matrix_bytes(lin->n_out, lin->n_in)
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
    size_t d = c->n_embd, ld_d = row_stride(d), ld_f = row_stride(c->n_inner), T = CHUNK_T;
    size_t floats = T * (d + ld_d + 3 * d + ld_d + ld_f) + (size_t)pool_size(m->pool) * c->n_positions;
    size_t q8_blocks_max = (size_t)q8_blocks(c->n_inner > c->n_embd ? c->n_inner : c->n_embd);
    ForwardScratch *s = m->scratch = calloc(1, sizeof *s);
    float *mem = s ? aligned_alloc(ALIGN, align_up(floats * sizeof(float))) : NULL;
    if (s && m->quant == QUANT_Q8) s->xq = malloc(T * q8_blocks_max * sizeof(Q8Block));
    if (!mem || (m->quant == QUANT_Q8 && !s->xq)) {
        free(mem);
        return err_fmt(err, "out of memory for activations (%zu MB)", floats * 4 >> 20);
    }
    s->ld_d = (int)ld_d;
    s->ld_f = (int)ld_f;
    s->x = mem;
    s->h = s->x + T * d;
    s->qkv = s->h + T * ld_d;
    s->att = s->qkv + T * 3 * d;
    s->mlp = s->att + T * ld_d;
    s->scores = s->mlp + T * ld_f;
    return 0;
}

int model_load(Model *model, const char *dir, ThreadPool *pool, Err *err) {
    return model_load_quantized(model, dir, pool, QUANT_NONE, err);
}

int model_load_quantized(Model *model, const char *dir, ThreadPool *pool, Quant quant, Err *err) {
    *model = (Model){.pool = pool, .quant = quant};
    const char *why = NULL;
    if (!(model->kernels = kernels_select(&why))) return err_fmt(err, "%s", why);

    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (config_load(&model->cfg, path, err)) return -1;
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
                 .panels = model->kernels->panels, .quant = quant, .pool = pool,
                 .prefix = st_find(&ckpt, "transformer.wte.weight") ? "transformer." : ""};

    int rc = load_matrix(&ld, &model->wte, "wte.weight", c->vocab_size, c->n_embd, false);
    if (!rc) rc = (model->wpe = load_f32(&ld, "wpe.weight", c->n_positions, c->n_embd)) ? 0 : -1;
    for (int l = 0; l < c->n_layer && !rc; l++) rc = load_block(&ld, &model->blocks[l], l, c);
    if (!rc) rc = (model->lnf_gamma = load_f32(&ld, "ln_f.weight", c->n_embd, 0)) ? 0 : -1;
    if (!rc) rc = (model->lnf_beta = load_f32(&ld, "ln_f.bias", c->n_embd, 0)) ? 0 : -1;
    // As in transformers: a tied model uses wte as its head even if the file also has lm_head.weight.
    model->lm_head = model->wte;
    if (!rc && !c->tie_word_embeddings) {
        if (!st_find(&ckpt, "lm_head.weight"))
            rc = err_fmt(err, "%s: config.json sets tie_word_embeddings to false but tensor \"lm_head.weight\" is "
                         "missing", dir);
        else {
            ld.prefix = "";  // the head is never under "transformer."
            rc = load_matrix(&ld, &model->lm_head, "lm_head.weight", c->vocab_size, c->n_embd, false);
        }
    }
    st_close(&ckpt);
    if (!rc) rc = alloc_scratch(model, err);
    if (rc) {
        model_free(model);
        return -1;
    }

    // Bytes one decode step streams: every block matrix, the head and the small vectors.
    size_t bytes = linear_bytes(&model->lm_head) + 2 * c->n_embd * sizeof(float);
    for (int l = 0; l < c->n_layer; l++) {
        const Block *b = &model->blocks[l];
        bytes += linear_bytes(&b->attn_qkv) + linear_bytes(&b->attn_proj) + linear_bytes(&b->mlp_up) +
                 linear_bytes(&b->mlp_down) + 4 * c->n_embd * sizeof(float);
    }
    model->weight_bytes = bytes;
    return 0;
}

void model_free(Model *model) {
    if (model->scratch) free(model->scratch->x), free(model->scratch->xq);
    free(model->scratch);
    free(model->blocks);
    if (model->arena) munmap(model->arena, model->arena_size);
    *model = (Model){0};
}

int model_kv_init(const Model *model, KVCache *cache, Err *err) {
    const Config *c = &model->cfg;
    return kv_init(cache, c->n_layer, c->n_head, c->n_positions, c->n_embd / c->n_head, err);
}

// ---- the forward pass ---------------------------------------------------------------------------------------

// Runs fn on every thread of the pool, or on the calling thread alone when the job is too small to share.
static void run_job(const Model *m, PoolFn *fn, void *ctx, size_t multiply_adds) {
    if (multiply_adds < PARALLEL_MIN_WORK) fn(ctx, 0, 1);
    else pool_run(m->pool, fn, ctx);
}

typedef enum { EPILOGUE_NONE, EPILOGUE_GELU_TANH, EPILOGUE_GELU_ERF, EPILOGUE_ADD } Epilogue;

// One matmul as a pool job: out = x Wᵀ + b, then the epilogue on the same columns by the same thread.
typedef struct {
    const Kernels *k;
    const Linear *lin;
    const float *x;     // [T, ld_x]
    const Q8Block *xq;  // [T, q8_blocks(n_in)]: x quantized, for q8 weights
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, job->T, n, lin->n_in, 1.0f, job->x, job->ld_x,
                    (const float *)lin->w + (size_t)j0 * lin->n_in, lin->n_in, 0.0f, job->out + j0, job->ld_out);
        for (int t = 0; t < job->T && lin->bias; t++) job->k->add(job->out + (size_t)t * job->ld_out + j0, lin->bias + j0, n);
    } else if (lin->type == WEIGHT_Q8) {
        job->k->matmul_q8(job->out, job->xq, lin->w, lin->bias, job->T, lin->n_in, job->ld_out, j0, j1);
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
// single-threaded sgemm on its own columns, so OpenBLAS's threads never compete with ours for the cores.
// q8 weights take x quantized (kernels.h), once, here, for all threads; a row's quantization depends on that
// row alone, so batch invariance holds.
static void linear(const Model *m, float *out, int ld_out, const float *x, int ld_x, const Linear *lin, int T,
                   Epilogue ep, float *residual) {
    int blas_min = m->kernels->blas_min_rows;
    // (sgemm reads rows: a variant whose weights are in panels never names a crossover)
    bool blas = lin->type == WEIGHT_F32 && blas_min > 0 && T >= blas_min && !m->kernels->panels;
    if (lin->type == WEIGHT_Q8) m->kernels->quantize_q8(m->scratch->xq, x, T, lin->n_in, ld_x);
    LinearJob job = {m->kernels, lin, x, m->scratch->xq, out, T, ld_x, ld_out, blas, ep, residual};
    run_job(m, linear_thread, &job, (size_t)T * lin->n_out * lin->n_in);
}

// Causal self-attention for T new tokens at positions pos0..pos0+T−1, whose K and V rows are already in the
// cache: att[t, head] = Σ_{s ≤ pos0+t} softmax_s(q·k_s · scale) v_s. One task per (head, token) pair, head
// major: a thread's consecutive tasks read the same head's keys and values, which stay in its cache.
typedef struct {
    const Model *m;
    const KVCache *cache;
    int layer, pos0, T;
    float scale;
} AttentionJob;

static void attention_thread(void *ctx, int thread, int n_threads) {
    const AttentionJob *job = ctx;
    const Model *m = job->m;
    const int d = m->cfg.n_embd, H = m->cfg.n_head, hd = d / H;
    float *scores = m->scratch->scores + (size_t)thread * m->cfg.n_positions;
    int begin, end;
    pool_share(H * job->T, 1, thread, n_threads, &begin, &end);
    for (int task = begin; task < end; task++) {
        int head = task / job->T, t = task % job->T;
        const float *q = m->scratch->qkv + (size_t)t * 3 * d + head * hd;  // q: [hd]
        const float *kt = kv_keys(job->cache, job->layer, head);            // Kᵀ: [hd, n_ctx], rows ld_k apart
        const float *v = kv_values(job->cache, job->layer, head);           // V: [n_ctx, hd]
        float *out = m->scratch->att + (size_t)t * m->scratch->ld_d + head * hd;
        m->kernels->attention(out, q, kt, job->cache->ld_k, v, scores, job->pos0 + t + 1, hd, job->scale);
    }
}

// The layer normalisation of T rows of the residual stream into h.    x: [T, d]   h: [T, ld_d]
static void layernorm_rows(const Model *m, const float *x, const float *gamma, const float *beta, int T) {
    const int d = m->cfg.n_embd, ld_d = m->scratch->ld_d;
    for (int t = 0; t < T; t++)
        m->kernels->layernorm(m->scratch->h + (size_t)t * ld_d, x + (size_t)t * d, gamma, beta, d,
                              m->cfg.layer_norm_epsilon);
}

// One transformer block over the chunk's T tokens (x: [T, d], updated in place).
static void block_forward(const Model *m, KVCache *cache, int layer, int pos0, int T) {
    const Config *c = &m->cfg;
    const Block *b = &m->blocks[layer];
    ForwardScratch *s = m->scratch;
    const int d = c->n_embd, ld_d = s->ld_d;

    // Attention sub-block: x += Attn(LN1(x)) W_proj + b_proj
    layernorm_rows(m, s->x, b->ln1_gamma, b->ln1_beta, T);
    linear(m, s->qkv, 3 * d, s->h, ld_d, &b->attn_qkv, T, EPILOGUE_NONE, NULL);  // qkv: [T, 3d] = [q | k | v]
    const int H = c->n_head, hd = d / H;
    for (int t = 0; t < T; t++)  // append each head's k and v to the cache
        for (int head = 0; head < H; head++) {
            const float *qkv_t = s->qkv + (size_t)t * 3 * d + head * hd;
            kv_store(cache, layer, head, pos0 + t, qkv_t + d, qkv_t + 2 * d);
        }
    float scale = 1.0f;
    if (c->scale_attn_weights) scale /= sqrtf((float)hd);
    if (c->scale_attn_by_inverse_layer_idx) scale /= (float)(layer + 1);
    AttentionJob att = {m, cache, layer, pos0, T, scale};
    run_job(m, attention_thread, &att, (size_t)T * (pos0 + T) * 2 * d);
    linear(m, s->h, ld_d, s->att, ld_d, &b->attn_proj, T, EPILOGUE_ADD, s->x);

    // MLP sub-block: x += GELU(LN2(x) W_up + b_up) W_down + b_down
    layernorm_rows(m, s->x, b->ln2_gamma, b->ln2_beta, T);
    Epilogue gelu = c->activation == ACT_GELU_ERF ? EPILOGUE_GELU_ERF : EPILOGUE_GELU_TANH;
    linear(m, s->mlp, s->ld_f, s->h, ld_d, &b->mlp_up, T, gelu, NULL);
    linear(m, s->h, ld_d, s->mlp, s->ld_f, &b->mlp_down, T, EPILOGUE_ADD, s->x);
}

// Row `token` of the embedding table as floats, 16 consecutive weights at a time (together in either layout).
static void embedding_row(const Model *m, float *out, int token) {
    const Linear *wte = &m->wte;
    if (wte->type == WEIGHT_Q8) {  // d · q: the q8 head and the embeddings are one matrix
        for (int i = 0; i < wte->n_in; i++) out[i] = q8_weight(wte->w, wte->n_in, token, i);
        return;
    }
    const size_t elem = weight_size(wte->type);
    const StDtype dtype = wte->type == WEIGHT_F16 ? ST_F16 : wte->type == WEIGHT_BF16 ? ST_BF16 : ST_F32;
    for (int i = 0; i < wte->n_in; i += 16) {
        const size_t at = weight_index(m->kernels->panels, wte->n_in, token, i);
        const uint8_t *slice = (const uint8_t *)wte->w + at * elem;
        st_to_f32(out + i, slice, dtype, (size_t)(wte->n_in - i < 16 ? wte->n_in - i : 16));
    }
}

int model_forward(Model *model, KVCache *cache, const int *tokens, int T, float *logits, bool all_logits,
                  Err *err) {
    const Config *c = &model->cfg;
    const int d = c->n_embd, V = c->vocab_size;
    if (T < 1) return err_fmt(err, "model_forward: no tokens to process");
    if (cache->len + T > c->n_positions)
        return err_fmt(err, "context full: %d cached + %d new tokens exceed the model's context of %d positions "
                       "(n_positions in config.json)", cache->len, T, c->n_positions);
    for (int t = 0; t < T; t++)
        if (tokens[t] < 0 || tokens[t] >= V)
            return err_fmt(err, "token id %d is outside the vocabulary [0, %d)", tokens[t], V);

    ForwardScratch *s = model->scratch;
    for (int first = 0; first < T; first += CHUNK_T) {
        const int n = T - first < CHUNK_T ? T - first : CHUNK_T, pos0 = cache->len;
        for (int t = 0; t < n; t++) {  // x = wte[token] + wpe[position]
            embedding_row(model, s->x + (size_t)t * d, tokens[first + t]);
            model->kernels->add(s->x + (size_t)t * d, model->wpe + (size_t)(pos0 + t) * d, d);
        }
        for (int l = 0; l < c->n_layer; l++) block_forward(model, cache, l, pos0, n);
        cache->len += n;

        // logits = LN_f(x) W_lmᵀ, for every row or for the very last one only
        if (all_logits) {
            layernorm_rows(model, s->x, model->lnf_gamma, model->lnf_beta, n);
            linear(model, logits + (size_t)first * V, V, s->h, s->ld_d, &model->lm_head, n, EPILOGUE_NONE, NULL);
        } else if (first + n == T) {
            layernorm_rows(model, s->x + (size_t)(n - 1) * d, model->lnf_gamma, model->lnf_beta, 1);
            linear(model, logits, V, s->h, s->ld_d, &model->lm_head, 1, EPILOGUE_NONE, NULL);
        }
    }
    return 0;
}
