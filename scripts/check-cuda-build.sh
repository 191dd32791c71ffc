#!/usr/bin/env bash
# Compiles Volt's CUDA path here, without a GPU: inside a Debian 13 chroot that has Debian's LibTorch 2.6 built with
# CUDA (contrib: libtorch-cuda-dev) and CUDA itself (non-free: nvidia-cuda-toolkit, nvidia-cuda-dev, libnccl-dev).
#   bash scripts/check-cuda-build.sh              make or check the chroot, then configure and build build-cuda/
#   bash scripts/check-cuda-build.sh --prepare    only make or check the chroot
#   bash scripts/check-cuda-build.sh --fast       compile with -O0 (about twice as fast; a compile and link check)
# Environment: VOLT_CUDA_JOBS (default 2), VOLT_CUDA_TARGETS (default: the library, the CUDA tests and the GPU
# benchmark; "all" for every target). The build keeps going past an error and lists every failing file.
# Run as root. The chroot lives in $VOLT_CUDA_ROOT (default /var/cache/volt-trixie-cuda), beside the plain Debian 13
# one of scripts/test-trixie.sh, and is kept (about 10 GB: CUDA and LibTorch-CUDA). libtorch-cuda depends on
# nvidia-cudnn, an installer that downloads cuDNN from NVIDIA and cannot work offline; compiling needs no cuDNN, so a
# local placeholder package of that name satisfies the dependency (it installs nothing). Linking: LibTorch's CUDA
# library needs libcudnn.so.9, which is not there, so executables link with --allow-shlib-undefined (they cannot
# run here anyway: no GPU). Not part of CI (gigabytes); run it whenever CUDA code changes.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$src"
R=${VOLT_CUDA_ROOT:-/var/cache/volt-trixie-cuda}
R=${R%/}
prepare_only=0
opt_flags="-O3 -DNDEBUG"
for arg in "$@"; do
  case "$arg" in
    --prepare) prepare_only=1 ;;
    --fast) opt_flags="-O0 -DNDEBUG" ;;
    -h|--help) sed -n '2,15s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "volt cuda: unknown argument '$arg' (known: --prepare, --fast)" >&2; exit 2 ;;
  esac
