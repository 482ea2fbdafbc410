// test_gguf_models.c — GGUF checkpoints (tests/fixtures/gguf, tools/make_gguf_fixtures.py): each float fixture's
// model.gguf, converted by llama.cpp's gguf-py from the model.safetensors beside it, gives logits bit for bit those
// of the safetensors folder, in every architecture read (llama with its q/k rows permuted, Llama 3's rope_freqs,
// qwen2's biases, qwen3's q/k norms, gpt2's transposed matrices), F32, F16 and BF16; each quantized fixture
// (llama-quantize's Q8_0, Q4_0, Q4_1, Q4_K_M, Q6_K; Q4_K_M and Q5_K_M on rows of 64, which take its fallbacks Q5_0,
// Q5_1 and Q8_0), and `specdec convert`'s q5_k_m and q6_k files, give logits whose cosine with those of its weights dequantized by
// gguf-py (expected.bin, a float64 forward) is at least the bound its type is held to, at every position; their
// quantized matrices are held as the file stores them.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/gguf.h"
#include "checkpoint/gguf_convert.h"
#include "harness.h"
#include "model/model.h"
#include "sdfx.h"

#define GGUF_FIXTURES "tests/fixtures/gguf"

static const char *const FLOAT_FIXTURES[] = {"llama_gqa_f32", "llama3_rope_bf16", "qwen2_bias_f16",
                                             "qwen3_qknorm_bf16", "gpt2_f32"};
static const int TOKENS[] = {0, 7, 3, 11, 1, 5, 9, 2};
enum { T = sizeof TOKENS / sizeof *TOKENS };

// The logits [T, V] of every position of TOKENS under the checkpoint at path (*V set); NULL after a failed CHECK.
static float *logits_of(const char *path, ThreadPool *pool, Quant quant, int *V) {
    Err err = {{0}};
    Model m;
    if (model_load_quantized(&m, path, pool, quant, &err)) {
        CHECK(false, "%s: %s", path, err.msg);
        return NULL;
    }
    KVCache cache;
    *V = m.n_vocab;
    float *logits = malloc(sizeof(float) * T * (size_t)m.n_vocab);
    CHECK(model_kv_init(&m, &cache, &err) == 0 && model_forward(&m, &cache, TOKENS, T, logits, true, &err) == 0,
          "%s: %s", path, err.msg);
    kv_free(&cache);
    model_free(&m);
    return logits;
}

TEST(gguf_float_logits_equal_safetensors) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    for (size_t i = 0; i < sizeof FLOAT_FIXTURES / sizeof *FLOAT_FIXTURES; i++) {
        char dir[256], file[300];
        snprintf(dir, sizeof dir, "%s/%s", GGUF_FIXTURES, FLOAT_FIXTURES[i]);
        snprintf(file, sizeof file, "%s/model.gguf", dir);
        int V_st = 0, V_gguf = 0;
        float *want = logits_of(dir, pool, QUANT_NONE, &V_st), *got = logits_of(file, pool, QUANT_NONE, &V_gguf);
        CHECK(want && got && V_st == V_gguf && memcmp(want, got, sizeof(float) * T * (size_t)V_st) == 0,
              "%s: the GGUF's logits differ from the safetensors folder's", FLOAT_FIXTURES[i]);
        free(want);
        free(got);
    }
    pool_free(pool);
}

// cos(a, b) of two rows [V], in double.
static double cosine(const float *a, const float *b, int V) {
    double ab = 0, aa = 0, bb = 0;
    for (int j = 0; j < V; j++) {
        ab += (double)a[j] * b[j];
        aa += (double)a[j] * a[j];
        bb += (double)b[j] * b[j];
    }
    return ab / sqrt(aa * bb);
}

