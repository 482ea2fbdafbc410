#include "random_checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char name[64];
    int64_t rows, cols;     // cols = 0 for a vector
    float scale;            // values uniform in [−scale, scale] (or all 1 for LayerNorm gains)
    bool ones;
} TensorSpec;

// xorshift64*: uniform floats in [−1, 1)
static float random_uniform(uint64_t *state) {
    *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
    return (float)((*state * 0x2545F4914F6CDD1DULL) >> 40) * 0x1.0p-24f * 2.0f - 1.0f;
}

// The start of tensor `name`'s random stream: the seed and the name hashed (FNV-1a), never 0 (xorshift's fixed
// point). Tensors of the same name and shape get the same values in every checkpoint of the same seed.
static uint64_t tensor_seed(uint64_t seed, const char *name) {
    uint64_t h = 0xcbf29ce484222325ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
    for (const char *c = name; *c; c++) h = (h ^ (uint8_t)*c) * 0x100000001B3ULL;
    return h ? h : 1;
}

static bool is_gpt2(const RandomCheckpoint *s) { return !s->model_type || strcmp(s->model_type, "gpt2") == 0; }

// Rows [from, to) of a tensor whose first value is `value` (RandomCheckpoint.favoured_token).
typedef struct {
    int64_t from, to;
    float value;
} Lead;

// The leads that favour spec's favoured token: every embedding's dimension 0, and the token's lm_head weight on it.
static Lead lead_of(const RandomCheckpoint *s, const char *name) {
    if (s->favoured_token <= 0 || !s->untied || is_gpt2(s)) return (Lead){0};
    if (strcmp(name, "model.embed_tokens.weight") == 0) return (Lead){0, s->vocab_size, 16 * s->scale};
    if (strcmp(name, "lm_head.weight") == 0) return (Lead){s->favoured_token, s->favoured_token + 1, 16 * s->scale};
    return (Lead){0};
}

// The stored type's name in the safetensors header and in config.json, and its bytes per value.
static const char *safetensors_dtype(const RandomCheckpoint *s) {
    if (s->f16) return "F16";
    return s->bf16 ? "BF16" : "F32";
}

static const char *torch_dtype(const RandomCheckpoint *s) {
    if (s->f16) return "float16";
    return s->bf16 ? "bfloat16" : "float32";
}

static size_t dtype_bytes(const RandomCheckpoint *s) { return s->f16 || s->bf16 ? 2 : 4; }

// v as an F16, rounded to nearest even: below F16's smallest normal (2⁻¹⁴) to a multiple of its subnormals' unit
// 2⁻²⁴ (lrintf, in the default rounding mode); from 65520 on, infinity.
static uint16_t f16_bits(float v) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    const uint16_t sign = (uint16_t)((bits >> 16) & 0x8000);
    const float a = fabsf(v);
    if (a >= 65520.0f) return sign | 0x7c00;
    if (a < 0x1p-14f) return sign | (uint16_t)lrintf(a * 0x1p24f);
    const uint32_t magnitude = bits & 0x7fffffff, rounded = magnitude + 0xfff + ((magnitude >> 13) & 1);
    return sign | (uint16_t)((rounded >> 13) - ((127 - 15) << 10));  // the exponent's bias 127 → 15
}

