#!/usr/bin/python3
"""test_corpus.py — tests of tools/corpus.py's licence checks, deduplication and split, on made-up inputs
(no network, no Debian packages): `/usr/bin/python3 tools/test_corpus.py` (or `make test-tools`)."""

import os
import random
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

DEP5 = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: example

Files: *
Copyright: 2020 Someone
License: BSD-3-clause

Files: src/example/vendored/*
 src/example/other.py
Copyright: 2019 Someone Else
License: GPL-2+

Files: src/example/vendored/permissive.py
Copyright: 2019 A Third
License: Expat or GPL-2+

Files: debian/*
Copyright: 2021 The Maintainer
License: GPL-3+

Files: example/nameless/
Copyright: 2018 Nobody
License:
 A licence given as text only.

License: BSD-3-clause
 Redistribution and use in source and binary forms ...
"""


def lines_file(n, seed, changed=()):
    """A made-up Python file of n distinct statements; the statements numbered in `changed` altered."""
    return "\n".join(f"value_{seed}_{i} = compute({i}, {'other' if i in changed else 'same'})" for i in range(n))


class Licences(unittest.TestCase):
    def test_parse_dep5(self):
        paragraphs = corpus.parse_copyright(DEP5)
        self.assertEqual(paragraphs[0], (["*"], "BSD-3-clause"))
        self.assertEqual(paragraphs[1], (["src/example/vendored/*", "src/example/other.py"], "GPL-2+"))
        self.assertEqual(paragraphs[4], (["example/nameless/"], ""))
        self.assertEqual(len(paragraphs), 5)            # the standalone License: paragraph is no Files: one

    def test_free_form_is_refused(self):
        with self.assertRaises(ValueError):
            corpus.parse_copyright("This package was debianized by someone.\n\nLicense:\n\n  Anything.\n")

    def test_permissive(self):
        for yes in ("BSD-3-clause", "Expat", "MIT", "Apache-2.0", "PSF-2", "public-domain", "Expat or GPL-2+",
                    "BSD-3 and Expat", "Apache-2.0 OR BSD-2", "ISC"):
            self.assertTrue(corpus.is_permissive(yes), yes)
        for no in ("GPL-2+", "LGPL-2.1+", "MPL-2", "CC-BY-SA-4.0", "", "BSD-3 and GPL-3", "informal",
                   "GPL-2-with-linking-exception"):
            self.assertFalse(corpus.is_permissive(no), no)

    def test_last_matching_paragraph_wins(self):
        paragraphs = corpus.parse_copyright(DEP5)
        self.assertEqual(corpus.file_licence(paragraphs, "example/core.py"), "BSD-3-clause")
        # src/ of the source tree is not installed: src/example/other.py is example/other.py
        self.assertEqual(corpus.file_licence(paragraphs, "example/other.py"), "GPL-2+")
        self.assertEqual(corpus.file_licence(paragraphs, "example/vendored/deep/x.py"), "GPL-2+")
        self.assertEqual(corpus.file_licence(paragraphs, "example/vendored/permissive.py"), "Expat or GPL-2+")
        self.assertEqual(corpus.file_licence(paragraphs, "example/nameless/x.py"), "")   # a folder pattern
        self.assertEqual(corpus.file_licence(paragraphs, "debian_helpers.py"), "BSD-3-clause")
        self.assertEqual(corpus.file_licence([], "x.py"), "")


class Deduplication(unittest.TestCase):
    def files(self, texts):
        return [{"path": f"pkg/f{i}.py", "text": t} for i, t in enumerate(texts)]

    def test_exact_after_normalization(self):
        a = "import os\n\ndef f(x):\n    return x + 1\n"
        b = "# a comment\nimport os\n\n\ndef f(x):   \n        return x + 1\n"     # only layout and comments differ
        kept, dropped = corpus.deduplicate(self.files([a, b, "print(1)\n"]), lambda m: None)
        self.assertEqual([f["path"] for f in kept], ["pkg/f0.py", "pkg/f2.py"])
        self.assertEqual(dropped, {1: 0})

    def test_near_duplicates(self):
        base = lines_file(200, 1)
        near = lines_file(200, 1, changed=set(range(0, 200, 40)))             # 5 of 200 lines: Jaccard ~0.95
        far = lines_file(200, 1, changed=set(range(0, 200, 2)))               # half the lines: Jaccard ~0.33
        other = lines_file(200, 2)
        kept, dropped = corpus.deduplicate(self.files([base, near, far, other]), lambda m: None)
        self.assertEqual(dropped, {1: 0})
        self.assertEqual(len(kept), 3)

    def test_minhash_estimates_jaccard(self):
        rng = random.Random(7)
        pool = [f"line {rng.random()}" for _ in range(3000)]
        a, b = set(pool[:2000]), set(pool[1000:])                               # Jaccard 1000/3000
        sa, sb = corpus.minhash(a), corpus.minhash(b)
        estimate = sum(x == y for x, y in zip(sa, sb)) / corpus.MINHASH_BINS
        self.assertAlmostEqual(estimate, 1 / 3, delta=0.15)                     # ~3.5 standard deviations
        self.assertEqual(corpus.minhash(a), sa)                                 # deterministic
        self.assertIsNone(corpus.minhash([]))


class Split(unittest.TestCase):
    def test_by_hash_and_prompts(self):
        files = [{"path": f"pkg/m{i}.py", "text": f"def f{i}():\n    return {i}\n"} for i in range(2000)]
        train, val = corpus.split(files, ["def f7():\n    return 7"])
        self.assertIn("pkg/m7.py", [f["path"] for f in val])
        self.assertEqual(len(train) + len(val), len(files))
        by_hash = [f for f in files if corpus.held_out_by_hash(f["path"])]
        self.assertTrue(5 <= len(by_hash) <= 40, len(by_hash))                  # about VAL_FRACTION of 2000
        # A file's split depends on its path only: the same with half of the other files gone.
        train2, val2 = corpus.split(files[::2], [])
        self.assertEqual({f["path"] for f in val2}, {f["path"] for f in by_hash[::1] if f in files[::2]})


class Prompts(unittest.TestCase):
    def test_spread(self):
        self.assertEqual(corpus.spread(list(range(10)), 2), [2, 7])
        self.assertEqual(corpus.spread([1, 2], 5), [1, 2])

    def test_prompts_end_on_a_signature_outside_tests(self):
        body = "".join(f"def f{i}(x):\n    return x * {i} + helper(x) - other(x)\n\n" for i in range(40))
        files = [{"path": "pkg/a.py", "text": body}, {"path": "pkg/tests/test_a.py", "text": body},
                 {"path": "pkg/b.py", "text": body.replace("def f", "def g")}]
        ps = corpus.prompts(files, 6)
        self.assertEqual(len(ps), 6)
        self.assertEqual(sum(p["id"].split("-", 1)[1].startswith("pkg.a.py:") for p in ps), 3)  # 3 from each
        self.assertFalse(any("tests" in p["id"] for p in ps))
        for p in ps:
            self.assertTrue(p["prompt"].endswith("(x):"), p["prompt"])
            self.assertIn(p["prompt"], body + body.replace("def f", "def g"))


if __name__ == "__main__":
    unittest.main()
