#!/usr/bin/python3
"""Validates documents drawn from grammars against their JSON Schemas (tests/grammar/test_json_schema.c).

Usage: validate_documents.py FILE, where FILE holds pairs of NUL-terminated strings: a schema, then a document. Exits 1 naming
every document that is not JSON or that the schema does not validate (python3-jsonschema, Draft 2020-12, with
its format checker); prints how many it checked.
"""
import json
import sys

import jsonschema


def main(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\0")
    bad = 0
    pairs = [(lines[i], lines[i + 1]) for i in range(0, len(lines) - 1, 2)]
    for schema_text, doc in pairs:
        schema = json.loads(schema_text)
        validator = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
        try:
            value = json.loads(doc)
        except json.JSONDecodeError as e:
            print("not JSON (%s): %r for %s" % (e, doc, schema_text))
            bad += 1
            continue
        errors = [e.message for e in validator.iter_errors(value)]
        if errors:
            print("invalid (%s): %r for %s" % ("; ".join(errors), doc, schema_text))
            bad += 1
    print("%d documents checked, %d refused" % (len(pairs), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
