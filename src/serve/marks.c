// marks.c — the provenance of a stream's text (see marks.h).
#include "serve/marks.h"

#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"

void marks_init(Marks *m) { *m = (Marks){.last_kind = TOKEN_TARGET}; }

static void free_given(Marks *m) {
    for (int i = 0; i < m->n_given; i++) free(m->given[i]);
    m->n_given = 0;
}

void marks_free(Marks *m) {
    for (int i = 0; i < m->n_spans; i++) free(m->spans[i].own);
    free_given(m);
    free(m->spans);
    free(m->pending);
    free(m->rounds);
    free(m->rounds_out);
    free(m->out);
    free(m->given);
    *m = (Marks){0};
}

// Makes room for `need` items of `size` bytes in *items (capacity *cap). -1 out of memory.
static int reserve(void **items, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    const int want = need > 2 * *cap ? need : 2 * *cap;
    void *grown = realloc(*items, (size_t)want * size);
    if (!grown) return -1;
    *items = grown;
    *cap = want;
    return 0;
}

// Appends a span of text, joined to the last when it is of the same kind (rejected drafts stay one span each).
static int add_span(Marks *m, TokenKind kind, size_t len, char *own) {
    MarkSpan *last = m->n_spans ? &m->spans[m->n_spans - 1] : NULL;
    if (!own && last && !last->own && last->kind == kind) {
        last->len += len;
        return 0;
    }
    if (reserve((void **)&m->spans, &m->cap_spans, m->n_spans + 1, sizeof *m->spans)) return free(own), -1;
    m->spans[m->n_spans++] = (MarkSpan){.kind = kind, .len = len, .own = own};
    return 0;
}

int marks_committed(Marks *m, size_t bytes) {
    if (reserve((void **)&m->pending, &m->cap_pending, m->n_pending + 1, sizeof *m->pending)) return -1;
    m->pending[m->n_pending++] = bytes;
    return 0;
}

int marks_token(Marks *m, const Tokenizer *tok, int id, TokenKind kind) {
    if (kind == TOKEN_REJECTED) {
        size_t n, n_valid = 0;
        const char *bytes = tokenizer_token(tok, id, &n);
        char *own = malloc(3 * n + 1);  // (each ill-formed byte becomes U+FFFD: 3 bytes)
        if (!own) return -1;
        utf8_repair((const unsigned char *)bytes, n, true, own, &n_valid);
        own[n_valid] = '\0';
        return add_span(m, kind, n_valid, own);
    }
    if (m->first_pending == m->n_pending) return 0;  // (none committed: nothing to label)
    const size_t bytes = m->pending[m->first_pending++];
    if (m->first_pending == m->n_pending) m->first_pending = m->n_pending = 0;
    m->last_kind = kind;
    return bytes ? add_span(m, kind, bytes, NULL) : 0;
}

int marks_round(Marks *m, const RoundOutcome *round) {
    if (reserve((void **)&m->rounds, &m->cap_rounds, m->n_rounds + 1, sizeof *m->rounds)) return -1;
    m->rounds[m->n_rounds++] = *round;
    return 0;
}

int marks_flushed(Marks *m, size_t bytes) { return bytes ? add_span(m, m->last_kind, bytes, NULL) : 0; }

int marks_take(Marks *m, const char *text, size_t len, TextMarks *out) {
    free_given(m);
    // The rounds: this piece's become the last piece's buffer, which the next rounds fill.
    RoundOutcome *rounds = m->rounds_out;
    const int cap = m->cap_rounds_out;
    m->rounds_out = m->rounds, m->cap_rounds_out = m->cap_rounds, m->n_rounds_out = m->n_rounds;
    m->rounds = rounds, m->cap_rounds = cap, m->n_rounds = 0;
    *out = (TextMarks){.marks = m->out, .rounds = m->rounds_out, .n_rounds = m->n_rounds_out};
    // The spans that the text covers, and the rejected drafts before its last byte.
    size_t at = 0;
    int used = 0, n = 0;
    for (; used < m->n_spans && at < len; n++) {
        if (reserve((void **)&m->out, &m->cap_out, n + 1, sizeof *m->out) ||
            reserve((void **)&m->given, &m->cap_given, m->n_given + 1, sizeof *m->given))
            return -1;
        MarkSpan *s = &m->spans[used];
        if (s->own) {
            m->out[n] = (TextMark){.kind = s->kind, .text = s->own, .len = s->len};
            m->given[m->n_given++] = s->own;
            used++;
            continue;
        }
        const size_t part = s->len < len - at ? s->len : len - at;
        m->out[n] = (TextMark){.kind = s->kind, .text = text + at, .len = part};
        at += part;
        s->len -= part;
        used += s->len == 0;
    }
    memmove(m->spans, m->spans + used, sizeof *m->spans * (size_t)(m->n_spans - used));
    m->n_spans -= used;
    out->marks = m->out;
    out->n_marks = n;
    return 0;
}
