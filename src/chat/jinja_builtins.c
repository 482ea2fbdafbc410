// jinja_builtins.c — the filters, tests, methods and global functions that published chat templates call, with
// Jinja2's and Python's meanings:
//
//   filters    trim length count tojson join upper lower capitalize first last default d string int float list
//              reverse replace safe items abs map select reject selectattr rejectattr
//   tests      defined undefined none string number integer float boolean mapping iterable sequence true false
//              equalto eq ne odd even divisibleby in lower upper
//   methods    strings: strip lstrip rstrip split startswith endswith upper lower replace find;
//              dicts: items keys values get
//   functions  namespace(name=value, ...)  raise_exception(message)  strftime_now(format)  range(...)
//
// A result made from data (message content) stays data, byte by byte where the bytes are kept (trim, split,
// slices), and as a whole where they are transformed (upper, tojson).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "base/utf8.h"
#include "chat/jinja_internal.h"

// ---- arguments ------------------------------------------------------------------------------------------------

// Argument `pos` (positional) or keyword `key`; undefined when neither is given.
static Value arg(const Value *args, const Str *kw, int n, int pos, const char *key) {
    for (int k = 0; k < n; k++)
        if (kw && kw[k].n && key && str_eq_c(kw[k], key)) return args[k];
    int positional = 0;
    for (int k = 0; k < n; k++)
        if (!kw || !kw[k].n) {
            if (positional++ == pos) return args[k];
        }
    return v_undefined();
}

static Str want_str(Eval *e, const Node *n, Value v, const char *what) {
    if (v.kind != V_STRING)
        jinja_fail(e->arena, n->line, "%.*s: %s must be a string, not %s", (int)n->name.n, n->name.p, what,
                   value_kind_name(v.kind));
    return v.s;
}

static Value list_value(List *l) { return (Value){.kind = V_LIST, .list = l}; }

// ---- strings --------------------------------------------------------------------------------------------------

static bool in_chars(uint32_t cp, const Str *chars) {
    if (!chars) return cp_is_space(cp);
    for (size_t i = 0; i < chars->n;) {
        int len;
        if (str_cp_at(*chars, i, &len) == cp) return true;
        i += (size_t)len;
    }
    return false;
}

// Python's strip / lstrip / rstrip: chars NULL strips white space.
static Str strip(Str s, const Str *chars, bool left, bool right) {
    size_t from = 0, to = s.n;
    while (left && from < to) {
        int len;
        if (!in_chars(str_cp_at(s, from, &len), chars)) break;
        from += (size_t)len;
    }
    while (right && to > from) {
        size_t start = to - 1;
        while (start > from && ((unsigned char)s.p[start] & 0xC0) == 0x80) start--;
        int len;
        if (!in_chars(str_cp_at(s, start, &len), chars)) break;
        to = start;
    }
    return str_slice(s, from, to);
}

static Value strip_method(Eval *e, const Node *n, Str s, Value chars, bool left, bool right) {
    if (chars.kind == V_UNDEFINED || chars.kind == V_NONE) return v_str(strip(s, NULL, left, right));
    Str c = want_str(e, n, chars, "the characters");
    return v_str(strip(s, &c, left, right));
}

