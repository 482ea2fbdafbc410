// jinja_value.c — the interpreter's arena and values: strings with provenance, lists, dicts, and the conversions
// Python gives them (truth, ==, str(), repr(), json.dumps), since Jinja2 evaluates templates with Python's values.
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "chat/jinja_internal.h"

// ---- arena and failure ---------------------------------------------------------------------------------------

struct ArenaBlock {
    ArenaBlock *next;
    size_t size, used;
    _Alignas(max_align_t) unsigned char bytes[];
};

enum { ARENA_BLOCK = 64 << 10 };

void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n > a->limit - a->used) jinja_fail(a, 0, "the template needs more than %zu MiB", a->limit >> 20);
    ArenaBlock *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        b = malloc(sizeof *b + size);
        if (!b) jinja_fail(a, 0, "out of memory");
        *b = (ArenaBlock){.next = a->head, .size = size};
        a->head = b;
    }
    void *p = b->bytes + b->used;
    b->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void arena_free(Arena *a) {
    for (ArenaBlock *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

void jinja_fail(Arena *a, int line, const char *fmt, ...) {
    char msg[sizeof a->err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) err_fmt(a->err, "line %d: %s", line, msg);
    else err_fmt(a->err, "%s", msg);
    longjmp(*a->fail, 1);
}

// ---- strings --------------------------------------------------------------------------------------------------

Str str_lit(const char *p, size_t n) { return (Str){.p = p, .n = n}; }

Str str_copy(Arena *a, const char *p, size_t n, bool from_data) {
    char *q = arena_alloc(a, n + 1);
    if (n) memcpy(q, p, n);
    unsigned char *d = NULL;
    if (from_data && n) {
        d = arena_alloc(a, n);
        memset(d, 1, n);
    }
    return (Str){.p = q, .data = d, .n = n};
}

Str str_slice(Str s, size_t from, size_t to) {
    return (Str){.p = s.p + from, .data = s.data ? s.data + from : NULL, .n = to - from};
}

Str str_concat(Arena *a, Str x, Str y) {
    if (x.n == 0) return y;
    if (y.n == 0) return x;
    StrBuf b = {.arena = a, .limit = a->limit};
    sb_put(&b, x);
    sb_put(&b, y);
    return sb_str(&b);
}

bool str_any_data(Str s) {
    for (size_t i = 0; s.data && i < s.n; i++)
        if (s.data[i]) return true;
    return false;
}

bool str_eq(Str x, Str y) { return x.n == y.n && (x.n == 0 || memcmp(x.p, y.p, x.n) == 0); }
bool str_eq_c(Str x, const char *c) { return str_eq(x, str_lit(c, strlen(c))); }

uint32_t str_cp_at(Str s, size_t off, int *len) {
    uint32_t cp = 0;
    *len = utf8_decode((const unsigned char *)s.p + off, s.n - off, &cp);
    if (*len == 0) *len = 1;  // not reached: strings are valid UTF-8
    return cp;
}

size_t str_chars(Str s) {
    size_t k = 0;
    for (size_t i = 0; i < s.n; i++) k += ((unsigned char)s.p[i] & 0xC0) != 0x80;
    return k;
}

size_t str_char_offset(Str s, size_t k) {
    size_t i = 0;
    for (; i < s.n; i++)
        if (((unsigned char)s.p[i] & 0xC0) != 0x80 && k-- == 0) return i;
    return s.n;
}

bool cp_is_space(uint32_t cp) {
    return (cp >= 9 && cp <= 13) || (cp >= 28 && cp <= 32) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

// ---- string buffers -------------------------------------------------------------------------------------------

void sb_put_n(StrBuf *b, const char *p, size_t n, bool from_data) {
    if (n > b->limit - b->n) jinja_fail(b->arena, b->line, "the rendered text grows past %zu MiB", b->limit >> 20);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1) cap *= 2;
        char *np = arena_alloc(b->arena, cap);
        unsigned char *nd = arena_alloc(b->arena, cap);
        if (b->n) {
            memcpy(np, b->p, b->n);
            memcpy(nd, b->data, b->n);
        }
        b->p = np;
        b->data = nd;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    memset(b->data + b->n, from_data, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void sb_put(StrBuf *b, Str s) {
    size_t at = b->n;
    sb_put_n(b, s.p, s.n, false);
    if (s.data) memcpy(b->data + at, s.data, s.n);
}

void sb_put_c(StrBuf *b, const char *c, bool from_data) { sb_put_n(b, c, strlen(c), from_data); }

Str sb_str(const StrBuf *b) {
    if (b->n == 0) return str_lit("", 0);
    return (Str){.p = b->p, .data = b->data, .n = b->n};
}

// ---- lists and dicts ------------------------------------------------------------------------------------------

List *list_new(Arena *a, size_t n) {
    List *l = arena_alloc(a, sizeof *l);
    l->items = arena_alloc(a, (n ? n : 1) * sizeof *l->items);
    l->n = n;
    return l;
}

Dict *dict_new(Arena *a) { return arena_alloc(a, sizeof(Dict)); }

Value *dict_get(const Dict *d, Str key) {
    for (size_t i = 0; i < d->n; i++)
        if (str_eq(d->keys[i], key)) return &d->values[i];
    return NULL;
}

void dict_set(Arena *a, Dict *d, Str key, Value v) {
    Value *old = dict_get(d, key);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        Str *keys = arena_alloc(a, cap * sizeof *keys);
        Value *values = arena_alloc(a, cap * sizeof *values);
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof *keys);
            memcpy(values, d->values, d->n * sizeof *values);
        }
        d->keys = keys;
        d->values = values;
        d->cap = cap;
    }
    d->keys[d->n] = key;
    d->values[d->n++] = v;
}

enum { MAX_JSON_DEPTH = 64 };

Value value_from_json(Arena *a, const json_t *j, bool from_data, int depth) {
    if (depth > MAX_JSON_DEPTH) jinja_fail(a, 0, "variables nested deeper than %d", MAX_JSON_DEPTH);
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        Dict *d = dict_new(a);
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)j, key, v) {
            dict_set(a, d, str_copy(a, key, strlen(key), from_data), value_from_json(a, v, from_data, depth + 1));
        }
        return (Value){.kind = V_DICT, .dict = d};
    }
    case JSON_ARRAY: {
        List *l = list_new(a, json_array_size(j));
        for (size_t i = 0; i < l->n; i++) l->items[i] = value_from_json(a, json_array_get(j, i), from_data, depth + 1);
        return (Value){.kind = V_LIST, .list = l};
    }
    case JSON_STRING: return v_str(str_copy(a, json_string_value(j), json_string_length(j), from_data));
    case JSON_INTEGER: return v_int(json_integer_value(j));
    case JSON_REAL: return v_float(json_real_value(j));
    case JSON_TRUE: return v_bool(true);
    case JSON_FALSE: return v_bool(false);
    default: return v_none();
    }
}

