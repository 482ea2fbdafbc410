// test_config.c — config.json: transformers' GPT2Config defaults, the published gpt2 file, and one test per
// rejection rule, each checking that the one-line message names the file and the field.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/config.h"
#include "harness.h"

#define GPT2 "\"model_type\": \"gpt2\""  // the configs below are GPT-2's

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
    Config c = load_ok("{" GPT2 "}");
    CHECK(c.vocab_size == 50257 && c.n_positions == 1024 && c.n_embd == 768 && c.n_layer == 12 && c.n_head == 12,
          "sizes %d %d %d %d %d", c.vocab_size, c.n_positions, c.n_embd, c.n_layer, c.n_head);
    CHECK(c.n_inner == 4 * 768, "n_inner %d", c.n_inner);
    CHECK(c.activation == ACT_GELU_TANH && c.norm_epsilon == 1e-5f, "activation or epsilon");
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
    CHECK(load_ok("{" GPT2 ", \"n_inner\": null, \"n_embd\": 64, \"n_head\": 4}").n_inner == 256, "null n_inner");
    CHECK(load_ok("{" GPT2 ", \"n_inner\": 100}").n_inner == 100, "given n_inner");
}

TEST(config_activations) {
    static const struct { const char *json; Activation want; } cases[] = {
        {"{" GPT2 ", \"activation_function\": \"gelu_new\"}", ACT_GELU_TANH},
        {"{" GPT2 ", \"activation_function\": \"gelu_pytorch_tanh\"}", ACT_GELU_TANH},
        {"{" GPT2 ", \"activation_function\": \"gelu_fast\"}", ACT_GELU_TANH},
        {"{" GPT2 ", \"activation_function\": \"gelu\"}", ACT_GELU_ERF},
    };
    for (int i = 0; i < 4; i++) CHECK(load_ok(cases[i].json).activation == cases[i].want, "%s", cases[i].json);
}

TEST(config_booleans_and_epsilon) {
    Config c = load_ok("{" GPT2 ", \"scale_attn_weights\": false, \"scale_attn_by_inverse_layer_idx\": true,"
                       " \"tie_word_embeddings\": false, \"reorder_and_upcast_attn\": true,"
                       " \"add_cross_attention\": false, \"layer_norm_epsilon\": 0.001}");
    CHECK(!c.scale_attn_weights && c.scale_attn_by_inverse_layer_idx && !c.tie_word_embeddings, "booleans");
    CHECK(c.norm_epsilon == 0.001f, "epsilon %g", c.norm_epsilon);
}

