#!/bin/bash
# lease_check.sh — the figures issues 29 and 32 ask of a many-core machine, in one script bounded in time, for a
# lent machine whose minutes are counted (docs/performance.md, "Benchmarks"). Run it from the repository's root
# after `source DIR/unpack.sh` (tools/pack_remote.sh packs the binaries and the shipped target):
#
#   tools/lease_check.sh BIN OUT            BIN holds specdec and run-bench; every file goes to OUT
#   tools/lease_check.sh BIN OUT --quick    a trial of the same steps in about 2 minutes on 2 cores
#
# The steps, each under `timeout` so that a slow one cannot eat the others' time (an interrupted step leaves what it
# wrote and the script goes on; the exit status is 1 if any step failed or was stopped — CI runs the trial):
#   machine     the CPU, its caches, its load average (the figures mean little above ~0.5 per core)
#   issue 29    the shipped pair with the CLI's defaults, with them but `--pipeline off` (the same threads without
#               the drafting thread: what the draft on a core of its own gives) and on 2 threads, greedy and at
#               temperature 1 (tools/held_out_compare.py: --compare's medians over the first 8 held-out prompts,
#               128 tokens)
#   threads     the shipped pair's round split into its phases, with the CLI's default threads (all CPUs but one,
#               the drafting thread's) and all of them, and the jobs a target step hands off with the caller's
#               wait at their ends (run-bench -s threads on 4 prompts)
#   issue 32    the target's decode on the Llama-3.2-1B shape in q8, q4 and BF16 beside the read pass, on 8 and
#               on all the CPUs (run-bench -s threads)
set -uo pipefail
usage="usage: tools/lease_check.sh BIN OUT [--quick]"
bin=${1:?$usage}
out=${2:?$usage}
quick=${3:-}
if [ ! -x "$bin/specdec" ] || [ ! -x "$bin/run-bench" ]; then
    echo "lease_check: no specdec and run-bench in $bin" >&2
    exit 2
fi
[ -z "$quick" ] || [ "$quick" = --quick ] || { echo "$usage" >&2; exit 2; }
mkdir -p "$out"
cpus=$(nproc)
if [ -n "$quick" ]; then
    compare=(--threads default,1 --prompts 2 -n 32)
    shape=random:gpt2-small sweep=1,$cpus budget_29=120 budget_threads=60 budget_32=60
else
    compare=(--threads default,2)
    shape=random:llama-3.2-1b sweep=8,$cpus budget_29=150 budget_threads=45 budget_32=95
fi
default_threads=$((cpus >= 8 ? cpus - 1 : cpus))  # session_default_threads with a draft model (src/cli/session.h)

step() {  # step NAME SECONDS COMMAND...: COMMAND's output to OUT/NAME.txt, stopped after SECONDS
    local name=$1 seconds=$2
    shift 2
    echo "== $name (at most $seconds s, load average $(cut -d' ' -f1 /proc/loadavg))"
    local start=$SECONDS
    timeout "$seconds" "$@" > "$out/$name.txt" 2>&1
    local rc=$?
    [ $rc -eq 124 ] && echo "   stopped after $seconds s"
    [ $rc -ne 0 ] && [ $rc -ne 124 ] && echo "   exit status $rc (see $out/$name.txt)"
    [ $rc -eq 0 ] || failed=1
    echo "   $((SECONDS - start)) s"
}
failed=0

{
    lscpu
    lscpu -e  # which CPUs share a core (hyperthreads of one) or a cache: what a thread count's figures depend on
    echo "L3 as sysfs describes it: $(cat /sys/devices/system/cpu/cpu0/cache/index3/size 2>/dev/null || echo none)"
    echo "load average: $(cat /proc/loadavg)"
    "$bin/specdec" --version
} > "$out/machine.txt" 2>&1

step issue29 "$budget_29" python3 tools/held_out_compare.py --specdec "$bin/specdec" "${compare[@]}" \
    --variant "--pipeline off" --jsonl "$out/issue29.jsonl"
step threads "$budget_threads" "$bin/run-bench" -s threads --quick --prompts 4 \
    --threads-sweep "$(echo "$default_threads,$cpus" | tr ',' '\n' | sort -un | paste -sd,)" --no-plots -o "$out/threads"
for quant in q8 q4 bf16; do
    step "issue32-$quant" "$budget_32" "$bin/run-bench" -s threads -m "$shape" --quant "$quant" --quick \
        --threads-sweep "$sweep" --no-plots -o "$out/issue32-$quant"
done
echo "== done: $out"
exit $failed
