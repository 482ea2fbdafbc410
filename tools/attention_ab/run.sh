#!/bin/sh
# The grouped-query attention kernel against the one before it (commit 05b131d: one call per query row), in one
# process, on a Llama-3.2-1B-shaped cache: 16 layers, 8 KV heads of 4 query heads, hd 64, 1000 positions; one
# thread, A and B alternating, medians of 21. Run from the repository root after `make`:
#     sh tools/attention_ab/run.sh [T]          (T query tokens per step: 1 decode, 8 a verification)
#     SPECDEC_ISA=avx2 sh tools/attention_ab/run.sh 8
set -e
T=${1:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive 05b131d kernels | tar -x -C "$dir"
flags="-std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I$dir/kernels"
cc $flags -mavx2 -mfma -mf16c -c "$dir/kernels/avx2.c" -o "$dir/avx2.o"
cc $flags -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c -c "$dir/kernels/avx512.c" -o "$dir/avx512.o"
objcopy --redefine-sym kernels_avx2=old_kernels_avx2 "$dir/avx2.o"
objcopy --redefine-sym kernels_avx512=old_kernels_avx512 "$dir/avx512.o"
printf '#include "kernels.h"\n#include <stddef.h>\n#include <stdio.h>\nint main(void) { printf("%%zu", offsetof(Kernels, attention)); }\n' > "$dir/offset.c"
cc -I"$dir/kernels" "$dir/offset.c" -o "$dir/offset"
cc -O2 -DOLD_ATTENTION_OFFSET="$("$dir/offset")" -Ikernels -Isrc -o "$dir/ab" tools/attention_ab/attention_ab.c \
    build/release/kernels/*.o "$dir/avx2.o" "$dir/avx512.o" -lm
"$dir/ab" "$T"
