// bytesmap.c — open-addressing hash table keyed by byte strings (see bytesmap.h).
#include "base/bytesmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

enum { INITIAL_SLOTS = 1024 };

static uint64_t hash_key(const void *key, size_t len) {
    uint64_t h = XXH3_64bits(key, len);
    return h ? h : 1;  // 0 marks an empty slot
}

int bytesmap_init(BytesMap *m) {
    memset(m, 0, sizeof *m);
    m->slots = calloc(INITIAL_SLOTS, sizeof *m->slots);
    if (!m->slots) return -1;
    m->mask = INITIAL_SLOTS - 1;
    return 0;
}

void bytesmap_free(BytesMap *m) {
    free(m->slots);
    free(m->keys);
    memset(m, 0, sizeof *m);
}

void bytesmap_clear(BytesMap *m) {
    memset(m->slots, 0, (m->mask + 1) * sizeof *m->slots);
    m->count = 0;
    m->keys_len = 0;
}

// The slot that holds key (hash h), or the empty slot where it would go.
static MapSlot *find_slot(const BytesMap *m, const void *key, size_t len, uint64_t h) {
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        MapSlot *s = &m->slots[i];
        if (s->hash == 0) return s;
        if (s->hash == h && s->key_len == len && memcmp(m->keys + s->key_off, key, len) == 0) return s;
    }
}

bool bytesmap_get(const BytesMap *m, const void *key, size_t len, uint64_t *value) {
    const MapSlot *s = find_slot(m, key, len, hash_key(key, len));
    if (s->hash == 0) return false;
    *value = s->value;
    return true;
}

// Doubles the number of slots and places every key again.
static int grow_slots(BytesMap *m) {
    size_t n = (m->mask + 1) * 2;
    MapSlot *slots = calloc(n, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i <= m->mask; i++) {
        if (m->slots[i].hash == 0) continue;
        size_t j = m->slots[i].hash & (n - 1);
        while (slots[j].hash != 0) j = (j + 1) & (n - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->mask = n - 1;
    return 0;
}

// Makes room for len more bytes of keys.
static int reserve_keys(BytesMap *m, size_t len) {
    if (len > UINT32_MAX - m->keys_len) return -1;  // key offsets are 32-bit
    if (m->keys_len + len <= m->keys_cap) return 0;
    size_t cap = m->keys_cap ? m->keys_cap : 4096;
    while (cap < m->keys_len + len) cap *= 2;
    char *keys = realloc(m->keys, cap);
    if (!keys) return -1;
    m->keys = keys;
    m->keys_cap = cap;
    return 0;
}

int bytesmap_put(BytesMap *m, const void *key, size_t len, uint64_t value) {
    uint64_t h = hash_key(key, len);
    MapSlot *s = find_slot(m, key, len, h);
    if (s->hash != 0) {
        s->value = value;
        return 0;
    }
    if ((m->count + 1) * 4 > (m->mask + 1) * 3) {
        if (grow_slots(m) < 0) return -1;
        s = find_slot(m, key, len, h);
    }
    if (reserve_keys(m, len) < 0) return -1;
    memcpy(m->keys + m->keys_len, key, len);
    *s = (MapSlot){.hash = h, .value = value, .key_off = (uint32_t)m->keys_len, .key_len = (uint32_t)len};
    m->keys_len += len;
    m->count++;
    return 0;
}
