// compatibility.h — whether a draft model can speculate for a target, and over which ids: what `specdec
// generate -m -d` and the bench's pairs both check.
#ifndef SPECDEC_COMPATIBILITY_H
#define SPECDEC_COMPATIBILITY_H

#include <stdbool.h>

#include "base/error.h"
#include "model/model.h"

// Whether folder dir holds a tokenizer (the files tokenizer_load_dir reads), or the GGUF file dir names (or the one
// in folder dir) has one in its metadata.
bool dir_has_tokenizer(const char *dir);

// The ids a target and its draft share: [0, *n). A draft is compatible when the tokenizers are identical (every
// id the same token); its embedding table may be padded to another size than the target's (Qwen2.5-0.5B has
// 151936 rows, -7B 152064), so speculation runs over the tokenizer's ids that both tables hold. Without tokenizers
// the vocabulary sizes must agree.
// Sets *n to that shared range (the caller then limits both models to it: model_limit_vocab), or fails with a
// one-line message naming the draft's folder.
int draft_shared_vocabulary(const Model *target, const char *target_dir, const Model *draft, const char *draft_dir,
                            int *n, Err *err);

#endif