TEST(config_token_ids) {
    Config c = load_ok("{" GPT2 ", \"bos_token_id\": null, \"eos_token_id\": 7}");
    CHECK(c.bos_token_id == -1 && c.eos_token_id == 7, "bos %d eos %d", c.bos_token_id, c.eos_token_id);
    c = load_ok("{" GPT2 ", \"vocab_size\": 100}");  // the default 50256 is no token of a 100-token vocabulary
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

TEST(config_rejects_invalid_json) { CHECK_REJECTED("{" GPT2 ", \"n_embd\": 768,", "not valid JSON", "line 1"); }

TEST(config_rejects_duplicate_key) { CHECK_REJECTED("{" GPT2 ", \"n_embd\": 768, \"n_embd\": 1024}", "duplicate"); }

TEST(config_rejects_not_an_object) { CHECK_REJECTED("[768]", "expected a JSON object", "[768]"); }

TEST(config_model_type_from_architectures) {
    // No model_type: the class "architectures" names gives it; neither: one line naming the missing field (not a
    // complaint about GPT-2's fields, which the file never claimed to have).
    Config c = load_ok("{\"architectures\": [\"LlamaForCausalLM\"], \"max_position_embeddings\": 128}");
    CHECK(c.model_type == MODEL_LLAMA && c.n_positions == 128, "type %d, %d positions", (int)c.model_type,
          c.n_positions);
    CHECK(load_ok("{\"architectures\": [\"GPT2LMHeadModel\"]}").model_type == MODEL_GPT2, "GPT2LMHeadModel");
    CHECK_REJECTED("{\"max_position_embeddings\": 128}", "missing field \"model_type\"", "architectures");
    CHECK_REJECTED("{\"architectures\": [\"GemmaForCausalLM\"]}", "missing field \"model_type\"");
}

TEST(config_rejects_other_model_type) {
    CHECK_REJECTED("{\"model_type\": \"gemma\"}", "field \"model_type\"", "\"gpt2\"", "\"qwen3\"", "got \"gemma\"");
}

TEST(config_rejects_cross_attention) {
    CHECK_REJECTED("{" GPT2 ", \"add_cross_attention\": true}", "field \"add_cross_attention\"", "expected false");
}

TEST(config_rejects_size_as_string) {
    CHECK_REJECTED("{" GPT2 ", \"n_head\": \"12\"}", "field \"n_head\"", "expected a positive integer", "got \"12\"");
}

TEST(config_rejects_size_as_real) { CHECK_REJECTED("{" GPT2 ", \"n_embd\": 768.5}", "field \"n_embd\"", "got 768.5"); }

TEST(config_rejects_zero_size) { CHECK_REJECTED("{" GPT2 ", \"n_layer\": 0}", "field \"n_layer\"", "got 0"); }

TEST(config_rejects_negative_size) {
    CHECK_REJECTED("{" GPT2 ", \"vocab_size\": -5}",
                   "field \"vocab_size\"", "got -5");
}

TEST(config_rejects_huge_size) {
    CHECK_REJECTED("{" GPT2 ", \"n_positions\": 1048577}",
                   "field \"n_positions\"", "no larger than 1048576", "got 1048577");
}

TEST(config_rejects_n_inner_of_wrong_type) {
    CHECK_REJECTED("{" GPT2 ", \"n_inner\": false}",
                   "field \"n_inner\"", "false");
}

TEST(config_rejects_heads_not_dividing_width) {
    CHECK_REJECTED("{" GPT2 ", \"n_embd\": 768, \"n_head\": 10}",
                   "field \"n_head\"", "10 does not divide n_embd = 768");
}

TEST(config_rejects_unknown_activation) {
    CHECK_REJECTED("{" GPT2 ", \"activation_function\": \"relu\"}", "field \"activation_function\"", "\"gelu_new\"",
                   "got \"relu\"");
}

TEST(config_rejects_n_ctx_disagreeing) {
    CHECK_REJECTED("{" GPT2 ", \"n_ctx\": 2048, \"n_positions\": 1024}",
                   "field \"n_ctx\" is 2048", "\"n_positions\" is 1024");
}

TEST(config_rejects_alias_disagreeing_with_default) {
    CHECK_REJECTED("{" GPT2 ", \"hidden_size\": 1024}",
                   "field \"hidden_size\" is 1024", "\"n_embd\" is 768 (its default)");
}

TEST(config_rejects_boolean_of_wrong_type) {
    CHECK_REJECTED("{" GPT2 ", \"scale_attn_weights\": \"yes\"}", "field \"scale_attn_weights\"", "true or false",
                   "got \"yes\"");
}

TEST(config_rejects_bad_epsilon) {
    CHECK_REJECTED("{" GPT2 ", \"layer_norm_epsilon\": -1e-5}", "field \"layer_norm_epsilon\"", "positive number");
    CHECK_REJECTED("{" GPT2 ", \"layer_norm_epsilon\": \"1e-5\"}", "field \"layer_norm_epsilon\"", "got \"1e-5\"");
}

// As transformers: an id outside the vocabulary loads, with one line of warning, and is never used.
TEST(config_token_id_outside_vocabulary_warns) {
    Config c = load_ok("{" GPT2 ", \"vocab_size\": 300, \"bos_token_id\": 50256, \"eos_token_id\": 50256}");
    CHECK(c.bos_token_id == -1 && c.eos_token_id == -1 && c.n_eos == 0, "bos %d eos %d (%d)", c.bos_token_id,
          c.eos_token_id, c.n_eos);
    CHECK(strstr(c.warning, "bos_token_id 50256 is outside the vocabulary [0, 300): ignored; eos_token_id 50256: "
                            "generation will not stop at it") && !strchr(c.warning, '\n'),
          "warning: %s", c.warning);
    c = load_ok("{" GPT2 ", \"vocab_size\": 300}");  // transformers' defaults (50256) are dropped without a word
    CHECK(c.bos_token_id == -1 && c.eos_token_id == -1 && !*c.warning, "defaults: %d %d \"%s\"", c.bos_token_id,
          c.eos_token_id, c.warning);
}

TEST(config_rejects_bad_token_id) {
    CHECK_REJECTED("{" GPT2 ", \"bos_token_id\": -1}", "field \"bos_token_id\"", "got -1");
    CHECK_REJECTED("{" GPT2 ", \"eos_token_id\": \"2\"}", "field \"eos_token_id\"", "got \"2\"");
    CHECK_REJECTED("{" GPT2 ", \"bos_token_id\": [1, 2]}", "field \"bos_token_id\"", "got [1,2]");
}

// ---------------------------------------------------------------------------------------------------------------
// The Llama family: llama, mistral, qwen2, qwen3

TEST(config_llama_defaults) {
    Config c = load_ok("{\"model_type\": \"llama\"}");  // LlamaConfig()
    CHECK(c.model_type == MODEL_LLAMA && c.vocab_size == 32000 && c.n_embd == 4096 && c.n_inner == 11008 &&
              c.n_layer == 32 && c.n_head == 32 && c.n_kv_head == 32 && c.head_dim == 128 && c.n_positions == 2048,
          "sizes %d %d %d %d %d %d %d %d", c.vocab_size, c.n_embd, c.n_inner, c.n_layer, c.n_head, c.n_kv_head,
          c.head_dim, c.n_positions);
    CHECK(c.norm == NORM_RMS && c.norm_epsilon == 1e-6f && c.positions == POSITIONS_ROTARY && c.mlp == MLP_GATED &&
              c.activation == ACT_SILU && c.rope_theta == 10000.0f && c.rope.type == ROPE_DEFAULT,
          "the forward's data");
    CHECK(!c.qkv_bias && !c.out_bias && !c.mlp_bias && !c.qk_norm && !c.tie_word_embeddings, "booleans");
    CHECK(c.bos_token_id == 1 && c.eos_token_id == 2 && c.n_eos == 1, "bos %d eos %d", c.bos_token_id,
          c.eos_token_id);
    c = load_ok("{\"model_type\": \"mistral\"}");
    CHECK(c.n_kv_head == 8 && c.n_inner == 14336 && c.n_positions == 131072 && c.sliding_window == 4096,
          "mistral: kv %d F %d context %d window %d (MistralConfig's 131072 and 4096)", c.n_kv_head, c.n_inner,
          c.n_positions, c.sliding_window);
    c = load_ok("{\"model_type\": \"qwen2\", \"num_attention_heads\": 64}");
    CHECK(c.n_kv_head == 32, "qwen2: Qwen2Config's default of 32 key/value heads, got %d", c.n_kv_head);
    c = load_ok("{\"model_type\": \"qwen2\"}");
    CHECK(c.vocab_size == 151936 && c.qkv_bias && !c.out_bias && c.n_positions == 32768 && c.eos_token_id == -1,
          "qwen2");
    c = load_ok("{\"model_type\": \"qwen3\", \"attention_bias\": true}");
    CHECK(c.qk_norm && c.qkv_bias && c.out_bias, "qwen3");
}

// Llama-3.2-1B's config.json as published (abridged to the fields specdec reads), with its generation_config.
TEST(config_llama_3_2_1b) {
    Config c = load_ok("{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": "
                       "128000, \"eos_token_id\": 128001, \"head_dim\": 64, \"hidden_act\": \"silu\", "
                       "\"hidden_size\": 2048, \"intermediate_size\": 8192, \"max_position_embeddings\": 131072, "
                       "\"mlp_bias\": false, \"model_type\": \"llama\", \"num_attention_heads\": 32, "
                       "\"num_hidden_layers\": 16, \"num_key_value_heads\": 8, \"pretraining_tp\": 1, "
                       "\"rms_norm_eps\": 1e-05, \"rope_scaling\": {\"factor\": 32.0, \"high_freq_factor\": 4.0, "
                       "\"low_freq_factor\": 1.0, \"original_max_position_embeddings\": 8192, \"rope_type\": "
                       "\"llama3\"}, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true, \"torch_dtype\": "
                       "\"bfloat16\", \"vocab_size\": 128256}");
    CHECK(c.n_kv_head == 8 && c.head_dim == 64 && c.n_positions == 131072 && c.tie_word_embeddings, "sizes");
    CHECK(c.rope.type == ROPE_LLAMA3 && c.rope.factor == 32.0f && c.rope.low_freq_factor == 1.0f &&
              c.rope.high_freq_factor == 4.0f && c.rope.original_max_position == 8192 && c.rope_theta == 500000.0f,
          "rope");
    CHECK(c.bos_token_id == 128000 && c.eos_token_id == 128001 && c.norm_epsilon == 1e-5f, "ids, epsilon");

    char path[64];
    strcpy(path, "/tmp/specdec-generation-XXXXXX.json");
    int fd = mkstemps(path, 5);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f && fputs("{\"bos_token_id\": 128000, \"do_sample\": true, \"eos_token_id\": [128001, 128008, 128009]}",
                     f) >= 0 && fclose(f) == 0, "writing %s", path);
    Err err = {{0}};
    CHECK(config_load_generation(&c, path, &err) == 0, "%s", err.msg);
    unlink(path);
    CHECK(c.n_eos == 3 && c.eos_ids[0] == 128001 && c.eos_ids[1] == 128008 && c.eos_ids[2] == 128009 &&
              c.eos_token_id == 128001, "eos list from generation_config.json: %d ids", c.n_eos);
    CHECK(config_load_generation(&c, "/nonexistent/generation_config.json", &err) == 0 && c.n_eos == 3,
          "a missing generation_config.json changes nothing");
}

