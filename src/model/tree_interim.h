// tree_interim.h — INTERIM, until the treefwd branch lands (TREES.md's interface): chains only. Removed at merge.
#ifndef SPECDEC_TREE_INTERIM_H
#define SPECDEC_TREE_INTERIM_H
#include "model/model.h"
enum { TREE_MAX_ROWS = 64 };
int model_forward_tree(Model *model, KVCache *cache, const int *tokens, const int *parent, int T, float *logits,
                       Err *err);
void kv_keep_path(KVCache *cache, int base, const int *rows, int n);
#endif
