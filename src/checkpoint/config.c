// config.c — a model's hyper-parameters from a Hugging Face config.json (see config.h).
//
// Every known field is optional and defaults as in transformers' config class for the model_type; a present field
// must have the right JSON type (768, not "768" or 768.5) and a supported value. Unknown fields are ignored, with
// these exceptions for GPT-2:
//   - "n_ctx" (older transformers) and the aliases hidden_size, max_position_embeddings, num_attention_heads and
//     num_hidden_layers are checked, never used: if present they must equal the field they stand for, so that a
//     file cannot mean two things (transformers would silently let the alias win);
//   - "reorder_and_upcast_attn" must be a boolean and is otherwise ignored: attention is computed in F32 anyway.
#include "checkpoint/config.h"

#include <float.h>
#include <jansson.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"  // st_json_brief

// No size may exceed this: a larger one is a broken file, and with this bound 4·n_embd fits an int and the
// product of any two sizes fits an int64_t.
enum { MAX_SIZE = 1 << 20 };

// transformers' GPT2Config defaults.
static const Config GPT2_DEFAULTS = {
    .model_type = MODEL_GPT2,
    .n_embd = 768,
    .n_head = 12,
    .n_layer = 12,
    .n_positions = 1024,
    .vocab_size = 50257,
    .norm = NORM_LAYER,
    .norm_epsilon = 1e-5f,
    .positions = POSITIONS_LEARNED,
    .mlp = MLP_PLAIN,
    .activation = ACT_GELU_TANH,
    .qkv_bias = true,
    .out_bias = true,
    .mlp_bias = true,
    .scale_attn_weights = true,
    .tie_word_embeddings = true,
    .bos_token_id = 50256,
    .eos_token_id = 50256,
};

// What the Llama-family configs share; sizes per model_type below.
static const Config LLAMA_FAMILY = {
    .norm = NORM_RMS,
    .norm_epsilon = 1e-6f,
    .positions = POSITIONS_ROTARY,
    .mlp = MLP_GATED,
    .activation = ACT_SILU,
    .rope_theta = 10000.0f,
    .rope = {.type = ROPE_DEFAULT},
    .scale_attn_weights = true,
    .tie_word_embeddings = false,
    .bos_token_id = -1,
    .eos_token_id = -1,
};

static const struct {
    const char *name;
    ModelType type;
    int vocab_size, hidden_size, intermediate_size, layers, heads, kv_heads, max_positions, bos, eos;
} FAMILIES[] = {
    // name       type            V       d     F      L   H   KV  positions   bos  eos   (transformers' defaults)
    {"llama", MODEL_LLAMA, 32000, 4096, 11008, 32, 32, 0, 2048, 1, 2},
    {"mistral", MODEL_MISTRAL, 32000, 4096, 14336, 32, 32, 8, 4096 * 32, 1, 2},
    {"qwen2", MODEL_QWEN2, 151936, 4096, 22016, 32, 32, 32, 32768, -1, -1},
    {"qwen3", MODEL_QWEN3, 151936, 4096, 22016, 32, 32, 32, 32768, -1, -1},
};
enum { N_FAMILIES = sizeof FAMILIES / sizeof FAMILIES[0] };

static const struct {
    const char *name;
    Activation activation;
} GELUS[] = {
    {"gelu_new", ACT_GELU_TANH},
    {"gelu_pytorch_tanh", ACT_GELU_TANH},
    {"gelu_fast", ACT_GELU_TANH},
    {"gelu", ACT_GELU_ERF},
};
enum { N_GELUS = sizeof GELUS / sizeof GELUS[0] };

// err_fmt for a field of the wrong type or value: `PATH: field "NAME": expected WHAT, got VALUE`. Returns -1.
static int field_err(Err *err, const char *path, const char *field, const char *expected, const json_t *value) {
    char got[64];
    return err_fmt(err, "%s: field \"%s\": expected %s, got %s", path, field, expected,
                   st_json_brief(got, sizeof got, value));
}

static bool is_string(const json_t *v, const char *s) { return json_is_string(v) && strcmp(json_string_value(v), s) == 0; }

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

// Reads number field `field` of `obj`, if present: a number that stays positive and finite as a float.
static int read_positive(float *value, const json_t *obj, const char *field, const char *path, Err *err) {
    const json_t *v = json_object_get(obj, field);
    if (!v) return 0;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= FLT_MIN && x <= FLT_MAX)) {
        return field_err(err, path, field, "a positive number (as a float)", v);
    }
    *value = (float)x;
    return 0;
}

