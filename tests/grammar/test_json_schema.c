// test_json_schema.c — JSON Schema to grammar (src/grammar/json_schema.c, regex.c): a conformance table of schemas
// with documents the grammar must accept and refuse, the refusals by name, and documents drawn at random from the
// grammars, each validated by Debian's python3-jsonschema (Draft 2020-12, its format checker).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/json_schema.h"
#include "harness.h"

static Grammar *schema_grammar(const char *schema) {
    Err err = {""};
    Grammar *g = json_schema_grammar(schema, strlen(schema), "schema.json", &err);
    CHECK(g, "schema refused: %s\n%s", err.msg, schema);
    return g;
}

static const struct {
    const char *schema;
    const char *valid[10], *invalid[10];
} conformance[] = {
    {"{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}, \"age\": {\"type\": \"integer\"}},"
     " \"required\": [\"name\"], \"additionalProperties\": false}",
     {"{\"name\": \"Ann\"}", "{\"name\":\"Bo\",\"age\":-3}", "{ \"name\": \"x\" ,\n  \"age\": 0 }"},
     {"{}", "{\"age\": 3}", "{\"name\": 1}", "{\"name\": \"a\", \"x\": 1}", "{\"name\": \"a\"", "{\"age\":1,\"name\":\"a\"}"}},
    {"{\"properties\": {\"a\": {\"type\": \"boolean\"}, \"b\": {\"type\": \"null\"}}}",
     {"{}", "{\"a\": true}", "{\"b\": null}", "{\"a\": false, \"b\": null}"}, {"{\"b\": null, \"a\": true}", "{,}"}},
    {"{\"type\": \"object\"}", {"{}", "{\"k\": [1, {\"x\": null}], \"z\": \"\\u00e9\"}"}, {"[]", "{\"k\"}"}},
    {"{\"type\": \"array\", \"items\": {\"type\": \"number\"}, \"minItems\": 1, \"maxItems\": 3}",
     {"[1]", "[1.5, -2e10, 0]"}, {"[]", "[1,2,3,4]", "[01]", "[\"1\"]"}},
    {"{\"type\": \"string\", \"minLength\": 2, \"maxLength\": 3}", {"\"ab\"", "\"a\\nb\"", "\"\\u0041bc\""},
     {"\"a\"", "\"abcd\"", "ab"}},
    {"{\"type\": \"string\", \"pattern\": \"^[A-Z][a-z]+ (\\\\d{2}|x)\\\\.?$\"}", {"\"Ab 12\"", "\"Xyz x.\""},
     {"\"ab 12\"", "\"Ab 1\"", "\"Ab 12..\""}},
    {"{\"type\": \"string\", \"format\": \"date\"}", {"\"2024-02-29\"", "\"2000-02-29\"", "\"0004-12-31\"", "\"2023-04-30\""},
     {"\"2024-13-01\"", "\"24-01-01\"", "\"2023-02-29\"", "\"1900-02-29\"", "\"2023-04-31\"", "\"0000-01-01\""}},
    {"{\"type\": \"string\", \"format\": \"uuid\"}", {"\"123e4567-e89b-12d3-a456-426614174000\""}, {"\"123e4567\""}},
    {"{\"type\": \"string\", \"format\": \"time\"}", {"\"23:59:59Z\"", "\"01:02:03.5+05:30\""}, {"\"24:00:00Z\""}},
    {"{\"type\": \"integer\", \"minimum\": -12, \"exclusiveMaximum\": 250}",
     {"-12", "-1", "0", "7", "99", "249"}, {"-13", "250", "1000", "-0x", "1.0", "007"}},
    {"{\"type\": \"integer\", \"exclusiveMinimum\": 99}", {"100", "123456789"}, {"99", "-100", "0"}},
    {"{\"type\": \"integer\", \"maximum\": -5}", {"-5", "-1000"}, {"-4", "0", "5"}},
    {"{\"enum\": [\"red\", 1, null, {\"a\": [true]}]}", {"\"red\"", "1", "null", "{\"a\":[true]}"}, {"\"blue\"", "2"}},
    {"{\"type\": \"string\", \"enum\": [\"a\", 1]}", {"\"a\""}, {"1"}},
    {"{\"const\": \"fixed\"}", {"\"fixed\""}, {"\"other\""}},
    {"{\"anyOf\": [{\"type\": \"integer\"}, {\"type\": \"string\", \"maxLength\": 1}]}", {"5", "\"x\""}, {"\"xy\"", "true"}},
    {"{\"type\": [\"boolean\", \"null\"]}", {"true", "null"}, {"0"}},
    {"{\"type\": \"number\", \"minimum\": -3, \"exclusiveMaximum\": 12}",
     {"-3", "-3.0", "-2.999", "-0.5", "0", "0.25", "11", "11.999", "7.000"}, {"-3.01", "-4", "12", "12.0", "12.5", "1e2"}},
    {"{\"type\": \"number\", \"exclusiveMinimum\": 0, \"maximum\": 1}", {"0.001", "0.5", "1", "1.0"}, {"0", "0.0", "1.01", "-0.5"}},
    {"{\"type\": \"number\", \"maximum\": -2}", {"-2", "-2.0", "-2.5", "-1000.125"}, {"-1.5", "0", "3"}},
    {"{\"type\": \"object\", \"properties\": {\"id\": {\"type\": \"integer\"}, \"name\": {\"type\": \"string\"}},"
     " \"required\": [\"id\"], \"additionalProperties\": true}",
     {"{\"id\": 1}", "{\"id\": 1, \"nam\": 2}", "{\"id\": 1, \"names\": [], \"x\": {}}", "{\"id\": 1, \"name\": \"a\", \"i\": 0}"},
     {"{\"id\": 1, \"name\": 2}", "{\"id\": 1, \"id\": 2}", "{\"x\": 1}", "{\"id\": 1, \"n\\u0061me\": 3}"}},
    {"{\"properties\": {\"a\": {\"type\": \"null\"}}, \"additionalProperties\": {\"type\": \"boolean\"}}",
     {"{}", "{\"a\": null}", "{\"b\": true}", "{\"a\": null, \"\": false, \"aa\": true}"}, {"{\"a\": true}", "{\"b\": 1}"}},
    {"{\"$defs\": {\"named\": {\"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": [\"name\"]}},"
     " \"allOf\": [{\"$ref\": \"#/$defs/named\"}, {\"type\": \"object\", \"properties\": {\"age\": {\"type\": \"integer\","
     " \"minimum\": 0}}}], \"title\": \"person\"}",
     {"{\"name\": \"a\"}", "{\"name\": \"a\", \"age\": 3}"}, {"{\"age\": 3}", "{\"name\": \"a\", \"age\": -1}", "{\"name\": \"a\", \"b\": 1}"}},
    {"{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"integer\"}}, \"additionalProperties\": true},"
     " {\"required\": [\"a\"]}]}", {"{\"a\": 1}", "{\"a\": 1, \"b\": \"x\"}"}, {"{\"b\": 1}", "{\"a\": \"x\"}", "{}"}},
    {"{\"$defs\": {\"node\": {\"type\": \"object\", \"properties\": {\"next\": {\"$ref\": \"#/$defs/node\"}},"
     " \"additionalProperties\": false}}, \"$ref\": \"#/$defs/node\"}",
     {"{}", "{\"next\": {\"next\": {}}}"}, {"{\"next\": 1}"}},
    // $ref with sibling keywords: merged with the definition as allOf
    {"{\"$defs\": {\"named\": {\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\"}}, \"required\": "
     "[\"name\"]}}, \"$ref\": \"#/$defs/named\", \"properties\": {\"age\": {\"type\": \"integer\", \"minimum\": 0}}, "
     "\"required\": [\"age\"], \"description\": \"a named age\"}",
     {"{\"name\": \"a\", \"age\": 3}", "{\"name\": \"\", \"age\": 0}"},
     {"{\"name\": \"a\"}", "{\"age\": 3}", "{\"name\": \"a\", \"age\": -1}", "{\"name\": 1, \"age\": 1}"}},
    // oneOf whose branches are apart: by type, by const and enum values, by a required property's values
    {"{\"oneOf\": [{\"type\": \"string\", \"maxLength\": 3}, {\"type\": \"integer\"}, {\"type\": [\"null\", \"boolean\"]}]}",
     {"\"abc\"", "-7", "null", "false"}, {"1.5", "\"abcd\"", "[]"}},
    {"{\"oneOf\": [{\"const\": 1}, {\"enum\": [2, \"1\", [1]]}, {\"type\": \"string\", \"enum\": [\"x\"]}]}",
     {"1", "2", "\"1\"", "[1]", "\"x\""}, {"3", "\"y\""}},
    {"{\"$defs\": {\"cat\": {\"type\": \"object\", \"properties\": {\"kind\": {\"const\": \"cat\"}, \"lives\": "
     "{\"type\": \"integer\", \"minimum\": 0, \"maximum\": 9}}, \"required\": [\"kind\", \"lives\"]}}, \"oneOf\": "
     "[{\"$ref\": \"#/$defs/cat\"}, {\"type\": \"object\", \"properties\": {\"kind\": {\"enum\": [\"dog\", \"wolf\"]}, "
     "\"good\": {\"type\": \"boolean\"}}, \"required\": [\"kind\"]}]}",
     {"{\"kind\": \"cat\", \"lives\": 9}", "{\"kind\": \"wolf\"}", "{\"kind\": \"dog\", \"good\": true}"},
     {"{\"kind\": \"cat\"}", "{\"kind\": \"cow\"}", "{\"kind\": \"dog\", \"lives\": 1}"}},
};

TEST(json_schema_conformance_table) {
    for (size_t t = 0; t < sizeof conformance / sizeof *conformance; t++) {
        Grammar *g = schema_grammar(conformance[t].schema);
        if (!g) continue;
        for (int i = 0; conformance[t].valid[i]; i++) {
            const char *doc = conformance[t].valid[i];
            CHECK(grammar_recognises(g, doc, strlen(doc)), "schema %zu refused valid %s", t, doc);
        }
        for (int i = 0; conformance[t].invalid[i]; i++) {
            const char *doc = conformance[t].invalid[i];
            CHECK(!grammar_recognises(g, doc, strlen(doc)), "schema %zu accepted invalid %s", t, doc);
        }
        grammar_free(g);
    }
}

static const struct {
    const char *schema, *message;
} refusals[] = {
    {"{\"allOf\": [{\"type\": \"string\"}]}", "at /allOf/0: allOf merges object schemas only: a part whose type is not"},
    {"{\"minLength\": 1, \"allOf\": [{}]}", "at /: allOf merges object schemas only: 'minLength' cannot be merged"},
    {"{\"allOf\": []}", "allOf must be a non-empty array"},
    {"{\"allOf\": [{\"properties\": {\"a\": {\"type\": \"string\"}}}, {\"properties\": {\"a\": {}}}]}",
     "the property 'a' is described differently by two parts of allOf"},
    {"{\"allOf\": [{\"properties\": {\"a\": {}}, \"additionalProperties\": false}, {\"properties\": {\"b\": {}}}]}",
     "the property 'b' is not listed by a part of allOf with additionalProperties false"},
    {"{\"type\": \"number\", \"minimum\": 0.5}", "a bound on type number with a fraction is not supported"},
    {"{\"type\": \"number\", \"minimum\": 2, \"exclusiveMaximum\": 2}", "no number lies between the bounds"},
    {"{\"properties\": {\"a\": {\"not\": {}}}}", "at /properties/a: the keyword 'not' is not supported"},
    {"{\"type\": \"string\", \"format\": \"email\"}", "format 'email' is not supported"},
    {"{\"type\": \"string\", \"pattern\": \"abc\"}", "not anchored"},
    {"{\"type\": \"string\", \"pattern\": \"^(?=a)$\"}", "lookaround"},
    {"{\"type\": \"string\", \"pattern\": \"^a+?$\"}", "a lazy or possessive quantifier"},
    {"{\"type\": \"string\", \"pattern\": \"^x(-[0-9]?|)+$\"}", "a group that can match nothing, repeated without bound"},
    {"{\"type\": \"string\", \"pattern\": \"^((a)?){2,}$\"}", "a group that can match nothing, repeated without bound"},
    {"{\"type\": \"string\", \"pattern\": \"^\\\\1$\"}", "an escape other than"},
    {"{\"type\": \"string\", \"pattern\": \"^a{2,,3}$\"}", "a malformed {m,n}"},
    {"{\"type\": \"string\", \"pattern\": \"^a{3,2}$\"}", "a {m,n} out of range"},
    {"{\"$ref\": \"https://example.com/s.json\"}", "is not a definition of this schema"},
    {"{\"type\": \"integer\", \"minimum\": 5, \"maximum\": 4}", "no integer lies between the bounds"},
    {"{\"type\": \"thing\"}", "type 'thing' is not a JSON Schema type"},
    {"{\"required\": [\"a\"], \"properties\": {}}", "a required key that properties does not describe"},
    {"{\"properties\": {\"a\": {}}, \"additionalProperties\": 3}", "additionalProperties must be a boolean or a schema"},
    {"false", "the schema false accepts nothing"},
    {"{\"type\": \"object\",", "schema.json:1:18: not JSON"},
    {"{\"$defs\": {\"s\": {\"type\": \"string\"}}, \"$ref\": \"#/$defs/s\", \"maxLength\": 3}",
     "at /$defs/s: $ref with sibling keywords (merged as allOf) merges object schemas only: a part whose type is"},
    {"{\"$defs\": {\"o\": {\"properties\": {\"a\": {\"type\": \"string\"}}}}, \"$ref\": \"#/$defs/o\", "
     "\"properties\": {\"a\": {\"type\": \"integer\"}}}", "the property 'a' is described differently"},
    {"{\"oneOf\": [{\"type\": \"integer\"}, {\"type\": \"number\"}]}",
     "at /: oneOf with overlapping branches (0 and 1 may both match"},
    {"{\"oneOf\": [{\"type\": \"string\"}, {\"properties\": {\"a\": {}}}]}", "oneOf with overlapping branches (0 and 1"},
    {"{\"oneOf\": [{\"const\": 1}, {\"type\": \"null\"}, {\"enum\": [2, 1.0]}]}", "oneOf with overlapping branches (0 and 2"},
    {"{\"oneOf\": [{\"type\": \"object\", \"properties\": {\"k\": {\"const\": 1}}, \"required\": [\"k\"]}, "
     "{\"type\": \"object\", \"properties\": {\"k\": {\"const\": 2}}}]}", "oneOf with overlapping branches (0 and 1"},
    {"{\"type\": \"object\", \"required\": [\"a\"], \"anyOf\": [{\"type\": \"object\"}]}",
     "anyOf with the sibling keyword 'type' is not supported"},
    {"{\"oneOf\": [{\"type\": \"string\"}, {\"type\": \"null\"}], \"properties\": {}}",
     "at /: oneOf with the sibling keyword 'properties' is not supported"},
    {"{\"type\": \"integer\", \"const\": 3, \"minimum\": 5}", "const with the sibling keyword 'minimum' is not supported"},
    {"{\"enum\": [\"a\", \"bb\"], \"maxLength\": 1}", "enum with the sibling keyword 'maxLength' is not supported"},
};

TEST(json_schema_refusals_name_the_keyword) {
    for (size_t t = 0; t < sizeof refusals / sizeof *refusals; t++) {
        Err err = {""};
        Grammar *g = json_schema_grammar(refusals[t].schema, strlen(refusals[t].schema), "schema.json", &err);
        CHECK(!g, "accepted: %s", refusals[t].schema);
        CHECK(strstr(err.msg, refusals[t].message), "refusal %zu: got \"%s\", want \"%s\"", t, err.msg,
              refusals[t].message);
        CHECK(!strncmp(err.msg, "schema.json:", 12), "refusal %zu does not name the schema's source: \"%s\"", t,
              err.msg);
        grammar_free(g);
    }
}

// A random sentence of g: from the start, a byte drawn uniformly among those the state accepts, ending (when it may)
// with probability 1/4 per step, or at once when it must. NULL if it ran past `max` bytes.
static char *random_sentence(const Grammar *g, int max) {
    GrammarState s = {0}, probe = {0}, next = {0};
    Err err;
    char *doc = calloc((size_t)max + 1, 1);
    int n = 0;
    bool done = grammar_state_init(&s, g, &err) < 0;
    while (!done && n < max) {
        if (grammar_must_end(&s) || (grammar_may_end(&s) && test_rand_int(0, 3) == 0)) break;
        int allowed[256], n_allowed = 0;
        for (int b = 1; b < 256; b++) {
            grammar_state_copy(&probe, &s);
            if (grammar_accept_byte(&probe, (unsigned char)b, &next)) allowed[n_allowed++] = b;
        }
        done = n_allowed == 0;
        if (!done) {
            doc[n] = (char)allowed[test_rand_int(0, n_allowed - 1)];
            grammar_accept_byte(&s, (unsigned char)doc[n++], &next);
        }
    }
    bool ended = grammar_may_end(&s);
    grammar_state_free(&s);
    grammar_state_free(&probe);
    grammar_state_free(&next);
    if (!ended) {
        free(doc);
        return NULL;
    }
    return doc;
}

// Documents drawn from each table schema's grammar, validated by python3-jsonschema against the schema.
TEST(json_schema_random_documents_validate) {
    FILE *f = fopen("build/json_schema_documents.bin", "w");
    CHECK(f, "cannot write build/json_schema_documents.bin");
    if (!f) return;
    int written = 0;
    for (size_t t = 0; t < sizeof conformance / sizeof *conformance; t++) {
        Grammar *g = schema_grammar(conformance[t].schema);
        for (int k = 0; g && k < 12; k++) {
            char *doc = random_sentence(g, 200);
            if (doc) fprintf(f, "%s%c%s%c", conformance[t].schema, 0, doc, 0);
            written += doc != NULL;
            free(doc);
        }
        grammar_free(g);
    }
    fclose(f);
    CHECK(written > 100, "only %d documents ended within 200 bytes", written);
    char *out = NULL, *errs = NULL;
    int status = run_command("/usr/bin/python3 tests/grammar/validate_documents.py build/json_schema_documents.bin", &out,
                             &errs);
    CHECK(status == 0, "python3-jsonschema refused a document:\n%s%s", out, errs);
    free(out);
    free(errs);
}
