// recognise.c — the grammar's recogniser (grammar.h): a set of parse stacks advanced one UTF-8 byte at a time.
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"

enum { EXPAND_BUDGET = 1 << 16 };  // rule expansions one character may cost before it is refused as too ambiguous

// GrammarState.partial of a state inside a character whose code point no longer matters (forget_partial).
static const uint32_t PARTIAL_ANY = UINT32_MAX;

// ---- the set of stacks --------------------------------------------------------------------------------------------

static uint32_t stack_hash(const int *cells, int n) {
    uint32_t h = 2166136261u;  // FNV-1a over the cells
    for (int i = 0; i < n; i++) h = (h ^ (uint32_t)cells[i]) * 16777619u;
    return h;
}

static int stack_len(const GrammarState *s, int i) { return s->start[i + 1] - s->start[i]; }

static bool stack_is(const GrammarState *s, int i, const int *cells, int n, uint32_t h) {
    return s->hash[i] == h && stack_len(s, i) == n && memcmp(s->cells + s->start[i], cells, (size_t)n * sizeof *cells) == 0;
}

static void clear(GrammarState *s) {
    if (s->n_slots) memset(s->slot, 0, (size_t)s->n_slots * sizeof *s->slot);
    s->n_stacks = 0;
    s->start[0] = 0;
    s->pending = 0;
    s->partial = 0;
    s->length = 0;
}

static bool reserve(GrammarState *s, int stacks, int cells) {
    if (stacks > s->cap_stacks) {
        int cap = s->cap_stacks * 2 > stacks ? s->cap_stacks * 2 : stacks;
        int *start = realloc(s->start, (size_t)(cap + 1) * sizeof *start);
        if (start) s->start = start;
        uint32_t *hash = realloc(s->hash, (size_t)cap * sizeof *hash);
        if (hash) s->hash = hash;
        if (!start || !hash) return false;
        s->cap_stacks = cap;
    }
    if (cells > s->cap_cells) {
        int cap = s->cap_cells * 2 > cells ? s->cap_cells * 2 : cells;
        int *grown = realloc(s->cells, (size_t)cap * sizeof *grown);
        if (!grown) return false;
        s->cells = grown;
        s->cap_cells = cap;
    }
    return true;
}

// The slot where the stack cells[0..n) of hash h is, or the empty slot where it would go.
static int find_slot(const GrammarState *s, const int *cells, int n, uint32_t h) {
    int mask = s->n_slots - 1, k = (int)(h & (uint32_t)mask);
    while (s->slot[k] && !stack_is(s, s->slot[k] - 1, cells, n, h)) k = (k + 1) & mask;
    return k;
}

// Rebuilds the slots at n_slots (a power of two above the stacks). false: out of memory.
static bool rehash(GrammarState *s, int n_slots) {
    int *slot = calloc((size_t)n_slots + 1, sizeof *slot);
    if (!slot) return false;
    free(s->slot);
    s->slot = slot;
    s->n_slots = n_slots;
    for (int i = 0; i < s->n_stacks; i++)
        s->slot[find_slot(s, s->cells + s->start[i], stack_len(s, i), s->hash[i])] = i + 1;
    return true;
}

// Adds the stack cells[0..n) unless s holds it already. false: more than GRAMMAR_MAX_STACKS, or out of memory.
static bool add_stack(GrammarState *s, const int *cells, int n) {
    uint32_t h = stack_hash(cells, n);
    if (2 * (s->n_stacks + 1) > s->n_slots && !rehash(s, s->n_slots ? 2 * s->n_slots : 16)) return false;
    int k = find_slot(s, cells, n, h);
    if (s->slot[k]) return true;
    if (s->n_stacks == GRAMMAR_MAX_STACKS || s->start[s->n_stacks] + n > GRAMMAR_MAX_CELLS ||
        !reserve(s, s->n_stacks + 1, s->start[s->n_stacks] + n))
        return false;
    s->slot[k] = s->n_stacks + 1;
    memcpy(s->cells + s->start[s->n_stacks], cells, (size_t)n * sizeof *cells);
    s->hash[s->n_stacks] = h;
    s->start[s->n_stacks + 1] = s->start[s->n_stacks] + n;
    s->n_stacks++;
    return true;
}

