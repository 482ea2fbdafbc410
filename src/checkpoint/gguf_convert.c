// gguf_convert.c — a Hugging Face folder written as llama.cpp's tools write it (see gguf_convert.h).
#include "checkpoint/gguf_convert.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/config.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_quantize.h"
#include "checkpoint/gguf_tokenizer.h"
#include "checkpoint/gguf_write.h"
#include "checkpoint/safetensors.h"
#include "kernels.h"

// Each --type: its name, the type of its matrices, whether attn_v and ffn_down get Q6_K in use_more_bits' layers,
// and llama.cpp's file type (general.file_type).
static const struct {
    const char *name;
    uint32_t matrices;
    bool more_bits;
    uint32_t file_type;
} TYPES[] = {[CONVERT_BF16] = {"bf16", GGML_BF16, false, 32},       [CONVERT_Q8_0] = {"q8_0", GGML_Q8_0, false, 7},
             [CONVERT_Q4_0] = {"q4_0", GGML_Q4_0, false, 2},        [CONVERT_Q4_K_M] = {"q4_k_m", GGML_Q4_K, true, 15},
             [CONVERT_Q5_K_M] = {"q5_k_m", GGML_Q5_K, true, 17},    [CONVERT_Q6_K] = {"q6_k", GGML_Q6_K, false, 18}};

int convert_type_parse(const char *text, ConvertType *type, Err *err) {
    for (int i = 0; i < (int)(sizeof TYPES / sizeof *TYPES); i++)
        if (text && strcmp(text, TYPES[i].name) == 0) {
            *type = (ConvertType)i;
            return 0;
        }
    return err_fmt(err, "--type: expected bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k%s", text ? "" : " (it is required)");
}

// ---- the plan: which tensors, in which order, of which type ----------------------------------------------------

typedef struct {
    char name[64];              // llama.cpp's name
    const StTensor *src;        // NULL: rope_freqs.weight, computed into values
    float *values;              // rope_freqs.weight's [ne[0]]
    int layer;                  // −1 outside the blocks
    int rotary_hd;              // a llama's q or k: rows permuted per head of this many rows; else 0
    bool transposed;            // GPT-2's Conv1D matrix [n_in, n_out], written [n_out, n_in]
    int n_dims;
    int64_t ne[2];              // ne[0]: a row's elements, ne[1]: rows
    uint32_t type;
} Planned;

typedef struct {
    const char *dir;
    Config cfg;
    StCheckpoint ckpt;
    ConvertType type;
    ThreadPool *pool;           // converts each chunk of rows; NULL: the caller alone
    bool gpt2, tied;
    Planned *tensors;           // [n]
    int n;
} Conversion;

// The tensors of the blocks, in the order llama.cpp's converter writes them (those the folder has).
static const char *const LAYER_PARTS[] = {
    "attn_norm.weight", "attn_norm.bias", "attn_q.weight", "attn_q.bias", "attn_k.weight", "attn_k.bias",
    "attn_v.weight", "attn_v.bias", "attn_q_norm.weight", "attn_k_norm.weight", "attn_qkv.weight", "attn_qkv.bias",
    "attn_output.weight", "attn_output.bias", "ffn_norm.weight", "ffn_norm.bias", "ffn_gate.weight", "ffn_gate.bias",
    "ffn_up.weight", "ffn_up.bias", "ffn_down.weight", "ffn_down.bias",
};
enum { N_LAYER_PARTS = sizeof LAYER_PARTS / sizeof *LAYER_PARTS };

// The folder's tensor for llama.cpp's `name`: transformers' name, with or without the family's prefix
// ("transformer." for GPT-2, "model." for the others).
static const StTensor *source(const Conversion *c, const char *name) {
    char hf[160], other[176];
    gguf_hf_name(hf, sizeof hf, name, c->gpt2);
    const StTensor *t = st_find(&c->ckpt, hf);
    if (t) return t;
    if (c->gpt2) snprintf(other, sizeof other, "transformer.%s", hf);
    else snprintf(other, sizeof other, "%s", strncmp(hf, "model.", 6) == 0 ? hf + 6 : hf);
    return st_find(&c->ckpt, other);
}

