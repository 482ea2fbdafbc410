// forward.c — the one forward pass of a decoder-only transformer (GPT-2, Radford et al. 2019; Llama, Touvron et al.
// 2023, and its kin Mistral, Qwen2, Qwen3), for every family and every use: prefill, decode, the verification of a
// draft, token trees. Its weights come from load.c, in the kernels' layout (model.h).
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
// Several sequences' new rows may go through it together, a batch (model_forward_batch): each row names its
// sequence, as a tree's row names its parent, and attends to that sequence's own KV cache; every weight matrix is
// read once for all the rows. A single sequence is the batch of one.
//
// The activations live in the model's ForwardScratch; every function that writes them takes it as an argument.
#include "model/forward.h"

#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


enum {
    CHUNK_T = TREE_MAX_ROWS,  // a forward processes at most this many tokens at a time (bounds the scratch memory)
    ROW_BLOCK = 16,     // matmul output columns are cut into the threads' chunks on multiples of this
    SCRATCH_ALIGN = 64, // the activations' alignment: a cache line, and a 512-bit vector
    ATTENTION_ROWS = 16,  // at most this many query rows (heads × tokens) of one key/value head per attention task
};
_Static_assert(Q8_BLOCK % ROW_BLOCK == 0, "a chunk of whole q8 blocks is one of whole row blocks");
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
    Q8Block *xq_mlp;  // [CHUNK_T, q8_blocks(F)]  the MLP's hidden layer (mlp's first F columns) quantized by the
                      // job that computes it, for the down projection (QUANT_Q8, Q4)
    uint16_t *xb;   // [CHUNK_T, panel_row_length(max(d, H·hd, F))]  a BF16 matmul's input, rounded (QUANT_BF16 only)
    int ld_d, ld_att, ld_f, n_qkv;

    // The chunk's rows, in runs: run r is rows [run_start[r], run_start[r + 1]) of one sequence of the batch, whose
    // K/V go to its own cache, cache[t], at rows pos0 + (t − run_start[r]) (pos0: that cache's length before the
    // chunk; cache_row[t]). A run's rows are rows of a token tree whose row j is cache row base[t] + j (base = pos0,
    // unless model_extend_tree adds them to rows already there): row t sits at position[t] = base + its depth in
    // the tree, and path[t] has bit j set for each tree row j on its path, itself included. It attends to its
    // cache's first base[t] rows and to those — never to another sequence's cache. A chain's row t: base = pos0,
    // position pos0 + (t − run_start[r]), the run's rows up to t.
    int n_runs;
    int run_start[CHUNK_T + 1];
    KVCache *cache[CHUNK_T];
    int cache_row[CHUNK_T];
    int base[CHUNK_T];
    int position[CHUNK_T];
    uint64_t path[CHUNK_T];
    bool tree;      // some row's path leaves out a row before it: attention passes the paths to the kernel
} ForwardScratch;

// The widest input a matmul takes: d, H·hd or F.
static int widest_input(const Config *c) {
    int n = c->n_embd > c->n_inner ? c->n_embd : c->n_inner;
    return n > c->n_head * c->head_dim ? n : c->n_head * c->head_dim;
}

