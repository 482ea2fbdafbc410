// bytesmap.h — a hash table from byte strings to 64-bit values: open addressing, linear probing, keys hashed with
// xxHash (XXH3) and copied into the table's own storage. The tokenizer keys it by token bytes, by pairs of token
// ids, and by pre-tokenized words; the lookup drafter by n-grams of token ids (drafter.h); the grammar by rule names.
#ifndef SPECDEC_BYTESMAP_H
#define SPECDEC_BYTESMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t hash;     // XXH3 of the key, never 0; 0 marks an empty slot
    uint64_t value;
    uint32_t key_off;  // the key is keys[key_off .. key_off + key_len)
    uint32_t key_len;
} MapSlot;

typedef struct {
    MapSlot *slots;  // [mask + 1], a power of two, at most 3/4 full
    size_t mask;
    size_t count;    // keys stored
    char *keys;      // every key's bytes, back to back
    size_t keys_len, keys_cap;
} BytesMap;

// An empty map; returns -1 if out of memory.
int bytesmap_init(BytesMap *m);
void bytesmap_free(BytesMap *m);

// Forgets every key, keeping the memory for reuse.
void bytesmap_clear(BytesMap *m);

// Looks key[0..len) up: true and *value if present.
bool bytesmap_get(const BytesMap *m, const void *key, size_t len, uint64_t *value);

// Sets the value of key[0..len), replacing an earlier one; returns -1 if out of memory (or a key over 4 GiB of
// keys in all), the map unchanged.
int bytesmap_put(BytesMap *m, const void *key, size_t len, uint64_t value);

#endif