TEST(config_llama_family_fields) {
    Config c = load_ok("{\"model_type\": \"qwen3\", \"hidden_size\": 64, \"num_attention_heads\": 4, \"head_dim\": "
                       "32, \"num_key_value_heads\": null, \"rope_scaling\": null}");
    CHECK(c.head_dim == 32 && c.n_kv_head == 4 && c.rope.type == ROPE_DEFAULT, "head_dim %d, kv %d", c.head_dim,
          c.n_kv_head);
    c = load_ok("{\"model_type\": \"llama\", \"rope_scaling\": {\"type\": \"linear\", \"factor\": 2}}");
    CHECK(c.rope.type == ROPE_LINEAR && c.rope.factor == 2.0f, "linear rope");
    c = load_ok("{\"model_type\": \"llama\", \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 1e6}}");
    CHECK(c.rope.type == ROPE_DEFAULT && c.rope_theta == 1e6f, "transformers 5's rope_parameters: theta %g",
          c.rope_theta);
    c = load_ok("{\"model_type\": \"mistral\", \"max_position_embeddings\": 32768, \"sliding_window\": null}");
    CHECK(c.n_positions == 32768, "no sliding window: context %d", c.n_positions);
    c = load_ok("{\"model_type\": \"qwen2\", \"sliding_window\": 4096, \"use_sliding_window\": false}");
    CHECK(c.n_positions == 32768, "an unused sliding window: context %d", c.n_positions);
    c = load_ok("{\"model_type\": \"qwen2\", \"sliding_window\": 1000, \"use_sliding_window\": true}");
    CHECK(c.n_positions == 32768 && c.sliding_window == 1000, "a sliding window read: context %d, window %d",
          c.n_positions, c.sliding_window);
    config_fit_window(&c);
    CHECK(c.n_positions == 1000, "a sliding window cuts the context at load: %d", c.n_positions);
    c = load_ok("{\"model_type\": \"llama\", \"eos_token_id\": [2, 7], \"bos_token_id\": null, \"dtype\": "
                "\"float16\"}");
    CHECK(c.n_eos == 2 && c.eos_ids[1] == 7 && c.bos_token_id == -1, "eos list");
}