// ---- Python's semantics ---------------------------------------------------------------------------------------

const char *value_kind_name(ValueKind k) {
    static const char *names[] = {"undefined", "none", "bool", "int", "float", "string", "list", "dict",
                                  "namespace"};
    return names[k];
}

bool value_truthy(Value v) {
    switch (v.kind) {
    case V_BOOL: return v.b;
    case V_INT: return v.i != 0;
    case V_FLOAT: return v.f != 0;
    case V_STRING: return v.s.n > 0;
    case V_LIST: return v.list->n > 0;
    case V_DICT: return v.dict->n > 0;
    case V_NAMESPACE: return true;
    default: return false;
    }
}

static bool is_number(Value v) { return v.kind == V_BOOL || v.kind == V_INT || v.kind == V_FLOAT; }
static double as_double(Value v) { return v.kind == V_FLOAT ? v.f : v.kind == V_INT ? (double)v.i : v.b; }

bool value_equal(Value x, Value y) {
    if (is_number(x) && is_number(y)) {
        if (x.kind != V_FLOAT && y.kind != V_FLOAT)
            return (x.kind == V_INT ? x.i : x.b) == (y.kind == V_INT ? y.i : y.b);
        return as_double(x) == as_double(y);
    }
    if (x.kind != y.kind) return false;
    switch (x.kind) {
    case V_STRING: return str_eq(x.s, y.s);
    case V_LIST:
        if (x.list->n != y.list->n) return false;
        for (size_t i = 0; i < x.list->n; i++)
            if (!value_equal(x.list->items[i], y.list->items[i])) return false;
        return true;
    case V_DICT:
        if (x.dict->n != y.dict->n) return false;
        for (size_t i = 0; i < x.dict->n; i++) {
            Value *w = dict_get(y.dict, x.dict->keys[i]);
            if (!w || !value_equal(x.dict->values[i], *w)) return false;
        }
        return true;
    case V_NAMESPACE: return x.dict == y.dict;
    default: return true;  // none == none, undefined == undefined
    }
}

