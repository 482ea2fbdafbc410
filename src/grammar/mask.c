// mask.c — token masks over a vocabulary (mask.h), and the constraint of one generation.
#include "grammar/mask.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void forget_states(GrammarMasker *m);

static int token_len(const Vocabulary *v, int t) { return (int)(v->offset[t + 1] - v->offset[t]); }

static int by_bytes(const void *a, const void *b, void *vocab) {
    const Vocabulary *v = vocab;
    int x = *(const int *)a, y = *(const int *)b, nx = token_len(v, x), ny = token_len(v, y);
    int c = memcmp(v->bytes + v->offset[x], v->bytes + v->offset[y], (size_t)(nx < ny ? nx : ny));
    if (c) return c;
    if (nx != ny) return nx < ny ? -1 : 1;
    return (x > y) - (x < y);
}

// ---- the vocabulary's tries --------------------------------------------------------------------------------------

// t->past, right to left. `after` holds the tokens j > i that no token between i and j shares fewer bytes with its
// predecessor than (the candidates for "the first j > i with shared[j] <= d"), nearest on top, their `shared`
// falling from top to bottom; token i's depths d, from its last byte down to `shared[i]`, find their answer ever
// lower in it. false: out of memory.
static bool trie_past_init(TokenTrie *t) {
    int *after = malloc(((size_t)t->n + 1) * sizeof *after), top = 0;
    if (!after) return false;
    after[0] = t->n;  // the bottom: past the last token, below every depth
    for (int i = t->n - 1; i >= 0; i--) {
        if (i + 1 < t->n) {
            while (top > 0 && t->shared[after[top]] >= t->shared[i + 1]) top--;
            after[++top] = i + 1;
        }
        const int first = (int)t->rest[i], n = t->shared[i] + (int)(t->rest[i + 1] - t->rest[i]);
        for (int d = n - 1, k = top; d >= t->shared[i]; d--) {
            while (k > 0 && t->shared[after[k]] > d) k--;
            t->past[first + d - t->shared[i]] = after[k];
        }
    }
    free(after);
    return true;
}

// The tokens of sorted[0..n) (sorted by their bytes) longer than `longer_than` bytes, in that order, as a trie.
// false: out of memory.
static bool trie_init(TokenTrie *t, const Vocabulary *v, const int *sorted, int n, int longer_than) {
    *t = (TokenTrie){.order = malloc(((size_t)n + 1) * sizeof *t->order),
                     .shared = malloc(((size_t)n + 1) * sizeof *t->shared)};
    if (!t->order || !t->shared) return false;
    for (int i = 0; i < n; i++)
        if (token_len(v, sorted[i]) > longer_than) t->order[t->n++] = sorted[i];
    size_t n_rest = 0;
    for (int i = 0; i < t->n; i++) {
        int k = 0;
        if (i > 0) {
            const char *a = v->bytes + v->offset[t->order[i - 1]], *b = v->bytes + v->offset[t->order[i]];
            int na = token_len(v, t->order[i - 1]), nb = token_len(v, t->order[i]);
            while (k < na && k < nb && a[k] == b[k]) k++;
        }
        t->shared[i] = (uint16_t)k;
        n_rest += (size_t)(token_len(v, t->order[i]) - k);
    }
    t->rest = malloc(((size_t)t->n + 1) * sizeof *t->rest);
    t->rest_bytes = malloc(n_rest + 1);
    t->past = malloc((n_rest + 1) * sizeof *t->past);
    if (!t->rest || !t->rest_bytes || !t->past || n_rest > UINT32_MAX) return false;
    t->rest[0] = 0;
    for (int i = 0; i < t->n; i++) {
        const int tok = t->order[i], len = token_len(v, tok) - t->shared[i];
        memcpy(t->rest_bytes + t->rest[i], v->bytes + v->offset[tok] + t->shared[i], (size_t)len);
        t->rest[i + 1] = t->rest[i] + (uint32_t)len;
    }
    return trie_past_init(t);
}