// Llama 3's rope scaling as the divisor of each rotary frequency (what the converter writes as rope_freqs.weight):
// 1 for wavelengths below original/high_freq_factor, factor above original/low_freq_factor, a smooth blend between.
static float *rope_divisors(const Config *cfg) {
    const int half = cfg->head_dim / 2;
    float *out = malloc((size_t)half * sizeof *out);
    if (!out) return NULL;
    const RopeScaling *r = &cfg->rope;
    const double original = r->original_max_position, short_wave = original / r->high_freq_factor,
                 long_wave = original / r->low_freq_factor;
    for (int i = 0; i < half; i++) {
        const float freq = 1.0f / powf(cfg->rope_theta, (float)(2 * i) / (float)cfg->head_dim);
        const double wavelength = 2 * M_PI / freq;
        if (wavelength < short_wave) out[i] = 1.0f;
        else if (wavelength > long_wave) out[i] = r->factor;
        else {
            const double s = (original / wavelength - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
            out[i] = (float)(1 / ((1 - s) / r->factor + s));
        }
    }
    return out;
}

// Adds `name` from the folder, if it has it (`required`: an error if not), with its shape checked.
static int plan_tensor(Conversion *c, const char *name, int layer, bool required, Err *err) {
    const StTensor *t = source(c, name);
    if (!t) return required ? err_fmt(err, "%s: no tensor for %s (transformers' name of it missing)", c->dir, name) : 0;
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16)
        return err_fmt(err, "%s: tensor \"%s\" is %s; convert reads F32, F16 and BF16", t->file, t->name,
                       st_dtype_name(t->dtype));
    if (t->ndim != 1 && t->ndim != 2)
        return err_fmt(err, "%s: tensor \"%s\" has %d dimensions, expected 1 or 2", t->file, t->name, t->ndim);
    Planned *p = &c->tensors[c->n++];
    *p = (Planned){.src = t, .layer = layer, .n_dims = t->ndim};
    snprintf(p->name, sizeof p->name, "%s", name);
    const bool matrix = t->ndim == 2, rotary = c->cfg.model_type == MODEL_LLAMA || c->cfg.model_type == MODEL_MISTRAL;
    p->transposed = c->gpt2 && matrix && layer >= 0;
    p->ne[0] = t->shape[matrix && !p->transposed ? 1 : 0];
    p->ne[1] = matrix ? t->shape[p->transposed ? 1 : 0] : 1;
    if (rotary && (strstr(name, ".attn_q.") || strstr(name, ".attn_k."))) {
        p->rotary_hd = c->cfg.head_dim;
        if (p->rotary_hd % 2 || (matrix ? p->ne[1] : p->ne[0]) % p->rotary_hd)
            return err_fmt(err, "%s: tensor \"%s\": %lld rows are not whole heads of %d", t->file, t->name,
                           (long long)(matrix ? p->ne[1] : p->ne[0]), p->rotary_hd);
    }
    return 0;
}

