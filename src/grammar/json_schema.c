// json_schema.c — a JSON Schema as GBNF (json_schema.h): each schema node becomes an expression, objects and arrays
// rules of their own named after their place ("root-address-street"), then the primitive rules of JSON follow.
#include "grammar/json_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/regex.h"
#include "grammar/text.h"

enum { MAX_DEPTH = 64, MAX_DIGITS = 16 };

// JSON's primitive rules: what any value, object or string is, with bounded whitespace and numbers.
static const char PRIMITIVES[] =
    "ws ::= ([ \\t\\n] [ \\t]{0,19})?\n"
    "value ::= object | array | string | number | boolean | null\n"
    "object ::= \"{\" ws (string ws \":\" ws value ws (\",\" ws string ws \":\" ws value ws)*)? \"}\"\n"
    "array ::= \"[\" ws (value ws (\",\" ws value ws)*)? \"]\"\n"
    "string ::= \"\\\"\" char* \"\\\"\"\n"
    "char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n"
    "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n"
    "number ::= integer (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})?\n"
    "boolean ::= \"true\" | \"false\"\n"
    "null ::= \"null\"\n"
    // A calendar date of the proleptic Gregorian calendar, years 0001..9999: each month's days, February's 29th in
    // leap years only (divisible by 4, centuries by 400).
    "date ::= year \"-\" ((\"0\" [13578] | \"1\" [02]) \"-\" day31 | (\"0\" [469] | \"11\") \"-\" day30 | \"02-\" day28)"
    " | leap-year \"-02-29\"\n"
    "year ::= [1-9] [0-9]{3} | \"0\" [1-9] [0-9]{2} | \"00\" [1-9] [0-9] | \"000\" [1-9]\n"
    "leap-year ::= [0-9]{2} leap-two | leap-two \"00\"\n"
    "leap-two ::= \"0\" [48] | [2468] [048] | [13579] [26]\n"
    "day28 ::= \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8]\n"
    "day30 ::= day28 | \"29\" | \"30\"\n"
    "day31 ::= day30 | \"31\"\n"
    "time ::= ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,6})? "
    "(\"Z\" | [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])\n"
    "uuid ::= [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12}\n";

typedef struct {
    json_t *root;
    const char *source;
    Err *err;
    Text rules;                 // the rules written so far
    json_t *names;              // rule names taken: {name: true}
    json_t *refs;               // {"#/$defs/x": rule name}: each definition written once, recursion allowed
    int depth;
} Converter;

static int refuse(Converter *c, const char *path, const char *what) {
    return err_fmt(c->err, "%s: at %s: %s", c->source, path[0] ? path : "/", what);
}

// A rule name free for the schema at `base` ("root-name"): letters, digits and '-' kept, anything else '-'.
static char *new_rule_name(Converter *c, const char *base) {
    char name[96];
    size_t n = 0;
    for (const char *p = base; *p && n < 80; p++)
        name[n++] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '-';
    name[n] = '\0';
    for (int k = 2; json_object_get(c->names, name); k++) snprintf(name + n, sizeof name - n, "-%d", k);
    json_object_set_new(c->names, name, json_true());
    return strdup(name);
}

static void define(Converter *c, const char *name, const char *body) { text_add(&c->rules, "%s ::= %s\n", name, body); }

// ---- the keywords read --------------------------------------------------------------------------------------------

static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "enum", "const",
    "minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "anyOf", "oneOf", "$ref", "$defs", "definitions",
    // annotations: they describe, they do not constrain
    "title", "description", "default", "examples", "$schema", "$id", "$comment",
};

static int check_keywords(Converter *c, json_t *schema, const char *path) {
    const char *key;
    json_t *v;
    json_object_foreach(schema, key, v) {
        bool known = false;
        for (size_t i = 0; i < sizeof KNOWN / sizeof *KNOWN && !known; i++) known = strcmp(key, KNOWN[i]) == 0;
        if (!known) {
            char what[160];
            snprintf(what, sizeof what, "the keyword '%.80s' is not supported", key);
            return refuse(c, path, what);
        }
    }
    return 0;
}

// ---- values written out: const, enum ---------------------------------------------------------------------------------

// The compact JSON text of v as a GBNF literal, appended to t.
static int literal_of(Converter *c, Text *t, json_t *v, const char *path) {
    char *dumped = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!dumped) return refuse(c, path, "a value that cannot be written as JSON");
    text_literal(t, dumped, strlen(dumped));
    free(dumped);
    return 0;
}

