// gguf_tokenizer_write.c — fuzz target: a tokenizer.json written into GGUF metadata by gguf_write_tokenizer (what
// `specdec convert` does), for a vocabulary of 300 ids. A refusal must be one clean line; an accepted tokenizer must
// make a GGUF file that gguf_open reads back, with 300 tokens and their 300 types.
#include "checkpoint/gguf_tokenizer.h"
#include "checkpoint/gguf_write.h"
#include "fuzz.h"

enum { N_VOCAB = 300 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart part = {data, size};
    fuzz_write("tokenizer.json", 0, part);
    GgufWriter w;
    gguf_writer_init(&w);
    Err err = {""};
    const int rc = gguf_write_tokenizer(&w, fuzz_scratch(), N_VOCAB, 0, 1, &err);
    if (rc < 0) fuzz_check_message(&err);
    if (rc == 0) {
        char path[4096];
        snprintf(path, sizeof path, "%s", fuzz_path("written.gguf", 1));
        FILE *out = fopen(path, "wb");
        if (!out || gguf_write_header(&w, out, path, &err)) fuzz_fail("cannot write %s: %s", path, err.msg);
        fclose(out);
        GgufFile f;
        const GgufKv *tokens, *types;
        if (gguf_open(&f, path, &err) ||
            gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_STRING, &tokens, NULL, &err) ||
            gguf_get_array(&f, "tokenizer.ggml.token_type", GGUF_I32, &types, NULL, &err))
            fuzz_fail("the metadata written does not read back: %s", err.msg);
        if (tokens->count != N_VOCAB || types->count != N_VOCAB)
            fuzz_fail("%llu tokens and %llu types written, not %d", (unsigned long long)tokens->count,
                      (unsigned long long)types->count, N_VOCAB);
        gguf_close(&f);
    }
    gguf_writer_free(&w);
    return 0;
}
