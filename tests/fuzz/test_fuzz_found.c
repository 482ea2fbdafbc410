// test_fuzz_found.c — what the fuzz targets (fuzz/) found, one test per finding, each on the input the fuzzer saved,
// committed under tests/fuzz/<target>/. The test suite runs them without clang; `make fuzz-smoke` also replays them
// through their targets.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../fuzz/fuzz.h"
#include "chat/jinja.h"
#include "chat/tool_calls.h"
#include "grammar/json_schema.h"
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

// Loads the tokenizer.json part of committed input `path` (the text part, if any, in *text), as the target does:
// returns tokenizer_load_json's result, err its message.
static int load_found_tokenizer(const char *path, Tokenizer *tok, Err *err, FuzzPart *text) {
    size_t size;
    uint8_t *data = read_input(path, &size);
    if (!data) return -2;
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    char *dir = fixture_dir(), *file;
    if (asprintf(&file, "%s/tokenizer.json", dir) < 0) abort();
    FILE *f = fopen(file, "wb");
    CHECK(f && fwrite(parts[0].data, 1, parts[0].size, f) == parts[0].size && fclose(f) == 0, "writing %s", file);
    int rc = tokenizer_load_json(tok, file, err);
    static uint8_t text_copy[1 << 12];  // (the text outlives data)
    *text = (FuzzPart){text_copy, n == 2 ? parts[1].size : 0};
    CHECK(text->size <= sizeof text_copy, "%s: a text of %zu bytes, more than %zu", path, text->size,
          sizeof text_copy);
    if (text->size > sizeof text_copy) text->size = 0;
    memcpy(text_copy, n == 2 ? parts[1].data : data, text->size);
    free(file);
    fixture_remove_dir(dir);
    free(data);
    return rc;
}

// fuzz/tokenizer_json: an added token ("<|endoftext|>") given id 266, the id that the vocabulary gives the merge
// "Ġ Ġ". Encoding two spaces made 266, which decoded to "<|endoftext|>": decode(encode(x)) != x. An id in both the
// vocabulary and added_tokens must now stand for the same bytes in both.
TEST(fuzz_found_added_token_with_a_merges_id) {
    Tokenizer tok;
    Err err = {""};
    FuzzPart text;
    CHECK(load_found_tokenizer("tests/fuzz/tokenizer_json/added_token_with_a_merges_id", &tok, &err, &text) == -1,
          "the tokenizer was accepted");
    CHECK(strstr(err.msg, "added token \"<|endoftext|>\" has id 266, which the vocabulary gives \"ĠĠ\""),
          "message: %s", err.msg);
    fuzz_check_message(&err);
}

// Found reading the loader while writing fuzz_check_round_trip's model of Replace decoders (the input is written
// by hand, then run through the target): the room for a SentencePiece token's decoded bytes was its name's length
// times the product of the decoder's Replace contents' lengths, which wrapped around to 0 for eleven Replaces of
// "▁" by 64 bytes — a heap buffer overflow (AddressSanitizer) — and asked malloc for terabytes with five. The
// length is now counted exactly, Replace by Replace; "▁" decodes to "▁" and 11 × 61 "x".
TEST(fuzz_found_decoder_replaces_overflowing_the_room) {
    Tokenizer tok;
    Err err = {""};
    FuzzPart text;
    CHECK(load_found_tokenizer("tests/fuzz/tokenizer_json/decoder_replaces_overflowing_the_room", &tok, &err,
                               &text) == 0, "load: %s", err.msg);
    if (test_failures()) return;
    size_t len;
    const char *bytes = tokenizer_token(&tok, tokenizer_find(&tok, "▁"), &len);
    CHECK(bytes && len == 3 + 11 * 61 && memcmp(bytes, "▁", 3) == 0 && bytes[len - 1] == 'x', "decoded %zu bytes",
          len);
    fuzz_check_round_trip(&tok, text.data, text.size);
    tokenizer_free(&tok);
}