// ---- token ids ----------------------------------------------------------------------------------------------

// Appends a note on id `id` of `field` to cfg->warning, once (generation_config.json often repeats config.json's
// ids): the first note names the file and the vocabulary, the next ones only the field and id, so that the line
// stays short.
static void warn(Config *cfg, const char *path, const char *field, json_int_t id) {
    char note[64];
    snprintf(note, sizeof note, "%s %lld", field, (long long)id);
    if (strstr(cfg->warning, note)) return;
    const char *effect = strcmp(field, "bos_token_id") ? "generation will not stop at it" : "ignored";
    const size_t used = strlen(cfg->warning);
    if (used) snprintf(cfg->warning + used, sizeof cfg->warning - used, "; %s: %s", note, effect);
    else
        snprintf(cfg->warning, sizeof cfg->warning, "%s: %s is outside the vocabulary [0, %d): %s", path, note,
                 cfg->vocab_size, effect);
}

// Reads field "bos_token_id" or "eos_token_id" of `root`, if present: null (none), an id, or (eos) a list of
// ids. Ids outside the vocabulary are dropped with a warning; *ids receives the rest (n_ids of them).
static int read_ids(Config *cfg, int ids[MAX_EOS], int *n_ids, const json_t *root, const char *field,
                    const char *path, Err *err) {
    const json_t *v = json_object_get(root, field);
    if (!v) return 1;  // absent: the caller keeps what it had
    *n_ids = 0;
    if (json_is_null(v)) return 0;
    const bool list = json_is_array(v) && strcmp(field, "eos_token_id") == 0;
    const size_t n = list ? json_array_size(v) : 1;
    if (!list && !json_is_integer(v)) return field_err(err, path, field, "null, a token id or (eos) a list of ids", v);
    if (n > MAX_EOS) return field_err(err, path, field, "at most 8 ids", v);
    for (size_t i = 0; i < n; i++) {
        const json_t *id = list ? json_array_get(v, i) : v;
        if (!json_is_integer(id) || json_integer_value(id) < 0)
            return field_err(err, path, field, "null, a token id ≥ 0 or (eos) a list of them", v);
        if (json_integer_value(id) >= cfg->vocab_size) warn(cfg, path, field, json_integer_value(id));
        else ids[(*n_ids)++] = (int)json_integer_value(id);
    }
    return 0;
}

// bos_token_id and eos_token_id of `root` into cfg, where present.
static int read_tokens(Config *cfg, const json_t *root, const char *path, Err *err) {
    int bos[MAX_EOS], n_bos = 0;
    int rc = read_ids(cfg, bos, &n_bos, root, "bos_token_id", path, err);
    if (rc < 0) return -1;
    if (rc == 0) cfg->bos_token_id = n_bos ? bos[0] : -1;
    rc = read_ids(cfg, cfg->eos_ids, &cfg->n_eos, root, "eos_token_id", path, err);
    if (rc < 0) return -1;
    cfg->eos_token_id = cfg->n_eos ? cfg->eos_ids[0] : -1;
    return 0;
}

// ---- fields every family shares -----------------------------------------------------------------------------

// "torch_dtype" or "dtype", if present: the dtype the weights were saved in. Only a check that it names a dtype
// specdec reads (the tensors' own dtypes decide how they are loaded).
static int read_dtype(const json_t *root, const char *path, Err *err) {
    const char *fields[] = {"torch_dtype", "dtype"};
    for (int f = 0; f < 2; f++) {
        const json_t *v = json_object_get(root, fields[f]);
        if (v && !json_is_null(v) && !is_string(v, "float32") && !is_string(v, "float16") &&
            !is_string(v, "bfloat16"))
            return field_err(err, path, fields[f], "\"float32\", \"float16\" or \"bfloat16\"", v);
    }
    return 0;
}

// ---- GPT-2 --------------------------------------------------------------------------------------------------

// activation_function: one of GELUS.
static int read_gelu(Config *cfg, const json_t *root, const char *path, Err *err) {
    const json_t *act = json_object_get(root, "activation_function");
    if (!act) return 0;
    for (int i = 0; i < N_GELUS; i++) {
        if (is_string(act, GELUS[i].name)) {
            cfg->activation = GELUS[i].activation;
            return 0;
        }
    }
    return field_err(err, path, "activation_function", "one of \"gelu_new\", \"gelu_pytorch_tanh\", \"gelu_fast\" "
                     "(tanh form), \"gelu\" (erf form)", act);
}

