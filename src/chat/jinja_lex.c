// jinja_lex.c — a template's text into tokens, with Jinja2's whitespace rules as transformers sets them:
//
//   line breaks    the source's line breaks (those of Python's str.splitlines: \r\n, \r, \n, \v, \f, \x1c–\x1e,
//                  U+0085, U+2028, U+2029) become "\n", and one line break at the very end is dropped
//                  (keep_trailing_newline off);
//   {%- {{- {#-    strip all white space before the tag;  -%} -}} -#}: all white space after it;
//   trim_blocks    a block or comment tag's end (%} #}) takes the one "\n" that follows it;
//   lstrip_blocks  white space between a line's start and a block or comment tag are dropped ({%+ keeps them).
//
// Inside tags: names, strings (Python's escapes), integers, floats, operators; the end of a tag counts only where
// the brackets opened in it are closed.
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "chat/jinja_internal.h"

typedef struct {
    Arena *a;
    const char *s;          // the normalized source
    size_t n, pos;
    int line;
    Token *toks;
    int n_toks, cap;
    bool line_starting;     // the last token matched ended a line (lstrip_blocks applies at the text's start)
} Lexer;

// Python's str.splitlines() line breaks at s[i], as their byte length (0: none).
static int line_break_len(const unsigned char *s, size_t n, size_t i) {
    unsigned char c = s[i];
    if (c == '\r') return i + 1 < n && s[i + 1] == '\n' ? 2 : 1;
    if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1C && c <= 0x1E)) return 1;
    if (c == 0xC2 && i + 1 < n && s[i + 1] == 0x85) return 2;
    if (c == 0xE2 && i + 2 < n && s[i + 1] == 0x80 && (s[i + 2] == 0xA8 || s[i + 2] == 0xA9)) return 3;
    return 0;
}

// The source with its line breaks normalized (see the top of this file), in the arena; its length in *len.
static char *normalize_source(Arena *a, const char *src, size_t n, size_t *len) {
    char *out = arena_alloc(a, n + 1);
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int k = line_break_len((const unsigned char *)src, n, i);
        if (k) {
            out[o++] = '\n';
            i += (size_t)k;
        } else {
            out[o++] = src[i++];
        }
    }
    if (o > 0 && out[o - 1] == '\n') o--;
    out[o] = '\0';
    *len = o;
    return out;
}

static void push(Lexer *L, Token t) {
    if (L->n_toks == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        Token *toks = arena_alloc(L->a, (size_t)cap * sizeof *toks);
        if (L->n_toks) memcpy(toks, L->toks, (size_t)L->n_toks * sizeof *toks);
        L->toks = toks;
        L->cap = cap;
    }
    L->toks[L->n_toks++] = t;
}

// Moves to position to, counting lines.
static void advance(Lexer *L, size_t to) {
    for (; L->pos < to; L->pos++) L->line += L->s[L->pos] == '\n';
}

// The length of the (Python) white space at s[i..), 0 if none.
static size_t space_at(const Lexer *L, size_t i) {
    uint32_t cp;
    int k = utf8_decode((const unsigned char *)L->s + i, L->n - i, &cp);
    return k > 0 && cp_is_space(cp) ? (size_t)k : 0;
}

// Text s[from..to) with white space stripped from its end (Python's rstrip).
static size_t rstrip_end(const Lexer *L, size_t from, size_t to) {
    while (to > from) {
        size_t start = to - 1;
        while (start > from && ((unsigned char)L->s[start] & 0xC0) == 0x80) start--;
        if (space_at(L, start) != to - start) break;
        to = start;
    }
    return to;
}

// The data before a tag that starts at `at` (with strip sign `sign`, '-', '+' or 0): whitespace control, then a
// T_TEXT token unless empty.
static void emit_text(Lexer *L, size_t at, char sign, bool block_or_comment) {
    size_t from = L->pos, to = at;
    if (sign == '-') {
        to = rstrip_end(L, from, to);
    } else if (sign != '+' && block_or_comment) {
        size_t l_pos = from;
        for (size_t i = from; i < to; i++)
            if (L->s[i] == '\n') l_pos = i + 1;
        size_t i = l_pos, k;
        while (i < to && (k = space_at(L, i)) > 0) i += k;
        bool all_space = l_pos < to && i == to;
        if ((l_pos > from || L->line_starting) && all_space) to = l_pos;
    }
    if (to > from) push(L, (Token){.kind = T_TEXT, .line = L->line, .text = str_lit(L->s + from, to - from)});
    advance(L, at);
}

