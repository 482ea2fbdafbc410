// gguf_model.c — a GGUF file seen as a Hugging Face checkpoint (see gguf_model.h).
#include "checkpoint/gguf_model.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_SIZE = 1 << 20 };  // as config.json's sizes (config.c)

static const struct {
    const char *arch;
    ModelType type;
} ARCHITECTURES[] = {{"llama", MODEL_LLAMA}, {"qwen2", MODEL_QWEN2}, {"qwen3", MODEL_QWEN3}, {"gpt2", MODEL_GPT2}};
enum { N_ARCHITECTURES = sizeof ARCHITECTURES / sizeof *ARCHITECTURES };

// `<arch>.<name>` as an integer in [1, MAX_SIZE] into *out; absent: *out unchanged unless required.
static int read_size(const GgufFile *f, const char *arch, const char *name, bool required, int *out, Err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    int64_t v;
    bool found;
    if (gguf_get_int(f, key, 1, MAX_SIZE, &v, required ? NULL : &found, err)) return -1;
    if (required || found) *out = (int)v;
    return 0;
}

// `<arch>.<name>` as a positive finite float, if present.
static int read_positive(const GgufFile *f, const char *arch, const char *name, float *out, Err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, name);
    bool found;
    float v;
    if (gguf_get_float(f, key, &v, &found, err)) return -1;
    if (!found) return 0;
    if (!(v > 0.0f && v < 3.4e38f)) return err_fmt(err, "%s: metadata \"%s\" is %g, expected a positive number",
                                                   f->path, key, v);
    *out = v;
    return 0;
}

// Whether layer 0 has tensor blk.0.<name>.
static bool has_layer_tensor(const GgufFile *f, const char *name) {
    char full[96];
    snprintf(full, sizeof full, "blk.0.%s", name);
    return gguf_tensor(f, full) != NULL;
}

// rope.scaling.type: none, or linear with rope.scaling.factor; the rest (yarn, longrope) refused by name. Llama
// 3's scaling is no type here: its divisors are the tensor rope_freqs.weight.
static int read_rope_scaling(Config *cfg, const GgufFile *f, const char *arch, Err *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    const char *type;
    size_t len;
    bool found;
    if (gguf_get_string(f, key, &type, &len, &found, err)) return -1;
    if (!found || (len == 4 && memcmp(type, "none", 4) == 0)) return 0;
    if (len != 6 || memcmp(type, "linear", 6) != 0)
        return err_fmt(err, "%s: metadata \"%s\" is \"%.*s\": only none and linear are implemented", f->path, key,
                       (int)(len < 32 ? len : 32), type);
    cfg->rope.type = ROPE_LINEAR;
    cfg->rope.factor = 1.0f;
    return read_positive(f, arch, "rope.scaling.factor", &cfg->rope.factor, err);
}

// The attention's shape: heads, key/value heads, head width; the rotation over the whole head.
static int read_heads(Config *cfg, const GgufFile *f, const char *arch, Err *err) {
    if (read_size(f, arch, "attention.head_count", true, &cfg->n_head, err)) return -1;
    cfg->n_kv_head = cfg->n_head;
    if (read_size(f, arch, "attention.head_count_kv", false, &cfg->n_kv_head, err)) return -1;
    if (cfg->n_head % cfg->n_kv_head)
        return err_fmt(err, "%s: %s.attention.head_count_kv %d does not divide head_count %d", f->path, arch,
                       cfg->n_kv_head, cfg->n_head);
    cfg->head_dim = cfg->n_embd / cfg->n_head;
    int value_dim = 0, rope_dim = 0;
    if (read_size(f, arch, "attention.key_length", false, &cfg->head_dim, err) ||
        read_size(f, arch, "attention.value_length", false, &value_dim, err) ||
        read_size(f, arch, "rope.dimension_count", false, &rope_dim, err))
        return -1;
    if (value_dim && value_dim != cfg->head_dim)
        return err_fmt(err, "%s: %s.attention.value_length %d differs from key_length %d", f->path, arch, value_dim,
                       cfg->head_dim);
    if (cfg->model_type != MODEL_GPT2 && rope_dim && rope_dim != cfg->head_dim)
        return err_fmt(err, "%s: %s.rope.dimension_count %d: a rotation of part of a head (%d) is not implemented",
                       f->path, arch, rope_dim, cfg->head_dim);
    if (cfg->head_dim % 2 || (cfg->model_type == MODEL_GPT2 && cfg->head_dim * cfg->n_head != cfg->n_embd))
        return err_fmt(err, "%s: head width %d (of %d heads, width %d) is not one specdec runs", f->path,
                       cfg->head_dim, cfg->n_head, cfg->n_embd);
    return 0;
}