// Python's str.split(sep, maxsplit): without sep, runs of white space split and none is kept at either end.
static Value split(Eval *e, const Node *n, Str s, Value sep_v, Value max_v) {
    int64_t max = max_v.kind == V_INT ? max_v.i : -1;
    List *l = list_new(e->arena, 0);
    size_t cap = 0;
    bool by_space = sep_v.kind == V_UNDEFINED || sep_v.kind == V_NONE;
    Str sep = by_space ? str_lit("", 0) : want_str(e, n, sep_v, "the separator");
    if (!by_space && sep.n == 0) jinja_fail(e->arena, n->line, "split: empty separator");
    size_t pos = by_space ? strip(s, NULL, true, false).p - s.p : 0;
    for (;;) {
        size_t at = s.n, next = s.n;
        if (max < 0 || (int64_t)l->n < max) {
            if (by_space) {
                for (size_t i = pos; i < s.n;) {
                    int len;
                    if (cp_is_space(str_cp_at(s, i, &len))) {
                        at = i;
                        break;
                    }
                    i += (size_t)len;
                }
                next = at < s.n ? (size_t)(strip(str_slice(s, at, s.n), NULL, true, false).p - s.p) : s.n;
            } else {
                const char *f = memmem(s.p + pos, s.n - pos, sep.p, sep.n);
                if (f) {
                    at = (size_t)(f - s.p);
                    next = at + sep.n;
                }
            }
        }
        Str piece = str_slice(s, pos, at);
        if (by_space && at == s.n) piece = strip(piece, NULL, false, true);
        if (!(by_space && piece.n == 0)) {
            if (l->n == cap) {
                cap = cap ? 2 * cap : 8;
                Value *items = arena_alloc(e->arena, cap * sizeof *items);
                if (l->n) memcpy(items, l->items, l->n * sizeof *items);
                l->items = items;
            }
            l->items[l->n++] = v_str(piece);
        }
        if (at == s.n) break;
        pos = next;
        if (by_space && pos == s.n) break;
    }
    return list_value(l);
}

static Value replace(Eval *e, const Node *n, Str s, Value old_v, Value new_v, Value count_v) {
    Str old = want_str(e, n, old_v, "the old text"), new = want_str(e, n, new_v, "the new text");
    int64_t count = count_v.kind == V_INT ? count_v.i : -1;
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    size_t pos = 0;
    for (int64_t k = 0; count < 0 || k < count; k++) {
        if (old.n == 0) {  // Python inserts the new text around every character
            if (pos > s.n) break;
            sb_put(&b, new);
            int len = 0;
            if (pos < s.n) str_cp_at(s, pos, &len);
            sb_put(&b, str_slice(s, pos, pos + (size_t)len));
            pos += (size_t)len + (pos == s.n);
            continue;
        }
        const char *f = memmem(s.p + pos, s.n - pos, old.p, old.n);
        if (!f) break;
        sb_put(&b, str_slice(s, pos, (size_t)(f - s.p)));
        sb_put(&b, new);
        pos = (size_t)(f - s.p) + old.n;
    }
    if (pos < s.n) sb_put(&b, str_slice(s, pos, s.n));
    return v_str(sb_str(&b));
}

// upper (1), lower (-1) or capitalize (0: the first character upper, the rest lower), code point by code point.
static Value change_case(Eval *e, const Node *n, Str s, int how) {
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    bool data = str_any_data(s);
    for (size_t i = 0; i < s.n;) {
        int len;
        utf8proc_int32_t cp = (utf8proc_int32_t)str_cp_at(s, i, &len);
        bool up = how > 0 || (how == 0 && i == 0);
        cp = up ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
        char u[UTF8_MAX];
        sb_put_n(&b, u, (size_t)utf8_encode((uint32_t)cp, u), data);
        i += (size_t)len;
    }
    return v_str(sb_str(&b));
}

static Value to_string(Eval *e, const Node *n, Value v) {
    if (v.kind == V_STRING) return v;
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    value_to_str(e->arena, &b, v, false);
    return v_str(sb_str(&b));
}

// ---- filters --------------------------------------------------------------------------------------------------

static Value length(Eval *e, const Node *n, Value x) {
    switch (x.kind) {
    case V_STRING: return v_int((int64_t)str_chars(x.s));
    case V_LIST: return v_int((int64_t)x.list->n);
    case V_DICT:
    case V_NAMESPACE: return v_int((int64_t)x.dict->n);
    case V_UNDEFINED: return v_int(0);
    default: jinja_fail(e->arena, n->line, "length: a %s value has no length", value_kind_name(x.kind));
    }
}

static Value join(Eval *e, const Node *n, Value x, Value sep_v) {
    Str sep = sep_v.kind == V_UNDEFINED ? str_lit("", 0) : want_str(e, n, sep_v, "the separator");
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    if (x.kind != V_LIST) jinja_fail(e->arena, n->line, "join: a %s value, not a list", value_kind_name(x.kind));
    for (size_t i = 0; i < x.list->n; i++) {
        if (i) sb_put(&b, sep);
        value_to_str(e->arena, &b, x.list->items[i], false);
    }
    return v_str(sb_str(&b));
}

