// jinja_parse.c — tokens into a syntax tree, by recursive descent in Jinja2's order of precedence (loosest first):
//
//   x if c else y  →  or  →  and  →  not  →  comparisons (== != < <= > >= in, not in; chained)
//   →  + -  →  ~  →  * / // %  →  **  →  unary -  →  primary with postfixes (.attr  [i]  [a:b:c]  (args))
//   and filters (x | f(args)) and tests (x is [not] t args)
//
// Every statement, filter, test, method and function is checked here against what the interpreter implements, so
// that an unsupported template is refused before anything is rendered.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "chat/jinja_internal.h"

typedef struct {
    Arena *a;
    const Token *t;
    int i, n;
    int loops;      // for loops around the current statement ({% break %} is allowed inside one)
    int depth;      // nesting of statements and parenthesised expressions
} Parser;

enum { MAX_NESTING = 200 };

static const Token *peek(const Parser *P) { return &P->t[P->i]; }
static int line(const Parser *P) { return peek(P)->line; }

static bool is_op(const Parser *P, const char *op) {
    return peek(P)->kind == T_OP && str_eq_c(peek(P)->text, op);
}
static bool is_name(const Parser *P, const char *name) {
    return peek(P)->kind == T_NAME && str_eq_c(peek(P)->text, name);
}
static bool skip_op(Parser *P, const char *op) {
    if (!is_op(P, op)) return false;
    P->i++;
    return true;
}
static bool skip_name(Parser *P, const char *name) {
    if (!is_name(P, name)) return false;
    P->i++;
    return true;
}

static const char *describe(const Token *t, char buf[80]) {
    static const char *kinds[] = {"text", "'{{'", "'}}'", "'{%'", "'%}'", "name", "string", "integer", "float",
                                  "operator", "end of template"};
    if (t->kind == T_NAME || t->kind == T_OP) {
        snprintf(buf, 80, "'%.*s'", (int)(t->text.n < 60 ? t->text.n : 60), t->text.p);
        return buf;
    }
    return kinds[t->kind];
}

static _Noreturn void unexpected(Parser *P, const char *wanted) {
    char buf[80];
    jinja_fail(P->a, line(P), "expected %s, found %s", wanted, describe(peek(P), buf));
}

