// regex.c — a JSON Schema `pattern` as a GBNF expression (json_schema.c): the regular expression's strings, written
// as they stand inside a JSON string (a quote as \", a control character as \u00XX).
//
// The subset (refused by name beyond it): anchored ^…$ (a schema's pattern is a search; anchoring makes it a
// match, as llama.cpp's converter requires); literals and escaped metacharacters; `.` (any character but a line
// break: here, any that JSON needs no escape for); classes [a-z] and [^…] without quotes, backslashes or control
// characters; \d \w \s (\s: a space) and \D \W \S; groups ( … ) and (?: … ); `|`; quantifiers * + ? {m} {m,} {m,n}.
// Not: lazy quantifiers, backreferences, lookaround, named groups, \b, anchors inside.
#include <string.h>

#include "base/utf8.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"

typedef struct {
    const char *s, *where;
    size_t n, pos;
    Text *out;
    Err *err;
    int depth;
} Regex;

static int refuse(Regex *r, const char *what) {
    return err_fmt(r->err, "%s: pattern \"%.200s\": %s (docs/structured.md lists the subset)", r->where, r->s, what);
}

static int peek(const Regex *r) { return r->pos < r->n ? (unsigned char)r->s[r->pos] : -1; }

// A literal character, as JSON writes it inside a string.
static void literal(Regex *r, uint32_t cp) {
    char buf[8];
    if (cp == '"' || cp == '\\') {
        buf[0] = '\\';
        buf[1] = (char)cp;
        text_literal(r->out, buf, 2);
    } else if (cp < 0x20) {
        snprintf(buf, sizeof buf, "\\u%04x", (unsigned)cp);
        text_literal(r->out, buf, 6);
    } else {
        text_literal(r->out, buf, (size_t)utf8_encode(cp, buf));
    }
}

static const char UNESCAPED[] = "\"\\\\\\x00-\\x1F";  // what a class must leave out: JSON escapes these

// \d \w \s and their negations as a class's items (without brackets); false if c is none of them.
static bool shorthand(int c, const char **items, bool *negated) {
    *negated = c == 'D' || c == 'W' || c == 'S';
    if (c == 'd' || c == 'D') *items = "0-9";
    else if (c == 'w' || c == 'W') *items = "a-zA-Z0-9_";
    else if (c == 's' || c == 'S') *items = " ";
    else return false;
    return true;
}

static bool metachar(int c) { return c != -1 && strchr(".^$|?*+()[]{}\\/-", c); }

// After '[': the class up to ']'.
static int class_atom(Regex *r) {
    bool negated = peek(r) == '^';
    if (negated) r->pos++;
    text_add(r->out, negated ? "[^" : "[");
    bool empty = true;
    while (peek(r) != ']') {
        int c = peek(r);
        if (c == -1) return refuse(r, "an unterminated class");
        uint32_t cp;
        if (c == '\\') {
            r->pos++;
            const char *items;
            bool neg;
            c = peek(r);
            r->pos++;
            if (shorthand(c, &items, &neg)) {
                if (neg) return refuse(r, "\\D, \\W or \\S inside a class");
                text_add(r->out, "%s", items);
                empty = false;
                continue;
            }
            if (!metachar(c) || c == '\\') return refuse(r, "an escape in a class other than \\d \\w \\s or a metacharacter");
            cp = (uint32_t)c;
        } else {
            int len = utf8_decode((const unsigned char *)r->s + r->pos, r->n - r->pos, &cp);
            if (len == 0) return refuse(r, "invalid UTF-8");
            r->pos += (size_t)len;
        }
        if (cp == '"' || cp < 0x20) return refuse(r, "a class with a quote or a control character");
        if (peek(r) == '-' && r->pos + 1 < r->n && r->s[r->pos + 1] != ']') {
            text_class_char(r->out, cp);
            text_add(r->out, "-");
            r->pos++;
            uint32_t hi;
            int len = utf8_decode((const unsigned char *)r->s + r->pos, r->n - r->pos, &hi);
            if (len == 0 || hi == '\\' || hi == '"' || hi < cp) return refuse(r, "a class range that is not plain");
            r->pos += (size_t)len;
            cp = hi;
        }
        text_class_char(r->out, cp);
        empty = false;
    }
    r->pos++;
    if (empty) return refuse(r, "an empty class");
    if (negated) text_add(r->out, "%s", UNESCAPED);
    text_add(r->out, "]");
    return 0;
}

static int alternatives(Regex *r);

