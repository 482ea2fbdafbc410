// json_schema.c — a JSON Schema as GBNF (json_schema.h): each schema node becomes an expression, objects and arrays
// rules of their own named after their place ("root-address-street"), then the primitive rules of JSON follow.
#include "grammar/json_schema.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "grammar/decimal_range.h"
#include "grammar/regex.h"
#include "grammar/text.h"

enum { MAX_DEPTH = 64 };

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
    "allOf", "anyOf", "oneOf", "$ref", "$defs", "definitions",
};

// Annotations: they describe, they do not constrain.
static const char *const ANNOTATIONS[] = {"title", "description", "default", "examples", "$schema", "$id", "$comment"};

static bool is_annotation(const char *key) {
    bool found = false;
    for (size_t i = 0; i < sizeof ANNOTATIONS / sizeof *ANNOTATIONS && !found; i++) found = !strcmp(key, ANNOTATIONS[i]);
    return found;
}

static int check_keywords(Converter *c, json_t *schema, const char *path) {
    const char *key;
    json_t *v;
    json_object_foreach(schema, key, v) {
        bool known = is_annotation(key);
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

// ---- integers and numbers: their bounds ----------------------------------------------------------------------------

static int read_bounds(Converter *c, json_t *schema, const char *path, Bounds *b) {
    static const struct {
        const char *keyword;
        bool upper, exclusive;
    } KEYWORDS[] = {{"minimum", false, false}, {"exclusiveMinimum", false, true}, {"maximum", true, false},
                    {"exclusiveMaximum", true, true}};
    *b = (Bounds){0};
    for (size_t i = 0; i < sizeof KEYWORDS / sizeof *KEYWORDS; i++) {
        json_t *v = json_object_get(schema, KEYWORDS[i].keyword);
        if (!v) continue;
        if (!json_is_number(v)) return refuse(c, path, "a bound must be a number");
        double x = json_number_value(v);
        if (!(fabs(x) < 1e16)) return refuse(c, path, "a bound beyond 16 digits");
        bool exclusive = KEYWORDS[i].exclusive;
        if (KEYWORDS[i].upper && (!b->has_hi || x < b->hi || (x == b->hi && exclusive))) {
            b->has_hi = true;
            b->hi = x;
            b->hi_exclusive = exclusive;
        } else if (!KEYWORDS[i].upper && (!b->has_lo || x > b->lo || (x == b->lo && exclusive))) {
            b->has_lo = true;
            b->lo = x;
            b->lo_exclusive = exclusive;
        }
    }
    return 0;
}

static char *integer_expression(Converter *c, json_t *schema, const char *path) {
    Bounds b;
    if (read_bounds(c, schema, path, &b) < 0) return NULL;
    if (!b.has_lo && !b.has_hi) return strdup("integer");
    Text t = {0};
    if (!decimal_integers_within(&t, &b)) {
        refuse(c, path, "no integer lies between the bounds");
        return NULL;
    }
    return text_take(&t);
}

// Numbers within bounds are written without an exponent; bounds with a fraction are refused: the digit-by-digit
// ranges would have to reach into the fraction.
static char *number_expression(Converter *c, json_t *schema, const char *path) {
    Bounds b;
    if (read_bounds(c, schema, path, &b) < 0) return NULL;
    if (!b.has_lo && !b.has_hi) return strdup("number");
    if ((b.has_lo && b.lo != floor(b.lo)) || (b.has_hi && b.hi != floor(b.hi))) {
        refuse(c, path, "a bound on type number with a fraction is not supported (whole bounds are)");
        return NULL;
    }
    Text t = {0};
    if (!decimal_numbers_within(&t, &b)) {
        refuse(c, path, "no number lies between the bounds");
        return NULL;
    }
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
        char where[512];  // as refuse() names a place: the schema's source, then the pointer
        snprintf(where, sizeof where, "%s: at %s", c->source, path[0] ? path : "/");
        if (regex_to_gbnf(&t, json_string_value(pattern), where, c->err) < 0) {
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

// A JSON string other than the property names keys[0..n) (sorted, all sharing their first `at` bytes), from byte
// `at` on: a walk down the names' trie — the string ends here where no name does, or goes on with a character no
// name has next (then anything), or with a name's next character (then the same from there). Keys drawn from it
// are written without escapes, so that none can spell a property's name another way.
static void other_key_from(Text *t, const char **keys, int n, size_t at) {
    Text next = {0};  // the characters that continue some name (those a key may hold unescaped)
    const char *sep = "";
    text_add(t, "(");
    if (n == 0 || strlen(keys[0]) > at) {  // sorted: a name that ends here comes first
        text_add(t, "\"\\\"\"");
        sep = " | ";
    }
    for (int i = n > 0 && strlen(keys[0]) == at; i < n;) {
        uint32_t cp = 0;
        const char *from = keys[i] + at;
        int len = utf8_decode((const unsigned char *)from, strlen(from), &cp);
        len = len > 0 ? len : 1;
        int j = i + 1;
        while (j < n && !strncmp(keys[j] + at, from, (size_t)len)) j++;
        if (cp >= 0x20 && cp != '"' && cp != '\\') {
            text_class_char(&next, cp);
            text_add(t, "%s", sep);
            text_literal(t, from, (size_t)len);
            text_add(t, " ");
            other_key_from(t, keys + i, j - i, at + (size_t)len);
            sep = " | ";
        }
        i = j;
    }
    char *children = text_take(&next);
    text_add(t, "%s[^\"\\\\\\x00-\\x1F%s] [^\"\\\\\\x00-\\x1F]* \"\\\"\")", sep, children ? children : "");
    free(children);
}

static int by_bytes(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

// The key-value pairs of an object's other properties (additionalProperties true or a schema) as a rule:
// a key that no property names, then a value of `extra`'s schema.
static char *other_pair_rule(Converter *c, json_t *props, json_t *extra, const char *name, const char *path) {
    const char **keys = calloc(json_object_size(props) + 1, sizeof *keys), *key;
    int n = 0;
    json_t *sub;
    if (!keys) {
        refuse(c, path, "out of memory");
        return NULL;
    }
    json_object_foreach(props, key, sub) {
        if (strlen(key) > 128) {
            refuse(c, path, "a property name longer than 128 bytes beside additionalProperties");
            free(keys);
            return NULL;
        }
        keys[n++] = key;
    }
    qsort(keys, (size_t)n, sizeof *keys, by_bytes);
    char *value = json_is_true(extra) ? strdup("value") : visit_part(c, extra, name, path, "additionalProperties");
    Text t = {0};
    text_add(&t, "\"\\\"\" ");
    other_key_from(&t, keys, n, 0);
    free(keys);
    if (!value) {
        free(text_take(&t));
        return NULL;
    }
    text_add(&t, " ws \":\" ws %s ws", value);
    free(value);
    char base[128];
    snprintf(base, sizeof base, "%.100s-other", name);
    char *body = text_take(&t), *rule = new_rule_name(c, base);
    if (body && rule) define(c, rule, body);
    free(body);
    return rule;
}

// An object's members: its properties, the required ones first, each optional one may be left out; then any
// number of other pairs where `other` names their rule (NULL: none).
static void object_body(Text *t, const Members *m, const char *other) {
    char rest[200] = "";
    if (other) snprintf(rest, sizeof rest, " (\",\" ws %.180s)*", other);
    text_add(t, "\"{\" ws ");
    if (m->n_required > 0) {
        text_add(t, "%s", m->kv[0]);
        for (int j = 1; j < m->n_required; j++) text_add(t, " \",\" ws %s", m->kv[j]);
        optional_tail(t, m, m->n_required);
        text_add(t, "%s", rest);
    } else if (m->n > 0 || other) {  // all optional: whichever comes first has no comma before it
        text_add(t, "(");
        for (int j = 0; j < m->n; j++) {
            text_add(t, "%s%s", j ? " | " : "", m->kv[j]);
            optional_tail(t, m, j + 1);
            text_add(t, "%s", rest);
        }
        if (other) text_add(t, "%s%s%s", m->n ? " | " : "", other, rest);
        text_add(t, ")?");
    }
    text_add(t, " \"}\"");
}

// An object of the properties listed, and of others where additionalProperties is true or a schema; absent with
// properties listed, it reads as false (as llama.cpp's converter reads it); absent without, as any object.
static char *object_rule(Converter *c, json_t *schema, const char *name, const char *path) {
    json_t *props = json_object_get(schema, "properties"), *extra = json_object_get(schema, "additionalProperties");
    if (extra && !json_is_boolean(extra) && !json_is_object(extra)) {
        refuse(c, path, "additionalProperties must be a boolean or a schema");
        return NULL;
    }
    Members m = {0};
    char *other = NULL, *rule = NULL;
    bool others = extra && !json_is_false(extra);
    if (object_members(c, schema, name, path, &m) == 0) {
        if (m.n == 0 && (!extra || json_is_true(extra))) {
            rule = strdup("object");
        } else if (!others || (other = other_pair_rule(c, props, extra, name, path))) {
            Text t = {0};
            object_body(&t, &m, other);
            char *body = text_take(&t);
            rule = new_rule_name(c, name);
            if (body && rule) define(c, rule, body);
            free(body);
        }
    }
    free_members(&m);
    free(other);
    return rule;
}

// ---- schemas ---------------------------------------------------------------------------------------------------------

// $ref "#/$defs/NAME" or "#/definitions/NAME": the definition's rule, written the first time it is referred to
// (its name reserved before its body is visited, so a definition may refer to itself).
// The definition that $ref names, or NULL where it names none; *def its name.
static json_t *lookup_definition(const Converter *c, json_t *ref, const char **def) {
    const char *target = json_is_string(ref) ? json_string_value(ref) : "", *section = NULL;
    if (!strncmp(target, "#/$defs/", 8)) {
        section = "$defs";
        *def = target + 8;
    } else if (!strncmp(target, "#/definitions/", 14)) {
        section = "definitions";
        *def = target + 14;
    }
    return section ? json_object_get(json_object_get(c->root, section), *def) : NULL;
}

// lookup_definition, refused by name where $ref names no definition.
static json_t *definition(Converter *c, json_t *ref, const char **def, const char *path) {
    const char *target = json_is_string(ref) ? json_string_value(ref) : "";
    json_t *schema = lookup_definition(c, ref, def);
    if (!schema) {
        char what[200];
        snprintf(what, sizeof what, "$ref '%.100s' is not a definition of this schema (#/$defs/… or #/definitions/…)",
                 target);
        refuse(c, path, what);
    }
    return schema;
}

static char *ref_rule(Converter *c, json_t *ref, const char *path) {
    const char *target = json_string_value(ref), *def = NULL;
    json_t *schema = definition(c, ref, &def, path);
    if (!schema) return NULL;
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

// ---- allOf: object schemas merged -------------------------------------------------------------------------------------

typedef struct {
    const char *what;               // what is merged, for messages: "allOf", "$ref with sibling keywords …"
    json_t *properties, *required;  // the union of the parts'
    json_t *closed;                 // [the properties of each part with additionalProperties false]
    bool all_open;                  // every part says additionalProperties true
} Merge;

static int merge_part(Converter *c, Merge *m, json_t *part, const char *path);

static int merge_keyword(Converter *c, Merge *m, const char *keyword, json_t *v, const char *path) {
    char what[240];
    if (!strcmp(keyword, "type")) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "object")) {
            snprintf(what, sizeof what, "%s merges object schemas only: a part whose type is not object", m->what);
            return refuse(c, path, what);
        }
    } else if (!strcmp(keyword, "properties")) {
        const char *key;
        json_t *sub, *known;
        if (!json_is_object(v)) return refuse(c, path, "properties must be an object");
        json_object_foreach(v, key, sub) {
            if ((known = json_object_get(m->properties, key)) && !json_equal(known, sub)) {
                snprintf(what, sizeof what, "the property '%.80s' is described differently by two parts of allOf", key);
                return refuse(c, path, what);
            }
            json_object_set(m->properties, key, sub);
        }
    } else if (!strcmp(keyword, "required")) {
        if (!json_is_array(v)) return refuse(c, path, "required must be an array");
        json_array_extend(m->required, v);
    } else if (!strcmp(keyword, "additionalProperties")) {
        if (!json_is_boolean(v)) return refuse(c, path, "allOf with additionalProperties as a schema is not supported");
    } else if (!strcmp(keyword, "allOf")) {
        size_t i;
        json_t *sub;
        if (!json_is_array(v) || json_array_size(v) == 0) return refuse(c, path, "allOf must be a non-empty array");
        json_array_foreach(v, i, sub) {
            char sub_path[512];
            snprintf(sub_path, sizeof sub_path, "%.480s/allOf/%zu", path, i);
            if (merge_part(c, m, sub, sub_path) < 0) return -1;
        }
    } else if (!strcmp(keyword, "$ref")) {
        const char *def;
        json_t *target = definition(c, v, &def, path);
        if (!target || merge_part(c, m, target, json_string_value(v) + 1) < 0) return -1;
    } else if (strcmp(keyword, "$defs") && strcmp(keyword, "definitions") && !is_annotation(keyword)) {
        snprintf(what, sizeof what, "%s merges object schemas only: '%.80s' cannot be merged", m->what, keyword);
        return refuse(c, path, what);
    }
    return 0;
}

// One part of allOf (or the schema that holds it) merged into m: its keywords, its own allOf and $ref followed.
static int merge_part(Converter *c, Merge *m, json_t *part, const char *path) {
    if (json_is_true(part)) return 0;
    if (!json_is_object(part)) return refuse(c, path, "a part of allOf must be an object schema");
    if (c->depth >= MAX_DEPTH) return refuse(c, path, "schemas nested more than 64 deep");
    json_t *extra = json_object_get(part, "additionalProperties"), *listed = json_object_get(part, "properties"), *v;
    m->all_open &= json_is_true(extra) || (!extra && !listed);  // as object_rule reads a part alone
    if (json_is_false(extra)) json_array_append_new(m->closed, listed ? json_incref(listed) : json_object());
    c->depth++;
    const char *keyword;
    int rc = 0;
    json_object_foreach(part, keyword, v) if (rc == 0) rc = merge_keyword(c, m, keyword, v, path);
    c->depth--;
    return rc;
}

// allOf of object schemas as one object: the union of their properties (one described by two parts must be
// described the same) and of their required names; where a part says additionalProperties false, every property
// must be one it lists; other properties only where every part says additionalProperties true. `what` names the
// merge in messages (allOf, or a $ref with sibling keywords, which are merged with the definition the same way).
static char *all_of(Converter *c, json_t *schema, const char *name, const char *path, const char *what) {
    Merge m = {.what = what, .properties = json_object(), .required = json_array(), .closed = json_array(),
               .all_open = true};
    json_t *merged = json_object();
    char *e = NULL;
    if (m.properties && m.required && m.closed && merged && merge_part(c, &m, schema, path) == 0) {
        size_t i;
        json_t *listed;
        const char *key, *stray = NULL;
        json_t *sub;
        json_array_foreach(m.closed, i, listed) json_object_foreach(m.properties, key, sub)
            if (!stray && !json_object_get(listed, key)) stray = key;
        if (stray) {
            char what[240];
            snprintf(what, sizeof what, "the property '%.80s' is not listed by a part of allOf with "
                     "additionalProperties false", stray);
            refuse(c, path, what);
        } else {
            json_object_set(merged, "properties", m.properties);
            json_object_set(merged, "required", m.required);
            json_object_set_new(merged, "additionalProperties", json_boolean(m.all_open));
            e = object_rule(c, merged, name, path);
        }
    }
    json_decref(m.properties);
    json_decref(m.required);
    json_decref(m.closed);
    json_decref(merged);
    return e;
}

// The expression for one type name of `type`.
static char *typed(Converter *c, json_t *schema, const char *type, const char *name, const char *path) {
    if (!strcmp(type, "object")) return object_rule(c, schema, name, path);
    if (!strcmp(type, "array")) return array_rule(c, schema, name, path);
    if (!strcmp(type, "string")) return string_expression(c, schema, path);
    if (!strcmp(type, "integer")) return integer_expression(c, schema, path);
    if (!strcmp(type, "number")) return number_expression(c, schema, path);
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

// ---- oneOf: branches proven disjoint ------------------------------------------------------------------------------

// JSON's types as bits (integer is number's: a whole number is both).
enum { T_NULL = 1, T_BOOLEAN = 2, T_NUMBER = 4, T_STRING = 8, T_ARRAY = 16, T_OBJECT = 32, T_ANY = 63 };

static int value_type(json_t *v) {
    if (json_is_null(v)) return T_NULL;
    if (json_is_boolean(v)) return T_BOOLEAN;
    if (json_is_number(v)) return T_NUMBER;
    if (json_is_string(v)) return T_STRING;
    return json_is_array(v) ? T_ARRAY : T_OBJECT;
}

static int type_named(json_t *name) {
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object", "integer"};
    for (int i = 0; i < 7; i++)
        if (json_is_string(name) && !strcmp(json_string_value(name), names[i])) return i < 6 ? 1 << i : T_NUMBER;
    return T_ANY;
}

// The types that a document valid against schema may have (a superset, as JSON Schema reads it: keywords of
// objects say nothing of documents that are not objects, so only type, const, enum, $ref and the combinators
// narrow it).
static int schema_types(const Converter *c, json_t *schema, int depth) {
    if (json_is_false(schema)) return 0;
    if (!json_is_object(schema) || depth > MAX_DEPTH) return T_ANY;
    int types = T_ANY, some;
    size_t i;
    const char *def;
    json_t *v = json_object_get(schema, "type"), *sub;
    if (json_is_string(v)) types = type_named(v);
    if (json_is_array(v)) {
        types = 0;
        json_array_foreach(v, i, sub) types |= type_named(sub);
    }
    if ((v = json_object_get(schema, "const"))) types &= value_type(v);
    if (json_is_array(v = json_object_get(schema, "enum"))) {
        some = 0;
        json_array_foreach(v, i, sub) some |= value_type(sub);
        types &= some;
    }
    if ((v = json_object_get(schema, "$ref")) && (sub = lookup_definition(c, v, &def)))
        types &= schema_types(c, sub, depth + 1);
    static const char *const unions[] = {"anyOf", "oneOf"};
    for (int u = 0; u < 2; u++)
        if (json_is_array(v = json_object_get(schema, unions[u]))) {
            some = 0;
            json_array_foreach(v, i, sub) some |= schema_types(c, sub, depth + 1);
            types &= some;
        }
    if (json_is_array(v = json_object_get(schema, "allOf")))
        json_array_foreach(v, i, sub) types &= schema_types(c, sub, depth + 1);
    return types;
}

// The values a document valid against schema may take where const or enum lists them ($ref followed): borrowed, a
// JSON array (const as an array of one, owned by *one), or NULL for any value.
static json_t *schema_values(const Converter *c, json_t *schema, json_t **one, int depth) {
    const char *def;
    json_t *v, *target;
    if (!json_is_object(schema) || depth > MAX_DEPTH) return NULL;
    if ((v = json_object_get(schema, "const"))) return *one = json_pack("[O]", v);
    if (json_is_array(v = json_object_get(schema, "enum"))) return v;
    if ((v = json_object_get(schema, "$ref")) && (target = lookup_definition(c, v, &def)))
        return schema_values(c, target, one, depth + 1);
    return NULL;
}

// JSON Schema's equality: numbers by value (1 and 1.0 are equal), the rest as JSON.
static bool same_value(json_t *a, json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    return json_equal(a, b);
}

// Both lists hold values (neither is any value), and no value is in both.
static bool values_apart(json_t *a, json_t *b) {
    size_t i, j;
    json_t *x, *y;
    if (!a || !b) return false;
    json_array_foreach(a, i, x) json_array_foreach(b, j, y) if (same_value(x, y)) return false;
    return true;
}

// schema with its $ref followed to the definition (its siblings only narrow it further).
static json_t *referred(const Converter *c, json_t *schema) {
    const char *def;
    json_t *target;
    for (int depth = 0; depth < MAX_DEPTH && json_is_object(schema) && json_object_get(schema, "$ref"); depth++) {
        if (!(target = lookup_definition(c, json_object_get(schema, "$ref"), &def))) break;
        schema = target;
    }
    return schema;
}

// An object valid against a and one valid against b differ in a property both require, whose values const or enum
// list apart in each (a discriminator: {"kind": {"const": "cat"}} against {"kind": {"const": "dog"}}).
static bool objects_apart(const Converter *c, json_t *a, json_t *b) {
    a = referred(c, a);
    b = referred(c, b);
    json_t *required_a = json_object_get(a, "required"), *required_b = json_object_get(b, "required"), *key, *other;
    size_t i, j;
    bool apart = false;
    json_array_foreach(required_a, i, key) json_array_foreach(required_b, j, other) {
        if (apart || !json_is_string(key) || !json_equal(key, other)) continue;
        json_t *one_a = NULL, *one_b = NULL;
        const char *k = json_string_value(key);
        apart = values_apart(schema_values(c, json_object_get(json_object_get(a, "properties"), k), &one_a, 0),
                             schema_values(c, json_object_get(json_object_get(b, "properties"), k), &one_b, 0));
        json_decref(one_a);
        json_decref(one_b);
    }
    return apart;
}

// No document is valid against both a and b: their types apart, or their values (const, enum), or, where both may
// be objects and nothing else in common, a property both require with values apart.
static bool branches_apart(const Converter *c, json_t *a, json_t *b) {
    const int common = schema_types(c, a, 0) & schema_types(c, b, 0);
    json_t *one_a = NULL, *one_b = NULL;
    bool apart = common == 0 ||
                 values_apart(schema_values(c, a, &one_a, 0), schema_values(c, b, &one_b, 0)) ||
                 (common == T_OBJECT && objects_apart(c, a, b));
    json_decref(one_a);
    json_decref(one_b);
    return apart;
}

// oneOf is written as alternatives, which is exact only where no document matches two branches: every pair of
// branches must be proven apart, else oneOf is refused by name (anyOf says what such a schema can be given).
static int one_of_apart(Converter *c, json_t *branches, const char *path) {
    for (size_t i = 0; i < json_array_size(branches); i++)
        for (size_t j = i + 1; j < json_array_size(branches); j++)
            if (!branches_apart(c, json_array_get(branches, i), json_array_get(branches, j))) {
                char what[200];
                snprintf(what, sizeof what, "oneOf with overlapping branches (%zu and %zu may both match: their types, "
                         "const or enum values, or a required property's values are not apart): use anyOf", i, j);
                return refuse(c, path, what);
            }
    return 0;
}

// A keyword of `schema` that constrains beside `own` (a NULL-ended list; $defs and annotations never count), or
// NULL: $ref, const, enum, anyOf and oneOf are read alone, so what else constrains is merged or refused by name.
static const char *beside(json_t *schema, const char *const *own) {
    const char *key;
    json_t *v;
    json_object_foreach(schema, key, v) {
        bool mine = !strcmp(key, "$defs") || !strcmp(key, "definitions") || is_annotation(key);
        for (const char *const *o = own; *o && !mine; o++) mine = !strcmp(key, *o);
        if (!mine) return key;
    }
    return NULL;
}

// own[0] read alone: 0, or refused by name (-1) where `beside` finds another keyword that constrains.
static int alone(Converter *c, json_t *schema, const char *const *own, const char *path) {
    const char *other = beside(schema, own);
    if (!other) return 0;
    char what[200];
    snprintf(what, sizeof what, "%s with the sibling keyword '%.80s' is not supported", own[0], other);
    return refuse(c, path, what);
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
    static const char *const ref[] = {"$ref", NULL}, *const constant[] = {"const", "type", NULL},
                             *const listed[] = {"enum", "type", NULL}, *const any_of[] = {"anyOf", NULL},
                             *const one_of[] = {"oneOf", NULL};
    if ((v = json_object_get(schema, "$ref")) && beside(schema, ref))
        e = all_of(c, schema, name, path, "$ref with sibling keywords (merged as allOf)");
    else if (v) e = ref_rule(c, v, path);
    else if ((v = json_object_get(schema, "const"))) {
        Text t = {0};
        e = alone(c, schema, constant, path) == 0 && literal_of(c, &t, v, path) == 0 ? text_take(&t) : NULL;
        free(t.s);
    } else if ((v = json_object_get(schema, "enum")))
        e = alone(c, schema, listed, path) == 0 ? enum_expression(c, v, one_type, path) : NULL;
    else if (json_object_get(schema, "allOf")) e = all_of(c, schema, name, path, "allOf");
    else if ((v = json_object_get(schema, "anyOf")))
        e = alone(c, schema, any_of, path) == 0 ? alternatives(c, schema, v, name, path, "anyOf") : NULL;
    else if ((v = json_object_get(schema, "oneOf"))) {
        e = alone(c, schema, one_of, path) == 0 ? alternatives(c, schema, v, name, path, "oneOf") : NULL;
        if (e && one_of_apart(c, v, path) < 0) {
            free(e);
            e = NULL;
        }
    }
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
