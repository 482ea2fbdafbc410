#!/usr/bin/python3
"""test_drafter_counts.py — tests of tools/drafter_counts.py's pricing and tables (no model needed):
`/usr/bin/python3 tools/test_drafter_counts.py` (or `make test-tools`)."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from drafter_counts import (combination_rows, count_table, load_runs, price_round, source_rows,  # noqa: E402
                            verify_cost)

COSTS = {"target_ms": 2.0, "verify": [1.1, 1.3], "draft_ms": 0.1, "draft_row_ms": 0.05, "row_ms": 0.01}


def round_of(source, drafted, accepted, forwards=0, rows=0, match=0):
    return {"source": source, "drafted": [7] * drafted, "accepted": accepted, "draft_forwards": forwards,
            "draft_rows": rows, "match": match}


def run(rounds, **stats):
    counts = {"generated_tokens": sum(r["accepted"] + 1 for r in rounds), "target_calls": len(rounds),
              "plain_rounds": sum(r["source"] == "plain" for r in rounds),
              "lookup_rounds": sum(r["source"] == "lookup" for r in rounds), "lookup_drafted": 0,
              "lookup_accepted": 0, "draft_calls": sum(r["draft_forwards"] for r in rounds),
              "draft_rows": sum(r["draft_rows"] for r in rounds)}
    return {"stats": {**counts, **stats}, "rounds": rounds}


class Pricing(unittest.TestCase):
    def test_verify_cost_is_measured_then_extended_by_the_last_slope(self):
        self.assertEqual([verify_cost(T, COSTS) for T in (1, 2, 3)], [1.0, 1.1, 1.3])
        self.assertAlmostEqual(verify_cost(5, COSTS), 1.7)

    def test_a_round_costs_its_verification_rows_and_forwards(self):
        plain = round_of("plain", 0, 0)
        self.assertAlmostEqual(price_round(plain, COSTS), 2.0 + 0.01)
        # 2 drafts, 1 kept: T = 3; 2 p rows; 2 forwards feeding 3 rows (one catch-up row)
        model = round_of("draft", 2, 1, forwards=2, rows=3)
        self.assertAlmostEqual(price_round(model, COSTS), 2.0 * 1.3 + 2 * 0.01 + 2 * 0.11 + 1 * 0.05)
        lookup = round_of("lookup", 2, 2)
        self.assertAlmostEqual(price_round(lookup, COSTS), 2.0 * 1.3 + 3 * 0.01)


class Tables(unittest.TestCase):
    def runs(self):
        model = run([round_of("draft", 2, 2, 2, 3)] * 2)
        lookup = run([round_of("lookup", 2, 0)] * 2)
        both_same = model  # proposed no lookup run: the draft alone's run
        both_other = run([round_of("lookup", 2, 2, match=5)] * 2)  # lookup runs kept whole: no draft forwards
        return {("1", 0, "1", "draft"): model, ("1", 0, "1", "lookup"): lookup, ("1", 0, "1", "both"): both_same,
                ("1", 1, "1", "draft"): model, ("1", 1, "1", "lookup"): lookup, ("1", 1, "1", "both"): both_other}

    def test_counts_by_drafter(self):
        rows = count_table(self.runs(), COSTS)
        self.assertTrue(rows[2].startswith("| 1 | draft | 3.000 | 4 | 4 | 0 (0, 0) | 0 | 8 | 12 | "), rows[2])
        self.assertTrue(rows[4].startswith("| 1 | both | 3.000 | 4 | 2 | 2 (0, 0) | 0 | 4 | 6 | "), rows[4])

    def test_both_over_the_better_alone(self):
        model_ms, lookup_ms = 2.0 * 1.3 + 3 * 0.01 + 2 * 0.11 + 0.05, 2.0 * 1.3 + 3 * 0.01
        ratio = model_ms / lookup_ms  # the second prompt's lookup rounds save the draft's forwards
        pooled = (12 / (2 * model_ms + 2 * lookup_ms)) / (12 / (4 * model_ms))
        row = combination_rows(self.runs(), COSTS)[2]
        self.assertEqual(row, f"| 1 | {pooled:.3f} | {(1 + ratio) / 2:.3f} ± {(ratio - 1) / 2 / 2 ** 0.5:.3f} | "
                              f"1 of 2 | 1: {((3 / model_ms + 3 / lookup_ms) / 2) / (3 / model_ms):.3f} |")

    def test_rounds_by_source_with_long_matches_counted_as_4(self):
        rows = source_rows(self.runs(), COSTS)
        self.assertEqual([r.split(" | ")[:4] for r in rows[2:]], [["| 1", "draft", "2", "3.00"],
                                                                 ["| 1", "lookup, match 4", "2", "3.00"]])

    def test_the_better_alone_among_the_drafters_run(self):
        runs = {k: v for k, v in self.runs().items() if k[3] != "lookup"}
        self.assertEqual(combination_rows(runs, COSTS)[2].split(" | ")[1], combination_rows(self.runs(), COSTS)[2]
                         .split(" | ")[1])

    def test_runs_written_are_read_back(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            for (threads, prompt, seed, drafter), r in self.runs().items():
                line = {"threads": threads, "prompt": prompt, "seed": seed, "drafter": drafter, **r}
                f.write(json.dumps(line) + "\n")
        try:
            self.assertEqual(load_runs(f.name), self.runs())
        finally:
            os.unlink(f.name)


if __name__ == "__main__":
    unittest.main()
