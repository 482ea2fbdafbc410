#!/bin/sh
# Builds build/release/forward_loop (forward_loop.c) against this checkout's objects, then runs it with the
# arguments given (none: builds only). Run from the repository root after `make build/release/run-bench`; to see
# where a verification's time goes, for example:
#     sh tools/forward_profile/run.sh
#     SPECDEC_ISA=avx2 perf record -e cpu-clock -g -o /tmp/t8.data build/release/forward_loop weights/pystd/target 8 1 300
#     perf report -i /tmp/t8.data --no-children --sort symbol --stdio
set -e
objects=$(ls build/release/src/*/*.o build/release/kernels/*.o | grep -v '/src/cli/')
# shellcheck disable=SC2086  # the object list and pkg-config's flags split into words
cc -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -Isrc -Ikernels -o build/release/forward_loop tools/forward_profile/forward_loop.c \
    $objects $(pkg-config --libs jansson libxxhash libutf8proc libpcre2-8 libmicrohttpd libedit) \
    -L/usr/lib/"$(cc -print-multiarch)"/openblas-serial -lopenblas -lpthread -lm
[ $# -eq 0 ] || exec build/release/forward_loop "$@"