static bool has_type(json_t *v, const char *type) {
    if (!type) return true;
    if (!strcmp(type, "integer"))
        return json_is_integer(v) || (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)));
    if (!strcmp(type, "number")) return json_is_number(v);
    if (!strcmp(type, "string")) return json_is_string(v);
    if (!strcmp(type, "boolean")) return json_is_boolean(v);
    if (!strcmp(type, "null")) return json_is_null(v);
    if (!strcmp(type, "object")) return json_is_object(v);
    return json_is_array(v);
}

// enum's values (those of `type`, when one is given) as alternatives.
static char *enum_expression(Converter *c, json_t *values, const char *type, const char *path) {
    if (!json_is_array(values) || json_array_size(values) == 0) {
        refuse(c, path, "enum must be a non-empty array");
        return NULL;
    }
    Text t = {0};
    size_t i;
    json_t *v;
    int written = 0;
    text_add(&t, "(");
    json_array_foreach(values, i, v) {
        if (!has_type(v, type)) continue;
        if (written++) text_add(&t, " | ");
        if (literal_of(c, &t, v, path) < 0) {
            free(text_take(&t));
            return NULL;
        }
    }
    text_add(&t, ")");
    if (!written) {
        free(text_take(&t));
        refuse(c, path, "no value of enum has the schema's type");
        return NULL;
    }
    return text_take(&t);
}

// ---- integers: decimal ranges ------------------------------------------------------------------------------------------

// The numbers with digits lo[0..n) to hi[0..n) (equal lengths, lo ≤ hi) as GBNF, digit by digit: the first digit
// shared, or split into lo's first digit (then anything ≥ the rest of lo), the digits between (then anything), and
// hi's first digit (then anything ≤ the rest of hi).
static void digits_between(Text *t, const char *lo, const char *hi, int n) {
    if (n == 0) return;
    if (lo[0] == hi[0]) {
        text_add(t, " \"%c\"", lo[0]);
        digits_between(t, lo + 1, hi + 1, n - 1);
        return;
    }
    char nines[MAX_DIGITS + 1], zeros[MAX_DIGITS + 1];
    memset(nines, '9', (size_t)n - 1);
    memset(zeros, '0', (size_t)n - 1);
    bool lo_whole = strncmp(lo + 1, zeros, (size_t)n - 1) == 0, hi_whole = strncmp(hi + 1, nines, (size_t)n - 1) == 0;
    char first = lo_whole ? lo[0] : (char)(lo[0] + 1), last = hi_whole ? hi[0] : (char)(hi[0] - 1);
    const char *sep = "";
    text_add(t, " (");
    if (!lo_whole) {
        text_add(t, "\"%c\"", lo[0]);
        digits_between(t, lo + 1, nines, n - 1);
        sep = " | ";
    }
    if (first <= last) {
        text_add(t, "%s[%c-%c]", sep, first, last);
        if (n > 1) text_add(t, " [0-9]{%d}", n - 1);
        sep = " | ";
    }
    if (!hi_whole) {
        text_add(t, "%s\"%c\"", sep, hi[0]);
        digits_between(t, zeros, hi + 1, n - 1);
    }
    text_add(t, ")");
}

// The non-negative integers lo..hi (hi < 0: up to MAX_DIGITS digits) without leading zeros, as alternatives.
static void naturals_between(Text *t, long long lo, long long hi) {
    char l[MAX_DIGITS + 2], h[MAX_DIGITS + 2];
    int n_lo = snprintf(l, sizeof l, "%lld", lo), n_hi = hi < 0 ? MAX_DIGITS : snprintf(h, sizeof h, "%lld", hi);
    const char *sep = "";
    text_add(t, "(");
    for (int d = n_lo; d <= n_hi; d++) {
        char a[MAX_DIGITS + 2], b[MAX_DIGITS + 2];
        if (d == n_lo) memcpy(a, l, (size_t)d + 1);
        else snprintf(a, sizeof a, "1%0*d", d - 1, 0);
        if (d == n_hi && hi >= 0) {
            memcpy(b, h, (size_t)d + 1);
        } else {
            memset(b, '9', (size_t)d);
            b[d] = '\0';
        }
        text_add(t, "%s(\"\"", sep);
        digits_between(t, a, b, d);
        text_add(t, ")");
        sep = " | ";
    }
    text_add(t, ")");
}

