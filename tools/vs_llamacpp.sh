#!/usr/bin/env bash
# vs_llamacpp.sh — specdec side by side with llama.cpp on the same model: decode tokens/s and an 8-token forward's
# tokens/s at each thread count, the two programs alternating round by round, and specdec / llama.cpp within rounds.
#
#   tools/vs_llamacpp.sh LLAMA_BUILD GGUF CKPT QUANT [THREADS [ROUNDS]]
#
#   LLAMA_BUILD  a llama.cpp build folder holding bin/llama-bench (../shared/peers/llamacpp/build.sh makes one)
#   GGUF         the model as llama.cpp reads it (e.g. quantized by llama-quantize to Q4_0, Q4_K_M or Q8_0)
#   CKPT         the same model as a specdec checkpoint folder (config.json and safetensors), or "same": specdec
#                reads the GGUF file itself (its quantized blocks held as QUANT says, q8 or q4; with none, every
#                block type as stored, docs/checkpoints.md)
#   QUANT        specdec's --quant: q4, q8, bf16, or none (the weights as stored)
#   THREADS      thread counts, comma-separated (default 1,2); ROUNDS: how many rounds (default 3)
#   REPS=N       (environment) repetitions of each test within one program's turn (default 3)
#   SPECDEC_ISA  (environment) specdec's kernel variant, passed through to run-bench: scalar, avx2, avxvnni or avx512
#                (default: the best this CPU runs). On an AVX-512 machine, SPECDEC_ISA=avx2 against a llama.cpp built
#                for AVX2 only (cmake -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON, every AVX-512,
#                AVX-VNNI and AMX option OFF) has both sides run one instruction set. The table's title names both:
#                specdec's variant as run-bench reports it, llama.cpp's as LLAMA_BUILD/CMakeCache.txt records its
#                GGML_ options; a line starting "warning:" follows where the two differ
#   LLAMA_ARGS   (environment) more llama-bench options, split at spaces (e.g. "--prio 2"; "-mmp 0" reads the
#                weights into memory, as specdec does, instead of mapping the file: on a machine whose kernel reclaims
#                mapped file pages as it runs — a kdamond thread — mapped weights were read again from disk, and
#                llama.cpp decoded at 1.6–13 tokens/s where it gave 25 with -mmp 0: docs/performance-history.md)
#
# What is compared (tokens/s, higher is better):
#   decode: llama-bench's tg64 (64 tokens generated one at a time from an empty context, their mean rate) against
#           run-bench's threads suite's T = 1 forward after 64 cached positions;
#   T = 8:  llama-bench's pp8 (an 8-token prompt, logits of its last position only) against the suite's T = 8
#           forward (logits of all eight positions, as a verification forward needs): a generous proxy for llama.cpp.
#           The suite prints that forward's cost over T = 1's; its tokens/s here is 8 × (T = 1 tokens/s) / (t(8) /
#           t(1)), from the two medians of the turn's repetitions.
# Each round runs run-bench and llama-bench one after the other, in an order that alternates between rounds (run-bench
# first in round 1, so that a mistake in its arguments stops the run at once), so a machine whose speed drifts slows
# both alike. Before and after each turn, tools/placement_probe.c (compiled here with cc) times a cache line's round
# trip between CPUs 0 and 1: where a VM's host runs its two vCPUs sometimes in one core complex and sometimes in two,
# the two-thread figures differ between the two, and a round whose four probes agree is "near" or "far" (else
# "mixed"). The table (tools/vs_llamacpp_table.py) lists each round with its probes, placement and decode ratios, then
# per placement the ratios within rounds, median [min–max] over that placement's rounds, with the load average
# (/proc/loadavg, 1 minute) read before each turn, and per placement and thread count whether decode's median ratio
# reaches its goal: issue 55's 1.1, or issue 49's 1.2 where specdec ran its AVX2 kernels (SPECDEC_ISA=avx2 or
# avxvnni). It makes build/release/run-bench first, so that run-bench measures this tree's sources as they are. Never
# run by the tests; needs only llama-bench's binary, not llama.cpp's sources.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ME=vs_llamacpp.sh

escaped() {  # a name as an error line shows it: control characters written as $'\n' and the like
    if [[ $1 == *[[:cntrl:]]* ]]; then printf '%q' "$1"; else printf '%s' "$1"; fi
}
fail() {  # one line naming what is wrong, exit 2
    printf '%s: %s\n' "$ME" "$1" >&2
    exit 2
}

{ [ $# -ge 4 ] && [ $# -le 6 ]; } || fail "usage: tools/vs_llamacpp.sh LLAMA_BUILD GGUF CKPT QUANT [THREADS [ROUNDS]]"
BUILD=$1 GGUF=$2 CKPT=$3 QUANT=$4 THREADS=${5:-1,2} ROUNDS=${6:-3} REPS=${REPS:-3}
[ "$CKPT" = same ] && CKPT=$GGUF
LLAMA_BENCH=$BUILD/bin/llama-bench RUN_BENCH=$ROOT/build/release/run-bench

[ -d "$BUILD" ] || fail "LLAMA_BUILD: no folder $(escaped "$BUILD")"
[ -x "$LLAMA_BENCH" ] || fail "LLAMA_BUILD: $(escaped "$LLAMA_BENCH") is missing or not executable"
[ -f "$GGUF" ] || fail "GGUF: no file $(escaped "$GGUF")"
[ "$(head -c 4 "$GGUF" 2>/dev/null)" = GGUF ] || fail "GGUF: $(escaped "$GGUF") does not start with the magic GGUF"
if [ "$CKPT" != "$GGUF" ]; then
    [ -d "$CKPT" ] || fail "CKPT: no folder $(escaped "$CKPT")"
    [ -f "$CKPT/config.json" ] || fail "CKPT: $(escaped "$CKPT") holds no config.json (not a checkpoint folder)"
fi
case $QUANT in
    q4 | q8 | bf16 | none) ;;
    *) fail "QUANT: expected q4, q8, bf16 or none, got \"$(escaped "$QUANT")\"" ;;