// Python's unicode-escape decoding of a string literal's body s[0..n) into the arena.
static Str unescape(Lexer *L, const char *s, size_t n) {
    StrBuf b = {.arena = L->a, .limit = L->a->limit, .line = L->line};
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            sb_put_n(&b, s + i, 1, false);
            continue;
        }
        char c = s[++i];
        const char *simple = strchr("\\'\"abfnrtv\n", c);
        if (simple && c) {
            static const char map[] = "\\'\"\a\b\f\n\r\t\v";
            if (c != '\n') sb_put_n(&b, &map[simple - "\\'\"abfnrtv\n"], 1, false);
            continue;
        }
        int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
        uint32_t cp = 0;
        if (c >= '0' && c <= '7') {
            int k = 0;
            for (; k < 3 && i < n && s[i] >= '0' && s[i] <= '7'; k++, i++) cp = cp * 8 + (uint32_t)(s[i] - '0');
            i--;
        } else if (digits) {
            for (int k = 0; k < digits; k++) {
                char h = i + 1 + (size_t)k < n ? s[i + 1 + k] : 0;
                int v = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (v < 0) jinja_fail(L->a, L->line, "a string's \\%c escape needs %d hex digits", c, digits);
                cp = cp * 16 + (uint32_t)v;
            }
            i += (size_t)digits;
        } else {
            if (c == 'N') jinja_fail(L->a, L->line, "the \\N{...} escape is not supported");
            sb_put_n(&b, s + i - 1, 2, false);  // an unknown escape stays as it is
            continue;
        }
        char u[UTF8_MAX];
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            jinja_fail(L->a, L->line, "a string escapes U+%04X, which is not a Unicode scalar value", cp);
        sb_put_n(&b, u, (size_t)utf8_encode(cp, u), false);
    }
    return sb_str(&b);
}