// A bound of an integer schema: *bound set from `keyword` (inclusive; exclusive ones moved in by one).
static int integer_bound(Converter *c, json_t *schema, const char *keyword, bool upper, bool *has, long long *bound,
                         const char *path) {
    json_t *v = json_object_get(schema, keyword);
    if (!v) return 0;
    if (!json_is_number(v)) return refuse(c, path, "a bound must be a number");
    double x = json_number_value(v), limit = 1e16 - 1;
    if (!(fabs(x) <= limit)) return refuse(c, path, "a bound beyond 16 digits");
    bool exclusive = strncmp(keyword, "exclusive", 9) == 0;
    long long b = (long long)(upper ? floor(x) : ceil(x));
    if (exclusive && (double)b == x) b += upper ? -1 : 1;
    if (!*has || (upper ? b < *bound : b > *bound)) *bound = b;
    *has = true;
    return 0;
}

static char *integer_expression(Converter *c, json_t *schema, const char *path) {
    bool has_lo = false, has_hi = false;
    long long lo = 0, hi = 0;
    if (integer_bound(c, schema, "minimum", false, &has_lo, &lo, path) < 0 ||
        integer_bound(c, schema, "exclusiveMinimum", false, &has_lo, &lo, path) < 0 ||
        integer_bound(c, schema, "maximum", true, &has_hi, &hi, path) < 0 ||
        integer_bound(c, schema, "exclusiveMaximum", true, &has_hi, &hi, path) < 0)
        return NULL;
    if (!has_lo && !has_hi) return strdup("integer");
    if (has_lo && has_hi && lo > hi) {
        refuse(c, path, "no integer lies between the bounds");
        return NULL;
    }
    Text t = {0};
    const char *sep = "";
    text_add(&t, "(");
    if (!has_lo || lo < 0) {  // the negative ones: "-" then -min(hi, -1) .. -lo
        long long top = has_hi && hi < -1 ? -hi : 1;
        text_add(&t, "\"-\" ");
        naturals_between(&t, top, has_lo ? -lo : -1);
        sep = " | ";
    }
    if (!has_hi || hi >= 0) {
        text_add(&t, "%s", sep);
        naturals_between(&t, has_lo && lo > 0 ? lo : 0, has_hi ? hi : -1);
    }
    text_add(&t, ")");
    return text_take(&t);
}

// ---- strings -----------------------------------------------------------------------------------------------------------

static int count_of(Converter *c, json_t *schema, const char *keyword, long *value, const char *path) {
    json_t *v = json_object_get(schema, keyword);
    if (!v) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > GRAMMAR_MAX_REPEAT) {
        char what[120];
        snprintf(what, sizeof what, "%s must be an integer from 0 to %d", keyword, GRAMMAR_MAX_REPEAT);
        return refuse(c, path, what);
    }
    *value = (long)json_integer_value(v);
    return 0;
}

static char *string_expression(Converter *c, json_t *schema, const char *path) {
    json_t *pattern = json_object_get(schema, "pattern"), *format = json_object_get(schema, "format");
    long min = 0, max = -1;
    if (count_of(c, schema, "minLength", &min, path) < 0 || count_of(c, schema, "maxLength", &max, path) < 0)
        return NULL;
    bool lengths = json_object_get(schema, "minLength") || json_object_get(schema, "maxLength");
    if ((pattern || format) && lengths) {
        refuse(c, path, "minLength or maxLength together with pattern or format is not supported");
        return NULL;
    }
    Text t = {0};
    text_add(&t, "(\"\\\"\" ");
    if (pattern) {
        if (!json_is_string(pattern) || format) {
            refuse(c, path, "pattern must be a string, without format");
            free(text_take(&t));
            return NULL;
        }
        if (regex_to_gbnf(&t, json_string_value(pattern), path, c->err) < 0) {
            free(text_take(&t));
            return NULL;
        }
    } else if (format) {
        const char *f = json_is_string(format) ? json_string_value(format) : "";
        if (!strcmp(f, "date") || !strcmp(f, "time") || !strcmp(f, "uuid")) {
            text_add(&t, "%s", f);
        } else if (!strcmp(f, "date-time")) {
            text_add(&t, "date \"T\" time");
        } else {
            char what[160];
            snprintf(what, sizeof what, "format '%.60s' is not supported (date, time, date-time, uuid are)", f);
            refuse(c, path, what);
            free(text_take(&t));
            return NULL;
        }
    } else if (max >= 0) {
        if (max < min) {
            refuse(c, path, "maxLength is below minLength");
            free(text_take(&t));
            return NULL;
        }
        text_add(&t, "char{%ld,%ld}", min, max);
    } else {
        text_add(&t, "char{%ld,}", min);
    }
    text_add(&t, " \"\\\"\")");
    return text_take(&t);
}