// tokenizer.ggml.bos_token_id and eos_token_id, where present and inside the vocabulary.
static int read_token_ids(Config *cfg, const GgufFile *f, Err *err) {
    int64_t id;
    bool found;
    cfg->bos_token_id = cfg->eos_token_id = -1;
    cfg->n_eos = 0;
    if (gguf_get_int(f, "tokenizer.ggml.bos_token_id", 0, cfg->vocab_size - 1, &id, &found, err)) return -1;
    if (found) cfg->bos_token_id = (int)id;
    if (gguf_get_int(f, "tokenizer.ggml.eos_token_id", 0, cfg->vocab_size - 1, &id, &found, err)) return -1;
    if (found) cfg->eos_token_id = cfg->eos_ids[cfg->n_eos++] = (int)id;
    if (gguf_get_int(f, "tokenizer.ggml.eot_token_id", 0, cfg->vocab_size - 1, &id, &found, err)) return -1;
    if (found && id != cfg->eos_token_id) cfg->eos_ids[cfg->n_eos++] = (int)id;
    if (cfg->eos_token_id < 0 && cfg->n_eos) cfg->eos_token_id = cfg->eos_ids[0];
    return 0;
}

int gguf_config(Config *cfg, const GgufFile *f, Err *err) {
    const char *arch_name;
    size_t len;
    if (gguf_get_string(f, "general.architecture", &arch_name, &len, NULL, err)) return -1;
    int a = 0;
    while (a < N_ARCHITECTURES && (strlen(ARCHITECTURES[a].arch) != len || memcmp(arch_name, ARCHITECTURES[a].arch, len)))
        a++;
    if (a == N_ARCHITECTURES)
        return err_fmt(err, "%s: general.architecture is \"%.*s\": specdec runs llama, qwen2, qwen3 and gpt2", f->path,
                       (int)(len < 32 ? len : 32), arch_name);
    const char *arch = ARCHITECTURES[a].arch;
    const bool gpt2 = ARCHITECTURES[a].type == MODEL_GPT2;
    *cfg = (Config){.model_type = ARCHITECTURES[a].type, .norm = gpt2 ? NORM_LAYER : NORM_RMS,
                    .norm_epsilon = gpt2 ? 1e-5f : 1e-6f, .positions = gpt2 ? POSITIONS_LEARNED : POSITIONS_ROTARY,
                    .mlp = gpt2 ? MLP_PLAIN : MLP_GATED, .activation = gpt2 ? ACT_GELU_TANH : ACT_SILU,
                    .rope_theta = 10000.0f, .rope = {.type = ROPE_DEFAULT}, .scale_attn_weights = true};
    const GgufTensor *embd = gguf_tensor(f, "token_embd.weight");
    if (!embd || embd->n_dims != 2)
        return err_fmt(err, "%s: tensor \"token_embd.weight\" is %s", f->path, embd ? "not a matrix" : "missing");
    cfg->vocab_size = embd->ne[1] <= MAX_SIZE ? (int)embd->ne[1] : 0;
    if (read_size(f, arch, "context_length", true, &cfg->n_positions, err) ||
        read_size(f, arch, "embedding_length", true, &cfg->n_embd, err) ||
        read_size(f, arch, "block_count", true, &cfg->n_layer, err) ||
        read_size(f, arch, "feed_forward_length", true, &cfg->n_inner, err) ||
        read_size(f, arch, "vocab_size", false, &cfg->vocab_size, err) || read_heads(cfg, f, arch, err) ||
        read_positive(f, arch, gpt2 ? "attention.layer_norm_epsilon" : "attention.layer_norm_rms_epsilon",
                      &cfg->norm_epsilon, err) ||
        read_positive(f, arch, "rope.freq_base", &cfg->rope_theta, err) || read_rope_scaling(cfg, f, arch, err) ||
        read_size(f, arch, "attention.sliding_window", false, &cfg->sliding_window, err))
        return -1;
    if (cfg->vocab_size != embd->ne[1])
        return err_fmt(err, "%s: token_embd.weight has %lld rows, unlike %s.vocab_size %d", f->path,
                       (long long)embd->ne[1], arch, cfg->vocab_size);
    cfg->qkv_bias = gpt2 || has_layer_tensor(f, "attn_q.bias");
    cfg->out_bias = gpt2 || has_layer_tensor(f, "attn_output.bias");
    cfg->mlp_bias = gpt2 || has_layer_tensor(f, "ffn_up.bias");
    cfg->qk_norm = has_layer_tensor(f, "attn_q_norm.weight");
    cfg->tie_word_embeddings = !gguf_tensor(f, "output.weight");
    return read_token_ids(cfg, f, err);
}

