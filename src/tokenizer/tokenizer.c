// tokenizer.c — encoding, decoding and streaming decoding with a loaded Tokenizer (see tokenizer.h; loading is
// in tokenizer_load.c).
//
// Encoding one pre-tokenized piece (BPE). The piece starts as one symbol per byte (byte level) or per character
// (SentencePiece style: the character's token, else its bytes' <0xNN> tokens, else the unknown token), kept in a
// doubly linked list. Every adjacent pair that has a merge is a candidate in a min-heap ordered by (merge rank, position). The
// loop pops the best candidate, skips it if either symbol has changed since it was pushed, else merges the pair
// into its left symbol and pushes the two new pairs that the merge creates. This is the classic "merge the pair
// of lowest rank, leftmost first, until none is left" in O(n log n) for a piece of n bytes, instead of O(n²).
// Pieces repeat a lot in real text, so each call keeps a cache from piece to ids.
//
// Before BPE, each stretch of text between added tokens goes through the pipeline's steps (pipeline.h): run_steps
// applies step k to its input and hands what comes out — one string, or the pieces of a SPLIT — to step k + 1,
// and the pieces that pass the last step to BPE. Each step has its own scratch buffers, so that nothing is copied
// that a step does not change.
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"
#include "base/utf8.h"

enum { CACHE_WORDS = 1 << 16 };  // the cache is emptied when it holds this many pieces

typedef struct {
    int id;          // token id; -1 once merged into its left neighbour
    int prev, next;  // neighbours in the list, -1 at the ends
} Symbol;

typedef struct {
    uint32_t rank;                       // merge priority: lower first
    int left;                            // position of the pair's left symbol
    int left_id, right_id, merged_id;    // the pair as it was when pushed, and what it becomes
} Candidate;

// A piece of a SPLIT step's input: bytes [start, end).
typedef struct {
    size_t start, end;
    bool match;  // a match of the SPLIT's pattern, else text between matches
} Range;

// One step's scratch: the text it made (NFC, PREPEND, REPLACE), the pieces it cut (SPLIT).
typedef struct {
    char *text;
    size_t text_cap;
    Range *pieces;
    size_t n_pieces, pieces_cap;
} StepScratch;

// The working state of one tokenizer_encode call.
typedef struct {
    const Tokenizer *tok;
    StepScratch *scratch;     // [pipeline.n_steps]
    pcre2_match_data *match;  // for the SPLIT steps' regular expressions
    pcre2_match_context *match_context;
    pcre2_jit_stack *jit_stack;
    Err *err;                 // where the steps' failures are told
    int *ids;                 // the output so far
    size_t n_ids, ids_cap;
    Symbol *sym;              // [piece length] the piece being merged
    size_t sym_cap;
    Candidate *heap;          // min-heap of candidate merges
    size_t heap_len, heap_cap;
    BytesMap cache;           // piece bytes → offset in cache_ids << 32 | number of ids
    int *cache_ids;
    size_t cache_len, cache_cap;
} Encoder;

// Makes the array *pbuf (elements of elem bytes, capacity *cap) hold at least n elements, doubling its size;
// pbuf is the address of the array pointer. Returns -1 if out of memory, the array unchanged.
static int reserve(void *pbuf, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return 0;
    size_t new_cap = *cap ? *cap : 64;
    while (new_cap < n) new_cap *= 2;
    void **buf = pbuf;
    void *bigger = realloc(*buf, new_cap * elem);
    if (!bigger) return -1;
    *buf = bigger;
    *cap = new_cap;
    return 0;
}

// Appends ids[0..n) to the output.
static int emit(Encoder *enc, const int *ids, size_t n) {
    if (reserve(&enc->ids, &enc->ids_cap, enc->n_ids + n, sizeof *enc->ids) < 0) return -1;
    memcpy(enc->ids + enc->n_ids, ids, n * sizeof *ids);
    enc->n_ids += n;
    return 0;
}