static int read_gpt2(Config *cfg, const json_t *root, const char *path, Err *err) {
    if (read_gelu(cfg, root, path, err)) return -1;
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
    cfg->n_kv_head = cfg->n_head;
    cfg->head_dim = cfg->n_embd / cfg->n_head;
    cfg->n_inner = 4 * cfg->n_embd;
    if (!json_is_null(json_object_get(root, "n_inner")) && read_size(&cfg->n_inner, root, "n_inner", path, err)) {
        return -1;
    }

    bool cross_attention = false, reorder_and_upcast = false;
    if (read_positive(&cfg->norm_epsilon, root, "layer_norm_epsilon", path, err) ||
        read_bool(&cfg->scale_attn_weights, root, "scale_attn_weights", path, err) ||
        read_bool(&cfg->scale_attn_by_inverse_layer_idx, root, "scale_attn_by_inverse_layer_idx", path, err) ||
        read_bool(&cfg->tie_word_embeddings, root, "tie_word_embeddings", path, err) ||
        read_bool(&reorder_and_upcast, root, "reorder_and_upcast_attn", path, err) ||
        read_bool(&cross_attention, root, "add_cross_attention", path, err)) {
        return -1;
    }
    if (cross_attention) {
        return err_fmt(err, "%s: field \"add_cross_attention\": expected false, got true (cross-attention, for "
                       "encoder-decoder models, is not supported)", path);
    }
    // transformers' default bos/eos (50256) are dropped silently when the vocabulary is smaller; given ones warn.
    if (cfg->bos_token_id >= cfg->vocab_size) cfg->bos_token_id = -1;
    if (cfg->eos_token_id >= cfg->vocab_size) cfg->eos_token_id = -1;
    cfg->n_eos = cfg->eos_token_id >= 0;
    cfg->eos_ids[0] = cfg->eos_token_id;
    return 0;
}

// ---- the Llama family ---------------------------------------------------------------------------------------

