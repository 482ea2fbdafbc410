// jinja_eval.c — runs a parsed template: statements write to the output, expressions compute Python's values
// (jinja_value.c) as Jinja2 does, including its undefined values: a missing variable, key or attribute is
// undefined, which prints as nothing, is false, and iterates as empty, but is an error when used any other way.
//
// Scopes follow Jinja2: each turn of a for loop has its own, so a {% set %} inside a loop is gone after it (hence
// namespace(), whose attributes can be set from inside loops); {% if %} opens none.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja_internal.h"

enum {
    MAX_EVAL_DEPTH = 400,           // nested expressions being evaluated
    MAX_STEPS = 1000 * 1000,        // statements run and loop turns: a template that runs longer is refused
};
static const size_t RENDER_ARENA_LIMIT = (size_t)128 << 20, OUTPUT_LIMIT = JINJA_TEXT_LIMIT;

static Value lookup(const Eval *e, Str name) {
    for (const Scope *s = e->scope; s; s = s->parent) {
        Value *v = dict_get(s->vars, name);
        if (v) return *v;
    }
    return v_undefined();
}

static _Noreturn void type_error(Eval *e, const Node *n, const char *what, Value x, Value y) {
    jinja_fail(e->arena, n->line, "%s: unsupported operands %s and %s", what, value_kind_name(x.kind),
               value_kind_name(y.kind));
}

// ---- subscripts and attributes --------------------------------------------------------------------------------

// Python's index i into a sequence of n: negative counts from the end; -1 when out of range.
static int64_t seq_index(int64_t i, size_t n) {
    if (i < 0) i += (int64_t)n;
    return i >= 0 && (uint64_t)i < n ? i : -1;
}

static Value get_item(Eval *e, const Node *n, Value obj, Value key) {
    if (obj.kind == V_UNDEFINED) jinja_fail(e->arena, n->line, "an undefined value is subscripted");
    if ((obj.kind == V_DICT || obj.kind == V_NAMESPACE) && key.kind == V_STRING) {
        Value *v = dict_get(obj.dict, key.s);
        return v ? *v : v_undefined();
    }
    if (key.kind != V_INT && key.kind != V_BOOL) return v_undefined();
    int64_t i = key.kind == V_INT ? key.i : key.b;
    if (obj.kind == V_LIST) {
        i = seq_index(i, obj.list->n);
        return i < 0 ? v_undefined() : obj.list->items[i];
    }
    if (obj.kind == V_STRING) {
        i = seq_index(i, str_chars(obj.s));
        if (i < 0) return v_undefined();
        size_t from = str_char_offset(obj.s, (size_t)i);
        return v_str(str_slice(obj.s, from, str_char_offset(obj.s, (size_t)i + 1)));
    }
    return v_undefined();
}

static Value get_attr(Eval *e, const Node *n, Value obj) {
    if (obj.kind == V_UNDEFINED)
        jinja_fail(e->arena, n->line, "an undefined value has no attribute '%.*s'", (int)n->name.n, n->name.p);
    if (obj.kind != V_DICT && obj.kind != V_NAMESPACE) return v_undefined();
    Value *v = dict_get(obj.dict, n->name);
    return v ? *v : v_undefined();
}

// An optional slice bound: none when absent, else an integer.
static bool slice_bound(Eval *e, const Node *bound, int64_t *out) {
    if (!bound) return false;
    Value v = eval_expr(e, bound);
    if (v.kind == V_NONE) return false;
    if (v.kind != V_INT) jinja_fail(e->arena, bound->line, "a slice bound must be an integer, not %s",
                                    value_kind_name(v.kind));
    *out = v.i;
    return true;
}

