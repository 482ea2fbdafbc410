// test_unused_tensors.c — a checkpoint whose tensors its config does not account for is an error naming the first
// one (st_check_all_fetched), except the buffers each family's exports carry; every fixture still loads.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "harness.h"

#define GPT2_FIXTURE "tests/fixtures/f32_tied_prefix"  // 2 layers, with attn.bias and attn.masked_bias buffers

static bool ends_with(const char *s, const char *suffix) {
    return strlen(s) >= strlen(suffix) && strcmp(s + strlen(s) - strlen(suffix), suffix) == 0;
}

// Opens the GPT-2 fixture and fetches every tensor but `skip` (NULL: none) and the known buffers.
static int fetch_all_but(StCheckpoint *ckpt, const char *skip, Err *err) {
    if (st_open(ckpt, GPT2_FIXTURE, err)) return -1;
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const char *name = ckpt->tensors[i].name;
        if (!(skip && strcmp(name, skip) == 0) && !ends_with(name, ".attn.bias") && !ends_with(name, ".masked_bias"))
            CHECK(st_find(ckpt, name) == &ckpt->tensors[i], "st_find(%s)", name);
    }
    return 0;
}

TEST(st_check_all_fetched_names_the_first_unused_tensor) {
    StCheckpoint ckpt;
    Err err = {{0}};
    CHECK(fetch_all_but(&ckpt, NULL, &err) == 0, "%s", err.msg);
    CHECK(st_check_all_fetched(&ckpt, "gpt2", 2, &err) == 0, "GPT-2's buffers are known: %s", err.msg);
    CHECK(st_check_all_fetched(&ckpt, "llama", 2, &err) == -1 && strstr(err.msg, "\"transformer.h.0.attn.bias\""),
          "another family's buffers are not: %s", err.msg);
    st_close(&ckpt);

    CHECK(fetch_all_but(&ckpt, "transformer.h.1.mlp.c_fc.weight", &err) == 0, "%s", err.msg);
    CHECK(st_check_all_fetched(&ckpt, "gpt2", 1, &err) == -1 &&
              strstr(err.msg, "tensor \"transformer.h.1.mlp.c_fc.weight\" is not used by a 1-layer gpt2: n_layer in "
                              "config.json may be wrong"),
          "one layer: %s", err.msg);
    st_close(&ckpt);

    CHECK(fetch_all_but(&ckpt, "transformer.wpe.weight", &err) == 0, "%s", err.msg);
    CHECK(st_check_all_fetched(&ckpt, "gpt2", 2, &err) == -1 &&
              strstr(err.msg, "\"transformer.wpe.weight\" is not used by a 2-layer gpt2: config.json may not describe"),
          "no layer in the name: %s", err.msg);
    st_close(&ckpt);
}

TEST(cli_refuses_a_config_with_fewer_layers_than_the_checkpoint) {
    char dir[] = "/tmp/specdec_layers_XXXXXX", command[1024], *out, *err;
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(command, sizeof command,
             "cp %s/llama_gqa_f32/*.json %s/llama_gqa_f32/model.safetensors %s && "
             "sed -i 's/\"num_hidden_layers\": 2/\"num_hidden_layers\": 1/' %s/config.json && "
             "grep -q '\"num_hidden_layers\": 1' %s/config.json",
             "../shared/fixtures/hf", "../shared/fixtures/hf", dir, dir, dir);
    CHECK(system(command) == 0, "%s", command);
    snprintf(command, sizeof command, "%s logits -m %s --ids '1 2'", specdec_bin(), dir);
    int status = run_command(command, &out, &err);
    CHECK(status == 2 && out[0] == '\0' && strchr(err, '\n') == err + strlen(err) - 1 &&
              strstr(err, "tensor \"model.layers.1.") && strstr(err, "is not used by a 1-layer llama: "
                                                                   "num_hidden_layers in config.json may be wrong"),
          "status %d, stderr \"%s\"", status, err);
    free(out);
    free(err);
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(system(command) == 0, "%s", command);
}
