// round_trip.c — fuzz target: arbitrary bytes encoded with the shipped tokenizer (weights/pystd/target). Valid
// UTF-8 must come back unchanged from decode and from the streaming decoder, with and without special tokens;
// anything else must be rejected naming its first bad byte (fuzz_check_round_trip).
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
    fuzz_check_round_trip(&shipped, data, size);
    return 0;
}