// The same, without bound: "a" → "aa" seventeen times makes 131072 bytes of one token; a token may now decode to
// at most 65536 bytes, else the file is refused naming the token.
TEST(fuzz_found_decoder_replaces_doubling_a_token) {
    Tokenizer tok;
    Err err = {""};
    FuzzPart text;
    CHECK(load_found_tokenizer("tests/fuzz/tokenizer_json/decoder_replaces_doubling_a_token", &tok, &err, &text) ==
          -1, "the tokenizer was accepted");
    CHECK(strstr(err.msg, "vocab[\"a\"]: the decoder's Replace steps make more than 65536 bytes of it"),
          "message: %s", err.msg);
    fuzz_check_message(&err);
}

// Found by fuzz_check_round_trip's model on a hand-written file: BOS ("<s>", special, id 0) whose vocabulary
// token "▁" the decoder's Replace turns into nothing. The loader compared the two only for tokens with decoded
// bytes, so plain text "a▁a" encoded to a, <s>, a — a special token from plain text — and decoded to "a<s>a".
// Any id that BPE can make must now spell its added token.
TEST(fuzz_found_added_token_on_a_name_decoding_to_nothing) {
    Tokenizer tok;
    Err err = {""};
    FuzzPart text;
    CHECK(load_found_tokenizer("tests/fuzz/tokenizer_json/added_token_on_a_name_decoding_to_nothing", &tok, &err,
                               &text) == -1, "the tokenizer was accepted");
    CHECK(strstr(err.msg, "added token \"<s>\" has id 0, which the vocabulary gives \"▁\""), "message: %s", err.msg);
    fuzz_check_message(&err);
}

// fuzz/tokenizer_json (UndefinedBehaviorSanitizer): a SentencePiece-style tokenizer (Metaspace) without byte
// fallback or unknown token, so characters outside its vocabulary are dropped. A piece made only of them gave no
// ids, and caching that empty result did pointer arithmetic on the still-NULL id arrays. Such pieces are no longer
// cached; the debug suite runs this under the sanitizers.
TEST(fuzz_found_piece_of_dropped_characters) {
    Tokenizer tok;
    Err err = {""};
    FuzzPart text;
    CHECK(load_found_tokenizer("tests/fuzz/tokenizer_json/piece_of_dropped_characters", &tok, &err, &text) == 0,
          "load: %s", err.msg);
    if (test_failures()) return;
    int *ids, n_ids;
    CHECK(tokenizer_encode(&tok, "😀 😀 😀", strlen("😀 😀 😀"), false, &ids, &n_ids, &err) == 0 && n_ids == 0,
          "encode: %s", err.msg);
    free(ids);
    fuzz_check_round_trip(&tok, text.data, text.size);
    tokenizer_free(&tok);
}

// A chat_template input's template part parsed: the message of its refusal (empty if it parsed).
static void refusal_of_found_template(const char *path, Err *err) {
    size_t size;
    uint8_t *data = read_input(path, &size);
    if (!data) return;
    FuzzPart parts[2];
    fuzz_split(data, size, parts, 2);
    JinjaTemplate *t = jinja_parse((const char *)parts[0].data, parts[0].size, err);
    if (t) err->msg[0] = '\0';
    jinja_free(t);
    free(data);
}

// chat_template: "{{ s[] }}" parsed as an index with no index expression, which the evaluator then followed. An
// empty subscript is refused at parse time, naming itself.
TEST(fuzz_found_empty_subscript) {
    Err err = {""};
    refusal_of_found_template("tests/fuzz/chat_template/empty_subscript", &err);
    CHECK(strstr(err.msg, "an empty subscript '[]'"), "wanted the empty subscript refused, got \"%s\"", err.msg);
}

// chat_template: a number of 127 digits and more, then an exponent with a sign: the digits stopped at the text
// buffer's room, but 'e' and the sign were still written, past its end (UBSan). The number is refused by its length.
TEST(fuzz_found_long_number_with_exponent) {
    Err err = {""};
    refusal_of_found_template("tests/fuzz/chat_template/long_number_with_exponent", &err);
    CHECK(strstr(err.msg, "a number with more than 126 characters"), "wanted the long number refused, got \"%s\"",
          err.msg);
}