// Every stack that the stack work[0..n) becomes before it reads a character, added to out: a top that is a rule
// reference is replaced by each of the rule's alternatives (the position after the reference kept below it, unless
// the reference ends its alternative: a tail call), a top that ends its alternative is popped. work has room for
// GRAMMAR_MAX_DEPTH cells; it is as it was on return. false: too deep, too many stacks, or over the budget.
static bool expand(const Grammar *g, int *work, int n, GrammarState *out, int *budget) {
    if (--*budget < 0) return false;
    if (n == 0) return add_stack(out, work, 0);  // the parse is complete
    int at = work[n - 1];
    const GrammarElement *e = &g->elements[at];
    if (e->kind == GRAMMAR_CHARS) return add_stack(out, work, n);
    if (e->kind == GRAMMAR_END) return expand(g, work, n - 1, out, budget);
    int below = n - 1;
    if (g->elements[at + 1].kind != GRAMMAR_END) work[below++] = at + 1;
    if (below >= GRAMMAR_MAX_DEPTH) return false;
    const GrammarRule *rule = &g->rules[e->first];
    bool ok = true;
    for (int a = 0; a < rule->n_alts && ok; a++) {
        work[below] = g->alt_start[rule->first_alt + a];
        ok = expand(g, work, below + 1, out, budget);
    }
    work[n - 1] = at;
    return ok;
}

// ---- characters -----------------------------------------------------------------------------------------------------

// Whether the class element e admits some code point in lo..hi (*some), and every one (*all). Its ranges are
// ascending and apart, so the first range that ends at or after lo is the only one that can cover lo..hi whole, and
// the one to meet it.
static void class_admits(const Grammar *g, const GrammarElement *e, uint32_t lo, uint32_t hi, bool *some, bool *all) {
    if (e->negated && lo >= GRAMMAR_MARKER_BASE) {  // a marker: only a class that names it admits it (grammar.h)
        *some = *all = false;
        return;
    }
    const GrammarRange *r = g->ranges + e->first;
    int a = 0, b = e->n;  // binary search: the first range with r.hi >= lo
    while (a < b) {
        int mid = (a + b) / 2;
        if (r[mid].hi < lo) a = mid + 1;
        else b = mid;
    }
    bool meets = a < e->n && r[a].lo <= hi;
    bool covers = a < e->n && r[a].lo <= lo && hi <= r[a].hi;
    *some = e->negated ? !covers : meets;
    *all = e->negated ? !meets : covers;
}

static bool class_meets(const Grammar *g, const GrammarElement *e, uint32_t lo, uint32_t hi) {
    bool some, all;
    class_admits(g, e, lo, hi, &some, &all);
    return some;
}

static int top(const GrammarState *s, int i) { return s->cells[s->start[i + 1] - 1]; }

// Some stack can read a character in lo..hi next.
static bool some_stack_meets(const GrammarState *s, uint32_t lo, uint32_t hi) {
    for (int i = 0; i < s->n_stacks; i++)
        if (stack_len(s, i) > 0 && class_meets(s->grammar, &s->grammar->elements[top(s, i)], lo, hi)) return true;
    return false;
}

static void swap(GrammarState *a, GrammarState *b) {
    GrammarState t = *a;
    *a = *b;
    *b = t;
}

// Reads a character in lo..hi: every stack of s whose top admits one moves past it (and is expanded) into out. Where
// lo < hi, every stack of s that admits one admits them all (a state whose partial character is PARTIAL_ANY).
static bool read_char(const GrammarState *s, uint32_t lo, uint32_t hi, GrammarState *out) {
    const Grammar *g = s->grammar;
    int work[GRAMMAR_MAX_DEPTH], budget = EXPAND_BUDGET;
    out->grammar = g;
    if (!reserve(out, 1, 1)) return false;
    clear(out);
    for (int i = 0; i < s->n_stacks; i++) {
        int n = stack_len(s, i);
        if (n == 0 || !class_meets(g, &g->elements[top(s, i)], lo, hi)) continue;
        memcpy(work, s->cells + s->start[i], (size_t)n * sizeof *work);
        work[n - 1]++;
        if (!expand(g, work, n, out, &budget)) return false;
    }
    return out->n_stacks > 0;
}