// Python's slice.indices(n): start, stop, step clamped as Python does.
static void slice_indices(Eval *e, const Node *n, size_t len, int64_t *start, int64_t *stop, int64_t *step) {
    int64_t L = (int64_t)len, b;
    *step = 1;
    if (slice_bound(e, n->args.items[0], step) && *step == 0) jinja_fail(e->arena, n->line, "slice step is zero");
    bool up = *step > 0;
    *start = up ? 0 : L - 1;
    *stop = up ? L : -1;
    if (slice_bound(e, n->b, &b)) {
        if (b < 0) b += L;
        *start = b < 0 ? (up ? 0 : -1) : b >= L ? (up ? L : L - 1) : b;
    }
    if (slice_bound(e, n->c, &b)) {
        if (b < 0) b += L;
        *stop = b < 0 ? (up ? 0 : -1) : b >= L ? (up ? L : L - 1) : b;
    }
}

static Value slice(Eval *e, const Node *n) {
    Value obj = eval_expr(e, n->a);
    if (obj.kind != V_LIST && obj.kind != V_STRING)
        jinja_fail(e->arena, n->line, "a %s value cannot be sliced", value_kind_name(obj.kind));
    size_t len = obj.kind == V_LIST ? obj.list->n : str_chars(obj.s);
    int64_t start, stop, step;
    slice_indices(e, n, len, &start, &stop, &step);
    size_t count = 0;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) count++;
    if (obj.kind == V_LIST) {
        List *l = list_new(e->arena, count);
        size_t k = 0;
        for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) l->items[k++] = obj.list->items[i];
        return (Value){.kind = V_LIST, .list = l};
    }
    if (step == 1) return v_str(str_slice(obj.s, str_char_offset(obj.s, (size_t)start),
                                          str_char_offset(obj.s, (size_t)(stop > start ? stop : start))));
    StrBuf b = {.arena = e->arena, .limit = OUTPUT_LIMIT, .line = n->line};
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        size_t from = str_char_offset(obj.s, (size_t)i);
        sb_put(&b, str_slice(obj.s, from, str_char_offset(obj.s, (size_t)i + 1)));
    }
    return v_str(sb_str(&b));
}

// ---- operators ------------------------------------------------------------------------------------------------

static bool is_num(Value v) { return v.kind == V_INT || v.kind == V_FLOAT || v.kind == V_BOOL; }
static double num_f(Value v) { return v.kind == V_FLOAT ? v.f : v.kind == V_INT ? (double)v.i : v.b; }
static int64_t num_i(Value v) { return v.kind == V_INT ? v.i : v.b; }

static Value int_arith(Eval *e, const Node *n, char op, int64_t x, int64_t y) {
    int64_t r = 0;
    bool overflow = false;
    if (op == '+') overflow = __builtin_add_overflow(x, y, &r);
    else if (op == '-') overflow = __builtin_sub_overflow(x, y, &r);
    else if (op == '*') overflow = __builtin_mul_overflow(x, y, &r);
    else {  // floor division and modulo, Python's signs
        if (y == 0) jinja_fail(e->arena, n->line, "division by zero");
        if (x == INT64_MIN && y == -1) overflow = true;
        else {
            int64_t q = x / y, m = x % y;
            if (m != 0 && ((m < 0) != (y < 0))) {
                q--;
                m += y;
            }
            r = op == '/' ? q : m;
        }
    }
    if (overflow) jinja_fail(e->arena, n->line, "integer overflow in '%.*s'", (int)n->name.n, n->name.p);
    return v_int(r);
}

static Value float_arith(Eval *e, const Node *n, char op, double x, double y) {
    if ((op == '/' || op == 'f' || op == '%') && y == 0) jinja_fail(e->arena, n->line, "division by zero");
    switch (op) {
    case '+': return v_float(x + y);
    case '-': return v_float(x - y);
    case '*': return v_float(x * y);
    case '/': return v_float(x / y);
    case 'f': return v_float(floor(x / y));
    case '^': return v_float(pow(x, y));
    default: {
        double m = fmod(x, y);
        return v_float(m != 0 && ((m < 0) != (y < 0)) ? m + y : m);
    }
    }
}

