// gbnf.c — GBNF text to a Grammar (grammar.h): a recursive-descent parser, one function per construct, that
// rewrites groups and repetitions into rules of their own, then checks what a top-down recogniser needs (every
// rule defined, `root` present, no left recursion).
#include "grammar/grammar.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "base/bytesmap.h"

// A grammar's size once repetitions are written out (elements, rules), and how deep groups nest.
enum { MAX_ELEMENTS = 1 << 20, MAX_RULES = 1 << 16, MAX_NESTING = 256 };

typedef struct {
    GrammarElement *el;
    int n, cap;
} Sequence;  // one alternative while it is parsed

typedef struct {
    char *name;
    Sequence *alts;
    int n_alts, cap_alts;
    bool defined;
    size_t at;          // where it was defined, or (until then) first referenced, or the group it stands for
    int repeats_left, repeat_tail;  // as GrammarRule's
} RuleDraft;

typedef struct {
    const char *text, *source;
    size_t n, pos;
    Err *err;
    RuleDraft *rules;
    int n_rules, cap_rules;
    BytesMap names;     // the written rules' names → their index (generated rules have none: "parent/N")
    GrammarRange *ranges;
    int n_ranges, cap_ranges;
    long n_elements;    // across every rule: the grammar's size
    int nesting;
    char *markers[GRAMMAR_MARKERS_MAX];  // the tokens referenced (grammar.h), in order of first reference
    int n_markers;
} Parser;

// Grows *array (of *cap items of `size` bytes) to hold `need` items. -1 when out of memory.
static int reserve(void *array, int *cap, int need, size_t size) {
    if (need <= *cap) return 0;
    int cap2 = *cap ? *cap : 8;
    while (cap2 < need) cap2 *= 2;
    void *grown = realloc(*(void **)array, (size_t)cap2 * size);
    if (!grown) return -1;
    *(void **)array = grown;
    *cap = cap2;
    return 0;
}

// The message "SOURCE:LINE:COLUMN: what", the column counting characters from 1.
__attribute__((format(printf, 3, 4))) static int fail(Parser *p, size_t at, const char *fmt, ...) {
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < p->n; i++) {
        if (p->text[i] == '\n') {
            line++;
            column = 1;
        } else if (((unsigned char)p->text[i] & 0xC0) != 0x80) {
            column++;
        }
    }
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return err_fmt(p->err, "%s:%d:%d: %s", p->source, line, column, what);
}

static int out_of_memory(Parser *p) {
    if (p->n_rules == MAX_RULES)
        return err_fmt(p->err, "%s: more than %d rules once its groups and repetitions are written out", p->source,
                       MAX_RULES);
    return err_fmt(p->err, "%s: out of memory", p->source);
}

static int peek(const Parser *p) { return p->pos < p->n ? (unsigned char)p->text[p->pos] : -1; }

