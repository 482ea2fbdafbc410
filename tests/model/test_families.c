// test_families.c — every checkpoint in ../shared/fixtures/hf, written by Hugging Face transformers itself (its
// README), against what transformers computes from it: the logits of every position within LOGIT_TOLERANCE of its
// float64 logits, fed all at once and token by token, and its greedy continuation token for token
// (expected.safetensors: hf_expected.h).
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "hf_expected.h"
#include "model/model.h"
#include "random_checkpoint.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

enum { SHOWN = 5 };

// Max error (harness.h's measure) of got [T, V] against want; shows the first few logits beyond the tolerance.
static double check_logits(const char *name, const char *how, const float *got, const float *want, int T, int V,
                           double tolerance) {
    double max_err = 0;
    int bad = 0;
    for (int t = 0; t < T; t++) {
        const double row_max = logit_row_max(want + (size_t)t * V, V);
        for (int j = 0; j < V; j++) {
            double err = logit_error(got[(size_t)t * V + j], want[(size_t)t * V + j], row_max);
            if (!(err <= tolerance) && bad++ < SHOWN)
                test_fail(__FILE__, __LINE__, "%s (%s): position %d logit %d: got %.9g, transformers %.9g (error %.2e)",
                          name, how, t, j, got[(size_t)t * V + j], want[(size_t)t * V + j], err);
            max_err = isnan(err) ? INFINITY : fmax(max_err, err);
        }
    }
    printf("    %-28s %-20s max error %.1e\n", name, how, max_err);
    return max_err;
}

static void check_fixture_as(const char *name, Quant quant, double tolerance) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, name);
    HfExpected e;
    if (!hf_expected_read(&e, dir)) return;
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    Model m;
    CHECK(pool && model_load_quantized(&m, dir, pool, quant, &err) == 0, "%s: %s", name, err.msg);
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
        check_logits(name, "all at once", logits, e.logits, e.T, e.V, tolerance);
        kv_truncate(&cache, 0);
        for (int t = 0; t < e.T; t++)
            CHECK(model_forward(&m, &cache, &e.ids[t], 1, logits + (size_t)t * e.V, true, &err) == 0, "%s", err.msg);
        check_logits(name, "token by token", logits, e.logits, e.T, e.V, tolerance);

        // Greedy continuation, no end-of-text stop, as transformers' generate(do_sample=False) made it.
        int *out = malloc(sizeof(int) * (size_t)e.n_greedy), n_out = 0;
        SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .max_tokens = e.n_greedy, .eos_id = -1};
        SpecStats stats;
        CHECK(speculative_generate(&m, NULL, e.prompt, e.n_prompt, &params, out, &n_out, &stats, &err) == 0,
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

static void check_fixture(const char *name) { check_fixture_as(name, QUANT_NONE, LOGIT_TOLERANCE); }

TEST(families_llama_gqa) { check_fixture(HF_FIXTURE_NAMES[0]); }
TEST(families_llama3_rope_tied_bf16) { check_fixture(HF_FIXTURE_NAMES[1]); }
TEST(families_qwen2_bias_tied) { check_fixture(HF_FIXTURE_NAMES[2]); }
TEST(families_qwen3_qknorm_headdim_bf16) { check_fixture(HF_FIXTURE_NAMES[3]); }
TEST(families_mistral_untied_sharded) { check_fixture(HF_FIXTURE_NAMES[4]); }
TEST(families_gpt2_hf_written) { check_fixture(HF_FIXTURE_NAMES[5]); }

// QUANT_BF16 (model.h) rounds the weights and every matmul's activations to BF16, as a bfloat16 model in
// transformers computes its matmuls. Each fixture's logits in that arithmetic, on the best kernels this CPU has:
//   - against transformers' float64 logits within BF16_TOLERANCE: inputs rounded to 8 bits of mantissa move a
//     logit by a few hundredths of the largest (measured: 2.6e-2 to 4.5e-2 over the six fixtures);
//   - against the same arithmetic on the scalar reference kernels within BF16_REFERENCE_TOLERANCE: the two differ
//     in the order of their sums (measured: 4e-7 to 8e-7, F32 rounding), and where that moves an activation
//     across the midpoint between two BF16 values, which then round apart (3.5e-3 and 2.1e-3 in two fixtures).
// The greedy continuation is not compared with transformers' float32 one: rounding changes near ties.
enum { BF16_TOKENS = 13 };
#define BF16_TOLERANCE 0.1
#define BF16_REFERENCE_TOLERANCE 1e-2

static bool forward_as(float *logits, const char *dir, const char *isa, const int *ids, int T) {
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    if (isa) setenv("SPECDEC_ISA", isa, 1);
    Model m;
    const bool loaded = pool && model_load_quantized(&m, dir, pool, QUANT_BF16, &err) == 0;
    unsetenv("SPECDEC_ISA");
    CHECK(loaded, "%s (%s): %s", dir, isa ? isa : "best kernels", err.msg);
    KVCache cache = {0};
    const bool ok = loaded && model_kv_init(&m, &cache, &err) == 0 && model_forward(&m, &cache, ids, T, logits, true,
                                                                                    &err) == 0;
    CHECK(!loaded || ok, "%s: %s", dir, err.msg);
    if (loaded) kv_free(&cache), model_free(&m);
    if (pool) pool_free(pool);
    return ok;
}

TEST(families_bf16_arithmetic) {
    const Kernels *selected = kernels_select(NULL, 0);  // the variant a model loads (SPECDEC_ISA's, or the best)
    if (!selected || !selected->matmul_bf16_dot) {
        printf("    (the %s kernels have no BF16 dot product: nothing to check)\n", selected ? selected->name : "?");
        return;
    }
    for (int f = 0; f < N_HF_FIXTURES; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[f]);
        HfExpected e;
        if (!hf_expected_read(&e, dir)) return;
        float *best = malloc(sizeof(float) * (size_t)e.T * e.V), *scalar = malloc(sizeof(float) * (size_t)e.T * e.V);
        if (forward_as(best, dir, NULL, e.ids, e.T) && forward_as(scalar, dir, "scalar", e.ids, e.T)) {
            check_logits(HF_FIXTURE_NAMES[f], "bf16", best, e.logits, e.T, e.V, BF16_TOLERANCE);
            check_logits(HF_FIXTURE_NAMES[f], "bf16, vs scalar", best, scalar, e.T, e.V, BF16_REFERENCE_TOLERANCE);
        }
        free(best);
        free(scalar);
        hf_expected_free(&e);
    }
}

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
    CHECK(newline && newline[1] == '\0' && strncmp(err, "specdec: warning: ", 18) == 0 &&
              strstr(err, "bos_token_id 50256 is outside the vocabulary [0, 300): ignored; eos_token_id 50256: "
                          "generation will not stop at it\n"),
          "stderr: \"%s\"", err ? err : "");
    free(out);
    free(err);
}

