// test_gguf_convert.c — `specdec convert` against what llama.cpp's own tools write: the fixture
// tests/fixtures/gguf/convert_llama (a BF16 Llama 3-style folder with a tokenizer and a chat template, made by
// tools/make_gguf_fixtures.py) and its expected_tensors.txt, the name, type, shape and FNV-1a hash of every tensor,
// in file order, of the kit's to_gguf.py (bf16) and of llama-quantize then (q8_0, q4_0, q4_k_m, q5_k_m, q6_k). The
// converted files hold the same tensors byte for byte (the fallbacks for rows that are not whole 256-blocks, Q5_0,
// Q5_1 and Q8_0, included), the metadata a loader needs, and tokenize and render as the folder does. Bad options are refused on one line. (The logits: tests/model/test_gguf_models.c.) And the
// quantizers' halves and blocks on fresh random input.
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/gguf.h"
#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_quantize.h"
#include "kernels.h"
#include "harness.h"
#include "hf_expected.h"
#include "tokenizer_fixtures.h"

#define FOLDER "tests/fixtures/gguf/convert_llama"

static const char *const TYPES[] = {"bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k"};
enum { N_TYPES = sizeof TYPES / sizeof *TYPES };

typedef struct {
    char label[16], name[64], type[16];
    long long ne0, ne1;
    unsigned long long hash;
} Expected;

// The folder's expected_tensors.txt's lines into rows (at most max); their number.
static int read_expected(const char *folder, Expected *rows, int max) {
    char path[256];
    snprintf(path, sizeof path, "%s/expected_tensors.txt", folder);
    FILE *f = fopen(path, "r");
    CHECK(f, "cannot open %s", path);
    int n = 0;
    while (f && n < max && fscanf(f, "%15s %63s %15s %lld %lld %llx", rows[n].label, rows[n].name, rows[n].type,
                                  &rows[n].ne0, &rows[n].ne1, &rows[n].hash) == 6)
        n++;
    if (f) fclose(f);
    return n;
}

static unsigned long long fnv1a(const uint8_t *data, size_t n) {
    unsigned long long h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ data[i]) * 0x100000001b3ull;
    return h;
}

// The expected row of `label`'s tensor `name`, or NULL.
static const Expected *expected(const Expected *rows, int n, const char *label, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].label, label) == 0 && strcmp(rows[i].name, name) == 0) return &rows[i];
    return NULL;
}

// Converts the folder to dir/TYPE.gguf with the binary, on `threads` threads; the path in out.
static void convert_folder(char *out, size_t size, const char *folder, const char *dir, const char *type,
                           int threads) {
    snprintf(out, size, "%s/%s.gguf", dir, type);
    char args[1024], *stdout_text, *stderr_text;
    snprintf(args, sizeof args, "convert -m %s -o %s --type %s --threads %d", folder, out, type, threads);
    const int rc = run_specdec(args, &stdout_text, &stderr_text);
    CHECK(rc == 0, "specdec %s: exit %d: %s", args, rc, stderr_text);
    free(stdout_text);
    free(stderr_text);
}

static void convert(char *out, size_t size, const char *dir, const char *type, int threads) {
    convert_folder(out, size, FOLDER, dir, type, threads);
}

// The file's tensors against the label's expected rows: same names, types, shapes and bytes, in the same order
// (any_order: each found by its name).
static void check_tensors(const GgufFile *f, const char *label, const Expected *rows, int n, bool any_order) {
    int n_label = 0;
    for (int i = 0; i < n; i++) n_label += strcmp(rows[i].label, label) == 0;
    CHECK(n_label == f->n_tensors, "%s: %lld tensors, llama.cpp's file has %d", label, (long long)f->n_tensors, n_label);
    for (int k = 0, i = 0; k < f->n_tensors; k++) {
        const GgufTensor *t = &f->tensors[k];
        const Expected *e = NULL;
        if (any_order) e = expected(rows, n, label, t->name);
        else {
            while (i < n && strcmp(rows[i].label, label) != 0) i++;
            if (i < n) e = &rows[i++];
        }
        CHECK(e, "%s: tensor %d (%s) is not in llama.cpp's file", label, k, t->name);
        if (!e) return;
        const unsigned long long hash = fnv1a(t->data, t->n_bytes);
        CHECK(strcmp(t->name, e->name) == 0, "%s: tensor %d is %s, llama.cpp's is %s", label, k, t->name, e->name);
        CHECK(t->ne[0] == e->ne0 && t->ne[1] == e->ne1, "%s: %s is [%lld, %lld], llama.cpp's [%lld, %lld]", label,
              t->name, (long long)t->ne[0], (long long)t->ne[1], e->ne0, e->ne1);
        CHECK(strcmp(gguf_type_name(t->type), e->type) == 0, "%s: %s is %s, llama.cpp's %s", label, t->name,
              gguf_type_name(t->type), e->type);
        CHECK(hash == e->hash, "%s: %s's bytes differ from llama.cpp's (hash %016llx, expected %016llx)", label,
              t->name, hash, e->hash);
    }
}