int forward_scratch_alloc(ForwardScratch **scratch, const Config *c, Quant quant, int n_threads, Err *err) {
    const size_t d = c->n_embd, ld_d = row_stride(d), ld_att = row_stride((size_t)c->n_head * c->head_dim),
                 n_qkv = (size_t)(c->n_head + 2 * c->n_kv_head) * c->head_dim,
                 ld_f = row_stride((c->mlp == MLP_GATED ? 2 : 1) * (size_t)c->n_inner), half = c->head_dim / 2,
                 T = CHUNK_T;
    const size_t per_thread = (size_t)ATTENTION_ROWS * (c->n_positions + 2 * (size_t)c->head_dim);
    const size_t floats = T * (d + ld_d + n_qkv + ld_att + ld_f + 2 * half) + (size_t)n_threads * per_thread;
    const size_t bytes = (floats * sizeof(float) + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    ForwardScratch *s = calloc(1, sizeof *s);
    *scratch = s;
    if (!s) return err_fmt(err, "out of memory for activations");
    s->x = aligned_alloc(SCRATCH_ALIGN, bytes);  // one block of floats: x, h, qkv, att, mlp, cos, sin, scores, att_rows
    const bool quantized = quant == QUANT_Q8 || quant == QUANT_Q4;
    if (quantized) s->xq = malloc(T * (size_t)q8_blocks(widest_input(c)) * sizeof(Q8Block));
    if (quantized) s->xq_mlp = malloc(T * (size_t)q8_blocks(c->n_inner) * sizeof(Q8Block));
    if (quant == QUANT_BF16) s->xb = malloc(T * (size_t)panel_row_length(widest_input(c)) * sizeof(uint16_t));
    if (!s->x || (quantized && (!s->xq || !s->xq_mlp)) || (quant == QUANT_BF16 && !s->xb))
        return err_fmt(err, "out of memory for activations (%zu MB)", floats * 4 >> 20);
    s->ld_d = (int)ld_d;
    s->ld_att = (int)ld_att;
    s->ld_f = (int)ld_f;
    s->n_qkv = (int)n_qkv;
    s->h = s->x + T * d;
    s->qkv = s->h + T * ld_d;
    s->att = s->qkv + T * n_qkv;
    s->mlp = s->att + T * ld_att;
    s->cos = s->mlp + T * ld_f;
    s->sin = s->cos + T * half;
    s->scores = s->sin + T * half;
    s->att_rows = s->scores + (size_t)n_threads * ATTENTION_ROWS * c->n_positions;
    return 0;
}

void forward_scratch_free(ForwardScratch **scratch) {
    if (*scratch) {
        free((*scratch)->x);
        free((*scratch)->xq);
        free((*scratch)->xq_mlp);
        free((*scratch)->xb);
    }
    free(*scratch);
    *scratch = NULL;
}

int model_limit_context(Model *model, int n_ctx, Err *err) {
    if (n_ctx < 1) {  // a caller's bug, not bad input: stop loudly
        fprintf(stderr, "model_limit_context: %d positions\n", n_ctx);
        abort();
    }
    if (n_ctx >= model->cfg.n_positions) return 0;
    model->cfg.n_positions = n_ctx;  // (learned position embeddings past it are simply never read)
    forward_scratch_free(&model->scratch);  // the attention scores: [threads, ATTENTION_ROWS, n_ctx]
    return forward_scratch_alloc(&model->scratch, &model->cfg, model->quant, pool_size(model->pool), err);
}

// The threads a job runs on: as many as it pays for, one per work_per_thread multiply-adds, at least one, at most
// max_threads (a hand-off to a thread and the wait for it cost microseconds, more than a small draft's matmul on
// it). Every job cuts its outputs into chunks on fixed boundaries (pool_run_chunks) and each output is computed
// alone, so neither the thread count nor which thread runs a chunk changes a result.
static int job_threads(const Model *m, size_t multiply_adds) {
    size_t pays = m->work_per_thread ? multiply_adds / m->work_per_thread : (size_t)m->max_threads;
    if (pays < 1) pays = 1;
    return pays < (size_t)m->max_threads ? (int)pays : m->max_threads;
}

// What a matmul's job does to its output columns once they are computed, on the same thread. EPILOGUE_SWIGLU pairs
// them: W stacks the gate's F rows over up's F rows (Block.mlp_up), the job's columns are the F pairs (j, F + j),
// and out[t, j] = SiLU(gate) ⊙ up goes in the gate's place — SwiGLU's product in the matmul's own job.
// EPILOGUE_HEADS makes the attention projection's heads ready for attention (prepare_heads).
typedef enum {
    EPILOGUE_NONE, EPILOGUE_GELU_TANH, EPILOGUE_GELU_ERF, EPILOGUE_ADD, EPILOGUE_SWIGLU, EPILOGUE_HEADS
} Epilogue;

// What EPILOGUE_HEADS needs beyond the columns: row t of qkv = [q | k | v] is the token at row s->cache_row[t] of
// its sequence's cache s->cache[t].
typedef struct {
    const Model *m;
    const ForwardScratch *s;  // the rows' rotary angles and caches
    const Block *b;           // Qwen3's head norms
    int layer;
} Heads;

// One matmul as a pool job: out = x Wᵀ + b, then the epilogue on the same columns by the same thread. Its threads
// take the output columns (EPILOGUE_SWIGLU: the pairs of columns) in chunks (pool_run_chunks).
typedef struct {
    const Kernels *k;
    const Linear *lin;
    const float *x;     // [T, ld_x]
    const Q8Block *xq;  // [T, q8_blocks(n_in)]: x quantized, for quantized weights (weight_quantized)
    const uint16_t *xb; // [T, panel_row_length(n_in)]: x rounded to BF16, for QUANT_BF16
    float *out;         // [T, ld_out]
    int T, ld_x, ld_out;
    Epilogue epilogue;
    float *residual;    // EPILOGUE_ADD: residual[t, j] += out[t, j]    [T, n_out]
    const Heads *heads; // EPILOGUE_HEADS
    Q8Block *xq_out;    // [T, q8_blocks(n)]: out's first n columns quantized too, after the epilogue, or NULL
    int n;              // the columns the chunks cut: n_out, or EPILOGUE_SWIGLU's n_out / 2 pairs
    int block;          // on multiples of this: ROW_BLOCK, or whole blocks and heads (chunk_block)
} LinearJob;

// Columns [j0, j1) of the job's output from one matrix, `w` held as `type`, whose row 0 is W's row `row0`.
static void matrix_columns(const LinearJob *job, WeightType type, const void *w, int row0, int j0, int j1) {
    const Linear *lin = job->lin;
    float *out = job->out + row0;
    const float *bias = lin->bias ? lin->bias + row0 : NULL;
    if (weight_quantized(type)) {
        quantized_matmul(job->k, type)(out, job->xq, w, bias, job->T, lin->n_in, job->ld_out, j0, j1);
    } else if (job->xb) {
        job->k->matmul_bf16_dot(out, job->xb, w, bias, job->T, lin->n_in, job->ld_out, j0, j1);
    } else {
        job->k->matmul[type](out, job->x, w, bias, job->T, lin->n_in, job->ld_x, job->ld_out, j0, j1);
    }
}

// Columns [j0, j1) of the job's output: out[:, j0:j1] = x W[j0:j1]ᵀ + b[j0:j1] (W's last tail_rows rows from their
// own matrix).
static void linear_columns(const LinearJob *job, int j0, int j1) {
    const Linear *lin = job->lin;
    const int split = lin->n_out - lin->tail_rows;
    if (j0 < split) matrix_columns(job, lin->type, lin->w, 0, j0, j1 < split ? j1 : split);
    if (j1 > split)
        matrix_columns(job, lin->tail_type, lin->tail_w, split, (j0 > split ? j0 : split) - split, j1 - split);
}

// Columns [j0, j1) of row t of qkv = [q | k | v], its H query heads, then Hkv key heads, then Hkv value heads,
// made ready for attention: Qwen3's per-head RMSNorm of q and k, then their rotation by the angles of the row's
// position (both on whole heads: the job's chunks then hold whole heads, chunk_block); then the columns of k and v
// go into the row's cache. Each head's own work, whichever thread's chunk holds it: the same bits as one loop over
// heads.
static void prepare_heads(const Heads *job, float *row, int t, int j0, int j1) {
    const Config *c = &job->m->cfg;
    const Block *b = job->b;
    const int hd = c->head_dim, half = hd / 2, H = c->n_head, Hkv = c->n_kv_head;
    for (int head = j0 / hd; head * hd < j1; head++) {
        float *x = row + (size_t)head * hd;
        const int i0 = j0 > head * hd ? j0 - head * hd : 0, i1 = j1 < (head + 1) * hd ? j1 - head * hd : hd;
        if (head < H + Hkv) {  // a query or a key head
            if (b->q_norm) job->m->kernels->rmsnorm(x, x, head < H ? b->q_norm : b->k_norm, hd, c->norm_epsilon);
            if (c->positions == POSITIONS_ROTARY)
                job->m->kernels->rope(x, job->s->cos + (size_t)t * half, job->s->sin + (size_t)t * half, half);
        }
        KVCache *cache = job->s->cache[t];
        const int pos = job->s->cache_row[t];
        if (head >= H + Hkv) kv_store_value(cache, job->layer, head - H - Hkv, pos, i0, i1, x);
        else if (head >= H) kv_store_key(cache, job->layer, head - H, pos, i0, i1, x);
    }
}

// Asks for the cache lines that prepare_heads will write row t's keys into, of the key heads among columns
// [j0, j1), before the chunk's matmul: those stores would otherwise wait for each line in turn (kv_prefetch_key).
// A row of the same cache as row t − 1 whose position shares its 64-byte line (16 positions of a key row) asks
// nothing: a prompt's or a verification's rows would ask for the same lines again.
static void prefetch_keys(const Heads *job, int t, int j0, int j1) {
    enum { KEYS_PER_LINE = 64 / sizeof(float) };
    const int *row = job->s->cache_row;
    if (t > 0 && job->s->cache[t] == job->s->cache[t - 1] && row[t] / KEYS_PER_LINE == row[t - 1] / KEYS_PER_LINE)
        return;
    const Config *c = &job->m->cfg;
    const int hd = c->head_dim, H = c->n_head, Hkv = c->n_kv_head;
    for (int head = j0 / hd > H ? j0 / hd : H; head < H + Hkv && head * hd < j1; head++) {
        const int i0 = j0 > head * hd ? j0 - head * hd : 0, i1 = j1 < (head + 1) * hd ? j1 - head * hd : hd;
        kv_prefetch_key(job->s->cache[t], job->layer, head - H, job->s->cache_row[t], i0, i1);
    }
}

// The epilogue on columns [j0, j1) (EPILOGUE_SWIGLU: pairs [j0, j1), the columns [j0, j1) and F + [j0, j1)).
static void epilogue_columns(const LinearJob *job, int j0, int j1) {
    const int n = j1 - j0, half = job->lin->n_out / 2;
    for (int t = 0; t < job->T; t++) {
        float *row = job->out + (size_t)t * job->ld_out + j0;
        switch (job->epilogue) {
        case EPILOGUE_GELU_TANH: job->k->gelu_tanh(row, n); break;
        case EPILOGUE_GELU_ERF: job->k->gelu_erf(row, n); break;
        case EPILOGUE_ADD: job->k->add(job->residual + (size_t)t * job->lin->n_out + j0, row, n); break;
        case EPILOGUE_SWIGLU: job->k->silu_mul(row, row, row + half, n); break;
        case EPILOGUE_HEADS: prepare_heads(job->heads, job->out + (size_t)t * job->ld_out, t, j0, j1); break;
        case EPILOGUE_NONE: break;
        }
        if (job->xq_out)  // blocks j0 / Q8_BLOCK.. of row t, as quantizing the whole row would give them
            job->k->quantize_q8(job->xq_out + (size_t)t * q8_blocks(job->n) + j0 / Q8_BLOCK, row, 1, n, n);
    }
}

static void linear_chunk(void *ctx, int chunk, int n_chunks, int thread) {
    (void)thread;
    const LinearJob *job = ctx;
    int j0, j1;
    pool_share(job->n, job->block, chunk, n_chunks, &j0, &j1);
    for (int t = 0; job->epilogue == EPILOGUE_HEADS && t < job->T; t++) prefetch_keys(job->heads, t, j0, j1);
    linear_columns(job, j0, j1);
    if (job->epilogue == EPILOGUE_SWIGLU) linear_columns(job, job->n + j0, job->n + j1);
    epilogue_columns(job, j0, j1);
}

// The columns a job's chunks fall on multiples of: ROW_BLOCK; whole q8 blocks where the job quantizes what it
// computes; whole heads where EPILOGUE_HEADS normalises or rotates them (the fewest whole heads that are also whole
// row blocks).
static int chunk_block(const Config *c, bool quantizes, const Heads *heads) {
    if (quantizes) return Q8_BLOCK;
    if (!heads || !(c->positions == POSITIONS_ROTARY || heads->b->q_norm)) return ROW_BLOCK;
    int block = c->head_dim;
    while (block % ROW_BLOCK) block += c->head_dim;
    return block;
}

// out = x Wᵀ + b (then the epilogue)      x: [T, ld_x]   out: [T, ld_out]
// Our kernels stream W once for all T rows, are batch-invariant and keep the canonical order of arithmetic
// (kernels.h) at every T: no BLAS takes over long prompts, whose logits are then the same bits in every variant.
// Quantized weights (q8, q4, GGUF's blocks as stored) take x quantized (kernels.h), QUANT_BF16's x rounded to BF16,
// once, here, for all threads; a row's quantization or rounding depends on that row alone, so batch invariance
// holds. The MLP's hidden layer (out or x = s->mlp) is quantized instead by the job that computes it, each chunk its
// own blocks on its own thread, into s->xq_mlp: the down projection's input, F floats a row, the widest there is to
// quantize.
// Writes s->xq, s->xq_mlp or s->xb (the rounded input), out, residual (EPILOGUE_ADD) and, EPILOGUE_HEADS, the
// cache (heads: what that epilogue needs, else NULL).
static void linear(const Model *m, ForwardScratch *s, float *out, int ld_out, const float *x, int ld_x,
                   const Linear *lin, int T, Epilogue ep, float *residual, const Heads *heads) {
    if (weight_quantized(lin->type) && x != s->mlp) m->kernels->quantize_q8(s->xq, x, T, lin->n_in, ld_x);
    Q8Block *xq_out = out == s->mlp ? s->xq_mlp : NULL;  // the job quantizes what it computes (NULL: unquantized)
    uint16_t *xb = m->quant == QUANT_BF16 ? s->xb : NULL;
    if (xb) bf16_round_rows(xb, x, T, lin->n_in, ld_x, in_pair_order(m->kernels, WEIGHT_BF16));
    LinearJob job = {
        .k = m->kernels,
        .lin = lin,
        .x = x,
        .xq = x == s->mlp ? s->xq_mlp : s->xq,
        .xb = xb,
        .out = out,
        .T = T,
        .ld_x = ld_x,
        .ld_out = ld_out,
        .epilogue = ep,
        .residual = residual,
        .heads = heads,
        .xq_out = xq_out,
        .n = ep == EPILOGUE_SWIGLU ? lin->n_out / 2 : lin->n_out,
        .block = chunk_block(&m->cfg, xq_out != NULL, heads),
    };
    const int threads = job_threads(m, (size_t)T * lin->n_out * lin->n_in);
    pool_run_chunks(m->pool, threads, pool_chunk_count(job.n, job.block, threads), linear_chunk, &job);
}

// Causal self-attention for the chunk's rows, whose K and V are already in their caches (ForwardScratch):
// att[t, head] = Σ_{s seen} softmax_s(q·k_s · scale) v_s over the rows of row t's own cache that it sees — the
// first base[t] and the rows of its path (a chain's row t: all rows ≤ cache_row[t]) — with k and v those of the
// head's key/value head, head / (H / Hkv) (grouped-query attention). A path's leading run of rows 0..m−1 is
// passed as part of the row's first S = base + m positions, the rest as the kernel's tree bits: a chain passes
// no bits at all. The query rows of one run (one sequence) that share a key/value head — its group's H / Hkv
// heads for each of the run's tokens — go to the kernel together, which reads that head's keys and values once
// for all of them. A task is one run's key/value head and a share of its rows (at most ATTENTION_ROWS; more
// shares where there are more threads than key/value heads), run major, then key/value head; the threads take
// the tasks in chunks (pool_run_chunks). A row's result does not depend on the other rows of its task
// (Kernels.attention), so neither the runs beside it nor the shares change its bits.
typedef struct {
    const Model *m;
    ForwardScratch *s;  // reads qkv, the rows' caches and paths; writes att, and each thread its scores and att_rows
    int layer;
    float scale;
    int shares[CHUNK_T];          // tasks per key/value head of run r
    int first_task[CHUNK_T + 1];  // run r's tasks are [first_task[r], first_task[r + 1])
} AttentionJob;

// Task `task`, on thread `thread`'s scratch rows.
static void attention_task(const AttentionJob *job, int thread, int task) {
    const Model *m = job->m;
    ForwardScratch *s = job->s;
    int run = 0;
    while (job->first_task[run + 1] <= task) run++;
    const int t0 = s->run_start[run], T = s->run_start[run + 1] - t0;
    const KVCache *cache = s->cache[t0];
    const int hd = m->cfg.head_dim, group = m->cfg.n_head / m->cfg.n_kv_head, rows = group * T;
    float *scores = s->scores + (size_t)thread * ATTENTION_ROWS * m->cfg.n_positions;
    float *q = s->att_rows + (size_t)thread * 2 * ATTENTION_ROWS * hd, *out = q + ATTENTION_ROWS * hd;  // [n, hd]
    int S[ATTENTION_ROWS];
    uint64_t tree[ATTENTION_ROWS];
    const int shares = job->shares[run], local = task - job->first_task[run];
    const int kv_head = local / shares, share = local % shares;
    const int r0 = (int)((long)rows * share / shares), n = (int)((long)rows * (share + 1) / shares) - r0;
    for (int g = 0; g < n; g++) {  // row r0 + g: token t, query head kv_head · group + (r0 + g) % group
        const int t = t0 + (r0 + g) / group, head = kv_head * group + (r0 + g) % group;
        memcpy(q + (size_t)g * hd, s->qkv + (size_t)t * s->n_qkv + head * hd, sizeof(float) * hd);
        const int leading = s->path[t] == UINT64_MAX ? 64 : __builtin_ctzll(~s->path[t]);  // rows 0..leading−1
        S[g] = s->base[t] + leading;
        tree[g] = leading == 64 ? 0 : s->path[t] >> leading;
    }
    m->kernels->attention(out, hd, q, hd, S, s->tree ? tree : NULL, n, kv_keys(cache, job->layer, kv_head),
                          cache->ld_k, kv_values(cache, job->layer, kv_head), hd, job->scale, scores,
                          m->cfg.n_positions);
    for (int g = 0; g < n; g++) {
        const int t = t0 + (r0 + g) / group, head = kv_head * group + (r0 + g) % group;
        memcpy(s->att + (size_t)t * s->ld_att + head * hd, out + (size_t)g * hd, sizeof(float) * hd);
    }
}

static void attention_chunk(void *ctx, int chunk, int n_chunks, int thread) {
    const AttentionJob *job = ctx;
    int begin, end;
    pool_share(job->first_task[job->s->n_runs], 1, chunk, n_chunks, &begin, &end);
    for (int task = begin; task < end; task++) attention_task(job, thread, task);
}

// Attention's tasks per key/value head on `threads`: its rows in shares of at most ATTENTION_ROWS, and at least
// enough shares that every thread has a task.
static int attention_shares(const Model *m, int T, int threads) {
    const int Hkv = m->cfg.n_kv_head, rows = m->cfg.n_head / Hkv * T;
    int shares = (rows + ATTENTION_ROWS - 1) / ATTENTION_ROWS, want = (threads + Hkv - 1) / Hkv;
    if (shares < want) shares = want < rows ? want : rows;
    return shares;
}

// The normalisation of T rows of the residual stream: LayerNorm or RMSNorm.    h: [T, ld_h]   x: [T, d]
static void norm_rows(const Model *m, float *h, int ld_h, const float *x, const Norm *norm, int T) {
    const int d = m->cfg.n_embd;
    for (int t = 0; t < T; t++) {
        float *out = h + (size_t)t * ld_h;
        if (m->cfg.norm == NORM_LAYER)
            m->kernels->layernorm(out, x + (size_t)t * d, norm->gamma, norm->beta, d, m->cfg.norm_epsilon);
        else
            m->kernels->rmsnorm(out, x + (size_t)t * d, norm->gamma, d, m->cfg.norm_epsilon);
    }
}

// What follows the MLP's first matmul on the same columns: its activation, or SwiGLU's product of gate and up.
static Epilogue mlp_up_epilogue(const Config *c) {
    if (c->mlp == MLP_GATED) return EPILOGUE_SWIGLU;
    return c->activation == ACT_GELU_ERF ? EPILOGUE_GELU_ERF : EPILOGUE_GELU_TANH;
}

// Attention over the chunk's runs on as many threads as its multiply-adds pay for (att: the job, scale set).
static void attention(const Model *m, ForwardScratch *s, AttentionJob *att) {
    const Config *c = &m->cfg;
    size_t multiply_adds = 0;  // each run's rows against the cache rows up to its last
    for (int r = 0; r < s->n_runs; r++) {
        const int T = s->run_start[r + 1] - s->run_start[r];
        multiply_adds += (size_t)T * (s->cache_row[s->run_start[r + 1] - 1] + 1) * 2 * c->n_head * c->head_dim;
    }
    const int threads = job_threads(m, multiply_adds);
    att->first_task[0] = 0;
    for (int r = 0; r < s->n_runs; r++) {
        att->shares[r] = attention_shares(m, s->run_start[r + 1] - s->run_start[r], threads);
        att->first_task[r + 1] = att->first_task[r] + c->n_kv_head * att->shares[r];
    }
    pool_run_chunks(m->pool, threads, pool_chunk_count(att->first_task[s->n_runs], 1, threads), attention_chunk, att);
}

// One transformer block over the chunk's T rows (s->x: [T, d], updated in place; the block's K and V go into the
// rows' caches).
static void block_forward(const Model *m, ForwardScratch *s, int layer, int T) {
    const Config *c = &m->cfg;
    const Block *b = &m->blocks[layer];
    const int ld_d = s->ld_d;

    // Attention sub-block: x += Attn(Norm1(x)) W_out + b_out
    norm_rows(m, s->h, ld_d, s->x, &b->norm1, T);
    const Heads heads = {.m = m, .s = s, .b = b, .layer = layer};
    linear(m, s, s->qkv, s->n_qkv, s->h, ld_d, &b->attn_qkv, T, EPILOGUE_HEADS, NULL, &heads);  // [T, (H + 2Hkv)hd]
    AttentionJob att = {.m = m, .s = s, .layer = layer, .scale = 1.0f};
    if (c->scale_attn_weights) att.scale /= sqrtf((float)c->head_dim);
    if (c->scale_attn_by_inverse_layer_idx) att.scale /= (float)(layer + 1);
    attention(m, s, &att);
    linear(m, s, s->h, ld_d, s->att, s->ld_att, &b->attn_out, T, EPILOGUE_ADD, s->x, NULL);

    // MLP sub-block: x += GELU(Norm2(x) W_up + b_up) W_down + b_down, or gated:
    //                x += (SiLU(Norm2(x) W_gate) ⊙ Norm2(x) W_up) W_down
    norm_rows(m, s->h, ld_d, s->x, &b->norm2, T);
    linear(m, s, s->mlp, s->ld_f, s->h, ld_d, &b->mlp_up, T, mlp_up_epilogue(c), NULL, NULL);
    linear(m, s, s->h, ld_d, s->mlp, s->ld_f, &b->mlp_down, T, EPILOGUE_ADD, s->x, NULL);
}

// Row `token` of the embedding table as floats, 16 consecutive weights at a time (together in either layout).
static void embedding_row(const Model *m, float *out, int token) {
    const Linear *wte = &m->wte;
    if (weight_quantized(wte->type)) {  // d · q: a quantized head and the embeddings are one matrix
        for (int i = 0; i < wte->n_in; i++) out[i] = quantized_weight(wte->w, wte->type, wte->n_in, token, i);
        return;
    }
    const size_t elem = weight_size(wte->type);
    const StDtype dtype = st_dtype_of(wte->type);
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
static void rope_angles(const Model *m, ForwardScratch *s, int T) {
    const int half = m->cfg.head_dim / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const float angle = (float)s->position[t] * m->inv_freq[i];
            s->cos[(size_t)t * half + i] = (float)cos(angle);
            s->sin[(size_t)t * half + i] = (float)sin(angle);
        }
}

// Appends a run to the chunk's rows (ForwardScratch): T rows of one sequence, fed onto its cache after its rows
// [0, cache->len), rows [n_before, n_before + T) of a tree from cache row base (n_before = cache->len − base),
// n_before + T ≤ 64, in which row j follows row parent[j] ∈ [−1, j), −1 the cache row before base (parent NULL: a
// chain, parent[j] = j − 1).
static void chunk_run(ForwardScratch *s, KVCache *cache, const int *parent, int base, int n_before, int T) {
    int depth[64];
    uint64_t path[64];
    const int t0 = s->run_start[s->n_runs];
    for (int j = 0; j < n_before + T; j++) {
        const int p = parent ? parent[j] : j - 1;
        depth[j] = p < 0 ? 0 : depth[p] + 1;
        path[j] = (p < 0 ? 0 : path[p]) | (uint64_t)1 << j;
        if (j < n_before) continue;
        const int t = t0 + j - n_before;
        s->cache[t] = cache;
        s->cache_row[t] = base + j;
        s->base[t] = base;
        s->position[t] = base + depth[j];
        s->path[t] = path[j];
        s->tree |= path[j] != UINT64_MAX >> (63 - j);  // not all of rows 0..j
    }
    s->run_start[++s->n_runs] = t0 + T;
}

int model_top_logits(int *ids, const float *logits, int V, int k) {
    int n = 0;  // ids[0..n): the highest so far, highest first
    for (int x = 0; x < V; x++) {
        const float logit = logits[x];
        if (!(logit > -INFINITY) || (n == k && !(logit > logits[ids[n - 1]]))) continue;
        int i = n < k ? n++ : n - 1;  // x displaces the last (or fills a free place), then moves up past the lower
        for (; i > 0 && logit > logits[ids[i - 1]]; i--) ids[i] = ids[i - 1];  // ones
        ids[i] = x;
    }
    return n;
}

// The coarse head's refinement of rows [0, T) of logits: in each row, the HEAD_REFINED largest logits recomputed
// from lm_head (q8) and the head's quantized input s->xq, a row per chunk.
typedef struct {
    const Model *m;
    const Q8Block *xq;  // [T, q8_blocks(d)]
    float *logits;      // [T, V]
} RefineJob;

static void refine_row(void *ctx, int t, int n_chunks, int thread) {
    (void)n_chunks, (void)thread;
    const RefineJob *job = ctx;
    const Model *m = job->m;
    const int V = m->n_vocab, d = m->cfg.n_embd;
    float *row = job->logits + (size_t)t * V;
    int ids[HEAD_REFINED];
    const int n = model_top_logits(ids, row, V, HEAD_REFINED);
    for (int i = 0; i < n; i++)  // column ids[i] of row t alone
        m->kernels->matmul_q8(row, job->xq + (size_t)t * q8_blocks(d), m->lm_head.w, NULL, 1, d, V, ids[i],
                              ids[i] + 1);
}

// logits [T, V] = h [T, ld h] W_lmᵀ. With a coarse head (model.h: --quant q4), every logit from it, then the
// HEAD_REFINED largest of each row from lm_head: a row's result depends on that row alone, so batch invariance
// holds; the refined ids are chosen by the coarse logits, which every row computes the same way.
static void head_logits(const Model *m, ForwardScratch *s, float *logits, int T) {
    const int V = m->n_vocab;
    if (!m->lm_head_coarse.n_out) {
        linear(m, s, logits, V, s->h, s->ld_d, &m->lm_head, T, EPILOGUE_NONE, NULL, NULL);
        return;
    }
    linear(m, s, logits, V, s->h, s->ld_d, &m->lm_head_coarse, T, EPILOGUE_NONE, NULL, NULL);  // quantizes h into s->xq
    RefineJob job = {.m = m, .xq = s->xq, .logits = logits};
    pool_run_chunks(m->pool, T < m->max_threads ? T : m->max_threads, T, refine_row, &job);
}

// Whether a batch can run, checked before any cache is touched: each sequence has rows, within its cache's
// context and the vocabulary; a tree's rows (those in the cache from earlier calls and the new ones) are at most
// TREE_MAX_ROWS, each after its parent; no two sequences share a cache.
static int check_batch(const Model *model, const SequenceRows *seqs, int n, const char *caller, Err *err) {
    const Config *c = &model->cfg;
    if (n < 1) return err_fmt(err, "%s: no sequences to process", caller);
    for (int i = 0; i < n; i++) {
        const SequenceRows *q = &seqs[i];
        const KVCache *cache = q->cache;
        char who[48] = "";  // which sequence, in a batch of several
        if (n > 1) snprintf(who, sizeof who, "sequence %d of the batch: ", i);
        if (q->T < 1) return err_fmt(err, "%s: %sno tokens to process", caller, who);
        if (cache->len + q->T > c->n_positions)
            return err_fmt(err, "%scontext full: %d cached + %d new token%s exceed the model's context of %d "
                           "position%s (n_positions or max_position_embeddings in config.json, or sliding_window "
                           "where less; or less: --ctx)", who,
                           cache->len, q->T, plural(q->T), c->n_positions, plural(c->n_positions));
        for (int t = 0; t < q->T; t++)
            if (q->tokens[t] < 0 || q->tokens[t] >= c->vocab_size)
                return err_fmt(err, "%stoken id %d is outside the vocabulary [0, %d)", who, q->tokens[t],
                               c->vocab_size);
        for (int k = 0; k < i; k++)
            if (seqs[k].cache == cache)
                return err_fmt(err, "%s: sequences %d and %d of the batch share one KV cache", caller, k, i);
        if (!q->parent) continue;
        const int before = cache->len - q->base;  // the tree's rows in the cache already
        if (q->base < 0 || before < 0)
            return err_fmt(err, "%stoken tree: its first row %d is outside the cache's %d rows", who, q->base,
                           cache->len);
        if (before + q->T > TREE_MAX_ROWS)
            return err_fmt(err, "%stoken tree: %d + %d rows, more than TREE_MAX_ROWS = %d", who, before, q->T,
                           TREE_MAX_ROWS);
        for (int j = 0; j < before + q->T; j++)
            if (q->parent[j] < -1 || q->parent[j] >= j)
                return err_fmt(err, "%stoken tree: row %d follows row %d, outside [-1, %d)", who, j, q->parent[j], j);
    }
    return 0;
}

// The forward pass over a batch (model_forward_batch), in chunks of up to CHUNK_T rows: the next rows of each
// sequence in turn, so that a chunk may hold the end of one sequence's rows and the start of the next one's. Every
// matmul reads its weights once for all the chunk's rows; each row's result depends on that row alone (the
// kernels' batch invariance), and its attention on its own cache alone (attention_task).
static int forward(const Model *model, ForwardScratch *s, const SequenceRows *seqs, int n_seqs, float *logits,
                   const char *caller, Err *err) {
    if (check_batch(model, seqs, n_seqs, caller, err)) return -1;
    const Config *c = &model->cfg;
    const int d = c->n_embd, V = model->n_vocab;
    int seq = 0, fed = 0;  // the next row to feed: row `fed` of sequence `seq`
    size_t logit_rows = 0; // rows of logits written so far
    while (seq < n_seqs) {
        bool wants_logits[CHUNK_T];
        int T = 0;
        s->n_runs = 0;
        s->tree = false;
        while (T < CHUNK_T && seq < n_seqs) {  // the chunk's runs: x = wte[token] (+ wpe[position])
            const SequenceRows *q = &seqs[seq];
            const int n = q->T - fed < CHUNK_T - T ? q->T - fed : CHUNK_T - T, len = q->cache->len;
            chunk_run(s, q->cache, q->parent, q->parent ? q->base : len, q->parent ? len - q->base : 0, n);
            for (int t = T; t < T + n; t++) {
                const int row = fed + t - T;  // of the sequence
                embedding_row(model, s->x + (size_t)t * d, q->tokens[row]);
                if (model->wpe) model->kernels->add(s->x + (size_t)t * d, model->wpe + (size_t)s->position[t] * d, d);
                wants_logits[t] = q->all_logits || row == q->T - 1;
            }
            T += n;
            fed += n;
            if (fed == q->T) {
                seq++;
                fed = 0;
            }
        }
        if (model->inv_freq) rope_angles(model, s, T);
        for (int l = 0; l < c->n_layer; l++) block_forward(model, s, l, T);
        for (int r = 0; r < s->n_runs; r++) s->cache[s->run_start[r]]->len += s->run_start[r + 1] - s->run_start[r];

        // logits = Norm_f(x) W_lmᵀ, for every row of a sequence that wants all its logits, else for its last row
        int n_out = 0;
        for (int t = 0; t < T; t++)
            if (wants_logits[t]) norm_rows(model, s->h + (size_t)n_out++ * s->ld_d, s->ld_d, s->x + (size_t)t * d,
                                           &model->norm_f, 1);
        if (n_out) head_logits(model, s, logits + logit_rows * V, n_out);
        logit_rows += n_out;
    }
    return 0;
}

int model_forward_batch(Model *model, const SequenceRows *seqs, int n, float *logits, Err *err) {
    return forward(model, model->scratch, seqs, n, logits, "model_forward_batch", err);
}

int model_forward(Model *model, KVCache *cache, const int *tokens, int T, float *logits, bool all_logits,
                  Err *err) {
    const SequenceRows rows = {.cache = cache, .tokens = tokens, .T = T, .all_logits = all_logits};
    return forward(model, model->scratch, &rows, 1, logits, "model_forward", err);
}

int model_extend_tree(Model *model, KVCache *cache, int base, const int *tokens, const int *parent, int T,
                      float *logits, Err *err) {
    const SequenceRows rows = {.cache = cache, .tokens = tokens, .T = T, .parent = parent, .base = base,
                               .all_logits = true};
    return forward(model, model->scratch, &rows, 1, logits, "token tree", err);
}

int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err) {
    return model_extend_tree(model, cache, cache->len, tokens, parent, T, logits, err);
}