// A list's or string's items (for first, last, reverse, list).
static List *sequence(Eval *e, const Node *n, Value x) {
    if (x.kind == V_LIST) return x.list;
    if (x.kind == V_DICT) {
        List *l = list_new(e->arena, x.dict->n);
        for (size_t i = 0; i < l->n; i++) l->items[i] = v_str(x.dict->keys[i]);
        return l;
    }
    Str s = want_str(e, n, x, "the value");
    List *l = list_new(e->arena, str_chars(s));
    for (size_t i = 0, off = 0; i < l->n; i++) {
        size_t end = str_char_offset(s, i + 1);
        l->items[i] = v_str(str_slice(s, off, end));
        off = end;
    }
    return l;
}

static Value reverse(Eval *e, const Node *n, Value x) {
    List *items = sequence(e, n, x), *r = list_new(e->arena, items->n);
    for (size_t i = 0; i < items->n; i++) r->items[i] = items->items[items->n - 1 - i];
    if (x.kind != V_STRING) return list_value(r);
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    for (size_t i = 0; i < r->n; i++) sb_put(&b, r->items[i].s);
    return v_str(sb_str(&b));
}

static Value to_int(Value x, Value fallback) {
    if (x.kind == V_INT) return x;
    if (x.kind == V_BOOL) return v_int(x.b);
    if (x.kind == V_FLOAT && x.f > -9.2e18 && x.f < 9.2e18) return v_int((int64_t)x.f);
    if (x.kind == V_STRING && x.s.n && x.s.n < 64) {
        char buf[64], *end;
        memcpy(buf, x.s.p, x.s.n);
        buf[x.s.n] = '\0';
        long long v = strtoll(buf, &end, 10);
        while (*end == ' ') end++;
        if (*end == '\0' && end != buf) return v_int(v);
    }
    return fallback.kind == V_UNDEFINED ? v_int(0) : fallback;
}

// select / reject (test name and arguments), selectattr / rejectattr (attribute, then test and arguments),
// map (attribute=name, or a filter's name).
static Value select_or_map(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    List *items = x.kind == V_UNDEFINED ? list_new(e->arena, 0) : sequence(e, n, x);
    List *out = list_new(e->arena, items->n);
    out->n = 0;
    bool by_attr = str_eq_c(n->name, "selectattr") || str_eq_c(n->name, "rejectattr");
    bool keep_if = str_eq_c(n->name, "select") || str_eq_c(n->name, "selectattr");
    Value attr = str_eq_c(n->name, "map") ? arg(args, kw, n_args, 99, "attribute") : arg(args, kw, n_args, 0, NULL);
    int first_test = by_attr ? 1 : 0;
    Value test = arg(args, kw, n_args, first_test, NULL);
    Node call = {.kind = E_TEST, .line = n->line};
    if (test.kind == V_STRING) call.name = test.s;
    if (!str_eq_c(n->name, "map") && test.kind != V_UNDEFINED && !builtin_has_test(call.name))
        jinja_fail(e->arena, n->line, "%.*s: the test '%.*s' is not supported", (int)n->name.n, n->name.p,
                   (int)call.name.n < 40 ? (int)call.name.n : 40, call.name.p);
    for (size_t i = 0; i < items->n; i++) {
        Value item = items->items[i];
        if (str_eq_c(n->name, "map")) {
            if (attr.kind == V_STRING) {
                Value *v = item.kind == V_DICT ? dict_get(item.dict, attr.s) : NULL;
                out->items[out->n++] = v ? *v : v_undefined();
                continue;
            }
            Node f = {.kind = E_FILTER, .line = n->line,
                      .name = want_str(e, n, arg(args, kw, n_args, 0, NULL), "the filter")};
            if (!builtin_has_filter(f.name) || str_eq_c(f.name, "map"))
                jinja_fail(e->arena, n->line, "map: the filter '%.*s' is not supported", (int)f.name.n, f.name.p);
            out->items[out->n++] = builtin_filter(e, &f, item, NULL, NULL, 0);
            continue;
        }
        Value subject = item;
        if (by_attr) {
            Value *v = item.kind == V_DICT ? dict_get(item.dict, want_str(e, n, attr, "the attribute")) : NULL;
            subject = v ? *v : v_undefined();
        }
        bool pass = test.kind == V_UNDEFINED ? value_truthy(subject)
                                             : builtin_test(e, &call, subject, args + first_test + 1,
                                                            n_args - first_test - 1 > 0 ? n_args - first_test - 1 : 0);
        if (pass == keep_if) out->items[out->n++] = item;
    }
    return list_value(out);
}