// The metadata entries a loader reads, present and right.
static void check_metadata(const GgufFile *f, const char *label) {
    const char *s;
    size_t len;
    int64_t v;
    Err err = {{0}};
    CHECK(gguf_get_string(f, "general.architecture", &s, &len, NULL, &err) == 0 && len == 5 && !memcmp(s, "llama", 5),
          "%s: general.architecture: %s", label, err.msg);
    CHECK(gguf_get_int(f, "llama.block_count", 0, 100, &v, NULL, &err) == 0 && v == 2, "%s: block_count", label);
    CHECK(gguf_get_int(f, "llama.attention.head_count_kv", 0, 100, &v, NULL, &err) == 0 && v == 1, "%s: kv heads",
          label);
    CHECK(gguf_get_string(f, "tokenizer.ggml.pre", &s, &len, NULL, &err) == 0 && len == 9 && !memcmp(s, "llama-bpe", 9),
          "%s: tokenizer.ggml.pre: %s", label, err.msg);
    const GgufKv *tokens, *merges;
    CHECK(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, NULL, &err) == 0 && tokens->count == 272,
          "%s: tokenizer.ggml.tokens: %s", label, err.msg);
    CHECK(gguf_get_array(f, "tokenizer.ggml.merges", GGUF_STRING, &merges, NULL, &err) == 0 && merges->count == 11,
          "%s: tokenizer.ggml.merges: %s", label, err.msg);
    CHECK(gguf_get_int(f, "tokenizer.ggml.bos_token_id", 0, 1000, &v, NULL, &err) == 0 && v == 267, "%s: bos", label);
    CHECK(gguf_get_string(f, "tokenizer.chat_template", &s, &len, NULL, &err) == 0 && len > 0, "%s: chat template: %s",
          label, err.msg);
    bool found;
    CHECK(gguf_get_int(f, "general.quantization_version", 0, 10, &v, &found, &err) == 0 &&
          found == (strcmp(label, "bf16") != 0), "%s: general.quantization_version", label);
    CHECK(gguf_get_int(f, "llama.attention.sliding_window", 0, 1 << 30, &v, &found, &err) == 0 && !found,
          "%s: a sliding window where the folder has none", label);
}

// The folder converted to each type, its tensors held to the folder's expected_tensors.txt (n_rows lines); for
// convert_llama (llama_metadata) also its metadata, and its bf16 file in to_gguf.py's order (the others' bf16 lines,
// written by tools/make_gguf_fixtures.py itself, in any order).
static void check_conversions(const char *folder, int n_rows, bool llama_metadata) {
    static Expected rows[256];
    const int n = read_expected(folder, rows, 256);
    CHECK(n == n_rows, "%s/expected_tensors.txt: %d rows", folder, n);
    char dir[] = "/tmp/specdec-convert-XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    for (int i = 0; i < N_TYPES; i++) {
        char path[256];
        // on 1 to 4 threads: the bytes never depend on them
        convert_folder(path, sizeof path, folder, dir, TYPES[i], 1 + i % 4);
        GgufFile f;
        Err err = {{0}};
        CHECK(gguf_open(&f, path, &err) == 0, "%s: %s", path, err.msg);
        if (test_failures()) break;
        check_tensors(&f, TYPES[i], rows, n, !llama_metadata && i == 0);
        if (llama_metadata) check_metadata(&f, TYPES[i]);
        gguf_close(&f);
        unlink(path);
    }
    rmdir(dir);
}

TEST(convert_writes_llama_cpp_tensors_byte_for_byte) { check_conversions(FOLDER, 126, true); }

