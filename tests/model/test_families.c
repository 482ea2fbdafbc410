// test_families.c — every checkpoint in ../shared/fixtures/hf, written by Hugging Face transformers itself (its
// README), against what transformers computes from it: the logits of every position within LOGIT_TOLERANCE of its
// float64 logits, fed all at once and token by token, and its greedy continuation token for token.
//
// expected.safetensors is read with the project's own safetensors loader: input_ids (I64 [13]), logits
// (F32 [13, V]), greedy_prompt (I64 [5]), greedy_ids (I64 [16]).
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "harness.h"
#include "model/model.h"
#include "speculative/speculative.h"

#define HF_FIXTURES "../shared/fixtures/hf"

static const char *const FIXTURES[] = {
    "llama_gqa_f32", "llama3_rope_tied_bf16", "qwen2_bias_tied_f32", "qwen3_qknorm_headdim_bf16",
    "mistral_untied_sharded_f32", "gpt2_hf_written_f32",
};
enum { N_FIXTURES = sizeof FIXTURES / sizeof FIXTURES[0], SHOWN = 5 };

typedef struct {
    int T, V, n_prompt, n_greedy;
    int *ids, *prompt, *greedy;  // [T], [n_prompt], [n_greedy]
    float *logits;               // [T, V]
} HfExpected;

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

static bool hf_expected_read(HfExpected *e, const char *dir) {
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

static void hf_expected_free(HfExpected *e) {
    free(e->ids);
    free(e->prompt);
    free(e->greedy);
    free(e->logits);
}

// Max error (harness.h's measure) of got [T, V] against want; shows the first few logits beyond the tolerance.
static double check_logits(const char *name, const char *how, const float *got, const float *want, int T, int V) {
    double max_err = 0;
    int bad = 0;
    for (int t = 0; t < T; t++) {
        const double row_max = logit_row_max(want + (size_t)t * V, V);
        for (int j = 0; j < V; j++) {
            double err = logit_error(got[(size_t)t * V + j], want[(size_t)t * V + j], row_max);
            if (!(err <= LOGIT_TOLERANCE) && bad++ < SHOWN)
                test_fail(__FILE__, __LINE__, "%s (%s): position %d logit %d: got %.9g, transformers %.9g (error %.2e)",
                          name, how, t, j, got[(size_t)t * V + j], want[(size_t)t * V + j], err);
            max_err = isnan(err) ? INFINITY : fmax(max_err, err);
        }
    }
    printf("    %-28s %-20s max error %.1e\n", name, how, max_err);
    return max_err;
}

static void check_fixture(const char *name) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, name);
    HfExpected e;
    if (!hf_expected_read(&e, dir)) return;
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    Model m;
    CHECK(pool && model_load(&m, dir, pool, &err) == 0, "%s: %s", name, err.msg);
    if (test_failures()) {
        hf_expected_free(&e);
        if (pool) pool_free(pool);
        return;
    }
    CHECK(m.n_vocab == e.V, "%s: V = %d, transformers' logits have %d", name, m.n_vocab, e.V);
    KVCache cache;
    CHECK(model_kv_init(&m, &cache, &err) == 0, "%s", err.msg);
    float *logits = malloc(sizeof(float) * (size_t)e.T * e.V);
    if (m.n_vocab == e.V && !test_failures()) {
        CHECK(model_forward(&m, &cache, e.ids, e.T, logits, true, &err) == 0, "%s: %s", name, err.msg);
        check_logits(name, "all at once", logits, e.logits, e.T, e.V);
        kv_truncate(&cache, 0);
        for (int t = 0; t < e.T; t++)
            CHECK(model_forward(&m, &cache, &e.ids[t], 1, logits + (size_t)t * e.V, true, &err) == 0, "%s", err.msg);
        check_logits(name, "token by token", logits, e.logits, e.T, e.V);

        // Greedy continuation, no end-of-text stop, as transformers' generate(do_sample=False) made it.
        int *out = malloc(sizeof(int) * (size_t)e.n_greedy), n_out = 0;
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = e.n_greedy, .eos_id = -1};
        SpecStats stats;
        Rng rng;
        rng_seed(&rng, 1);
        CHECK(speculative_generate(&m, NULL, e.prompt, e.n_prompt, &params, &rng, out, &n_out, &stats, &err) == 0,
              "%s: %s", name, err.msg);
        CHECK(n_out == e.n_greedy && memcmp(out, e.greedy, sizeof(int) * (size_t)n_out) == 0,
              "%s: the greedy continuation differs from transformers'", name);
        for (int i = 0; i < n_out && i < e.n_greedy; i++)
            if (out[i] != e.greedy[i]) {
                CHECK(false, "%s: greedy token %d is %d, transformers' %d", name, i, out[i], e.greedy[i]);
                break;
            }
        free(out);
    }
    free(logits);
    kv_free(&cache);
    model_free(&m);
    pool_free(pool);
    hf_expected_free(&e);
}

TEST(families_llama_gqa) { check_fixture(FIXTURES[0]); }
TEST(families_llama3_rope_tied_bf16) { check_fixture(FIXTURES[1]); }
TEST(families_qwen2_bias_tied) { check_fixture(FIXTURES[2]); }
TEST(families_qwen3_qknorm_headdim_bf16) { check_fixture(FIXTURES[3]); }
TEST(families_mistral_untied_sharded) { check_fixture(FIXTURES[4]); }
TEST(families_gpt2_hf_written) { check_fixture(FIXTURES[5]); }

// transformers writes bos/eos 50256 into a GPT-2 config of any vocabulary; it warns and loads it, and so does
// specdec: exit 0, the logits on stdout, one line of warning on stderr.
TEST(families_cli_warns_of_ids_outside_vocabulary) {
    char command[512], *out = NULL, *err = NULL;
    snprintf(command, sizeof command, "%s logits -m %s/gpt2_hf_written_f32 --ids \"1 2 3\"", specdec_bin(),
             HF_FIXTURES);
    int status = run_command(command, &out, &err);
    CHECK(status == 0, "`%s` exited with %d: %s", command, status, err ? err : "");
    CHECK(out && strchr(out, '\n') && strchr(out, '\n')[1] == '\0', "one line of logits expected: %.80s",
          out ? out : "");
    const char *newline = err ? strchr(err, '\n') : NULL;
    CHECK(newline && newline[1] == '\0' && strstr(err, "warning") &&
              strstr(err, "eos_token_id 50256 is outside the vocabulary [0, 300): generation will not stop at it"),
          "stderr: \"%s\"", err ? err : "");
    free(out);
    free(err);
}
