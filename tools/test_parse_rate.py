#!/usr/bin/python3
"""test_parse_rate.py — tests of tools/parse_rate.py's judgement of continuations (no model needed):
`/usr/bin/python3 tools/test_parse_rate.py` (or `make test-tools`)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parse_rate import complete_statements, header_for, parses  # noqa: E402


class CompleteStatements(unittest.TestCase):
    def test_cuts_after_the_last_complete_line(self):
        self.assertEqual(complete_statements("x = 1\ny = 2\nz = f(1,"), "x = 1\ny = 2\n")

    def test_an_unfinished_line_without_brackets_is_cut_too(self):
        self.assertEqual(complete_statements("x = 1\ny = 2"), "x = 1\n")

    def test_drops_block_headers_and_decorators_without_a_body(self):
        src = "x = 1\n@property\ndef f(self):\n    if x:\n"
        self.assertEqual(complete_statements(src), "x = 1\n")

    def test_keeps_a_block_with_its_body(self):
        src = "def f():\n    return 1\nelse_ = 2\nclass A:\n"
        self.assertEqual(complete_statements(src), "def f():\n    return 1\nelse_ = 2\n")

    def test_stops_before_an_unterminated_string(self):
        self.assertEqual(complete_statements('a = 1\nb = """doc\nmore'), "a = 1\n")

    def test_a_multi_line_call_counts_once_complete(self):
        src = "f(1,\n  2)\ng(3,\n"
        self.assertEqual(complete_statements(src), "f(1,\n  2)\n")


class Header(unittest.TestCase):
    def test_opens_each_level_below_the_first_lines_indentation(self):
        self.assertEqual(header_for("\n        return x\n    def g(self):\n"), "if 1:\n    if 1:\n")

    def test_no_header_at_the_top_level(self):
        self.assertEqual(header_for("import os\n"), "")


class Parses(unittest.TestCase):
    def test_an_indented_window_with_a_valid_continuation_parses(self):
        prompt = ('        """Return the size."""\n        return self.size\n\n'
                  "    def close(self):\n        if not self.clo")
        self.assertTrue(parses(prompt + "sed:\n            self.closed = True\n\n    def rea"))

    def test_a_syntax_error_in_a_complete_line_fails(self):
        prompt = "def f(x):\n"
        self.assertFalse(parses(prompt + "    for i in base.Tlies as i in range(data):\n        pass\n"))

    def test_a_bad_dedent_fails(self):
        self.assertFalse(parses("    x = 1\n  y = 2\nz = 3\n"))

    def test_return_outside_a_function_is_not_a_parse_error(self):
        self.assertTrue(parses("        return x\n"))


if __name__ == "__main__":
    unittest.main()