static Value concat_lists(Eval *e, List *x, List *y) {
    List *l = list_new(e->arena, x->n + y->n);
    if (x->n) memcpy(l->items, x->items, x->n * sizeof *l->items);
    if (y->n) memcpy(l->items + x->n, y->items, y->n * sizeof *l->items);
    return (Value){.kind = V_LIST, .list = l};
}

static Value binary(Eval *e, const Node *n) {
    Value x = eval_expr(e, n->a), y = eval_expr(e, n->b);
    Str op = n->name;
    if (str_eq_c(op, "~")) {
        StrBuf b = {.arena = e->arena, .limit = OUTPUT_LIMIT, .line = n->line};
        value_to_str(e->arena, &b, x, false);
        value_to_str(e->arena, &b, y, false);
        return v_str(sb_str(&b));
    }
    if (x.kind == V_UNDEFINED || y.kind == V_UNDEFINED)
        jinja_fail(e->arena, n->line, "an undefined value in '%.*s'", (int)op.n, op.p);
    if (str_eq_c(op, "+") && x.kind == V_STRING && y.kind == V_STRING) return v_str(str_concat(e->arena, x.s, y.s));
    if (str_eq_c(op, "+") && x.kind == V_LIST && y.kind == V_LIST) return concat_lists(e, x.list, y.list);
    if (str_eq_c(op, "*") && x.kind == V_STRING && (y.kind == V_INT || y.kind == V_BOOL)) {
        StrBuf b = {.arena = e->arena, .limit = OUTPUT_LIMIT, .line = n->line};
        for (int64_t k = 0; k < num_i(y); k++) sb_put(&b, x.s);
        return v_str(sb_str(&b));
    }
    if (!is_num(x) || !is_num(y)) type_error(e, n, "arithmetic", x, y);
    char c = str_eq_c(op, "//") ? 'f' : str_eq_c(op, "**") ? '^' : op.p[0];
    bool ints = x.kind != V_FLOAT && y.kind != V_FLOAT;
    if (ints && c == '^' && num_i(y) >= 0) {  // |x| ≥ 2 overflows within 63 steps; 0, 1 and -1 need none
        int64_t base = num_i(x), exp = num_i(y);
        if (base >= -1 && base <= 1) return v_int(base == 0 ? exp == 0 : base == 1 || exp % 2 == 0 ? 1 : -1);
        Value r = v_int(1);
        for (int64_t k = 0; k < exp; k++) r = int_arith(e, n, '*', r.i, base);
        return r;
    }
    if (ints && c != '/' && c != '^') return int_arith(e, n, c == 'f' ? '/' : c, num_i(x), num_i(y));
    return float_arith(e, n, c, num_f(x), num_f(y));
}

static bool contains(Eval *e, const Node *n, Value x, Value container) {
    switch (container.kind) {
    case V_UNDEFINED: return false;
    case V_STRING:
        if (x.kind != V_STRING) type_error(e, n, "'in'", x, container);
        return x.s.n == 0 || memmem(container.s.p, container.s.n, x.s.p, x.s.n) != NULL;
    case V_LIST:
        for (size_t i = 0; i < container.list->n; i++)
            if (value_equal(x, container.list->items[i])) return true;
        return false;
    case V_DICT:
    case V_NAMESPACE: return x.kind == V_STRING && dict_get(container.dict, x.s) != NULL;
    default: type_error(e, n, "'in'", x, container);
    }
}

// Ordering: numbers by value, strings by code points (UTF-8 byte order is code point order).
static int order(Eval *e, const Node *n, Value x, Value y) {
    if (is_num(x) && is_num(y)) return num_f(x) < num_f(y) ? -1 : num_f(x) > num_f(y);
    if (x.kind != V_STRING || y.kind != V_STRING) type_error(e, n, "comparison", x, y);
    size_t k = x.s.n < y.s.n ? x.s.n : y.s.n;
    int c = k ? memcmp(x.s.p, y.s.p, k) : 0;
    return c ? c : (x.s.n > y.s.n) - (x.s.n < y.s.n);
}

