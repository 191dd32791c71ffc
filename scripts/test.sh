#!/usr/bin/env bash
# Sets Volt up (scripts/setup.sh), runs every test with ctest, then checks that an outside
# project can use the installed library: cmake --install into a temporary prefix, then
# configure, build and run tests/consumer against it with find_package(Volt).
# Extra arguments go to ctest:   bash scripts/test.sh -L unit
# VOLT_TEST_PRISTINE=1 also runs the package test in a pristine chroot (label pristine).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if ! bash scripts/setup.sh; then
  echo "volt test: FAILED (set-up or build, see above)"
  exit 1
fi

failed=()

# The pristine-chroot package test (label pristine, scripts/test-package.sh: a debootstrap copy and LibTorch
# installed into it, several minutes) runs when asked: VOLT_TEST_PRISTINE=1.
exclude=()
[ "${VOLT_TEST_PRISTINE:-0}" = 1 ] || exclude+=(pristine)
# The GPU machine's script dry-run on the CPU (label gpu-dry, scripts/gpu-check.sh --cpu-dry-run: a build of its own,
# about half an hour cold on 2 cores) runs when asked: VOLT_TEST_GPU_DRY=1.
[ "${VOLT_TEST_GPU_DRY:-0}" = 1 ] || exclude+=(gpu-dry)
skip=()
[ "${#exclude[@]}" -eq 0 ] || skip=(-LE "$(IFS='|'; echo "${exclude[*]}")")
echo "volt test: running ctest${skip[*]:+ ${skip[*]}}${*:+ $*}"
ctest_start=$SECONDS
if ! ctest --test-dir build --output-on-failure --no-tests=error -j 2 "${skip[@]}" "$@"; then
  failed+=("ctest")
fi
echo "volt test: ctest took $((SECONDS - ctest_start)) s"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

consumer_check() {
  echo "volt test: installing into $tmp/prefix"
  cmake --install build --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; return 1; }
  echo "volt test: building tests/consumer with find_package(Volt)"
  cmake -S tests/consumer -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" || return 1
  cmake --build "$tmp/build" || return 1
  echo "volt test: running the consumer"
  "$tmp/build/consumer" || return 1
}

if ! consumer_check; then
  failed+=("outside-project check (tests/consumer)")
elif [ -x build/tools/generator/volt-new ]; then
  # volt new: every template rendered, built against the installed prefix and run by following its README.
  echo "volt test: building and running every volt new template against $tmp/prefix"
  templates_start=$SECONDS
  if ! bash tests/generator/generated_projects.sh build/tools/generator/volt-new "$tmp/prefix"; then
    failed+=("volt new templates (tests/generator/generated_projects.sh)")
  fi
  echo "volt test: the templates took $((SECONDS - templates_start)) s"
fi

if [ "${#failed[@]}" -gt 0 ]; then
  printf -v list '%s, ' "${failed[@]}"
  echo "volt test: FAILED: ${list%, }"
  exit 1
fi
echo "volt test: all tests passed, and the installed library works from an outside project"
