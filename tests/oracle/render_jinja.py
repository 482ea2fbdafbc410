#!/usr/bin/python3
# render_jinja.py — the reference renderer of the chat-template tests (tests/chat/test_template.c): Debian's
# python3-jinja2, set up as transformers' apply_chat_template sets it up (an ImmutableSandboxedEnvironment with
# trim_blocks, lstrip_blocks and the loopcontrols extension; raise_exception, strftime_now and transformers' tojson).
#
# usage: render_jinja.py CASES.json OUT.json
#   CASES.json: [{"template": "...", "vars": {...}, "now": seconds since the epoch, "tool_arguments": "parse"}, ...]
#   ("tool_arguments": "parse": each tool call's arguments given as a JSON string are parsed into their object
#   first, as vLLM does before it renders OpenAI messages)
#   OUT.json:   [{"text": "..."} or {"error": "..."}, ...] in the same order
import datetime
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


NOW = [0]  # the case's "now": strftime_now's time, fixed so that both sides agree


def strftime_now(format):
    return datetime.datetime.fromtimestamp(NOW[0]).strftime(format)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now
COMPILED = {}  # source → template: the published templates recur over many conversations


def parse_tool_arguments(messages):
    for message in messages:
        for call in message.get("tool_calls") or []:
            if isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])


def render(case):
    NOW[0] = case.get("now", 0)
    if case.get("tool_arguments") == "parse":
        parse_tool_arguments(case["vars"]["messages"])
    source = case["template"]
    if source not in COMPILED:
        COMPILED[source] = ENV.from_string(source)
    return COMPILED[source].render(**case["vars"])


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    out = []
    for case in cases:
        try:
            out.append({"text": render(case)})
        except Exception as e:  # the test compares that both fail, not the messages
            out.append({"error": f"{type(e).__name__}: {e}"})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False)


main()