// Every tensor of the model, in the bf16 file's order.
static int plan_tensors(Conversion *c, Err *err) {
    const int L = c->cfg.n_layer;
    c->tensors = calloc((size_t)(L * N_LAYER_PARTS + 8), sizeof *c->tensors);
    if (!c->tensors) return err_fmt(err, "out of memory");
    if (c->cfg.rope.type == ROPE_LLAMA3) {
        Planned *p = &c->tensors[c->n++];
        *p = (Planned){.name = "rope_freqs.weight", .layer = -1, .n_dims = 1, .ne = {c->cfg.head_dim / 2, 1},
                       .values = rope_divisors(&c->cfg)};
        if (!p->values) return err_fmt(err, "out of memory");
    }
    if (plan_tensor(c, "token_embd.weight", -1, true, err) ||
        (c->gpt2 && plan_tensor(c, "position_embd.weight", -1, true, err)))
        return -1;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < N_LAYER_PARTS; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s", l, LAYER_PARTS[i]);
            if (plan_tensor(c, name, l, false, err)) return -1;
        }
    if (plan_tensor(c, "output_norm.weight", -1, true, err) || plan_tensor(c, "output_norm.bias", -1, false, err))
        return -1;
    c->tied = c->cfg.tie_word_embeddings || !source(c, "output.weight");
    if (!c->tied) return plan_tensor(c, "output.weight", -1, true, err);
    if (!c->gpt2) return 0;
    // GPT-2's converter writes the tied head as a copy of the embeddings, named output.weight
    Planned *head = &c->tensors[c->n++];
    *head = c->tensors[c->cfg.rope.type == ROPE_LLAMA3 ? 1 : 0];
    snprintf(head->name, sizeof head->name, "output.weight");
    c->tied = false;
    return 0;
}

// llama.cpp's layers that get more bits in a Q4_K_M or Q5_K_M file: the first and last eighth, and every third between.
static bool use_more_bits(int layer, int n_layer) {
    return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

// The type of p in the file of c->type (gguf_convert.h's table).
static uint32_t tensor_type(const Conversion *c, const Planned *p) {
    const uint32_t stored = p->n_dims == 1 ? GGML_F32 : GGML_BF16;
    if (c->type == CONVERT_BF16 || p->n_dims < 2 || !ends_with(p->name, "weight") || strstr(p->name, "_norm.weight") ||
        strcmp(p->name, "position_embd.weight") == 0)
        return stored;
    const uint32_t base = TYPES[c->type].matrices;
    uint32_t type = base;
    const bool head = strcmp(p->name, "output.weight") == 0 || (c->tied && strcmp(p->name, "token_embd.weight") == 0);
    if (head && base != GGML_Q8_0) type = GGML_Q6_K;
    else if (TYPES[c->type].more_bits && use_more_bits(p->layer, c->cfg.n_layer) &&
             (strstr(p->name, ".attn_v.") || strstr(p->name, ".attn_qkv.") || strstr(p->name, ".ffn_down.")))
        type = GGML_Q6_K;  // (llama.cpp counts GPT-2's attn_qkv as an attn_v)
    size_t bytes;
    if (p->ne[0] % gguf_type_block(type, &bytes))  // its fallbacks
        type = type == GGML_Q4_K ? GGML_Q5_0 : type == GGML_Q5_K ? GGML_Q5_1 : GGML_Q8_0;
    return p->ne[0] % 32 ? GGML_F16 : type;
}

// llama-quantize's order: by layer (those outside the blocks first), then by name.
static int by_layer_then_name(const void *a, const void *b) {
    const Planned *x = a, *y = b;
    return x->layer != y->layer ? (x->layer > y->layer) - (x->layer < y->layer) : strcmp(x->name, y->name);
}

// ---- the metadata ----------------------------------------------------------------------------------------------

static const char *architecture(ModelType type) {
    return type == MODEL_GPT2 ? "gpt2" : type == MODEL_QWEN2 ? "qwen2" : type == MODEL_QWEN3 ? "qwen3" : "llama";
}

static void kv_arch_u32(GgufWriter *w, const char *arch, const char *name, int v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    gguf_kv_u32(w, key, (uint32_t)v);
}

static void kv_arch_f32(GgufWriter *w, const char *arch, const char *name, float v) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    gguf_kv_f32(w, key, v);
}

