// hf_expected.c — reading what transformers computed from the fixtures of ../shared/fixtures/hf (hf_expected.h).
#include "hf_expected.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "harness.h"

const char *const HF_FIXTURE_NAMES[N_HF_FIXTURES] = {
    "llama_gqa_f32", "llama3_rope_tied_bf16", "qwen2_bias_tied_f32", "qwen3_qknorm_headdim_bf16",
    "mistral_untied_sharded_f32", "gpt2_hf_written_f32",
};

// The I64 vector `name` of ckpt as ints; NULL (and a failed check) if it is missing or not I64 [n].
static int *read_ids(const StCheckpoint *ckpt, const char *name, int *n) {
    const StTensor *t = st_find(ckpt, name);
    CHECK(t && t->dtype == ST_I64 && t->ndim == 1, "expected.safetensors: no I64 vector \"%s\"", name);
    if (!t || t->dtype != ST_I64 || t->ndim != 1) return NULL;
    *n = (int)t->shape[0];
    int *ids = malloc(sizeof(int) * (size_t)*n);
    for (int i = 0; i < *n; i++) {
        int64_t v;
        memcpy(&v, t->data + 8 * (size_t)i, 8);
        ids[i] = (int)v;
    }
    return ids;
}

bool hf_expected_read(HfExpected *e, const char *dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    StCheckpoint ckpt;
    Err err = {{0}};
    *e = (HfExpected){0};
    CHECK(st_open(&ckpt, path, &err) == 0, "%s", err.msg);
    if (test_failures()) return false;
    e->ids = read_ids(&ckpt, "input_ids", &e->T);
    e->prompt = read_ids(&ckpt, "greedy_prompt", &e->n_prompt);
    e->greedy = read_ids(&ckpt, "greedy_ids", &e->n_greedy);
    const StTensor *l = st_find(&ckpt, "logits");
    CHECK(l && l->dtype == ST_F32 && l->ndim == 2 && l->shape[0] == e->T, "%s: no F32 logits [%d, V]", path, e->T);
    if (l && l->dtype == ST_F32 && l->ndim == 2) {
        e->V = (int)l->shape[1];
        e->logits = malloc(l->n_bytes);
        st_to_f32(e->logits, l->data, ST_F32, (size_t)l->n_elements);
    }
    st_close(&ckpt);
    return !test_failures();
}

void hf_expected_free(HfExpected *e) {
    free(e->ids);
    free(e->prompt);
    free(e->greedy);
    free(e->logits);
}