// Batch invariance on every family, in F32 arithmetic and (where the kernels have a BF16 dot product) in
// QUANT_BF16's: a whole context of random tokens fed one at a time, then in random chunks of 1..16 with 2 threads —
// every position's logits bit-identical (greedy speculative output relies on it).
TEST(families_batch_invariant) {
    const Kernels *selected = kernels_select(NULL, 0);  // the variant a model loads (SPECDEC_ISA's, or the best)
    for (int f = 0; f < 2 * N_HF_FIXTURES; f++) {
        const Quant quant = f < N_HF_FIXTURES ? QUANT_NONE : QUANT_BF16;
        if (quant == QUANT_BF16 && !(selected && selected->matmul_bf16_dot)) break;
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[f % N_HF_FIXTURES]);
        Err err = {{0}};
        ThreadPool *one = pool_create(1, &err), *two = pool_create(2, &err);
        Model a, b;
        CHECK(model_load_quantized(&a, dir, one, quant, &err) == 0 &&
                  model_load_quantized(&b, dir, two, quant, &err) == 0,
              "%s", err.msg);
        if (test_failures()) return;
        b.work_per_thread = 0;  // every job split over both threads, small as the fixtures are
        const int S = a.cfg.n_positions < 96 ? a.cfg.n_positions : 96, V = a.n_vocab;
        KVCache ca, cb;
        CHECK(model_kv_init(&a, &ca, &err) == 0 && model_kv_init(&b, &cb, &err) == 0, "%s", err.msg);
        int *tokens = malloc(sizeof(int) * S);
        float *single = malloc(sizeof(float) * S * V), *chunked = malloc(sizeof(float) * S * V);
        for (int i = 0; i < S; i++) tokens[i] = test_rand_int(0, V - 1);
        for (int t = 0; t < S; t++)
            CHECK(model_forward(&a, &ca, tokens + t, 1, single + (size_t)t * V, true, &err) == 0, "%s", err.msg);
        for (int done = 0, n; done < S; done += n) {
            n = test_rand_int(1, 16);
            n = n < S - done ? n : S - done;
            CHECK(model_forward(&b, &cb, tokens + done, n, chunked + (size_t)done * V, true, &err) == 0, "%s",
                  err.msg);
        }
        size_t i = 0;
        while (i < (size_t)S * V && memcmp(&single[i], &chunked[i], sizeof(float)) == 0) i++;
        CHECK(i == (size_t)S * V, "%s (%s): position %zu logit %zu: %a one at a time, %a in chunks",
              HF_FIXTURE_NAMES[f % N_HF_FIXTURES], quant_name(quant), i / V, i % V, single[i], chunked[i]);
        free(tokens);
        free(single);
        free(chunked);
        kv_free(&ca);
        kv_free(&cb);
        model_free(&a);
        model_free(&b);
        pool_free(one);
        pool_free(two);
    }
}

