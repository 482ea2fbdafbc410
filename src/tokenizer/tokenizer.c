// tokenizer.c — encoding, decoding and streaming decoding with a loaded Tokenizer (see tokenizer.h; loading is
// in tokenizer_load.c).
//
// Encoding one pre-tokenized piece (BPE). The piece's bytes start as one symbol each, kept in a doubly linked
// list. Every adjacent pair that has a merge is a candidate in a min-heap ordered by (merge rank, position). The
// loop pops the best candidate, skips it if either symbol has changed since it was pushed, else merges the pair
// into its left symbol and pushes the two new pairs that the merge creates. This is the classic "merge the pair
// of lowest rank, leftmost first, until none is left" in O(n log n) for a piece of n bytes, instead of O(n²).
// Pieces repeat a lot in real text, so each call keeps a cache from piece to ids.
#include <stdlib.h>
#include <string.h>

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

// The working state of one tokenizer_encode call.
typedef struct {
    const Tokenizer *tok;
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
    int n = (int)len;
    for (int i = 0; i < n; i++) enc->sym[i] = (Symbol){tok->byte_id[piece[i]], i - 1, i + 1 < n ? i + 1 : -1};
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

// Encodes text[0..len) that has no added tokens in it: pre-tokenization, then each piece.
static int encode_plain(Encoder *enc, const char *text, size_t len) {
    for (size_t pos = 0, end; pos < len; pos = end) {
        end = pretokenize_next(text, len, pos);
        if (encode_piece(enc, text + pos, end - pos) < 0) return -1;
    }
    return 0;
}

// Finds the first added token in text[pos..len) (the longest one among those starting there) that applies:
// special ones only with allow_special. Returns it, with its offset in *at, or NULL if there is none.
static const AddedToken *next_added(const Tokenizer *tok, bool allow_special, const char *text, size_t len,
                                    size_t pos, size_t *at) {
    const AddedToken *best = NULL;
    for (int i = 0; i < tok->n_added; i++) {
        const AddedToken *a = &tok->added[i];
        if (a->special && !allow_special) continue;
        const char *hit = memmem(text + pos, len - pos, a->text, a->len);
        if (!hit) continue;
        size_t off = (size_t)(hit - text);
        if (!best || off < *at || (off == *at && a->len > best->len)) {
            best = a;
            *at = off;
        }
    }
    return best;
}

int tokenizer_encode(const Tokenizer *tok, const char *text, size_t len, bool allow_special, int **ids,
                     int *n_ids, Err *err) {
    *ids = NULL;
    *n_ids = 0;
    size_t bad = utf8_invalid_offset(text, len);
    if (bad < len)
        return err_fmt(err, "text: invalid UTF-8 at byte %zu (0x%02X); expected UTF-8 text", bad,
                       (unsigned char)text[bad]);
    Encoder enc = {.tok = tok};
    int rc = bytesmap_init(&enc.cache);
    for (size_t pos = 0; pos < len && rc == 0;) {
        size_t at = len;
        const AddedToken *added = next_added(tok, allow_special, text, len, pos, &at);
        rc = encode_plain(&enc, text + pos, at - pos);
        if (added && rc == 0) rc = emit(&enc, &added->id, 1);
        pos = added ? at + added->len : len;
    }
    if (rc == 0 && enc.n_ids > INT32_MAX) rc = -1;
    bytesmap_free(&enc.cache);
    free(enc.cache_ids);
    free(enc.sym);
    free(enc.heap);
    if (rc < 0) {
        free(enc.ids);
        return err_fmt(err, "text: out of memory encoding %zu bytes", len);
    }
    *ids = enc.ids;
    *n_ids = (int)enc.n_ids;
    return 0;
}

int tokenizer_vocab_size(const Tokenizer *tok) { return tok->vocab_size; }

const char *tokenizer_token(const Tokenizer *tok, int id, size_t *len) {
    if (id < 0 || id >= tok->vocab_size) return NULL;
    *len = tok->token_off[id + 1] - tok->token_off[id];
    return tok->token_bytes + tok->token_off[id];
}

int tokenizer_find(const Tokenizer *tok, const char *text) {
    size_t len = strlen(text);
    for (int i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == len && memcmp(tok->added[i].text, text, len) == 0) return tok->added[i].id;
    uint64_t id;
    return bytesmap_get(&tok->vocab, text, len, &id) ? (int)id : -1;
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