// The logits of the GGUF at path, held as stored and quantized again to q8, against those of its weights
// dequantized by gguf-py in expected_path (expected.bin's SDFX): a cosine of at least min_cosine at every position.
static void check_near_dequantized(const char *path, const char *expected_path, double min_cosine, ThreadPool *pool) {
    Expected e;
    if (!expected_read(&e, expected_path)) {
        CHECK(false, "%s: missing or malformed", expected_path);
        return;
    }
    CHECK(e.T == T && memcmp(e.tokens, TOKENS, sizeof TOKENS) == 0, "%s: other tokens", expected_path);
    static const Quant HOW[] = {QUANT_NONE, QUANT_Q8};  // K-quants held as stored, and quantized again to q8
    for (size_t h = 0; h < sizeof HOW / sizeof *HOW; h++) {
        const Quant quant = HOW[h];
        int V = 0;
        float *got = logits_of(path, pool, quant, &V);
        double worst = 1;
        for (int t = 0; got && V == e.V && t < T; t++)
            worst = fmin(worst, cosine(got + (size_t)t * V, e.logits + (size_t)t * V, V));
        printf("    %-40s %-6s worst cosine %.6f (bound %.3f)\n", expected_path + strlen(GGUF_FIXTURES) + 1,
               quant_name(quant), worst, min_cosine);
        CHECK(got && V == e.V && worst >= min_cosine, "%s quant %s: cosine %.6f < %.3f (V %d, expected %d)", path,
              quant_name(quant), worst, min_cosine, V, e.V);
        free(got);
    }
    expected_free(&e);
}

TEST(gguf_quantized_logits_match_dequantized_weights) {
    static const struct {
        const char *name;
        double min_cosine;  // the bounds: 0.999 for 8- and 6-bit weights, 0.99 for 4-bit ones
    } CASES[] = {{"llama_q8_0", 0.999},          {"llama_q6_k", 0.999},         {"llama_q4_0", 0.99},
                 {"llama_q4_1", 0.99},           {"llama_q4_k_m", 0.99},        {"llama_q4_k_m_narrow", 0.99},
                 {"llama_q5_k_m_narrow", 0.99}};
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char path[256], expected_path[256];
        snprintf(path, sizeof path, "%s/%s/model.gguf", GGUF_FIXTURES, CASES[i].name);
        snprintf(expected_path, sizeof expected_path, "%s/%s/expected.bin", GGUF_FIXTURES, CASES[i].name);
        check_near_dequantized(path, expected_path, CASES[i].min_cosine, pool);
    }
    pool_free(pool);
}

// `specdec convert --type q5_k_m` and `--type q6_k` of convert_llama (the bytes llama-quantize writes:
// tests/checkpoint/test_gguf_convert.c) read back: logits within a cosine of 0.999 at every position of those of
// llama-quantize's file's weights dequantized by gguf-py (expected_q5_k_m.bin, expected_q6_k.bin, made by
// tools/make_gguf_fixtures.py).
TEST(gguf_converted_q5_k_m_and_q6_k_match_their_dequantized_weights) {
    static const struct {
        ConvertType type;
        const char *name;
    } CASES[] = {{CONVERT_Q5_K_M, "q5_k_m"}, {CONVERT_Q6_K, "q6_k"}};
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    char dir[] = "/tmp/specdec-converted-XXXXXX", path[300], expected_path[300];
    CHECK(mkdtemp(dir), "mkdtemp");
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, CASES[i].name);
        snprintf(expected_path, sizeof expected_path, "%s/convert_llama/expected_%s.bin", GGUF_FIXTURES, CASES[i].name);
        CHECK(gguf_convert(GGUF_FIXTURES "/convert_llama", path, CASES[i].type, NULL, pool, &err) == 0, "%s: %s", path,
              err.msg);
        check_near_dequantized(path, expected_path, 0.999, pool);
        unlink(path);
    }
    rmdir(dir);
    pool_free(pool);
}

