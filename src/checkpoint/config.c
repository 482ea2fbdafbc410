// config.c — GPT-2 hyper-parameters from a Hugging Face config.json (see config.h).
//
// Every known field is optional and defaults as in transformers' GPT2Config; a present field must have the right
// JSON type (768, not "768" or 768.5) and a supported value. Unknown fields are ignored, with two exceptions:
//   - "n_ctx" (older transformers) and the aliases hidden_size, max_position_embeddings, num_attention_heads and
//     num_hidden_layers are checked, never used: if present they must equal the field they stand for, so that a
//     file cannot mean two things (transformers would silently let the alias win);
//   - "reorder_and_upcast_attn" must be a boolean and is otherwise ignored: attention is computed in F32 anyway.
#include "checkpoint/config.h"

#include <float.h>
#include <jansson.h>
#include <stddef.h>
#include <string.h>

#include "checkpoint/safetensors.h"  // st_json_brief

// No size may exceed this: a larger one is a broken file, and with this bound 4·n_embd fits an int and the
// product of any two sizes fits an int64_t.
enum { MAX_SIZE = 1 << 20 };

static const Config DEFAULTS = {
    .n_embd = 768,
    .n_head = 12,
    .n_layer = 12,
    .n_positions = 1024,
    .vocab_size = 50257,
    .n_inner = 0,  // set to 4·n_embd unless given
    .layer_norm_epsilon = 1e-5f,
    .activation = ACT_GELU_TANH,
    .scale_attn_weights = true,
    .scale_attn_by_inverse_layer_idx = false,
    .tie_word_embeddings = true,
    .bos_token_id = 50256,
    .eos_token_id = 50256,
};

static const struct {
    const char *name;
    Activation activation;
} ACTIVATIONS[] = {
    {"gelu_new", ACT_GELU_TANH},
    {"gelu_pytorch_tanh", ACT_GELU_TANH},
    {"gelu_fast", ACT_GELU_TANH},
    {"gelu", ACT_GELU_ERF},
};
enum { N_ACTIVATIONS = sizeof ACTIVATIONS / sizeof ACTIVATIONS[0] };

// err_fmt for a field of the wrong type or value: `PATH: field "NAME": expected WHAT, got VALUE`. Returns -1.
static int field_err(Err *err, const char *path, const char *field, const char *expected, const json_t *value) {
    char got[64];
    return err_fmt(err, "%s: field \"%s\": expected %s, got %s", path, field, expected,
                   st_json_brief(got, sizeof got, value));
}

// Reads integer field `field`, if present, into *value: a positive integer no larger than MAX_SIZE.
static int read_size(int *value, const json_t *root, const char *field, const char *path, Err *err) {
    const json_t *v = json_object_get(root, field);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > MAX_SIZE) {
        return field_err(err, path, field, "a positive integer no larger than 1048576", v);
    }
    *value = (int)json_integer_value(v);
    return 0;
}

// Checks that field `alias`, if present, is a size equal to `value`, the value of field `field`.
static int check_alias(const json_t *root, const char *alias, const char *field, int value, const char *path,
                       Err *err) {
    int alias_value = value;
    if (read_size(&alias_value, root, alias, path, err)) return -1;
    if (alias_value != value) {
        return err_fmt(err, "%s: field \"%s\" is %d but \"%s\" is %d%s; make them agree or drop \"%s\"", path, alias,
                       alias_value, field, value, json_object_get(root, field) ? "" : " (its default)", alias);
    }
    return 0;
}

// Reads boolean field `field`, if present, into *value.
static int read_bool(bool *value, const json_t *root, const char *field, const char *path, Err *err) {
    const json_t *v = json_object_get(root, field);
    if (!v) return 0;
    if (!json_is_boolean(v)) return field_err(err, path, field, "true or false", v);
    *value = json_is_true(v);
    return 0;
}

// Reads token id field `field`: absent keeps *value (set to -1 if that is not below vocab_size), null gives -1
// (no such token), an integer must be in [0, vocab_size).
static int read_token(int *value, const json_t *root, const char *field, int vocab_size, const char *path,
                      Err *err) {
    const json_t *v = json_object_get(root, field);
    if (!v) {
        if (*value >= vocab_size) *value = -1;
    } else if (json_is_null(v)) {
        *value = -1;
    } else if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < vocab_size) {
        *value = (int)json_integer_value(v);
    } else {
        char expected[80];
        snprintf(expected, sizeof expected, "null or a token id in [0, %d) (vocab_size)", vocab_size);
        return field_err(err, path, field, expected, v);
    }
    return 0;
}