// ---- arrays and objects ------------------------------------------------------------------------------------------------

static char *visit(Converter *c, json_t *schema, const char *name, const char *path);

// A sub-schema's expression: its name and path extended by `part`.
static char *visit_part(Converter *c, json_t *schema, const char *name, const char *path, const char *part) {
    char sub_name[128], sub_path[512];
    snprintf(sub_name, sizeof sub_name, "%.60s-%.60s", name, part);
    snprintf(sub_path, sizeof sub_path, "%.250s/%.250s", path, part);
    return visit(c, schema, sub_name, sub_path);
}

static char *array_rule(Converter *c, json_t *schema, const char *name, const char *path) {
    long min = 0, max = -1;
    if (count_of(c, schema, "minItems", &min, path) < 0 || count_of(c, schema, "maxItems", &max, path) < 0)
        return NULL;
    json_t *items = json_object_get(schema, "items");
    if (json_is_false(items)) max = 0;
    if (max >= 0 && max < min) {
        refuse(c, path, "maxItems is below minItems (or items is false)");
        return NULL;
    }
    if (max == 0) return strdup("(\"[\" ws \"]\")");
    char *item = items ? visit_part(c, items, name, path, "items") : strdup("value");
    if (!item) return NULL;
    Text t = {0};
    text_add(&t, "\"[\" ws (%s ws (\",\" ws %s ws){%ld,", item, item, min > 0 ? min - 1 : 0);
    if (max > 0) text_add(&t, "%ld", max - 1);
    text_add(&t, "})%s \"]\"", min > 0 ? "" : "?");
    free(item);
    char *body = text_take(&t), *rule = new_rule_name(c, name);
    if (body && rule) define(c, rule, body);
    free(body);
    return rule;
}

typedef struct {
    char **kv;                  // [n]: each property's `"key" ws ":" ws value ws`
    int n, n_required;          // required ones first
} Members;

static void free_members(Members *m) {
    for (int i = 0; i < m->n; i++) free(m->kv[i]);
    free(m->kv);
}

// The properties' key-value expressions, the required ones first (each in the schema's order).
static int object_members(Converter *c, json_t *schema, const char *name, const char *path, Members *m) {
    json_t *props = json_object_get(schema, "properties"), *required = json_object_get(schema, "required");
    if ((props && !json_is_object(props)) || (required && !json_is_array(required)))
        return refuse(c, path, "properties must be an object and required an array");
    size_t i;
    json_t *r;
    json_array_foreach(required, i, r)
        if (!json_is_string(r) || !json_object_get(props, json_string_value(r)))
            return refuse(c, path, "a required key that properties does not describe");
    m->kv = calloc(json_object_size(props) + 1, sizeof *m->kv);
    if (!m->kv) return refuse(c, path, "out of memory");
    for (int pass = 0; pass < 2; pass++) {  // required ones, then the others
        const char *key;
        json_t *sub;
        json_object_foreach(props, key, sub) {
            bool is_required = false;
            json_array_foreach(required, i, r) is_required |= strcmp(json_string_value(r), key) == 0;
            if (is_required != (pass == 0)) continue;
            char sub_path[512];
            snprintf(sub_path, sizeof sub_path, "%.480s/properties", path);
            char *value = visit_part(c, sub, name, sub_path, key);
            if (!value) return -1;
            Text t = {0};
            json_t *k = json_string(key);
            literal_of(c, &t, k, path);
            json_decref(k);
            text_add(&t, " ws \":\" ws %s ws", value);
            free(value);
            if (!(m->kv[m->n++] = text_take(&t))) return refuse(c, path, "out of memory");
            m->n_required += pass == 0;
        }
    }
    return 0;
}

