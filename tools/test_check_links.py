#!/usr/bin/python3
"""test_check_links.py — tests of tools/check_links.py on made-up Markdown in a temporary folder, then the check of
the project's own Markdown: `/usr/bin/python3 tools/test_check_links.py` (or `make test-tools`)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_links  # noqa: E402
from check_links import anchors, check, default_files, links, slug  # noqa: E402


class Slug(unittest.TestCase):
    def test_lower_case_without_punctuation_spaces_as_hyphens(self):
        self.assertEqual(slug("Algorithm 1, step by step"), "algorithm-1-step-by-step")
        self.assertEqual(slug("Serving at scale: vLLM and llama.cpp"), "serving-at-scale-vllm-and-llamacpp")

    def test_code_marks_and_links_keep_their_text(self):
        self.assertEqual(slug("How long `make bench` takes"), "how-long-make-bench-takes")
        self.assertEqual(slug("See [the cli](cli.md) — now"), "see-the-cli--now")

    def test_letters_beyond_ascii_are_kept(self):
        self.assertEqual(slug("Choosing γ"), "choosing-γ")


class Anchors(unittest.TestCase):
    def test_repeated_headings_are_numbered(self):
        self.assertEqual(anchors("# A\n## A\n### A\n"), {"a", "a-1", "a-2"})

    def test_headings_in_code_are_not_headings(self):
        self.assertEqual(anchors("# Real\n```sh\n# a shell comment\n```\n"), {"real"})


class Links(unittest.TestCase):
    def test_inline_image_and_reference_links_with_their_lines(self):
        text = "see [a](a.md) and\n![b](b.png \"title\")\n\n[c]: c.md\n"
        self.assertEqual(links(text), [(1, "a.md"), (2, "b.png"), (4, "c.md")])

    def test_link_text_may_span_lines(self):
        self.assertEqual(links("the [long\ntext](x.md#y)."), [(1, "x.md#y")])

    def test_code_is_not_links(self):
        text = "`[a](nowhere.md)` and\n```\n[b](nowhere.md)\n```\n[c](here.md)\n"
        self.assertEqual(links(text), [(5, "here.md")])


class Folder(unittest.TestCase):
    """A made-up project: README.md (given by each test), docs/guide.md, src/."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.write("docs/guide.md", "# Guide\n\n## First steps\n\nback to [the top](../README.md#top).\n")
        os.makedirs(os.path.join(self.dir.name, "src"))

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def broken(self, readme):
        path = self.write("README.md", "# Top\n\n" + readme)
        old_root, check_links.ROOT = check_links.ROOT, self.dir.name
        try:
            return check([path, os.path.join(self.dir.name, "docs/guide.md")])
        finally:
            check_links.ROOT = old_root


class Check(Folder):
    def test_files_folders_anchors_and_external_links_that_resolve(self):
        text = "[g](docs/guide.md) [s](docs/guide.md#first-steps) [d](src/) [t](#top) [w](https://example.org/x)\n"
        self.assertEqual(self.broken(text), [])

    def test_a_missing_file_names_the_line_and_the_target(self):
        self.assertEqual(self.broken("\n[x](docs/gone.md)\n"),
                         ["README.md:4: docs/gone.md: no such file or folder (docs/gone.md)"])

    def test_a_missing_anchor_in_another_file_or_this_one(self):
        self.assertEqual(self.broken("[x](docs/guide.md#second-steps) [y](#bottom)\n"), [
            "README.md:3: docs/guide.md#second-steps: no heading of docs/guide.md has the anchor 'second-steps'",
            "README.md:3: #bottom: no heading of README.md has the anchor 'bottom'"])

    def test_an_anchor_into_a_file_that_is_not_markdown(self):
        self.write("src/a.c", "int a;\n")
        self.assertEqual(self.broken("[x](src/a.c#L1)\n"),
                         ["README.md:3: src/a.c#L1: an anchor into something that is not a Markdown file"])

    def test_control_characters_in_a_target_are_escaped(self):
        report = self.broken("[x](a\x1b.md)\n")
        self.assertEqual(len(report), 1)
        self.assertNotIn("\x1b", report[0])
        self.assertIn("\\x1b", report[0])


class CodeSpans(Folder):
    def setUp(self):
        super().setUp()
        self.write("src/spec.c", "typedef struct SpecStats { int sum_min_pq; } SpecStats;\nint spec_round(void);\n")

    def test_paths_file_names_and_names_that_exist(self):
        text = "`src/spec.c`, `src/`, `spec.c`, `spec_round`, `SpecStats.sum_min_pq`, `SpecStats`\n"
        self.assertEqual(self.broken(text), [])

    def test_a_path_or_a_file_name_that_moved(self):
        self.assertEqual(self.broken("`src/old.c` and `old.c`\n"), [
            "README.md:3: src/old.c: no such file or folder",
            "README.md:3: old.c: no source file has this name"])

    def test_a_function_or_a_field_that_was_renamed(self):
        self.assertEqual(self.broken("`spec_old_round` and `SpecStats.old_sum`\n"), [
            "README.md:3: spec_old_round: 'spec_old_round' does not occur in the sources",
            "README.md:3: SpecStats.old_sum: 'old_sum' does not occur in the sources"])

    def test_placeholders_build_outputs_plain_words_and_code_blocks_are_not_checked(self):
        text = "`src/SHAPE/x.c`, `build/release/specdec`, `Rambert`, `auto`\n```\n`src/old.c`\n```\n"
        self.assertEqual(self.broken(text), [])

    def test_paths_of_a_kind_the_project_has_no_file_of_are_not_checked(self):
        text = "`src/spec.o` (an object), `src/llama-quant.cpp` (another project's)\n"
        self.assertEqual(self.broken(text), [])

    def test_names_are_checked_in_the_readme_only(self):
        self.write("docs/guide.md", "# Guide\n\n`spec_old_round`, and a path: `src/old.c`\n")
        self.assertEqual(self.broken(""), ["docs/guide.md:3: src/old.c: no such file or folder"])


class ThisProject(unittest.TestCase):
    def test_every_link_of_the_projects_markdown_resolves(self):
        self.assertEqual(check(default_files()), [])


if __name__ == "__main__":
    unittest.main()
