// test_fuzz_found.c — what the fuzz targets (fuzz/) found, one test per finding, each on the input the fuzzer saved,
// committed under tests/fuzz/<target>/. The test suite runs them without clang; `make fuzz-smoke` also replays them
// through their targets.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../fuzz/fuzz.h"
#include "harness.h"
#include "tokenizer_fixtures.h"

// The bytes of file path (malloc'd) and their number, or NULL.
static uint8_t *read_input(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    uint8_t *data = NULL;
    if (f && fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        data = n >= 0 ? malloc((size_t)n + 1) : NULL;
        rewind(f);
        if (data && fread(data, 1, (size_t)n, f) != (size_t)n) {
            free(data);
            data = NULL;
        }
        *size = (size_t)n;
    }
    if (f) fclose(f);
    CHECK(data, "cannot read %s", path);
    return data;
}

// fuzz/tokenizer_json: an added token ("<|endoftext|>") given id 266, the id that the vocabulary gives the merge
// "Ġ Ġ". Encoding two spaces made 266, which decoded to "<|endoftext|>": decode(encode(x)) != x. An id in both the
// vocabulary and added_tokens must now stand for the same bytes in both.
TEST(fuzz_found_added_token_with_a_merges_id) {
    size_t size;
    uint8_t *data = read_input("tests/fuzz/tokenizer_json/added_token_with_a_merges_id", &size);
    if (!data) return;
    FuzzPart parts[2];
    CHECK(fuzz_split(data, size, parts, 2) == 2, "the input has no text part");
    char *dir = fixture_dir(), *path;
    if (asprintf(&path, "%s/tokenizer.json", dir) < 0) abort();
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(parts[0].data, 1, parts[0].size, f) == parts[0].size && fclose(f) == 0, "writing %s", path);
    Tokenizer tok;
    Err err = {""};
    CHECK(tokenizer_load_json(&tok, path, &err) == -1, "the tokenizer was accepted");
    CHECK(strstr(err.msg, "added token \"<|endoftext|>\" has id 266, which the vocabulary gives \"ĠĠ\""),
          "message: %s", err.msg);
    fuzz_check_message(&err);
    free(path);
    fixture_remove_dir(dir);
    free(data);
}
