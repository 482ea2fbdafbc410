// config.c — fuzz target: a checkpoint folder's config.json, read with config_load, and its generation_config.json,
// read with config_load_generation. The input is config.json, FUZZ_SEPARATOR, generation_config.json (absent: no
// such file). An accepted config must hold what config.h promises the forward pass: sizes in [1, 2^20]; GPT-2's
// n_head dividing n_embd, head_dim = n_embd / n_head, key/value heads = heads; the Llama family's key/value heads
// dividing the heads, an even head_dim (n_embd / n_head when the file gives none); norm epsilon and rotary θ
// positive and finite, rope_scaling's factors too (llama3: high_freq_factor > low_freq_factor); bos and every eos
// in [0, V), at most MAX_EOS of them, eos_token_id the first (or −1); the warning one clean line. An accepted
// generation config keeps those promises of the ids; a missing one changes nothing.
#include <math.h>

#include "fuzz.h"

#include "checkpoint/config.h"

static bool size_ok(int v) { return v >= 1 && v <= 1 << 20; }

static bool positive(float x) { return x > 0 && isfinite(x); }

// The token ids' promises, and the warning's.
static void check_ids(const Config *c) {
    if (c->bos_token_id < -1 || c->bos_token_id >= c->vocab_size)
        fuzz_fail("accepted bos %d with V %d", c->bos_token_id, c->vocab_size);
    if (c->n_eos < 0 || c->n_eos > MAX_EOS) fuzz_fail("n_eos %d", c->n_eos);
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] < 0 || c->eos_ids[i] >= c->vocab_size)
            fuzz_fail("accepted eos %d with V %d", c->eos_ids[i], c->vocab_size);
    if (c->eos_token_id != (c->n_eos ? c->eos_ids[0] : -1))
        fuzz_fail("eos_token_id %d is not the first of %d eos ids", c->eos_token_id, c->n_eos);
    size_t n = strnlen(c->warning, sizeof c->warning);
    if (n == sizeof c->warning) fuzz_fail("the warning is not NUL-terminated");
    if (n) {
        Err as_message;
        memcpy(as_message.msg, c->warning, n + 1);
        fuzz_check_message(&as_message);
    }
}

static void check_config(const Config *c) {
    if (!size_ok(c->n_embd) || !size_ok(c->n_head) || !size_ok(c->n_kv_head) || !size_ok(c->head_dim) ||
        !size_ok(c->n_layer) || !size_ok(c->n_positions) || !size_ok(c->vocab_size) || !size_ok(c->n_inner))
        fuzz_fail("accepted sizes d %d H %d KV %d hd %d L %d n_positions %d V %d n_inner %d", c->n_embd, c->n_head,
                  c->n_kv_head, c->head_dim, c->n_layer, c->n_positions, c->vocab_size, c->n_inner);
    if (c->n_head % c->n_kv_head != 0) fuzz_fail("accepted H %d with %d key/value heads", c->n_head, c->n_kv_head);
    if (c->model_type == MODEL_GPT2) {
        if (c->n_embd % c->n_head != 0 || c->head_dim * c->n_head != c->n_embd || c->n_kv_head != c->n_head)
            fuzz_fail("GPT-2 accepted d %d H %d hd %d KV %d", c->n_embd, c->n_head, c->head_dim, c->n_kv_head);
    } else {
        if (c->head_dim % 2 != 0) fuzz_fail("accepted an odd head_dim %d", c->head_dim);
        if (!positive(c->rope_theta)) fuzz_fail("accepted rope_theta %g", c->rope_theta);
        if (c->rope.type != ROPE_DEFAULT && !positive(c->rope.factor))
            fuzz_fail("accepted rope factor %g", c->rope.factor);
        if (c->rope.type == ROPE_LLAMA3 &&
            (!positive(c->rope.low_freq_factor) || !(c->rope.high_freq_factor > c->rope.low_freq_factor) ||
             !isfinite(c->rope.high_freq_factor) || !size_ok(c->rope.original_max_position)))
            fuzz_fail("accepted llama3 rope: low %g high %g original %d", c->rope.low_freq_factor,
                      c->rope.high_freq_factor, c->rope.original_max_position);
    }
    if (!positive(c->norm_epsilon)) fuzz_fail("accepted norm epsilon %g", c->norm_epsilon);
    check_ids(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    const char *path = fuzz_write("config.json", 0, parts[0]);
    Config c;
    Err err = {""};
    if (config_load(&c, path, &err) < 0) {
        fuzz_check_message(&err);
        return 0;
    }
    check_config(&c);
    const char *generation = fuzz_path("generation_config.json", 1);
    if (n == 2) fuzz_write("generation_config.json", 1, parts[1]);
    else unlink(generation);
    Config before;
    memcpy(&before, &c, sizeof c);
    if (config_load_generation(&c, generation, &err) < 0) {
        fuzz_check_message(&err);
        return 0;
    }
    if (n == 1 && memcmp(&before, &c, sizeof c) != 0) fuzz_fail("a missing generation_config.json changed the config");
    check_ids(&c);
    return 0;
}
