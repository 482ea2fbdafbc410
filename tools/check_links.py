#!/usr/bin/python3
"""check_links.py — every relative link in the project's Markdown resolves: the file or folder it names exists,
and an anchor (`#section`) names a heading of the Markdown file it points into.

    /usr/bin/python3 tools/check_links.py [FILE.md ...]

Without arguments it checks README.md and every .md file under docs/, weights/, fuzz/ and tests/fixtures/. Links
with a scheme (https:, mailto:) are not fetched. Links inside code (fenced blocks, `code spans`) are not links.
Anchors follow GitHub's rule: the heading's text, lower-cased, without punctuation, spaces as hyphens, and a
repeated heading's anchor suffixed -1, -2, …. Prints one line per broken link, `FILE:LINE: TARGET: what is wrong`,
and exits 1 if there was one (2 when a file to check cannot be read). Tests: tools/test_check_links.py.

What README.md and docs/ name in code spans is checked too, so that the tour follows the code when files and
functions move: a path under one of the project's folders (`src/model/`, `kernels/scalar.c`) must exist, a source
file's bare name (`tree.c`) must be some file's name, and in README.md a name with an underscore, a dot or two
capitals (`speculative_generate`, `SpecStats.sum_min_pq`, `TreeTried`) must occur as a word in the sources. Not
checked: a path with a segment in capitals (`bench/results/SHAPE/`, a placeholder), one under build/, and one of a
kind no file of the project has (`kernels/q4.o`, another project's `src/llama-quant.cpp`).
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ["docs", "weights", "fuzz", "tests/fixtures"]
SOURCE_FOLDERS = ["src", "kernels", "tests", "bench", "tools", "fuzz"]  # where code spans' names must be found
SOURCE_SUFFIXES = (".c", ".h", ".py", ".sh", ".mjs")
SKIPPED = {"node_modules", "fixtures", "corpus"}  # data, not sources (whose words names are looked for in)
BUILT = {"build", "node_modules"}  # made by make and tools/setup.sh: not in a fresh clone

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.MULTILINE)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
CODE_PATH = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
SOURCE_FILE = re.compile(r"^[\w.-]+\.(c|h|py|sh|mjs)$")
CODE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def escaped(text):
    """The text with control characters written as escapes, for a one-line message."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def prose(markdown):
    """The text outside code: fenced blocks and code spans blanked, line breaks kept so line numbers hold."""
    lines, inside = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            inside = not inside
            lines.append("")
        else:
            lines.append("" if inside else line)
    return CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), "\n".join(lines))


def slug(heading):
    """GitHub's anchor for a heading's text: links and code marks reduced to their text, lower case, letters,
    digits, spaces, hyphens and underscores kept, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "").lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def anchors(markdown):
    """The anchors of a Markdown text's headings (outside code), in order, repeated ones numbered."""
    seen, found = {}, set()
    inside = False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            inside = not inside
            continue
        m = None if inside else HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")
    return found


def links(markdown):
    """(line number, target) of every inline, image and reference link outside code, in the order they appear."""
    text = prose(markdown)
    found = sorted((m.start(), m.group(group)) for pattern, group in ((INLINE_LINK, 2), (REFERENCE_LINK, 1))
                   for m in pattern.finditer(text))
    return [(text.count("\n", 0, start) + 1, target) for start, target in found]


def code_spans(markdown):
    """(line number, text) of every code span outside fenced blocks."""
    lines, inside = [], False
    for line in markdown.split("\n"):
        if FENCE.match(line):
            inside = not inside
        lines.append("" if inside or FENCE.match(line) else line)
    text = "\n".join(lines)
    return [(text.count("\n", 0, m.start()) + 1, m.group(2).strip()) for m in CODE_SPAN.finditer(text)]


def is_name(text):
    """A function, field or type as README.md names them: an underscore, a member's dot, or two capitals."""
    return bool(CODE_NAME.match(text)) and ("_" in text or "." in text or sum(c.isupper() for c in text) >= 2)


