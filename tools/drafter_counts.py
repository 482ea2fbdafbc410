#!/usr/bin/python3
"""drafter_counts.py — the draft model, the n-gram lookup and both, compared by what a seed fixes (issue 29).

Under `--gamma auto` with rejection sampling at a temperature the γ policy plans with its cost model, so a run's
rounds, drafts and forwards depend on its seed, options and --threads only, not on the machine's load. For each
thread count, each of the first --prompts held-out prompts of bench/prompts/python.jsonl and each seed, this runs
`specdec generate -m TARGET [-d DRAFT] [--lookup] -f PROMPT -n N --seed S --temp T -t THREADS --stats --trace FILE`
with the draft model alone, the lookup alone and both, counts what the rounds did (by source: the lookup's run, the
draft model, plain), and prices every round with unit costs (by default the idle bench's on 2 threads:
bench/results/latest.md):

    round = target step × verify(k + 1) + (kept + 1) × row            the verification and its p rows
            + forwards × (draft step + row) + (rows fed − forwards) × draft row     the draft model's, if it drafted

It prints the counts, lookup + draft's rounds by source, and its priced speed over the better of the other two: pooled
over the runs, the mean of the per-run ratios with its standard error, and the median over the first 8 prompts at
each seed (what tools/held_out_compare.py measures by timing). A run that proposes one lookup run samples another
text from there on, so single runs differ by the text's luck as much as by the drafter.

    tools/drafter_counts.py --threads 1,2 --prompts 16 --seeds 1,2,3 --jsonl runs.jsonl
    tools/drafter_counts.py --from-jsonl runs.jsonl --target-ms 3.6     # the same runs at other unit costs"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from held_out_compare import add_pair_arguments, drafter_arguments, held_out_prompts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DRAFTERS = ("draft", "lookup", "both")


def verify_cost(T, costs):
    """A target forward of T tokens over one token's: measured for T ≤ 1 + len(verify), else the last slope on."""
    table = [1.0] + costs["verify"]
    if T <= len(table):
        return table[T - 1]
    slope = table[-1] - table[-2] if len(table) > 1 else 0.0
    return table[-1] + slope * (T - len(table))


def price_round(r, costs):
    """Milliseconds of one trace line's round at the unit costs."""
    k = len(r["drafted"])
    ms = costs["target_ms"] * verify_cost(k + 1, costs) + (r["accepted"] + 1) * costs["row_ms"]
    if r["draft_forwards"]:
        ms += r["draft_forwards"] * (costs["draft_ms"] + costs["row_ms"])
        ms += (r["draft_rows"] - r["draft_forwards"]) * costs["draft_row_ms"]
    return ms


def rate(run, costs):
    """Tokens per priced millisecond of one run {stats, rounds}."""
    return run["stats"]["generated_tokens"] / sum(price_round(r, costs) for r in run["rounds"])


