#!/usr/bin/python3
"""test_vs_llamacpp_table.py — tests of tools/vs_llamacpp_table.py's placements and table on made-up rounds, and of
tools/placement_probe.c (compiled with cc): `/usr/bin/python3 tools/test_vs_llamacpp_table.py` (or `make test-tools`)."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vs_llamacpp_table import NEAR_NS, placement, report  # noqa: E402

TOOLS = os.path.dirname(os.path.abspath(__file__))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def write_round(work, r, llama_decode, specdec_decode, probes, isa="avx512"):
    """Round r's files, as vs_llamacpp.sh leaves them: decode tokens/s at threads 1 and 2 of each program (pp8 and
    T = 8 alike), and the four probes (ns): two around llama-bench's turn, two around run-bench's."""
    runs = []
    for t, rate in zip((1, 2), llama_decode):
        for n_gen in (0, 64):
            runs.append({"n_threads": t, "n_gen": n_gen, "avg_ts": rate, "cpu_info": "CPU", "build_commit": "abc",
                         "backends": "CPU", "model_type": "llama 1B Q4_K - Medium", "model_size": 8e8})
    write(f"{work}/llama-{r}.json", json.dumps(runs))
    os.makedirs(f"{work}/specdec-{r}", exist_ok=True)
    counts = [{"threads": t, "target_tokens_per_s": {"median": rate}, "verify_cost_t8_t1": {"median": 2.0}}
              for t, rate in zip((1, 2), specdec_decode)]
    mine = {"machine": {"isa": isa, "isa_available": ["scalar", "avx2", "avxvnni", "avx512"], "commit": "def"},
            "pair": {"target": {"weight_bytes": 8.2e8}}, "threads": {"counts": counts}}
    write(f"{work}/specdec-{r}/latest.json", json.dumps(mine))
    for i, p in enumerate(("llama", "specdec")):
        write(f"{work}/{p}-{r}.load", "0.5\n")
        write(f"{work}/{p}-{r}.placement", "".join(f"{ns}\n" for ns in probes[2 * i:2 * i + 2]))


class Placement(unittest.TestCase):
    def test_all_probes_on_one_side_name_it(self):
        self.assertEqual(placement([55.0, 60.2, 48.0, 57.0]), "near")
        self.assertEqual(placement([370.0, 352.0, NEAR_NS, 390.0]), "far")

    def test_probes_on_both_sides_are_mixed(self):
        self.assertEqual(placement([55.0, 60.0, 370.0, 57.0]), "mixed")

    def test_no_probe_is_unknown(self):
        self.assertEqual(placement([]), "unknown")


class Report(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.work = folder.name

    def lines(self, rounds, isa="avx512", llama_isa="native"):
        for r, (llama, specdec, probes) in enumerate(rounds, 1):
            write_round(self.work, r, llama, specdec, probes, isa)
        return report(self.work, len(rounds), "m.gguf", "m.gguf", "none", llama_isa, 2)

    def test_ratios_are_taken_within_each_placement(self):
        out = self.lines([((35.0, 50.0), (38.5, 52.0), (55, 56, 54, 57)),
                          ((35.0, 50.0), (38.0, 70.0), (370, 380, 360, 365)),
                          ((35.0, 50.0), (39.2, 51.0), (50, 58, 60, 52))])
        text = "\n".join(out)
        self.assertIn("| 1 | specdec | 55, 56, 54, 57 | near | 1.10 | 1.04 |", text)
        self.assertIn("| 2 | llama.cpp | 370, 380, 360, 365 | far | 1.09 | 1.40 |", text)
        self.assertIn("2 near rounds:", text)
        self.assertIn("1 far round:", text)
        # the near rounds' two-thread decode: ratios 1.04 and 1.02, the far round's 1.40 kept apart
        self.assertIn("| 2 | decode (tg64 / T = 1) | 50.0 [50.0–50.0] | 51.5 [51.0–52.0] | 1.03 [1.02–1.04] |", text)
        self.assertIn("| 2 | decode (tg64 / T = 1) | 50.0 [50.0–50.0] | 70.0 [70.0–70.0] | 1.40 [1.40–1.40] |", text)
        self.assertIn("decode, 2 threads, 2 near rounds: specdec / llama.cpp 1.03 (median), short of the goal of 1.1 "
                      "(issue 55, avx512 kernels)", out)
        self.assertIn("decode, 2 threads, 1 far round: specdec / llama.cpp 1.40 (median), meets the goal of 1.1 (issue 55, avx512 kernels)", out)
        self.assertIn("decode, 1 thread, 2 near rounds: specdec / llama.cpp 1.11 (median), meets the goal of 1.1 (issue 55, avx512 kernels)", out)
        self.assertFalse(any(line.startswith("warning:") for line in out))

    def test_avx2_kernels_answer_to_issue_49s_goal(self):
        # SPECDEC_ISA=avx2 or avxvnni against a llama.cpp built for AVX2: ratios 1.10 and 1.04 fall short of 1.2
        for isa in ("avx2", "avxvnni"):
            out = self.lines([((35.0, 50.0), (38.5, 52.0), (55, 56, 54, 57))], isa, "AVX2 FMA F16C")
            self.assertIn("decode, 1 thread, 1 near round: specdec / llama.cpp 1.10 (median), short of the goal of 1.2 "
                          f"(issue 49, {isa} kernels)", out)
            self.assertFalse(any("goal of 1.1" in line for line in out))

    def test_a_round_whose_placement_moved_is_kept_apart_and_warned_of(self):
        out = self.lines([((35.0, 50.0), (38.5, 52.0), (55, 56, 370, 57))])
        self.assertIn("1 mixed round:", "\n".join(out))
        self.assertTrue(any(line.startswith("warning: the placement changed") for line in out))

    def test_one_cpu_has_no_probes(self):
        out = self.lines([((35.0,), (38.5,), ())])
        self.assertIn("| 1 | specdec | – (one CPU) | unknown | 1.10 |", "\n".join(out))


class Probe(unittest.TestCase):
    def setUp(self):
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.binary = os.path.join(folder.name, "placement_probe")
        subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", self.binary,
                        os.path.join(TOOLS, "placement_probe.c")], check=True)

    @unittest.skipIf((os.cpu_count() or 1) < 2, "the probe needs two CPUs")
    def test_prints_one_round_trip(self):
        out = subprocess.run([self.binary], capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)
        name, ns = out.stdout.split()
        self.assertEqual(name, "round_trip_ns")
        self.assertGreater(float(ns), 0.0)

    def test_refuses_one_cpu_twice_and_a_bad_number(self):
        for args, message in ((["0", "0"], "CPU_A and CPU_B are both 0"), (["x", "1"], 'CPU_A: expected a CPU number')):
            out = subprocess.run([self.binary, *args], capture_output=True, text=True, timeout=60)
            self.assertEqual(out.returncode, 2)
            self.assertIn(message, out.stderr)
            self.assertEqual(out.stderr.count("\n"), 1)


if __name__ == "__main__":
    unittest.main()
