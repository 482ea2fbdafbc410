// test_config.c — config.json: transformers' GPT2Config defaults, the published gpt2 file, and one test per
// rejection rule, each checking that the one-line message names the file and the field.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/config.h"
#include "harness.h"

// Writes `json` to a new file /tmp/specdec-config-XXXXXX.json (path in path[]), loads it with config_load, deletes
// it and returns config_load's result.
static int load_text(Config *cfg, Err *err, char path[64], const char *json) {
    strcpy(path, "/tmp/specdec-config-XXXXXX.json");
    int fd = mkstemps(path, 5);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f || fputs(json, f) < 0 || fclose(f) != 0) {
        perror(path);
        abort();
    }
    int rc = config_load(cfg, path, err);
    unlink(path);
    return rc;
}

// Loads `json` and checks that it succeeds.
static Config load_ok(const char *json) {
    Config cfg;
    Err err = {{0}};
    char path[64];
    CHECK(load_text(&cfg, &err, path, json) == 0, "config_load(%s): %s", json, err.msg);
    return cfg;
}

// Checks that `json` is rejected with one line naming the file and containing every string of wants.
static void check_rejected(const char *json, const char *const *wants) {
    Config cfg;
    Err err = {{0}};
    char path[64];
    CHECK(load_text(&cfg, &err, path, json) == -1, "config_load(%s) succeeded", json);
    CHECK(strstr(err.msg, path), "message does not name %s: %s", path, err.msg);
    CHECK(!strchr(err.msg, '\n'), "message is not one line: %s", err.msg);
    for (int i = 0; wants[i]; i++) CHECK(strstr(err.msg, wants[i]), "message lacks '%s': %s", wants[i], err.msg);
}
#define CHECK_REJECTED(json, ...) check_rejected(json, (const char *const[]){__VA_ARGS__, NULL})

// ---------------------------------------------------------------------------------------------------------------
// Accepted files

TEST(config_defaults_when_fields_absent) {
    Config c = load_ok("{}");
    CHECK(c.vocab_size == 50257 && c.n_positions == 1024 && c.n_embd == 768 && c.n_layer == 12 && c.n_head == 12,
          "sizes %d %d %d %d %d", c.vocab_size, c.n_positions, c.n_embd, c.n_layer, c.n_head);
    CHECK(c.n_inner == 4 * 768, "n_inner %d", c.n_inner);
    CHECK(c.activation == ACT_GELU_TANH && c.layer_norm_epsilon == 1e-5f, "activation or epsilon");
    CHECK(c.scale_attn_weights && !c.scale_attn_by_inverse_layer_idx && c.tie_word_embeddings, "booleans");
    CHECK(c.bos_token_id == 50256 && c.eos_token_id == 50256, "bos %d eos %d", c.bos_token_id, c.eos_token_id);
}

// The config.json published with openai-community/gpt2-medium.
TEST(config_published_gpt2_medium) {
    Config c = load_ok(
        "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,"
        " \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02,"
        " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 1024,"
        " \"n_head\": 16, \"n_layer\": 24, \"n_positions\": 1024, \"n_special\": 0, \"predict_special_tokens\": true,"
        " \"resid_pdrop\": 0.1, \"summary_activation\": null, \"summary_first_dropout\": 0.1,"
        " \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\", \"summary_use_proj\": true,"
        " \"task_specific_params\": {\"text-generation\": {\"do_sample\": true, \"max_length\": 50}},"
        " \"vocab_size\": 50257}");
    CHECK(c.n_embd == 1024 && c.n_head == 16 && c.n_layer == 24 && c.n_inner == 4096, "sizes");
}

TEST(config_n_inner_null_and_given) {
    CHECK(load_ok("{\"n_inner\": null, \"n_embd\": 64, \"n_head\": 4}").n_inner == 256, "null n_inner");
    CHECK(load_ok("{\"n_inner\": 100}").n_inner == 100, "given n_inner");
}

TEST(config_activations) {
    static const struct { const char *json; Activation want; } cases[] = {
        {"{\"activation_function\": \"gelu_new\"}", ACT_GELU_TANH},
        {"{\"activation_function\": \"gelu_pytorch_tanh\"}", ACT_GELU_TANH},
        {"{\"activation_function\": \"gelu_fast\"}", ACT_GELU_TANH},
        {"{\"activation_function\": \"gelu\"}", ACT_GELU_ERF},
    };
    for (int i = 0; i < 4; i++) CHECK(load_ok(cases[i].json).activation == cases[i].want, "%s", cases[i].json);
}

TEST(config_booleans_and_epsilon) {
    Config c = load_ok("{\"scale_attn_weights\": false, \"scale_attn_by_inverse_layer_idx\": true,"
                       " \"tie_word_embeddings\": false, \"reorder_and_upcast_attn\": true,"
                       " \"add_cross_attention\": false, \"layer_norm_epsilon\": 0.001}");
    CHECK(!c.scale_attn_weights && c.scale_attn_by_inverse_layer_idx && !c.tie_word_embeddings, "booleans");
    CHECK(c.layer_norm_epsilon == 0.001f, "epsilon %g", c.layer_norm_epsilon);
}

