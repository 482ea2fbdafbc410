#!/usr/bin/env bash
# fuzz/smoke.sh SECONDS TARGET... — runs each libFuzzer target of build/fuzz/bin for SECONDS from its committed seed
# corpus fuzz/corpus/<target> (new inputs go to build/fuzz/corpus/<target>, never into the repository), then replays
# the crash inputs committed under tests/fuzz/<target>/, if any. Prints one line per target with its executions;
# on a crash, the end of libFuzzer's log and the input's path (build/fuzz/crashes/), and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=$1
shift
status=0
for t in "$@"; do
    bin=build/fuzz/bin/$t log=build/fuzz/logs/$t.log
    mkdir -p "build/fuzz/corpus/$t" build/fuzz/crashes build/fuzz/logs
    if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 -dict=fuzz/fuzz.dict \
        -print_final_stats=1 -artifact_prefix="build/fuzz/crashes/$t-" \
        "build/fuzz/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        printf '%-18s %10s executions in %s s, no crash\n' "$t" "$runs" "$seconds"
    else
        printf '%-18s CRASH (log: %s)\n' "$t" "$log"
        tail -n 40 "$log"
        status=1
    fi
    if [ -d "tests/fuzz/$t" ] && ! "$bin" tests/fuzz/"$t"/* >"$log.replay" 2>&1; then
        printf '%-18s a committed crash input crashes again (log: %s.replay)\n' "$t" "$log"
        status=1
    fi
done
exit $status
