#!/usr/bin/python3
"""corpus.py — the training corpus of specdec's default model pair: the Python standard library's source.

    /usr/bin/python3 tools/corpus.py [--src /usr/lib/python3.11] [--out tools/runs/corpus]

Every *.py file under SRC (not __pycache__), read as UTF-8 (files that are not valid UTF-8 are left out), the
test suite (SRC/test, Debian's libpython3.11-testsuite: required, so that every machine builds the same corpus)
included, with these left out as generated or noisy:
  * encodings/*.py that hold a charmap `decoding_table` (70 machine-generated codec tables of \\x escapes);
  * _sysconfigdata*.py (build-machine settings), pydoc_data/topics.py (one 750 KB generated string literal);
  * test files named bad*.py (deliberately broken syntax or encodings), and any file with a line of more than
    2000 characters (embedded data blobs).
Files with identical bytes are kept once (the first by path). The corpus is the Python Software Foundation's
code, under the PSF License Agreement (SRC/LICENSE.txt); weights trained on it are shipped with that note.

Split by file, deterministically: files sorted by SHA-256 of their relative path; the first ones, up to 2% of all
bytes, are the validation split, the rest the training split. Writes to OUT:
  train.jsonl, val.jsonl   one {"path", "text"} per file, in path order
  manifest.tsv             split, sha256 of the bytes, size, path — for every kept file
and to bench/prompts/python.jsonl 40 held-out prompts {"id", "prompt"}: a few hundred bytes of a validation file
(outside the test suite) ending with a `def`/`class` line's colon (or its docstring's opening quotes), to be continued by the model.
"""

import argparse
import hashlib
import json
import os
import re
import sys

VAL_FRACTION = 0.02
N_PROMPTS = 40


def excluded(rel: str, text: str) -> bool:
    name = os.path.basename(rel)
    if name.startswith("_sysconfigdata") or rel == "pydoc_data/topics.py":
        return True
    if rel.startswith("test/") and name.startswith("bad"):
        return True
    if max(map(len, text.split("\n"))) > 2000:
        return True
    return rel.startswith("encodings/") and "decoding_table = (" in text


def collect(src: str):
    """[(relative path, text, sha256)] of the kept files, sorted by path, identical files kept once."""
    paths = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("config-"))
        paths += [os.path.join(root, f) for f in files if f.endswith(".py")]
    seen, kept = set(), []
    for path in sorted(paths):
        rel = os.path.relpath(path, src)
        with open(path, "rb") as f:
            raw = f.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        digest = hashlib.sha256(raw).hexdigest()
        if digest in seen or excluded(rel, text) or not text.strip():
            continue
        seen.add(digest)
        kept.append((rel, text, digest))
    return kept


def split(files):
    """(train, val) lists of files: the validation split takes files in SHA-256-of-path order up to 2% of bytes."""
    total = sum(len(t.encode()) for _, t, _ in files)
    order = sorted(files, key=lambda f: hashlib.sha256(f[0].encode()).hexdigest())
    val, val_bytes = set(), 0
    for rel, text, _ in order:
        n = len(text.encode())
        if val_bytes + n > VAL_FRACTION * total:
            if val_bytes >= 0.5 * VAL_FRACTION * total:
                break
            continue                                      # too big: try smaller files
        val.add(rel)
        val_bytes += n
    return [f for f in files if f[0] not in val], [f for f in files if f[0] in val]


DEF_LINE = re.compile(r"^[ \t]*(?:async[ \t]+)?(?:def|class)[ \t]+\w+.*:[ \t]*$", re.M)


def prompts(val_files, n=N_PROMPTS, context=320):
    """Up to n prompts: the `context` bytes (whole lines) before a def/class line whose signature fits one line,
    the line itself up to its colon, and the newline, indentation and opening quotes of its docstring if the next
    line starts one."""
    candidates = []
    for rel, text, _ in val_files:
        for m in DEF_LINE.finditer(text):
            # End at the colon, or after the docstring's opening quotes: never on whitespace, which the GPT-2
            # pattern would make a token of its own that training text rarely has there ("\n" before an
            # indented line, a trailing " ").
            end = m.start() + len(m.group().rstrip())
            first = text[m.end() + 1:m.end() + 200].split("\n", 1)[0]
            if first.strip().startswith(('"""', "'''")):
                end = m.end() + 1 + len(first) - len(first.lstrip()) + 3
            begin = text.rfind("\n", 0, max(0, m.start() - context)) + 1 if m.start() > context else 0
            prompt = text[begin:end]
            if 64 <= len(prompt.encode()) <= 600 and end < len(text) - 64:
                candidates.append((rel, m.start(), prompt))
    # Spread the choice evenly over all candidates (in file and position order).
    if len(candidates) <= n:
        chosen = candidates
    else:
        chosen = [candidates[(2 * i + 1) * len(candidates) // (2 * n)] for i in range(n)]
    return [{"id": f"py{i:02d}-{rel.replace('/', '.')}:{pos}", "prompt": p}
            for i, (rel, pos, p) in enumerate(chosen)]


def write_atomic(path: str, data: str):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="/usr/lib/python3.11")
    ap.add_argument("--out", default="tools/runs/corpus")
    ap.add_argument("--prompts", default="bench/prompts/python.jsonl")
    args = ap.parse_args()
    if not os.path.isdir(os.path.join(args.src, "test", "support")):
        sys.exit(f"{args.src}/test: the test suite is missing: apt-get install libpython3.11-testsuite")
    files = collect(args.src)
    train, val = split(files)
    os.makedirs(args.out, exist_ok=True)
    for name, part in (("train", train), ("val", val)):
        write_atomic(os.path.join(args.out, name + ".jsonl"),
                     "".join(json.dumps({"path": rel, "text": text}) + "\n" for rel, text, _ in part))
    val_set = {rel for rel, _, _ in val}
    write_atomic(os.path.join(args.out, "manifest.tsv"),
                 "".join(f"{'val' if rel in val_set else 'train'}\t{digest}\t{len(text.encode())}\t{rel}\n"
                         for rel, text, digest in files))
    ps = prompts([f for f in val if not f[0].startswith("test/")])
    os.makedirs(os.path.dirname(args.prompts), exist_ok=True)
    write_atomic(args.prompts, "".join(json.dumps(p) + "\n" for p in ps))
    nb = lambda part: sum(len(t.encode()) for _, t, _ in part)
    print(f"corpus: {len(files)} files, {nb(files)} bytes; train {len(train)} files {nb(train)} bytes, "
          f"val {len(val)} files {nb(val)} bytes; {len(ps)} prompts -> {args.prompts}", file=sys.stderr)


if __name__ == "__main__":
    main()
