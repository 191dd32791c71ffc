#!/usr/bin/env bash
# Builds Volt and runs its tests against LibTorch 2.6, inside a Debian 13 (trixie) chroot.
#   bash scripts/test-trixie.sh            all tests
#   bash scripts/test-trixie.sh -L unit    extra arguments go to ctest
#   bash scripts/test-trixie.sh --prepare  only make the chroot and install its packages (.ci/run does this in
#                                          the background while the Debian 12 part builds: mostly downloads)
# Run as root. The chroot lives in $VOLT_TRIXIE_ROOT (default /var/cache/volt-trixie) and
# is reused: made once with debootstrap (~2.5 min, 1.3 GB), then only checked. The repo is
# bind-mounted at its own absolute path; the build goes to build-torch26/ (its binaries
# run only inside the chroot: glibc 2.41).
set -euo pipefail

# The logical path (a link stays a link): .ci/run works through a fixed link so that ccache keys match.
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$src"

prepare=0
if [ "${1:-}" = --prepare ]; then
  prepare=1
  shift
  [ $# -eq 0 ] || { echo "volt trixie: --prepare takes no ctest arguments (got: $*)" >&2; exit 2; }
fi

R=${VOLT_TRIXIE_ROOT:-/var/cache/volt-trixie}
R=${R%/}
packages=(libtorch-dev libgloo-dev g++ cmake make ninja-build libyaml-cpp-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev ccache dataset-fashion-mnist
          libcpp-httplib-dev pkgconf libkainjow-mustache-dev python3 node-prismjs python3-torch
          python3-pil python3-torchvision
          libsentencepiece-dev python3-sentencepiece sentencepiece python3-pandas bible-kjv bible-kjv-text
          python3-numpy python3-yaml python3-tqdm python3-fsspec python3-packaging python3-typing-extensions xz-utils)
in_chroot=(/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "CCACHE_BASEDIR=$src"
           DEBIAN_FRONTEND=noninteractive)

say() { echo "volt trixie: $*"; }
die() { echo "volt trixie: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
[ -n "$R" ] && [ "$R" != / ] || die "VOLT_TRIXIE_ROOT must name a directory other than /"
case "$R/" in "$src"/*) die "VOLT_TRIXIE_ROOT ($R) must not lie inside the repository" ;; esac

# One run at a time per chroot: a second run would mount over, and unmount under, the first.
mkdir -p "$(dirname "$R")"
exec 9>"$R.lock"
if ! flock -n 9; then
  say "waiting for another run on $R to finish (lock $R.lock)"
  flock -w 1800 9 || die "another run still holds $R.lock after 30 minutes"
fi

# Every mount point at or below $R, deepest first (/proc/self/mounts escapes spaces as \040).
mounts_below() {
  awk -v r="$R" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}

# Unmounts everything below $R: ours, and leftovers of an interrupted run or debootstrap.
unmount_all() {
  local m tries=0
  while [ -n "$(mounts_below)" ] && [ "$tries" -lt 5 ]; do
    for m in $(mounts_below); do
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
    tries=$((tries + 1))
  done
  if [ -n "$(mounts_below)" ]; then
    echo "volt trixie: could not unmount: $(mounts_below | tr '\n' ' ')" >&2
    return 1
  fi
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  unmount_all || rc=1
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -n "$(mounts_below)" ]; then
  say "unmounting leftovers of an earlier run: $(mounts_below | tr '\n' ' ')"
  unmount_all || die "leftover mounts under $R; unmount them by hand"
fi

# A chroot is usable when debootstrap finished (.ready), or when it already holds
# LibTorch (made by hand, or by the recipe in NOTES-libtorch.md, which skips .ready).
if [ ! -e "$R/.ready" ] && [ -d "$R/usr/include/torch" ] && [ -x "$R/usr/bin/apt-get" ]; then
  touch "$R/.ready"
fi
if [ ! -e "$R/.ready" ]; then
  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap on the host"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 debootstrap </dev/null ||
      { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=300 debootstrap </dev/null; }
  fi
  mirror=${VOLT_TRIXIE_MIRROR:-}
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list.d/debian.sources ]; then
    mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
  fi
  if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
    mirror=$(awk '$1 == "deb" && $2 !~ /^\[/ { print $2; exit }' /etc/apt/sources.list)
  fi
  mirror=${mirror:-http://deb.debian.org/debian}
  if [ -d "$R" ] && [ -n "$(ls -A "$R")" ] && [ ! -e "$R/debootstrap" ] && [ ! -e "$R/etc/debian_version" ]; then
    die "$R is not empty and does not look like a chroot; set VOLT_TRIXIE_ROOT to another directory"
  fi
  say "creating a Debian 13 chroot in $R from $mirror (a few minutes)"
  # Start over from a half-made one. unmount_all above made sure nothing (the repo least
  # of all) is mounted below $R.
  rm -rf --one-file-system "$R"
  debootstrap --variant=minbase --include=ca-certificates trixie "$R" "$mirror"
  touch "$R/.ready"
fi

mkdir -p "$R/proc" "$R$src"
mount -t proc proc "$R/proc"
mount --bind "$src" "$R$src"
# Lightning 2.2.5 (../shared/oracle beside the checkout, tests/support/oracle.h) for the tests that compare
# with it: bound read-only at its own path, as the repository is; unmounted with everything else on exit.
# When $src is a link (.ci/run's fixed path), the oracle is beside the tree it points to here, and
# beside $src itself in the chroot (where $src is a plain folder).
oracle=$(cd -P "$src/.." && pwd)/shared/oracle
oracle_in=$(dirname "$src")/shared/oracle
if [ -f "$oracle/setup.sh" ]; then
  mkdir -p "$R$oracle_in"
  mount --bind "$oracle" "$R$oracle_in"
  mount -o remount,bind,ro "$R$oracle_in" 2>/dev/null || true
  say "oracle $oracle bound into the chroot at $oracle_in"
fi

missing=$(chroot "$R" "${in_chroot[@]}" sh -c '
  for p in "$@"; do
    [ "$(dpkg-query -W -f="\${Status}" "$p" 2>/dev/null)" = "install ok installed" ] || printf "%s " "$p"
  done' sh "${packages[@]}")
if [ -n "$missing" ]; then
  say "installing in the chroot: $missing"
  [ -L "$R/etc/resolv.conf" ] || cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  chroot "$R" "${in_chroot[@]}" sh -c 'apt-get update -q && apt-get install -y -q --no-install-recommends \
      -o Dpkg::Use-Pty=0 "$@" </dev/null && apt-get clean' sh $missing
else
  say "chroot $R has all ${#packages[@]} packages"
fi
say "LibTorch $(chroot "$R" "${in_chroot[@]}" dpkg-query -W -f='${Version}' libtorch-dev), $(chroot "$R" "${in_chroot[@]}" g++ --version | head -n 1)"
if [ "$prepare" -eq 1 ]; then
  say "chroot $R is ready (--prepare: nothing built)"
  exit 0
fi

jobs=$(nproc)
say "configuring build-torch26/"
chroot "$R" "${in_chroot[@]}" sh -c 'cd "$1" &&
    cmake -S . -B build-torch26 -G Ninja -DCMAKE_BUILD_TYPE=Release -DVOLT_BUILD_BENCH=ON' sh "$src"
say "building build-torch26/ with $jobs jobs"
build_start=$SECONDS
chroot "$R" "${in_chroot[@]}" sh -c 'cd "$1" && cmake --build build-torch26 -j "$2"' sh "$src" "$jobs"
say "build-torch26/ built in $((SECONDS - build_start)) s"
say "running ctest${*:+ $*} (without labels e2e, pristine and gpu-dry: the browser test of volt ui, the package test and the GPU script's dry run run on the host)"
status=0
chroot "$R" "${in_chroot[@]}" sh -c 'cd "$1" && shift && ctest --test-dir build-torch26 --output-on-failure \
    --no-tests=error -j 2 -LE "e2e|pristine|gpu-dry" "$@"' sh "$src" "$@" || status=$?
if [ "$status" -ne 0 ]; then
  say "FAILED: tests against LibTorch 2.6 (ctest exit $status)"
  exit 1
fi
say "all tests passed against LibTorch 2.6"