static void expect_op(Parser *P, const char *op) {
    if (!skip_op(P, op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", op);
        unexpected(P, want);
    }
}

static Str expect_name(Parser *P) {
    if (peek(P)->kind != T_NAME) unexpected(P, "a name");
    return P->t[P->i++].text;
}

static void expect_kind(Parser *P, TokKind kind, const char *what) {
    if (peek(P)->kind != kind) unexpected(P, what);
    P->i++;
}

static Node *node(Parser *P, NodeKind kind, int at) {
    Node *n = arena_alloc(P->a, sizeof *n);
    n->kind = kind;
    n->line = at;
    return n;
}

static void list_push(Arena *a, NodeList *l, Node *n) {
    if ((l->n & (l->n - 1)) == 0) {  // at 0, 1, 2, 4, ...: grow to the next power of two
        Node **items = arena_alloc(a, (size_t)(l->n ? 2 * l->n : 1) * sizeof *items);
        if (l->n) memcpy(items, l->items, (size_t)l->n * sizeof *items);
        l->items = items;
    }
    l->items[l->n++] = n;
}

static void enter(Parser *P) {
    if (++P->depth > MAX_NESTING) jinja_fail(P->a, line(P), "nested more than %d deep", MAX_NESTING);
}

// ---- expressions ----------------------------------------------------------------------------------------------

static Node *parse_expr(Parser *P);
static Node *parse_or(Parser *P);
static Node *parse_unary(Parser *P, bool with_filter);

static Node *binary(Parser *P, Node *a, Str op, Node *b, int at) {
    Node *n = node(P, E_BINARY, at);
    n->a = a;
    n->b = b;
    n->name = op;
    return n;
}

// Arguments of a call, filter or test, after its '(': positional ones, then name=value ones.
static void parse_args(Parser *P, Node *n) {
    Str kws[64];
    while (!skip_op(P, ")")) {
        if (n->args.n && !skip_op(P, ",")) unexpected(P, "',' or ')'");
        if (skip_op(P, ")")) break;
        if (n->args.n == 64) jinja_fail(P->a, line(P), "more than 64 arguments");
        if (is_op(P, "*") || is_op(P, "**")) jinja_fail(P->a, line(P), "*args and **kwargs are not supported");
        Str kw = {0};
        if (peek(P)->kind == T_NAME && P->t[P->i + 1].kind == T_OP && str_eq_c(P->t[P->i + 1].text, "=")) {
            kw = expect_name(P);
            P->i++;
        } else if (n->args.n && kws[n->args.n - 1].n) {
            jinja_fail(P->a, line(P), "a positional argument after a keyword argument");
        }
        kws[n->args.n] = kw;
        list_push(P->a, &n->args, parse_expr(P));
    }
    n->kw = arena_alloc(P->a, (size_t)(n->args.n + 1) * sizeof *n->kw);
    memcpy(n->kw, kws, (size_t)n->args.n * sizeof *kws);
}

static Node *parse_list_or_dict(Parser *P, bool dict) {
    Node *n = node(P, dict ? E_DICT : E_LIST, line(P));
    const char *close = dict ? "}" : "]";
    while (!skip_op(P, close)) {
        if (n->args.n && !skip_op(P, ",")) unexpected(P, dict ? "',' or '}'" : "',' or ']'");
        if (skip_op(P, close)) break;
        list_push(P->a, &n->args, parse_expr(P));
        if (dict) {
            expect_op(P, ":");
            list_push(P->a, &n->args, parse_expr(P));
        }
    }
    return n;
}

static Node *parse_primary(Parser *P) {
    const Token *t = peek(P);
    Node *n = node(P, E_CONST, t->line);
    if (t->kind == T_STRING) {
        n->value = v_str(t->text);
        for (P->i++; peek(P)->kind == T_STRING; P->i++) n->value.s = str_concat(P->a, n->value.s, peek(P)->text);
    } else if (t->kind == T_INT || t->kind == T_FLOAT) {
        n->value = t->kind == T_INT ? v_int(t->i) : v_float(t->f);
        P->i++;
    } else if (t->kind == T_NAME) {
        P->i++;
        if (str_eq_c(t->text, "true") || str_eq_c(t->text, "True")) n->value = v_bool(true);
        else if (str_eq_c(t->text, "false") || str_eq_c(t->text, "False")) n->value = v_bool(false);
        else if (str_eq_c(t->text, "none") || str_eq_c(t->text, "None")) n->value = v_none();
        else {
            n->kind = E_NAME;
            n->name = t->text;
        }
    } else if (skip_op(P, "(")) {
        enter(P);
        n = parse_expr(P);
        if (is_op(P, ",")) jinja_fail(P->a, line(P), "tuples are not supported");
        expect_op(P, ")");
        P->depth--;
    } else if (skip_op(P, "[")) {
        n = parse_list_or_dict(P, false);
    } else if (skip_op(P, "{")) {
        n = parse_list_or_dict(P, true);
    } else {
        unexpected(P, "an expression");
    }
    return n;
}

// After '[': an index or a slice [start:stop:step], each part optional.
static Node *parse_subscript(Parser *P, Node *obj) {
    Node *parts[3] = {0};
    int n_colons = 0, at = line(P);
    for (;;) {
        if (!is_op(P, ":") && !is_op(P, "]")) parts[n_colons] = parse_expr(P);
        if (n_colons < 2 && skip_op(P, ":")) {
            n_colons++;
            continue;
        }
        expect_op(P, "]");
        break;
    }
    if (!n_colons && !parts[0]) jinja_fail(P->a, at, "an empty subscript '[]'");
    Node *n = node(P, n_colons ? E_SLICE : E_INDEX, at);
    n->a = obj;
    n->b = parts[0];
    if (n_colons) {
        n->c = parts[1];
        list_push(P->a, &n->args, parts[2]);
    }
    return n;
}

static Node *parse_postfix(Parser *P, Node *n) {
    for (;;) {
        int at = line(P);
        if (skip_op(P, ".")) {
            Node *attr = node(P, E_ATTR, at);
            attr->a = n;
            attr->name = expect_name(P);
            n = attr;
        } else if (skip_op(P, "[")) {
            n = parse_subscript(P, n);
        } else if (skip_op(P, "(")) {
            if (n->kind != E_NAME && n->kind != E_ATTR) jinja_fail(P->a, at, "only functions and methods are called");
            bool method = n->kind == E_ATTR;
            if (method ? !builtin_has_method(n->name) : !builtin_has_function(n->name))
                jinja_fail(P->a, at, "the %s '%.*s' is not supported", method ? "method" : "function", (int)n->name.n,
                           n->name.p);
            n->kind = method ? E_METHOD : E_CALL;
            parse_args(P, n);
        } else {
            return n;
        }
    }
}

// `x is [not] name`, with arguments in parentheses or one bare argument.
static Node *parse_test(Parser *P, Node *x) {
    int at = line(P);
    bool negated = skip_name(P, "not");
    Node *n = node(P, E_TEST, at);
    n->a = x;
    n->name = expect_name(P);
    if (!builtin_has_test(n->name))
        jinja_fail(P->a, at, "the test '%.*s' is not supported", (int)n->name.n, n->name.p);
    const Token *t = peek(P);
    if (skip_op(P, "(")) {
        parse_args(P, n);
    } else if ((t->kind == T_NAME && !is_name(P, "else") && !is_name(P, "or") && !is_name(P, "and") &&
                !is_name(P, "is")) || t->kind == T_STRING || t->kind == T_INT || t->kind == T_FLOAT ||
               is_op(P, "[") || is_op(P, "{")) {
        list_push(P->a, &n->args, parse_postfix(P, parse_primary(P)));
        n->kw = arena_alloc(P->a, sizeof *n->kw);
    }
    if (!negated) return n;
    Node *not = node(P, E_NOT, at);
    not->a = n;
    return not;
}

static Node *parse_filters(Parser *P, Node *n) {
    for (;;) {
        int at = line(P);
        if (skip_op(P, "|")) {
            Node *f = node(P, E_FILTER, at);
            f->a = n;
            f->name = expect_name(P);
            if (!builtin_has_filter(f->name))
                jinja_fail(P->a, at, "the filter '%.*s' is not supported", (int)f->name.n, f->name.p);
            if (skip_op(P, "(")) parse_args(P, f);
            n = f;
        } else if (skip_name(P, "is")) {
            n = parse_test(P, n);
        } else {
            return n;
        }
    }
}

static Node *parse_unary(Parser *P, bool with_filter) {
    int at = line(P);
    Node *n;
    enter(P);
    if (skip_op(P, "-")) {
        n = node(P, E_NEG, at);
        n->a = parse_unary(P, false);
    } else if (skip_op(P, "+")) {
        n = parse_unary(P, false);
    } else {
        n = parse_primary(P);
    }
    n = parse_postfix(P, n);
    P->depth--;
    return with_filter ? parse_filters(P, n) : n;
}

// One level of binary operators: operand (op operand)*, left to right, op one of ops (NULL-terminated).
static Node *parse_binary_level(Parser *P, const char *const *ops, Node *(*operand)(Parser *)) {
    Node *n = operand(P);
    for (;;) {
        bool found = false;
        for (const char *const *op = ops; *op && !found; op++) found = is_op(P, *op);
        if (!found) return n;
        Str op = P->t[P->i++].text;
        n = binary(P, n, op, operand(P), line(P));
    }
}

static Node *parse_filtered_unary(Parser *P) { return parse_unary(P, true); }

// From the tightest: **, then * / // %, then ~, then + -.
static const char *const POW_OPS[] = {"**", NULL}, *const MATH2_OPS[] = {"*", "/", "//", "%", NULL},
                         *const CONCAT_OPS[] = {"~", NULL}, *const MATH1_OPS[] = {"+", "-", NULL};

static Node *parse_pow(Parser *P) { return parse_binary_level(P, POW_OPS, parse_filtered_unary); }
static Node *parse_math2(Parser *P) { return parse_binary_level(P, MATH2_OPS, parse_pow); }
static Node *parse_concat(Parser *P) { return parse_binary_level(P, CONCAT_OPS, parse_math2); }
static Node *parse_math1(Parser *P) { return parse_binary_level(P, MATH1_OPS, parse_concat); }

// The comparison operator at the current token ("not in" as one), consumed; {0} if none.
static Str compare_op(Parser *P) {
    static const char *ops[] = {"==", "!=", "<", "<=", ">", ">="};
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (is_op(P, ops[k])) return P->t[P->i++].text;
    if (skip_name(P, "in")) return str_lit("in", 2);
    if (is_name(P, "not") && P->t[P->i + 1].kind == T_NAME && str_eq_c(P->t[P->i + 1].text, "in")) {
        P->i += 2;
        return str_lit("not in", 6);
    }
    return (Str){0};
}

// a < b < c is (a < b) and (b < c), as in Python (b is evaluated twice here; expressions have no side effects).
static Node *parse_compare(Parser *P) {
    Node *first = parse_math1(P), *left = first, *result = NULL;
    for (Str op; (op = compare_op(P)).n;) {
        int at = line(P);
        Node *right = parse_math1(P);
        Node *cmp = binary(P, left, op, right, at);
        cmp->kind = E_COMPARE;
        if (result) {
            Node *and = node(P, E_AND, at);
            and->a = result;
            and->b = cmp;
            result = and;
        } else {
            result = cmp;
        }
        left = right;
    }
    return result ? result : first;
}

static Node *parse_not(Parser *P) {
    if (!is_name(P, "not")) return parse_compare(P);
    Node *n = node(P, E_NOT, line(P));
    P->i++;
    enter(P);
    n->a = parse_not(P);
    P->depth--;
    return n;
}

// One level of `and` or `or`: operand (word operand)*, left to right, as nodes of `kind`.
static Node *parse_logic_level(Parser *P, const char *word, NodeKind kind, Node *(*operand)(Parser *)) {
    Node *n = operand(P);
    while (skip_name(P, word)) {
        Node *op = node(P, kind, line(P));
        op->a = n;
        op->b = operand(P);
        n = op;
    }
    return n;
}

static Node *parse_and(Parser *P) { return parse_logic_level(P, "and", E_AND, parse_not); }
static Node *parse_or(Parser *P) { return parse_logic_level(P, "or", E_OR, parse_and); }

// x if c [else y]: without else, the value is undefined when c is false.
static Node *parse_expr(Parser *P) {
    Node *n = parse_or(P);
    while (skip_name(P, "if")) {
        Node *cond = node(P, E_COND, line(P));
        cond->b = n;
        cond->a = parse_or(P);
        if (skip_name(P, "else")) cond->c = parse_expr(P);
        n = cond;
    }
    return n;
}

// ---- statements -----------------------------------------------------------------------------------------------

static NodeList parse_body(Parser *P, const char *const *ends);

static const char *const END_IF[] = {"elif", "else", "endif", NULL};
static const char *const END_FOR[] = {"else", "endfor", NULL};

// The end of an if or a for block, after its body: [{% else %} body] {% end %}, the else branch into n->orelse.
static void parse_else_and_end(Parser *P, Node *n, const char *end) {
    if (skip_name(P, "else")) {
        expect_kind(P, T_BLOCK_END, "'%}'");
        n->orelse = parse_body(P, (const char *const[]){end, NULL});
    }
    expect_name(P);  // end: parse_body stopped at it
    expect_kind(P, T_BLOCK_END, "'%}'");
}

// After {% if cond %} (or elif): the branches up to and including {% endif %}.
static Node *parse_if(Parser *P, int at) {
    Node *n = node(P, N_IF, at);
    n->a = parse_expr(P);
    expect_kind(P, T_BLOCK_END, "'%}'");
    n->body = parse_body(P, END_IF);
    if (skip_name(P, "elif")) {
        list_push(P->a, &n->orelse, parse_if(P, line(P)));
        return n;
    }
    parse_else_and_end(P, n, "endif");
    return n;
}

static Node *parse_for(Parser *P, int at) {
    Node *n = node(P, N_FOR, at);
    Str targets[8];
    do {
        if (n->n_targets == 8) jinja_fail(P->a, at, "more than 8 loop variables");
        targets[n->n_targets++] = expect_name(P);
    } while (skip_op(P, ","));
    n->targets = arena_alloc(P->a, (size_t)n->n_targets * sizeof *targets);
    memcpy(n->targets, targets, (size_t)n->n_targets * sizeof *targets);
    if (!skip_name(P, "in")) unexpected(P, "'in'");
    n->a = parse_or(P);
    if (skip_name(P, "if")) n->b = parse_or(P);
    if (is_name(P, "recursive")) jinja_fail(P->a, at, "recursive loops are not supported");
    expect_kind(P, T_BLOCK_END, "'%}'");
    P->loops++;
    n->body = parse_body(P, END_FOR);
    P->loops--;
    parse_else_and_end(P, n, "endfor");
    return n;
}

static Node *parse_set(Parser *P, int at) {
    Node *n = node(P, N_SET, at);
    n->name = expect_name(P);
    if (skip_op(P, ".")) {
        n->kind = N_SET_ATTR;
        n->attr = expect_name(P);
    }
    if (is_op(P, ",")) jinja_fail(P->a, at, "'{%% set a, b = ... %%}' is not supported");
    if (!skip_op(P, "=")) jinja_fail(P->a, at, "'{%% set %%}...{%% endset %%}' blocks are not supported");
    n->a = parse_expr(P);
    expect_kind(P, T_BLOCK_END, "'%}'");
    return n;
}

// One statement, after {% and its keyword name.
static Node *parse_statement(Parser *P, Str name, int at) {
    if (str_eq_c(name, "if")) return parse_if(P, at);
    if (str_eq_c(name, "for")) return parse_for(P, at);
    if (str_eq_c(name, "set")) return parse_set(P, at);
    if (str_eq_c(name, "break") || str_eq_c(name, "continue")) {
        if (!P->loops) jinja_fail(P->a, at, "'{%% %.*s %%}' outside a loop", (int)name.n, name.p);
        expect_kind(P, T_BLOCK_END, "'%}'");
        return node(P, name.p[0] == 'b' ? N_BREAK : N_CONTINUE, at);
    }
    if (str_eq_c(name, "generation")) {
        Node *n = node(P, N_BLOCK, at);
        expect_kind(P, T_BLOCK_END, "'%}'");
        n->body = parse_body(P, (const char *const[]){"endgeneration", NULL});
        expect_name(P);
        expect_kind(P, T_BLOCK_END, "'%}'");
        return n;
    }
    jinja_fail(P->a, at, "'{%% %.*s %%}' is not supported", (int)(name.n < 40 ? name.n : 40), name.p);
}

static bool is_end(Str name, const char *const *ends) {
    for (; ends && *ends; ends++)
        if (str_eq_c(name, *ends)) return true;
    return false;
}

// Statements and text up to a {% tag %} named in ends (left at its name) or, when ends is NULL, the end.
static NodeList parse_body(Parser *P, const char *const *ends) {
    NodeList body = {0};
    enter(P);
    for (;;) {
        const Token *t = peek(P);
        Node *n;
        if (t->kind == T_EOF) {
            if (ends) jinja_fail(P->a, t->line, "the template ends before '{%% %s %%}'", ends[0]);
            break;
        } else if (t->kind == T_TEXT) {
            n = node(P, N_TEXT, t->line);
            n->name = t->text;
            P->i++;
        } else if (t->kind == T_VAR_BEGIN) {
            n = node(P, N_OUTPUT, t->line);
            P->i++;
            n->a = parse_expr(P);
            expect_kind(P, T_VAR_END, "'}}'");
        } else {
            P->i++;  // T_BLOCK_BEGIN
            int at = line(P);
            Str name = expect_name(P);
            if (is_end(name, ends)) {
                P->i--;
                break;
            }
            n = parse_statement(P, name, at);
        }
        list_push(P->a, &body, n);
    }
    P->depth--;
    return body;
}

// Lexes and parses source into t; -1 with t->arena.err set when it fails.
static int parse_into(JinjaTemplate *t, const char *source, size_t len) {
    jmp_buf fail;
    t->arena.fail = &fail;
    if (setjmp(fail)) return -1;
    size_t bad = utf8_invalid_offset(source, len);
    if (bad < len) jinja_fail(&t->arena, 0, "invalid UTF-8 at byte %zu", bad);
    Parser P = {.a = &t->arena};
    P.t = jinja_lex(&t->arena, source, len, &P.n);
    t->body = parse_body(&P, NULL);
    t->arena.fail = NULL;
    return 0;
}

JinjaTemplate *jinja_parse(const char *source, size_t len, Err *err) {
    JinjaTemplate *t = calloc(1, sizeof *t);
    if (!t) {
        err_fmt(err, "out of memory");
        return NULL;
    }
    t->arena = (Arena){.limit = (size_t)256 << 20, .err = err};
    if (parse_into(t, source, len) < 0) {
        jinja_free(t);
        return NULL;
    }
    return t;
}

void jinja_free(JinjaTemplate *t) {
    if (!t) return;
    arena_free(&t->arena);
    free(t);
}
