#!/usr/bin/python3
"""test_batch_compare.py — tests of tools/batch_compare.py's reading of batch's stderr, its order and its table (no
model needed): `/usr/bin/python3 tools/test_batch_compare.py` (or `make test-tools`)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from batch_compare import drafter_order, steps_seconds, table_row  # noqa: E402

# The line src/cli/batch.c's report_times ends stderr with (test cli_batch_answers_in_order reads it too).
STEPS_LINE = ("specdec batch: 1093 steps of 10.0 rows on average; of their 5.880 s, the target's forwards 90.6%, "
              "the draft's 8.3%, the rest (γ, accept, commit) 1.1%\n")


class StepsSeconds(unittest.TestCase):
    def test_reads_the_steps_time(self):
        self.assertEqual(steps_seconds("specdec: note: --top-p ignored\n" + STEPS_LINE), 5.88)

    def test_none_without_the_line(self):
        self.assertIsNone(steps_seconds("specdec: --lookup and --no-lookup: give one or the other\n"))


class Order(unittest.TestCase):
    def test_each_drafter_takes_each_place_in_turn(self):
        orders = [drafter_order(g) for g in range(3)]
        self.assertEqual(orders[0], ("target-only", "draft", "both"))
        for place in range(3):
            self.assertEqual({o[place] for o in orders}, {"target-only", "draft", "both"})
        self.assertEqual(drafter_order(3), orders[0])


class Row(unittest.TestCase):
    def test_rates_and_ratios(self):
        # Two groups: target-only 100 tokens in 1 s each; the draft 2 and 4 times as fast; both 1.5 × the draft.
        seconds = {"target-only": [1.0, 1.0], "draft": [0.5, 0.25], "both": [1 / 3, 1 / 6]}
        tokens = {"target-only": [100, 100], "draft": [100, 100], "both": [100, 100]}
        self.assertEqual(table_row("0", 4, seconds, tokens),
                         "| 0 | 4 | 100 | 267 | 400 | 3.00 [2.00–4.00] | 4.50 [3.00–6.00] | 1.50 [1.50–1.50] |")

    def test_a_group_ended_early_is_judged_by_its_rate(self):
        # Sampled, target-only's text of the first group ends after 10 tokens: by time alone the draft would read
        # 0.2 ×; by rate it reads 2 ×, as in the second group.
        seconds = {"target-only": [0.1, 1.0], "draft": [0.5, 0.5], "both": [0.5, 0.5]}
        tokens = {"target-only": [10, 100], "draft": [100, 100], "both": [100, 100]}
        self.assertIn("| 2.00 [2.00–2.00] |", table_row("1", 1, seconds, tokens))


if __name__ == "__main__":
    unittest.main()