// The code points that a character of `length` bytes whose first bytes gave the bits `partial`, `pending` bytes still
// to come, can be: lo..hi, within what UTF-8 may encode in that length. false: none (an overlong form, a surrogate,
// or beyond U+10FFFF).
static bool partial_range(uint32_t partial, int pending, int length, uint32_t *lo, uint32_t *hi) {
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
    *lo = partial << (6 * pending);
    *hi = *lo | ((1u << (6 * pending)) - 1);
    if (*lo < least[length]) *lo = least[length];
    if (*hi > 0x10FFFF) *hi = 0x10FFFF;
    if (*lo >= 0xD800 && *hi <= 0xDFFF) return false;
    return *lo <= *hi;
}

// Every stack's top admits either all of lo..hi or none of it: then which of them the character turns out to be does
// not matter to what follows.
static bool all_or_none(const GrammarState *s, uint32_t lo, uint32_t hi) {
    for (int i = 0; i < s->n_stacks; i++) {
        if (stack_len(s, i) == 0) continue;
        bool some, all;
        class_admits(s->grammar, &s->grammar->elements[top(s, i)], lo, hi, &some, &all);
        if (some && !all) return false;
    }
    return true;
}

// The state within a character whose code point no longer matters (all_or_none): s's stacks that admit lo..hi,
// the character's bytes read forgotten, so that every such state with as many bytes still to come is one.
static bool forget_partial(const GrammarState *s, uint32_t lo, uint32_t hi, int pending, GrammarState *out) {
    out->grammar = s->grammar;
    if (!reserve(out, 1, 1)) return false;
    clear(out);
    for (int i = 0; i < s->n_stacks; i++)
        if (stack_len(s, i) > 0 && class_meets(s->grammar, &s->grammar->elements[top(s, i)], lo, hi) &&
            !add_stack(out, s->cells + s->start[i], stack_len(s, i)))
            return false;
    out->partial = PARTIAL_ANY;
    out->pending = pending;
    return true;
}

bool grammar_advance(const GrammarState *s, unsigned char byte, GrammarState *out) {
    if (s->pending == 0 && byte < 0x80) return read_char(s, byte, byte, out);
    if (s->pending == 0 && byte >= GRAMMAR_MARKER_BYTE) {  // a referenced token's byte: its marker (grammar.h)
        const uint32_t marker = GRAMMAR_MARKER_BASE + (uint32_t)(byte - GRAMMAR_MARKER_BYTE);
        return read_char(s, marker, marker, out);
    }
    if (s->partial == PARTIAL_ANY) {  // any continuation byte: the stacks left admit every character it can finish
        if ((byte & 0xC0) != 0x80) return false;
        if (s->pending == 1) return read_char(s, 0, 0x10FFFF, out);
        if (grammar_state_copy(out, s) < 0) return false;
        out->pending = s->pending - 1;
        return true;
    }
    uint32_t partial;
    int pending, length = s->length;
    if (s->pending == 0) {
        if (byte >= 0xC2 && byte <= 0xDF) length = 2;
        else if (byte >= 0xE0 && byte <= 0xEF) length = 3;
        else if (byte >= 0xF0 && byte <= 0xF4) length = 4;
        else return false;
        pending = length - 1;
        partial = byte & (0x7Fu >> length);
    } else {
        if ((byte & 0xC0) != 0x80) return false;
        partial = (s->partial << 6) | (byte & 0x3F);
        pending = s->pending - 1;
    }
    uint32_t lo, hi;
    if (!partial_range(partial, pending, length, &lo, &hi) || !some_stack_meets(s, lo, hi)) return false;
    if (pending == 0) return read_char(s, lo, lo, out);
    if (s->pending != 0 && all_or_none(s, lo, hi)) return forget_partial(s, lo, hi, pending, out);
    if (grammar_state_copy(out, s) < 0) return false;
    out->partial = partial;
    out->pending = pending;
    out->length = length;
    return true;
}

bool grammar_accept_byte(GrammarState *s, unsigned char byte, GrammarState *next) {
    if (!grammar_advance(s, byte, next)) return false;
    swap(s, next);
    return true;
}

bool grammar_accept_bytes(GrammarState *s, const char *text, size_t n, GrammarState *next) {
    for (size_t i = 0; i < n; i++)
        if (!grammar_accept_byte(s, (unsigned char)text[i], next)) return false;
    return true;
}