TEST(config_rejects_unsupported_rope) {
    const char *types[] = {"dynamic", "yarn", "longrope"};
    for (int i = 0; i < 3; i++) {
        char json[160], type[32];
        snprintf(json, sizeof json, "{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"%s\", "
                 "\"factor\": 4.0}}", types[i]);
        snprintf(type, sizeof type, "\"%s\" is not supported", types[i]);
        CHECK_REJECTED(json, "field \"rope_scaling\"", type);
    }
    CHECK_REJECTED("{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}",
                   "field \"rope_scaling\"", "low_freq_factor", "missing");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"rope_scaling\": {\"rope_type\": \"linear\"}}",
                   "field \"rope_scaling\"", "\"factor\" is missing");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"rope_scaling\": 2}", "field \"rope_scaling\"", "got 2");
}

TEST(config_rejects_heads_not_dividing) {
    CHECK_REJECTED("{\"model_type\": \"llama\", \"num_attention_heads\": 32, \"num_key_value_heads\": 5}",
                   "field \"num_key_value_heads\"", "5 does not divide num_attention_heads = 32");
    CHECK_REJECTED("{\"model_type\": \"qwen2\", \"hidden_size\": 100, \"num_attention_heads\": 8, "
                   "\"num_key_value_heads\": 2}",
                   "field \"num_attention_heads\"", "8 does not divide hidden_size = 100");
    CHECK_REJECTED("{\"model_type\": \"qwen3\", \"head_dim\": 33}", "field \"head_dim\"", "33 is odd");
}

