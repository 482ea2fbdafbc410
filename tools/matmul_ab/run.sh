#!/bin/sh
# One x86 variant's q4 and q8 matmuls (avx512, avx2 or avxvnni) at T activation rows against those of an earlier
# commit, in one process: the earlier commit's files of that variant are compiled from `git archive` with their
# functions renamed, so A and B run alternately in one process and share the machine's drifts. Run from the
# repository root after `make`:
#     sh tools/matmul_ab/run.sh [BASE [ISA [T]]]   (BASE: a commit, default 3e2bee0, the walk before decoding's
#                                                   pairs; ISA: avx512 (default), avx2 or avxvnni; T: 1..16, default 1)
set -e
base=${1:-3e2bee0}
isa=${2:-avx512}
rows=${3:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$base" kernels | tar -x -C "$dir"
case $isa in
avx512) files=avx512 suffix=avx512 isa_flags="-mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c" ;;
avx2 | avxvnni) files=avx2 suffix=$isa isa_flags="-mavx2 -mfma -mf16c" ;;
*) echo "run.sh: ISA is avx512, avx2 or avxvnni, not $isa" >&2; exit 2 ;;
esac
for f in q4 q8; do
    cc -std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I"$dir/kernels" $isa_flags -c "$dir/kernels/${f}_$files.c" \
        -o "$dir/${f}_$files.o"
    # the base's other functions made local, so that they leave this build's alone
    objcopy --redefine-sym ${f}_matmul_$suffix=base_${f}_matmul -G base_${f}_matmul "$dir/${f}_$files.o"
done
cc -std=c11 -D_GNU_SOURCE -O2 -Ikernels -Isrc -o "$dir/ab" tools/matmul_ab/matmul_ab.c build/release/kernels/*.o \
    "$dir/q4_$files.o" "$dir/q8_$files.o" build/release/src/base/threads.o build/release/src/base/clock.o \
    build/release/src/base/error.o build/release/src/base/utf8.o -lm -lpthread
"$dir/ab" "$base" "$isa" "$rows"
