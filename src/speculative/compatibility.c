// compatibility.c — whether a draft can speculate for a target, and over which ids (see compatibility.h).
#include "speculative/compatibility.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/gguf.h"
#include "tokenizer/tokenizer.h"

bool dir_has_tokenizer(const char *dir) {
    const char *files[] = {"tokenizer.json", "vocab.json", "encoder.json"};
    char path[4096];
    if (gguf_checkpoint_path(dir, path, sizeof path)) {  // a GGUF: a tokenizer in its metadata
        GgufFile f;
        Err unused;  // (a malformed file: no tokenizer here; loading the model says what is wrong)
        const bool has = gguf_open(&f, path, &unused) == 0 && gguf_find(&f, "tokenizer.ggml.model");
        gguf_close(&f);
        return has;
    }
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (access(path, F_OK) == 0) return true;
    }
    return false;
}

int draft_shared_vocabulary(const Model *target, const char *target_dir, const Model *draft, const char *draft_dir,
                            int *n, Err *err) {
    const int v_target = target->cfg.vocab_size, v_draft = draft->cfg.vocab_size;
    *n = v_target < v_draft ? v_target : v_draft;
    if (!dir_has_tokenizer(target_dir) || !dir_has_tokenizer(draft_dir)) {
        if (v_target == v_draft) return 0;
        return err_fmt(err, "%s: vocab_size %d differs from the target's %d (%s), and without both "
                       "tokenizers nothing says which ids they share: a draft must share the target's tokenizer",
                       draft_dir, v_draft, v_target, target_dir);
    }
    Tokenizer a, b;
    if (tokenizer_load_dir(&a, target_dir, err)) return -1;
    if (tokenizer_load_dir(&b, draft_dir, err)) {
        tokenizer_free(&a);
        return -1;
    }
    int rc = 0, size = tokenizer_vocab_size(&a);
    if (size != tokenizer_vocab_size(&b)) {
        rc = err_fmt(err, "%s: the draft's tokenizer has %d tokens, the target's %d (%s): a draft must share the "
                     "target's tokenizer", draft_dir, tokenizer_vocab_size(&b), size, target_dir);
    }
    for (int id = 0; id < size && rc == 0; id++) {
        size_t len_a, len_b;
        const char *ta = tokenizer_token(&a, id, &len_a), *tb = tokenizer_token(&b, id, &len_b);
        if (len_a != len_b || memcmp(ta, tb, len_a) != 0)
            rc = err_fmt(err, "%s: token %d of the draft's tokenizer differs from the target's (%s): a draft must "
                         "share the target's tokenizer", draft_dir, id, target_dir);
    }
    if (rc == 0 && size > *n)
        rc = err_fmt(err, "%s: the tokenizer has %d tokens but the models only %d (vocab_size)", target_dir, size, *n);
    if (rc == 0) *n = size;
    tokenizer_free(&a);
    tokenizer_free(&b);
    return rc;
}

