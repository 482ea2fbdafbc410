#!/bin/sh
# One x86 variant's q4 and q8 matmuls (avx512, avx2 or avxvnni), or its Q4_K, Q5_K and Q6_K ones, at T activation rows
# against those of an earlier commit, in one process: the earlier commit's files of that variant are compiled from
# `git archive` with their functions renamed, so A and B run alternately in one process and share the machine's
# drifts. Run from the repository root after `make`:
#     sh tools/matmul_ab/run.sh [BASE [ISA [T [FORMATS [OPTIONS]]]]]
#   BASE: a commit, default 3e2bee0, the walk before decoding's pairs; ISA: avx512 (default), avx2 or avxvnni (its
#   K-quants are AVX2's); T: 1..16, default 1; FORMATS: some of q4,q8,q4_k,q5_k,q6_k, comma-separated, default
#   q4,q8 (q4_k, q5_k and q6_k need a BASE with kernels/qk_*.c). OPTIONS (default: the three workloads, 15 rounds
#   each, on 1 thread and on 2):
#     --workload l2|memory|layers  one workload alone: [1024, 1024] in the L2 (in 301 short rounds), [32768, 4096]
#                                  from memory, or 16 Llama-3.2-1B layers; `l2` alone is `--workload l2`
#     --rounds N                   N rounds of A and B (1..1001)
#     --threads N                  N threads only (1..64)
#     --chunks N                   each thread's share in N chunks (1..64), evens first: two threads' cold starts
#   e.g. sh tools/matmul_ab/run.sh main avxvnni 1 q4 --workload layers --rounds 31 --threads 1
set -e
base=${1:-3e2bee0}
isa=${2:-avx512}
rows=${3:-1}
formats=${4:-q4,q8}
if [ $# -gt 4 ]; then shift 4; else set --; fi  # the OPTIONS, passed on to matmul_ab
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$base" kernels | tar -x -C "$dir"
case $isa in
avx512) files=avx512 suffix=avx512 isa_flags="-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c" ;;
avx2 | avxvnni) files=avx2 suffix=$isa isa_flags="-mavx2 -mfma -mf16c" ;;
*) echo "run.sh: ISA is avx512, avx2 or avxvnni, not $isa" >&2; exit 2 ;;
esac
base_objects=
compile_base() {  # compile_base FILE FUNCTION NAME: the base's FILE.c with FUNCTION renamed base_NAME
    [ -f "$dir/$1.o" ] || cc -std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I"$dir/kernels" $isa_flags -c "$dir/kernels/$1.c" \
        -o "$dir/$1.o"
    # the base's other functions made local, so that they leave this build's alone
    objcopy --redefine-sym "$2=base_$3" -G "base_$3" "$dir/$1.o" "$dir/$3.o"
    base_objects="$base_objects $dir/$3.o"
}
for f in $(echo "$formats" | tr , ' '); do
    case $f in
    q4 | q8) compile_base "${f}_$files" "${f}_matmul_$suffix" "${f}_matmul" ;;
    q4_k | q5_k | q6_k) compile_base "qk_$files" "${f}_matmul_$files" "${f}_matmul" ;;
    *) echo "run.sh: FORMATS are some of q4,q8,q4_k,q5_k,q6_k, not $f" >&2; exit 2 ;;
    esac
done
cc -std=c11 -D_GNU_SOURCE -O2 -Ikernels -Isrc -o "$dir/ab" tools/matmul_ab/matmul_ab.c build/release/kernels/*.o \
    $base_objects build/release/src/base/threads.o build/release/src/base/poll_budget.o build/release/src/base/clock.o \
    build/release/src/base/error.o build/release/src/base/utf8.o -lm -lpthread
"$dir/ab" "$base" "$isa" "$rows" "$formats" "$@"