// `specdec convert` (tests/checkpoint/test_gguf_convert.c holds its tensors to llama.cpp's): the BF16 fixture folder
// convert_llama written as bf16 gives its logits bit for bit; as q8_0, q4_0 and q4_k_m (the bytes llama-quantize
// writes, so the logits of its files), logits whose cosine with the folder's float ones is at every position at
// least 0.999 for q8_0 and, for the 4-bit types, a bound under what 4-bit rounding of this random model costs (worst
// 0.92 for q4_0, 0.97 for q4_k_m, as stored or as q8) yet far above what a misplaced row or scale would give.
TEST(gguf_converted_logits_equal_or_near_the_folder) {
    static const struct {
        ConvertType type;
        const char *name;
        double min_cosine;  // bf16: 1, and the bytes of the logits equal
    } CASES[] = {{CONVERT_BF16, "bf16", 1}, {CONVERT_Q8_0, "q8_0", 0.999}, {CONVERT_Q4_0, "q4_0", 0.9},
                 {CONVERT_Q4_K_M, "q4_k_m", 0.95}};
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    const char *folder = GGUF_FIXTURES "/convert_llama";
    char dir[] = "/tmp/specdec-converted-XXXXXX", path[300];
    CHECK(mkdtemp(dir), "mkdtemp");
    int V_folder = 0;
    float *want = logits_of(folder, pool, QUANT_NONE, &V_folder);
    for (size_t i = 0; want && i < sizeof CASES / sizeof *CASES; i++) {
        snprintf(path, sizeof path, "%s/%s.gguf", dir, CASES[i].name);
        CHECK(gguf_convert(folder, path, CASES[i].type, NULL, pool, &err) == 0, "%s: %s", path, err.msg);
        static const Quant HOW[] = {QUANT_NONE, QUANT_Q8};  // held as stored, and quantized again to q8
        for (size_t h = 0; h < sizeof HOW / sizeof *HOW && CASES[i].type != CONVERT_BF16; h++) {
            const Quant quant = HOW[h];
            int V = 0;
            float *got = logits_of(path, pool, quant, &V);
            double worst = 1;
            for (int t = 0; got && V == V_folder && t < T; t++)
                worst = fmin(worst, cosine(got + (size_t)t * V, want + (size_t)t * V, V));
            printf("    converted %-7s %-6s worst cosine %.6f (bound %.3f)\n", CASES[i].name, quant_name(quant), worst,
                   CASES[i].min_cosine);
            CHECK(got && V == V_folder && worst >= CASES[i].min_cosine, "converted %s, %s: cosine %.6f < %.3f",
                  CASES[i].name, quant_name(quant), worst, CASES[i].min_cosine);
            free(got);
        }
        if (CASES[i].type == CONVERT_BF16) {
            int V = 0;
            float *got = logits_of(path, pool, QUANT_NONE, &V);
            CHECK(got && V == V_folder && memcmp(got, want, sizeof(float) * T * (size_t)V) == 0,
                  "converted bf16: the logits differ from the folder's");
            free(got);
        }
        unlink(path);
    }
    free(want);
    rmdir(dir);
    pool_free(pool);
}

// The context a model loaded from path runs with (0 after a failed CHECK).
static int context_of(const char *path, ThreadPool *pool) {
    Err err = {{0}};
    Model m;
    if (model_load(&m, path, pool, &err)) {
        CHECK(false, "%s: %s", path, err.msg);
        return 0;
    }
    const int n_ctx = m.cfg.n_positions;
    model_free(&m);
    return n_ctx;
}

// convert_llama with a sliding window of 16 (use_sliding_window, as a Qwen's config says it), converted to bf16:
// the file's context_length is the folder's max_position_embeddings (131072), as llama.cpp's converter writes it,
// and both load with the window's context of 16 and give the same logits bit for bit (within the window, which
// TOKENS do not fill, sliding-window attention is plain causal attention).
TEST(gguf_converted_window_keeps_the_context_and_logits) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    char dir[] = "/tmp/specdec-window-XXXXXX", folder[64], path[96], command[512], *out, *err_text;
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(folder, sizeof folder, "%s/windowed", dir);
    snprintf(path, sizeof path, "%s/windowed.gguf", dir);
    snprintf(command, sizeof command, "mkdir %s && ln -s \"$PWD\"/%s/convert_llama/*.safetensors \"$PWD\"/%s/"
             "convert_llama/tokenizer* %s/ && sed 's/\"tie_word_embeddings\": true,/&\\n \"use_sliding_window\": "
             "true, \"sliding_window\": 16,/' %s/convert_llama/config.json > %s/config.json", folder, GGUF_FIXTURES,
             GGUF_FIXTURES, folder, GGUF_FIXTURES, folder);
    CHECK(run_command(command, &out, &err_text) == 0, "%s: %s", command, err_text);
    free(out), free(err_text);
    CHECK(gguf_convert(folder, path, CONVERT_BF16, NULL, pool, &err) == 0, "%s: %s", path, err.msg);
    GgufFile f;
    int64_t declared = 0;
    if (!test_failures() && gguf_open(&f, path, &err) == 0) {
        CHECK(gguf_get_int(&f, "llama.context_length", 1, INT32_MAX, &declared, NULL, &err) == 0 && declared == 131072,
              "llama.context_length %lld %s", (long long)declared, err.msg);
        gguf_close(&f);
    }
    const int ctx_folder = context_of(folder, pool), ctx_file = context_of(path, pool);
    CHECK(ctx_folder == 16 && ctx_file == 16, "contexts: the folder's %d, the file's %d", ctx_folder, ctx_file);
    int V_folder = 0, V_file = 0;
    float *want = logits_of(folder, pool, QUANT_NONE, &V_folder), *got = logits_of(path, pool, QUANT_NONE, &V_file);
    CHECK(want && got && V_file == V_folder && memcmp(got, want, sizeof(float) * T * (size_t)V_folder) == 0,
          "the windowed file's logits differ from the folder's");
    free(want), free(got);
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(run_command(command, &out, &err_text) == 0, "%s: %s", command, err_text);
    free(out), free(err_text);
    pool_free(pool);
}