// The other architectures. The kit's to_gguf.py converts llamas alone, so their bf16 tensors are
// tools/make_gguf_fixtures.py's own conversion (as convert_hf_to_gguf.py writes each architecture: Qwen2's q/k/v
// biases, Qwen3's q/k norms and separate head, GPT-2's transposed Conv1D matrices and its head a copy of wte),
// compared by name; the q8_0, q4_0, q4_k_m, q5_k_m and q6_k ones are llama-quantize's of that file, in its order,
// GPT-2's rows of 32 taking its fallbacks (Q5_0 for Q4_K, Q5_1 for Q5_K, Q8_0 for Q6_K), its attn_qkv counted as an attn_v (Q6_K, then Q8_0, in the
// last of its 3 layers alone).
TEST(convert_writes_qwen2_qwen3_gpt2_tensors_as_llama_quantize) {
    check_conversions("tests/fixtures/gguf/convert_qwen2", 84, false);
    check_conversions("tests/fixtures/gguf/convert_qwen3", 84, false);
    check_conversions("tests/fixtures/gguf/convert_gpt2", 246, false);
}

// Mistral's sliding_window, written under gguf-py's key for it (`<arch>.attention.sliding_window`, u32) and read
// back, and the context_length written max_position_embeddings, as llama.cpp's converter writes it (the load cuts
// the context to the window, for the file as for the folder: tests/model/test_gguf_models.c).
TEST(convert_writes_and_reads_mistral_s_sliding_window) {
    char dir[] = "/tmp/specdec-convert-XXXXXX", folder[64], path[256], command[1024], *out, *err_text;
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(folder, sizeof folder, "%s/mistral", dir);
    // the Hugging Face fixture (context 128, no window) with a window of 64 in its config.json
    snprintf(command, sizeof command, "mkdir %s && ln -s \"$PWD\"/%s/mistral_untied_sharded_f32/model* %s/ && "
             "sed 's/\"sliding_window\": null/\"sliding_window\": 64/' %s/mistral_untied_sharded_f32/config.json "
             "> %s/config.json", folder, HF_FIXTURES, folder, HF_FIXTURES, folder);
    CHECK(run_command(command, &out, &err_text) == 0, "%s: %s", command, err_text);
    free(out), free(err_text);
    convert_folder(path, sizeof path, folder, dir, "bf16", 2);
    GgufFile f;
    Err err = {{0}};
    CHECK(gguf_open(&f, path, &err) == 0, "%s: %s", path, err.msg);
    if (!test_failures()) {
        int64_t v = 0;
        CHECK(gguf_get_int(&f, "llama.attention.sliding_window", 1, 1 << 30, &v, NULL, &err) == 0 && v == 64,
              "llama.attention.sliding_window: %lld %s", (long long)v, err.msg);
        CHECK(gguf_get_int(&f, "llama.context_length", 1, 1 << 30, &v, NULL, &err) == 0 && v == 128,
              "llama.context_length: %lld, not max_position_embeddings 128 %s", (long long)v, err.msg);
        Config cfg;
        CHECK(gguf_config(&cfg, &f, &err) == 0 && cfg.sliding_window == 64 && cfg.n_positions == 128,
              "read back: window %d, context %d %s", cfg.sliding_window, cfg.n_positions, err.msg);
        gguf_close(&f);
    }
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(run_command(command, &out, &err_text) == 0, "%s: %s", command, err_text);
    free(out), free(err_text);
}

// `specdec ARGS` with -m folder and with -m the converted file print the same.
static void check_same_output(const char *file, const char *args) {
    char a[1024], b[1024], *out_a, *out_b, *err_a, *err_b;
    snprintf(a, sizeof a, "%s -m %s", args, FOLDER);
    snprintf(b, sizeof b, "%s -m %s", args, file);
    const int rc_a = run_specdec(a, &out_a, &err_a), rc_b = run_specdec(b, &out_b, &err_b);
    CHECK(rc_a == 0 && rc_b == 0, "specdec %s: %d %s / %d %s", args, rc_a, err_a, rc_b, err_b);
    CHECK(strcmp(out_a, out_b) == 0 && out_a[0], "specdec %s: the folder gives \"%s\", the GGUF \"%s\"", args, out_a,
          out_b);
    free(out_a), free(out_b), free(err_a), free(err_b);
}