static void trie_free(TokenTrie *t) {
    free(t->order);
    free(t->shared);
    free(t->rest);
    free(t->rest_bytes);
    free(t->past);
    *t = (TokenTrie){0};
}

// clamp[e]: e, or for an element of a link R_k with k > level its counterpart in R_level (level >= 2, so that R_level
// ends in a reference to its tail as R_k does). A link's tail is written before it, so one pass in the order of the
// rules finds each link's R_level from its tail's. false: out of memory.
static bool clamp_init(const Grammar *g, int level, int *clamp) {
    int *to = malloc(((size_t)g->n_rules + 1) * sizeof *to);  // each rule's counterpart
    if (!to) return false;
    for (int e = 0; e < g->n_elements; e++) clamp[e] = e;
    for (int r = 0; r < g->n_rules; r++) {
        const GrammarRule *rule = &g->rules[r];
        to[r] = rule->repeats_left > level && rule->repeat_tail < r ? to[rule->repeat_tail] : r;
        if (to[r] == r) continue;
        const GrammarRule *counterpart = &g->rules[to[r]];
        for (int a = 0; a < rule->n_alts; a++) {
            const int from = g->alt_start[rule->first_alt + a], onto = g->alt_start[counterpart->first_alt + a];
            for (int k = 0; k == 0 || g->elements[from + k - 1].kind != GRAMMAR_END; k++) clamp[from + k] = onto + k;
        }
    }
    free(to);
    return true;
}

// The buckets K = 2, 4, … whose clamp changes some element: those below the grammar's longest chain less one.
static bool buckets_init(GrammarMasker *m, const int *sorted, int n) {
    const Grammar *g = m->grammar;
    int longest = 0;
    for (int r = 0; r < g->n_rules; r++)
        if (g->rules[r].repeats_left > longest) longest = g->rules[r].repeats_left;
    for (int K = 2; m->n_buckets < MASK_BUCKETS && K + 1 < longest; K *= 2) {
        LengthBucket *b = &m->buckets[m->n_buckets++];
        *b = (LengthBucket){.bytes = K, .clamp = malloc(((size_t)g->n_elements + 1) * sizeof *b->clamp),
                            .short_tokens = calloc((size_t)m->words, sizeof *b->short_tokens)};
        if (!b->clamp || !b->short_tokens || !clamp_init(g, K + 1, b->clamp) ||
            !trie_init(&b->longer, &m->vocab, sorted, n, K))
            return false;
        for (int i = 0; i < n; i++)
            if (token_len(&m->vocab, sorted[i]) <= K) b->short_tokens[sorted[i] >> 6] |= 1ull << (sorted[i] & 63);
    }
    return true;
}

int grammar_masker_init(GrammarMasker *m, const Grammar *g, const Vocabulary *vocab, Err *err) {
    *m = (GrammarMasker){.grammar = g, .vocab = *vocab, .words = (vocab->V + 63) / 64,
                         .cache = {.entries = calloc(MASK_CACHE_MAX, sizeof(CachedMask)), .cap = MASK_CACHE_MAX},
                         .clamped_cache = {.entries = calloc(MASK_CLAMPED_MAX, sizeof(CachedMask)),
                                           .cap = MASK_CLAMPED_MAX}};
    m->is_end = calloc((size_t)vocab->V + 1, sizeof *m->is_end);
    int *sorted = malloc(((size_t)vocab->V + 1) * sizeof *sorted), n_sorted = 0;
    if (!m->is_end || !sorted || !m->cache.entries || !m->clamped_cache.entries) {
        free(sorted);
        return err_fmt(err, "out of memory for the grammar's token masks");
    }
    for (int i = 0; i < vocab->n_end; i++)
        if (vocab->end_ids[i] >= 0 && vocab->end_ids[i] < vocab->V) m->is_end[vocab->end_ids[i]] = true;
    for (int t = 0; t < vocab->V; t++) {
        int n = token_len(vocab, t);
        if (!m->is_end[t] && n > 0 && n <= MASK_TOKEN_MAX) sorted[n_sorted++] = t;
    }
    qsort_r(sorted, (size_t)n_sorted, sizeof *sorted, by_bytes, &m->vocab);
    const bool ok = trie_init(&m->trie, vocab, sorted, n_sorted, 0) && buckets_init(m, sorted, n_sorted);
    free(sorted);
    return ok ? 0 : err_fmt(err, "out of memory for the grammar's token masks");
}