static Value items_of(Eval *e, const Node *n, Value x) {
    if (x.kind == V_UNDEFINED) return list_value(list_new(e->arena, 0));
    if (x.kind != V_DICT) jinja_fail(e->arena, n->line, "items: a %s value, not a dict", value_kind_name(x.kind));
    List *l = list_new(e->arena, x.dict->n);
    for (size_t i = 0; i < l->n; i++) {
        List *pair = list_new(e->arena, 2);
        pair->tuple = true;
        pair->items[0] = v_str(x.dict->keys[i]);
        pair->items[1] = x.dict->values[i];
        l->items[i] = list_value(pair);
    }
    return list_value(l);
}

static Value tojson(Eval *e, const Node *n, Value x, Value indent) {
    if (indent.kind != V_UNDEFINED && indent.kind != V_NONE && indent.kind != V_INT)
        jinja_fail(e->arena, n->line, "tojson: indent must be an integer");
    StrBuf b = {.arena = e->arena, .limit = JINJA_TEXT_LIMIT, .line = n->line};
    int ind = indent.kind == V_INT ? (int)(indent.i < 0 ? 0 : indent.i > 64 ? 64 : indent.i) : -1;
    value_to_json(e->arena, &b, x, ind, 0, n->line);
    return v_str(sb_str(&b));
}

// Each filter's arguments: the value x, then args[0..n_args) (kw[k] names args[k] when given as a keyword).
typedef Value (*FilterFn)(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args);

static Value filter_default(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)e, (void)n;
    bool boolean = value_truthy(arg(args, kw, n_args, 1, "boolean"));
    Value fallback = arg(args, kw, n_args, 0, "default_value");
    if (x.kind == V_UNDEFINED || (boolean && !value_truthy(x)))
        return fallback.kind == V_UNDEFINED ? v_str(str_lit("", 0)) : fallback;
    return x;
}

static Value filter_length(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return length(e, n, x);
}

static Value filter_tojson(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    return tojson(e, n, x, arg(args, kw, n_args, 0, "indent"));
}

static Value filter_join(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    return join(e, n, x, arg(args, kw, n_args, 0, "d"));
}

static Value filter_string(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return to_string(e, n, x);
}

static Value filter_safe(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)e, (void)n, (void)args, (void)kw, (void)n_args;
    return x;
}

static Value filter_int(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)e, (void)n;
    return to_int(x, arg(args, kw, n_args, 0, "default"));
}

static Value filter_float(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)e, (void)n, (void)args, (void)kw, (void)n_args;
    if (x.kind == V_FLOAT) return x;
    Value i = to_int(x, v_none());
    return i.kind == V_INT ? v_float((double)i.i) : v_float(0);
}

static Value filter_items(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return items_of(e, n, x);
}

static Value filter_abs(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    if (x.kind == V_FLOAT) return v_float(x.f < 0 ? -x.f : x.f);
    if (x.kind == V_INT && x.i != INT64_MIN) return v_int(x.i < 0 ? -x.i : x.i);
    jinja_fail(e->arena, n->line, "abs: a %s value", value_kind_name(x.kind));
}

static Value filter_list(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return list_value(sequence(e, n, x));
}

static Value filter_reverse(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return reverse(e, n, x);
}

static Value filter_first(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    List *l = sequence(e, n, x);
    return l->n == 0 ? v_undefined() : l->items[0];
}

static Value filter_last(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    List *l = sequence(e, n, x);
    return l->n == 0 ? v_undefined() : l->items[l->n - 1];
}