// True if candidate a is to be merged before b: lower rank, then further left.
static bool before(const Candidate *a, const Candidate *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

// Pushes the pair that starts at symbol `left`, if it has a right neighbour and a merge.
static int push_pair(Encoder *enc, int left) {
    int right = enc->sym[left].next;
    if (right < 0) return 0;
    uint32_t pair[2] = {(uint32_t)enc->sym[left].id, (uint32_t)enc->sym[right].id};
    uint64_t merge;
    if (!bytesmap_get(&enc->tok->merges, pair, sizeof pair, &merge)) return 0;
    if (reserve(&enc->heap, &enc->heap_cap, enc->heap_len + 1, sizeof *enc->heap) < 0) return -1;
    Candidate c = {(uint32_t)(merge >> 32), left, enc->sym[left].id, enc->sym[right].id, (int)(uint32_t)merge};
    size_t i = enc->heap_len++;
    while (i > 0 && before(&c, &enc->heap[(i - 1) / 2])) {  // sift up
        enc->heap[i] = enc->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    enc->heap[i] = c;
    return 0;
}

// Removes and returns the best candidate (the heap is not empty).
static Candidate pop_pair(Encoder *enc) {
    Candidate top = enc->heap[0], last = enc->heap[--enc->heap_len];
    size_t i = 0, n = enc->heap_len;
    for (;;) {  // sift `last` down from the root
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && before(&enc->heap[child + 1], &enc->heap[child])) child++;
        if (!before(&enc->heap[child], &last)) break;
        enc->heap[i] = enc->heap[child];
        i = child;
    }
    if (n > 0) enc->heap[i] = last;
    return top;
}

// Appends symbol `id` to the piece's list of n symbols.
static void add_symbol(Encoder *enc, int *n, int id) {
    enc->sym[*n] = (Symbol){id, *n - 1, -1};
    if (*n > 0) enc->sym[*n - 1].next = *n;
    (*n)++;
}

// The symbols where SentencePiece-style BPE starts: one per character, the character's token, else its bytes'
// <0xNN> tokens (byte_fallback), else the unknown token (once for a run of them with fuse_unk), else nothing.
static int character_symbols(Encoder *enc, const unsigned char *piece, size_t len) {
    const Tokenizer *tok = enc->tok;
    int n = 0;
    bool after_unk = false;
    for (size_t i = 0; i < len;) {
        size_t k = 1;
        while (i + k < len && (piece[i + k] & 0xC0) == 0x80) k++;  // the character's continuation bytes
        uint64_t id;
        bool fallback = tok->byte_fallback_enabled;
        for (size_t b = 0; b < k && fallback; b++) fallback = tok->byte_fallback[piece[i + b]] >= 0;
        if (bytesmap_get(&tok->vocab, piece + i, k, &id)) {
            add_symbol(enc, &n, (int)id);
            after_unk = false;
        } else if (fallback) {
            for (size_t b = 0; b < k; b++) add_symbol(enc, &n, tok->byte_fallback[piece[i + b]]);
            after_unk = false;
        } else if (tok->unk_id >= 0) {
            if (!(tok->fuse_unk && after_unk)) add_symbol(enc, &n, tok->unk_id);
            after_unk = true;
        }
        i += k;
    }
    return n;
}

// Byte-pair encodes piece[0..len) and appends its ids to the output.
static int bpe(Encoder *enc, const unsigned char *piece, size_t len) {
    const Tokenizer *tok = enc->tok;
    uint64_t whole;
    if (tok->ignore_merges && bytesmap_get(&tok->vocab, piece, len, &whole)) {
        int id = (int)whole;
        return emit(enc, &id, 1);
    }
    if (len > INT32_MAX) return -1;
    if (reserve(&enc->sym, &enc->sym_cap, len, sizeof *enc->sym) < 0) return -1;
    int n = 0;
    if (tok->byte_level)
        for (size_t i = 0; i < len; i++) add_symbol(enc, &n, tok->byte_id[piece[i]]);
    else
        n = character_symbols(enc, piece, len);
    if (n == 0) return 0;
    enc->heap_len = 0;
    for (int i = 0; i + 1 < n; i++)
        if (push_pair(enc, i) < 0) return -1;
    while (enc->heap_len > 0) {
        Candidate c = pop_pair(enc);
        Symbol *left = &enc->sym[c.left];
        if (left->id != c.left_id || left->next < 0 || enc->sym[left->next].id != c.right_id) continue;  // stale
        Symbol *right = &enc->sym[left->next];
        left->id = c.merged_id;
        left->next = right->next;
        if (right->next >= 0) enc->sym[right->next].prev = c.left;
        right->id = -1;
        if ((left->prev >= 0 && push_pair(enc, left->prev) < 0) || push_pair(enc, c.left) < 0) return -1;
    }
    for (int i = 0; i >= 0; i = enc->sym[i].next)
        if (emit(enc, &enc->sym[i].id, 1) < 0) return -1;
    return 0;
}

// Encodes one pre-tokenized piece, through the cache.
static int encode_piece(Encoder *enc, const char *piece, size_t len) {
    uint64_t hit;
    if (bytesmap_get(&enc->cache, piece, len, &hit)) return emit(enc, enc->cache_ids + (hit >> 32), (uint32_t)hit);
    size_t first = enc->n_ids;
    if (bpe(enc, (const unsigned char *)piece, len) < 0) return -1;
    size_t n = enc->n_ids - first;
    if (n == 0) return 0;  // (characters without tokens, dropped: nothing to cache, and ids may still be NULL)
    if (enc->cache.count >= CACHE_WORDS) {
        bytesmap_clear(&enc->cache);
        enc->cache_len = 0;
    }
    if (enc->cache_len + n > UINT32_MAX ||
        reserve(&enc->cache_ids, &enc->cache_cap, enc->cache_len + n, sizeof *enc->cache_ids) < 0)
        return -1;
    memcpy(enc->cache_ids + enc->cache_len, enc->ids + first, n * sizeof *enc->ids);
    if (bytesmap_put(&enc->cache, piece, len, (uint64_t)enc->cache_len << 32 | n) < 0) return -1;
    enc->cache_len += n;
    return 0;
}

static int run_steps(Encoder *enc, int k, const char *s, size_t len, bool at_start);

// NFC: canonical decomposition, then canonical composition (utf8proc), of each run of non-ASCII characters with
// the ASCII character before it. The text may be cut before any ASCII character: it is a starter (combining class
// 0, so reordering never crosses it) and never the second of a composition, so nothing before it changes what
// becomes of it or after it. ASCII runs are already NFC and are copied.
static int step_nfc(Encoder *enc, int k, const char *s, size_t len, bool at_start) {
    size_t ascii = 0;
    while (ascii < len && (unsigned char)s[ascii] < 0x80) ascii++;
    if (ascii == len) return run_steps(enc, k + 1, s, len, at_start);
    StepScratch *sc = &enc->scratch[k];
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t run = i;  // ASCII from i to run, then non-ASCII to end
        while (run < len && (unsigned char)s[run] < 0x80) run++;
        size_t end = run;
        while (end < len && (unsigned char)s[end] >= 0x80) end++;
        size_t from = run > i ? run - 1 : run;  // the ASCII character before the run goes with it
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t n = end > run ? utf8proc_map((const utf8proc_uint8_t *)s + from, (utf8proc_ssize_t)(end - from),
                                                      &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE)
                                       : 0;
        if (n < 0 || reserve(&sc->text, &sc->text_cap, o + (run - i) + (size_t)n, 1) < 0) {
            free(nfc);
            return err_fmt(enc->err, "text: out of memory normalizing %zu bytes", len);
        }
        size_t copy = end > run ? from - i : run - i;  // the ASCII not normalized with the run
        memcpy(sc->text + o, s + i, copy);
        o += copy;
        if (n > 0) memcpy(sc->text + o, nfc, (size_t)n);
        o += (size_t)n;
        free(nfc);
        i = end;
    }
    return run_steps(enc, k + 1, sc->text, o, at_start);
}