static void cache_empty(MaskCache *c) {
    for (int i = 0; i < c->n; i++) {
        grammar_state_free(&c->entries[i].state);
        free(c->entries[i].bits);
    }
    c->n = 0;
}

void grammar_masker_free(GrammarMasker *m) {
    forget_states(m);
    free(m->states);
    free(m->next);
    free(m->slot);
    grammar_state_free(&m->scratch);
    grammar_state_free(&m->clamped);
    cache_empty(&m->cache);
    cache_empty(&m->clamped_cache);
    free(m->cache.entries);
    free(m->clamped_cache.entries);
    free(m->is_end);
    trie_free(&m->trie);
    for (int b = 0; b < m->n_buckets; b++) {
        free(m->buckets[b].clamp);
        free(m->buckets[b].short_tokens);
        trie_free(&m->buckets[b].longer);
    }
    *m = (GrammarMasker){0};
}

// ---- the states met, and their transitions ------------------------------------------------------------------------

static void forget_states(GrammarMasker *m) {
    for (int i = 0; i < m->n_states; i++) grammar_state_free(&m->states[i]);
    m->n_states = 0;
    if (m->slot) memset(m->slot, 0, (size_t)m->n_slots * sizeof *m->slot);
}

// The slot of state s (hash h) in the index, or the empty one where it would go.
static int state_slot(const GrammarMasker *m, const GrammarState *s, uint64_t h) {
    int mask = m->n_slots - 1, k = (int)(h & (uint64_t)mask);
    while (m->slot[k] && !grammar_state_equal(&m->states[m->slot[k] - 1], s)) k = (k + 1) & mask;
    return k;
}

static bool grow_states(GrammarMasker *m) {
    int cap = m->cap_states ? 2 * m->cap_states : 64;
    GrammarState *states = realloc(m->states, (size_t)cap * sizeof *states);
    if (states) m->states = states;
    int16_t(*next)[256] = realloc(m->next, (size_t)cap * sizeof *next);
    if (next) m->next = next;
    int *slot = calloc((size_t)cap * 2, sizeof *slot);
    if (!states || !next || !slot) {
        free(slot);
        return false;
    }
    free(m->slot);
    m->slot = slot;
    m->n_slots = cap * 2;
    m->cap_states = cap;
    for (int i = 0; i < m->n_states; i++)
        m->slot[state_slot(m, &m->states[i], grammar_state_hash(&m->states[i]))] = i + 1;
    return true;
}

// The number of state s, added if new. -1: out of memory, or MASK_STATES_MAX states already.
static int state_id(GrammarMasker *m, const GrammarState *s) {
    const uint64_t h = grammar_state_hash(s);
    if (m->n_slots) {
        int k = state_slot(m, s, h);
        if (m->slot[k]) return m->slot[k] - 1;
    }
    if (m->n_states == MASK_STATES_MAX || (m->n_states == m->cap_states && !grow_states(m))) return -1;
    GrammarState *copy = &m->states[m->n_states];
    *copy = (GrammarState){0};
    if (grammar_state_copy(copy, s) < 0) return -1;
    for (int b = 0; b < 256; b++) m->next[m->n_states][b] = -2;
    m->slot[state_slot(m, s, h)] = m->n_states + 1;
    return m->n_states++;
}

