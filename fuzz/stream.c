// stream.c — fuzz target: the streaming decoder (token_stream_*) on arbitrary ids with the shipped tokenizer
// (weights/pystd/target). Each two input bytes are one id in -1..V, so that both ends out of range occur. An id out
// of range must be refused with a clean message and leave the stream as it was; the text given back for the others
// must be valid UTF-8 and equal to their decoded bytes repaired in one go (utf8_repair), however they were split.
#include "fuzz.h"

static Tokenizer shipped;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    Err err;
    if (tokenizer_load_dir(&shipped, FUZZ_SHIPPED_TOKENIZER, &err) < 0) fuzz_fail("%s", err.msg);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int V = tokenizer_vocab_size(&shipped), n_ids = 0;
    int *ids = malloc((size / 2 + 1) * sizeof *ids);  // the ids in range, in order
    char *streamed = NULL;
    size_t n_streamed = 0;
    FILE *out = open_memstream(&streamed, &n_streamed);
    if (!ids || !out) fuzz_fail("out of memory");
    TokenStream ts;
    token_stream_init(&ts, &shipped);
    for (size_t i = 0; i + 1 < size; i += 2) {
        int id = (int)((data[i] | (unsigned)data[i + 1] << 8) % (unsigned)(V + 2)) - 1;
        const char *text;
        size_t len;
        Err err = {""};
        if (token_stream_push(&ts, id, &text, &len, &err) < 0) {
            if (id >= 0 && id < V) fuzz_fail("push(%d) failed: %s", id, err.msg);
            fuzz_check_message(&err);
            continue;
        }
        if (id < 0 || id >= V) fuzz_fail("push(%d) accepted an id out of range", id);
        if (utf8_invalid_offset(text, len) != len) fuzz_fail("push(%d) gave invalid UTF-8", id);
        fwrite(text, 1, len, out);
        ids[n_ids++] = id;
    }
    const char *text;
    size_t len;
    token_stream_flush(&ts, &text, &len);
    fwrite(text, 1, len, out);
    fclose(out);

    char *decoded, *repaired;
    size_t n_decoded, n_repaired;
    Err err;
    if (tokenizer_decode(&shipped, ids, n_ids, &decoded, &n_decoded, &err) < 0) fuzz_fail("decode: %s", err.msg);
    if (!(repaired = malloc(3 * n_decoded + 1))) fuzz_fail("out of memory");
    utf8_repair((const unsigned char *)decoded, n_decoded, true, repaired, &n_repaired);
    if (n_repaired != n_streamed || memcmp(repaired, streamed, n_streamed) != 0)
        fuzz_fail("streamed %zu bytes, repaired decode %zu bytes: they differ", n_streamed, n_repaired);
    free(repaired);
    free(decoded);
    free(streamed);
    free(ids);
    token_stream_free(&ts);
    return 0;
}
