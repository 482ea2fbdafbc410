#include "random_checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    char name[48];
    int64_t rows, cols;     // cols = 0 for a vector
    float scale;            // values uniform in [−scale, scale] (or all 1 for LayerNorm gains)
    bool ones;
} TensorSpec;

// xorshift64*: uniform floats in [−1, 1)
static float random_uniform(uint64_t *state) {
    *state ^= *state >> 12, *state ^= *state << 25, *state ^= *state >> 27;
    return (float)((*state * 0x2545F4914F6CDD1DULL) >> 40) * 0x1.0p-24f * 2.0f - 1.0f;
}

// Writes a tensor's values as F32 or BF16 (rounded to nearest even), through a buffer.
static void put_values(FILE *f, const TensorSpec *t, bool bf16, uint64_t *state) {
    uint8_t buf[1 << 16];
    size_t used = 0, elem = bf16 ? 2 : 4, count = (size_t)t->rows * (t->cols ? t->cols : 1);
    for (size_t k = 0; k < count; k++) {
        float v = t->ones ? 1.0f : t->scale * random_uniform(state);
        uint32_t bits;
        memcpy(&bits, &v, 4);
        if (bf16) {
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
static TensorSpec *tensor_list(const RandomCheckpoint *s, int *n) {
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

int random_checkpoint_write(const char *dir, const RandomCheckpoint *s, Err *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) return err_fmt(err, "%s: cannot write", path);
    fprintf(f, "{\"model_type\": \"gpt2\", \"n_embd\": %d, \"n_head\": %d, \"n_layer\": %d, \"n_positions\": %d, "
            "\"vocab_size\": %d, \"bos_token_id\": %d, \"eos_token_id\": %d}\n", s->n_embd, s->n_head, s->n_layer,
            s->n_positions, s->vocab_size, s->vocab_size - 1, s->vocab_size - 1);
    fclose(f);

    int n = 0;
    TensorSpec *t = tensor_list(s, &n);
    size_t cap = (size_t)n * 160 + 64, len = 0, offset = 0, elem = s->bf16 ? 2 : 4;
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
                        i ? "," : "", t[i].name, s->bf16 ? "BF16" : "F32", shape, offset, offset + bytes);
        offset += bytes;
    }
    len += snprintf(header + len, cap - len, "}");

    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    int rc = 0;
    if (!(f = fopen(path, "wb"))) {
        rc = err_fmt(err, "%s: cannot write", path);
    } else {
        uint64_t header_len = len, state = s->seed * 0x9E3779B97F4A7C15ULL + 1;
        fwrite(&header_len, 8, 1, f);
        fwrite(header, 1, len, f);
        for (int i = 0; i < n; i++) put_values(f, &t[i], s->bf16, &state);
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