static int write_metadata(GgufWriter *w, const Conversion *c, const char *chat_template, Err *err) {
    const Config *cfg = &c->cfg;
    const char *arch = architecture(cfg->model_type), *base = strrchr(c->dir, '/');
    base = base && base[1] ? base + 1 : c->dir;
    gguf_kv_string(w, "general.architecture", arch, strlen(arch));
    gguf_kv_string(w, "general.name", base, strlen(base));
    kv_arch_u32(w, arch, "context_length", cfg->n_positions);
    kv_arch_u32(w, arch, "embedding_length", cfg->n_embd);
    kv_arch_u32(w, arch, "block_count", cfg->n_layer);
    kv_arch_u32(w, arch, "feed_forward_length", cfg->n_inner);
    kv_arch_u32(w, arch, "attention.head_count", cfg->n_head);
    if (c->gpt2) {
        kv_arch_f32(w, arch, "attention.layer_norm_epsilon", cfg->norm_epsilon);
    } else {
        kv_arch_u32(w, arch, "attention.head_count_kv", cfg->n_kv_head);
        kv_arch_f32(w, arch, "rope.freq_base", cfg->rope_theta);
        kv_arch_f32(w, arch, "attention.layer_norm_rms_epsilon", cfg->norm_epsilon);
    }
    gguf_kv_u32(w, "general.file_type", TYPES[c->type].file_type);
    kv_arch_u32(w, arch, "vocab_size", cfg->vocab_size);
    if (!c->gpt2) {
        kv_arch_u32(w, arch, "rope.dimension_count", cfg->head_dim);
        kv_arch_u32(w, arch, "attention.key_length", cfg->head_dim);
        kv_arch_u32(w, arch, "attention.value_length", cfg->head_dim);
    }
    if (cfg->sliding_window) kv_arch_u32(w, arch, "attention.sliding_window", cfg->sliding_window);
    if (cfg->rope.type == ROPE_LINEAR) {
        char key[128];
        snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
        gguf_kv_string(w, key, "linear", 6);
        kv_arch_f32(w, arch, "rope.scaling.factor", cfg->rope.factor);
    }
    const int tokenizer = gguf_write_tokenizer(w, c->dir, cfg->vocab_size, cfg->bos_token_id, cfg->eos_token_id, err);
    if (tokenizer < 0) return -1;
    if (tokenizer > 0)
        fprintf(stderr, "specdec: %s has no tokenizer.json: the file holds no tokenizer (llama.cpp needs one)\n",
                c->dir);
    if (chat_template) gguf_kv_string(w, "tokenizer.chat_template", chat_template, strlen(chat_template));
    if (c->type != CONVERT_BF16) gguf_kv_u32(w, "general.quantization_version", 2);
    return 0;
}

// ---- the data, tensor by tensor --------------------------------------------------------------------------------

// Row r of p's matrix as the file holds it (ne[0] floats): the source row, the row the permutation or the
// transposition puts there, or the computed values.
static void source_row(float *out, const Planned *p, int64_t r) {
    if (!p->src) {
        memcpy(out, p->values, (size_t)p->ne[0] * sizeof *out);
        return;
    }
    const StTensor *t = p->src;
    const size_t esize = st_dtype_size(t->dtype), n = (size_t)p->ne[0];
    if (p->transposed) {  // column r of [n_in, n_out]
        for (size_t i = 0; i < n; i++) st_to_f32(out + i, t->data + (i * (size_t)p->ne[1] + (size_t)r) * esize, t->dtype, 1);
        return;
    }
    if (p->rotary_hd && p->n_dims == 2) {  // row (h, 2i + s) of llama.cpp's order is row (h, s·hd/2 + i) of HF's
        const int64_t hd = p->rotary_hd, within = r % hd;
        r = r - within + (within % 2) * (hd / 2) + within / 2;
    }
    if (p->rotary_hd && p->n_dims == 1) {  // a bias: the same permutation, element by element
        for (int64_t j = 0; j < (int64_t)n; j++) {
            const int64_t hd = p->rotary_hd, within = j % hd, from = j - within + (within % 2) * (hd / 2) + within / 2;
            st_to_f32(out + j, t->data + (size_t)from * esize, t->dtype, 1);
        }
        return;
    }
    st_to_f32(out, t->data + (size_t)r * n * esize, t->dtype, n);
}

