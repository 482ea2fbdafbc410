#!/usr/bin/python3
"""held_out_compare.py — speculative decoding against target-only the way a user runs it, by thread count.

For each configuration (a thread count, or the CLI's default: no -t) and temperature, runs
`specdec generate -m TARGET -d DRAFT -f PROMPT -n N --seed S --temp T --compare --stats` on the first
--prompts held-out prompts of bench/prompts/python.jsonl and prints, as a Markdown table, the median of
`measured_speedup` with its range, the threads and draft threads the run used, the mean γ, speculative and
target-only tokens/s, and for pipelined runs (--pipeline) the share of rounds that took drafts drafted ahead;
then a second table of a round's time by phase (the medians of --stats' round_ms, the drafting thread's hand-offs
a round, and a draft forward's time in the rounds' way); with several builds, a third of each build's tokens/s over
the first build's, run for run (the same configuration, temperature, prompt and seed); and the range of the
1-minute load average at the runs' starts, with a warning above 0.5 per CPU (a memory-bound target-only run whose
threads are preempted slows more than a speculative one, so speed-ups read high on a loaded machine).
Each prompt runs every configuration before the next prompt starts, so a drift of the machine's speed touches
every configuration alike.

    tools/held_out_compare.py                              # the CLI's default and 2 threads, greedy and T = 1
    tools/held_out_compare.py --threads default,16,8,4,2,1 --variant "--draft-threads 1" --jsonl runs.jsonl
    tools/held_out_compare.py --from-jsonl runs.jsonl      # the same tables again, running nothing
    tools/held_out_compare.py --threads 1,2 --variant "-t 1 --pipeline on" --variant "-t 1 --pipeline off"

--variant ARGS adds a configuration: the CLI's default thread count with ARGS added (repeatable). --specdec may be
given more than once, as LABEL=PATH, to compare builds: every build runs every configuration, alternating.
--drafters draft,lookup,both runs every configuration with the draft model alone (-d DRAFT --no-lookup), the n-gram
lookup alone (--lookup) and both (-d DRAFT --lookup: the CLI's default with -d, and this tool's), and adds a table of
both's median speed-up over the better of the other two's (issue 29: adding a drafter must never cost).

    tools/held_out_compare.py --threads 1,2 --temps 1 --drafters draft,lookup,both"""

import argparse
import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def configurations(threads, variants):
    """[(label, extra arguments)]: 'default' runs without -t; each variant is the default with its arguments."""
    configs = [("default" if t == "default" else f"-t {t}", [] if t == "default" else ["-t", t])
               for t in threads.split(",") if t]
    configs += [(variant, variant.split()) for variant in variants]
    return configs


# What each --drafters name adds to the command line, and the suffix it gives a configuration's label.
DRAFTERS = {"draft": ("draft", ["-d", "--no-lookup"]), "lookup": ("lookup", ["--lookup"]),
            "both": ("lookup + draft", ["-d", "--lookup"])}


def add_pair_arguments(ap):
    """-m and -d: the target's and the draft's checkpoint folders, the shipped pair's by default."""
    ap.add_argument("-m", "--model", default=os.path.join(ROOT, "weights/pystd/target"))
    ap.add_argument("-d", "--draft", default=os.path.join(ROOT, "weights/pystd/draft"))


def held_out_prompts(n):
    """The first n held-out prompts of bench/prompts/python.jsonl."""
    with open(os.path.join(ROOT, "bench/prompts/python.jsonl")) as f:
        return [json.loads(line)["prompt"] for line in f][:n]


def drafter_arguments(name, draft):
    """The arguments of a --drafters name, with the draft model's folder after -d."""
    return [a for arg in DRAFTERS[name][1] for a in ([arg, draft] if arg == "-d" else [arg])]


