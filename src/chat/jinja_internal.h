// jinja_internal.h — the interpreter's pieces, shared by its files: the arena and the failure jump (jinja_value.c),
// values (jinja_value.c), tokens (jinja_lex.c), the syntax tree (jinja_parse.c), the evaluator (jinja_eval.c) and
// the built-in filters, tests, methods and functions (jinja_builtins.c).
//
// Memory. Everything a parse or a render makes lives in one Arena, freed at once at the end; values are never freed
// one by one. Errors leave by longjmp to the entry point (jinja_parse, jinja_render), which frees the arena: the
// deep recursion of a parser and an evaluator then needs no error plumbing, and nothing can leak.
#ifndef SPECDEC_CHAT_JINJA_INTERNAL_H
#define SPECDEC_CHAT_JINJA_INTERNAL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "chat/jinja.h"

// ---- arena and failure ---------------------------------------------------------------------------------------

typedef struct ArenaBlock ArenaBlock;
typedef struct {
    ArenaBlock *head;
    size_t used;            // bytes handed out, against limit
    size_t limit;
    jmp_buf *fail;          // where jinja_fail jumps
    Err *err;
} Arena;

void *arena_alloc(Arena *a, size_t n);  // zeroed; fails (jinja_fail) past the limit
void arena_free(Arena *a);
_Noreturn void jinja_fail(Arena *a, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- values ---------------------------------------------------------------------------------------------------

typedef enum {
    V_UNDEFINED, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STRING, V_LIST, V_DICT, V_NAMESPACE,
} ValueKind;

// A string: p[0..n) UTF-8; data[i] = 1 where byte i came from data (data NULL: all from the template).
typedef struct {
    const char *p;
    const unsigned char *data;
    size_t n;
} Str;

typedef struct List List;
typedef struct Dict Dict;

typedef struct {
    ValueKind kind;
    union {
        bool b;
        int64_t i;
        double f;
        Str s;
        List *list;     // V_LIST
        Dict *dict;     // V_DICT, V_NAMESPACE (a dict whose attributes can be set)
    };
} Value;

struct List {
    Value *items;       // [n]
    size_t n;
    bool tuple;         // a Python tuple (dict.items()' pairs): printed in parentheses
};

struct Dict {
    Str *keys;          // [n], in insertion order, as Python's dicts keep them
    Value *values;      // [n]
    size_t n, cap;
};

static inline Value v_undefined(void) { return (Value){.kind = V_UNDEFINED}; }
static inline Value v_none(void) { return (Value){.kind = V_NONE}; }
static inline Value v_bool(bool b) { return (Value){.kind = V_BOOL, .b = b}; }
static inline Value v_int(int64_t i) { return (Value){.kind = V_INT, .i = i}; }
static inline Value v_float(double f) { return (Value){.kind = V_FLOAT, .f = f}; }
static inline Value v_str(Str s) { return (Value){.kind = V_STRING, .s = s}; }

Str str_lit(const char *p, size_t n);                                   // from the template, not copied
Str str_copy(Arena *a, const char *p, size_t n, bool from_data);
Str str_slice(Str s, size_t from, size_t to);                           // bytes [from, to)
Str str_concat(Arena *a, Str x, Str y);
bool str_any_data(Str s);
bool str_eq(Str x, Str y);
bool str_eq_c(Str x, const char *c);

// The longest string a render makes (its output included): chat templates make kilobytes.
#define JINJA_TEXT_LIMIT ((size_t)16 << 20)

// A growing string with provenance, for results built piece by piece (the output, str(), tojson).
typedef struct {
    char *p;
    unsigned char *data;
    size_t n, cap;
    Arena *arena;       // NULL: malloc'd (the render's output), else in the arena
    size_t limit;
    int line;           // for the error when the limit is passed
} StrBuf;

void sb_put(StrBuf *b, Str s);
void sb_put_c(StrBuf *b, const char *c, bool from_data);
void sb_put_n(StrBuf *b, const char *p, size_t n, bool from_data);
Str sb_str(const StrBuf *b);

List *list_new(Arena *a, size_t n);
Dict *dict_new(Arena *a);
Value *dict_get(const Dict *d, Str key);                                // NULL if absent
void dict_set(Arena *a, Dict *d, Str key, Value v);

Value value_from_json(Arena *a, const json_t *j, bool from_data, int depth);
bool value_truthy(Value v);
bool value_equal(Value x, Value y);
const char *value_kind_name(ValueKind k);
void value_to_str(Arena *a, StrBuf *b, Value v, bool repr);            // Python's str() (or repr())
void value_to_json(Arena *a, StrBuf *b, Value v, int indent, int level, int line);  // json.dumps, ensure_ascii off

// UTF-8 helpers on Str (strings are valid UTF-8 throughout).
size_t str_chars(Str s);                                                // code points
size_t str_char_offset(Str s, size_t k);                                // byte offset of code point k (≤ n)
bool cp_is_space(uint32_t cp);                                          // Python's str.isspace()
uint32_t str_cp_at(Str s, size_t off, int *len);

// ---- tokens ---------------------------------------------------------------------------------------------------

typedef enum {
    T_TEXT, T_VAR_BEGIN, T_VAR_END, T_BLOCK_BEGIN, T_BLOCK_END, T_NAME, T_STRING, T_INT, T_FLOAT, T_OP, T_EOF,
} TokKind;

typedef struct {
    TokKind kind;
    int line;
    Str text;           // T_TEXT, T_NAME, T_STRING (unescaped), T_OP
    int64_t i;          // T_INT
    double f;           // T_FLOAT
} Token;

// Splits the template into tokens, whitespace control applied to the text; the last token is T_EOF.
Token *jinja_lex(Arena *a, const char *source, size_t len, int *n_tokens);

// ---- syntax tree ----------------------------------------------------------------------------------------------

typedef enum {
    // statements
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_BREAK, N_CONTINUE, N_BLOCK,
    // expressions
    E_CONST, E_NAME, E_LIST, E_DICT, E_ATTR, E_INDEX, E_SLICE, E_CALL, E_METHOD, E_FILTER, E_TEST, E_NOT, E_NEG,
    E_BINARY, E_COMPARE, E_AND, E_OR, E_COND,
} NodeKind;

typedef struct Node Node;
typedef struct {
    Node **items;
    int n;
} NodeList;

// One node: the fields used depend on kind (comments say which).
struct Node {
    NodeKind kind;
    int line;
    Str name;           // E_NAME, E_ATTR, E_METHOD, E_FILTER, E_TEST, E_CALL: the name; E_BINARY, E_COMPARE: the op
                        // N_SET / N_SET_ATTR: the variable; N_TEXT: the text
    Value value;        // E_CONST
    Node *a, *b, *c;    // operands: E_BINARY a op b; E_COND b if a else c; E_SLICE a[b:c] (step in args);
                        // N_IF a: condition; N_FOR a: iterable, b: filter; N_OUTPUT, N_SET a: the expression;
                        // E_ATTR, E_INDEX, E_METHOD, E_FILTER, E_TEST: a is the object
    NodeList args;      // E_LIST, E_CALL, E_METHOD, E_FILTER, E_TEST: arguments; E_DICT: key, value, key, ...
    Str *kw;            // [args.n] keyword of each argument (n = 0: positional)
    NodeList body;      // N_IF, N_FOR, N_BLOCK
    NodeList orelse;    // N_IF, N_FOR
    Str *targets;       // N_FOR: loop variables [n_targets]
    int n_targets;
    Str attr;           // N_SET_ATTR: the attribute
};

// A parsed template: its tree, in its own arena.
struct JinjaTemplate {
    Arena arena;
    NodeList body;
};

// The built-in names the parser accepts (jinja_builtins.c); anything else is refused at parse time.
bool builtin_has_filter(Str name);
bool builtin_has_test(Str name);
bool builtin_has_method(Str name);
bool builtin_has_function(Str name);

// ---- evaluation -----------------------------------------------------------------------------------------------

typedef struct Scope Scope;
struct Scope {
    Dict *vars;
    Scope *parent;
};

typedef struct {
    Arena *arena;
    StrBuf out;
    Scope *scope;
    int64_t now;
    int64_t steps;      // statements and loop turns left before "runs too long"
    int loop_control;   // 0, or N_BREAK / N_CONTINUE while one unwinds to its loop
    int depth;
} Eval;

Value eval_expr(Eval *e, const Node *n);

// Built-ins: args[0..n) evaluated, kw[i] their keywords (n = 0 for positional ones). Filters, tests, methods and
// functions each run from a table of names and functions, the one builtin_has_filter (…_test, _method, _function)
// reads: a name not in it (one that map, select or reject name at render time) is an error naming it, and a method
// runs only on the kind of value it belongs to (a string's or a dict's).
Value builtin_filter(Eval *e, const Node *n, Value x, const Value *args, const Str *kw, int n_args);
bool builtin_test(Eval *e, const Node *n, Value x, const Value *args, int n_args);
Value builtin_method(Eval *e, const Node *n, Value self, const Value *args, const Str *kw, int n_args);
Value builtin_function(Eval *e, const Node *n, const Value *args, const Str *kw, int n_args);

#endif