// The state after reading byte b from state `from`: −1 refused, −3 no room (out of memory, or too many states).
static int step(GrammarMasker *m, int from, unsigned char b) {
    if (m->next[from][b] != -2) return m->next[from][b];
    if (!grammar_advance(&m->states[from], b, &m->scratch)) return m->next[from][b] = -1;
    const int id = state_id(m, &m->scratch);
    if (id < 0) return -3;
    return m->next[from][b] = (int16_t)id;
}

// ---- masks -------------------------------------------------------------------------------------------------------------

// Adds to bits the tokens of trie t that state s allows: tokens in byte order, each read on from the bytes it shares
// with the token before (whose states are kept at depth[0..shared]); a refused byte at depth d refuses every following
// token that shares those d + 1 bytes, passed over at once (`past`). The token read next never shares more than was
// read of the one before (a token sharing more than a refused prefix was passed over), so its bytes before `shared`
// need no reading. −1: no room for the states met (walk_with_room starts afresh).
static int walk(GrammarMasker *m, const TokenTrie *t, const GrammarState *s, uint64_t *bits) {
    int depth[MASK_TOKEN_MAX + 1];  // the state after each prefix of the token being read
    if ((depth[0] = state_id(m, s)) < 0) return -1;
    for (int i = 0; i < t->n;) {
        const unsigned char *rest = t->rest_bytes + t->rest[i];
        const int shared = t->shared[i], n = shared + (int)(t->rest[i + 1] - t->rest[i]);
        int d = shared, next = 0;
        while (d < n && (next = step(m, depth[d], rest[d - shared])) >= 0) depth[++d] = next;
        if (next == -3) return -1;
        if (d == n) {
            const int token = t->order[i++];
            bits[token >> 6] |= 1ull << (token & 63);
        } else {
            i = t->past[t->rest[i] + d - shared];  // past every token that shares the refused prefix
        }
    }
    return 0;
}

// walk, with the states kept from earlier masks while they leave room, else from none.
static int walk_with_room(GrammarMasker *m, const TokenTrie *t, const GrammarState *s, uint64_t *bits) {
    if (m->n_states > MASK_STATES_MAX / 2) forget_states(m);
    if (walk(m, t, s, bits) == 0) return 0;
    forget_states(m);
    return walk(m, t, s, bits);
}

// Some element of s's stacks lies in a link that b's clamp replaces.
static bool clamp_changes(const LengthBucket *b, const GrammarState *s) {
    for (int i = 0; i < s->start[s->n_stacks]; i++)
        if (b->clamp[s->cells[i]] != s->cells[i]) return true;
    return false;
}

static int cached_mask(GrammarMasker *m, MaskCache *c, const GrammarState *s, const uint64_t **bits);

// The mask of state s, computed: through the largest bucket K whose clamp changes s, the clamp's mask (cached) for
// the tokens of at most K bytes and the walk from s for the longer ones; where no clamp changes s, the walk over
// every token. −1: out of memory.
static int compute_mask(GrammarMasker *m, const GrammarState *s, uint64_t *bits) {
    memset(bits, 0, (size_t)m->words * sizeof *bits);
    int b = m->n_buckets - 1;
    while (b >= 0 && !clamp_changes(&m->buckets[b], s)) b--;
    const TokenTrie *walked = &m->trie;
    if (b >= 0) {
        const LengthBucket *bucket = &m->buckets[b];
        const uint64_t *clamped;
        if (grammar_state_map(&m->clamped, s, bucket->clamp) < 0 ||
            cached_mask(m, &m->clamped_cache, &m->clamped, &clamped) < 0)
            return -1;
        for (int w = 0; w < m->words; w++) bits[w] = clamped[w] & bucket->short_tokens[w];
        walked = &bucket->longer;
    }
    if (walk_with_room(m, walked, s, bits) < 0) return -1;
    const Vocabulary *v = &m->vocab;
    if (grammar_may_end(s))
        for (int e = 0; e < v->n_end; e++)
            if (v->end_ids[e] >= 0 && v->end_ids[e] < v->V) bits[v->end_ids[e] >> 6] |= 1ull << (v->end_ids[e] & 63);
    return 0;
}