// model_limit_context on every family: the cache holds only the limit's positions (Kᵀ's rows that much shorter),
// the logits of the positions within it are bit-identical to the full context's, and one more token is refused.
TEST(families_limited_context) {
    for (int f = 0; f < N_HF_FIXTURES; f++) {
        char dir[256];
        snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[f]);
        Err err = {{0}};
        ThreadPool *pool = pool_create(2, &err);
        Model full, cut;
        CHECK(model_load(&full, dir, pool, &err) == 0 && model_load(&cut, dir, pool, &err) == 0, "%s", err.msg);
        if (test_failures()) return;
        const int n = full.cfg.n_positions / 2 < 20 ? full.cfg.n_positions / 2 : 20, V = full.n_vocab;
        CHECK(model_limit_context(&cut, n, &err) == 0 && cut.cfg.n_positions == n, "%s", err.msg);
        KVCache cf, cc;
        CHECK(model_kv_init(&full, &cf, &err) == 0 && model_kv_init(&cut, &cc, &err) == 0, "%s", err.msg);
        CHECK(cc.n_ctx == n && cc.ld_k < cf.ld_k, "%s: cache of %d positions (ld_k %d), full %d", HF_FIXTURE_NAMES[f],
              cc.n_ctx, cc.ld_k, cf.ld_k);
        int *tokens = malloc(sizeof(int) * (n + 1));
        float *a = malloc(sizeof(float) * n * V), *b = malloc(sizeof(float) * n * V);
        for (int i = 0; i <= n; i++) tokens[i] = test_rand_int(0, V - 1);
        CHECK(model_forward(&full, &cf, tokens, n, a, true, &err) == 0, "%s", err.msg);
        CHECK(model_forward(&cut, &cc, tokens, n - 3, b, true, &err) == 0 &&
                  model_forward(&cut, &cc, tokens + n - 3, 3, b + (size_t)(n - 3) * V, true, &err) == 0,
              "%s", err.msg);
        CHECK(memcmp(a, b, sizeof(float) * n * V) == 0, "%s: logits differ under --ctx %d", HF_FIXTURE_NAMES[f], n);
        CHECK(model_forward(&cut, &cc, tokens + n, 1, b, false, &err) != 0 && strstr(err.msg, "--ctx"),
              "%s: position %d past the limit: \"%s\"", HF_FIXTURE_NAMES[f], n, err.msg);
        free(tokens), free(a), free(b);
        kv_free(&cf), kv_free(&cc);
        model_free(&full), model_free(&cut);
        pool_free(pool);
    }
}

// ---- pairs on the command line --------------------------------------------------------------------------------