// rope_scaling (or transformers 5's rope_parameters): null, or an object whose "rope_type" (older files: "type")
// is "default", "linear" or "llama3". Dynamic NTK, YaRN, LongRoPE and the rest change attention at long
// contexts in ways not implemented here: refused by name.
static int read_rope_scaling(Config *cfg, const json_t *root, const char *path, Err *err) {
    const char *field = json_object_get(root, "rope_parameters") ? "rope_parameters" : "rope_scaling";
    const json_t *s = json_object_get(root, field);
    if (!s || json_is_null(s)) return 0;
    if (!json_is_object(s)) return field_err(err, path, field, "null or an object", s);
    if (read_positive(&cfg->rope_theta, s, "rope_theta", path, err)) return -1;  // rope_parameters carries θ
    const json_t *type = json_object_get(s, "rope_type");
    if (!type) type = json_object_get(s, "type");
    char got[64];
    if (!type || is_string(type, "default")) return 0;
    if (is_string(type, "linear")) cfg->rope.type = ROPE_LINEAR;
    else if (is_string(type, "llama3")) cfg->rope.type = ROPE_LLAMA3;
    else
        return err_fmt(err, "%s: field \"%s\": rope_type %s is not supported (supported: \"default\", \"linear\", "
                       "\"llama3\")", path, field, st_json_brief(got, sizeof got, type));
    if (!json_object_get(s, "factor")) return err_fmt(err, "%s: field \"%s\": \"factor\" is missing", path, field);
    if (read_positive(&cfg->rope.factor, s, "factor", path, err)) return -1;
    if (cfg->rope.type == ROPE_LLAMA3) {
        const char *needed[] = {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
        for (int i = 0; i < 3; i++)
            if (!json_object_get(s, needed[i]))
                return err_fmt(err, "%s: field \"%s\": \"%s\" is missing (rope_type llama3)", path, field, needed[i]);
        if (read_positive(&cfg->rope.low_freq_factor, s, "low_freq_factor", path, err) ||
            read_positive(&cfg->rope.high_freq_factor, s, "high_freq_factor", path, err) ||
            read_size(&cfg->rope.original_max_position, s, "original_max_position_embeddings", path, err))
            return -1;
        if (!(cfg->rope.high_freq_factor > cfg->rope.low_freq_factor))
            return err_fmt(err, "%s: field \"%s\": high_freq_factor %g must exceed low_freq_factor %g", path, field,
                           cfg->rope.high_freq_factor, cfg->rope.low_freq_factor);
    }
    return 0;
}

// The sliding window, where the model uses one (Mistral's sliding_window; Qwen's when use_sliding_window is
// true): attention sees only the last `sliding_window` positions. The context stays max_position_embeddings (a
// model's load cuts it to the window: config_fit_window).
static int read_sliding_window(Config *cfg, const json_t *root, const char *path, Err *err) {
    bool use = cfg->model_type == MODEL_MISTRAL;
    if (read_bool(&use, root, "use_sliding_window", path, err)) return -1;
    const json_t *window = json_object_get(root, "sliding_window");
    if (!use || json_is_null(window)) return 0;
    int size = 4096;  // MistralConfig's and Qwen2Config's default
    if (read_size(&size, root, "sliding_window", path, err)) return -1;
    cfg->sliding_window = size;
    return 0;
}

void config_fit_window(Config *cfg) {
    if (cfg->sliding_window && cfg->sliding_window < cfg->n_positions) cfg->n_positions = cfg->sliding_window;
}

static int read_llama_family(Config *cfg, const json_t *root, const char *path, Err *err) {
    const json_t *v;
    const struct {
        const char *field;
        int *value;
    } sizes[] = {
        {"vocab_size", &cfg->vocab_size},       {"hidden_size", &cfg->n_embd},
        {"intermediate_size", &cfg->n_inner},   {"num_hidden_layers", &cfg->n_layer},
        {"num_attention_heads", &cfg->n_head},  {"max_position_embeddings", &cfg->n_positions},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (read_size(sizes[i].value, root, sizes[i].field, path, err)) return -1;
    // null, or absent where the default is None (LlamaConfig): one key/value head per head
    v = json_object_get(root, "num_key_value_heads");
    if (json_is_null(v) || (!v && !cfg->n_kv_head)) cfg->n_kv_head = cfg->n_head;
    else if (read_size(&cfg->n_kv_head, root, "num_key_value_heads", path, err)) return -1;
    if (cfg->n_head % cfg->n_kv_head != 0)
        return err_fmt(err, "%s: field \"num_key_value_heads\": %d does not divide num_attention_heads = %d (each "
                       "key/value head serves a group of query heads)", path, cfg->n_kv_head, cfg->n_head);
    if ((v = json_object_get(root, "head_dim")) && !json_is_null(v)) {
        if (read_size(&cfg->head_dim, root, "head_dim", path, err)) return -1;
    } else if (cfg->n_embd % cfg->n_head != 0) {
        return err_fmt(err, "%s: field \"num_attention_heads\": %d does not divide hidden_size = %d, and no "
                       "head_dim is given", path, cfg->n_head, cfg->n_embd);
    } else {
        cfg->head_dim = cfg->n_embd / cfg->n_head;
    }
    if (cfg->head_dim % 2 != 0)
        return err_fmt(err, "%s: field \"head_dim\": %d is odd (rotary embeddings rotate pairs of channels)", path,
                       cfg->head_dim);

    if ((v = json_object_get(root, "hidden_act")) && !is_string(v, "silu") && !is_string(v, "swish"))
        return field_err(err, path, "hidden_act", "\"silu\" (the only activation of these families)", v);
    bool attention_bias = false;
    if (read_positive(&cfg->norm_epsilon, root, "rms_norm_eps", path, err) ||
        read_positive(&cfg->rope_theta, root, "rope_theta", path, err) ||
        read_rope_scaling(cfg, root, path, err) || read_sliding_window(cfg, root, path, err) ||
        read_bool(&cfg->tie_word_embeddings, root, "tie_word_embeddings", path, err) ||
        read_bool(&attention_bias, root, "attention_bias", path, err) ||
        read_bool(&cfg->mlp_bias, root, "mlp_bias", path, err))
        return -1;
    // Qwen2 always has q/k/v biases and no output bias; elsewhere attention_bias gives all four projections one.
    cfg->qkv_bias = cfg->model_type == MODEL_QWEN2 || attention_bias;
    cfg->out_bias = cfg->model_type != MODEL_QWEN2 && attention_bias;
    cfg->qk_norm = cfg->model_type == MODEL_QWEN3;
    return 0;
}

// ---- the file -----------------------------------------------------------------------------------------------

// The model_type of each transformers class that a config's "architectures" may name.
static const struct {
    const char *architecture, *model_type;
} ARCHITECTURES[] = {
    {"GPT2LMHeadModel", "gpt2"},       {"LlamaForCausalLM", "llama"}, {"MistralForCausalLM", "mistral"},
    {"Qwen2ForCausalLM", "qwen2"},     {"Qwen3ForCausalLM", "qwen3"},
};

// A config without model_type: the model_type (a new JSON string) that the first known class of its
// "architectures" implies, or NULL.
static json_t *model_type_of_architectures(const json_t *architectures) {
    size_t i;
    const json_t *name;
    json_array_foreach(architectures, i, name)
        for (size_t a = 0; a < sizeof ARCHITECTURES / sizeof *ARCHITECTURES; a++)
            if (is_string(name, ARCHITECTURES[a].architecture)) return json_string(ARCHITECTURES[a].model_type);
    return NULL;
}

// Reads every known field of the parsed config.json `root`, a model of type `model_type`, into *cfg.
static int read_family(Config *cfg, const json_t *root, const json_t *model_type, const char *path, Err *err) {
    if (is_string(model_type, "gpt2")) {
        *cfg = GPT2_DEFAULTS;
        if (read_gpt2(cfg, root, path, err) || read_tokens(cfg, root, path, err)) return -1;
        return read_dtype(root, path, err);
    }
    for (int f = 0; f < N_FAMILIES; f++) {
        if (!is_string(model_type, FAMILIES[f].name)) continue;
        *cfg = LLAMA_FAMILY;
        cfg->model_type = FAMILIES[f].type;
        cfg->vocab_size = FAMILIES[f].vocab_size;
        cfg->n_embd = FAMILIES[f].hidden_size;
        cfg->n_inner = FAMILIES[f].intermediate_size;
        cfg->n_layer = FAMILIES[f].layers;
        cfg->n_head = FAMILIES[f].heads;
        cfg->n_kv_head = FAMILIES[f].kv_heads;
        cfg->n_positions = FAMILIES[f].max_positions;
        if (read_llama_family(cfg, root, path, err)) return -1;
        cfg->bos_token_id = FAMILIES[f].bos < cfg->vocab_size ? FAMILIES[f].bos : -1;
        cfg->eos_token_id = FAMILIES[f].eos < cfg->vocab_size ? FAMILIES[f].eos : -1;
        cfg->n_eos = cfg->eos_token_id >= 0;
        cfg->eos_ids[0] = cfg->eos_token_id;
        if (read_tokens(cfg, root, path, err)) return -1;
        return read_dtype(root, path, err);
    }
    return field_err(err, path, "model_type", "one of \"gpt2\", \"llama\", \"mistral\", \"qwen2\", \"qwen3\" (the "
                     "architectures specdec runs)", model_type);
}

// Reads config.json's `root` into *cfg: a model of its model_type, or of the one its architectures imply.
static int read_fields(Config *cfg, const json_t *root, const char *path, Err *err) {
    char got[64];
    if (!json_is_object(root))
        return err_fmt(err, "%s: expected a JSON object, got %s", path, st_json_brief(got, sizeof got, root));
    const json_t *model_type = json_object_get(root, "model_type");
    if (model_type) return read_family(cfg, root, model_type, path, err);
    json_t *inferred = model_type_of_architectures(json_object_get(root, "architectures"));
    if (!inferred)
        return err_fmt(err, "%s: missing field \"model_type\" (\"gpt2\", \"llama\", ...), and no \"architectures\" "
                       "entry names a model specdec runs (GPT2LMHeadModel, LlamaForCausalLM, ...)", path);
    int rc = read_family(cfg, root, inferred, path, err);
    json_decref(inferred);
    return rc;
}

// Parses the JSON file at path into *root (NULL if it cannot), with a one-line error.
static json_t *load_json(const char *path, const char *what, Err *err) {
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
    if (!root && json_error_code(&jerr) == json_error_cannot_open_file) {
        err_fmt(err, "%s: cannot read the %s: %s", path, what, jerr.text);
    } else if (!root) {
        err_fmt(err, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
    }
    return root;
}

int config_load(Config *cfg, const char *path, Err *err) {
    *cfg = GPT2_DEFAULTS;
    json_t *root = load_json(path, "config", err);
    int rc = root ? read_fields(cfg, root, path, err) : -1;
    json_decref(root);
    return rc;
}

int config_load_generation(Config *cfg, const char *path, Err *err) {
    if (access(path, F_OK) != 0) return 0;
    json_t *root = load_json(path, "generation config", err);
    int rc = -1;
    char got[64];
    if (!root) rc = -1;
    else if (!json_is_object(root))
        rc = err_fmt(err, "%s: expected a JSON object, got %s", path, st_json_brief(got, sizeof got, root));
    else
        rc = read_tokens(cfg, root, path, err);
    json_decref(root);
    return rc;
}