esac
[[ $THREADS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    fail "THREADS: expected counts separated by commas (1,2), got \"$(escaped "$THREADS")\""
[[ $ROUNDS =~ ^[1-9][0-9]?$ ]] || fail "ROUNDS: expected an integer in [1, 99], got \"$(escaped "$ROUNDS")\""
[[ $REPS =~ ^[1-9][0-9]?$ ]] || fail "REPS: expected an integer in [1, 99], got \"$(escaped "$REPS")\""

WORK=$(mktemp -d) || fail "mktemp -d failed"
trap 'rm -rf "$WORK"' EXIT
# run-bench as this tree's sources make it now: the default `make` builds only specdec, and a run-bench linked before
# the last change to the kernels would measure the code as it was then.
make -s -C "$ROOT" build/release/run-bench >"$WORK/make.log" 2>&1 ||
    fail "make build/release/run-bench failed: $(grep -v '^$' "$WORK/make.log" | tail -n 1)"
QUANT_ARGS=()
[ "$QUANT" = none ] || QUANT_ARGS=(--quant "$QUANT")

loadavg() { cut -d' ' -f1 /proc/loadavg; }

PROBE=
if [ "$(nproc)" -ge 2 ]; then
    PROBE=$WORK/placement_probe
    cc -std=c11 -O2 -pthread -o "$PROBE" "$ROOT/tools/placement_probe.c" 2>"$WORK/probe.err" ||
        fail "cannot compile tools/placement_probe.c: $(head -n 1 "$WORK/probe.err")"
fi
probe() {  # append the CPUs' round trip (ns) to file $1; nothing with one CPU
    [ -z "$PROBE" ] && { : >>"$1"; return; }
    "$PROBE" 2>"$WORK/probe.err" | sed -n 's/^round_trip_ns //p' >>"$1"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "placement_probe failed: $(head -n 1 "$WORK/probe.err")"
}

llama_isa() {  # the instruction sets llama.cpp was built for, from its GGML_ options in LLAMA_BUILD/CMakeCache.txt
    local cache=$BUILD/CMakeCache.txt
    if [ ! -f "$cache" ]; then echo "unknown"
    elif grep -q '^GGML_NATIVE:BOOL=ON$' "$cache"; then echo "native"
    else sed -n 's/^GGML_\(AVX[A-Z0-9_]*\|AMX_[A-Z0-9]*\|FMA\|F16C\):BOOL=ON$/\1/p' "$cache" | sort | paste -sd' '
    fi
}

run_llama() {  # round $1: llama-bench's pp8 and tg64 at every thread count, as JSON
    echo "round $1: llama-bench (load average $(loadavg))" >&2
    loadavg >"$WORK/llama-$1.load"
    probe "$WORK/llama-$1.placement"
    # shellcheck disable=SC2086 # LLAMA_ARGS is split at spaces on purpose
    "$LLAMA_BENCH" -m "$GGUF" -p 8 -n 64 -t "$THREADS" -r "$REPS" ${LLAMA_ARGS:-} -o json >"$WORK/llama-$1.json" \
        2>"$WORK/llama-$1.err" || fail "llama-bench failed on $(escaped "$GGUF"): $(tail -n 1 "$WORK/llama-$1.err")"
    probe "$WORK/llama-$1.placement"
}

run_specdec() {  # round $1: run-bench's threads suite at every thread count, as JSON
    echo "round $1: specdec run-bench (load average $(loadavg))" >&2
    loadavg >"$WORK/specdec-$1.load"
    probe "$WORK/specdec-$1.placement"
    "$RUN_BENCH" -m "$CKPT" "${QUANT_ARGS[@]}" -s threads --threads-sweep "$THREADS" --reps "$REPS" --no-plots \
        --out "$WORK/specdec-$1" >"$WORK/specdec-$1.log" 2>&1 ||
        fail "run-bench failed on $(escaped "$CKPT"): $(grep -v '^$' "$WORK/specdec-$1.log" | tail -n 1)"
    probe "$WORK/specdec-$1.placement"
}

for ((r = 1; r <= ROUNDS; r++)); do
    if ((r % 2)); then run_specdec "$r" && run_llama "$r"; else run_llama "$r" && run_specdec "$r"; fi
done

# The table: per round its placement, then per placement, thread count and test each program's tokens/s and the
# ratio within rounds, median [min–max].
/usr/bin/python3 "$ROOT/tools/vs_llamacpp_table.py" "$WORK" "$ROUNDS" "$GGUF" "$CKPT" "$QUANT" "$(llama_isa)"