// ---- the state as a whole -------------------------------------------------------------------------------------------

int grammar_state_init(GrammarState *s, const Grammar *g, Err *err) {
    if (!s->cells) *s = (GrammarState){0};
    s->grammar = g;
    if (!reserve(s, 16, 64)) return err_fmt(err, "grammar: out of memory");
    clear(s);
    int work[GRAMMAR_MAX_DEPTH], budget = EXPAND_BUDGET;
    const GrammarRule *root = &g->rules[g->root];
    for (int a = 0; a < root->n_alts; a++) {
        work[0] = g->alt_start[root->first_alt + a];
        if (!expand(g, work, 1, s, &budget))
            return err_fmt(err, "grammar: rule '%s' opens more than %d parses or nests deeper than %d rules",
                           root->name, GRAMMAR_MAX_STACKS, GRAMMAR_MAX_DEPTH);
    }
    return 0;
}

void grammar_state_free(GrammarState *s) {
    free(s->slot);
    free(s->start);
    free(s->cells);
    free(s->hash);
    *s = (GrammarState){0};
}

int grammar_state_copy(GrammarState *dst, const GrammarState *src) {
    if (!dst->start) *dst = (GrammarState){0};
    if (!reserve(dst, src->n_stacks > 0 ? src->n_stacks : 1, src->start[src->n_stacks] + 1)) return -1;
    dst->grammar = src->grammar;
    dst->n_stacks = src->n_stacks;
    memcpy(dst->start, src->start, (size_t)(src->n_stacks + 1) * sizeof *dst->start);
    memcpy(dst->cells, src->cells, (size_t)src->start[src->n_stacks] * sizeof *dst->cells);
    memcpy(dst->hash, src->hash, (size_t)src->n_stacks * sizeof *dst->hash);
    if (dst->n_slots != src->n_slots && !rehash(dst, src->n_slots)) return -1;
    if (src->n_slots) memcpy(dst->slot, src->slot, (size_t)src->n_slots * sizeof *dst->slot);
    dst->partial = src->partial;
    dst->pending = src->pending;
    dst->length = src->length;
    return 0;
}

bool grammar_may_end(const GrammarState *s) {
    if (s->pending) return false;
    for (int i = 0; i < s->n_stacks; i++)
        if (stack_len(s, i) == 0) return true;
    return false;
}

bool grammar_recognises(const Grammar *g, const char *text, size_t n) {
    GrammarState s = {0}, next = {0};
    bool ok = grammar_state_init(&s, g, NULL) == 0 && grammar_accept_bytes(&s, text, n, &next) && grammar_may_end(&s);
    grammar_state_free(&s);
    grammar_state_free(&next);
    return ok;
}

bool grammar_must_end(const GrammarState *s) { return grammar_may_end(s) && s->n_stacks == 1; }

uint64_t grammar_state_hash(const GrammarState *s) {
    uint64_t h = 0;
    for (int i = 0; i < s->n_stacks; i++) h += (uint64_t)s->hash[i] * 0x9E3779B97F4A7C15ull;  // order does not matter
    return h ^ ((uint64_t)s->partial << 40) ^ ((uint64_t)s->pending << 36) ^ ((uint64_t)s->length << 32);
}

bool grammar_state_equal(const GrammarState *a, const GrammarState *b) {
    if (a->n_stacks != b->n_stacks || a->partial != b->partial || a->pending != b->pending || a->length != b->length)
        return false;
    for (int i = 0; i < a->n_stacks; i++)
        if (!b->slot[find_slot(b, a->cells + a->start[i], stack_len(a, i), a->hash[i])]) return false;
    return true;
}

int grammar_state_map(GrammarState *dst, const GrammarState *src, const int *map) {
    int work[GRAMMAR_MAX_DEPTH];
    dst->grammar = src->grammar;
    if (!reserve(dst, 1, 1)) return -1;
    clear(dst);
    for (int i = 0; i < src->n_stacks; i++) {
        const int n = stack_len(src, i), *cells = src->cells + src->start[i];
        for (int k = 0; k < n; k++) work[k] = map[cells[k]];
        if (!add_stack(dst, work, n)) return -1;
    }
    dst->partial = src->partial;
    dst->pending = src->pending;
    dst->length = src->length;
    return 0;
}