// `generate -m TARGET OPTIONS` greedy for 12 tokens, and again with `-d DRAFT DRAFT_OPTIONS`: the same ids.
static void check_speculates_as_target_only(const char *target, const char *options, const char *draft,
                                            const char *draft_options) {
    char args[512], *plain, *spec, *err_plain, *err_spec;
    snprintf(args, sizeof args, "generate -m %s %s --ids '0 7 3' -n 12 --print-ids", target, options);
    const int status_plain = run_specdec(args, &plain, &err_plain);
    snprintf(args, sizeof args, "generate -m %s %s -d %s %s --ids '0 7 3' -n 12 --gamma 3 --print-ids", target,
             options, draft, draft_options);
    const int status_spec = run_specdec(args, &spec, &err_spec);
    CHECK(status_plain == 0 && status_spec == 0 && strcmp(plain, spec) == 0 && count_lines(plain) == 1,
          "%s: \"%s\" (%s) against target-only \"%s\" (%s)", args, spec, err_spec, plain, err_plain);
    free(plain);
    free(spec);
    free(err_plain);
    free(err_spec);
}

// A GGUF target with a safetensors draft and the other way round (the same weights here): greedy speculative
// output is the target's own greedy output.
TEST(gguf_pairs_with_a_safetensors_folder) {
    const char *dir = GGUF_FIXTURES "/llama_gqa_f32", *file = GGUF_FIXTURES "/llama_gqa_f32/model.gguf";
    check_speculates_as_target_only(file, "", dir, "");
    check_speculates_as_target_only(dir, "", file, "");
}

// generate on a Q4_K_M file (its K-quants held as stored, the default): greedy speculative output, with the file
// as its own draft, is the target's own greedy output; and so under --quant stored, the default's other name.
TEST(gguf_q4_k_m_speculates_as_target_only) {
    const char *file = GGUF_FIXTURES "/llama_q4_k_m/model.gguf";
    check_speculates_as_target_only(file, "", file, "");
    check_speculates_as_target_only(file, "--quant stored", file, "--draft-quant stored");
    const char *narrow = GGUF_FIXTURES "/llama_q4_k_m_narrow/model.gguf";  // its Q5_0 and Q8_0 fallbacks
    check_speculates_as_target_only(narrow, "", narrow, "");
}

// Read without --quant (or with --quant stored), a quantized file's matrices are held as the file's blocks
// (kernels.h, "GGUF's Q8_0 and Q4_0", "GGUF's K-quants"), as llama-quantize chose them: llama_q4_0 and llama_q4_1
// have their head in Q8_0 (llama_q4_1's other matrices in q5's panels), llama_q4_k_m its v and down projections and its head in Q6_K — its q/k/v stack, q and k in Q4_K with v in
// Q6_K, as two matrices (Linear.tail_rows). The narrow ones' rows of 64 took llama-quantize's fallbacks: Q4_K_M's Q5_0 is
// held in q5's panels (layer 0's q and k too, with its v, Q6_K's fallback Q8_0, apart), and Q5_K_M's Q5_1 too. Under
// --quant q8 every matrix is quantized again.
static WeightType held_under(Quant quant, WeightType stored) { return quant == QUANT_Q8 ? WEIGHT_Q8 : stored; }