static int step_prepend(Encoder *enc, int k, const char *s, size_t len, bool at_start) {
    const Step *st = &enc->tok->pipeline.steps[k];
    bool present = len >= st->text_len && memcmp(s, st->text, st->text_len) == 0;
    if ((st->unless_present && present) || (st->only_at_start && !at_start))
        return run_steps(enc, k + 1, s, len, at_start);
    StepScratch *sc = &enc->scratch[k];
    if (reserve(&sc->text, &sc->text_cap, st->text_len + len, 1) < 0)
        return err_fmt(enc->err, "text: out of memory encoding %zu bytes", len);
    memcpy(sc->text, st->text, st->text_len);
    memcpy(sc->text + st->text_len, s, len);
    return run_steps(enc, k + 1, sc->text, st->text_len + len, at_start);
}

static int step_replace(Encoder *enc, int k, const char *s, size_t len, bool at_start) {
    const Step *st = &enc->tok->pipeline.steps[k];
    const char *hit = memmem(s, len, st->text, st->text_len);
    if (!hit) return run_steps(enc, k + 1, s, len, at_start);
    StepScratch *sc = &enc->scratch[k];
    if (reserve(&sc->text, &sc->text_cap, len + len / st->text_len * st->with_len, 1) < 0)
        return err_fmt(enc->err, "text: out of memory encoding %zu bytes", len);
    size_t o = 0;
    for (const char *from = s, *end = s + len; from < end; hit = memmem(from, (size_t)(end - from), st->text,
                                                                         st->text_len)) {
        size_t keep = (size_t)((hit ? hit : end) - from);
        memcpy(sc->text + o, from, keep);
        o += keep;
        from += keep;
        if (!hit) break;
        memcpy(sc->text + o, st->with, st->with_len);
        o += st->with_len;
        from += st->text_len;
    }
    return run_steps(enc, k + 1, sc->text, o, at_start);
}