// A random Qwen2 checkpoint of vocab_size rows in dir, with the shipped target's tokenizer.json when with_tokenizer.
static void write_qwen2(const char *dir, int vocab_size, int n_layer, bool with_tokenizer) {
    Err err = {{0}};
    char command[512];
    snprintf(command, sizeof command, "mkdir -p %s%s%s", dir, with_tokenizer ? " && cp weights/pystd/target/"
             "tokenizer.json " : "", with_tokenizer ? dir : "");
    CHECK(run_command(command, NULL, NULL) == 0, "%s", command);
    RandomCheckpoint spec = {.model_type = "qwen2", .n_layer = n_layer, .n_embd = 32, .n_head = 4, .n_kv_head = 2,
                             .n_inner = 64, .vocab_size = vocab_size, .n_positions = 64, .scale = 0.3f, .seed = 3};
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
}

// Qwen2.5-0.5B and -7B share a tokenizer but pad their embedding tables to different sizes: such a pair speculates
// over the tokenizer's ids; without tokenizers to say what the vocabulary is, vocabularies of different sizes are
// refused.
TEST(families_cli_padded_pair) {
    Tokenizer tok;
    Err err = {{0}};
    CHECK(tokenizer_load_dir(&tok, "weights/pystd/target", &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    const int n_tok = tokenizer_vocab_size(&tok);
    tokenizer_free(&tok);
    char root[] = "/tmp/specdec-padded-XXXXXX", target[64], draft[64], bare[64], command[512], *out, *err_text;
    CHECK(mkdtemp(root), "mkdtemp");
    snprintf(target, sizeof target, "%s/target", root);
    snprintf(draft, sizeof draft, "%s/draft", root);
    snprintf(bare, sizeof bare, "%s/bare", root);
    write_qwen2(target, n_tok + 7, 2, true);
    write_qwen2(draft, n_tok + 3, 1, true);
    write_qwen2(bare, n_tok + 3, 1, false);

    snprintf(command, sizeof command, "%s generate -m %s -d %s --ids \"1 2 3\" -n 12 --gamma 3 --compare --print-ids",
             specdec_bin(), target, draft);
    int status = run_command(command, &out, &err_text);
    CHECK(status == 0 && strstr(err_text, "\"same_output\": true"), "`%s` exited with %d: %s", command, status,
          err_text);
    for (char *p = out, *end; status == 0 && *p && *p != '\n'; p = end) {
        long id = strtol(p, &end, 10);
        CHECK(end != p && id >= 0 && id < n_tok, "id %ld outside the tokenizer's %d", id, n_tok);
        if (end == p) break;
    }
    free(out);
    free(err_text);

    // A target alone, half of whose embedding rows lie past the tokenizer's ids: sampling never draws them.
    char wide[64];
    snprintf(wide, sizeof wide, "%s/wide", root);
    write_qwen2(wide, 2 * n_tok, 1, true);
    snprintf(command, sizeof command, "%s generate -m %s --ids \"1 2 3\" -n 24 --temp 1.5 --print-ids", specdec_bin(),
             wide);
    status = run_command(command, &out, &err_text);
    CHECK(status == 0, "`%s` exited with %d: %s", command, status, err_text);
    for (char *p = out, *end; status == 0 && *p && *p != '\n'; p = end) {
        long id = strtol(p, &end, 10);
        CHECK(end != p && id >= 0 && id < n_tok, "a lone target sampled id %ld, past the tokenizer's %d", id, n_tok);
        if (end == p) break;
    }
    free(out);
    free(err_text);
    random_checkpoint_remove(wide);

    snprintf(command, sizeof command, "%s generate -m %s -d %s --ids \"1 2 3\" -n 4", specdec_bin(), target, bare);
    status = run_command(command, &out, &err_text);
    CHECK(status == EXIT_BAD_INPUT && !*out && strchr(err_text, '\n') == err_text + strlen(err_text) - 1 &&
              strstr(err_text, "vocab_size") && strstr(err_text, "tokenizer"),
          "a pair of different vocabularies without tokenizers: exit %d: %s", status, err_text);
    free(out);
    free(err_text);
    random_checkpoint_remove(bare);
    random_checkpoint_remove(draft);
    random_checkpoint_remove(target);
    snprintf(command, sizeof command, "rm -rf %s", root);
    run_command(command, NULL, NULL);
}

// A draft whose tokenizer gives two ids each other's tokens (ids 300 and 301 swapped in tokenizer.json's vocab) is
// not the target's tokenizer, though of the same size: refused, naming the first id that differs.
TEST(families_cli_refuses_other_tokenizer) {
    char root[] = "/tmp/specdec-tokenizers-XXXXXX", target[64], draft[64], path[96], command[512], *out, *err_text;
    Tokenizer shipped;
    Err err = {{0}};
    CHECK(tokenizer_load_dir(&shipped, "weights/pystd/target", &err) == 0, "%s", err.msg);
    if (test_failures()) return;
    const int n_tok = tokenizer_vocab_size(&shipped);
    tokenizer_free(&shipped);
    CHECK(mkdtemp(root), "mkdtemp");
    snprintf(target, sizeof target, "%s/target", root);
    snprintf(draft, sizeof draft, "%s/draft", root);
    write_qwen2(target, n_tok, 1, true);
    write_qwen2(draft, n_tok, 1, false);
    json_error_t jerr;
    json_t *tok = json_load_file("weights/pystd/target/tokenizer.json", 0, &jerr);
    json_t *vocab = json_object_get(json_object_get(tok, "model"), "vocab");
    CHECK(json_is_object(vocab), "weights/pystd/target/tokenizer.json: no model.vocab");
    const char *key;
    json_t *id;
    json_object_foreach(vocab, key, id) {
        if (json_integer_value(id) == 300) json_integer_set(id, 301);
        else if (json_integer_value(id) == 301) json_integer_set(id, 300);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", draft);
    CHECK(json_dump_file(tok, path, 0) == 0, "writing %s", path);
    json_decref(tok);

    snprintf(command, sizeof command, "%s generate -m %s -d %s --ids \"1 2 3\" -n 4", specdec_bin(), target, draft);
    int status = run_command(command, &out, &err_text);
    CHECK(status == EXIT_BAD_INPUT && !*out && strchr(err_text, '\n') == err_text + strlen(err_text) - 1 &&
              strstr(err_text, "token 300 of the draft's tokenizer differs from the target's"),
          "a draft with another tokenizer: exit %d: %s", status, err_text);
    free(out);
    free(err_text);
    unlink(path);
    random_checkpoint_remove(draft);
    random_checkpoint_remove(target);
    snprintf(command, sizeof command, "rm -rf %s", root);
    run_command(command, NULL, NULL);
}

// ---- bad input ------------------------------------------------------------------------------------------------

// A random tied Llama checkpoint (2 blocks, d = 32, 4 heads, 2 KV heads, F = 64, V = 50) whose config.json then
// says model_type and the checkpoint's shape, with the fields in `changes` (JSON object members) given instead:
// `specdec logits` must exit with status 2, print nothing on stdout and one line on stderr that contains every
// string of `wants`.
static void check_refused(const char *model_type, const char *changes, const char *const *wants) {
    static const char *const shape[][2] = {{"hidden_size", "32"}, {"intermediate_size", "64"},
                                           {"num_hidden_layers", "2"}, {"num_attention_heads", "4"},
                                           {"num_key_value_heads", "2"}, {"vocab_size", "50"},
                                           {"max_position_embeddings", "64"}};
    char config[1024];
    int len = snprintf(config, sizeof config, "{\"model_type\": \"%s\"", model_type);
    for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
        char key[64];
        snprintf(key, sizeof key, "\"%s\"", shape[i][0]);
        if (!strstr(changes, key)) len += snprintf(config + len, sizeof config - len, ", %s: %s", key, shape[i][1]);
    }
    snprintf(config + len, sizeof config - len, "%s%s}", *changes ? ", " : "", changes);

    char dir[] = "/tmp/specdec-bad-XXXXXX", path[64], command[256], *out = NULL, *err_text = NULL;
    CHECK(mkdtemp(dir), "mkdtemp");
    Err err = {{0}};
    RandomCheckpoint spec = {.model_type = "llama", .n_layer = 2, .n_embd = 32, .n_head = 4, .n_kv_head = 2,
                             .n_inner = 64, .vocab_size = 50, .n_positions = 64, .scale = 0.3f, .seed = 1};
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(config, f) >= 0 && fclose(f) == 0, "writing %s", path);
    snprintf(command, sizeof command, "%s logits -m %s --ids \"1 2\"", specdec_bin(), dir);
    int status = run_command(command, &out, &err_text);
    const char *newline = err_text ? strchr(err_text, '\n') : NULL;
    CHECK(status == EXIT_BAD_INPUT && out && !*out && newline && newline[1] == '\0',
          "%s: exit %d, stdout \"%.40s\", stderr \"%s\"", config, status, out ? out : "", err_text ? err_text : "");
    for (int i = 0; wants[i] && err_text; i++)
        CHECK(strstr(err_text, wants[i]), "%s: the error lacks \"%s\": %s", config, wants[i], err_text);
    free(out);
    free(err_text);
    random_checkpoint_remove(dir);
}
#define CHECK_REFUSED(model_type, changes, ...) check_refused(model_type, changes, (const char *const[]){__VA_ARGS__, NULL})

TEST(families_refuse_bad_checkpoints) {
    CHECK_REFUSED("llama", "\"tie_word_embeddings\": false", "lm_head.weight", "tie_word_embeddings");
    CHECK_REFUSED("qwen3", "", "model.layers.0.self_attn.q_norm.weight", "missing");
    CHECK_REFUSED("qwen2", "", "model.layers.0.self_attn.q_proj.bias", "missing");
    CHECK_REFUSED("llama", "\"mlp_bias\": true", "mlp.gate_proj.bias", "missing");
    CHECK_REFUSED("llama", "\"num_hidden_layers\": 3", "model.layers.2.", "missing");
    CHECK_REFUSED("mistral", "\"intermediate_size\": 96", "model.layers.0.mlp.gate_proj.weight", "[64, 32]", "[96, 32]");
    CHECK_REFUSED("llama", "\"num_key_value_heads\": 1", "model.layers.0.self_attn.k_proj.weight", "[16, 32]",
                  "[8, 32]");
    CHECK_REFUSED("llama", "\"head_dim\": 16", "self_attn.q_proj.weight", "[32, 32]", "[64, 32]");
    CHECK_REFUSED("llama", "\"num_key_value_heads\": 3", "num_key_value_heads", "3 does not divide num_attention_heads = 4");
    CHECK_REFUSED("llama", "\"num_attention_heads\": 5, \"num_key_value_heads\": 5", "num_attention_heads",
                  "does not divide hidden_size = 32");
    CHECK_REFUSED("llama", "\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4}", "rope_scaling",
                  "\"yarn\" is not supported");
    CHECK_REFUSED("llama", "\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}", "rope_scaling",
                  "\"dynamic\" is not supported");
    CHECK_REFUSED("gemma", "", "model_type", "\"gemma\"");
    CHECK_REFUSED("llama", "\"hidden_act\": \"gelu\"", "hidden_act", "\"gelu\"");
}

// ---- loading ----------------------------------------------------------------------------------------------------

// Loading repacks tensor by tensor and releases each file range as it goes: the peak resident memory grows by
// little more than the weights, not by the weights plus the file (a random Llama-shaped checkpoint of ~60 MB, BF16).
// The harness runs each test in a fresh child process, so ru_maxrss starts near the runner's size. Under
// AddressSanitizer every allocation has shadow memory (a byte per 8) and the freed scratch stays in its allocator
// instead of going back to the system: 54 MB of weights grew the peak by 70–72 MB there, 58 MB in the release build
// (2026-11-27).
#if defined(__SANITIZE_ADDRESS__)
enum { SANITIZER_MB = 8 };
static const double SANITIZER_SHARE = 1.0 / 8;
#else
enum { SANITIZER_MB = 0 };
static const double SANITIZER_SHARE = 0;
#endif
TEST(families_load_peak_memory) {
    char dir[] = "/tmp/specdec-load-XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    Err err = {{0}};
    RandomCheckpoint spec = {.model_type = "llama", .n_layer = 8, .n_embd = 512, .n_head = 8, .n_kv_head = 2,
                             .n_inner = 1536, .vocab_size = 8192, .n_positions = 256, .bf16 = true, .scale = 0.1f,
                             .seed = 5};
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    ThreadPool *pool = pool_create(1, &err);
    struct rusage before, after;
    getrusage(RUSAGE_SELF, &before);
    Model m;
    CHECK(pool && model_load(&m, dir, pool, &err) == 0, "%s", err.msg);
    getrusage(RUSAGE_SELF, &after);
    if (!test_failures()) {
        const double grown_mb = (after.ru_maxrss - before.ru_maxrss) / 1024.0, weights_mb = m.weight_bytes / 1048576.0;
        printf("    peak resident memory grew by %.1f MB loading %.1f MB of weights\n", grown_mb, weights_mb);
        CHECK(grown_mb <= (1.1 + SANITIZER_SHARE) * weights_mb + 8 + SANITIZER_MB,
              "loading %.1f MB of weights grew the peak by %.1f MB", weights_mb, grown_mb);
        model_free(&m);
    }
    if (pool) pool_free(pool);
    random_checkpoint_remove(dir);
}

// ---- rotary frequencies -----------------------------------------------------------------------------------------

// A random Llama checkpoint loaded with `rope_scaling` (JSON) in its config; its inverse frequencies to inv_freq.
static bool rope_of(const char *rope_scaling, float *inv_freq, int half) {
    char dir[] = "/tmp/specdec-rope-XXXXXX", path[64];
    CHECK(mkdtemp(dir), "mkdtemp");
    Err err = {{0}};
    RandomCheckpoint spec = {.model_type = "llama", .n_layer = 1, .n_embd = 64, .n_head = 2, .n_inner = 32,
                             .vocab_size = 16, .n_positions = 64, .scale = 0.3f, .seed = 1};
    CHECK(random_checkpoint_write(dir, &spec, &err) == 0, "%s", err.msg);
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"model_type\": \"llama\", \"hidden_size\": 64, \"intermediate_size\": 32, \"num_hidden_layers\": 1, "
            "\"num_attention_heads\": 2, \"vocab_size\": 16, \"max_position_embeddings\": 64, \"rope_theta\": "
            "500000.0, \"tie_word_embeddings\": true, \"rope_scaling\": %s}", rope_scaling);
    fclose(f);
    ThreadPool *pool = pool_create(1, &err);
    Model m;
    bool ok = pool && model_load(&m, dir, pool, &err) == 0;
    CHECK(ok, "%s", err.msg);
    if (ok) {
        CHECK(m.cfg.head_dim / 2 == half && m.inv_freq, "half = %d", m.cfg.head_dim / 2);
        memcpy(inv_freq, m.inv_freq, sizeof(float) * half);
        model_free(&m);
    }
    if (pool) pool_free(pool);
    random_checkpoint_remove(dir);
    return ok;
}