static Value filter_trim(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    return strip_method(e, n, want_str(e, n, x, "the value"), arg(args, kw, n_args, 0, NULL), true, true);
}

static Value filter_upper(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return change_case(e, n, want_str(e, n, x, "the value"), 1);
}

static Value filter_lower(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return change_case(e, n, want_str(e, n, x, "the value"), -1);
}

static Value filter_capitalize(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return change_case(e, n, want_str(e, n, x, "the value"), 0);
}

static Value filter_replace(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    return replace(e, n, want_str(e, n, x, "the value"), arg(args, kw, n_args, 0, NULL),
                   arg(args, kw, n_args, 1, NULL), arg(args, kw, n_args, 2, "count"));
}

// The filters by name: the parser accepts these names only (builtin_has_filter), and builtin_filter runs them.
static const struct {
    const char *name;
    FilterFn run;
} FILTERS[] = {
    {"default", filter_default}, {"d", filter_default},         {"length", filter_length},
    {"count", filter_length},    {"tojson", filter_tojson},     {"join", filter_join},
    {"string", filter_string},   {"safe", filter_safe},         {"int", filter_int},
    {"float", filter_float},     {"items", filter_items},       {"abs", filter_abs},
    {"list", filter_list},       {"reverse", filter_reverse},   {"first", filter_first},
    {"last", filter_last},       {"map", select_or_map},        {"select", select_or_map},
    {"reject", select_or_map},   {"selectattr", select_or_map}, {"rejectattr", select_or_map},
    {"trim", filter_trim},       {"upper", filter_upper},       {"lower", filter_lower},
    {"capitalize", filter_capitalize}, {"replace", filter_replace},
};

static FilterFn find_filter(Str name) {
    for (size_t i = 0; i < sizeof FILTERS / sizeof FILTERS[0]; i++)
        if (str_eq_c(name, FILTERS[i].name)) return FILTERS[i].run;
    return NULL;
}

bool builtin_has_filter(Str name) { return find_filter(name) != NULL; }

Value builtin_filter(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args) {
    const FilterFn run = find_filter(n->name);
    if (!run) jinja_fail(e->arena, n->line, "the filter '%.*s' is not supported", (int)n->name.n, n->name.p);
    return run(e, n, x, args, kw, n_args);
}

// ---- tests ----------------------------------------------------------------------------------------------------

static bool all_cased(Str s, int want_upper) {
    bool any = false;
    for (size_t i = 0; i < s.n;) {
        int len;
        utf8proc_int32_t cp = (utf8proc_int32_t)str_cp_at(s, i, &len);
        bool lower = utf8proc_toupper(cp) != cp, upper = utf8proc_tolower(cp) != cp;
        if ((want_upper && lower) || (!want_upper && upper)) return false;
        any |= lower || upper;
        i += (size_t)len;
    }
    return any;
}

static bool is_defined(Value x) { return x.kind != V_UNDEFINED; }
static bool is_undefined(Value x) { return x.kind == V_UNDEFINED; }
static bool is_none(Value x) { return x.kind == V_NONE; }
static bool is_string(Value x) { return x.kind == V_STRING; }
static bool is_number(Value x) { return x.kind == V_INT || x.kind == V_FLOAT || x.kind == V_BOOL; }
static bool is_integer(Value x) { return x.kind == V_INT; }
static bool is_float(Value x) { return x.kind == V_FLOAT; }
static bool is_boolean(Value x) { return x.kind == V_BOOL; }
static bool is_true(Value x) { return x.kind == V_BOOL && x.b; }
static bool is_false(Value x) { return x.kind == V_BOOL && !x.b; }
static bool is_mapping(Value x) { return x.kind == V_DICT; }
static bool is_sequence(Value x) { return x.kind == V_STRING || x.kind == V_LIST || x.kind == V_DICT; }
static bool is_iterable(Value x) { return is_sequence(x) || x.kind == V_UNDEFINED; }
static bool is_lower(Value x) { return x.kind == V_STRING && all_cased(x.s, 0); }
static bool is_upper(Value x) { return x.kind == V_STRING && all_cased(x.s, 1); }