// The mask of state s from cache c, computed and added on a miss (a full cache is emptied first: states recur
// within a document). The words belong to the cache. −1: out of memory.
static int cached_mask(GrammarMasker *m, MaskCache *c, const GrammarState *s, const uint64_t **bits) {
    const uint64_t h = grammar_state_hash(s);
    for (int i = 0; i < c->n; i++)
        if (c->entries[i].hash == h && grammar_state_equal(&c->entries[i].state, s)) {
            *bits = c->entries[i].bits;
            return 0;
        }
    CachedMask added = {.hash = h, .bits = malloc((size_t)m->words * sizeof *added.bits)};
    // computed from the entry's own copy: s may be m->clamped, which compute_mask overwrites
    if (!added.bits || grammar_state_copy(&added.state, s) < 0 || compute_mask(m, &added.state, added.bits) < 0) {
        free(added.bits);
        grammar_state_free(&added.state);
        return -1;
    }
    if (c->n == c->cap) cache_empty(c);
    c->entries[c->n++] = added;
    *bits = added.bits;
    return 0;
}

void grammar_masker_forget(GrammarMasker *m) { cache_empty(&m->cache); }

int grammar_mask(GrammarMasker *m, const GrammarState *s, const uint64_t **bits, Err *err) {
    const int before = m->cache.n;
    if (cached_mask(m, &m->cache, s, bits) < 0) return err_fmt(err, "out of memory for a grammar's token mask");
    if (m->cache.n == before) m->hits++;
    else m->misses++;
    return 0;
}

bool grammar_accept_token(const GrammarMasker *m, GrammarState *s, int token, GrammarState *scratch) {
    if (token < 0 || token >= m->vocab.V) return false;
    if (m->is_end[token]) return grammar_may_end(s);
    int n = token_len(&m->vocab, token);
    return n > 0 && grammar_accept_bytes(s, m->vocab.bytes + m->vocab.offset[token], (size_t)n, scratch);
}

// ---- the constraint of one generation ---------------------------------------------------------------------------

int grammar_constraint_init(GrammarConstraint *c, const Grammar *g, const Vocabulary *vocab, Err *err) {
    *c = (GrammarConstraint){0};
    if (grammar_masker_init(&c->masker, g, vocab, err) < 0) return -1;
    return grammar_state_init(&c->committed, g, err);
}

void grammar_constraint_free(GrammarConstraint *c) {
    grammar_masker_free(&c->masker);
    grammar_state_free(&c->committed);
    grammar_state_free(&c->path);
    grammar_state_free(&c->scratch);
}

// The state after the committed tokens then path[0..n): c->path. false: the path is refused.
static bool read_path(GrammarConstraint *c, const int *path, int n) {
    if (grammar_state_copy(&c->path, &c->committed) < 0) return false;
    for (int i = 0; i < n; i++) {
        if (c->masker.is_end[path[i]]) return false;  // nothing follows an end token
        if (!grammar_accept_token(&c->masker, &c->path, path[i], &c->scratch)) return false;
    }
    return true;
}

int grammar_constraint_mask(GrammarConstraint *c, const int *path, int n_path, float *logits, Err *err) {
    const int V = c->masker.vocab.V;
    const uint64_t *bits = NULL;
    if (!read_path(c, path, n_path)) return 1;
    if (grammar_mask(&c->masker, &c->path, &bits, err) < 0) return -1;
    bool any = false;
    for (int w = 0; w < c->masker.words && !any; w++) any = bits[w] != 0;
    if (!any && n_path == 0)
        return err_fmt(err, "grammar: no token of the vocabulary continues the text here (the grammar needs a "
                       "character that no token spells, or more room than the grammar's limits)");
    if (!any) return 1;
    for (int t = 0; t < V; t++)
        if (!mask_allows(bits, t)) logits[t] = -INFINITY;
    return 0;
}

