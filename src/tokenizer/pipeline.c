// pipeline.c — reading tokenizer.json's normalizer, pre_tokenizer, decoder and post_processor into a Pipeline
// (see pipeline.h; the steps are applied in tokenizer.c).
//
// Every message names the file and the field as a path into the JSON ("pre_tokenizer.pretokenizers[0].behavior")
// and, for a kind that is not supported, its value.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/pipeline.h"

typedef struct {
    Pipeline *p;
    const char *path;  // the file, for messages
    Err *err;
    bool fused;        // decoder: a Fuse has been seen (a Strip after it strips the whole text)
} Reader;

// The field's string value, or NULL if absent or not a string.
static const char *get_string(const json_t *obj, const char *key) {
    return json_string_value(json_object_get(obj, key));
}

// A boolean field: its value, or dflt when absent; -1 (with the message) when not a boolean.
static int get_bool(Reader *r, const json_t *obj, const char *key, bool dflt, const char *where) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return dflt;
    if (!json_is_boolean(v)) return err_fmt(r->err, "%s: %s.%s: expected true or false", r->path, where, key);
    return json_is_true(v);
}

static char *copy(const char *s, size_t len) {
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, s, len);
        c[len] = '\0';
    }
    return c;
}

// Appends a step (its strings copied); returns it, or NULL when out of memory.
static Step *add_step(Reader *r, Step step) {
    Pipeline *p = r->p;
    Step *bigger = realloc(p->steps, (size_t)(p->n_steps + 1) * sizeof *p->steps);
    if (!bigger) {
        err_fmt(r->err, "%s: out of memory", r->path);
        return NULL;
    }
    p->steps = bigger;
    Step *s = &p->steps[p->n_steps];
    *s = step;
    s->text = step.text ? copy(step.text, step.text_len) : NULL;
    s->with = step.with ? copy(step.with, step.with_len) : NULL;
    if ((step.text && !s->text) || (step.with && !s->with)) {
        free(s->text);
        free(s->with);
        err_fmt(r->err, "%s: out of memory", r->path);
        return NULL;
    }
    p->n_steps++;
    return s;
}

static int add_prepend(Reader *r, const char *text, bool unless_present, bool only_at_start) {
    Step s = {.kind = STEP_PREPEND, .text = (char *)text, .text_len = strlen(text), .unless_present = unless_present,
              .only_at_start = only_at_start};
    return add_step(r, s) ? 0 : -1;
}

static int add_replace(Reader *r, const char *from, size_t from_len, const char *to, size_t to_len) {
    Step s = {.kind = STEP_REPLACE, .text = (char *)from, .text_len = from_len, .with = (char *)to, .with_len = to_len};
    return add_step(r, s) ? 0 : -1;
}

// Writes regular expression pattern[0..len) for PCRE2 to out (room for 16 × len bytes): tokenizer.json patterns
// are written for Oniguruma, whose \s is Unicode's White_Space, while PCRE2's \s (with UCP) also matches U+180E;
// so \s and \S become \p{White_Space} and \P{White_Space}, which mean the same in or out of a class.
static size_t oniguruma_to_pcre2(const char *pattern, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (pattern[i] == '\\' && i + 1 < len && (pattern[i + 1] == 's' || pattern[i + 1] == 'S')) {
            o += (size_t)sprintf(out + o, "\\%c{White_Space}", pattern[i + 1] == 's' ? 'p' : 'P');
            i++;
        } else if (pattern[i] == '\\' && i + 1 < len) {  // any other escape, \\ included, as it is
            out[o++] = pattern[i++];
            out[o++] = pattern[i];
        } else {
            out[o++] = pattern[i];
        }
    }
    return o;
}

// Compiles pattern[0..len) for a SPLIT: a regular expression, or a literal string. UTF and UCP make \p{L}, \s and
// \w Unicode's; the JIT makes it fast where the platform has one (else PCRE2's interpreter runs it, as exactly).
static pcre2_code *compile(Reader *r, const char *pattern, size_t len, bool literal, const char *where) {
    int code;
    PCRE2_SIZE offset;
    char *translated = literal ? NULL : malloc(16 * len + 1);
    if (!literal && !translated) {
        err_fmt(r->err, "%s: out of memory", r->path);
        return NULL;
    }
    if (!literal) len = oniguruma_to_pcre2(pattern, len, translated);
    uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(literal ? pattern : translated), len, options, &code, &offset, NULL);
    free(translated);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        err_fmt(r->err, "%s: %s: %s (PCRE2, at offset %zu)", r->path, where, (const char *)msg, (size_t)offset);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    return re;
}