// ---------------------------------------------------------------------------------------------------------------
// Tensor names: llama.cpp's → transformers'

typedef struct {
    const char *gguf, *hf;  // a suffix of blk.N. (or a whole name, outside the layers) and its transformers name
} NameMap;

static const NameMap LLAMA_NAMES[] = {
    {"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},                {"rope_freqs.weight", "rope_freqs.weight"},
};
static const NameMap LLAMA_LAYER_NAMES[] = {
    {"attn_norm.weight", "input_layernorm.weight"},  {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.weight", "self_attn.k_proj.weight"},    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.weight", "self_attn.v_proj.weight"},    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"}, {"attn_output.bias", "self_attn.o_proj.bias"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"}, {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},     {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},     {"ffn_gate.bias", "mlp.gate_proj.bias"},
    {"ffn_up.bias", "mlp.up_proj.bias"},             {"ffn_down.bias", "mlp.down_proj.bias"},
};
static const NameMap GPT2_NAMES[] = {
    {"token_embd.weight", "wte.weight"},    {"position_embd.weight", "wpe.weight"},
    {"output_norm.weight", "ln_f.weight"},  {"output_norm.bias", "ln_f.bias"},
    {"output.weight", "lm_head.weight"},
};
static const NameMap GPT2_LAYER_NAMES[] = {
    {"attn_norm.weight", "ln_1.weight"},        {"attn_norm.bias", "ln_1.bias"},
    {"attn_qkv.weight", "attn.c_attn.weight"},  {"attn_qkv.bias", "attn.c_attn.bias"},
    {"attn_output.weight", "attn.c_proj.weight"}, {"attn_output.bias", "attn.c_proj.bias"},
    {"ffn_norm.weight", "ln_2.weight"},         {"ffn_norm.bias", "ln_2.bias"},
    {"ffn_up.weight", "mlp.c_fc.weight"},       {"ffn_up.bias", "mlp.c_fc.bias"},
    {"ffn_down.weight", "mlp.c_proj.weight"},   {"ffn_down.bias", "mlp.c_proj.bias"},
};
#define N_OF(a) (int)(sizeof a / sizeof *a)