int grammar_constraint_forced(GrammarConstraint *c, const int *path, int n_path, Err *err) {
    const uint64_t *bits;
    if (!read_path(c, path, n_path) || grammar_mask(&c->masker, &c->path, &bits, err) < 0) return -1;
    int token = -1;
    for (int w = 0; w < c->masker.words; w++) {
        if (!bits[w]) continue;
        if (token >= 0 || (bits[w] & (bits[w] - 1))) return -1;  // a second allowed token
        token = w * 64 + __builtin_ctzll(bits[w]);
    }
    return token >= 0 && !c->masker.is_end[token] ? token : -1;
}

// The byte that alone may follow state `id` (the text may not end there either), or −1.
static int forced_byte(GrammarMasker *m, int id) {
    if (grammar_may_end(&m->states[id])) return -1;
    int only = -1;
    for (int b = 0; b < 256; b++) {
        const int next = step(m, id, (unsigned char)b);
        if (next == -3 || (next >= 0 && only >= 0)) return -1;
        if (next >= 0) only = b;
    }
    return only;
}

// The token (of the sorted ones) that spells the longest beginning of text[0..n), or −1: for each length, from the
// longest, a binary search among the tokens sorted by bytes.
static int longest_token(const GrammarMasker *m, const unsigned char *text, int n) {
    const Vocabulary *v = &m->vocab;
    const TokenTrie *trie = &m->trie;
    for (int len = n < MASK_TOKEN_MAX ? n : MASK_TOKEN_MAX; len > 0; len--) {
        int a = 0, b = trie->n;  // the first token whose bytes are not below text[0..len)
        while (a < b) {
            const int mid = (a + b) / 2, t = trie->order[mid], nt = token_len(v, t);
            int c = memcmp(v->bytes + v->offset[t], text, (size_t)(nt < len ? nt : len));
            if (c == 0) c = (nt > len) - (nt < len);
            if (c < 0) a = mid + 1;
            else b = mid;
        }
        if (a < trie->n && token_len(v, trie->order[a]) == len && !memcmp(v->bytes + v->offset[trie->order[a]], text, len))
            return trie->order[a];
    }
    return -1;
}

int grammar_constraint_forced_text(GrammarConstraint *c, const int *path, int n_path, int *tokens, int most) {
    GrammarMasker *m = &c->masker;
    unsigned char text[MASK_TOKEN_MAX];
    int n = 0, id, b;
    if (!read_path(c, path, n_path)) return 0;
    if (m->n_states > MASK_STATES_MAX / 2) forget_states(m);
    if ((id = state_id(m, &c->path)) < 0) return 0;
    while (n < MASK_TOKEN_MAX && (b = forced_byte(m, id)) >= 0) {
        text[n++] = (unsigned char)b;
        id = m->next[id][b];
    }
    if (n < 2) return 0;
    int n_tokens = 0;
    for (int at = 0, t; at < n && n_tokens < most && (t = longest_token(m, text + at, n - at)) >= 0; n_tokens++) {
        tokens[n_tokens] = t;
        at += token_len(&m->vocab, t);
    }
    return n_tokens;
}

bool grammar_constraint_allows(GrammarConstraint *c, const int *path, int n_path, int token) {
    return read_path(c, path, n_path) && grammar_accept_token(&c->masker, &c->path, token, &c->scratch);
}

int grammar_constraint_commit(GrammarConstraint *c, int token, Err *err) {
    if (c->masker.is_end[token]) {
        c->committed_end = true;
        return grammar_may_end(&c->committed) ? 0 : err_fmt(err, "grammar: end of text where the grammar may not end");
    }
    if (!grammar_accept_token(&c->masker, &c->committed, token, &c->scratch))
        return err_fmt(err, "grammar: token %d is not allowed here", token);
    return 0;
}

bool grammar_constraint_must_end(const GrammarConstraint *c) {
    return c->committed_end || grammar_must_end(&c->committed);
}