// Appends a piece [start, end) to the step's list, marked as a match of the pattern or not.
static int add_piece(StepScratch *sc, size_t start, size_t end, bool match) {
    if (reserve(&sc->pieces, &sc->pieces_cap, sc->n_pieces + 1, sizeof *sc->pieces) < 0) return -1;
    sc->pieces[sc->n_pieces++] = (Range){start, end, match};
    return 0;
}

// The matches of the step's pattern in s[0..len) and the text between them, in order: they tile s.
static int find_matches(Encoder *enc, int k, const char *s, size_t len) {
    const Step *st = &enc->tok->pipeline.steps[k];
    StepScratch *sc = &enc->scratch[k];
    sc->n_pieces = 0;
    size_t prev = 0;  // the end of the last match
    for (size_t pos = 0; pos < len;) {
        int rc = pcre2_match(st->regex, (PCRE2_SPTR)s, len, pos, PCRE2_NO_UTF_CHECK, enc->match,
                             enc->match_context);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return err_fmt(enc->err, "text: the pre-tokenizer's regular expression failed: %s", (const char *)msg);
        }
        const PCRE2_SIZE *m = pcre2_get_ovector_pointer(enc->match);
        if ((m[0] > prev && add_piece(sc, prev, m[0], false) < 0) || (m[1] > m[0] && add_piece(sc, m[0], m[1], true) < 0))
            return err_fmt(enc->err, "text: out of memory encoding %zu bytes", len);
        prev = pos = m[1];
        if (m[1] == m[0])  // an empty match: go on from the next character
            for (pos++; pos < len && ((unsigned char)s[pos] & 0xC0) == 0x80;) pos++;
    }
    if (prev < len && add_piece(sc, prev, len, false) < 0)
        return err_fmt(enc->err, "text: out of memory encoding %zu bytes", len);
    return 0;
}

// Turns the list of matches and gaps into the pieces that the split behavior keeps (pipeline.h), in place.
static void apply_behavior(const Step *st, StepScratch *sc) {
    Range *r = sc->pieces;
    size_t n = sc->n_pieces, w = 0;
    for (size_t i = 0; i < n; i++) r[i].match ^= st->invert;
    bool prev_match = false;
    switch (st->behavior) {
    case SPLIT_ISOLATED: return;
    case SPLIT_REMOVED:
        for (size_t i = 0; i < n; i++)
            if (!r[i].match) r[w++] = r[i];
        break;
    case SPLIT_MERGED_WITH_PREVIOUS:  // a match joins the piece before it
    case SPLIT_CONTIGUOUS:            // a match joins a match before it
        for (size_t i = 0; i < n; i++) {
            bool join = st->behavior == SPLIT_CONTIGUOUS ? r[i].match == prev_match : r[i].match && !prev_match;
            prev_match = r[i].match;
            if (join && w > 0) r[w - 1].end = r[i].end;
            else r[w++] = r[i];
        }
        break;
    case SPLIT_MERGED_WITH_NEXT: {  // a match joins the piece after it: the same from the end
        size_t first = n;
        for (size_t i = n; i-- > 0;) {
            bool join = r[i].match && !prev_match;
            prev_match = r[i].match;
            if (join && first < n) r[first].start = r[i].start;
            else r[--first] = r[i];
        }
        memmove(r, r + first, (n - first) * sizeof *r);
        w = n - first;
        break;
    }
    }
    sc->n_pieces = w;
}