def count_table(runs, costs):
    """runs: {(threads, prompt, seed, drafter): {stats, rounds}} → Markdown rows of the counts by threads and
    drafter."""
    lines = ["| threads | drafter | tokens / target call | rounds | the draft model's | the lookup's (drafts, kept) | "
             "plain | draft forwards | their rows | priced tokens/ms |",
             "|---:|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for threads in sorted({k[0] for k in runs}, key=int):
        for drafter in DRAFTERS:
            group = [v for k, v in runs.items() if k[0] == threads and k[3] == drafter]
            if not group:
                continue
            s = {key: sum(g["stats"][key] for g in group) for key in
                 ("generated_tokens", "target_calls", "plain_rounds", "lookup_rounds", "lookup_drafted",
                  "lookup_accepted", "draft_calls", "draft_rows")}
            model_rounds = sum(r["source"] == "draft" for g in group for r in g["rounds"])
            priced = s["generated_tokens"] / sum(price_round(r, costs) for g in group for r in g["rounds"])
            lines.append(f"| {threads} | {drafter} | {s['generated_tokens'] / s['target_calls']:.3f} | "
                         f"{s['target_calls']} | {model_rounds} | {s['lookup_rounds']} ({s['lookup_drafted']}, "
                         f"{s['lookup_accepted']}) | {s['plain_rounds']} | {s['draft_calls']} | {s['draft_rows']} | "
                         f"{priced:.3f} |")
    return lines


def source_rows(runs, costs):
    """Lookup + draft's rounds by source — the draft model, the lookup's run by match length (4: 4 or more), plain —
    per thread count: rounds, tokens per round and priced tokens/ms (Markdown rows)."""
    lines = ["| threads | source | rounds | tokens / round | priced tokens/ms |", "|---:|---|---:|---:|---:|"]
    for threads in sorted({k[0] for k in runs}, key=int):
        by = {}
        for r in (r for k, v in runs.items() if k[0] == threads and k[3] == "both" for r in v["rounds"]):
            source = f"lookup, match {min(r['match'], 4)}" if r["source"] == "lookup" else r["source"]
            n, tokens, ms = by.get(source, (0, 0, 0.0))
            by[source] = (n + 1, tokens + r["accepted"] + 1, ms + price_round(r, costs))
        lines += [f"| {threads} | {source} | {n} | {tokens / n:.2f} | {tokens / ms:.3f} |"
                  for source, (n, tokens, ms) in sorted(by.items())]
    return lines


def combination_rows(runs, costs):
    """Lookup + draft's priced speed over the better alone (of those run), per thread count (Markdown rows)."""
    lines = ["| threads | pooled | mean of the runs' ratios ± standard error | runs the draft alone's | "
             "median of the first 8 prompts, by seed |", "|---:|---:|---:|---:|---|"]
    for threads in sorted({k[0] for k in runs}, key=int):
        keys = sorted({k[1:3] for k in runs if k[0] == threads})
        pooled = {}
        for d in (d for d in DRAFTERS if (threads, *keys[0], d) in runs):
            group = [runs[(threads, p, s, d)] for p, s in keys]
            pooled[d] = sum(g["stats"]["generated_tokens"] for g in group) / \
                sum(price_round(r, costs) for g in group for r in g["rounds"])
        better = max((d for d in pooled if d != "both"), key=pooled.get)
        ratios = [rate(runs[(threads, p, s, "both")], costs) / rate(runs[(threads, p, s, better)], costs)
                  for p, s in keys]
        same = sum(runs[(threads, p, s, "both")]["stats"]["lookup_rounds"] == 0 for p, s in keys)
        by_seed = []
        for seed in sorted({s for _, s in keys}, key=int):
            first = [p for p, s in keys if s == seed][:8]
            med = {d: statistics.median(rate(runs[(threads, p, seed, d)], costs) for p in first) for d in pooled}
            by_seed.append(f"{seed}: {med['both'] / max(v for d, v in med.items() if d != 'both'):.3f}")
        se = statistics.pstdev(ratios) / len(ratios) ** 0.5
        lines.append(f"| {threads} | {pooled['both'] / pooled[better]:.3f} | "
                     f"{statistics.mean(ratios):.3f} ± {se:.3f} | {same} of {len(keys)} | {', '.join(by_seed)} |")
    return lines


def run_one(specdec, model, draft, path, args, threads, seed, drafter, trace):
    cmd = [specdec, "generate", "-m", model, "-f", path, "-n", str(args.tokens), "--seed", seed, "--temp",
           args.temp, "-t", threads, "--stats", "--trace", trace] + drafter_arguments(drafter, draft)
    open(trace, "w").close()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"drafter_counts: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
    stats = json.loads([line for line in done.stderr.splitlines() if line.startswith("{")][-1])
    with open(trace) as f:
        return {"stats": stats, "rounds": [json.loads(line) for line in f]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", default=os.path.join(ROOT, "build/release/specdec"))
    add_pair_arguments(ap)
    ap.add_argument("--prompts", type=int, default=16, help="the first N held-out prompts (default 16)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts (the plan knows them)")
    ap.add_argument("--temp", default="1")
    ap.add_argument("-n", "--tokens", type=int, default=128)
    ap.add_argument("--target-ms", type=float, default=1.652, help="a target step (default: the idle bench's)")
    ap.add_argument("--verify", default="0.99,1.06,1.13,1.18,1.24,1.29,1.38,1.53",
                    help="a forward of T = 2, 3, ... tokens over one token's (default: the idle bench's)")
    ap.add_argument("--draft-ms", type=float, default=0.027, help="a draft step")
    ap.add_argument("--draft-row-ms", type=float, default=0.012, help="each further row of a draft forward")
    ap.add_argument("--row-ms", type=float, default=0.0156, help="one row's sampling")
    ap.add_argument("--jsonl", help="also write every run's statistics and rounds here")
    ap.add_argument("--from-jsonl", help="price the runs an earlier --jsonl wrote, at these costs, running none")
    args = ap.parse_args()
    costs = {"target_ms": args.target_ms, "verify": [float(v) for v in args.verify.split(",")],
             "draft_ms": args.draft_ms, "draft_row_ms": args.draft_row_ms, "row_ms": args.row_ms}
    runs = load_runs(args.from_jsonl) if args.from_jsonl else collect(args)
    print("\n\n".join("\n".join(rows(runs, costs)) for rows in (count_table, source_rows, combination_rows)))


def load_runs(path):
    """The runs an earlier --jsonl wrote, keyed as collect() keys them."""
    with open(path) as f:
        lines = [json.loads(line) for line in f]
    return {(r["threads"], r["prompt"], r["seed"], r["drafter"]): {"stats": r["stats"], "rounds": r["rounds"]}
            for r in lines}


def collect(args):
    """Runs every thread count, prompt, seed and drafter: {(threads, prompt, seed, drafter): {stats, rounds}}."""
    prompts = held_out_prompts(args.prompts)
    runs = {}
    with tempfile.TemporaryDirectory() as tmp, open(args.jsonl or os.devnull, "w") as log:
        trace = os.path.join(tmp, "trace.jsonl")
        for i, prompt in enumerate(prompts):
            path = os.path.join(tmp, f"prompt{i}")
            with open(path, "w") as f:
                f.write(prompt)
            for threads in args.threads.split(","):
                for seed in args.seeds.split(","):
                    for d in DRAFTERS:
                        runs[(threads, i, seed, d)] = run_one(args.specdec, args.model, args.draft, path, args,
                                                              threads, seed, d, trace)
                        log.write(json.dumps({"threads": threads, "prompt": i, "seed": seed, "drafter": d,
                                              **runs[(threads, i, seed, d)]}) + "\n")
    return runs


if __name__ == "__main__":
    main()
