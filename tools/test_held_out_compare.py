#!/usr/bin/python3
"""test_held_out_compare.py — tests of tools/held_out_compare.py's configurations and table (no model needed):
`/usr/bin/python3 tools/test_held_out_compare.py` (or `make test-tools`)."""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from held_out_compare import (builds, builds_run_for_run, combined_over_alone, configurations,  # noqa: E402
                              drafter_arguments, last_json_lines, load_line, load_runs, phases, summarise)


def run(label, temp, speedup, draft_threads, ahead_rounds=None, key=(0, 3)):
    stats = {"threads": 16, "draft_threads": draft_threads, "mean_gamma": 4.0, "tokens_per_s": 3000.0 * speedup,
             "target_calls": 10, "pipelined": ahead_rounds is not None, "ahead_rounds": ahead_rounds or 0}
    return label, temp, stats, {"measured_speedup": speedup, "target_only_tokens_per_s": 1500.0}, key


class Configurations(unittest.TestCase):
    def test_default_runs_without_t(self):
        self.assertEqual(configurations("default,2", []), [("default", []), ("-t 2", ["-t", "2"])])

    def test_variants_add_configurations(self):
        self.assertEqual(configurations("default", ["--draft-threads 1", "--gamma 6"]),
                         [("default", []), ("--draft-threads 1", ["--draft-threads", "1"]),
                          ("--gamma 6", ["--gamma", "6"])])

    def test_drafters_give_their_arguments(self):
        self.assertEqual(drafter_arguments("draft", "w/d"), ["-d", "w/d", "--no-lookup"])
        self.assertEqual(drafter_arguments("lookup", "w/d"), ["--lookup"])
        self.assertEqual(drafter_arguments("both", "w/d"), ["-d", "w/d", "--lookup"])

    def test_builds_are_labelled_only_when_compared(self):
        self.assertEqual(builds(["build/specdec"]), [("", "build/specdec")])
        self.assertEqual(builds(["main=a/specdec", "new=b/specdec"]), [("main: ", "a/specdec"), ("new: ", "b/specdec")])


class Table(unittest.TestCase):
    def test_median_and_range_per_configuration_and_temperature(self):
        runs = [run("default", 0, 2.0, 4), run("default", 0, 1.0, 8), run("default", 0, 3.0, 4),
                run("-t 2", 1, 1.5, 1)]
        rows = summarise(runs)
        self.assertEqual(rows[2], "| default | 0 | 2.00 [1.00–3.00] | 16 | 4, 8 | 4.00 | 6000 | 1500 | — |")
        self.assertEqual(rows[3], "| -t 2 | 1 | 1.50 [1.50–1.50] | 16 | 1 | 4.00 | 4500 | 1500 | — |")

    def test_pipelined_runs_report_the_share_of_rounds_drafted_ahead(self):
        rows = summarise([run("-t 1 --pipeline on", 0, 2.0, 1, 3), run("-t 1 --pipeline on", 0, 2.0, 1, 7),
                          run("-t 1 --pipeline on", 0, 2.0, 1, 6)])
        self.assertEqual(rows[2], "| -t 1 --pipeline on | 0 | 2.00 [2.00–2.00] | 16 | 1 | 4.00 | 6000 | 1500 | 0.60 |")

    def test_phases_are_medians_of_round_ms_per_configuration(self):
        runs = [run("default", 0, 2.0, 1), run("default", 0, 2.0, 1), run("default", 0, 2.0, 1)]
        for i, (_, _, stats, _, _) in enumerate(runs):  # draft 0.1, 0.2, 0.3; verify 1.0 throughout
            stats.update(tokens_per_target_call=4.0 + i, ahead_handoff_ms=0.1 * i,  # over 10 target calls
                         draft_calls=[20, 0, 40][i],  # a draft forward 0.05 and 0.075 ms (q rows 0), none
                         round_ms={"draft": 0.1 * (i + 1), "q_rows": 0.0, "verify": 1.0, "p_rows": 0.0,
                                   "accept": 0.0, "commit": 0.0, "rest": 0.02})
        self.assertEqual(phases(runs)[2], "| default | 0 | 5.00 | 1.220 | 0.200 | 0.000 | 1.000 | 0.000 | 0.000 | "
                                          "0.000 | 0.020 | 0.010 | 0.0625 |")

    def test_builds_compared_run_for_run(self):
        runs = [run("main: -t 1", 1, 2.0, 1, key=(0, 3)), run("new: -t 1", 1, 2.2, 1, key=(0, 3)),
                run("main: -t 1", 1, 1.0, 1, key=(1, 3)), run("new: -t 1", 1, 0.9, 1, key=(1, 3)),
                run("new: -t 2", 1, 1.0, 1, key=(0, 3))]  # no main run to pair with: no row
        self.assertEqual(builds_run_for_run(runs)[2:], ["| new | -t 1 | 1 | 0.995 | 1.000 [0.90–1.10] | 2 |"])
        self.assertEqual(builds_run_for_run([run("-t 1", 1, 2.0, 1)]), [])

    def test_both_over_the_better_alone_per_configuration(self):
        runs = [run("-t 2 · draft", 1, 1.4, 1), run("-t 2 · draft", 1, 1.6, 1), run("-t 2 · lookup", 1, 1.1, 0),
                run("-t 2 · lookup + draft", 1, 1.2, 1), run("-t 2 · lookup + draft", 1, 1.8, 1),
                run("-t 1 · draft", 1, 2.0, 1)]  # -t 1 lacks two drafters: no row
        rows = combined_over_alone(runs)
        self.assertEqual(rows[2:], ["| -t 2 | 1 | 1.50 | 1.10 | 1.50 | 1.000 |"])

    def test_runs_are_read_back_from_jsonl(self):
        label, temp, stats, compare, _ = run("-t 2", 1, 1.5, 1)
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write(json.dumps({"config": label, "temperature": temp, "prompt": 0, "seed": 3, "stats": stats,
                                "compare": compare}) + "\n")
        try:
            self.assertEqual(load_runs(f.name), [(label, temp, stats, compare, (0, 3))])
        finally:
            os.unlink(f.name)

    def test_the_load_average_warns_above_half_a_cpu(self):
        self.assertEqual(load_line([0.2, 0.9], 2), "Load average at the runs' starts: 0.20–0.90, on 2 CPUs.")
        self.assertIn("Above 0.5 per CPU", load_line([0.2, 1.1], 2))
        self.assertEqual(load_line([], 2), "")

    def test_the_last_two_json_lines_are_taken(self):
        stderr = 'note: x\n{"a": 1}\ntext\n{"b": 2}\n{"c": 3}\n'
        self.assertEqual(last_json_lines(stderr, 2), [{"b": 2}, {"c": 3}])
        with self.assertRaises(ValueError):
            last_json_lines("no json here\n", 2)


if __name__ == "__main__":
    unittest.main()