class Sources:
    """The project's files: their names (bare) and kinds (suffixes), and the words its sources contain, read once."""

    def __init__(self, root):
        self.names, self.suffixes, self.words = set(), set(), set()
        for parent, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED | BUILT | {".git"})
            self.names.update(files)
            self.suffixes.update(os.path.splitext(name)[1] for name in files)
            if os.path.relpath(parent, root).split(os.sep)[0] not in SOURCE_FOLDERS:
                continue
            for name in files:
                if name.endswith(SOURCE_SUFFIXES):
                    self.words.update(re.findall(r"\w+", read(os.path.join(parent, name), errors="replace")))


def code_problem(span, check_names, sources):
    """What is wrong with a code span's path, file name or (check_names) C name, or None."""
    top = span.split("/")[0]
    if "/" in span and CODE_PATH.match(span) and top in os.listdir(ROOT) and top not in {".", ".."}:
        if any(part.isupper() or part in BUILT for part in span.split("/")):
            return None  # a placeholder, or what make or npm writes
        if os.path.splitext(span)[1] not in sources.suffixes:
            return None  # of a kind no file of the project has: a build product (.o), another project's file
        if not os.path.exists(os.path.join(ROOT, span)):
            return "no such file or folder"
    elif SOURCE_FILE.match(span):
        if span not in sources.names:
            return "no source file has this name"
    elif check_names and is_name(span):
        missing = [part for part in span.split(".") if part not in sources.words]
        if missing:
            return f"'{escaped(missing[0])}' does not occur in the sources"
    return None


def problem(source, target, read):
    """What is wrong with a link from the file `source` to `target`, or None. `read(path)` gives a file's text."""
    if SCHEME.match(target) or target == "":
        return None
    path, _, anchor = target.partition("#")
    resolved = os.path.normpath(os.path.join(os.path.dirname(source), path)) if path else source
    if not os.path.exists(resolved):
        return f"no such file or folder ({escaped(os.path.relpath(resolved, ROOT))})"
    if not anchor:
        return None
    if not resolved.endswith(".md") or os.path.isdir(resolved):
        return "an anchor into something that is not a Markdown file"
    if anchor not in anchors(read(resolved)):
        return f"no heading of {escaped(os.path.relpath(resolved, ROOT))} has the anchor '{escaped(anchor)}'"
    return None


def default_files():
    files = [os.path.join(ROOT, "README.md")]
    for folder in FOLDERS:
        for parent, _, names in sorted(os.walk(os.path.join(ROOT, folder))):
            files += [os.path.join(parent, n) for n in sorted(names) if n.endswith(".md")]
    return files


def read(path, errors="strict"):
    with open(path, encoding="utf-8", errors=errors) as f:
        return f.read()


def check(files):
    """Broken links, and in README.md and docs/ stale names in code, as `FILE:LINE: TARGET: what is wrong` lines."""
    report, sources = [], None
    for source in files:
        text, where = read(source), os.path.relpath(source, ROOT)
        found = [(line, target, problem(source, target, read)) for line, target in links(text)]
        if where == "README.md" or where.startswith("docs" + os.sep):
            sources = sources or Sources(ROOT)
            found += [(line, span, code_problem(span, where == "README.md", sources))
                      for line, span in code_spans(text)]
        found.sort(key=lambda f: f[0])  # by line, in the order found within one
        report += [f"{escaped(where)}:{line}: {escaped(target)}: {wrong}" for line, target, wrong in found if wrong]
    return report


def main(argv):
    files = [os.path.abspath(a) for a in argv] or default_files()
    try:
        report = check(files)
    except (OSError, UnicodeDecodeError) as e:
        print(f"check_links: {escaped(str(e))}", file=sys.stderr)
        return 2
    for line in report:
        print(line, file=sys.stderr)
    print(f"check_links: {len(files)} files, {len(report)} broken links")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