TEST(convert_round_trips_tokenize_and_render) {
    char dir[] = "/tmp/specdec-convert-XXXXXX", path[256], messages[300];
    CHECK(mkdtemp(dir), "mkdtemp");
    convert(path, sizeof path, dir, "q8_0", 2);
    snprintf(messages, sizeof messages, "%s/messages.json", dir);
    FILE *m = fopen(messages, "w");
    CHECK(m, "cannot write %s", messages);
    if (m) {
        fputs("[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Is the heat "
              "on?\"}]", m);
        fclose(m);
    }
    check_same_output(path, "tokenize 'the heater at 42 <|eot_id|> sent in, re-entered!\n\tnew'");
    check_same_output(path, "tokenize --allow-special 'there <|eot_id|> at the end'");
    char args[512];
    snprintf(args, sizeof args, "render --add-generation-prompt --print-ids -f %s", messages);
    check_same_output(path, args);
    snprintf(args, sizeof args, "render --add-generation-prompt -f %s", messages);
    check_same_output(path, args);
    unlink(messages);
    unlink(path);
    rmdir(dir);
}

// `specdec ARGS` exits 2 with one line on stderr holding `says`, and leaves no file in dir.
static void check_refused(const char *dir, const char *args, const char *says) {
    char *out, *err;
    const int rc = run_specdec(args, &out, &err);
    CHECK(rc == 2 && count_lines(err) == 1 && strstr(err, says), "specdec %s: exit %d, stderr \"%s\" (expected \"%s\")",
          args, rc, err, says);
    free(out), free(err);
    char command[300], *listing, *list_err;
    snprintf(command, sizeof command, "ls -A %s", dir);
    run_command(command, &listing, &list_err);
    CHECK(listing[0] == 0, "specdec %s left files: %s", args, listing);
    free(listing), free(list_err);
}

TEST(convert_refuses_bad_options_on_one_line) {
    static const struct {
        const char *args;  // %s: an empty folder of the test's
        const char *says;
    } CASES[] = {
        {"convert -m " FOLDER " -o %s/x.gguf --type q5_k", "--type: expected bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k"},
        {"convert -m " FOLDER " -o %s/x.gguf", "--type: expected bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k (it is "
                                                "required)"},
        {"convert -m " FOLDER " --type q8_0", "-o FILE.gguf is required"},
        {"convert -o %s/x.gguf --type q8_0", "-m DIR is required"},
        {"convert -m tests/fixtures/gguf/llama_q8_0/model.gguf -o %s/x.gguf --type q8_0", "is a GGUF file already"},
        {"convert -m /nonexistent/folder -o %s/x.gguf --type q8_0", "/nonexistent/folder/config.json"},
        {"convert -m " FOLDER " -o %s/no/such/folder.gguf --type q8_0", "cannot create"},
        {"convert -m " FOLDER " -o /dev/null --type q8_0", "/dev/null: exists and is not a regular file"},
        {"convert -m " FOLDER " -o %s --type q8_0", "exists and is not a regular file"},
    };
    char dir[] = "/tmp/specdec-convert-XXXXXX", args[600];
    CHECK(mkdtemp(dir), "mkdtemp");
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        snprintf(args, sizeof args, CASES[i].args, dir);
        check_refused(dir, args, CASES[i].says);
    }
    rmdir(dir);
}

// ---- the quantizers (gguf_quantize.h) on fresh random rows ------------------------------------------------------

TEST(f32_to_f16_rounds_to_nearest_even) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00) continue;  // inf, NaN
        const float x = f16_to_f32((uint16_t)h);
        CHECK(f32_to_f16(x) == h, "half %04x: %g back as %04x", h, x, f32_to_f16(x));
        if ((h & 0x7fff) == 0x7bff) continue;  // the largest: its successor is infinity
        const float next = f16_to_f32((uint16_t)(h + 1)), mid = (x + next) / 2;  // (exact in float)
        const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        if (h != 0x8000) CHECK(f32_to_f16(mid) == even, "half %04x: the midpoint %.9g went to %04x", h, mid,
                               f32_to_f16(mid));
    }
    CHECK(f32_to_f16(65520.0f) == 0x7c00 && f32_to_f16(65519.0f) == 0x7bff && f32_to_f16(-1e9f) == 0xfc00,
          "overflow to infinity");
}