static bool is_word_char(int c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// Spaces, tabs and comments; newlines too where a rule goes on (newline_ok).
static void skip_space(Parser *p, bool newline_ok) {
    for (int c = peek(p); c == ' ' || c == '\t' || c == '#' || (newline_ok && (c == '\n' || c == '\r'));
         c = peek(p)) {
        if (c == '#') {
            while (peek(p) != -1 && peek(p) != '\n' && peek(p) != '\r') p->pos++;
        } else {
            p->pos++;
        }
    }
}

// ---- rules and sequences -----------------------------------------------------------------------------------------

// A new rule named name[0..len), undefined. -1: out of memory.
static int new_rule(Parser *p, const char *name, size_t len, size_t at) {
    if (p->n_rules == MAX_RULES) return -1;
    if (reserve(&p->rules, &p->cap_rules, p->n_rules + 1, sizeof *p->rules) < 0) return -1;
    char *copy = strndup(name, len);
    if (!copy) return -1;
    p->rules[p->n_rules] = (RuleDraft){.name = copy, .at = at, .repeat_tail = -1};
    return p->n_rules++;
}

// The index of the rule named name[0..len) as written, a new undefined rule if there is none yet. -1: out of memory.
static int rule_named(Parser *p, const char *name, size_t len, size_t at) {
    uint64_t r;
    if (bytesmap_get(&p->names, name, len, &r)) return (int)r;
    int added = new_rule(p, name, len, at);
    if (added < 0 || bytesmap_put(&p->names, name, len, (uint64_t)added) < 0) return -1;
    return added;
}

// A new rule for a group or a repetition inside rule `parent`, named "parent/N" (no written name has a '/'),
// defined at once.
static int generated_rule(Parser *p, int parent, size_t at) {
    char name[128];
    snprintf(name, sizeof name, "%.100s/%d", p->rules[parent].name, p->n_rules);
    int r = new_rule(p, name, strlen(name), at);
    if (r >= 0) p->rules[r].defined = true;
    return r;
}

static int push(Parser *p, Sequence *s, GrammarElement e) {
    if (++p->n_elements > MAX_ELEMENTS)
        return err_fmt(p->err, "%s: the grammar has more than %d elements once its repetitions are written out",
                       p->source, MAX_ELEMENTS);
    if (reserve(&s->el, &s->cap, s->n + 1, sizeof *s->el) < 0) return out_of_memory(p);
    s->el[s->n++] = e;
    return 0;
}

static int push_elements(Parser *p, Sequence *s, const GrammarElement *el, int n) {
    for (int i = 0; i < n; i++)
        if (push(p, s, el[i]) < 0) return -1;
    return 0;
}

static GrammarElement rule_element(int rule) { return (GrammarElement){.kind = GRAMMAR_RULE, .first = rule}; }

// Moves the finished sequence *s into rule r as its next alternative (s is left empty).
static int add_alternative(Parser *p, int r, Sequence *s) {
    RuleDraft *rule = &p->rules[r];
    if (reserve(&rule->alts, &rule->cap_alts, rule->n_alts + 1, sizeof *rule->alts) < 0) {
        free(s->el);
        *s = (Sequence){0};
        return out_of_memory(p);
    }
    rule->alts[rule->n_alts++] = *s;
    *s = (Sequence){0};
    return 0;
}

// ---- characters ---------------------------------------------------------------------------------------------------

static int hex_value(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// count hexadecimal digits of the escape that began at `at`.
static int hex_digits(Parser *p, size_t at, int count, uint32_t *cp) {
    *cp = 0;
    for (int i = 0; i < count; i++) {
        int d = hex_value(peek(p));
        if (d < 0) return fail(p, at, "expected %d hexadecimal digits after the escape", count);
        *cp = *cp * 16 + (uint32_t)d;
        p->pos++;
    }
    return 0;
}

// One character of a literal or a class, escaped or as UTF-8: its code point in *cp.
static int parse_char(Parser *p, uint32_t *cp) {
    size_t at = p->pos;
    if (peek(p) == -1) return fail(p, at, "unexpected end of the grammar");
    if (peek(p) != '\\') {
        int len = utf8_decode((const unsigned char *)p->text + p->pos, p->n - p->pos, cp);
        if (len == 0) return fail(p, at, "invalid UTF-8");
        p->pos += (size_t)len;
        return 0;
    }
    p->pos++;
    int c = peek(p);
    p->pos++;
    switch (c) {
    case 't': *cp = '\t'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case '\\': case '"': case '[': case ']': case '-': *cp = (uint32_t)c; return 0;
    case 'x': case 'u': case 'U': {
        int digits = 8;  // \UHHHHHHHH
        if (c == 'x') digits = 2;
        if (c == 'u') digits = 4;
        if (hex_digits(p, at, digits, cp) < 0) return -1;
        if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
            return fail(p, at, "escape U+%04X is not a Unicode scalar value", (unsigned)*cp);
        return 0;
    }
    default:
        return c == -1 ? fail(p, at, "unexpected end of the grammar after '\\'")
                       : fail(p, at, "unknown escape '\\%c' (known: \\t \\n \\r \\\\ \\\" \\[ \\] \\- \\x \\u \\U)",
                              c);
    }
}

static int add_range(Parser *p, uint32_t lo, uint32_t hi) {
    if (reserve(&p->ranges, &p->cap_ranges, p->n_ranges + 1, sizeof *p->ranges) < 0) return out_of_memory(p);
    p->ranges[p->n_ranges++] = (GrammarRange){lo, hi};
    return 0;
}

static int by_lo(const void *a, const void *b) {
    uint32_t x = ((const GrammarRange *)a)->lo, y = ((const GrammarRange *)b)->lo;
    return (x > y) - (x < y);
}

// Sorts r[0..n) and merges ranges that overlap or touch: the class the recogniser searches. Returns the new count.
static int merge_ranges(GrammarRange *r, int n) {
    qsort(r, (size_t)n, sizeof *r, by_lo);
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    return m;
}

// "literal": one CHARS element per character.
static int parse_literal(Parser *p, Sequence *s) {
    size_t at = p->pos++;
    while (peek(p) != '"') {
        if (peek(p) == -1) return fail(p, at, "unterminated string literal");
        uint32_t cp;
        if (parse_char(p, &cp) < 0 || add_range(p, cp, cp) < 0 ||
            push(p, s, (GrammarElement){.kind = GRAMMAR_CHARS, .first = p->n_ranges - 1, .n = 1}) < 0)
            return -1;
    }
    p->pos++;
    return 0;
}

// [class]: ranges a-z or single characters, negated by a leading ^.
static int parse_class(Parser *p, Sequence *s) {
    size_t at = p->pos++;
    GrammarElement e = {.kind = GRAMMAR_CHARS, .first = p->n_ranges};
    if (peek(p) == '^') {
        e.negated = true;
        p->pos++;
    }
    while (peek(p) != ']') {
        if (peek(p) == -1) return fail(p, at, "unterminated character class");
        size_t item = p->pos;
        uint32_t lo, hi;
        if (parse_char(p, &lo) < 0) return -1;
        hi = lo;
        if (peek(p) == '-' && p->pos + 1 < p->n && p->text[p->pos + 1] != ']') {
            p->pos++;
            if (parse_char(p, &hi) < 0) return -1;
            if (hi < lo) return fail(p, item, "character range runs backwards (U+%04X > U+%04X)", lo, hi);
        }
        if (add_range(p, lo, hi) < 0) return -1;
        e.n++;
    }
    p->pos++;
    if (e.n == 0) return fail(p, at, "empty character class");
    e.n = merge_ranges(p->ranges + e.first, e.n);
    p->n_ranges = e.first + e.n;
    return push(p, s, e);
}

// ---- repetition ---------------------------------------------------------------------------------------------------

static int parse_count(Parser *p, int *value) {
    size_t at = p->pos;
    long v = 0;
    if (!(peek(p) >= '0' && peek(p) <= '9')) return fail(p, at, "expected a number");
    while (peek(p) >= '0' && peek(p) <= '9') {
        v = v * 10 + (peek(p) - '0');
        p->pos++;
        if (v > GRAMMAR_MAX_REPEAT) return fail(p, at, "repetition count above %d", GRAMMAR_MAX_REPEAT);
    }
    *value = (int)v;
    return 0;
}

// After `{`: m, m, m,n or ,n up to `}`. max = -1: unbounded.
static int parse_braces(Parser *p, bool nested, int *min, int *max) {
    size_t at = p->pos - 1;
    skip_space(p, nested);
    *min = 0;
    if (peek(p) != ',' && parse_count(p, min) < 0) return -1;
    skip_space(p, nested);
    *max = *min;
    if (peek(p) == ',') {
        p->pos++;
        skip_space(p, nested);
        *max = -1;
        if (peek(p) != '}' && parse_count(p, max) < 0) return -1;
        skip_space(p, nested);
    }
    if (peek(p) != '}') return fail(p, p->pos, "expected '}' to close the repetition opened here");
    p->pos++;
    if (*max >= 0 && *max < *min) return fail(p, at, "repetition {%d,%d}: the maximum is below the minimum", *min, *max);
    return 0;
}

// Rewrites the item atom[0..n) repeated min..max times (max -1: unbounded) at the end of s, with new rules:
//     x{m,}   →  x … x R        R ::= x R | ""
//     x{m,n}  →  x … x R_{n−m}  R_1 ::= x | "",  R_k ::= x R_{k−1} | ""
static int repeat(Parser *p, int parent, size_t at, Sequence *s, const GrammarElement *atom, int n, int min, int max) {
    for (int i = 0; i < min; i++)
        if (push_elements(p, s, atom, n) < 0) return -1;
    if (max == min) return 0;
    int optional = -1;
    for (int k = 0; k < (max < 0 ? 1 : max - min); k++) {
        int r = generated_rule(p, parent, at);
        if (r < 0) return out_of_memory(p);
        Sequence once = {0}, none = {0};
        int tail = max < 0 ? r : optional;
        if (push_elements(p, &once, atom, n) < 0 || (tail >= 0 && push(p, &once, rule_element(tail)) < 0) ||
            add_alternative(p, r, &once) < 0 || add_alternative(p, r, &none) < 0) {
            free(once.el);
            return -1;
        }
        if (max >= 0) {  // R_{k+1}: a link of the bounded chain
            p->rules[r].repeats_left = k + 1;
            p->rules[r].repeat_tail = optional;
        }
        optional = r;
    }
    return push(p, s, rule_element(optional));
}

static int parse_repetition(Parser *p, int parent, Sequence *s, int atom_start, bool nested) {
    size_t at = p->pos;
    int c = peek(p), min = 0, max = -1;
    p->pos++;
    if (c == '+') min = 1;
    if (c == '?') max = 1;
    if (c == '{' && parse_braces(p, nested, &min, &max) < 0) return -1;
    if (atom_start < 0) return fail(p, at, "'%c' does not follow an item to repeat", c);
    int n = s->n - atom_start;
    if (n == 0) return 0;  // "" repeated is still ""
    GrammarElement *atom = malloc((size_t)n * sizeof *atom);
    if (!atom) return out_of_memory(p);
    memcpy(atom, s->el + atom_start, (size_t)n * sizeof *atom);
    s->n = atom_start;
    p->n_elements -= n;
    int rc = repeat(p, parent, at, s, atom, n, min, max);
    free(atom);
    return rc;
}

// ---- token references ------------------------------------------------------------------------------------------------

// The marker of the token whose text is text[0..len), added at its first reference. -1 with the error: more than
// GRAMMAR_MARKERS_MAX tokens, or out of memory.
static int marker_of(Parser *p, size_t at, const char *text, size_t len) {
    for (int k = 0; k < p->n_markers; k++)
        if (strlen(p->markers[k]) == len && memcmp(p->markers[k], text, len) == 0) return k;
    if (p->n_markers == GRAMMAR_MARKERS_MAX)
        return fail(p, at, "more than %d different tokens referenced", GRAMMAR_MARKERS_MAX);
    if (!(p->markers[p->n_markers] = strndup(text, len))) return out_of_memory(p);
    return p->n_markers++;
}

// <TEXT>: the token whose text is `<TEXT>`, or `[TEXT]` where TEXT is bracketed so (grammar.h); one CHARS element
// of its marker's character.
static int parse_token_reference(Parser *p, Sequence *s) {
    const size_t at = p->pos;
    size_t end = at + 1;
    while (end < p->n && p->text[end] > ' ' && p->text[end] <= '~' && p->text[end] != '>') end++;
    if (end == p->n || p->text[end] != '>')
        return fail(p, at, "a token reference is '<' and the token's text (printable, no spaces) up to '>'");
    const char *inner = p->text + at + 1;
    const size_t n_inner = end - at - 1;
    const bool bracketed = n_inner >= 2 && inner[0] == '[' && inner[n_inner - 1] == ']';
    if (n_inner == 0 || (bracketed && strspn(inner + 1, "0123456789") == n_inner - 2))
        return fail(p, at, "token references by number ('<[ID]>') are not supported: name the token by its text");
    const int k = bracketed ? marker_of(p, at, inner, n_inner) : marker_of(p, at, p->text + at, n_inner + 2);
    if (k < 0 || add_range(p, GRAMMAR_MARKER_BASE + (uint32_t)k, GRAMMAR_MARKER_BASE + (uint32_t)k) < 0) return -1;
    p->pos = end + 1;
    return push(p, s, (GrammarElement){.kind = GRAMMAR_CHARS, .first = p->n_ranges - 1, .n = 1});
}

// ---- sequences, alternatives, rules ---------------------------------------------------------------------------------

static int parse_alternatives(Parser *p, int rule, bool nested);

static int parse_group(Parser *p, int parent, Sequence *s) {
    size_t at = p->pos++;
    if (++p->nesting > MAX_NESTING) return fail(p, at, "groups nested more than %d deep", MAX_NESTING);
    int r = generated_rule(p, parent, at);
    if (r < 0) return out_of_memory(p);
    skip_space(p, true);
    if (parse_alternatives(p, r, true) < 0) return -1;
    if (peek(p) != ')') return fail(p, at, "'(' is not closed by ')'");
    p->pos++;
    p->nesting--;
    return push(p, s, rule_element(r));
}

static int parse_reference(Parser *p, Sequence *s) {
    size_t at = p->pos;
    while (is_word_char(peek(p))) p->pos++;
    int r = rule_named(p, p->text + at, p->pos - at, at);
    if (r < 0) return out_of_memory(p);
    return push(p, s, rule_element(r));
}

// Items one after the other until `|`, `)`, the end of the line (at the top level) or of the text.
static int parse_sequence(Parser *p, int rule, Sequence *s, bool nested) {
    int atom_start = -1;
    for (;;) {
        int c = peek(p), start = s->n, rc;
        if (c == '"') rc = parse_literal(p, s);
        else if (c == '[') rc = parse_class(p, s);
        else if (c == '.') {
            p->pos++;
            rc = push(p, s, (GrammarElement){.kind = GRAMMAR_CHARS, .negated = true});
        } else if (c == '(') rc = parse_group(p, rule, s);
        else if (is_word_char(c)) rc = parse_reference(p, s);
        else if (c == '*' || c == '+' || c == '?' || c == '{') {
            rc = parse_repetition(p, rule, s, atom_start, nested);
            start = -1;  // a repeated item is not repeated again without a group: x** is refused
        } else if (c == '<') {
            rc = parse_token_reference(p, s);
        } else if (c == '!') {
            return fail(p, p->pos, "negated token references ('!<…>') are not supported");
        } else {
            return 0;
        }
        if (rc < 0) return -1;
        atom_start = start;
        skip_space(p, nested);
    }
}

static int parse_alternatives(Parser *p, int rule, bool nested) {
    for (;;) {
        Sequence s = {0};
        if (parse_sequence(p, rule, &s, nested) < 0 || add_alternative(p, rule, &s) < 0) {
            free(s.el);
            return -1;
        }
        if (peek(p) != '|') return 0;
        p->pos++;
        skip_space(p, true);
    }
}

static int parse_rule(Parser *p) {
    size_t at = p->pos;
    if (!is_word_char(peek(p))) return fail(p, at, "expected a rule name");
    while (is_word_char(peek(p))) p->pos++;
    int r = rule_named(p, p->text + at, p->pos - at, at);
    if (r < 0) return out_of_memory(p);
    if (p->rules[r].defined) return fail(p, at, "rule '%s' is defined twice", p->rules[r].name);
    p->rules[r].defined = true;
    p->rules[r].at = at;
    skip_space(p, false);
    if (p->n - p->pos < 3 || memcmp(p->text + p->pos, "::=", 3) != 0)
        return fail(p, p->pos, "expected '::=' after the rule name '%s'", p->rules[r].name);
    p->pos += 3;
    skip_space(p, true);
    if (parse_alternatives(p, r, false) < 0) return -1;
    if (peek(p) == ')') return fail(p, p->pos, "')' without '('");
    if (peek(p) != -1 && peek(p) != '\n' && peek(p) != '\r')
        return fail(p, p->pos, "unexpected '%c' in rule '%s'", peek(p), p->rules[r].name);
    skip_space(p, true);
    return 0;
}

// ---- the grammar as a whole -----------------------------------------------------------------------------------------

// Writes the drafts out as one Grammar: every alternative's elements followed by an END, rule by rule.
static Grammar *flatten(Parser *p) {
    Grammar *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    int n_alts = 0;
    long n_el = 0;
    for (int r = 0; r < p->n_rules; r++) {
        n_alts += p->rules[r].n_alts;
        for (int a = 0; a < p->rules[r].n_alts; a++) n_el += p->rules[r].alts[a].n + 1;
    }
    g->rules = calloc((size_t)p->n_rules, sizeof *g->rules);
    g->alt_start = malloc((size_t)n_alts * sizeof *g->alt_start + 1);
    g->elements = malloc((size_t)n_el * sizeof *g->elements + 1);
    g->ranges = malloc((size_t)p->n_ranges * sizeof *g->ranges + 1);
    if (!g->rules || !g->alt_start || !g->elements || !g->ranges) {
        grammar_free(g);
        return NULL;
    }
    g->n_rules = p->n_rules;
    if (p->n_ranges) memcpy(g->ranges, p->ranges, (size_t)p->n_ranges * sizeof *g->ranges);
    g->n_ranges = p->n_ranges;
    for (int r = 0; r < p->n_rules; r++) {
        RuleDraft *d = &p->rules[r];
        g->rules[r] = (GrammarRule){.name = d->name, .first_alt = g->n_alts, .n_alts = d->n_alts,
                                    .repeats_left = d->repeats_left, .repeat_tail = d->repeat_tail};
        d->name = NULL;
        for (int a = 0; a < d->n_alts; a++) {
            g->alt_start[g->n_alts++] = g->n_elements;
            if (d->alts[a].n)
                memcpy(g->elements + g->n_elements, d->alts[a].el, (size_t)d->alts[a].n * sizeof *g->elements);
            g->n_elements += d->alts[a].n;
            g->elements[g->n_elements++] = (GrammarElement){.kind = GRAMMAR_END};
        }
    }
    return g;
}

// nullable[r]: rule r derives the empty text. A least fixed point: no rule is, until one of its alternatives holds
// only references to rules that are.
static void find_nullable(const Grammar *g, bool *nullable) {
    for (bool changed = true; changed;) {
        changed = false;
        for (int r = 0; r < g->n_rules; r++) {
            for (int a = 0; a < g->rules[r].n_alts && !nullable[r]; a++) {
                const GrammarElement *e = g->elements + g->alt_start[g->rules[r].first_alt + a];
                while (e->kind == GRAMMAR_RULE && nullable[e->first]) e++;
                if (e->kind == GRAMMAR_END) nullable[r] = changed = true;
            }
        }
    }
}

// A rule on the search's path, and where in it the search stands: alternative `alt`, element `at` (−1: its start).
typedef struct {
    int rule, alt, at;
} Visit;

// Depth-first search from `from` along "r begins with s" (s referenced after only nullable elements), iterative (a
// chain of repetition rules is thousands deep): a rule met again while it is on the path is left-recursive. colour:
// 0 unseen, 1 on the path, 2 done; path: room for every rule. Returns the rule found, or -1.
static int left_cycle(const Grammar *g, const bool *nullable, unsigned char *colour, Visit *path, int from) {
    int top = 0;
    path[0] = (Visit){from, 0, -1};
    colour[from] = 1;
    while (top >= 0) {
        Visit *v = &path[top];
        const GrammarRule *rule = &g->rules[v->rule];
        if (v->at >= 0 && nullable[g->elements[v->at].first]) {
            v->at++;  // the rule referenced there may derive nothing: the next element begins the rule too
        } else if (v->at >= 0 || v->alt == rule->n_alts) {
            if (v->at >= 0) v->alt++;  // the next alternative, or (all seen) the rule is done
            v->at = -1;
            if (v->alt < rule->n_alts) continue;
            colour[v->rule] = 2;
            top--;
            continue;
        } else {
            v->at = g->alt_start[rule->first_alt + v->alt];
        }
        const GrammarElement *e = &g->elements[v->at];
        if (e->kind != GRAMMAR_RULE) {
            v->alt++;
            v->at = -1;
            if (v->alt == rule->n_alts) {
                colour[v->rule] = 2;
                top--;
            }
            continue;
        }
        if (colour[e->first] == 1) return e->first;
        if (colour[e->first] == 0) {
            colour[e->first] = 1;
            path[++top] = (Visit){e->first, 0, -1};
        }
    }
    return -1;
}

static int check_grammar(Parser *p, Grammar *g) {
    for (int r = 0; r < p->n_rules; r++)
        if (!p->rules[r].defined) return fail(p, p->rules[r].at, "rule '%s' is used but not defined", g->rules[r].name);
    g->root = -1;
    for (int r = 0; r < g->n_rules; r++)
        if (strcmp(g->rules[r].name, "root") == 0) g->root = r;
    if (g->root < 0) return err_fmt(p->err, "%s: no rule named 'root' (where the grammar starts)", p->source);
    bool *nullable = calloc((size_t)g->n_rules, sizeof *nullable);
    unsigned char *colour = calloc((size_t)g->n_rules, 1);
    Visit *path = malloc((size_t)g->n_rules * sizeof *path);
    int cycle = -1;
    if (nullable && colour && path) {
        find_nullable(g, nullable);
        for (int r = 0; r < g->n_rules && cycle < 0; r++)
            if (colour[r] == 0) cycle = left_cycle(g, nullable, colour, path, r);
    }
    bool ok = nullable && colour && path;
    free(nullable);
    free(colour);
    free(path);
    if (!ok) return out_of_memory(p);
    if (cycle >= 0)
        return fail(p, p->rules[cycle].at,
                    "rule '%s' is left-recursive: it can reach itself without reading a character", g->rules[cycle].name);
    return 0;
}

static void free_parser(Parser *p) {
    for (int r = 0; r < p->n_rules; r++) {
        free(p->rules[r].name);
        for (int a = 0; a < p->rules[r].n_alts; a++) free(p->rules[r].alts[a].el);
        free(p->rules[r].alts);
    }
    free(p->rules);
    free(p->ranges);
    for (int k = 0; k < p->n_markers; k++) free(p->markers[k]);
    bytesmap_free(&p->names);
}

Grammar *grammar_parse(const char *text, size_t n, const char *source, Err *err) {
    Parser p = {.text = text, .n = n, .source = source, .err = err};
    Grammar *g = NULL;
    if (bytesmap_init(&p.names) < 0) {
        err_fmt(err, "%s: out of memory", source);
        return NULL;
    }
    skip_space(&p, true);
    while (peek(&p) != -1)
        if (parse_rule(&p) < 0) goto done;
    g = flatten(&p);
    if (!g) {
        out_of_memory(&p);
    } else if (check_grammar(&p, g) < 0) {
        grammar_free(g);
        g = NULL;
    } else {  // the markers handed over
        memcpy(g->markers, p.markers, sizeof p.markers);
        g->n_markers = p.n_markers;
        p.n_markers = 0;
    }
done:
    free_parser(&p);
    return g;
}

void grammar_free(Grammar *g) {
    if (!g) return;
    for (int r = 0; r < g->n_rules; r++) free(g->rules[r].name);
    free(g->rules);
    free(g->alt_start);
    free(g->elements);
    free(g->ranges);
    for (int k = 0; k < g->n_markers; k++) free(g->markers[k]);
    free(g);
}