// A grammar input's GBNF part parsed, and its document read: the message of a refusal (empty if it parsed), and
// whether the recogniser read the whole document (in *read_all).
static void run_found_grammar(const char *path, Err *err, bool *read_all) {
    size_t size;
    uint8_t *data = read_input(path, &size);
    if (!data) return;
    FuzzPart parts[2];
    int n = fuzz_split(data, size, parts, 2);
    Grammar *g = grammar_parse((const char *)parts[0].data, parts[0].size, "found.gbnf", err);
    GrammarState s = {0}, next = {0};
    *read_all = g && grammar_state_init(&s, g, err) == 0 &&
                (n < 2 || grammar_accept_bytes(&s, (const char *)parts[1].data, parts[1].size, &next));
    if (g) err->msg[0] = '\0';
    grammar_state_free(&s);
    grammar_state_free(&next);
    grammar_free(g);
    free(data);
}

// grammar: an empty literal repeated, ""{2,2}, copied its zero elements from a null pointer (UBSan). Repeating
// nothing is nothing; this input's grammar is then refused for its short \u escape.
TEST(fuzz_found_empty_literal_repeated) {
    Err err = {""};
    bool read_all;
    run_found_grammar("tests/fuzz/grammar/empty_literal_repeated", &err, &read_all);
    CHECK(strstr(err.msg, "1:21: expected 4 hexadecimal digits"), "got \"%s\"", err.msg);
}

// grammar: a rule that repeats itself, root ::= (…) root* "é"? ., is ambiguous: every character opens more parses.
// Merging equal stacks compared each new stack with every other (a timeout at thousands of stacks); they are found
// by hash now, and a state holds at most GRAMMAR_MAX_STACKS.
TEST(fuzz_found_ambiguous_self_repetition) {
    Err err = {""};
    bool read_all;
    run_found_grammar("tests/fuzz/grammar/ambiguous_self_repetition", &err, &read_all);
    CHECK(err.msg[0] == '\0', "refused: %s", err.msg);
}

// grammar: the same kind of grammar with negated classes of a hundred ranges: each stack's class was searched range
// by range for every character. Classes are sorted and merged at parse time and searched by bisection, and a state
// holds at most GRAMMAR_MAX_CELLS positions.
TEST(fuzz_found_ambiguous_wide_classes) {
    Err err = {""};
    bool read_all;
    run_found_grammar("tests/fuzz/grammar/ambiguous_wide_classes", &err, &read_all);
    CHECK(err.msg[0] == '\0', "refused: %s", err.msg);
}

// json_schema: a pattern's {2,,3} passed as digits and commas and was copied into the grammar, which the parser then
// refused (the converter must write only grammars that parse). A {m,n} is read strictly now, and refused by name.
TEST(fuzz_found_malformed_repetition_in_pattern) {
    size_t size;
    uint8_t *data = read_input("tests/fuzz/json_schema/malformed_repetition_in_pattern", &size);
    if (!data) return;
    Err err = {""};
    char *gbnf = json_schema_to_gbnf((const char *)data, size, "found.json", &err);
    CHECK(!gbnf && strstr(err.msg, "a malformed {m,n}"), "got \"%s\"", gbnf ? "a grammar" : err.msg);
    free(gbnf);
    free(data);
}

// fuzz/tool_calls: code after Llama 3.1's <|python_tag|> holding a NUL byte became a code_interpreter call whose
// arguments held "\u0000", which JSON readers refuse by default (Jansson without JSON_ALLOW_NUL): such text is no
// code, and the reply stays content.
TEST(fuzz_found_code_with_a_nul) {
    size_t size;
    uint8_t *data = read_input("tests/fuzz/tool_calls/code_with_a_nul", &size);
    if (!data) return;
    size_t content_len;
    json_t *calls = tool_calls_parse(TOOL_FORMAT_LLAMA3, (const char *)data, size, &content_len);
    CHECK(!calls, "read as %zu calls", json_array_size(calls));
    json_decref(calls);
    free(data);
}