static bool compare(Eval *e, const Node *n) {
    Value x = eval_expr(e, n->a), y = eval_expr(e, n->b);
    Str op = n->name;
    if (str_eq_c(op, "==")) return value_equal(x, y);
    if (str_eq_c(op, "!=")) return !value_equal(x, y);
    if (str_eq_c(op, "in")) return contains(e, n, x, y);
    if (str_eq_c(op, "not in")) return !contains(e, n, x, y);
    int c = order(e, n, x, y);
    if (str_eq_c(op, "<")) return c < 0;
    if (str_eq_c(op, "<=")) return c <= 0;
    if (str_eq_c(op, ">")) return c > 0;
    return c >= 0;
}

// ---- expressions ----------------------------------------------------------------------------------------------

// Evaluates n's arguments into args[0..n) (at most 64, as the parser allows).
static void eval_args(Eval *e, const Node *n, Value args[64]) {
    for (int k = 0; k < n->args.n; k++) args[k] = eval_expr(e, n->args.items[k]);
}

static Value eval_container(Eval *e, const Node *n) {
    if (n->kind == E_LIST) {
        List *l = list_new(e->arena, (size_t)n->args.n);
        for (int k = 0; k < n->args.n; k++) l->items[k] = eval_expr(e, n->args.items[k]);
        return (Value){.kind = V_LIST, .list = l};
    }
    Dict *d = dict_new(e->arena);
    for (int k = 0; k + 1 < n->args.n; k += 2) {
        Value key = eval_expr(e, n->args.items[k]);
        if (key.kind != V_STRING) jinja_fail(e->arena, n->line, "dict keys must be strings here");
        dict_set(e->arena, d, key.s, eval_expr(e, n->args.items[k + 1]));
    }
    return (Value){.kind = V_DICT, .dict = d};
}

static Value eval_call(Eval *e, const Node *n) {
    Value args[64];
    if (n->kind == E_CALL) {
        eval_args(e, n, args);
        return builtin_function(e, n, args, n->kw, n->args.n);
    }
    Value x = eval_expr(e, n->a);
    eval_args(e, n, args);
    if (n->kind == E_METHOD) return builtin_method(e, n, x, args, n->kw, n->args.n);
    if (n->kind == E_FILTER) return builtin_filter(e, n, x, args, n->kw, n->args.n);
    return v_bool(builtin_test(e, n, x, args, n->args.n));
}

Value eval_expr(Eval *e, const Node *n) {
    if (++e->depth > MAX_EVAL_DEPTH) jinja_fail(e->arena, n->line, "an expression nested too deeply");
    Value r;
    switch (n->kind) {
    case E_CONST: r = n->value; break;
    case E_NAME: r = lookup(e, n->name); break;
    case E_LIST:
    case E_DICT: r = eval_container(e, n); break;
    case E_ATTR: r = get_attr(e, n, eval_expr(e, n->a)); break;
    case E_INDEX: {
        Value obj = eval_expr(e, n->a);
        r = get_item(e, n, obj, eval_expr(e, n->b));
        break;
    }
    case E_SLICE: r = slice(e, n); break;
    case E_NOT: r = v_bool(!value_truthy(eval_expr(e, n->a))); break;
    case E_NEG: {
        Value x = eval_expr(e, n->a);
        if (!is_num(x)) jinja_fail(e->arena, n->line, "a %s value negated", value_kind_name(x.kind));
        r = x.kind == V_FLOAT ? v_float(-x.f) : int_arith(e, n, '-', 0, num_i(x));
        break;
    }
    case E_BINARY: r = binary(e, n); break;
    case E_COMPARE: r = v_bool(compare(e, n)); break;
    case E_AND:
        r = eval_expr(e, n->a);
        if (value_truthy(r)) r = eval_expr(e, n->b);
        break;
    case E_OR:
        r = eval_expr(e, n->a);
        if (!value_truthy(r)) r = eval_expr(e, n->b);
        break;
    case E_COND:
        r = value_truthy(eval_expr(e, n->a)) ? eval_expr(e, n->b) : n->c ? eval_expr(e, n->c) : v_undefined();
        break;
    default: r = eval_call(e, n); break;
    }
    e->depth--;
    return r;
}