done
say() { echo "volt cuda: $*"; }
die() { echo "volt cuda: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap, chroot, mount)"
[ -n "$R" ] && [ "$R" != / ] || die "VOLT_CUDA_ROOT must name a directory other than /"
case "$R/" in "$src"/*) die "VOLT_CUDA_ROOT ($R) must not lie inside the repository" ;; esac

cuda_packages=(libtorch-cuda-dev nvidia-cuda-toolkit nvidia-cuda-dev libnccl-dev)
# libgloo-cuda-dev (contrib): the Gloo headers c10d's ProcessGroupGloo.hpp includes; libtorch-cuda-dev pulls in only
# the library (libgloo-cuda-0).
build_packages=(libgloo-cuda-dev g++ cmake ninja-build ccache pkgconf libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev
                libbenchmark-dev zlib1g-dev libpng-dev libjpeg62-turbo-dev libcpp-httplib-dev libkainjow-mustache-dev
                node-prismjs)
in_chroot=(/usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "CCACHE_BASEDIR=$src"
           DEBIAN_FRONTEND=noninteractive)

mkdir -p "$(dirname "$R")"
exec 9>"$R.lock"
flock -w 1800 9 || die "another run holds $R.lock"
mounted() { awk -v r="$R" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r; }
unmount_all() {
  local m
  for m in $(mounted); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  [ -z "$(mounted)" ] || { echo "volt cuda: could not unmount: $(mounted | tr '\n' ' ')" >&2; return 1; }
}
cleanup() { local rc=$?; trap - EXIT; unmount_all || rc=1; exit "$rc"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
unmount_all || die "leftover mounts under $R; unmount them by hand"

mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
mirror=${VOLT_CUDA_MIRROR:-${mirror:-http://deb.debian.org/debian}}
if [ ! -e "$R/.ready" ]; then
  command -v debootstrap >/dev/null || die "debootstrap is missing on the host (apt-get install debootstrap)"
  if [ -d "$R" ] && [ -n "$(ls -A "$R")" ] && [ ! -e "$R/debootstrap" ] && [ ! -e "$R/etc/debian_version" ]; then
    die "$R is not empty and does not look like a chroot; set VOLT_CUDA_ROOT to another directory"
  fi
  say "creating a Debian 13 chroot in $R from $mirror (a few minutes)"
  rm -rf --one-file-system "$R"
  debootstrap --variant=minbase --include=ca-certificates trixie "$R" "$mirror"
  touch "$R/.ready"
fi
mkdir -p "$R/proc" "$R$src"
mount -t proc proc "$R/proc"
mount --bind "$src" "$R$src"
echo "deb $mirror trixie main contrib non-free non-free-firmware" >"$R/etc/apt/sources.list"
[ -L "$R/etc/resolv.conf" ] || cp -L /etc/resolv.conf "$R/etc/resolv.conf" 2>/dev/null || true

# The placeholder for nvidia-cudnn (an installer of NVIDIA's cuDNN that needs the internet): an empty package of that
# name and a version above what libtorch-cuda asks for.
if [ "$(chroot "$R" "${in_chroot[@]}" dpkg-query -W -f='${Status}' nvidia-cudnn 2>/dev/null)" != "install ok installed" ]; then
  say "installing the local placeholder for nvidia-cudnn (compiling needs no cuDNN)"
  p=$R/tmp/nvidia-cudnn-placeholder
  rm -rf "$p" && mkdir -p "$p/DEBIAN"
  cat >"$p/DEBIAN/control" <<'CONTROL'
Package: nvidia-cudnn
Version: 9.99.0~volt-placeholder
Architecture: amd64
Maintainer: Volt developers <volt-dev@localhost>
Description: placeholder for NVIDIA's cuDNN installer (Volt's CUDA compile check)
 Installs nothing. It satisfies libtorch-cuda's dependency on nvidia-cudnn, whose installer downloads
 cuDNN from NVIDIA and cannot work without the internet. Compiling against LibTorch needs no cuDNN.
CONTROL
  chroot "$R" "${in_chroot[@]}" sh -c 'dpkg-deb --build /tmp/nvidia-cudnn-placeholder /tmp/nvidia-cudnn.deb >/dev/null &&
    dpkg -i /tmp/nvidia-cudnn.deb >/dev/null'
fi
missing=$(chroot "$R" "${in_chroot[@]}" sh -c '
  for p in "$@"; do
    [ "$(dpkg-query -W -f="\${Status}" "$p" 2>/dev/null)" = "install ok installed" ] || printf "%s " "$p"
  done' sh "${cuda_packages[@]}" "${build_packages[@]}")
if [ -n "$missing" ]; then
  say "installing in the chroot: $missing"
  # shellcheck disable=SC2086  # word splitting of the package list is intended
  chroot "$R" "${in_chroot[@]}" sh -c 'apt-get update -q && apt-get install -y -q --no-install-recommends \
      -o Dpkg::Use-Pty=0 "$@" </dev/null && apt-get clean' sh $missing
fi
say "LibTorch $(chroot "$R" "${in_chroot[@]}" dpkg-query -W -f='${Version}' libtorch-cuda-dev), CUDA $(chroot "$R" "${in_chroot[@]}" dpkg-query -W -f='${Version}' nvidia-cuda-toolkit), NCCL $(chroot "$R" "${in_chroot[@]}" dpkg-query -W -f='${Version}' libnccl-dev)"
[ "$prepare_only" -eq 0 ] || { say "chroot ready (--prepare)"; exit 0; }

# Two jobs at most by default: the machines this runs on are shared (VOLT_CUDA_JOBS to change it).
jobs=${VOLT_CUDA_JOBS:-2}
[ "$(nproc)" -ge "$jobs" ] || jobs=$(nproc)
# Only what the CUDA path needs: the library, the CUDA tests and the GPU benchmarks (VOLT_CUDA_TARGETS to change it;
# "all" builds everything).
targets=${VOLT_CUDA_TARGETS:-volt volt_cuda_tests gpu_lm gpu_cnn}
say "configuring build-cuda/"
mkdir -p "$src/build-cuda"
chroot "$R" "${in_chroot[@]}" sh -c 'cd "$1" && cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DVOLT_BUILD_BENCH=ON "-DCMAKE_CXX_FLAGS_RELEASE=$2" "-DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--allow-shlib-undefined"' sh "$src" "$opt_flags" | tee "$src/build-cuda/volt-configure.log"
grep -q "LibTorch has CUDA" "$src/build-cuda/volt-configure.log" || die "CMake did not find a CUDA LibTorch (see above)"
target_args=()
[ "$targets" = all ] || for t in $targets; do target_args+=(--target "$t"); done
say "building build-cuda/ ($targets) with $jobs jobs"
chroot "$R" "${in_chroot[@]}" sh -c 'cd "$1" && j=$2 && shift 2 && cmake --build build-cuda -j "$j" "$@" -- -k 0' sh "$src" \
    "$jobs" "${target_args[@]}"
say "built against LibTorch with CUDA: $targets (nothing runs here: no GPU)"