// Writes a tensor's values as F32, BF16 or F16 (rounded to nearest even), through a buffer.
static void put_values(FILE *f, const TensorSpec *t, const RandomCheckpoint *s, Lead lead, uint64_t *state) {
    uint8_t buf[1 << 16];
    size_t used = 0, elem = dtype_bytes(s), count = (size_t)t->rows * (t->cols ? t->cols : 1);
    for (size_t k = 0; k < count; k++) {
        float v = t->ones ? 1.0f : t->scale * random_uniform(state);
        const size_t cols = t->cols ? (size_t)t->cols : 1;
        if (k % cols == 0 && (int64_t)(k / cols) >= lead.from && (int64_t)(k / cols) < lead.to) v = lead.value;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        if (s->f16) {
            const uint16_t half = f16_bits(v);
            memcpy(buf + used, &half, 2);
        } else if (s->bf16) {
            uint16_t half = (uint16_t)((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
            memcpy(buf + used, &half, 2);
        } else {
            memcpy(buf + used, &bits, 4);
        }
        used += elem;
        if (used == sizeof buf || k + 1 == count) {
            fwrite(buf, 1, used, f);
            used = 0;
        }
    }
}

// The tensors of a GPT-2 checkpoint with spec's shape, in file order; *n receives their number.
static TensorSpec *gpt2_tensors(const RandomCheckpoint *s, int *n) {
    const int d = s->n_embd, L = s->n_layer;
    const float w = s->scale, b = 0.4f * s->scale;
    TensorSpec *t = calloc((size_t)(4 + 12 * L), sizeof *t);
    if (!t) return NULL;
    int k = 0;
    t[k++] = (TensorSpec){"wte.weight", s->vocab_size, d, w, false};
    t[k++] = (TensorSpec){"wpe.weight", s->n_positions, d, 0.2f * w, false};
    for (int l = 0; l < L; l++) {
        const TensorSpec block[] = {
            {"ln_1.weight", d, 0, 0, true}, {"ln_1.bias", d, 0, b, false},
            {"attn.c_attn.weight", d, 3 * d, w, false}, {"attn.c_attn.bias", 3 * d, 0, b, false},
            {"attn.c_proj.weight", d, d, w, false}, {"attn.c_proj.bias", d, 0, b, false},
            {"ln_2.weight", d, 0, 0, true}, {"ln_2.bias", d, 0, b, false},
            {"mlp.c_fc.weight", d, 4 * d, w, false}, {"mlp.c_fc.bias", 4 * d, 0, b, false},
            {"mlp.c_proj.weight", 4 * d, d, 0.6f * w, false}, {"mlp.c_proj.bias", d, 0, b, false},
        };
        for (size_t i = 0; i < sizeof block / sizeof block[0]; i++, k++) {
            t[k] = block[i];
            snprintf(t[k].name, sizeof t[k].name, "h.%d.%.24s", l, block[i].name);
        }
    }
    t[k++] = (TensorSpec){"ln_f.weight", d, 0, 0, true};
    t[k++] = (TensorSpec){"ln_f.bias", d, 0, b, false};
    *n = k;
    return t;
}

static int kv_heads(const RandomCheckpoint *s) { return s->n_kv_head ? s->n_kv_head : s->n_head; }
static int mlp_width(const RandomCheckpoint *s) { return s->n_inner ? s->n_inner : 4 * s->n_embd; }

// The tensors of a Llama-family checkpoint (transformers' names), in file order; *n receives their number.
static TensorSpec *llama_tensors(const RandomCheckpoint *s, int *n) {
    const int d = s->n_embd, L = s->n_layer, hd = d / s->n_head, q = s->n_head * hd, kv = kv_heads(s) * hd,
              F = mlp_width(s);
    const bool qwen2 = strcmp(s->model_type, "qwen2") == 0, qwen3 = strcmp(s->model_type, "qwen3") == 0;
    const float w = s->scale, b = 0.4f * s->scale;
    TensorSpec *t = calloc((size_t)(3 + 14 * L), sizeof *t);
    if (!t) return NULL;
    int k = 0;
    t[k++] = (TensorSpec){"model.embed_tokens.weight", s->vocab_size, d, w, false};
    if (s->untied) t[k++] = (TensorSpec){"lm_head.weight", s->vocab_size, d, w, false};
    for (int l = 0; l < L; l++) {
        const TensorSpec block[] = {
            {"input_layernorm.weight", d, 0, 0, true},
            {"self_attn.q_proj.weight", q, d, w, false}, {"self_attn.k_proj.weight", kv, d, w, false},
            {"self_attn.v_proj.weight", kv, d, w, false},
            {"self_attn.q_proj.bias", q, 0, b, false}, {"self_attn.k_proj.bias", kv, 0, b, false},
            {"self_attn.v_proj.bias", kv, 0, b, false},
            {"self_attn.q_norm.weight", hd, 0, 0, true}, {"self_attn.k_norm.weight", hd, 0, 0, true},
            {"self_attn.o_proj.weight", d, q, w, false},
            {"post_attention_layernorm.weight", d, 0, 0, true},
            {"mlp.gate_proj.weight", F, d, w, false}, {"mlp.up_proj.weight", F, d, w, false},
            {"mlp.down_proj.weight", d, F, 0.6f * w, false},
        };
        for (size_t i = 0; i < sizeof block / sizeof block[0]; i++) {
            if (strstr(block[i].name, "proj.bias") && !qwen2) continue;
            if (strstr(block[i].name, "_norm.") && !qwen3) continue;
            t[k] = block[i];
            snprintf(t[k].name, sizeof t[k].name, "model.layers.%d.%.31s", l % 100000, block[i].name);
            k++;
        }
    }
    t[k++] = (TensorSpec){"model.norm.weight", d, 0, 0, true};
    *n = k;
    return t;
}

// config.json for spec: end-of-text is the last id.
static void write_config(FILE *f, const RandomCheckpoint *s) {
    if (is_gpt2(s)) {
        fprintf(f, "{\"model_type\": \"gpt2\", \"n_embd\": %d, \"n_head\": %d, \"n_layer\": %d, \"n_positions\": %d, "
                "\"vocab_size\": %d, \"bos_token_id\": %d, \"eos_token_id\": %d}\n", s->n_embd, s->n_head, s->n_layer,
                s->n_positions, s->vocab_size, s->vocab_size - 1, s->vocab_size - 1);
        return;
    }
    fprintf(f, "{\"model_type\": \"%s\", \"hidden_size\": %d, \"intermediate_size\": %d, \"num_hidden_layers\": %d, "
            "\"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d, \"max_position_embeddings\": "
            "%d, \"vocab_size\": %d, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000.0, \"tie_word_embeddings\": %s, "
            "\"bos_token_id\": %d, \"eos_token_id\": %d, \"torch_dtype\": \"%s\"}\n", s->model_type, s->n_embd,
            mlp_width(s), s->n_layer, s->n_head, kv_heads(s), s->n_embd / s->n_head, s->n_positions, s->vocab_size,
            s->untied ? "false" : "true", s->vocab_size - 1, s->vocab_size - 1, torch_dtype(s));
}

int random_checkpoint_write(const char *dir, const RandomCheckpoint *s, Err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return err_fmt(err, "%s: cannot write", path);
    write_config(f, s);
    fclose(f);

    int n = 0;
    TensorSpec *t = is_gpt2(s) ? gpt2_tensors(s, &n) : llama_tensors(s, &n);
    size_t cap = (size_t)n * 160 + 64, len = 0, offset = 0, elem = dtype_bytes(s);
    char *header = malloc(cap);
    if (!t || !header) {
        free(t);
        free(header);
        return err_fmt(err, "out of memory");
    }
    // {"name": {"dtype": "F32", "shape": [rows, cols], "data_offsets": [begin, end]}, ...}
    len += snprintf(header + len, cap - len, "{");
    for (int i = 0; i < n; i++) {
        size_t bytes = (size_t)t[i].rows * (t[i].cols ? t[i].cols : 1) * elem;
        char shape[48];
        if (t[i].cols) snprintf(shape, sizeof shape, "%lld,%lld", (long long)t[i].rows, (long long)t[i].cols);
        else snprintf(shape, sizeof shape, "%lld", (long long)t[i].rows);
        len += snprintf(header + len, cap - len, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                        i ? "," : "", t[i].name, safetensors_dtype(s), shape, offset, offset + bytes);
        offset += bytes;
    }
    len += snprintf(header + len, cap - len, "}");

    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = 0;
    if (!(f = fopen(path, "wb"))) {
        rc = err_fmt(err, "%s: cannot write", path);
    } else {
        uint64_t header_len = len;
        fwrite(&header_len, 8, 1, f);
        fwrite(header, 1, len, f);
        for (int i = 0; i < n; i++) {
            uint64_t state = tensor_seed(s->seed, t[i].name);
            put_values(f, &t[i], s, lead_of(s, t[i].name), &state);
        }
        if (ferror(f)) rc = err_fmt(err, "%s: write failed", path);
        fclose(f);
    }
    free(header);
    free(t);
    return rc;
}

void random_checkpoint_remove(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    unlink(path);
    rmdir(dir);
}