static int step_split(Encoder *enc, int k, const char *s, size_t len, bool at_start) {
    const Step *st = &enc->tok->pipeline.steps[k];
    if (!st->regex) {  // GPT-2's pattern, every piece a match (Isolated)
        for (size_t pos = 0, end; pos < len; pos = end) {
            end = pretokenize_next(s, len, pos);
            if (run_steps(enc, k + 1, s + pos, end - pos, at_start && pos == 0) < 0) return -1;
        }
        return 0;
    }
    if (find_matches(enc, k, s, len) < 0) return -1;
    StepScratch *sc = &enc->scratch[k];
    apply_behavior(st, sc);
    for (size_t i = 0; i < sc->n_pieces; i++)
        if (run_steps(enc, k + 1, s + sc->pieces[i].start, sc->pieces[i].end - sc->pieces[i].start,
                      at_start && sc->pieces[i].start == 0) < 0)
            return -1;
    return 0;
}

// Applies steps k, k + 1, ... to s[0..len) (at_start: s begins the input text) and encodes the pieces that come
// out of the last one. Empty pieces vanish.
static int run_steps(Encoder *enc, int k, const char *s, size_t len, bool at_start) {
    if (len == 0) return 0;
    if (k == enc->tok->pipeline.n_steps) {
        size_t start = 0;  // with split_words, the word being cut out of s
        for (size_t i = 1; enc->tok->split_words && i + 3 <= len; i++)
            if (memcmp(s + i, WORD_START, 3) == 0 && (i < 3 || memcmp(s + i - 3, WORD_START, 3) != 0)) {
                if (encode_piece(enc, s + start, i - start) < 0) return err_fmt(enc->err, "text: out of memory");
                start = i;
            }
        if (encode_piece(enc, s + start, len - start) < 0) return err_fmt(enc->err, "text: out of memory");
        return 0;
    }
    switch (enc->tok->pipeline.steps[k].kind) {
    case STEP_NFC: return step_nfc(enc, k, s, len, at_start);
    case STEP_PREPEND: return step_prepend(enc, k, s, len, at_start);
    case STEP_REPLACE: return step_replace(enc, k, s, len, at_start);
    default: return step_split(enc, k, s, len, at_start);
    }
}

enum { NOT_SEARCHED = SIZE_MAX - 1, NOWHERE = SIZE_MAX };

// Where special tokens may match: nowhere unless allow; with from_data, only over bytes whose from_data is 0.
typedef struct {
    bool allow;
    const unsigned char *from_data;  // [len] or NULL
} Special;

// Whether a special token may match text[at..at + n): with allow_special, where no byte comes from data.
static bool special_allowed(const Special *sp, size_t at, size_t n) {
    if (!sp->allow) return false;
    for (size_t i = 0; sp->from_data && i < n; i++)
        if (sp->from_data[at + i]) return false;
    return true;
}

// The first occurrence of added token a in text[pos..len) that may match (see special_allowed), or NOWHERE.
static size_t find_added(const AddedToken *a, const Special *sp, const char *text, size_t len, size_t pos) {
    while (pos < len) {
        const char *found = memmem(text + pos, len - pos, a->text, a->len);
        if (!found) return NOWHERE;
        size_t at = (size_t)(found - text);
        if (!a->special || special_allowed(sp, at, a->len)) return at;
        pos = at + 1;
    }
    return NOWHERE;
}

// Finds the first added token in text[pos..len) (the longest one among those starting there) that applies:
// special ones only as sp allows. Returns it, with its offset in *at, or NULL if there is none. hit[i] keeps
// where token i occurs next (NOWHERE, or NOT_SEARCHED at first), so that each token's search moves only forward.
static const AddedToken *next_added(const Tokenizer *tok, const Special *sp, const char *text, size_t len,
                                    size_t pos, size_t *hit, size_t *at) {
    const AddedToken *best = NULL;
    for (int i = 0; i < tok->n_added; i++) {
        const AddedToken *a = &tok->added[i];
        if (a->special && !sp->allow) continue;
        if (hit[i] == NOT_SEARCHED || hit[i] < pos) hit[i] = find_added(a, sp, text, len, pos);
        if (hit[i] == NOWHERE) continue;
        if (!best || hit[i] < *at || (hit[i] == *at && a->len > best->len)) {
            best = a;
            *at = hit[i];
        }
    }
    return best;
}

