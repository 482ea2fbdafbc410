// config.c — fuzz target: config.json, read with config_load. An accepted file must give sizes in [1, 2^20] with
// n_embd divisible by n_head, and token ids in [-1, vocab_size).
#include "fuzz.h"

#include "checkpoint/config.h"

static bool size_ok(int v) { return v >= 1 && v <= 1 << 20; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("config.json", 0, (FuzzPart){data, size});
    Config c;
    Err err = {""};
    if (config_load(&c, path, &err) < 0) {
        fuzz_check_message(&err);
        return 0;
    }
    if (!size_ok(c.n_embd) || !size_ok(c.n_head) || !size_ok(c.n_layer) || !size_ok(c.n_positions) ||
        !size_ok(c.vocab_size) || !size_ok(c.n_inner) || c.n_embd % c.n_head != 0)
        fuzz_fail("accepted sizes d %d H %d L %d n_positions %d V %d n_inner %d", c.n_embd, c.n_head, c.n_layer,
                  c.n_positions, c.vocab_size, c.n_inner);
    if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size || c.eos_token_id < -1 ||
        c.eos_token_id >= c.vocab_size)
        fuzz_fail("accepted bos %d eos %d with V %d", c.bos_token_id, c.eos_token_id, c.vocab_size);
    return 0;
}
