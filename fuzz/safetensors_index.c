// safetensors_index.c — fuzz target: a sharded checkpoint folder, opened with st_open. The input is
// model.safetensors.index.json, then up to four shards named 1.safetensors .. 4.safetensors, separated by
// FUZZ_SEPARATOR. An accepted checkpoint must hold every tensor of the weight_map, each in one shard.
#include "fuzz.h"

#include "checkpoint/safetensors.h"

enum { MAX_SHARDS = 4 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[1 + MAX_SHARDS];
    int n = fuzz_split(data, size, parts, 1 + MAX_SHARDS);
    fuzz_write("model.safetensors.index.json", 0, parts[0]);
    for (int i = 1; i <= MAX_SHARDS; i++) {
        char name[32];
        snprintf(name, sizeof name, "%d.safetensors", i);
        if (i < n) fuzz_write(name, i, parts[i]);
        else unlink(fuzz_path(name, i));  // a shard of the previous input
    }
    StCheckpoint ckpt;
    Err err = {""};
    if (st_open(&ckpt, fuzz_scratch(), &err) == 0) {
        if (!ckpt.index_path || ckpt.n_files < 1 || ckpt.n_files > n - 1)
            fuzz_fail("opened %d files from an index and %d shards", ckpt.n_files, n - 1);
        for (int i = 0; i < ckpt.n_tensors; i++)
            if (st_find(&ckpt, ckpt.tensors[i].name) != &ckpt.tensors[i])
                fuzz_fail("st_find(\"%s\") is not the tensor listed", ckpt.tensors[i].name);
    } else {
        fuzz_check_message(&err);
    }
    st_close(&ckpt);
    return 0;
}