// Python's repr() of a float: the shortest digits that read back as f, in fixed notation for decimal exponents
// −4 ≤ e < 16 (with ".0" when integral), else d.ddde±XX.
static void float_repr(double f, char out[40], bool json) {
    if (isnan(f) || isinf(f)) {
        snprintf(out, 40, "%s", isnan(f) ? (json ? "NaN" : "nan") : f > 0 ? (json ? "Infinity" : "inf")
                                                                          : (json ? "-Infinity" : "-inf"));
        return;
    }
    char e_form[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e_form, sizeof e_form, "%.*e", p, f);
        if (strtod(e_form, NULL) == f) break;
    }
    char digits[24];
    size_t nd = 0;
    const char *s = e_form + (e_form[0] == '-');
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    digits[nd] = '\0';
    int exp = atoi(s + 1);
    char *o = out;
    if (f < 0 || (f == 0 && signbit(f))) *o++ = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            o += sprintf(o, "0.");
            for (int k = -1; k > exp; k--) *o++ = '0';
            sprintf(o, "%s", digits);
        } else {
            for (int k = 0; k <= exp; k++) *o++ = k < (int)nd ? digits[k] : '0';
            *o++ = '.';
            if ((int)nd > exp + 1) sprintf(o, "%s", digits + exp + 1);
            else sprintf(o, "0");
        }
        return;
    }
    *o++ = digits[0];
    if (nd > 1) o += sprintf(o, ".%s", digits + 1);
    sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