// ---- statements -----------------------------------------------------------------------------------------------

static void exec_body(Eval *e, NodeList body);

// The items a for loop walks: a list's items, a dict's keys, a string's characters; undefined walks none.
static List *iteration_items(Eval *e, const Node *n, Value v) {
    if (v.kind == V_LIST) return v.list;
    if (v.kind == V_UNDEFINED) return list_new(e->arena, 0);
    if (v.kind == V_DICT) {
        List *l = list_new(e->arena, v.dict->n);
        for (size_t i = 0; i < v.dict->n; i++) l->items[i] = v_str(v.dict->keys[i]);
        return l;
    }
    if (v.kind != V_STRING) jinja_fail(e->arena, n->line, "a %s value is not iterable", value_kind_name(v.kind));
    List *l = list_new(e->arena, str_chars(v.s));
    for (size_t i = 0, off = 0; i < l->n; i++) {
        size_t end = str_char_offset(v.s, i + 1);
        l->items[i] = v_str(str_slice(v.s, off, end));
        off = end;
    }
    return l;
}

// Binds the loop variables to item (unpacked when there are several) in the current scope.
static void bind_targets(Eval *e, const Node *n, Value item) {
    if (n->n_targets == 1) {
        dict_set(e->arena, e->scope->vars, n->targets[0], item);
        return;
    }
    if (item.kind != V_LIST || item.list->n != (size_t)n->n_targets)
        jinja_fail(e->arena, n->line, "cannot unpack a %s value into %d loop variables", value_kind_name(item.kind),
                   n->n_targets);
    for (int k = 0; k < n->n_targets; k++) dict_set(e->arena, e->scope->vars, n->targets[k], item.list->items[k]);
}

// The items that pass the loop's `if` filter (all of them without one).
static List *filter_items(Eval *e, const Node *n, List *items) {
    if (!n->b) return items;
    List *kept = list_new(e->arena, items->n);
    kept->n = 0;
    for (size_t i = 0; i < items->n; i++) {
        Scope s = {.vars = dict_new(e->arena), .parent = e->scope};
        e->scope = &s;
        bind_targets(e, n, items->items[i]);
        if (value_truthy(eval_expr(e, n->b))) kept->items[kept->n++] = items->items[i];
        e->scope = s.parent;
    }
    return kept;
}

static Value loop_object(Eval *e, const List *items, size_t i) {
    Dict *d = dict_new(e->arena);
    int64_t n = (int64_t)items->n, k = (int64_t)i;
    dict_set(e->arena, d, str_lit("index", 5), v_int(k + 1));
    dict_set(e->arena, d, str_lit("index0", 6), v_int(k));
    dict_set(e->arena, d, str_lit("revindex", 8), v_int(n - k));
    dict_set(e->arena, d, str_lit("revindex0", 9), v_int(n - k - 1));
    dict_set(e->arena, d, str_lit("first", 5), v_bool(k == 0));
    dict_set(e->arena, d, str_lit("last", 4), v_bool(k == n - 1));
    dict_set(e->arena, d, str_lit("length", 6), v_int(n));
    dict_set(e->arena, d, str_lit("previtem", 8), k > 0 ? items->items[k - 1] : v_undefined());
    dict_set(e->arena, d, str_lit("nextitem", 8), k + 1 < n ? items->items[k + 1] : v_undefined());
    return (Value){.kind = V_DICT, .dict = d};
}