// The members from i on, each optional, after at least one member: ("," ws kv_i)? ("," ws kv_i+1)? …
static void optional_tail(Text *t, const Members *m, int from) {
    for (int j = from; j < m->n; j++) text_add(t, " (\",\" ws %s)?", m->kv[j]);
}

static char *object_rule(Converter *c, json_t *schema, const char *name, const char *path) {
    json_t *props = json_object_get(schema, "properties"), *extra = json_object_get(schema, "additionalProperties");
    if (extra && !json_is_boolean(extra)) {
        refuse(c, path, "additionalProperties as a schema is not supported (true or false are)");
        return NULL;
    }
    if (json_object_size(props) > 0 && json_is_true(extra)) {
        refuse(c, path, "additionalProperties true together with properties is not supported");
        return NULL;
    }
    Members m = {0};
    if (object_members(c, schema, name, path, &m) < 0) {
        free_members(&m);
        return NULL;
    }
    if (m.n == 0) {
        free_members(&m);
        return strdup(json_is_false(extra) ? "(\"{\" ws \"}\")" : "object");
    }
    Text t = {0};
    text_add(&t, "\"{\" ws ");
    if (m.n_required > 0) {
        text_add(&t, "%s", m.kv[0]);
        for (int j = 1; j < m.n_required; j++) text_add(&t, " \",\" ws %s", m.kv[j]);
        optional_tail(&t, &m, m.n_required);
    } else {  // all optional: whichever comes first has no comma before it
        text_add(&t, "(");
        for (int j = 0; j < m.n; j++) {
            text_add(&t, "%s%s", j ? " | " : "", m.kv[j]);
            optional_tail(&t, &m, j + 1);
        }
        text_add(&t, ")?");
    }
    text_add(&t, " \"}\"");
    free_members(&m);
    char *body = text_take(&t), *rule = new_rule_name(c, name);
    if (body && rule) define(c, rule, body);
    free(body);
    return rule;
}

// ---- schemas ---------------------------------------------------------------------------------------------------------

// $ref "#/$defs/NAME" or "#/definitions/NAME": the definition's rule, written the first time it is referred to
// (its name reserved before its body is visited, so a definition may refer to itself).
static char *ref_rule(Converter *c, json_t *ref, const char *path) {
    const char *target = json_is_string(ref) ? json_string_value(ref) : "";
    const char *def = NULL, *section = NULL;
    if (!strncmp(target, "#/$defs/", 8)) {
        section = "$defs";
        def = target + 8;
    } else if (!strncmp(target, "#/definitions/", 14)) {
        section = "definitions";
        def = target + 14;
    }
    json_t *schema = section ? json_object_get(json_object_get(c->root, section), def) : NULL;
    if (!schema) {
        char what[200];
        snprintf(what, sizeof what, "$ref '%.100s' is not a definition of this schema (#/$defs/… or #/definitions/…)",
                 target);
        refuse(c, path, what);
        return NULL;
    }
    json_t *known = json_object_get(c->refs, target);
    if (known) return strdup(json_string_value(known));
    char base[128];
    snprintf(base, sizeof base, "def-%.100s", def);
    char *rule = new_rule_name(c, base);
    if (!rule) return NULL;
    json_object_set_new(c->refs, target, json_string(rule));
    char *body = visit(c, schema, rule, target + 1);
    if (body) define(c, rule, body);
    free(body);
    if (!body) {
        free(rule);
        return NULL;
    }
    return rule;
}

// The expression for one type name of `type`.
static char *typed(Converter *c, json_t *schema, const char *type, const char *name, const char *path) {
    if (!strcmp(type, "object")) return object_rule(c, schema, name, path);
    if (!strcmp(type, "array")) return array_rule(c, schema, name, path);
    if (!strcmp(type, "string")) return string_expression(c, schema, path);
    if (!strcmp(type, "integer")) return integer_expression(c, schema, path);
    if (!strcmp(type, "number")) {
        if (json_object_get(schema, "minimum") || json_object_get(schema, "maximum") ||
            json_object_get(schema, "exclusiveMinimum") || json_object_get(schema, "exclusiveMaximum")) {
            refuse(c, path, "bounds on type number are not supported (they are on integer)");
            return NULL;
        }
        return strdup("number");
    }
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) return strdup(type);
    char what[160];
    snprintf(what, sizeof what, "type '%.60s' is not a JSON Schema type", type);
    refuse(c, path, what);
    return NULL;
}