static void lex_string(Lexer *L) {
    char q = L->s[L->pos];
    size_t i = L->pos + 1;
    while (i < L->n && L->s[i] != q) i += L->s[i] == '\\' ? 2 : 1;
    if (i >= L->n) jinja_fail(L->a, L->line, "a string that is never closed");
    int line = L->line;
    Str body = unescape(L, L->s + L->pos + 1, i - L->pos - 1);
    push(L, (Token){.kind = T_STRING, .line = line, .text = body});
    advance(L, i + 1);
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

// Appends c to the number's text buf [cap] at *k, counting it even where it no longer fits (then the caller
// refuses the number).
static void put_char(char *buf, size_t *k, size_t cap, char c) {
    if (*k + 1 < cap) buf[*k] = c;
    (*k)++;
}

// Digits with Python's underscores (1_000) from i; returns the end, appending the digits to buf.
static size_t digits_at(const Lexer *L, size_t i, char *buf, size_t *k, size_t cap) {
    for (; i < L->n && (is_digit(L->s[i]) || (L->s[i] == '_' && i + 1 < L->n && is_digit(L->s[i + 1]))); i++)
        if (L->s[i] != '_') put_char(buf, k, cap, L->s[i]);
    return i;
}

static void lex_number(Lexer *L) {
    char buf[128];
    size_t k = 0, i = digits_at(L, L->pos, buf, &k, sizeof buf);
    bool is_float = false;
    if (i + 1 < L->n && L->s[i] == '.' && is_digit(L->s[i + 1])) {
        put_char(buf, &k, sizeof buf, '.');
        i = digits_at(L, i + 1, buf, &k, sizeof buf);
        is_float = true;
    }
    if (i + 1 < L->n && (L->s[i] == 'e' || L->s[i] == 'E')) {
        size_t j = i + 1 + (L->s[i + 1] == '+' || L->s[i + 1] == '-');
        if (j < L->n && is_digit(L->s[j])) {
            put_char(buf, &k, sizeof buf, 'e');
            if (j > i + 1) put_char(buf, &k, sizeof buf, L->s[i + 1]);
            i = digits_at(L, j, buf, &k, sizeof buf);
            is_float = true;
        }
    }
    if (k + 1 >= sizeof buf) jinja_fail(L->a, L->line, "a number with more than %zu characters", sizeof buf - 2);
    buf[k] = '\0';
    Token t = {.kind = is_float ? T_FLOAT : T_INT, .line = L->line, .f = strtod(buf, NULL)};
    if (!is_float) {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (v > INT64_MAX || k > 19) jinja_fail(L->a, L->line, "the integer %s is too large", buf);
        t.i = (int64_t)v;
    }
    push(L, t);
    advance(L, i);
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || is_digit(c);
}

// An operator at the current position: its length (two-character ones first), 0 if none.
static size_t operator_len(const Lexer *L) {
    static const char *two[] = {"//", "**", "==", "!=", "<=", ">="};
    for (size_t k = 0; k < sizeof two / sizeof *two; k++)
        if (L->pos + 1 < L->n && memcmp(L->s + L->pos, two[k], 2) == 0) return 2;
    return L->s[L->pos] && strchr("+-/*%~[](){}<>=.:|,;", L->s[L->pos]) ? 1 : 0;
}

// The end of a tag at the current position (outside brackets): its length, taking the white space that -%}
// strips and the newline that trim_blocks takes; 0 if the tag does not end here.
static size_t tag_end_len(const Lexer *L, TokKind begin) {
    const char *end = begin == T_BLOCK_BEGIN ? "%}" : "}}";
    const char *s = L->s + L->pos;
    size_t left = L->n - L->pos;
    if (left >= 3 && s[0] == '-' && memcmp(s + 1, end, 2) == 0) {
        size_t i = L->pos + 3, k;
        while (i < L->n && (k = space_at(L, i)) > 0) i += k;
        return i - L->pos;
    }
    if (left >= 3 && s[0] == '+' && begin == T_BLOCK_BEGIN && memcmp(s + 1, end, 2) == 0) return 3;
    if (left >= 2 && memcmp(s, end, 2) == 0) return 2 + (begin == T_BLOCK_BEGIN && left > 2 && s[2] == '\n');
    return 0;
}

// The tokens of one {% %} or {{ }} tag, from just after its opening.
static void lex_tag(Lexer *L, TokKind begin) {
    int depth = 0;
    for (;;) {
        size_t k;
        while ((k = space_at(L, L->pos)) > 0) advance(L, L->pos + k);
        if (L->pos >= L->n) jinja_fail(L->a, L->line, "a tag that is never closed");
        size_t end = depth == 0 ? tag_end_len(L, begin) : 0;
        if (end) {
            push(L, (Token){.kind = begin == T_BLOCK_BEGIN ? T_BLOCK_END : T_VAR_END, .line = L->line});
            advance(L, L->pos + end);
            L->line_starting = L->s[L->pos - 1] == '\n';
            return;
        }
        char c = L->s[L->pos];
        if (c == '\'' || c == '"') {
            lex_string(L);
        } else if (is_digit(c)) {
            lex_number(L);
        } else if (is_name_char(c)) {
            size_t i = L->pos;
            while (i < L->n && is_name_char(L->s[i])) i++;
            push(L, (Token){.kind = T_NAME, .line = L->line, .text = str_lit(L->s + L->pos, i - L->pos)});
            advance(L, i);
        } else if ((k = operator_len(L)) > 0) {
            depth += strchr("([{", c) ? 1 : strchr(")]}", c) && depth > 0 ? -1 : 0;
            push(L, (Token){.kind = T_OP, .line = L->line, .text = str_lit(L->s + L->pos, k)});
            advance(L, L->pos + k);
        } else {
            int len = 1;
            uint32_t cp = str_cp_at(str_lit(L->s, L->n), L->pos, &len);
            jinja_fail(L->a, L->line, "unexpected character U+%04X in a tag", cp);
        }
    }
}

// A comment from just after its opening: skipped, up to and including #} (with -#} and trim_blocks as for %}).
static void lex_comment(Lexer *L) {
    const char *end = memmem(L->s + L->pos, L->n - L->pos, "#}", 2);
    if (!end) jinja_fail(L->a, L->line, "a comment that is never closed");
    size_t at = (size_t)(end - L->s), stop = at + 2;
    if (at > L->pos && L->s[at - 1] == '-') {
        size_t k;
        while (stop < L->n && (k = space_at(L, stop)) > 0) stop += k;
    } else if (!(at > L->pos && L->s[at - 1] == '+') && stop < L->n && L->s[stop] == '\n') {
        stop++;
    }
    advance(L, stop);
    L->line_starting = L->s[L->pos - 1] == '\n';
}

// The next tag's opening at or after from: its offset (n if none) and kind.
static size_t next_opening(const Lexer *L, size_t from, char *kind) {
    for (size_t i = from; i + 1 < L->n; i++)
        if (L->s[i] == '{' && (L->s[i + 1] == '{' || L->s[i + 1] == '%' || L->s[i + 1] == '#')) {
            *kind = L->s[i + 1];
            return i;
        }
    return L->n;
}

// Refuses {% raw %}: its body is not lexed as tags, which this lexer does not do.
static void refuse_raw(Lexer *L, size_t at) {
    size_t i = at + 2 + (L->s[at + 2] == '-' || L->s[at + 2] == '+');
    while (i < L->n && space_at(L, i)) i += space_at(L, i);
    if (L->n - i >= 3 && memcmp(L->s + i, "raw", 3) == 0 && !(i + 3 < L->n && is_name_char(L->s[i + 3])))
        jinja_fail(L->a, L->line, "'{%% raw %%}' is not supported");
}

Token *jinja_lex(Arena *a, const char *source, size_t len, int *n_tokens) {
    Lexer L = {.a = a, .line = 1, .line_starting = true};
    L.s = normalize_source(a, source, len, &L.n);
    while (L.pos < L.n) {
        char kind = 0;
        size_t at = next_opening(&L, L.pos, &kind);
        if (at == L.n) {
            emit_text(&L, L.n, 0, false);
            break;
        }
        char sign = at + 2 < L.n && (L.s[at + 2] == '-' || L.s[at + 2] == '+') ? L.s[at + 2] : 0;
        emit_text(&L, at, sign, kind != '{');
        if (kind == '%') refuse_raw(&L, at);
        advance(&L, at + 2 + (sign != 0));
        L.line_starting = false;
        if (kind == '#') {
            lex_comment(&L);
            continue;
        }
        TokKind begin = kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN;
        push(&L, (Token){.kind = begin, .line = L.line});
        lex_tag(&L, begin);
    }
    push(&L, (Token){.kind = T_EOF, .line = L.line});
    *n_tokens = L.n_toks;
    return L.toks;
}