static bool is_equal_to(Eval *e, const Node *n, Value x, Value a0) {
    (void)e, (void)n;
    return value_equal(x, a0);
}

static bool is_not_equal_to(Eval *e, const Node *n, Value x, Value a0) { return !is_equal_to(e, n, x, a0); }

static bool is_in(Eval *e, const Node *n, Value x, Value a0) {
    if (a0.kind == V_STRING && x.kind == V_STRING) return memmem(a0.s.p, a0.s.n, x.s.p, x.s.n) || !x.s.n;
    if (a0.kind == V_LIST || a0.kind == V_DICT) {
        for (size_t i = 0; a0.kind == V_LIST && i < a0.list->n; i++)
            if (value_equal(x, a0.list->items[i])) return true;
        return a0.kind == V_DICT && x.kind == V_STRING && dict_get(a0.dict, x.s);
    }
    jinja_fail(e->arena, n->line, "in: a %s value is no container", value_kind_name(a0.kind));
}

// x as an integer, for the tests of integers.
static int64_t integer_of(Eval *e, const Node *n, Value x) {
    if (x.kind != V_INT)
        jinja_fail(e->arena, n->line, "%.*s: a %s value, not an integer", (int)n->name.n, n->name.p,
                   value_kind_name(x.kind));
    return x.i;
}

static bool is_odd(Eval *e, const Node *n, Value x, Value a0) {
    (void)a0;
    return integer_of(e, n, x) % 2 != 0;
}

static bool is_even(Eval *e, const Node *n, Value x, Value a0) { return !is_odd(e, n, x, a0); }

static bool is_divisible_by(Eval *e, const Node *n, Value x, Value a0) {
    const int64_t i = integer_of(e, n, x);
    if (a0.kind != V_INT || a0.i == 0) jinja_fail(e->arena, n->line, "divisibleby: a non-zero integer is needed");
    return a0.i == -1 || i % a0.i == 0;
}

// The tests by name: the parser accepts these names only (builtin_has_test), and builtin_test runs them — a test of
// the value alone (of_value), or of the value and the test's first argument (with_argument).
static const struct {
    const char *name;
    bool (*of_value)(Value x);
    bool (*with_argument)(Eval *e, const Node *n, Value x, Value a0);
} TESTS[] = {
    {"defined", is_defined, NULL},     {"undefined", is_undefined, NULL}, {"none", is_none, NULL},
    {"string", is_string, NULL},       {"number", is_number, NULL},       {"integer", is_integer, NULL},
    {"float", is_float, NULL},         {"boolean", is_boolean, NULL},     {"true", is_true, NULL},
    {"false", is_false, NULL},         {"mapping", is_mapping, NULL},     {"iterable", is_iterable, NULL},
    {"sequence", is_sequence, NULL},   {"lower", is_lower, NULL},         {"upper", is_upper, NULL},
    {"equalto", NULL, is_equal_to},    {"eq", NULL, is_equal_to},         {"ne", NULL, is_not_equal_to},
    {"in", NULL, is_in},               {"odd", NULL, is_odd},             {"even", NULL, is_even},
    {"divisibleby", NULL, is_divisible_by},
};

static int find_test(Str name) {
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++)
        if (str_eq_c(name, TESTS[i].name)) return (int)i;
    return -1;
}

bool builtin_has_test(Str name) { return find_test(name) >= 0; }

bool builtin_test(Eval *e, const Node *n, Value x, const Value *args, int n_args) {
    const int t = find_test(n->name);
    if (t < 0) jinja_fail(e->arena, n->line, "the test '%.*s' is not supported", (int)n->name.n, n->name.p);
    if (TESTS[t].of_value) return TESTS[t].of_value(x);
    return TESTS[t].with_argument(e, n, x, n_args > 0 ? args[0] : v_undefined());
}

// ---- methods --------------------------------------------------------------------------------------------------
//
// Each method is a function of its receiver (a string, or a dict) and its arguments, found by name in METHODS.

typedef Value (*MethodFn)(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args);

static Value method_strip(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    return strip_method(e, n, self.s, arg(args, kw, n_args, 0, NULL), true, true);
}