// Sets up the encoder's scratch for the tokenizer's steps; -1 when out of memory.
static int encoder_init(Encoder *enc, const Tokenizer *tok, Err *err) {
    *enc = (Encoder){.tok = tok, .err = err};
    enc->scratch = calloc((size_t)tok->pipeline.n_steps + 1, sizeof *enc->scratch);
    if (!enc->scratch || bytesmap_init(&enc->cache) < 0) return -1;
    if (!tok->pipeline.has_regex) return 0;
    enc->match = pcre2_match_data_create(16, NULL);
    enc->match_context = pcre2_match_context_create(NULL);
    enc->jit_stack = pcre2_jit_stack_create(32 << 10, 1 << 20, NULL);  // PCRE2's default stack is 32 kB
    if (!enc->match || !enc->match_context || !enc->jit_stack) return -1;
    pcre2_jit_stack_assign(enc->match_context, NULL, enc->jit_stack);
    return 0;
}

static void encoder_free(Encoder *enc) {
    for (int k = 0; enc->scratch && k < enc->tok->pipeline.n_steps; k++) {
        free(enc->scratch[k].text);
        free(enc->scratch[k].pieces);
    }
    free(enc->scratch);
    pcre2_match_data_free(enc->match);
    pcre2_match_context_free(enc->match_context);
    pcre2_jit_stack_free(enc->jit_stack);
    bytesmap_free(&enc->cache);
    free(enc->cache_ids);
    free(enc->sym);
    free(enc->heap);
}

// Encodes text with special tokens matched as sp says (tokenizer_encode, tokenizer_encode_marked).
static int encode(const Tokenizer *tok, const char *text, size_t len, const Special *sp, int **ids, int *n_ids,
                  Err *err) {
    *ids = NULL;
    *n_ids = 0;
    size_t bad = utf8_invalid_offset(text, len);
    if (bad < len)
        return err_fmt(err, "text: invalid UTF-8 at byte %zu (0x%02X); expected UTF-8 text", bad,
                       (unsigned char)text[bad]);
    Encoder enc;
    size_t *hit = malloc(((size_t)tok->n_added + 1) * sizeof *hit);
    int rc = encoder_init(&enc, tok, err) < 0 || !hit ? err_fmt(err, "text: out of memory encoding %zu bytes", len)
                                                     : 0;
    for (int i = 0; i < tok->n_added && hit; i++) hit[i] = NOT_SEARCHED;
    for (size_t pos = 0; pos < len && rc == 0;) {
        size_t at = len;
        const AddedToken *added = next_added(tok, sp, text, len, pos, hit, &at);
        rc = run_steps(&enc, 0, text + pos, at - pos, pos == 0);
        if (added && rc == 0 && emit(&enc, &added->id, 1) < 0) rc = err_fmt(err, "text: out of memory");
        pos = added ? at + added->len : len;
    }
    if (rc == 0 && enc.n_ids > INT32_MAX) rc = err_fmt(err, "text: more than %d tokens", INT32_MAX);
    encoder_free(&enc);
    free(hit);
    if (rc < 0) {
        free(enc.ids);
        return -1;
    }
    *ids = enc.ids;
    *n_ids = (int)enc.n_ids;
    return 0;
}

int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, bool allow_special, int **ids,
                     int *n_ids, Err *err) {
    return encode(tok, text, len, &(Special){.allow = allow_special}, ids, n_ids, err);
}

int tokenizer_encode_marked(const Tokenizer *tok, const char *text, size_t len, const unsigned char *from_data,
                            int **ids, int *n_ids, Err *err) {
    return encode(tok, text, len, &(Special){.allow = true, .from_data = from_data}, ids, n_ids, err);
}

int tokenizer_add_special_tokens(const Tokenizer *tok, int **ids, int *n_ids, Err *err) {
    const Pipeline *p = &tok->pipeline;
    if (p->n_prefix + p->n_suffix == 0) return 0;
    size_t n = (size_t)*n_ids + (size_t)p->n_prefix + (size_t)p->n_suffix;
    int *out = n <= INT32_MAX ? malloc(n * sizeof *out) : NULL;
    if (!out) return err_fmt(err, "out of memory adding special tokens to %d tokens", *n_ids);
    if (p->n_prefix) memcpy(out, p->prefix, (size_t)p->n_prefix * sizeof *out);
    if (*n_ids) memcpy(out + p->n_prefix, *ids, (size_t)*n_ids * sizeof *out);
    if (p->n_suffix) memcpy(out + p->n_prefix + *n_ids, p->suffix, (size_t)p->n_suffix * sizeof *out);
    free(*ids);
    *ids = out;
    *n_ids = (int)n;
    return 0;
}

