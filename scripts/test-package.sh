#!/usr/bin/env bash
# Builds Volt's Debian packages (cpack -G DEB: volt and libvolt-dev) and installs them in a pristine Debian 12
# chroot with `apt-get install ./*.deb`, as a user would; there it writes a project with `volt new`, builds it with
# only find_package(Volt) and runs it.
#   bash scripts/test-package.sh
# Run as root. The pristine system is a debootstrap of bookworm (minbase), made once and kept as a tar file in
# $VOLT_PRISTINE_BASE (default /var/cache/volt-bookworm-base.tar, ~3 min the first time); every run unpacks a new
# copy of it, so nothing of an earlier run remains, and removes the copy at the end. Downloaded packages are the
# host's apt cache (bind-mounted), so a run downloads each package once.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$src"
base=${VOLT_PRISTINE_BASE:-/var/cache/volt-bookworm-base.tar}
say() { echo "volt package: $*"; }
die() { echo "volt package: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
command -v cpack >/dev/null || die "cpack is missing (Debian: cmake)"
command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is missing (Debian: dpkg-dev): cpack needs it for the dependencies"

# 1. The packages, from a build folder of their own (installed under /usr; no tests, benchmarks or examples).
start=$SECONDS
export CCACHE_BASEDIR=$src
if [ ! -f build-package/build.ninja ]; then
  cmake -S . -B build-package -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
    -DVOLT_BUILD_TESTS=OFF -DVOLT_BUILD_BENCH=OFF -DVOLT_BUILD_EXAMPLES=OFF >/dev/null
fi
say "building build-package/"
cmake --build build-package -j "$(nproc)" | grep -E '^\[[0-9]+/[0-9]+\] Linking|^FAILED|error' || true
[ "${PIPESTATUS[0]}" -eq 0 ] || die "the build of build-package/ failed"
rm -f build-package/*.deb
(cd build-package && cpack -G DEB >cpack.log 2>&1) || { cat build-package/cpack.log; die "cpack failed"; }
mapfile -t debs < <(ls build-package/*.deb)
[ "${#debs[@]}" -eq 2 ] || die "expected 2 packages (volt, libvolt-dev), cpack wrote: ${debs[*]:-none}"
for d in "${debs[@]}"; do
  say "$(basename "$d"): $(stat -c %s "$d") bytes; $(dpkg-deb -f "$d" Package) depends on: $(dpkg-deb -f "$d" Depends)"
done
say "packages built in $((SECONDS - start)) s"

# 2. The pristine system.
exec 9>"$base.lock"
flock -w 1800 9 || die "another run holds $base.lock"
if [ ! -s "$base" ]; then
  mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  mirror=${mirror:-http://deb.debian.org/debian}
  tmp=$(mktemp -d /var/cache/volt-bookworm-base.XXXXXX)
  say "making the pristine Debian 12 system once (debootstrap minbase from $mirror)"
  debootstrap --variant=minbase bookworm "$tmp" "$mirror" >"$tmp.log" 2>&1 || { tail -20 "$tmp.log"; die "debootstrap failed"; }
  tar -C "$tmp" -cf "$base.tmp" . && mv "$base.tmp" "$base"
  rm -rf --one-file-system "$tmp" "$tmp.log"
fi
R=$(mktemp -d /var/cache/volt-pristine.XXXXXX)
cleanup() {
  local rc=$?
  for m in "$R/var/cache/apt/archives" "$R/proc"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  if awk -v r="$R" 'index($2, r) == 1 { found = 1 } END { exit !found }' /proc/self/mounts; then
    echo "volt package: something is still mounted under $R; left in place" >&2
  else
    rm -rf --one-file-system "$R"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
tar -C "$R" -xf "$base"
mount -t proc proc "$R/proc"
mount --bind /var/cache/apt/archives "$R/var/cache/apt/archives"
cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true
mkdir -p "$R/root/debs"
cp "${debs[@]}" "$R/root/debs/"
in_chroot=(chroot "$R" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
           DEBIAN_FRONTEND=noninteractive)

# 3. As a user: install the packages (apt resolves Debian's LibTorch and the rest), then volt new, build, run.
say "installing the packages in a fresh copy of the pristine system ($R)"
"${in_chroot[@]}" sh -c 'apt-get update -qq && cd /root/debs && apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Use-Pty=0 ./volt_*.deb ./libvolt-dev_*.deb g++ cmake ninja-build </dev/null >/root/apt.log 2>&1' ||
  { tail -30 "$R/root/apt.log"; die "apt-get install ./*.deb failed in the pristine system"; }
say "installed: $("${in_chroot[@]}" dpkg-query -W -f='${Package} ${Version}, ' volt libvolt-dev libtorch-dev)"
"${in_chroot[@]}" sh -ec '
  cd /root
  command -v volt
  volt new pkg_app --template minimal --output /root/pkg_app >/dev/null
  cd /root/pkg_app
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >build.log 2>&1 || { cat build.log; exit 1; }
  cmake --build build >>build.log 2>&1 || { cat build.log; exit 1; }
  ./build/pkg_app --config config.yaml --trainer.max_epochs 1 --trainer.limit_train_batches 5 \
    --trainer.limit_val_batches 2 --trainer.limit_test_batches 2 2>&1 | tail -5
  ls lightning_logs/version_0/metrics.csv
  volt plan --devices 1 >/dev/null && echo "volt plan: ok"
' || die "the project did not build or run against the installed packages"
say "passed in $((SECONDS - start)) s: the packages install in a pristine Debian 12, and a volt new project builds with find_package(Volt) and trains"
