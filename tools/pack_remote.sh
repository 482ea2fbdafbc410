#!/bin/bash
# pack_remote.sh — the release build and the shipped target, packed to measure on another x86-64 Linux machine
# that has none of the Debian -dev packages (a lent many-core machine, say), in as few bytes as a transfer allows.
#
#   tools/pack_remote.sh DIR [LABEL]     writes DIR/LABEL/{specdec,run-bench} (stripped; LABEL default "build"),
#                                        DIR/lib.tar.xz (the shared libraries they need beyond the C library's) and
#                                        DIR/target.safetensors.xz (the shipped target, the lowest byte of every F32
#                                        mantissa zeroed: 70 MB → about 44 MB; the speed is the same, the tokens may
#                                        differ from the full weights')
#   there:  source DIR/unpack.sh          unpacks the libraries into /tmp, sets LD_LIBRARY_PATH, and writes the
#                                        target's weights back into weights/pystd/target/model.safetensors
#
# Run it again with another LABEL from another build to carry two builds for an A/B (tools/held_out_compare.py
# --specdec A=DIR/a/specdec --specdec B=DIR/b/specdec). The libraries and the target are packed once.
set -euo pipefail
dir=${1:?usage: tools/pack_remote.sh DIR [LABEL]}
label=${2:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/build/release"
# Both built from the checkout as it is now (`make` alone builds only specdec: a stale run-bench once went to a lent
# machine this way), each labelled with its `git describe` (specdec --version; run-bench's commit field).
make -s -C "$root" build/release/specdec build/release/run-bench
mkdir -p "$dir/$label"
cp "$bin/specdec" "$bin/run-bench" "$dir/$label/" && strip "$dir/$label/specdec" "$dir/$label/run-bench"

if [ ! -e "$dir/lib.tar.xz" ]; then
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    mkdir "$tmp/lib"
    ldd "$bin/specdec" "$bin/run-bench" | awk '/=> \//{print $3}' | sort -u |
        grep -Ev '/(libc|libm|libgcc_s|libpthread|libdl|librt|ld-linux[^/]*)\.so' | xargs -I{} cp -L {} "$tmp/lib/"
    strip --strip-unneeded "$tmp/lib/"*
    tar -C "$tmp" -cf - lib | xz -T0 -9 > "$dir/lib.tar.xz"
fi
if [ ! -e "$dir/target.safetensors.xz" ]; then
    /usr/bin/python3 - "$root/weights/pystd/target/model.safetensors" <<'EOF' | xz -T0 -6 > "$dir/target.safetensors.xz"
import json, struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", data[:8])[0]
for name, t in json.loads(data[8 : 8 + n]).items():
    if name != "__metadata__" and t["dtype"] == "F32":
        begin, end = (8 + n + o for o in t["data_offsets"])
        data[begin:end:4] = bytes((end - begin) // 4)  # little-endian: each float's first byte is its lowest
sys.stdout.buffer.write(data)
EOF
fi
cat > "$dir/unpack.sh" <<'EOF'
# source this from the repository's root on the remote machine
here=$(dirname "${BASH_SOURCE[0]}")
mkdir -p /tmp/specdec-remote && tar -xJf "$here/lib.tar.xz" -C /tmp/specdec-remote
export LD_LIBRARY_PATH=/tmp/specdec-remote/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
xz -dc "$here/target.safetensors.xz" > weights/pystd/target/model.safetensors
EOF
du -sh "$dir"
