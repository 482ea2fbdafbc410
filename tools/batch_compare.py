#!/usr/bin/python3
"""batch_compare.py — the drafters in a batch, the way a program's requests meet them in `specdec batch`.

The first --prompts held-out prompts of bench/prompts/python.jsonl become requests of -n tokens at each temperature
(seed: the prompt's index), cut into groups of --parallel requests. Each group runs once with each drafter —
target-only (no -d), the draft model alone (-d DRAFT --no-lookup), and both (-d DRAFT: the default) — as
`specdec batch -m TARGET ... --parallel P -t THREADS`, in an order that turns round from group to group, so that
a drift of the machine's speed touches every drafter alike. A group's time is what batch reports on stderr for its
steps (prefill included, loading the models not). Printed, as Markdown, per temperature and --parallel: each
drafter's aggregate tokens/s (all the groups' tokens over their time), its speed-up over target-only and both's over
the draft alone (the medians of the per-group ratios of tokens/s, with their range: sampled, a group may end
early under one drafter, at its end of text, and not under another). Greedy text, and text under
--options '--sampler coupled', does not depend on the drafter: the tool stops if a group's answers then differ
between the three. Run it on an idle machine: its own runs keep two cores busy, so the load average cannot tell
whether anything else ran beside them.

    tools/batch_compare.py                                 # 40 prompts, greedy, 0.7 and 1, --parallel 1 and 4
    tools/batch_compare.py --temps 1 --parallel 4,8 --options '--sampler coupled'   # every run sampled coupled"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

from held_out_compare import add_pair_arguments, drafter_arguments, held_out_prompts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAFTERS = ("target-only", "draft", "both")
STEPS = re.compile(r"specdec batch: \d+ steps of [0-9.]+ rows on average; of their ([0-9.]+) s")


def steps_seconds(stderr):
    """The seconds of a batch's steps, from the line `specdec batch` ends its stderr with; None if it has none."""
    steps = STEPS.search(stderr)
    return float(steps.group(1)) if steps else None


def run_group(args, drafter, requests, parallel):
    """One `specdec batch` over requests (a list of bodies): (its steps' seconds, the answers' texts, tokens)."""
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl") as f:
        f.write("".join(json.dumps(r) + "\n" for r in requests))
        f.flush()
        command = [args.specdec, "batch", "-m", args.model, "-f", f.name, "--parallel", str(parallel),
                   "-t", str(args.threads)] + args.options.split()
        if drafter != "target-only":
            command += drafter_arguments(drafter, args.draft)
        done = subprocess.run(command, capture_output=True, text=True)
    seconds = steps_seconds(done.stderr)
    if done.returncode != 0 or seconds is None:
        sys.exit(f"{' '.join(command)}: exit {done.returncode}, no steps line or an error: {done.stderr.strip()}")
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    texts = [a["choices"][0]["text"] for a in answers]
    return seconds, texts, sum(a["usage"]["completion_tokens"] for a in answers)


def drafter_order(group):
    """The drafters in the order a group runs them: turned round by one from each group to the next."""
    k = group % len(DRAFTERS)
    return DRAFTERS[k:] + DRAFTERS[:k]


def summary(ratios):
    return f"{statistics.median(ratios):.2f} [{min(ratios):.2f}–{max(ratios):.2f}]"


def table_row(temp, parallel, seconds, tokens):
    """The Markdown row of a temperature and --parallel from each drafter's per-group seconds and tokens."""
    rate = {d: sum(tokens[d]) / sum(seconds[d]) for d in DRAFTERS}
    group_rates = {d: [n / s for n, s in zip(tokens[d], seconds[d])] for d in DRAFTERS}
    over = {d: [x / t for x, t in zip(group_rates[d], group_rates["target-only"])] for d in ("draft", "both")}
    both_over_draft = [b / d for b, d in zip(group_rates["both"], group_rates["draft"])]
    return (f"| {temp} | {parallel} | {rate['target-only']:.0f} | {rate['draft']:.0f} | {rate['both']:.0f} | "
            f"{summary(over['draft'])} | {summary(over['both'])} | {summary(both_over_draft)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", default=os.path.join(ROOT, "build/release/specdec"))
    add_pair_arguments(ap)
    ap.add_argument("--prompts", type=int, default=40, help="the first N held-out prompts (default 40)")
    ap.add_argument("-n", "--tokens", type=int, default=128)
    ap.add_argument("--temps", default="0,0.7,1", help="comma-separated temperatures (default 0,0.7,1)")
    ap.add_argument("--parallel", default="1,4", help="comma-separated --parallel counts (default 1,4)")
    ap.add_argument("-t", "--threads", type=int, default=2)
    ap.add_argument("--options", default="", help="batch options added to every run, e.g. \"--sampler coupled\"")
    args = ap.parse_args()
    coupled = "coupled" in args.options  # (--sampler coupled: every drafter's text is target-only's)

    prompts = held_out_prompts(args.prompts)
    print("| temperature | --parallel | target-only tokens/s | draft tokens/s | both tokens/s | draft × target-only "
          "| both × target-only | both × draft |\n|---:|---:|---:|---:|---:|---:|---:|---:|")
    for temp in args.temps.split(","):
        requests = [{"prompt": p, "max_tokens": args.tokens, "temperature": float(temp), "seed": i}
                    for i, p in enumerate(prompts)]
        for parallel in map(int, args.parallel.split(",")):
            seconds = {d: [] for d in DRAFTERS}
            tokens = {d: [] for d in DRAFTERS}
            for g, at in enumerate(range(0, len(requests), parallel)):
                group = requests[at:at + parallel]
                texts = {}
                for drafter in drafter_order(g):
                    s, texts[drafter], n = run_group(args, drafter, group, parallel)
                    seconds[drafter].append(s)
                    tokens[drafter].append(n)
                if (float(temp) == 0 or coupled) and len({tuple(t) for t in texts.values()}) > 1:
                    sys.exit(f"greedy or coupled answers differ between drafters (group {g}, --parallel {parallel})")
            print(table_row(temp, parallel, seconds, tokens), flush=True)
    print("\nSpeed-ups: medians of the per-group ratios of tokens/s [range]; tokens/s: all the groups' "
          "tokens over their time.")


if __name__ == "__main__":
    main()
