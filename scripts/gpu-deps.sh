#!/usr/bin/env bash
# Assembles the libraries a GPU machine lacks for Volt's GPU build (scripts/gpu-check.sh) into ONE folder, from the
# Debian packages installed here: yaml-cpp, nlohmann-json, GoogleTest (and GoogleMock, which GTest's CMake package
# names), libpng, libjpeg-turbo and zlib -- headers, libraries and the packages' CMake files, laid out as under /usr
# so that CMAKE_PREFIX_PATH=<folder> finds them. Shared libraries travel as .so (Debian's static archives are not
# position-independent, and libvolt.so is shared); GoogleTest as its static archives (linked into executables only).
#   bash scripts/gpu-deps.sh [FOLDER]      default: .gpu-deps in the repository (ignored by git)
# Written to FOLDER.tmp, then renamed: a run that fails leaves the previous folder as it was. Refuses a result over
# 64 MiB (what travels to the device machine with the tree). Prints the size.
set -euo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
out=${1:-$src/.gpu-deps}
case "$out" in -h|--help) sed -n '2,9s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
say() { echo "volt gpu-deps: $*"; }
die() { echo "volt gpu-deps: $*" >&2; exit 1; }
[ -n "$out" ] && [ "$out" != / ] || die "the folder must not be / or empty"
arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
packages=(libyaml-cpp-dev nlohmann-json3-dev libgtest-dev libgmock-dev libpng-dev libjpeg62-turbo-dev zlib1g-dev)
missing=()
for p in "${packages[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
[ "${#missing[@]}" -eq 0 ] || die "missing Debian packages: ${missing[*]} (apt-get install -y ${missing[*]})"

L=lib/$arch
# Paths relative to /usr: folders copied whole, files copied with links resolved.
dirs=(include/yaml-cpp include/nlohmann include/gtest include/gmock include/libpng16
      "$L/cmake/yaml-cpp" "$L/cmake/GTest" share/cmake/nlohmann_json)
files=(include/png.h include/pngconf.h include/pnglibconf.h include/jpeglib.h include/jerror.h include/jmorecfg.h
       "include/$arch/jconfig.h" include/zlib.h include/zconf.h
       "$L/libgtest.a" "$L/libgtest_main.a" "$L/libgmock.a" "$L/libgmock_main.a")
# Shared libraries: the development link (lib<name>.so), its soname and the real file, as relative links.
shared=(libyaml-cpp.so libpng16.so libjpeg.so libz.so)

tmp=$out.tmp
rm -rf "$tmp"
mkdir -p "$tmp"
for d in "${dirs[@]}"; do
  [ -d "/usr/$d" ] || die "/usr/$d is missing (a package above is incomplete)"
  mkdir -p "$tmp/$(dirname "$d")"
  cp -rL "/usr/$d" "$tmp/$d"
done
for f in "${files[@]}"; do
  [ -e "/usr/$f" ] || die "/usr/$f is missing (a package above is incomplete)"
  mkdir -p "$tmp/$(dirname "$f")"
  cp -L "/usr/$f" "$tmp/$f"
done
for lib in "${shared[@]}"; do
  dev=/usr/$L/$lib
  [ -e "$dev" ] || die "$dev is missing"
  real=$(readlink -f "$dev")
  soname=$(objdump -p "$real" | awk '$1 == "SONAME" { print $2 }')
  [ -n "$soname" ] || die "$real has no SONAME"
  cp "$real" "$tmp/$L/$(basename "$real")"
  [ "$soname" = "$(basename "$real")" ] || ln -sfn "$(basename "$real")" "$tmp/$L/$soname"
  ln -sfn "$soname" "$tmp/$L/$lib"
done
{
  echo "# What scripts/gpu-deps.sh copied, from these Debian packages:"
  for p in "${packages[@]}"; do dpkg-query -W -f='${Package} ${Version}\n' "$p"; done
  echo "multiarch $arch"
} >"$tmp/SOURCES"

kib=$(du -sk "$tmp" | cut -f1)
[ "$kib" -le $((64 * 1024)) ] || die "the folder would be $((kib / 1024)) MiB, over the 64 MiB that travel with the tree"
rm -rf "$out.old"
[ ! -e "$out" ] || mv "$out" "$out.old"
mv "$tmp" "$out"
rm -rf "$out.old"
say "wrote $out: $(awk -v k="$kib" 'BEGIN { printf "%.1f MiB", k / 1024 }') (${packages[*]})"