// ω_i = θ^(−2i/hd) (hd = 32, θ = 500000); linear scaling divides every one by its factor; llama3 scaling (factor
// 8, low 1, high 4, original context 32) divides those whose wavelength 2π/ω exceeds 32 / 1, keeps those shorter
// than 32 / 4, and blends those between: (1 − s) ω/8 + s ω with s = (32 / wavelength − 1) / (4 − 1).
TEST(families_rope_frequencies) {
    enum { HALF = 16 };
    float plain[HALF], linear[HALF], llama3[HALF];
    if (!rope_of("null", plain, HALF) || !rope_of("{\"type\": \"linear\", \"factor\": 4.0}", linear, HALF) ||
        !rope_of("{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
                 "\"original_max_position_embeddings\": 32}", llama3, HALF))
        return;
    int kept = 0, divided = 0, blended = 0;
    for (int i = 0; i < HALF; i++) {
        const double exact = pow(500000.0, -2.0 * i / 32);
        CHECK(fabs(plain[i] - exact) <= 4e-7 * exact, "ω_%d = %.9g, θ^(−2i/hd) = %.9g", i, plain[i], exact);
        CHECK(linear[i] == plain[i] / 4, "linear: ω_%d = %.9g, expected %.9g / 4", i, linear[i], plain[i]);
        const double wavelength = 2 * M_PI / plain[i], s = (32 / wavelength - 1) / 3;
        const double want = wavelength > 32 ? plain[i] / 8.0 : wavelength < 8 ? plain[i] : (1 - s) * plain[i] / 8 + s * plain[i];
        kept += wavelength < 8, divided += wavelength > 32, blended += wavelength >= 8 && wavelength <= 32;
        CHECK(fabs(llama3[i] - want) <= 1e-6 * want, "llama3: ω_%d = %.9g, expected %.9g (wavelength %.1f)", i,
              llama3[i], want, wavelength);
    }
    CHECK(kept && divided && blended, "all three regimes: %d kept, %d divided, %d blended", kept, divided, blended);
}