// One item: a group, a class, '.', an escape or a literal character. Like quantifier, sequence and alternatives: -1
// refused, else whether it can match the empty string (1) or not (0).
static int atom(Regex *r) {
    int c = peek(r);
    r->pos++;
    if (c == '(') {
        if (peek(r) == '?') {
            if (r->pos + 1 < r->n && r->s[r->pos + 1] == ':') r->pos += 2;
            else return refuse(r, "lookaround or a named group");
        }
        if (++r->depth > 64) return refuse(r, "groups nested more than 64 deep");
        text_add(r->out, "(");
        const int nullable = alternatives(r);
        if (nullable < 0) return -1;
        if (peek(r) != ')') return refuse(r, "'(' without ')'");
        r->pos++;
        r->depth--;
        text_add(r->out, ")");
        return nullable;
    }
    if (c == '[') return class_atom(r);
    if (c == '.') {
        text_add(r->out, "[^%s]", UNESCAPED);
        return 0;
    }
    if (c == '\\') {
        const char *items;
        bool negated;
        c = peek(r);
        r->pos++;
        if (shorthand(c, &items, &negated)) {
            text_add(r->out, "[%s%s%s]", negated ? "^" : "", items, negated ? UNESCAPED : "");
            return 0;
        }
        if (!metachar(c)) return refuse(r, "an escape other than \\d \\w \\s \\D \\W \\S or a metacharacter");
        literal(r, (uint32_t)c);
        return 0;
    }
    if (c == ')' || c == '*' || c == '+' || c == '?' || c == '{' || c == '^' || c == '$')
        return refuse(r, "a metacharacter out of place (a quantifier with nothing before it, or ^ $ inside)");
    uint32_t cp;
    r->pos--;
    int len = utf8_decode((const unsigned char *)r->s + r->pos, r->n - r->pos, &cp);
    if (len == 0) return refuse(r, "invalid UTF-8");
    r->pos += (size_t)len;
    literal(r, cp);
    return 0;
}

// A quantifier after an item (`nullable` if it can match nothing), if any, copied as GBNF writes it. Repeating
// without bound an item that can match nothing, (a|)+, would make a rule that reaches itself without reading a
// character, which the grammar refuses: refused here by name.
static int quantifier(Regex *r, int nullable) {
    int c = peek(r);
    if ((c == '*' || c == '+') && nullable) return refuse(r, "a group that can match nothing, repeated without bound");
    if (c == '*' || c == '+' || c == '?') {
        r->pos++;
        text_add(r->out, "%c", c);
        nullable |= c != '+';
    } else if (c == '{') {  // {m}, {m,}, {m,n} or {,n}, each count at most GRAMMAR_MAX_REPEAT
        long m = -1, n = -1;
        bool comma = false;
        r->pos++;
        for (long *count = &m; peek(r) != '}'; r->pos++) {
            if (peek(r) == ',' && !comma) {
                comma = true;
                count = &n;
            } else if (peek(r) >= '0' && peek(r) <= '9' && (*count < 0 || *count <= GRAMMAR_MAX_REPEAT)) {
                *count = (*count < 0 ? 0 : *count * 10) + (peek(r) - '0');
            } else {
                return refuse(r, "a malformed {m,n}");
            }
        }
        r->pos++;
        if ((m < 0 && n < 0) || m > GRAMMAR_MAX_REPEAT || n > GRAMMAR_MAX_REPEAT || (n >= 0 && m > n))
            return refuse(r, "a {m,n} out of range (0 ≤ m ≤ n ≤ 2000)");
        if (nullable && comma && n < 0) return refuse(r, "a group that can match nothing, repeated without bound");
        nullable |= m <= 0;
        text_add(r->out, "{%ld%s", m < 0 ? 0 : m, comma ? "," : "");
        if (n >= 0) text_add(r->out, "%ld", n);
        text_add(r->out, "}");
    } else {
        return nullable;
    }
    if (peek(r) == '?' || peek(r) == '+') return refuse(r, "a lazy or possessive quantifier");
    return nullable;
}

static int sequence(Regex *r) {
    text_add(r->out, "(\"\"");
    int nullable = 1;
    while (peek(r) != -1 && peek(r) != '|' && peek(r) != ')' && !(peek(r) == '$' && r->pos + 1 == r->n)) {
        text_add(r->out, " ");
        const int item = atom(r);
        const int repeated = item < 0 ? -1 : quantifier(r, item);
        if (repeated < 0) return -1;
        nullable &= repeated;
    }
    text_add(r->out, ")");
    return nullable;
}

static int alternatives(Regex *r) {
    int nullable = sequence(r);
    while (nullable >= 0 && peek(r) == '|') {
        r->pos++;
        text_add(r->out, " | ");
        const int next = sequence(r);
        nullable = next < 0 ? -1 : nullable | next;
    }
    return nullable;
}

int regex_to_gbnf(Text *out, const char *pattern, const char *where, Err *err) {
    Regex r = {.s = pattern, .n = strlen(pattern), .where = where, .out = out, .err = err};
    if (r.n < 2 || pattern[0] != '^' || pattern[r.n - 1] != '$')
        return refuse(&r, "not anchored: write it as ^…$");
    r.pos = 1;
    text_add(out, "(");
    if (alternatives(&r) < 0) return -1;
    if (r.pos != r.n - 1) return refuse(&r, "')' without '('");
    text_add(out, ")");
    return 0;
}