// Each type's rows quantized and dequantized back (qk.h) come within a bound of the weights' RMS: the codes are
// where the format says they are (a wrong nibble or scale gives errors of the order of the weights themselves).
// Weights of magnitude 0.01 to 100, where the blocks' half-precision scales are normal numbers (for weights near
// 1e-6 they underflow, in llama.cpp's files as here).
TEST(gguf_quantize_round_trips_random_rows) {
    static const struct {
        uint32_t type;
        double bound;  // of RMS(error) / RMS(x) for Gaussian rows (worst of one run: 0.006, 0.09, 0.018, 0.075, 0.046,
                       // 0.039, 0.038)
    } CASES[] = {{GGML_Q8_0, 0.01}, {GGML_Q4_0, 0.12}, {GGML_Q6_K, 0.03}, {GGML_Q4_K, 0.1},
                 {GGML_Q5_0, 0.06}, {GGML_Q5_1, 0.06}, {GGML_Q5_K, 0.05}};
    enum { N = 1024 };
    static float x[N], back[N];
    static uint8_t blocks[N * 2];
    for (int trial = 0; trial < 20; trial++) {
        const float scale = powf(10.0f, test_rand_uniform(-2, 2));
        for (int i = 0; i < N; i++) {
            const float u = test_rand_uniform(1e-7f, 1), v = test_rand_uniform(0, 1);
            x[i] = trial % 4 == 3 && i % 64 < 32 ? 0.0f : scale * sqrtf(-2 * logf(u)) * cosf(6.2831853f * v);
        }
        for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
            gguf_quantize_row(blocks, x, CASES[c].type, N);
            qk_dequantize_row(back, blocks, CASES[c].type, N);
            double err2 = 0, x2 = 0;
            for (int i = 0; i < N; i++) err2 += (double)(x[i] - back[i]) * (x[i] - back[i]), x2 += (double)x[i] * x[i];
            if (getenv("SPECDEC_VERBOSE")) printf("    %s %.4f\n", gguf_type_name(CASES[c].type), sqrt(err2 / x2));
            CHECK(sqrt(err2 / x2) <= CASES[c].bound, "%s, scale %g: relative RMS error %.4f > %.3f",
                  gguf_type_name(CASES[c].type), scale, sqrt(err2 / x2), CASES[c].bound);
        }
    }
}

// ---- the split of the work among threads (pool_run_chunks) -------------------------------------------------------

// A weight that is not finite stops a quantizing conversion naming the tensor's first such row, whatever the
// threads: a random Llama's embedding table (259 rows) with NaN in rows 40 and 200, which two threads' chunks of
// the rows hold apart, converted to q8_0 on 1, 2 and 3 threads.
TEST(convert_names_the_first_row_that_is_not_finite_on_any_threads) {
    char *dir = fixture_dir();
    const RandomCheckpoint spec = {.model_type = "llama", .n_layer = 1, .n_embd = 64, .n_head = 2, .vocab_size = 259,
                                   .n_positions = 64, .scale = 0.5f, .seed = 7};
    char *ckpt = fixture_chat_checkpoint(dir, &spec), path[PATH_MAX];
    CHECK(ckpt != NULL, "no checkpoint");
    if (!ckpt) return;
    // The table's bytes: after the 8-byte header length and the header, at its data_offsets.
    snprintf(path, sizeof path, "%s/model.safetensors", ckpt);
    FILE *f = fopen(path, "r+b");
    uint64_t header = 0;
    CHECK(f && fread(&header, 8, 1, f) == 1, "%s: cannot read", path);
    char *text = calloc(1, header + 1);
    CHECK(f && fread(text, 1, header, f) == header, "%s: short header", path);
    json_t *root = json_loads(text, 0, NULL);
    const json_t *offsets = json_object_get(json_object_get(root, "model.embed_tokens.weight"), "data_offsets");
    CHECK(json_is_array(offsets), "%s: no model.embed_tokens.weight", path);
    const long table = 8 + (long)header + (long)json_integer_value(json_array_get(offsets, 0));
    const float nan = NAN;
    for (int i = 0; f && offsets && i < 2; i++) {
        const int row = i == 0 ? 40 : 200;
        CHECK(fseek(f, table + (long)sizeof(float) * (row * spec.n_embd + 5), SEEK_SET) == 0 &&
                  fwrite(&nan, sizeof nan, 1, f) == 1, "%s: cannot write", path);
    }
    if (f) fclose(f);
    json_decref(root);
    free(text);
    for (int threads = 1; threads <= 3 && !test_failures(); threads++) {
        char args[2 * PATH_MAX + 64], *out, *err;
        snprintf(args, sizeof args, "convert -m %s -o %s/x.gguf --type q8_0 --threads %d", ckpt, dir, threads);
        const int rc = run_specdec(args, &out, &err);
        CHECK(rc == 2 && count_lines(err) == 1 && strstr(err, "\"model.embed_tokens.weight\"") &&
                  strstr(err, "holds a weight that is not finite (row 40)"),
              "%d threads: exit %d, stderr \"%s\"", threads, rc, err);
        free(out), free(err);
    }
    free(ckpt);
    fixture_remove_dir(dir);
}
