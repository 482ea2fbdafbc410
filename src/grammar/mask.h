// mask.h — which tokens of a vocabulary a grammar allows next, and the constraint a generation runs under.
//
// A token is allowed when the grammar's state can read all of its bytes (grammar.h): every tokenization of an
// allowed text is allowed, not only the tokenizer's own (as llama.cpp and xgrammar do). An end token (end of text)
// is allowed exactly where the grammar may end; tokens without bytes (special tokens) never are.
//
// The mask is computed against the vocabulary sorted by bytes, so that tokens sharing a prefix share the work of
// reading it (a byte trie walked depth first: the state after each prefix is kept while tokens below it are tried,
// and a refused prefix refuses every token under it at once); the states met are numbered and their transitions by
// byte kept, so that a byte read from a known state costs a lookup; and masks are cached by state: a state seen
// before (inside a string, after each comma) costs a lookup. Inside a bounded repetition, where no state recurs, the
// tokens short enough not to reach its end take the mask of a clamped state that does (LengthBucket below).
#ifndef SPECDEC_GRAMMAR_MASK_H
#define SPECDEC_GRAMMAR_MASK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "grammar/grammar.h"

// Masks cached at most (by state; by clamped state); bytes of the longest token read; distinct states whose
// transitions are kept; length buckets (K = 2, 4, …, 128 bytes).
enum { MASK_CACHE_MAX = 512, MASK_CLAMPED_MAX = 128, MASK_TOKEN_MAX = 256, MASK_STATES_MAX = 1 << 15, MASK_BUCKETS = 7 };

// A vocabulary: token t's bytes are bytes[offset[t] .. offset[t + 1]) (empty: a token no text spells).
typedef struct {
    int V;
    const uint32_t *offset;     // [V + 1]
    const char *bytes;
    const int *end_ids;         // the end-of-text tokens
    int n_end;
} Vocabulary;

typedef struct {
    uint64_t hash;
    GrammarState state;
    uint64_t *bits;             // [words]
} CachedMask;

typedef struct {
    CachedMask *entries;        // [cap]
    int n, cap;
} MaskCache;

// Tokens as a byte trie laid out for one pass in order: sorted by their bytes, each as the bytes it shares with the
// one before and the rest, the rests stored one after another in that order (the walk reads them in sequence, not
// scattered by token id). A prefix's subtree is a run of consecutive tokens; `past` gives where the run of each
// prefix ends, so that a refused prefix is passed over in one step, not token by token.
typedef struct {
    int *order;                 // [n]: the tokens, by their bytes
    uint16_t *shared;           // [n]: bytes order[i] shares with order[i − 1] (0 for i = 0)
    uint32_t *rest;             // [n + 1]: order[i]'s other bytes are rest_bytes[rest[i] .. rest[i + 1])
    unsigned char *rest_bytes;
    // [rest[n]]: for order[i]'s byte at depth d (rest_bytes[rest[i] + d − shared[i]]), the first j > i with
    // shared[j] <= d — the first token that does not begin with order[i]'s first d + 1 bytes (n: none).
    int *past;
    int n;
} TokenTrie;

// Inside a bounded repetition (a string's `char{0,40}`: grammar.h's chain R_40 … R_1) every position is a state of
// its own, so the cache by state never hits. But a token of at most K bytes reads at most K items, so it reads alike
// from a state and from its clamp, where every link R_k with k > K + 1 is replaced by R_{K+1}: the mask of those tokens
// is the clamp's, one state for every position further than K + 1 from the chain's end. Only the longer tokens are
// walked from the state itself.
typedef struct {
    int bytes;                  // K
    int *clamp;                 // [n_elements]: each element, or its counterpart in R_{K+1} for one in R_k, k > K + 1
    uint64_t *short_tokens;     // [words]: the tokens of 1..K bytes (no end token)
    TokenTrie longer;           // the tokens of more than K bytes (up to MASK_TOKEN_MAX)
} LengthBucket;