TEST(gguf_quantized_held_as_stored) {
    static const struct {
        const char *name;
        WeightType qkv, out, up, down, embeddings, head;  // as stored
        int v_apart;   // the layers whose v is stored in another type than q and k, held apart: a bit each
        WeightType v;  // that v's type
    } CASES[] = {
        {"llama_q4_0", WEIGHT_Q4_0, WEIGHT_Q4_0, WEIGHT_Q4_0, WEIGHT_Q4_0, WEIGHT_Q4_0, WEIGHT_Q8_0, 0, 0},
        {"llama_q4_1", WEIGHT_Q4_1, WEIGHT_Q4_1, WEIGHT_Q4_1, WEIGHT_Q4_1, WEIGHT_Q4_1, WEIGHT_Q8_0, 0, 0},
        {"llama_q8_0", WEIGHT_Q8_0, WEIGHT_Q8_0, WEIGHT_Q8_0, WEIGHT_Q8_0, WEIGHT_Q8_0, WEIGHT_Q8_0, 0, 0},
        {"llama_q6_k", WEIGHT_Q6_K, WEIGHT_Q6_K, WEIGHT_Q6_K, WEIGHT_Q6_K, WEIGHT_Q6_K, WEIGHT_Q6_K, 0, 0},
        // q and k in Q4_K, v in Q6_K (layer 0: llama-quantize's use_more_bits): two matrices as stored
        {"llama_q4_k_m", WEIGHT_Q4_K, WEIGHT_Q4_K, WEIGHT_Q4_K, WEIGHT_Q6_K, WEIGHT_Q4_K, WEIGHT_Q6_K, 1, WEIGHT_Q6_K},
        // the same with the fallbacks: q and k in Q5_0, layer 0's v in Q8_0
        {"llama_q4_k_m_narrow", WEIGHT_Q5_0, WEIGHT_Q5_0, WEIGHT_Q5_0, WEIGHT_Q6_K, WEIGHT_Q5_0, WEIGHT_Q8_0, 1,
         WEIGHT_Q8_0},
        // Q5_K_M's: Q5_1 for Q5_K, layer 0's v in Q8_0
        {"llama_q5_k_m_narrow", WEIGHT_Q5_1, WEIGHT_Q5_1, WEIGHT_Q5_1, WEIGHT_Q6_K, WEIGHT_Q5_1, WEIGHT_Q8_0, 1,
         WEIGHT_Q8_0},
    };
    static const Quant QUANTS[] = {QUANT_NONE, QUANT_STORED, QUANT_Q8};
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++)
        for (size_t q = 0; q < sizeof QUANTS / sizeof *QUANTS; q++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s/model.gguf", GGUF_FIXTURES, CASES[i].name);
            Model m;
            if (model_load_quantized(&m, path, pool, QUANTS[q], &err)) {
                CHECK(false, "%s: %s", path, err.msg);
                continue;
            }
            const char *how = quant_name(QUANTS[q]);
#define HELD(field) held_under(QUANTS[q], CASES[i].field)
            CHECK(m.wte.type == HELD(embeddings) && m.lm_head.type == HELD(head), "%s quant %s: embeddings %d, head %d",
                  CASES[i].name, how, m.wte.type, m.lm_head.type);
            for (int l = 0; l < m.cfg.n_layer; l++) {
                const Block *b = &m.blocks[l];
                CHECK(b->attn_qkv.type == HELD(qkv) && b->attn_out.type == HELD(out) && b->mlp_up.type == HELD(up) &&
                          b->mlp_down.type == HELD(down), "%s quant %s layer %d: %d %d %d %d", CASES[i].name,
                      how, l, b->attn_qkv.type, b->attn_out.type, b->mlp_up.type, b->mlp_down.type);
                const bool apart = QUANTS[q] != QUANT_Q8 && CASES[i].v_apart >> l & 1;
                const int v_rows = m.cfg.n_kv_head * m.cfg.head_dim;
                CHECK(apart ? b->attn_qkv.tail_rows == v_rows && b->attn_qkv.tail_type == CASES[i].v
                            : b->attn_qkv.tail_rows == 0,
                      "%s quant %s layer %d: v's %d rows held apart as %d", CASES[i].name, how, l,
                      b->attn_qkv.tail_rows, b->attn_qkv.tail_type);
            }
#undef HELD
            CHECK(m.quant == QUANT_Q8, "%s quant %s: the model says %s", CASES[i].name, how, quant_name(m.quant));
            model_free(&m);
        }
    pool_free(pool);
}
