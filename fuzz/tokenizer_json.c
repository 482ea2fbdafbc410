// tokenizer_json.c — fuzz target: tokenizer.json, read with tokenizer_load_json, then a text encoded with it. The
// input is the file, FUZZ_SEPARATOR, the text (absent: none). An accepted tokenizer must give back what its pipeline
// makes of the text (fuzz_check_round_trip).
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    const char *path = fuzz_write("tokenizer.json", 0, parts[0]);
    Tokenizer tok;
    Err err = {""};
    if (tokenizer_load_json(&tok, path, &err) < 0) {
        fuzz_check_message(&err);
        return 0;
    }
    if (n == 2) fuzz_check_round_trip(&tok, parts[1].data, parts[1].size);
    tokenizer_free(&tok);
    return 0;
}
