#!/usr/bin/env bash
# Quick compile-and-run of a few sources without the full CMake build, for work on one
# part of the tree while others change:  scripts/dev-check.sh OUT src/a.cpp tests/x/a_test.cpp ...
# Links GoogleTest's main; pass -- ARGS after the sources to give the test binary arguments.
set -euo pipefail
out=$1; shift
srcs=(); args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; args=("$@"); break; fi
  srcs+=("$1"); shift
done
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/build-dev/gen/volt/core"
[ -f "$root/build-dev/gen/volt/core/version.h" ] || sed -e 's/@PROJECT_VERSION_MAJOR@/0/;s/@PROJECT_VERSION_MINOR@/1/;s/@PROJECT_VERSION_PATCH@/0/;s/@PROJECT_VERSION@/0.1.0/' \
  "$root/cmake/version.h.in" > "$root/build-dev/gen/volt/core/version.h"
objs=()
for s in "${srcs[@]}"; do
  o="$root/build-dev/obj/$(echo "$s" | tr '/' '_').o"
  mkdir -p "$(dirname "$o")"
  ccache g++ -std=c++17 -O1 -Wall -Wextra -D_GLIBCXX_USE_CXX11_ABI=1 -I"$root/include" -I"$root/src" -I"$root/tests" \
    -I"$root/build-dev/gen" -isystem /usr/include/torch/csrc/api/include -c "$s" -o "$o"
  objs+=("$o")
done
g++ "${objs[@]}" -o "$out" -ltorch -ltorch_cpu -lc10 -lyaml-cpp -lz -lgtest -lgtest_main -pthread
"$out" "${args[@]}"
