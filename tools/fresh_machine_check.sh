#!/usr/bin/env bash
# Runs the README's two commands on fresh Debian 12 systems, as a newcomer would, and reports what each
# installed and how long it took. Each scenario starts from its own copy of a minimal Debian 12 (debootstrap
# --variant=minbase) with this repository cloned into it:
#
#   root       both commands as root
#   sudo       both commands as a plain user who may use sudo (sudo installed first, which is not counted)
#   nosudo     the first command as a plain user without sudo: it must stop with a clear message
#
# usage (as root, on a Debian or Ubuntu host with network access to the Debian mirror and the npm registry):
#   tools/fresh_machine_check.sh [-w WORKDIR] [-m MIRROR] [SCENARIO...]     (default: all three, in /tmp/fresh)
# Behind a proxy that intercepts TLS, npm must trust the proxy's certificate: the host's own additions to its
# certificate store (/usr/local/share/ca-certificates/*.crt) are copied into each system and given to Node.js
# through NODE_EXTRA_CA_CERTS, as a user behind such a proxy would have to. The minbase system is built once into WORKDIR/base (apt-get install debootstrap); each scenario's copy is
# WORKDIR/<scenario>, its log WORKDIR/<scenario>.log. The repository is cloned from its committed HEAD.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=/tmp/fresh
mirror=http://deb.debian.org/debian
while getopts w:m: opt; do
    case $opt in
        w) work=$OPTARG ;;
        m) mirror=$OPTARG ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
scenarios=("${@:-root sudo nosudo}")
read -r -a scenarios <<< "${scenarios[*]}"
[ "$(id -u)" -eq 0 ] || { echo "fresh_machine_check: run as root (debootstrap and chroot need it)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "fresh_machine_check: apt-get install debootstrap" >&2; exit 2; }

# The README's two commands: the first ```sh block, one command per line.
mapfile -t commands < <(awk '/^```sh/ {inside = 1; next} inside && /^```/ {exit} inside' "$repo/README.md")
[ ${#commands[@]} -eq 2 ] || { echo "fresh_machine_check: expected two commands in README.md's first sh block" >&2; exit 2; }

mkdir -p "$work"
if [ ! -f "$work/base/.complete" ]; then
    rm -rf "$work/base"
    debootstrap --variant=minbase bookworm "$work/base" "$mirror"
    touch "$work/base/.complete"
fi

# Installed size of the Debian packages (dpkg's Installed-Size, MB) in the system at $1.
packages_mb() { chroot "$1" dpkg-query -W -f='${Installed-Size}\n' | awk '{kb += $1} END {printf "%.0f", kb / 1024}'; }

# Runs command $2 in the system $1 as $3 (root or user) in the clone; prints its wall time, the MB of packages
# it added, and its exit status.
run_step() {
    local root=$1 command=$2 who=$3 before after start status
    before=$(packages_mb "$root")
    start=$(date +%s.%N)
    set +e
    local ca=()
    [ ! -s "$root/etc/host-extra-ca.pem" ] || ca=(NODE_EXTRA_CA_CERTS=/etc/host-extra-ca.pem)
    if [ "$who" = root ]; then
        chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb "${ca[@]}" \
            bash -c "cd /root/specdec && $command"
    else
        chroot --userspec=user:user "$root" /usr/bin/env -i HOME=/home/user PATH=/usr/bin:/bin TERM=dumb "${ca[@]}" \
            bash -c "cd /home/user/specdec && $command"
    fi
    status=$?
    set -e
    after=$(packages_mb "$root")
    awk -v c="$command" -v s=$status -v t0="$start" -v t1="$(date +%s.%N)" -v mb=$((after - before)) \
        'BEGIN {printf "%s: exit %d, %.0f s, Debian packages +%d MB\n", c, s, t1 - t0, mb}' >&3
    return $status
}

scenario() {
    local name=$1 root="$work/$1" home
    umount "$root/proc" 2>/dev/null || true
    rm -rf "$root"
    cp -a "$work/base" "$root"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    cat /usr/local/share/ca-certificates/*.crt > "$root/etc/host-extra-ca.pem" 2>/dev/null || true
    mount -t proc proc "$root/proc"
    trap 'umount "'"$root"'/proc" 2>/dev/null || true' RETURN
    echo "== $name: Debian $(chroot "$root" cat /etc/debian_version) minbase, packages $(packages_mb "$root") MB," \
         "specdec $(git -C "$repo" rev-parse --short HEAD)" >&3
    if [ "$name" = root ]; then
        home=/root
    else
        chroot "$root" useradd -m -s /bin/bash user
        home=/home/user
    fi
    if [ "$name" = sudo ]; then
        chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive bash -c \
            "apt-get update -qq && apt-get install -y -qq --no-install-recommends sudo >/dev/null"
        echo "user ALL=(ALL) NOPASSWD: ALL" > "$root/etc/sudoers.d/user"
        chmod 440 "$root/etc/sudoers.d/user"
    fi
    git clone -q "$repo" "$root$home/specdec"
    [ "$name" = root ] || chroot "$root" chown -R user:user "$home/specdec"
    local who=$([ "$name" = root ] && echo root || echo user)
    if [ "$name" = nosudo ]; then
        if run_step "$root" "${commands[0]}" user; then
            echo "FAIL: the first command succeeded without root or sudo" >&3
            return 1
        fi
        grep -q "needs root" "$work/nosudo.log" || { echo "FAIL: no message that root is needed" >&3; return 1; }
        return 0
    fi
    run_step "$root" "${commands[0]}" "$who" || return 1
    run_step "$root" "${commands[1]}" "$who" || return 1
    local npm_mb
    npm_mb=$(du -sm "$root$home/specdec/tests/oracle/node_modules" | cut -f1)
    echo "tests/oracle/node_modules: $npm_mb MB; whole system now $(du -sm -x "$root" | cut -f1) MB" >&3
}

exec 3> >(tee -a "$work/summary.txt")
echo "fresh_machine_check, $(date -u +%FT%TZ)" >&3
failed=0
for s in "${scenarios[@]}"; do
    scenario "$s" > "$work/$s.log" 2>&1 || { echo "FAIL: $s (see $work/$s.log)" >&3; failed=1; }
done
exit $failed