// Reads the string fields: model_type (must be "gpt2") and activation_function (one of ACTIVATIONS).
static int read_strings(Config *cfg, const json_t *root, const char *path, Err *err) {
    const json_t *model_type = json_object_get(root, "model_type");
    if (model_type && !(json_is_string(model_type) && strcmp(json_string_value(model_type), "gpt2") == 0)) {
        return field_err(err, path, "model_type", "\"gpt2\" (the only architecture specdec runs)", model_type);
    }
    const json_t *act = json_object_get(root, "activation_function");
    if (!act) return 0;
    for (int i = 0; i < N_ACTIVATIONS; i++) {
        if (json_is_string(act) && strcmp(json_string_value(act), ACTIVATIONS[i].name) == 0) {
            cfg->activation = ACTIVATIONS[i].activation;
            return 0;
        }
    }
    return field_err(err, path, "activation_function", "one of \"gelu_new\", \"gelu_pytorch_tanh\", \"gelu_fast\" "
                     "(tanh form), \"gelu\" (erf form)", act);
}

// Reads layer_norm_epsilon, if present: a number that stays positive and finite as a float.
static int read_epsilon(float *value, const json_t *root, const char *path, Err *err) {
    const json_t *v = json_object_get(root, "layer_norm_epsilon");
    if (!v) return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= FLT_MIN && x <= FLT_MAX)) {
        return field_err(err, path, "layer_norm_epsilon", "a positive number (as a float)", v);
    }
    *value = (float)x;
    return 0;
}

// Reads every known field of the parsed config.json `root` into *cfg, which holds the defaults.
static int read_fields(Config *cfg, const json_t *root, const char *path, Err *err) {
    char got[64];
    if (!json_is_object(root)) {
        return err_fmt(err, "%s: expected a JSON object, got %s", path, st_json_brief(got, sizeof got, root));
    }
    if (read_strings(cfg, root, path, err)) return -1;

    const struct {
        const char *field, *aliases[2];
        int *value;
    } sizes[] = {
        {"vocab_size", {NULL, NULL}, &cfg->vocab_size},
        {"n_positions", {"n_ctx", "max_position_embeddings"}, &cfg->n_positions},
        {"n_embd", {"hidden_size", NULL}, &cfg->n_embd},
        {"n_layer", {"num_hidden_layers", NULL}, &cfg->n_layer},
        {"n_head", {"num_attention_heads", NULL}, &cfg->n_head},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (read_size(sizes[i].value, root, sizes[i].field, path, err)) return -1;
        for (int a = 0; a < 2 && sizes[i].aliases[a]; a++) {
            if (check_alias(root, sizes[i].aliases[a], sizes[i].field, *sizes[i].value, path, err)) return -1;
        }
    }
    if (cfg->n_embd % cfg->n_head != 0) {
        return err_fmt(err, "%s: field \"n_head\": %d does not divide n_embd = %d (each head gets n_embd / n_head "
                       "channels)", path, cfg->n_head, cfg->n_embd);
    }
    cfg->n_inner = 4 * cfg->n_embd;
    if (!json_is_null(json_object_get(root, "n_inner")) && read_size(&cfg->n_inner, root, "n_inner", path, err)) {
        return -1;
    }

    bool cross_attention = false, reorder_and_upcast = false;
    if (read_epsilon(&cfg->layer_norm_epsilon, root, path, err) ||
        read_bool(&cfg->scale_attn_weights, root, "scale_attn_weights", path, err) ||
        read_bool(&cfg->scale_attn_by_inverse_layer_idx, root, "scale_attn_by_inverse_layer_idx", path, err) ||
        read_bool(&cfg->tie_word_embeddings, root, "tie_word_embeddings", path, err) ||
        read_bool(&reorder_and_upcast, root, "reorder_and_upcast_attn", path, err) ||
        read_bool(&cross_attention, root, "add_cross_attention", path, err) ||
        read_token(&cfg->bos_token_id, root, "bos_token_id", cfg->vocab_size, path, err) ||
        read_token(&cfg->eos_token_id, root, "eos_token_id", cfg->vocab_size, path, err)) {
        return -1;
    }
    if (cross_attention) {
        return err_fmt(err, "%s: field \"add_cross_attention\": expected false, got true (cross-attention, for "
                       "encoder-decoder models, is not supported)", path);
    }
    return 0;
}

int config_load(Config *cfg, const char *path, Err *err) {
    *cfg = DEFAULTS;
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    int rc;
    if (!root && json_error_code(&jerr) == json_error_cannot_open_file) {
        rc = err_fmt(err, "%s: cannot read the config: %s", path, jerr.text);
    } else if (!root) {
        rc = err_fmt(err, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
    } else {
        rc = read_fields(cfg, root, path, err);
    }
    json_decref(root);
    return rc;
}
