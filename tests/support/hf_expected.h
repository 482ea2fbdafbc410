// hf_expected.h — the checkpoints of ../shared/fixtures/hf, written by Hugging Face transformers (its README), and
// what transformers computes from each: expected.safetensors, read with the project's own safetensors loader —
// input_ids (I64 [13]), logits (F32 [13, V]), greedy_prompt (I64 [5]), greedy_ids (I64 [16]).
#ifndef SPECDEC_HF_EXPECTED_H
#define SPECDEC_HF_EXPECTED_H

#include <stdbool.h>

#define HF_FIXTURES "../shared/fixtures/hf"  // from the repository root, where the tests run

// The fixtures' folder names under HF_FIXTURES: every family, with tied, untied and sharded heads, F32 and BF16.
extern const char *const HF_FIXTURE_NAMES[];
enum { N_HF_FIXTURES = 6 };

typedef struct {
    int T, V, n_prompt, n_greedy;
    int *ids, *prompt, *greedy;  // [T], [n_prompt], [n_greedy]
    float *logits;               // [T, V]
} HfExpected;

// Reads dir/expected.safetensors into e; false, with a failed check (harness.h) naming what is wrong, otherwise.
bool hf_expected_read(HfExpected *e, const char *dir);
void hf_expected_free(HfExpected *e);

#endif