def builds(specdecs):
    """[(label, path)] from --specdec values PATH or LABEL=PATH; a lone build needs no label."""
    pairs = [tuple(v.split("=", 1)) if "=" in v else (v, v) for v in specdecs]
    return [("" if len(pairs) == 1 else label + ": ", path) for label, path in pairs]


def by_configuration(runs):
    """runs: [(label, temperature, stats, compare, (prompt, seed))] → {(label, temperature): [(stats, compare)]}, in
    the order first seen."""
    groups = {}
    for label, temp, stats, compare, _ in runs:
        groups.setdefault((label, temp), []).append((stats, compare))
    return groups


def summarise(runs):
    """runs: [(label, temperature, stats, compare, (prompt, seed))] → Markdown table rows, in the order first
    seen."""
    groups = by_configuration(runs)
    lines = ["| configuration | temperature | speed-up, median [min–max] | threads | draft threads | mean γ | "
             "tokens/s | target-only tokens/s | rounds drafted ahead |", "|---|---:|---:|---:|---|---:|---:|---:|---:|"]
    for (label, temp), group in groups.items():
        speedups = [c["measured_speedup"] for _, c in group]
        draft = sorted({s["draft_threads"] for s, _ in group})
        # pipelined drafting: the median over runs of the share of rounds that took drafts drafted ahead
        ahead = "—" if not any(s.get("pipelined") for s, _ in group) else \
            f"{statistics.median(s['ahead_rounds'] / max(s['target_calls'], 1) for s, _ in group):.2f}"
        lines.append(f"| {label} | {temp:g} | {statistics.median(speedups):.2f} [{min(speedups):.2f}–"
                     f"{max(speedups):.2f}] | {group[0][0]['threads']} | {', '.join(map(str, draft))} | "
                     f"{statistics.median(s['mean_gamma'] for s, _ in group):.2f} | "
                     f"{statistics.median(s['tokens_per_s'] for s, _ in group):.0f} | "
                     f"{statistics.median(c['target_only_tokens_per_s'] for _, c in group):.0f} | {ahead} |")
    return lines


PHASES = ("draft", "q_rows", "verify", "p_rows", "accept", "commit", "rest")


def draft_forward_ms(s):
    """A draft forward's ms in the rounds' way: the draft phase less its q rows, over the forwards the rounds made
    (draft_calls: none for a round that took its drafts drafted ahead); with the draft on a core of its own, its
    hand-offs too. None for a run that made none."""
    if not s["draft_calls"]:
        return None
    return (s["round_ms"]["draft"] - s["round_ms"]["q_rows"]) * s["target_calls"] / s["draft_calls"]


