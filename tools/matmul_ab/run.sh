#!/bin/sh
# The AVX-512 q4 and q8 decode matmuls (T = 1) against those of an earlier commit, in one process: the earlier
# commit's q4_avx512.c and q8_avx512.c are compiled from `git archive` with their functions renamed, so A and B run
# alternately in one process and share the machine's drifts. Run from the repository root after `make`:
#     sh tools/matmul_ab/run.sh [BASE]            (BASE: a commit, default 3e2bee0, the walk before decoding's pairs)
set -e
base=${1:-3e2bee0}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$base" kernels | tar -x -C "$dir"
flags="-std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I$dir/kernels -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c"
for f in q4 q8; do
    cc $flags -c "$dir/kernels/${f}_avx512.c" -o "$dir/${f}_avx512.o"
    objcopy --redefine-sym ${f}_matmul_avx512=base_${f}_matmul_avx512 \
        --redefine-sym q8_quantize_rows_avx512=base_q8_quantize_rows_avx512 "$dir/${f}_avx512.o"
done
cc -std=c11 -D_GNU_SOURCE -O2 -Ikernels -Isrc -o "$dir/ab" tools/matmul_ab/matmul_ab.c build/release/kernels/*.o \
    "$dir/q4_avx512.o" "$dir/q8_avx512.o" build/release/src/base/threads.o build/release/src/base/clock.o \
    build/release/src/base/error.o build/release/src/base/utf8.o -lm -lpthread
"$dir/ab" "$base"