TEST(config_token_ids) {
    Config c = load_ok("{\"bos_token_id\": null, \"eos_token_id\": 7}");
    CHECK(c.bos_token_id == -1 && c.eos_token_id == 7, "bos %d eos %d", c.bos_token_id, c.eos_token_id);
    c = load_ok("{\"vocab_size\": 100}");  // the default 50256 is no token of a 100-token vocabulary
    CHECK(c.bos_token_id == -1 && c.eos_token_id == -1, "bos %d eos %d", c.bos_token_id, c.eos_token_id);
}

// ---------------------------------------------------------------------------------------------------------------
// One test per rejection rule

TEST(config_rejects_missing_file) {
    Config cfg;
    Err err = {{0}};
    CHECK(config_load(&cfg, "/nonexistent/specdec/config.json", &err) == -1, "loaded a missing file");
    CHECK(strstr(err.msg, "/nonexistent/specdec/config.json") && strstr(err.msg, "cannot read"), "%s", err.msg);
}

TEST(config_rejects_invalid_json) { CHECK_REJECTED("{\"n_embd\": 768,", "not valid JSON", "line 1"); }

TEST(config_rejects_duplicate_key) { CHECK_REJECTED("{\"n_embd\": 768, \"n_embd\": 1024}", "duplicate"); }

TEST(config_rejects_not_an_object) { CHECK_REJECTED("[768]", "expected a JSON object", "[768]"); }

TEST(config_rejects_other_model_type) {
    CHECK_REJECTED("{\"model_type\": \"llama\"}", "field \"model_type\"", "\"gpt2\"", "got \"llama\"");
}

TEST(config_rejects_cross_attention) {
    CHECK_REJECTED("{\"add_cross_attention\": true}", "field \"add_cross_attention\"", "expected false");
}

TEST(config_rejects_size_as_string) {
    CHECK_REJECTED("{\"n_head\": \"12\"}", "field \"n_head\"", "expected a positive integer", "got \"12\"");
}

TEST(config_rejects_size_as_real) { CHECK_REJECTED("{\"n_embd\": 768.5}", "field \"n_embd\"", "got 768.5"); }

TEST(config_rejects_zero_size) { CHECK_REJECTED("{\"n_layer\": 0}", "field \"n_layer\"", "got 0"); }

TEST(config_rejects_negative_size) { CHECK_REJECTED("{\"vocab_size\": -5}", "field \"vocab_size\"", "got -5"); }

TEST(config_rejects_huge_size) {
    CHECK_REJECTED("{\"n_positions\": 1048577}", "field \"n_positions\"", "no larger than 1048576", "got 1048577");
}

TEST(config_rejects_n_inner_of_wrong_type) { CHECK_REJECTED("{\"n_inner\": false}", "field \"n_inner\"", "false"); }

TEST(config_rejects_heads_not_dividing_width) {
    CHECK_REJECTED("{\"n_embd\": 768, \"n_head\": 10}", "field \"n_head\"", "10 does not divide n_embd = 768");
}

TEST(config_rejects_unknown_activation) {
    CHECK_REJECTED("{\"activation_function\": \"relu\"}", "field \"activation_function\"", "\"gelu_new\"",
                   "got \"relu\"");
}

TEST(config_rejects_n_ctx_disagreeing) {
    CHECK_REJECTED("{\"n_ctx\": 2048, \"n_positions\": 1024}", "field \"n_ctx\" is 2048", "\"n_positions\" is 1024");
}

TEST(config_rejects_alias_disagreeing_with_default) {
    CHECK_REJECTED("{\"hidden_size\": 1024}", "field \"hidden_size\" is 1024", "\"n_embd\" is 768 (its default)");
}

TEST(config_rejects_boolean_of_wrong_type) {
    CHECK_REJECTED("{\"scale_attn_weights\": \"yes\"}", "field \"scale_attn_weights\"", "true or false",
                   "got \"yes\"");
}

TEST(config_rejects_bad_epsilon) {
    CHECK_REJECTED("{\"layer_norm_epsilon\": -1e-5}", "field \"layer_norm_epsilon\"", "positive number");
    CHECK_REJECTED("{\"layer_norm_epsilon\": \"1e-5\"}", "field \"layer_norm_epsilon\"", "got \"1e-5\"");
}

TEST(config_rejects_token_id_out_of_range) {
    CHECK_REJECTED("{\"eos_token_id\": 50257}", "field \"eos_token_id\"", "[0, 50257)", "got 50257");
    CHECK_REJECTED("{\"bos_token_id\": -1}", "field \"bos_token_id\"", "got -1");
}