static void exec_for(Eval *e, const Node *n) {
    List *items = filter_items(e, n, iteration_items(e, n, eval_expr(e, n->a)));
    for (size_t i = 0; i < items->n; i++) {
        if (--e->steps < 0) jinja_fail(e->arena, n->line, "the template runs too long");
        Scope s = {.vars = dict_new(e->arena), .parent = e->scope};
        e->scope = &s;
        bind_targets(e, n, items->items[i]);
        dict_set(e->arena, s.vars, str_lit("loop", 4), loop_object(e, items, i));
        exec_body(e, n->body);
        e->scope = s.parent;
        int control = e->loop_control;
        e->loop_control = 0;
        if (control == N_BREAK) break;
    }
    if (items->n == 0) exec_body(e, n->orelse);
}

static void exec_stmt(Eval *e, const Node *n) {
    if (--e->steps < 0) jinja_fail(e->arena, n->line, "the template runs too long");
    e->out.line = n->line;
    switch (n->kind) {
    case N_TEXT: sb_put(&e->out, n->name); break;
    case N_OUTPUT: value_to_str(e->arena, &e->out, eval_expr(e, n->a), false); break;
    case N_IF: exec_body(e, value_truthy(eval_expr(e, n->a)) ? n->body : n->orelse); break;
    case N_FOR: exec_for(e, n); break;
    case N_SET: dict_set(e->arena, e->scope->vars, n->name, eval_expr(e, n->a)); break;
    case N_SET_ATTR: {
        Value ns = lookup(e, n->name);
        if (ns.kind != V_NAMESPACE)
            jinja_fail(e->arena, n->line, "'{%% set %.*s.%.*s %%}': a %s value, not a namespace()", (int)n->name.n,
                       n->name.p, (int)n->attr.n, n->attr.p, value_kind_name(ns.kind));
        dict_set(e->arena, ns.dict, n->attr, eval_expr(e, n->a));
        break;
    }
    case N_BREAK:
    case N_CONTINUE: e->loop_control = n->kind; break;
    case N_BLOCK: exec_body(e, n->body); break;
    default: break;  // expressions are not statements
    }
}

static void exec_body(Eval *e, NodeList body) {
    for (int k = 0; k < body.n && !e->loop_control; k++) exec_stmt(e, body.items[k]);
}

// Adds the members of a JSON object to the global scope.
static void add_vars(Arena *a, Dict *globals, const json_t *vars, bool from_data) {
    const char *key;
    json_t *v;
    if (!json_is_object(vars)) return;
    json_object_foreach((json_t *)vars, key, v) {
        dict_set(a, globals, str_copy(a, key, strlen(key), false), value_from_json(a, v, from_data, 0));
    }
}

int jinja_render(const JinjaTemplate *t, const JinjaContext *ctx, JinjaOutput *out, Err *err) {
    *out = (JinjaOutput){0};
    jmp_buf fail;
    Arena arena = {.limit = RENDER_ARENA_LIMIT, .fail = &fail, .err = err};
    if (setjmp(fail)) {
        arena_free(&arena);
        return -1;
    }
    Scope globals = {.vars = dict_new(&arena)};
    add_vars(&arena, globals.vars, ctx->template_vars, false);
    add_vars(&arena, globals.vars, ctx->data_vars, true);
    Eval e = {.arena = &arena, .scope = &globals, .now = ctx->now, .steps = MAX_STEPS,
              .out = {.arena = &arena, .limit = OUTPUT_LIMIT}};
    exec_body(&e, t->body);
    out->text = malloc(e.out.n + 1);
    out->from_data = malloc(e.out.n + 1);
    if (!out->text || !out->from_data) {
        jinja_output_free(out);
        jinja_fail(&arena, 0, "out of memory");
    }
    if (e.out.n) {
        memcpy(out->text, e.out.p, e.out.n);
        memcpy(out->from_data, e.out.data, e.out.n);
    }
    out->text[e.out.n] = '\0';
    out->len = e.out.n;
    arena_free(&arena);
    return 0;
}

void jinja_output_free(JinjaOutput *out) {
    free(out->text);
    free(out->from_data);
    *out = (JinjaOutput){0};
}