// A pattern object {"Regex": "..."} or {"String": "..."}: its text and whether it is literal.
static const char *read_pattern(Reader *r, const json_t *obj, const char *where, bool *literal, size_t *len) {
    const json_t *pattern = json_object_get(obj, "pattern");
    const json_t *regex = json_object_get(pattern, "Regex"), *string = json_object_get(pattern, "String");
    *literal = json_is_string(string);
    const json_t *v = *literal ? string : regex;
    if (!json_is_string(v) || json_string_length(v) == 0) {
        err_fmt(r->err, "%s: %s.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}, not empty", r->path,
                where);
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

static int read_split(Reader *r, const json_t *obj, const char *where) {
    static const char *const behaviors[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                            "Contiguous"};
    const char *behavior = get_string(obj, "behavior");
    int b = 0;
    while (b < 5 && !(behavior && strcmp(behavior, behaviors[b]) == 0)) b++;
    if (b == 5)
        return err_fmt(r->err, "%s: %s.behavior: \"%s\" not supported (Removed, Isolated, MergedWithPrevious, "
                       "MergedWithNext or Contiguous)", r->path, where, behavior ? behavior : "(missing)");
    int invert = get_bool(r, obj, "invert", false, where);
    bool literal;
    size_t len;
    const char *pattern = read_pattern(r, obj, where, &literal, &len);
    if (invert < 0 || !pattern) return -1;
    char field[300];
    snprintf(field, sizeof field, "%s.pattern", where);
    pcre2_code *re = compile(r, pattern, len, literal, field);
    if (!re) return -1;
    Step s = {.kind = STEP_SPLIT, .regex = re, .behavior = (SplitBehavior)b, .invert = invert};
    if (!add_step(r, s)) {
        pcre2_code_free(re);
        return -1;
    }
    r->p->has_regex = true;
    return 0;
}

// Digits (SmolLM's): a SPLIT by numeric characters, each its own piece (individual_digits) or runs of them.
static int read_digits(Reader *r, const json_t *obj, const char *where) {
    int individual = get_bool(r, obj, "individual_digits", false, where);
    if (individual < 0) return -1;
    pcre2_code *re = compile(r, "\\p{N}", 5, false, where);
    Step s = {.kind = STEP_SPLIT, .regex = re, .behavior = individual ? SPLIT_ISOLATED : SPLIT_CONTIGUOUS};
    if (!re) return -1;
    if (!add_step(r, s)) {
        pcre2_code_free(re);
        return -1;
    }
    r->p->has_regex = true;
    return 0;
}

// GPT-2's split: pretokenize_next, as pipeline.h says.
static int add_gpt2_split(Reader *r) {
    Step s = {.kind = STEP_SPLIT, .behavior = SPLIT_ISOLATED};
    return add_step(r, s) ? 0 : -1;
}

static int read_byte_level(Reader *r, const json_t *obj, const char *where) {
    int prefix = get_bool(r, obj, "add_prefix_space", false, where);
    int use_regex = get_bool(r, obj, "use_regex", true, where);
    if (prefix < 0 || use_regex < 0) return -1;
    r->p->byte_level = true;
    if (prefix && add_prepend(r, " ", true, false) < 0) return -1;
    return use_regex ? add_gpt2_split(r) : 0;
}

// Metaspace's prepend scheme: "always", "first" or "never"; older files say add_prefix_space true or false.
// Returns 0 never, 1 always, 2 first, -1 with the message.
static int prepend_scheme(Reader *r, const json_t *obj, const char *where) {
    const char *scheme = get_string(obj, "prepend_scheme");
    if (!scheme) {
        int add = get_bool(r, obj, "add_prefix_space", true, where);
        return add < 0 ? -1 : add;
    }
    if (strcmp(scheme, "never") == 0) return 0;
    if (strcmp(scheme, "always") == 0) return 1;
    if (strcmp(scheme, "first") == 0) return 2;
    return err_fmt(r->err, "%s: %s.prepend_scheme: \"%s\" not supported (always, first or never)", r->path, where,
                   scheme);
}

// Metaspace's replacement character (default U+2581 "▁").
static const char *replacement(Reader *r, const json_t *obj, const char *where) {
    const json_t *v = json_object_get(obj, "replacement");
    if (!v) return "\xE2\x96\x81";
    if (!json_is_string(v) || json_string_length(v) == 0) {
        err_fmt(r->err, "%s: %s.replacement: expected a character", r->path, where);
        return NULL;
    }
    return json_string_value(v);
}

static int read_metaspace(Reader *r, const json_t *obj, const char *where) {
    const char *rep = replacement(r, obj, where);
    int scheme = prepend_scheme(r, obj, where);
    int split = get_bool(r, obj, "split", true, where);
    if (!rep || scheme < 0 || split < 0) return -1;
    if (add_replace(r, " ", 1, rep, strlen(rep)) < 0) return -1;
    if (scheme && add_prepend(r, rep, true, scheme == 2) < 0) return -1;
    if (!split) return 0;
    char field[300];
    snprintf(field, sizeof field, "%s.replacement", where);
    pcre2_code *re = compile(r, rep, strlen(rep), true, field);
    Step s = {.kind = STEP_SPLIT, .regex = re, .behavior = SPLIT_MERGED_WITH_NEXT};
    if (!re) return -1;
    if (!add_step(r, s)) {
        pcre2_code_free(re);
        return -1;
    }
    r->p->has_regex = true;
    return 0;
}

// The components of a tokenizer.json (normalizer, pre_tokenizer, decoder, post_processor) share a shape: null for
// none, or an object with a "type", where a "Sequence" lists components of the same kind under `key`.
typedef int ReadComponent(Reader *r, const json_t *obj, const char *where);

// Checks obj's shape and sets *type: NULL when obj is null (no component). Returns -1 on a malformed obj.
static int component_type(Reader *r, const json_t *obj, const char *where, const char **type) {
    *type = NULL;
    if (!obj || json_is_null(obj)) return 0;
    if (!json_is_object(obj) || !(*type = get_string(obj, "type")))
        return err_fmt(r->err, "%s: %s: expected null or an object with a \"type\"", r->path, where);
    return 0;
}

// Reads each member of the Sequence obj[key] with read_one, at field "where.key[i]".
static int read_sequence(Reader *r, const json_t *obj, const char *key, const char *where, ReadComponent *read_one) {
    const json_t *list = json_object_get(obj, key);
    if (!json_is_array(list)) return err_fmt(r->err, "%s: %s.%s: expected an array", r->path, where, key);
    size_t i;
    const json_t *item;
    json_array_foreach(list, i, item) {
        char field[300];
        snprintf(field, sizeof field, "%s.%s[%zu]", where, key, i);
        if (read_one(r, item, field) < 0) return -1;
    }
    return 0;
}

static ReadComponent read_normalizer, read_pre_tokenizer;

// Reads obj (at field `where`) as a pre-tokenizer, or with normalizer as a normalizer.
static int read_part(Reader *r, const json_t *obj, const char *where, bool normalizer) {
    const char *type;
    if (component_type(r, obj, where, &type) < 0) return -1;
    if (!type) return 0;
    if (strcmp(type, "Sequence") == 0)
        return normalizer ? read_sequence(r, obj, "normalizers", where, read_normalizer)
                          : read_sequence(r, obj, "pretokenizers", where, read_pre_tokenizer);
    if (!normalizer && r->p->byte_level)  // (Hugging Face would hand it byte-level text: "Ġ" for " ")
        return err_fmt(r->err, "%s: %s: a pre-tokenizer after a ByteLevel is not supported", r->path, where);
    if (normalizer && strcmp(type, "NFC") == 0) return add_step(r, (Step){.kind = STEP_NFC}) ? 0 : -1;
    if (normalizer && strcmp(type, "Prepend") == 0) {
        const char *prefix = get_string(obj, "prepend");
        if (!prefix || !*prefix) return err_fmt(r->err, "%s: %s.prepend: expected a non-empty string", r->path, where);
        return add_prepend(r, prefix, false, false);
    }
    if (normalizer && strcmp(type, "Replace") == 0) {
        const json_t *content = json_object_get(obj, "content");
        bool literal;
        size_t len;
        const char *pattern = read_pattern(r, obj, where, &literal, &len);
        if (!pattern) return -1;
        if (!literal)
            return err_fmt(r->err, "%s: %s.pattern: a Regex is not supported here (only a String)", r->path, where);
        if (!json_is_string(content)) return err_fmt(r->err, "%s: %s.content: expected a string", r->path, where);
        return add_replace(r, pattern, len, json_string_value(content), json_string_length(content));
    }
    if (!normalizer && strcmp(type, "Split") == 0) return read_split(r, obj, where);
    if (!normalizer && strcmp(type, "Digits") == 0) return read_digits(r, obj, where);
    if (!normalizer && strcmp(type, "ByteLevel") == 0) return read_byte_level(r, obj, where);
    if (!normalizer && strcmp(type, "Metaspace") == 0) return read_metaspace(r, obj, where);
    return err_fmt(r->err, "%s: %s.type: \"%s\" not supported (%s, or a Sequence of them)", r->path, where, type,
                   normalizer ? "NFC, Prepend, Replace" : "Split, Digits, ByteLevel, Metaspace");
}

static int add_decode_replace(Reader *r, const char *from, const char *to) {
    Pipeline *p = r->p;
    char **f = realloc(p->decode_from, (size_t)(p->n_decode_replace + 1) * sizeof *f);
    if (f) p->decode_from = f;
    char **t = f ? realloc(p->decode_to, (size_t)(p->n_decode_replace + 1) * sizeof *t) : NULL;
    if (t) p->decode_to = t;
    char *a = t ? strdup(from) : NULL, *b = a ? strdup(to) : NULL;
    if (!b) {
        free(a);
        return err_fmt(r->err, "%s: out of memory", r->path);
    }
    p->decode_from[p->n_decode_replace] = a;
    p->decode_to[p->n_decode_replace++] = b;
    return 0;
}

static int read_normalizer(Reader *r, const json_t *obj, const char *where) { return read_part(r, obj, where, true); }
static int read_pre_tokenizer(Reader *r, const json_t *obj, const char *where) {
    return read_part(r, obj, where, false);
}

static int read_decoder(Reader *r, const json_t *obj, const char *where) {
    Pipeline *p = r->p;
    const char *type;
    if (component_type(r, obj, where, &type) < 0) return -1;
    if (!type) return 0;
    if (strcmp(type, "Sequence") == 0) return read_sequence(r, obj, "decoders", where, read_decoder);
    if (strcmp(type, "ByteLevel") == 0) {
        if (!p->byte_level)
            return err_fmt(r->err, "%s: %s.type: \"ByteLevel\" needs a ByteLevel pre_tokenizer", r->path, where);
        return 0;  // byte-level tokens decode to their bytes (tokenizer_load.c)
    }
    if (p->byte_level &&
        (strcmp(type, "Replace") == 0 || strcmp(type, "ByteFallback") == 0 || strcmp(type, "Fuse") == 0 ||
         strcmp(type, "Strip") == 0 || strcmp(type, "Metaspace") == 0))
        return err_fmt(r->err, "%s: %s.type: \"%s\" not supported with a ByteLevel pre_tokenizer", r->path, where,
                       type);
    if (strcmp(type, "Replace") == 0) {
        const json_t *content = json_object_get(obj, "content");
        bool literal;
        size_t len;
        const char *pattern = read_pattern(r, obj, where, &literal, &len);
        if (!pattern) return -1;
        if (!literal || !json_is_string(content) || strlen(pattern) != len ||
            strlen(json_string_value(content)) != json_string_length(content))
            return err_fmt(r->err, "%s: %s: only a String pattern and content without NUL are supported", r->path,
                           where);
        return add_decode_replace(r, pattern, json_string_value(content));
    }
    if (strcmp(type, "ByteFallback") == 0) {
        p->decode_byte_fallback = true;
        return 0;
    }
    if (strcmp(type, "Fuse") == 0) {
        r->fused = true;
        return 0;
    }
    if (strcmp(type, "Strip") == 0) {
        const char *content = get_string(obj, "content");
        const json_t *start = json_object_get(obj, "start"), *stop = json_object_get(obj, "stop");
        if (!content || strlen(content) != 1 || (unsigned char)content[0] >= 0x80)
            return err_fmt(r->err, "%s: %s.content: expected one ASCII character", r->path, where);
        if (!json_is_integer(start) || json_integer_value(start) < 0 || json_integer_value(start) > 1000)
            return err_fmt(r->err, "%s: %s.start: expected an integer in 0..1000", r->path, where);
        if (json_integer_value(stop) != 0)
            return err_fmt(r->err, "%s: %s.stop: not supported (only 0: text cannot be stripped at its end while "
                           "it streams)", r->path, where);
        if (!r->fused)
            return err_fmt(r->err, "%s: %s: a Strip is supported only after a Fuse (it strips the whole text)",
                           r->path, where);
        p->strip_char = content[0];
        p->strip_count = (int)json_integer_value(start);
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        const char *rep = replacement(r, obj, where);
        int scheme = prepend_scheme(r, obj, where);
        if (!rep || scheme < 0 || add_decode_replace(r, rep, " ") < 0) return -1;
        p->strip_char = ' ';
        p->strip_count = scheme ? 1 : 0;
        return 0;
    }
    return err_fmt(r->err, "%s: %s.type: \"%s\" not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, "
                   "Metaspace, or a Sequence of them)", r->path, where, type);
}

// Appends the ids of special token `name` (from the template's special_tokens) to *ids.
static int add_template_ids(Reader *r, const json_t *specials, const char *name, int **ids, int *n,
                            const char *where) {
    const json_t *list = json_object_get(json_object_get(specials, name), "ids");
    if (!json_is_array(list))
        return err_fmt(r->err, "%s: %s.special_tokens[\"%s\"].ids: expected an array of ids", r->path, where, name);
    size_t i;
    const json_t *id;
    json_array_foreach(list, i, id) {
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX)
            return err_fmt(r->err, "%s: %s.special_tokens[\"%s\"].ids[%zu]: expected a token id", r->path, where,
                           name, i);
        int *bigger = realloc(*ids, (size_t)(*n + 1) * sizeof *bigger);
        if (!bigger) return err_fmt(r->err, "%s: out of memory", r->path);
        *ids = bigger;
        (*ids)[(*n)++] = (int)json_integer_value(id);
    }
    return 0;
}

// TemplateProcessing's "single" template: special tokens, the text ("Sequence" A), special tokens.
static int read_template(Reader *r, const json_t *obj, const char *where) {
    Pipeline *p = r->p;
    const json_t *single = json_object_get(obj, "single"), *specials = json_object_get(obj, "special_tokens");
    if (!json_is_array(single)) return err_fmt(r->err, "%s: %s.single: expected an array", r->path, where);
    bool seen_text = false;
    size_t i;
    const json_t *item;
    json_array_foreach(single, i, item) {
        const char *special = get_string(json_object_get(item, "SpecialToken"), "id");
        const char *seq = get_string(json_object_get(item, "Sequence"), "id");
        if (special) {
            if (add_template_ids(r, specials, special, seen_text ? &p->suffix : &p->prefix,
                                 seen_text ? &p->n_suffix : &p->n_prefix, where) < 0)
                return -1;
        } else if (seq && strcmp(seq, "A") == 0 && !seen_text) {
            seen_text = true;
        } else {
            return err_fmt(r->err, "%s: %s.single[%zu]: expected a SpecialToken or the one Sequence A", r->path,
                           where, i);
        }
    }
    if (!seen_text) return err_fmt(r->err, "%s: %s.single: no Sequence A (the text)", r->path, where);
    return 0;
}

static int read_post_processor(Reader *r, const json_t *obj, const char *where) {
    const char *type;
    if (component_type(r, obj, where, &type) < 0) return -1;
    if (!type) return 0;
    if (strcmp(type, "ByteLevel") == 0) return 0;  // it only trims offsets, which specdec does not report
    if (strcmp(type, "TemplateProcessing") == 0) return read_template(r, obj, where);
    if (strcmp(type, "Sequence") == 0) return read_sequence(r, obj, "processors", where, read_post_processor);
    return err_fmt(r->err, "%s: %s.type: \"%s\" not supported (ByteLevel, TemplateProcessing, or a Sequence of "
                   "them)", r->path, where, type);
}

int pipeline_load(Pipeline *p, const char *path, const json_t *root, Err *err) {
    memset(p, 0, sizeof *p);
    Reader r = {.p = p, .path = path, .err = err};
    if (read_normalizer(&r, json_object_get(root, "normalizer"), "normalizer") < 0 ||
        read_pre_tokenizer(&r, json_object_get(root, "pre_tokenizer"), "pre_tokenizer") < 0 ||
        read_decoder(&r, json_object_get(root, "decoder"), "decoder") < 0 ||
        read_post_processor(&r, json_object_get(root, "post_processor"), "post_processor") < 0) {
        pipeline_free(p);
        return -1;
    }
    return 0;
}

int pipeline_gpt2(Pipeline *p, Err *err) {
    memset(p, 0, sizeof *p);
    Reader r = {.p = p, .path = "vocab.json", .err = err};
    p->byte_level = true;
    return add_gpt2_split(&r);
}

void pipeline_free(Pipeline *p) {
    for (int i = 0; i < p->n_steps; i++) {
        free(p->steps[i].text);
        free(p->steps[i].with);
        pcre2_code_free(p->steps[i].regex);
    }
    free(p->steps);
    for (int i = 0; i < p->n_decode_replace; i++) {
        free(p->decode_from[i]);
        free(p->decode_to[i]);
    }
    free(p->decode_from);
    free(p->decode_to);
    free(p->prefix);
    free(p->suffix);
    memset(p, 0, sizeof *p);
}
