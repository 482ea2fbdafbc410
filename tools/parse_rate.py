#!/usr/bin/python3
"""parse_rate.py — how often sampled continuations are valid Python: the fraction of N continuations of the held-out
prompts (bench/prompts/python.jsonl), sampled by `specdec generate` at a temperature, that ast.parse accepts up to
their last complete statement.

    /usr/bin/python3 tools/parse_rate.py [--samples 100] [--temp 0.7] [--tokens 128] [-m DIR -d DIR]

Sample k continues usable prompt k mod P with seed k. The held-out prompts are windows cut from files, so most begin
indented inside a class or function: each text (prompt + continuation) gets a header of nested `if 1:` lines that
opens every indentation level its first line sits at. A prompt whose own text does not parse that way (one that
starts inside brackets or a string) is not used; how many were used is printed. The text is then cut after its
last complete logical line (tokenize's NEWLINE), dropping trailing block headers and decorators that have no body
yet, and given to ast.parse (which, unlike compile, accepts `return` outside a function). A continuation passes if
that parses. Tests: tools/test_parse_rate.py.
"""

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import tokenize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPECDEC = os.path.join(ROOT, "build/release/specdec")
PROMPTS = os.path.join(ROOT, "bench/prompts/python.jsonl")


def header_for(text):
    """Nested `if 1:` lines opening the indentation levels (multiples of 4 spaces) below the first line's."""
    first = next((line for line in text.split("\n") if line.strip()), "")
    indent = len(first) - len(first.lstrip(" "))
    return "".join(" " * level + "if 1:\n" for level in range(0, indent, 4)) if indent else ""


def complete_statements(source):
    """source cut after its last complete logical line, less trailing block headers (`...:`) and decorators; None
    if its indentation is invalid before that."""
    ends = []  # (end offset of each logical line, whether it opens a block or is a decorator)
    line_starts = [0]
    for line in io.StringIO(source):
        line_starts.append(line_starts[-1] + len(line))
    first_token = None
    last_significant = None
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NEWLINE and not tok.string:
                break  # tokenize's own NEWLINE at the end of a text whose last line is unfinished
            if tok.type == tokenize.NEWLINE:
                offset = line_starts[tok.end[0] - 1] + tok.end[1]
                opens = last_significant is not None and last_significant.string == ":"
                decorator = first_token is not None and first_token.string == "@"
                ends.append((offset, opens or decorator))
                first_token = last_significant = None
            elif tok.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT,
                                  tokenize.ENDMARKER):
                if first_token is None:
                    first_token = tok
                last_significant = tok
    except tokenize.TokenError:
        pass  # the text ends inside brackets or a string: it is cut before that statement
    except IndentationError:
        return None  # a dedent to no enclosing level: invalid, however it is cut
    while ends and ends[-1][1]:
        ends.pop()
    return source[: ends[-1][0]] if ends else ""


def parses(text):
    """Whether text, under its header, parses up to its last complete statement."""
    cut = complete_statements(header_for(text) + text)
    if cut is None:
        return False
    try:
        ast.parse(cut)
        return True
    except (SyntaxError, ValueError):
        return False


def continuation(specdec, target, draft, prompt, temp, tokens, seed):
    cmd = [specdec, "generate", "-p", prompt, "-n", str(tokens), "--temp", str(temp), "--seed", str(seed)]
    if target:
        cmd += ["-m", target]
    if draft:
        cmd += ["-d", draft]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return out[:-1] if out.endswith("\n") else out  # the CLI ends its output with a line break


def parse_rate(prompts_path=PROMPTS, samples=100, temp=0.7, tokens=128, target=None, draft=None, specdec=SPECDEC,
               show_failures=False):
    """{"passed", "samples", "temp", "tokens", "prompts_used", "prompts"}: how many continuations parse."""
    with open(prompts_path) as f:
        prompts = [json.loads(line)["prompt"] for line in f if line.strip()]
    usable = [p for p in prompts if parses(p)]
    if not usable:
        sys.exit(f"parse_rate: none of the {len(prompts)} prompts in {prompts_path} parses on its own")
    passed = 0
    for k in range(samples):
        prompt = usable[k % len(usable)]
        text = continuation(specdec, target, draft, prompt, temp, tokens, k)
        ok = parses(prompt + text)
        passed += ok
        if not ok and show_failures:
            print(f"--- sample {k} does not parse:\n{prompt}\u2502{text}\n")
    return {"passed": passed, "samples": samples, "temp": temp, "tokens": tokens, "prompts_used": len(usable),
            "prompts": len(prompts)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--temp", type=float, default=0.7)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("-m", "--model", default=None, help="target folder (default: the shipped pair)")
    ap.add_argument("-d", "--draft", default=None)
    ap.add_argument("--specdec", default=SPECDEC)
    ap.add_argument("--prompts", default=PROMPTS)
    ap.add_argument("--show-failures", action="store_true", help="print each continuation that does not parse")
    args = ap.parse_args()
    r = parse_rate(args.prompts, args.samples, args.temp, args.tokens, args.model, args.draft, args.specdec,
                   args.show_failures)
    print(f"{r['passed']} of {r['samples']} continuations ({100 * r['passed'] / r['samples']:.0f}%) parse up to "
          f"their last complete statement (temperature {r['temp']}, {r['tokens']} tokens, {r['prompts_used']} of "
          f"{r['prompts']} held-out prompts usable)")


if __name__ == "__main__":
    main()