// Alternatives: each element of `list` through `each` (anyOf, oneOf, a list of types).
static char *alternatives(Converter *c, json_t *schema, json_t *list, const char *name, const char *path,
                          const char *keyword) {
    if (!json_is_array(list) || json_array_size(list) == 0) {
        char what[120];
        snprintf(what, sizeof what, "%s must be a non-empty array", keyword);
        refuse(c, path, what);
        return NULL;
    }
    Text t = {0};
    text_add(&t, "(");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v) {
        char part[32];
        snprintf(part, sizeof part, "%s/%zu", keyword, i);
        char *e = json_is_string(v) ? typed(c, schema, json_string_value(v), name, path)
                                    : visit_part(c, v, name, path, part);
        if (!e) {
            free(text_take(&t));
            return NULL;
        }
        text_add(&t, "%s%s", i ? " | " : "", e);
        free(e);
    }
    text_add(&t, ")");
    return text_take(&t);
}

static char *visit(Converter *c, json_t *schema, const char *name, const char *path) {
    if (json_is_true(schema)) return strdup("value");
    if (json_is_false(schema) || !json_is_object(schema)) {
        refuse(c, path, json_is_false(schema) ? "the schema false accepts nothing" : "a schema must be an object");
        return NULL;
    }
    if (c->depth >= MAX_DEPTH) {
        refuse(c, path, "schemas nested more than 64 deep");
        return NULL;
    }
    if (check_keywords(c, schema, path) < 0) return NULL;
    json_t *type = json_object_get(schema, "type"), *v;
    if (type && !json_is_string(type) && !json_is_array(type)) {
        refuse(c, path, "type must be a string or an array of strings");
        return NULL;
    }
    c->depth++;
    char *e;
    const char *one_type = json_is_string(type) ? json_string_value(type) : NULL;
    if ((v = json_object_get(schema, "$ref"))) e = ref_rule(c, v, path);
    else if ((v = json_object_get(schema, "const"))) {
        Text t = {0};
        e = literal_of(c, &t, v, path) == 0 ? text_take(&t) : NULL;
    } else if ((v = json_object_get(schema, "enum"))) e = enum_expression(c, v, one_type, path);
    else if ((v = json_object_get(schema, "anyOf"))) e = alternatives(c, schema, v, name, path, "anyOf");
    else if ((v = json_object_get(schema, "oneOf"))) e = alternatives(c, schema, v, name, path, "oneOf");
    else if (json_is_array(type)) e = alternatives(c, schema, type, name, path, "type");
    else if (one_type) e = typed(c, schema, one_type, name, path);
    else if (json_object_get(schema, "properties")) e = object_rule(c, schema, name, path);
    else if (json_object_get(schema, "items")) e = array_rule(c, schema, name, path);
    else e = strdup("value");
    c->depth--;
    return e;
}

char *json_schema_to_gbnf(const char *text, size_t n, const char *source, Err *err) {
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        err_fmt(err, "%s:%d:%d: not JSON: %s", source, je.line, je.column, je.text);
        return NULL;
    }
    Converter c = {.root = root, .source = source, .err = err, .names = json_object(), .refs = json_object()};
    char *root_expression = NULL, *gbnf = NULL;
    if (c.names && c.refs) {
        json_object_set_new(c.names, "root", json_true());
        root_expression = visit(&c, root, "root", "");
    }
    if (root_expression) {
        Text t = {0};
        text_add(&t, "root ::= %s\n%s%s", root_expression, c.rules.s ? c.rules.s : "", PRIMITIVES);
        gbnf = text_take(&t);
        if (!gbnf || c.rules.failed) err_fmt(err, "%s: out of memory", source);
    }
    free(root_expression);
    free(text_take(&c.rules));
    json_decref(c.names);
    json_decref(c.refs);
    json_decref(root);
    return gbnf;
}

Grammar *json_schema_grammar(const char *text, size_t n, const char *source, Err *err) {
    char *gbnf = json_schema_to_gbnf(text, n, source, err);
    if (!gbnf) return NULL;
    Grammar *g = grammar_parse(gbnf, strlen(gbnf), source, err);
    free(gbnf);
    return g;
}

Grammar *json_object_grammar(Err *err) {
    static const char any_object[] = "{\"type\": \"object\"}";
    return json_schema_grammar(any_object, sizeof any_object - 1, "the JSON object grammar", err);
}