def phases(runs):
    """runs → Markdown rows: per configuration and temperature, the medians over its runs of the tokens per target
    call and of each part of a round's time in --stats' round_ms (ms), their sum, the drafting thread's hand-offs a
    round (ahead_handoff_ms, the generation's, over its target calls: a part of rest), and a draft forward's time
    (draft_forward_ms; — where no run made one)."""
    lines = ["| configuration | temperature | tokens/round | round | draft | q rows | verify | p rows | accept | "
             "commit | rest | hand-offs | a draft forward |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (label, temp), group in by_configuration(runs).items():
        def median(f):
            return statistics.median(f(s) for s, _ in group)
        parts = " | ".join(f"{median(lambda s: s['round_ms'][p]):.3f}" for p in PHASES)
        forwards = [f for f in (draft_forward_ms(s) for s, _ in group) if f is not None]
        forward = f"{statistics.median(forwards):.4f}" if forwards else "—"
        lines.append(f"| {label} | {temp:g} | {median(lambda s: s['tokens_per_target_call']):.2f} | "
                     f"{median(lambda s: sum(s['round_ms'].values())):.3f} | {parts} | "
                     f"{median(lambda s: s['ahead_handoff_ms'] / max(s['target_calls'], 1)):.3f} | {forward} |")
    return lines


def builds_run_for_run(runs):
    """runs of several builds (labels 'BUILD: CONFIG') → Markdown rows: per build after the first, configuration and
    temperature, its tokens/s over the first build's on the same prompt and seed — their geometric mean, median
    [min–max] and count. [] for one build."""
    first, tokens = None, {}
    for label, temp, stats, _, key in runs:
        if ": " not in label:
            return []
        build, config = label.split(": ", 1)
        first = first or build
        tokens.setdefault((config, temp), {}).setdefault(key, {})[build] = stats["tokens_per_s"]
    lines = ["| build over " + (first or "") + " | configuration | temperature | tokens/s, geometric mean | "
             "median [min–max] | runs |", "|---|---|---:|---:|---:|---:|"]
    builds = list(dict.fromkeys(b for by_key in tokens.values() for by_build in by_key.values() for b in by_build))
    for build in builds[1:]:
        for (config, temp), by_key in tokens.items():
            ratios = [b[build] / b[first] for b in by_key.values() if build in b and b.get(first)]
            if not ratios:
                continue
            mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
            lines.append(f"| {build} | {config} | {temp:g} | {mean:.3f} | {statistics.median(ratios):.3f} "
                         f"[{min(ratios):.2f}–{max(ratios):.2f}] | {len(ratios)} |")
    return lines if len(builds) > 1 else []


def combined_over_alone(runs):
    """runs labelled 'CONFIG · draft', '· lookup', '· lookup + draft' → Markdown rows: per configuration and
    temperature, the median speed-up of both over the larger of the draft's and the lookup's medians."""
    medians = {}
    for label, temp, _, compare, _ in runs:
        base, _, drafter = label.rpartition(" · ")
        medians.setdefault((base, temp), {}).setdefault(drafter, []).append(compare["measured_speedup"])
    lines = ["| configuration | temperature | draft | lookup | lookup + draft | over the better alone |",
             "|---|---:|---:|---:|---:|---:|"]
    for (base, temp), by in medians.items():
        m = {d: statistics.median(v) for d, v in by.items()}
        if not {"draft", "lookup", "lookup + draft"} <= m.keys():
            continue
        lines.append(f"| {base} | {temp:g} | {m['draft']:.2f} | {m['lookup']:.2f} | {m['lookup + draft']:.2f} | "
                     f"{m['lookup + draft'] / max(m['draft'], m['lookup']):.3f} |")
    return lines


LOADED = 0.5  # load average per CPU above which the runs' speed-ups are not an idle machine's


def load_line(loads, cpus):
    """The range of the load averages at the runs' starts, and whether any was above LOADED per CPU; '' for none."""
    if not loads:
        return ""
    line = f"Load average at the runs' starts: {min(loads):.2f}–{max(loads):.2f}, on {cpus} CPUs."
    if max(loads) > LOADED * cpus:
        line += f" Above {LOADED} per CPU: other work ran beside these runs, and speed-ups over target-only read high."
    return line


def load_runs(path):
    """The runs an earlier --jsonl wrote, as [(label, temperature, stats, compare, (prompt, seed))]."""
    with open(path) as f:
        return [(r["config"], r["temperature"], r["stats"], r["compare"], (r["prompt"], r["seed"]))
                for r in map(json.loads, f)]


def last_json_lines(stderr, n):
    """The last n lines of a run's stderr that are JSON objects (--stats, then --compare)."""
    found = [line for line in stderr.splitlines() if line.startswith("{")]
    if len(found) < n:
        raise ValueError("expected --stats and --compare lines on stderr, got:\n" + stderr[-2000:])
    return [json.loads(line) for line in found[-n:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--specdec", action="append", help="PATH or LABEL=PATH; repeat to compare builds "
                    "(default build/release/specdec)")
    add_pair_arguments(ap)
    ap.add_argument("--prompts", type=int, default=8, help="the first N held-out prompts (default 8)")
    ap.add_argument("-n", "--tokens", type=int, default=128)
    ap.add_argument("--seed", default="3", help="comma-separated: each prompt runs with each seed (default 3); at a "
                    "temperature, two drafters that differ in one round sample different texts from there on, so a "
                    "comparison of drafters wants many prompts and seeds")
    ap.add_argument("--temps", default="0,1", help="comma-separated temperatures (default 0,1)")
    ap.add_argument("--threads", default="default,2", help="comma-separated: 'default' (no -t) or a count")
    ap.add_argument("--variant", action="append", default=[], help="arguments added to the default's (repeatable)")
    ap.add_argument("--drafters", default="both", help="comma-separated: draft (-d --no-lookup), lookup "
                    "(--lookup alone), both (-d and --lookup: the CLI's default with -d, and this tool's)")
    ap.add_argument("--jsonl", help="also write every run's --stats and --compare objects here")
    ap.add_argument("--from-jsonl", help="run nothing: print the tables of the runs an earlier --jsonl wrote")
    args = ap.parse_args()
    if args.from_jsonl:
        runs = load_runs(args.from_jsonl)
        print_tables(runs, any(" · " in label for label, _, _, _, _ in runs))
        with open(args.from_jsonl) as f:
            records = [json.loads(line) for line in f]
        loaded = [r for r in records if "load_average" in r]
        if loaded:
            print("\n" + load_line([r["load_average"] for r in loaded], loaded[0]["cpus"]))
        return

    prompts = held_out_prompts(args.prompts)
    drafters = args.drafters.split(",")
    if not set(drafters) <= DRAFTERS.keys():
        sys.exit(f"held_out_compare: --drafters {args.drafters}: each must be one of {', '.join(DRAFTERS)}")
    configs = [(name + label + (f" · {DRAFTERS[d][0]}" if len(drafters) > 1 else ""), path,
                drafter_arguments(d, args.draft) + extra) for name, path in
               builds(args.specdec or [os.path.join(ROOT, "build/release/specdec")])
               for label, extra in configurations(args.threads, args.variant) for d in drafters]
    temps = [float(t) for t in args.temps.split(",")]
    runs, loads = [], []
    with tempfile.TemporaryDirectory() as tmp, open(args.jsonl or os.devnull, "w") as log:
        for i, prompt in enumerate(prompts):
            path = os.path.join(tmp, f"prompt{i}")
            with open(path, "w") as f:
                f.write(prompt)
            for temp, seed, (label, specdec, extra) in itertools.product(temps, args.seed.split(","), configs):
                load = os.getloadavg()[0]
                cmd = [specdec, "generate", "-m", args.model, "-f", path, "-n",
                       str(args.tokens), "--seed", seed, "--temp", f"{temp:g}", "--compare",
                       "--stats"] + extra
                done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                if done.returncode != 0:
                    sys.exit(f"held_out_compare: {' '.join(cmd)} exited {done.returncode}:\n{done.stderr}")
                stats, compare = last_json_lines(done.stderr, 2)
                runs.append((label, temp, stats, compare, (i, int(seed))))
                loads.append(load)
                log.write(json.dumps({"config": label, "temperature": temp, "prompt": i, "seed": int(seed),
                                      "stats": stats, "compare": compare, "load_average": load,
                                      "cpus": os.cpu_count()}) + "\n")
    print_tables(runs, len(drafters) > 1)
    print("\n" + load_line(loads, os.cpu_count()))


def print_tables(runs, several_drafters):
    print("\n".join(summarise(runs)))
    print("\nA round's time by phase, ms (medians of --stats' round_ms):\n\n" + "\n".join(phases(runs)))
    if several_drafters:
        print("\n" + "\n".join(combined_over_alone(runs)))
    run_for_run = builds_run_for_run(runs)
    if run_for_run:
        print("\nEach build against the first, run for run:\n\n" + "\n".join(run_for_run))


if __name__ == "__main__":
    main()