typedef struct {
    const Grammar *grammar;
    Vocabulary vocab;
    bool *is_end;               // [V]
    int words;                  // (V + 63) / 64
    TokenTrie trie;             // every token with bytes, up to MASK_TOKEN_MAX of them (longer ones are never allowed)
    LengthBucket buckets[MASK_BUCKETS];  // K ascending; only those whose clamp changes some element
    int n_buckets;
    // The states the walks met, each once, with their transitions by byte: reading a byte from a state seen before
    // costs a lookup (inside a string, every ordinary character leads back to the same state).
    GrammarState *states;       // [n_states]
    int16_t (*next)[256];       // [n_states]: the state after each byte; -1: refused; -2: not read yet
    int *slot;                  // [n_slots]: open addressing by hash, state index + 1 (0: empty)
    int n_states, cap_states, n_slots;
    GrammarState scratch, clamped;
    MaskCache cache;            // by state
    MaskCache clamped_cache;    // by clamped state: kept by grammar_masker_forget, like the transitions
    long hits, misses;          // of the cache by state
} GrammarMasker;

int grammar_masker_init(GrammarMasker *m, const Grammar *g, const Vocabulary *vocab, Err *err);
void grammar_masker_free(GrammarMasker *m);

// The tokens allowed after state s: bit t of (*bits)[t / 64]. The words belong to the masker (valid until the next
// call). -1 with err when out of memory.
int grammar_mask(GrammarMasker *m, const GrammarState *s, const uint64_t **bits, Err *err);

// Empties the cache by state (the bench measures masks never seen before by it); the transitions and the clamped
// states' masks stay.
void grammar_masker_forget(GrammarMasker *m);

static inline bool mask_allows(const uint64_t *bits, int token) { return bits[token >> 6] >> (token & 63) & 1; }

// Advances s through token t's bytes (scratch: a state to work in). An end token leaves s as it is and is accepted
// where s may end. false: refused (s may be partly advanced; copy it first to keep it).
bool grammar_accept_token(const GrammarMasker *m, GrammarState *s, int token, GrammarState *scratch);

// ---- the constraint of one generation ---------------------------------------------------------------------------

// The grammar's state after the tokens generated so far ("committed"), and the masks of the texts that continue
// them by a few tokens (a draft's path): what the speculative scheduler asks (speculative.h, SpecParams.constraint).
typedef struct GrammarConstraint {
    GrammarMasker masker;
    GrammarState committed;     // after every committed token
    GrammarState path, scratch; // a path's state, while it is read
    bool committed_end;         // the last committed token was an end token
} GrammarConstraint;

int grammar_constraint_init(GrammarConstraint *c, const Grammar *g, const Vocabulary *vocab, Err *err);
void grammar_constraint_free(GrammarConstraint *c);
// Sets logits[t] = −inf for every token refused after the committed tokens then path[0..n_path). Returns 0, or 1
// and the logits untouched when no token would be left (a path the grammar refuses, or after an end token): a
// draft there has nothing to propose, and the accept step commits nothing from there. -1 with err: nothing
// continues the committed text itself (the grammar needs a character that no token spells), or out of memory.
int grammar_constraint_mask(GrammarConstraint *c, const int *path, int n_path, float *logits, Err *err);
// The one token allowed after the committed tokens then path[0..n_path), where exactly one is and it is no end
// token (the grammar forces it: a draft of probability 1 that needs no model), else −1. -1 also on a refused path.
int grammar_constraint_forced(GrammarConstraint *c, const int *path, int n_path, Err *err);
// The text the grammar forces after the committed tokens then path[0..n_path) — the bytes read one by one while
// exactly one byte is allowed and the text may not end — as tokens, each the longest of the vocabulary that spells
// a beginning of what is left, at most `most` of them. Returns how many (0: fewer than 2 bytes are forced). Unlike
// grammar_constraint_forced's token these need not be the only ones allowed (other tokenizations of the text are):
// drafts that the target still verifies.
int grammar_constraint_forced_text(GrammarConstraint *c, const int *path, int n_path, int *tokens, int most);
// Whether token is allowed after the committed tokens then path[0..n_path).
bool grammar_constraint_allows(GrammarConstraint *c, const int *path, int n_path, int token);
// Commits a token (the scheduler's): -1 with err when the grammar refuses it.
int grammar_constraint_commit(GrammarConstraint *c, int token, Err *err);
// The committed text is a sentence that nothing may extend: generation ends here.
bool grammar_constraint_must_end(const GrammarConstraint *c);

#endif