// x [n] as a row of `type` into out.
static void encode_row(uint8_t *out, const float *x, uint32_t type, size_t n) {
    if (type == GGML_F32) memcpy(out, x, n * sizeof *x);
    for (size_t i = 0; type == GGML_BF16 && i < n; i++) {
        const uint16_t b = f32_to_bf16(x[i]);
        out[2 * i] = (uint8_t)b, out[2 * i + 1] = (uint8_t)(b >> 8);
    }
    for (size_t i = 0; type == GGML_F16 && i < n; i++) {
        const uint16_t h = f32_to_f16(x[i]);
        out[2 * i] = (uint8_t)h, out[2 * i + 1] = (uint8_t)(h >> 8);
    }
    if (gguf_quantizes(type)) gguf_quantize_row(out, x, type, n);
}

enum { CHUNK_ELEMENTS = 1 << 20 };  // rows converted at once: about this many weights (4 MiB of floats)

// One chunk of a tensor's rows, converted by the pool's threads as a chunked job (pool_run_chunks): the chunk's
// rows cut into parts on fixed boundaries, each row encoded alone, so that the bytes never depend on the threads.
typedef struct {
    const Planned *p;
    int64_t first, rows;        // the chunk: rows [first, first + rows)
    size_t row_bytes;
    float *floats;              // [pool threads][ne[0]]
    uint8_t *encoded;           // [rows][row_bytes]
    int64_t *bad_row;           // [parts]: a part's first row holding a weight a quantizer cannot take (not finite),
                                // or −1
} Chunk;

static void convert_part(void *ctx, int part, int n_parts, int thread) {
    Chunk *k = ctx;
    const Planned *p = k->p;
    const size_t n = (size_t)p->ne[0];
    const bool rounded = p->type != GGML_F32 && p->type != GGML_BF16;  // (quantizers need finite weights)
    float *row = k->floats + (size_t)thread * n;
    int begin, end;
    pool_share((int)k->rows, 1, part, n_parts, &begin, &end);
    k->bad_row[part] = -1;
    for (int r = begin; r < end; r++) {
        source_row(row, p, k->first + r);
        for (size_t i = 0; rounded && i < n; i++)
            if (!isfinite(row[i])) k->bad_row[part] = k->first + r;
        if (k->bad_row[part] >= 0) return;
        encode_row(k->encoded + (size_t)r * k->row_bytes, row, p->type, n);
    }
}

static int write_tensor(FILE *out, const Planned *p, size_t n_bytes, ThreadPool *pool, const char *path, Err *err) {
    const int threads = pool ? pool_size(pool) : 1, max_parts = POOL_CHUNKS_PER_THREAD * threads;
    const size_t n = (size_t)p->ne[0];
    const int64_t chunk_rows = (int64_t)(CHUNK_ELEMENTS / n) + 1;
    Chunk k = {.p = p, .row_bytes = n_bytes / (size_t)p->ne[1], .floats = malloc((size_t)threads * n * sizeof(float)),
               .bad_row = malloc((size_t)max_parts * sizeof(int64_t))};
    k.encoded = malloc((size_t)(chunk_rows < p->ne[1] ? chunk_rows : p->ne[1]) * k.row_bytes);
    int rc = k.floats && k.encoded && k.bad_row ? 0 : err_fmt(err, "out of memory");
    for (k.first = 0; rc == 0 && k.first < p->ne[1]; k.first += k.rows) {
        k.rows = p->ne[1] - k.first < chunk_rows ? p->ne[1] - k.first : chunk_rows;
        const int n_parts = pool_chunk_count((int)k.rows, 1, threads);  // 1 without a pool
        if (pool) pool_run_chunks(pool, threads, n_parts, convert_part, &k);
        else convert_part(&k, 0, 1, 0);
        for (int part = 0; rc == 0 && part < n_parts; part++)  // the first bad row, whatever the split
            if (k.bad_row[part] >= 0)
                rc = err_fmt(err, "%s: tensor \"%s\" holds a weight that is not finite (row %lld): only finite "
                             "weights can be quantized", p->src->file, p->src->name, (long long)k.bad_row[part]);
        const size_t bytes = (size_t)k.rows * k.row_bytes;
        if (rc == 0 && fwrite(k.encoded, 1, bytes, out) != bytes)
            rc = err_fmt(err, "%s: cannot write: %s", path, strerror(errno));
    }
    free(k.floats);
    free(k.encoded);
    free(k.bad_row);
    if (p->src) st_release(p->src);
    return rc || gguf_write_padding(out, n_bytes, path, err) ? -1 : 0;
}