int tokenizer_vocab_size(const Tokenizer *tok) { return tok->vocab_size; }

const char *tokenizer_token(const Tokenizer *tok, int id, size_t *len) {
    if (id < 0 || id >= tok->vocab_size) return NULL;
    *len = tok->token_off[id + 1] - tok->token_off[id];
    return tok->token_bytes + tok->token_off[id];
}

const AddedToken *tokenizer_added(const Tokenizer *tok, const char *text) {
    const size_t len = strlen(text);
    for (int i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == len && memcmp(tok->added[i].text, text, len) == 0) return &tok->added[i];
    return NULL;
}

int tokenizer_find(const Tokenizer *tok, const char *text) {
    const AddedToken *added = tokenizer_added(tok, text);
    if (added) return added->id;
    uint64_t id;
    return bytesmap_get(&tok->vocab, text, strlen(text), &id) ? (int)id : -1;
}

int tokenizer_eot_id(const Tokenizer *tok) { return tokenizer_find(tok, "<|endoftext|>"); }

// The error for an id outside the vocabulary.
static int bad_id(const Tokenizer *tok, int id, Err *err) {
    return err_fmt(err, "token id %d out of range: the vocabulary has ids 0..%d", id, tok->vocab_size - 1);
}

int tokenizer_decode(const Tokenizer *tok, const int *ids, int n_ids, char **text, size_t *len, Err *err) {
    *text = NULL;
    *len = 0;
    size_t total = 0, n;
    for (int i = 0; i < n_ids; i++) {
        if (!tokenizer_token(tok, ids[i], &n)) return bad_id(tok, ids[i], err);
        total += n;
    }
    char *out = malloc(total + 1);
    if (!out) return err_fmt(err, "out of memory decoding %d tokens", n_ids);
    size_t o = 0;
    for (int i = 0; i < n_ids; i++) {
        const char *bytes = tokenizer_token(tok, ids[i], &n);
        memcpy(out + o, bytes, n);
        o += n;
    }
    size_t strip = 0;  // the decoder's Strip: up to strip_count strip_chars at the start of the text
    while ((int)strip < tok->pipeline.strip_count && strip < o && out[strip] == tok->pipeline.strip_char) strip++;
    memmove(out, out + strip, o - strip);
    o -= strip;
    out[o] = '\0';
    *text = out;
    *len = o;
    return 0;
}

void token_stream_init(TokenStream *ts, const Tokenizer *tok) { *ts = (TokenStream){.tok = tok}; }

int token_stream_push(TokenStream *ts, int id, const char **text, size_t *len, Err *err) {
    *text = "";
    *len = 0;
    size_t n;
    const char *bytes = tokenizer_token(ts->tok, id, &n);
    if (!bytes) return bad_id(ts->tok, id, err);
    size_t total = ts->n_held + n;
    if (total == 0) return 0;  // an empty token and nothing held: no text (and no buffer yet to copy into)
    if (reserve(&ts->in, &ts->in_cap, total, 1) < 0 || reserve(&ts->out, &ts->out_cap, 3 * total, 1) < 0)
        return err_fmt(err, "out of memory decoding token %d", id);
    memcpy(ts->in, ts->held, ts->n_held);
    memcpy(ts->in + ts->n_held, bytes, n);
    size_t used = utf8_repair((const unsigned char *)ts->in, total, false, ts->out, len);
    ts->n_held = total - used;  // an incomplete character: at most 3 bytes
    memcpy(ts->held, ts->in + used, ts->n_held);
    *text = ts->out;
    return 0;
}

void token_stream_flush(TokenStream *ts, const char **text, size_t *len) {
    // The held bytes are the well-formed start of one character, so one maximal subpart: one U+FFFD.
    *text = ts->n_held ? "\xEF\xBF\xBD" : "";
    *len = ts->n_held ? 3 : 0;
    ts->n_held = 0;
}

void token_stream_free(TokenStream *ts) {
    free(ts->in);
    free(ts->out);
    *ts = (TokenStream){.tok = ts->tok};
}