// Python's repr() of a string: single quotes unless it holds ' and no ", non-printable characters escaped.
static void string_repr(StrBuf *b, Str s) {
    bool data = str_any_data(s);
    bool has_single = memchr(s.p, '\'', s.n) != NULL, has_double = memchr(s.p, '"', s.n) != NULL;
    char q = has_single && !has_double ? '"' : '\'';
    sb_put_n(b, &q, 1, false);
    for (size_t i = 0; i < s.n;) {
        int len;
        uint32_t cp = str_cp_at(s, i, &len);
        char esc[16] = "";
        utf8proc_category_t c = utf8proc_category((utf8proc_int32_t)cp);
        if (cp == '\\' || cp == (uint32_t)q) snprintf(esc, sizeof esc, "\\%c", (char)cp);
        else if (cp == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (cp == '\r') snprintf(esc, sizeof esc, "\\r");
        else if (cp == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (cp != ' ' && (c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF || c == UTF8PROC_CATEGORY_CS ||
                               c == UTF8PROC_CATEGORY_CO || c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZS ||
                               c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP))
            snprintf(esc, sizeof esc, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
        if (esc[0]) sb_put_c(b, esc, data);
        else sb_put_n(b, s.p + i, (size_t)len, data);
        i += (size_t)len;
    }
    sb_put_n(b, &q, 1, false);
}

// The dicts whose items are being printed, innermost first: a namespace that holds itself (`{% set ns.me = ns %}`)
// prints as Python prints a dict that contains itself, {...} where it recurs.
typedef struct Printing {
    const Dict *dict;
    const struct Printing *outer;
} Printing;

static void print_value(Arena *a, StrBuf *b, Value v, bool repr, const Printing *open, int depth);

static void items_to_str(Arena *a, StrBuf *b, const Dict *d, const Printing *open, int depth) {
    for (const Printing *p = open; p; p = p->outer)
        if (p->dict == d) {
            sb_put_c(b, "{...}", false);
            return;
        }
    const Printing here = {.dict = d, .outer = open};
    sb_put_c(b, "{", false);
    for (size_t i = 0; i < d->n; i++) {
        if (i) sb_put_c(b, ", ", false);
        string_repr(b, d->keys[i]);
        sb_put_c(b, ": ", false);
        print_value(a, b, d->values[i], true, &here, depth);
    }
    sb_put_c(b, "}", false);
}

// depth: the lists and dicts around v. A loop can nest values as deep as it runs (`{% set ns.l = [ns.l] %}`), so
// printing refuses past MAX_JSON_DEPTH, as tojson does, instead of recursing without bound.
static void print_value(Arena *a, StrBuf *b, Value v, bool repr, const Printing *open, int depth) {
    char num[40];
    if ((v.kind == V_LIST || v.kind == V_DICT || v.kind == V_NAMESPACE) && depth >= MAX_JSON_DEPTH)
        jinja_fail(a, 0, "a value nested deeper than %d to print", MAX_JSON_DEPTH);
    switch (v.kind) {
    case V_UNDEFINED: return;
    case V_NONE: sb_put_c(b, "None", false); return;
    case V_BOOL: sb_put_c(b, v.b ? "True" : "False", false); return;
    case V_INT: snprintf(num, sizeof num, "%" PRId64, v.i); sb_put_c(b, num, false); return;
    case V_FLOAT: float_repr(v.f, num, false); sb_put_c(b, num, false); return;
    case V_STRING:
        if (repr) string_repr(b, v.s);
        else sb_put(b, v.s);
        return;
    case V_LIST:
        sb_put_c(b, v.list->tuple ? "(" : "[", false);
        for (size_t i = 0; i < v.list->n; i++) {
            if (i) sb_put_c(b, ", ", false);
            print_value(a, b, v.list->items[i], true, open, depth + 1);
        }
        sb_put_c(b, v.list->tuple ? (v.list->n == 1 ? ",)" : ")") : "]", false);
        return;
    case V_DICT: items_to_str(a, b, v.dict, open, depth + 1); return;
    case V_NAMESPACE:
        sb_put_c(b, "<Namespace ", false);
        items_to_str(a, b, v.dict, open, depth + 1);
        sb_put_c(b, ">", false);
        return;
    }
}

void value_to_str(Arena *a, StrBuf *b, Value v, bool repr) { print_value(a, b, v, repr, NULL, 0); }

// ---- json.dumps -----------------------------------------------------------------------------------------------

static void json_put_string(StrBuf *b, Str s) {
    bool data = str_any_data(s);
    sb_put_c(b, "\"", false);
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        char esc[8] = "";
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (c == '\r') snprintf(esc, sizeof esc, "\\r");
        else if (c == '\t') snprintf(esc, sizeof esc, "\\t");
        else if (c == '\b') snprintf(esc, sizeof esc, "\\b");
        else if (c == '\f') snprintf(esc, sizeof esc, "\\f");
        else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c);
        if (esc[0]) sb_put_c(b, esc, data);
        else sb_put_n(b, s.p + i, 1, data);
    }
    sb_put_c(b, "\"", false);
}

// A newline and the indentation of level, between items when json.dumps has an indent.
static void json_break(StrBuf *b, int indent, int level) {
    sb_put_c(b, "\n", false);
    for (int k = 0; k < indent * level; k++) sb_put_c(b, " ", false);
}

void value_to_json(Arena *a, StrBuf *b, Value v, int indent, int level, int line) {
    char num[40];
    const char *sep = indent >= 0 ? "," : ", ";
    if (level > MAX_JSON_DEPTH) jinja_fail(a, line, "tojson: a value nested deeper than %d", MAX_JSON_DEPTH);
    switch (v.kind) {
    case V_NONE: sb_put_c(b, "null", false); return;
    case V_BOOL: sb_put_c(b, v.b ? "true" : "false", false); return;
    case V_INT: snprintf(num, sizeof num, "%" PRId64, v.i); sb_put_c(b, num, false); return;
    case V_FLOAT: float_repr(v.f, num, true); sb_put_c(b, num, false); return;
    case V_STRING: json_put_string(b, v.s); return;
    case V_LIST:
    case V_DICT: {
        bool list = v.kind == V_LIST;
        size_t n = list ? v.list->n : v.dict->n;
        sb_put_c(b, list ? "[" : "{", false);
        for (size_t i = 0; i < n; i++) {
            if (i) sb_put_c(b, sep, false);
            if (indent >= 0) json_break(b, indent, level + 1);
            if (!list) {
                json_put_string(b, v.dict->keys[i]);
                sb_put_c(b, ": ", false);
            }
            value_to_json(a, b, list ? v.list->items[i] : v.dict->values[i], indent, level + 1, line);
        }
        if (indent >= 0 && n) json_break(b, indent, level);
        sb_put_c(b, list ? "]" : "}", false);
        return;
    }
    default: jinja_fail(a, line, "tojson: a %s value is not JSON serializable", value_kind_name(v.kind));
    }
}