static Value method_lstrip(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    return strip_method(e, n, self.s, arg(args, kw, n_args, 0, NULL), true, false);
}

static Value method_rstrip(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    return strip_method(e, n, self.s, arg(args, kw, n_args, 0, NULL), false, true);
}

static Value method_split(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    return split(e, n, self.s, arg(args, kw, n_args, 0, "sep"), arg(args, kw, n_args, 1, "maxsplit"));
}

// startswith and endswith: whether the string's first (or last) bytes are the argument's.
static Value method_affix(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    const Str s = self.s, p = want_str(e, n, arg(args, kw, n_args, 0, NULL), "the prefix or suffix");
    if (p.n > s.n) return v_bool(false);
    return v_bool(memcmp(str_eq_c(n->name, "startswith") ? s.p : s.p + s.n - p.n, p.p, p.n) == 0);
}

static Value method_upper(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return change_case(e, n, self.s, 1);
}

static Value method_lower(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return change_case(e, n, self.s, -1);
}

static Value method_replace(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    return replace(e, n, self.s, arg(args, kw, n_args, 0, NULL), arg(args, kw, n_args, 1, NULL),
                   arg(args, kw, n_args, 2, "count"));
}

// find: the index (in characters) of the argument's first occurrence, -1 if none.
static Value method_find(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    const Str s = self.s, p = want_str(e, n, arg(args, kw, n_args, 0, NULL), "the text");
    const char *f = p.n == 0 ? s.p : memmem(s.p, s.n, p.p, p.n);
    return v_int(f ? (int64_t)str_chars(str_slice(s, 0, (size_t)(f - s.p))) : -1);
}

static Value method_items(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    return items_of(e, n, self);
}

// get(key[, default]): the value of a string key, else the default (None).
static Value method_get(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    (void)e, (void)n, (void)kw;
    Value *v = n_args > 0 && args[0].kind == V_STRING ? dict_get(self.dict, args[0].s) : NULL;
    if (v) return *v;
    return n_args > 1 ? args[1] : v_none();
}

// keys() and values(): a list of the dict's keys (or values) in their order.
static Value method_keys_or_values(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    (void)args, (void)kw, (void)n_args;
    const bool keys = str_eq_c(n->name, "keys");
    List *l = list_new(e->arena, self.dict->n);
    for (size_t i = 0; i < l->n; i++) l->items[i] = keys ? v_str(self.dict->keys[i]) : self.dict->values[i];
    return list_value(l);
}

// The methods by name and the kind of value each belongs to: the parser accepts these names only
// (builtin_has_method), and builtin_method runs them on a receiver of that kind.
static const struct {
    const char *name;
    ValueKind of;
    MethodFn run;
} METHODS[] = {
    {"strip", V_STRING, method_strip},       {"lstrip", V_STRING, method_lstrip},
    {"rstrip", V_STRING, method_rstrip},     {"split", V_STRING, method_split},
    {"startswith", V_STRING, method_affix},  {"endswith", V_STRING, method_affix},
    {"upper", V_STRING, method_upper},       {"lower", V_STRING, method_lower},
    {"replace", V_STRING, method_replace},   {"find", V_STRING, method_find},
    {"items", V_DICT, method_items},         {"keys", V_DICT, method_keys_or_values},
    {"values", V_DICT, method_keys_or_values}, {"get", V_DICT, method_get},
};

// The first entry of METHODS named `name` of a receiver of kind `of` (V_UNDEFINED: of any kind); -1 if none.
static int find_method(Str name, ValueKind of) {
    for (size_t i = 0; i < sizeof METHODS / sizeof METHODS[0]; i++)
        if (str_eq_c(name, METHODS[i].name) && (of == V_UNDEFINED || of == METHODS[i].of)) return (int)i;
    return -1;
}

bool builtin_has_method(Str name) { return find_method(name, V_UNDEFINED) >= 0; }

Value builtin_method(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args) {
    const Str m = n->name;
    if (self.kind == V_UNDEFINED)
        jinja_fail(e->arena, n->line, "an undefined value has no method '%.*s'", (int)m.n, m.p);
    const int i = find_method(m, self.kind);
    if (i < 0)
        jinja_fail(e->arena, n->line, "a %s value has no method '%.*s'", value_kind_name(self.kind), (int)m.n, m.p);
    return METHODS[i].run(e, n, self, args, kw, n_args);
}