static int write_file(Conversion *c, FILE *out, const char *path, const char *chat_template, Err *err) {
    GgufWriter w;
    gguf_writer_init(&w);
    int rc = write_metadata(&w, c, chat_template, err);
    size_t *bytes = calloc((size_t)c->n, sizeof *bytes);
    if (!bytes) rc = err_fmt(err, "out of memory");
    for (int i = 0; rc == 0 && i < c->n; i++)
        bytes[i] = gguf_add_tensor(&w, c->tensors[i].name, c->tensors[i].type, c->tensors[i].n_dims, c->tensors[i].ne);
    if (rc == 0) rc = gguf_write_header(&w, out, path, err);
    for (int i = 0; rc == 0 && i < c->n; i++) rc = write_tensor(out, &c->tensors[i], bytes[i], c->pool, path, err);
    free(bytes);
    gguf_writer_free(&w);
    return rc;
}

// Writes through a temporary file beside path, renamed over it once whole. A path that names something other than a
// regular file (a folder, /dev/null) is refused: the rename would replace it.
static int write_atomically(Conversion *c, const char *path, const char *chat_template, Err *err) {
    char temp[4200];
    struct stat st;
    if (!path[0] || strlen(path) > 4000) return err_fmt(err, "-o: expected a file name of 1 to 4000 bytes");
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return err_fmt(err, "%s: exists and is not a regular file (convert replaces only files)", path);
    snprintf(temp, sizeof temp, "%s.tmp-XXXXXX", path);
    const int fd = mkstemp(temp);
    if (fd < 0) return err_fmt(err, "%s: cannot create: %s", temp, strerror(errno));
    const mode_t mask = umask(0);  // (mkstemp makes the file private; a new file's usual mode instead)
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    FILE *out = fdopen(fd, "wb");
    int rc = out ? write_file(c, out, path, chat_template, err) : err_fmt(err, "%s: %s", temp, strerror(errno));
    if (out && fclose(out) && rc == 0) rc = err_fmt(err, "%s: cannot write: %s", path, strerror(errno));
    if (!out) close(fd);
    if (rc == 0 && rename(temp, path)) rc = err_fmt(err, "%s: cannot rename %s to it: %s", path, temp, strerror(errno));
    if (rc) unlink(temp);
    return rc;
}

int gguf_convert(const char *dir, const char *path, ConvertType type, const char *chat_template, ThreadPool *pool,
                 Err *err) {
    Conversion c = {.dir = dir, .type = type, .pool = pool};
    char config_path[4096];
    snprintf(config_path, sizeof config_path, "%s/config.json", dir);
    if (config_load(&c.cfg, config_path, err) || st_open(&c.ckpt, dir, err)) return -1;
    c.gpt2 = c.cfg.model_type == MODEL_GPT2;
    int rc = plan_tensors(&c, err);
    for (int i = 0; rc == 0 && i < c.n; i++) c.tensors[i].type = tensor_type(&c, &c.tensors[i]);
    if (rc == 0 && type != CONVERT_BF16) qsort(c.tensors, (size_t)c.n, sizeof *c.tensors, by_layer_then_name);
    if (rc == 0) rc = write_atomically(&c, path, chat_template, err);
    for (int i = 0; i < c.n; i++) free(c.tensors[i].values);
    free(c.tensors);
    st_close(&c.ckpt);
    return rc;
}
