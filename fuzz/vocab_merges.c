// vocab_merges.c — fuzz target: vocab.json + merges.txt, read with tokenizer_load_files, then a text encoded with
// them. The input is vocab.json, FUZZ_SEPARATOR, merges.txt, FUZZ_SEPARATOR, the text (absent parts: empty files,
// no text). An accepted tokenizer must round-trip the text (fuzz_check_round_trip).
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[3] = {{0}};
    int n = fuzz_split(data, size, parts, 3);
    const char *vocab = fuzz_write("vocab.json", 0, parts[0]);
    const char *merges = fuzz_write("merges.txt", 1, parts[1]);
    Tokenizer tok;
    Err err = {""};
    if (tokenizer_load_files(&tok, vocab, merges, &err) < 0) {
        fuzz_check_message(&err);
        return 0;
    }
    if (n == 3) fuzz_check_round_trip(&tok, parts[2].data, parts[2].size);
    tokenizer_free(&tok);
    return 0;
}
