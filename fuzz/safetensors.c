// safetensors.c — fuzz target: one .safetensors file, opened with st_open. An accepted file's tensors must lie
// inside the mapping, be found by name, convert to floats (F32, F16, BF16) and print with st_print.
#include "fuzz.h"

#include "checkpoint/safetensors.h"

// Checks what safetensors.h promises of an opened checkpoint.
static void check_checkpoint(const StCheckpoint *ckpt) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) fuzz_fail("cannot open /dev/null");
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        if (st_find(ckpt, t->name) != t) fuzz_fail("st_find(\"%s\") is not the tensor listed", t->name);
        if (t->n_bytes != (size_t)t->n_elements * st_dtype_size(t->dtype))
            fuzz_fail("tensor \"%s\": %zu bytes for %lld elements", t->name, t->n_bytes, (long long)t->n_elements);
        if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16) continue;
        float *values = malloc(((size_t)t->n_elements + 1) * sizeof *values);  // reads every byte: ASan checks
        if (!values) fuzz_fail("out of memory");
        st_to_f32(values, t->data, t->dtype, (size_t)t->n_elements);
        free(values);
    }
    st_print(null, ckpt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("model.safetensors", 0, (FuzzPart){data, size});
    StCheckpoint ckpt;
    Err err = {""};
    if (st_open(&ckpt, path, &err) == 0) check_checkpoint(&ckpt);
    else fuzz_check_message(&err);
    st_close(&ckpt);
    return 0;
}