void gguf_hf_name(char *out, size_t size, const char *name, bool gpt2) {
    const NameMap *whole = gpt2 ? GPT2_NAMES : LLAMA_NAMES, *layer = gpt2 ? GPT2_LAYER_NAMES : LLAMA_LAYER_NAMES;
    const int n_whole = gpt2 ? N_OF(GPT2_NAMES) : N_OF(LLAMA_NAMES),
              n_layer = gpt2 ? N_OF(GPT2_LAYER_NAMES) : N_OF(LLAMA_LAYER_NAMES);
    snprintf(out, size, "%s", name);
    for (int i = 0; i < n_whole; i++)
        if (strcmp(name, whole[i].gguf) == 0) snprintf(out, size, "%s", whole[i].hf);
    unsigned layer_index;
    int consumed = 0;
    if (sscanf(name, "blk.%u.%n", &layer_index, &consumed) != 1 || !consumed || name[4] < '0' || name[4] > '9') return;
    for (int i = 0; i < n_layer; i++)
        if (strcmp(name + consumed, layer[i].gguf) == 0)
            snprintf(out, size, "%s%u.%s", gpt2 ? "h." : "model.layers.", layer_index, layer[i].hf);
}

// The safetensors dtype of a GGUF tensor type: F32, F16, BF16 as themselves, quantized blocks as bytes (U8);
// −1 for the types not read.
static int st_dtype_of(uint32_t type) {
    switch (type) {
    case GGML_F32: return ST_F32;
    case GGML_F16: return ST_F16;
    case GGML_BF16: return ST_BF16;
    default: return qk_reads(type) ? ST_U8 : -1;
    }
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const StTensor *)a)->name, ((const StTensor *)b)->name);
}

// A llama's q or k projection (weight or bias), whose rows the converter interleaved.
static bool is_rotary(const char *hf, ModelType type) {
    if (type != MODEL_LLAMA) return false;  // (qwen2 and qwen3 are converted as they are)
    const char *p = strstr(hf, ".self_attn.");
    return p && (strncmp(p, ".self_attn.q_proj.", 18) == 0 || strncmp(p, ".self_attn.k_proj.", 18) == 0);
}

int gguf_view(StCheckpoint *ckpt, const GgufFile *f, const Config *cfg, Err *err) {
    *ckpt = (StCheckpoint){.linear_gpt2 = true};
    const bool gpt2 = cfg->model_type == MODEL_GPT2;
    enum { NAME = 128 };
    ckpt->tensors = calloc((size_t)f->n_tensors + 1, sizeof *ckpt->tensors);
    ckpt->names = malloc((size_t)(f->n_tensors + 1) * NAME);
    ckpt->fetched = calloc((size_t)f->n_tensors + 1, 1);
    if (!ckpt->tensors || !ckpt->names || !ckpt->fetched) {
        st_close(ckpt);
        return err_fmt(err, "%s: out of memory", f->path);
    }
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const GgufTensor *g = &f->tensors[i];
        const int dtype = st_dtype_of(g->type);
        if (dtype < 0) {
            st_close(ckpt);
            return err_fmt(err, "%s: tensor \"%.64s\" is %s; specdec reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                           "Q5_1, Q4_K, Q5_K and Q6_K tensors", f->path, g->name, gguf_type_name(g->type));
        }
        char *name = ckpt->names + (size_t)i * NAME;
        gguf_hf_name(name, NAME, g->name, gpt2);
        StTensor *t = &ckpt->tensors[ckpt->n_tensors++];
        *t = (StTensor){.name = name, .file = f->path, .dtype = (StDtype)dtype, .ndim = g->n_dims,
                        .n_elements = g->n_elements, .data = g->data, .n_bytes = g->n_bytes,
                        .rotary_rows = is_rotary(name, cfg->model_type) ? cfg->head_dim : 0,
                        .blocks = dtype == ST_U8 ? g->type : 0};
        for (int d = 0; d < g->n_dims; d++) t->shape[d] = g->ne[g->n_dims - 1 - d];  // ggml's order reversed
    }
    qsort(ckpt->tensors, (size_t)ckpt->n_tensors, sizeof *ckpt->tensors, by_name);
    for (int i = 1; i < ckpt->n_tensors; i++)
        if (strcmp(ckpt->tensors[i - 1].name, ckpt->tensors[i].name) == 0) {
            err_fmt(err, "%s: two tensors are both \"%s\" once renamed", f->path, ckpt->tensors[i].name);
            st_close(ckpt);
            return -1;
        }
    return 0;
}