TEST(config_rejects_llama_family_values) {
    CHECK_REJECTED("{\"model_type\": \"llama\", \"hidden_act\": \"gelu\"}", "field \"hidden_act\"", "got \"gelu\"");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"rms_norm_eps\": 0}", "field \"rms_norm_eps\"", "got 0");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"rope_theta\": \"1e4\"}", "field \"rope_theta\"", "got \"1e4\"");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"torch_dtype\": \"float8_e4m3fn\"}", "field \"torch_dtype\"",
                   "got \"float8_e4m3fn\"");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"num_key_value_heads\": 0}", "field \"num_key_value_heads\"", "got 0");
    CHECK_REJECTED("{\"model_type\": \"mistral\", \"sliding_window\": -4}", "field \"sliding_window\"", "got -4");
    CHECK_REJECTED("{\"model_type\": \"llama\", \"eos_token_id\": [1, -2]}", "field \"eos_token_id\"", "got [1,-2]");
}

TEST(config_rejects_bad_generation_config) {
    const char *texts[] = {"{\"eos_token_id\": ", "[1, 2]", "{\"eos_token_id\": \"2\"}"};
    const char *wants[] = {"not valid JSON", "expected a JSON object", "field \"eos_token_id\""};
    for (int i = 0; i < 3; i++) {
        char path[64];
        strcpy(path, "/tmp/specdec-generation-XXXXXX.json");
        int fd = mkstemps(path, 5);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        CHECK(f && fputs(texts[i], f) >= 0 && fclose(f) == 0, "writing %s", path);
        Config c = load_ok("{\"model_type\": \"llama\"}");
        Err err = {{0}};
        CHECK(config_load_generation(&c, path, &err) == -1, "%s: accepted", texts[i]);
        CHECK(strstr(err.msg, path) && strstr(err.msg, wants[i]) && !strchr(err.msg, '\n'), "%s: %s", texts[i],
              err.msg);
        unlink(path);
    }
}
