#!/bin/sh
# The AVX2 (or AVX-512) F32, F16 and BF16 matmuls against those of an earlier commit (default 00bd798, before the
# canonical order of issue 54), in one process, one thread, A and B alternating: the earlier commit's avx2.c and
# avx512.c are compiled from `git archive` with their kernel tables renamed, and its matmuls found in the table by
# the earlier Kernels' layout. Run from the repository root after `make`:
#     sh tools/float_ab/run.sh [BASE [ROUNDS [FILTER [ISA]]]]
# FILTER: only the workloads whose label holds it; ISA: avx2 (the default) or avx512.
set -e
base=${1:-00bd798}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git archive "$base" kernels | tar -x -C "$dir"
cc -std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I"$dir/kernels" -mavx2 -mfma -mf16c -c "$dir/kernels/avx2.c" -o "$dir/avx2.o"
objcopy --redefine-sym kernels_avx2=base_kernels_avx2 "$dir/avx2.o"
cc -std=c11 -D_GNU_SOURCE -O3 -DNDEBUG -I"$dir/kernels" -mavx512f -mavx512bw -mavx512dq -mavx512vl -mfma -mf16c \
    -c "$dir/kernels/avx512.c" -o "$dir/avx512.o"
objcopy --redefine-sym kernels_avx512=base_kernels_avx512 "$dir/avx512.o"
printf '#include "kernels.h"\n#include <stddef.h>\n#include <stdio.h>\nint main(void) { printf("%%zu", offsetof(Kernels, matmul)); }\n' > "$dir/offset.c"
cc -I"$dir/kernels" "$dir/offset.c" -o "$dir/offset"
cc -std=c11 -D_GNU_SOURCE -O2 -DBASE_MATMUL_OFFSET="$("$dir/offset")" -Ikernels -Isrc -o "$dir/ab" \
    tools/float_ab/float_ab.c build/release/kernels/*.o "$dir/avx2.o" "$dir/avx512.o" -lm
"$dir/ab" "$base" "${2:-11}" "${3:-}" "${4:-avx2}"
