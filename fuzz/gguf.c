// gguf.c — fuzz target: one GGUF file, opened with gguf_open. An accepted file's tensors must lie inside the
// mapping with the bytes their type and shape imply, be found by name, its metadata read by every typed reader
// and printed with gguf_print; then read as a model's config (gguf_config) and tensors (gguf_view, each tensor's
// first row then read as floats, quantized blocks of every type read dequantized), and its
// tokenizer (gguf_tokenizer_json, then the tokenizer.json loader) and chat template, whose refusals must be clean
// lines too.
#include "fuzz.h"

#include "checkpoint/gguf_model.h"
#include "checkpoint/gguf_tokenizer.h"

// Checks what gguf.h promises of an opened file.
static void check_file(const GgufFile *f) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) fuzz_fail("cannot open /dev/null");
    unsigned sum = 0;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        const GgufTensor *t = &f->tensors[i];
        size_t block_bytes;
        const int block = gguf_type_block(t->type, &block_bytes);
        if (gguf_tensor(f, t->name) != t) fuzz_fail("gguf_tensor(\"%s\") is not the tensor listed", t->name);
        if (!block || t->n_bytes != (size_t)(t->n_elements / block) * block_bytes)
            fuzz_fail("tensor \"%s\": %zu bytes for %lld elements of %s", t->name, t->n_bytes,
                      (long long)t->n_elements, gguf_type_name(t->type));
        if (t->data < f->map + f->data_offset || t->data + t->n_bytes > f->map + f->size)
            fuzz_fail("tensor \"%s\" lies outside the data area", t->name);
        for (size_t b = 0; b < t->n_bytes; b++) sum += t->data[b];  // ASan checks every byte
    }
    for (int64_t i = 0; i < f->n_kv; i++) {
        const GgufKv *kv = &f->kv[i];
        Err err = {""};
        int64_t v;
        float x;
        const char *s;
        size_t len;
        const GgufKv *array;
        if (gguf_get_int(f, kv->key, INT64_MIN, INT64_MAX, &v, NULL, &err)) fuzz_check_message(&err);
        if (gguf_get_float(f, kv->key, &x, NULL, &err)) fuzz_check_message(&err);
        if (gguf_get_string(f, kv->key, &s, &len, NULL, &err)) fuzz_check_message(&err);
        else sum += len ? (unsigned char)s[len - 1] : 0;
        if (gguf_get_array(f, kv->key, GGUF_STRING, &array, NULL, &err)) {
            fuzz_check_message(&err);
            continue;
        }
        const uint8_t *at = array->value;
        for (uint64_t e = 0; e < array->count; e++) {
            gguf_next_string(&at, &s, &len);
            sum += len ? (unsigned char)s[len - 1] : 0;
        }
    }
    gguf_print(null, f);
    fprintf(null, "%u", sum);
}

// The first row of every tensor of an accepted view as floats (st_row_to_f32: F32, F16, BF16 converted, quantized
// blocks dequantized as qk.h says), its bytes inside the tensor's.
static void check_first_rows(const StCheckpoint *ckpt) {
    static FILE *null;
    if (!null && !(null = fopen("/dev/null", "w"))) fuzz_fail("cannot open /dev/null");
    for (int i = 0; i < ckpt->n_tensors; i++) {
        const StTensor *t = &ckpt->tensors[i];
        const int64_t n = t->ndim ? t->shape[t->ndim - 1] : 1;
        if (t->n_elements == 0 || n > 1 << 16) continue;
        float *row = malloc(sizeof(float) * (size_t)n);
        if (!row) fuzz_fail("out of memory");
        st_row_to_f32(row, t, 0, (size_t)n);
        fprintf(null, "%g", row[n - 1]);
        free(row);
    }
}

// The tokenizer and chat template in the metadata: loaded, or refused in one clean line.
static void check_tokenizer(const GgufFile *f) {
    Err err = {""};
    json_t *json = gguf_tokenizer_json(f, &err);
    Tokenizer tok;
    if (!json || tokenizer_load_json_value(&tok, f->path, json, &err)) fuzz_check_message(&err);
    else tokenizer_free(&tok);
    json_decref(json);
    char *template = gguf_chat_template(f, &err);
    if (!template) fuzz_check_message(&err);
    free(template);
    free(gguf_token_text(f, "tokenizer.ggml.bos_token_id"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write("model.gguf", 0, (FuzzPart){data, size});
    GgufFile f;
    Err err = {""};
    if (gguf_open(&f, path, &err) == 0) {
        check_file(&f);
        Config cfg;
        StCheckpoint ckpt;
        if (gguf_config(&cfg, &f, &err) || gguf_view(&ckpt, &f, &cfg, &err)) fuzz_check_message(&err);
        else {
            check_first_rows(&ckpt);
            st_close(&ckpt);
        }
        check_tokenizer(&f);
    } else {
        fuzz_check_message(&err);
    }
    gguf_close(&f);
    return 0;
}