// ---- functions ------------------------------------------------------------------------------------------------

typedef Value (*FunctionFn)(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args);

// range([start,] stop[, step]): a list of integers, as Python's.
static Value function_range(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args) {
    (void)kw;
    int64_t b[3] = {0, 0, 1};
    if (n_args < 1 || n_args > 3) jinja_fail(e->arena, n->line, "range takes 1 to 3 integers");
    for (int k = 0; k < n_args; k++) {
        if (args[k].kind != V_INT) jinja_fail(e->arena, n->line, "range takes integers");
        b[n_args == 1 ? 1 : k] = args[k].i;
    }
    if (b[2] == 0) jinja_fail(e->arena, n->line, "range: the step is zero");
    int64_t count = 0;
    for (int64_t i = b[0]; b[2] > 0 ? i < b[1] : i > b[1]; i += b[2])
        if (++count > 100000) jinja_fail(e->arena, n->line, "range: more than 100000 items");
    List *l = list_new(e->arena, (size_t)count);
    for (int64_t k = 0; k < count; k++) l->items[k] = v_int(b[0] + k * b[2]);
    return list_value(l);
}

// namespace(...): an object whose attributes {% set ns.x = ... %} may change, from keywords and dicts.
static Value function_namespace(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args) {
    Dict *d = dict_new(e->arena);
    for (int k = 0; k < n_args; k++) {
        if (kw[k].n) dict_set(e->arena, d, kw[k], args[k]);
        else if (args[k].kind == V_DICT)
            for (size_t i = 0; i < args[k].dict->n; i++)
                dict_set(e->arena, d, args[k].dict->keys[i], args[k].dict->values[i]);
        else jinja_fail(e->arena, n->line, "namespace: a positional argument must be a dict");
    }
    return (Value){.kind = V_NAMESPACE, .dict = d};
}

// raise_exception(message): the rendering fails with the template's message (transformers' extension).
static Value function_raise_exception(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args) {
    (void)kw;
    StrBuf b = {.arena = e->arena, .limit = 4096, .line = n->line};
    if (n_args) value_to_str(e->arena, &b, args[0], false);
    jinja_fail(e->arena, 0, "the template raised an exception: %s", b.n ? b.p : "");
}

// strftime_now(format): the local time now (or the evaluation's fixed time) formatted (transformers' extension).
static Value function_strftime_now(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args) {
    Str fmt = want_str(e, n, arg(args, kw, n_args, 0, "format"), "the format");
    char cfmt[256], buf[512];
    if (fmt.n >= sizeof cfmt) jinja_fail(e->arena, n->line, "strftime_now: a format longer than 255 bytes");
    memcpy(cfmt, fmt.p, fmt.n);
    cfmt[fmt.n] = '\0';
    time_t now = e->now ? (time_t)e->now : time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t len = strftime(buf, sizeof buf, cfmt, &tm);
    return v_str(str_copy(e->arena, buf, len, false));
}

// The functions by name: the parser accepts these names only (builtin_has_function), and builtin_function runs them.
static const struct {
    const char *name;
    FunctionFn run;
} FUNCTIONS[] = {
    {"namespace", function_namespace},
    {"raise_exception", function_raise_exception},
    {"strftime_now", function_strftime_now},
    {"range", function_range},
};

static FunctionFn find_function(Str name) {
    for (size_t i = 0; i < sizeof FUNCTIONS / sizeof FUNCTIONS[0]; i++)
        if (str_eq_c(name, FUNCTIONS[i].name)) return FUNCTIONS[i].run;
    return NULL;
}

bool builtin_has_function(Str name) { return find_function(name) != NULL; }

Value builtin_function(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args) {
    const FunctionFn run = find_function(n->name);
    if (!run) jinja_fail(e->arena, n->line, "unknown function '%.*s'", (int)n->name.n, n->name.p);
    return run(e, n, args, kw, n_args);
}
