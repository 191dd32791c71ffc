#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz into build-fuzz/ (clang-14, ASan + UBSan, ccache) and fuzzes
# each for a while, starting from the committed seed corpus.
#   bash scripts/fuzz.sh                    every target, 30 s each
#   bash scripts/fuzz.sh --seconds 120 idx  one target, 2 minutes
#   bash scripts/fuzz.sh --seed 1 --runs 30000   the same search every time (CI), at most 30000 executions each
# First replays every committed regression input (tests/fuzz/regressions/<target>/). Prints the executions
# of each target and a summary; exits 1 when a target crashed (the input is saved under build-fuzz/crashes/),
# 2 for a usage error. Needs clang-14 and libclang-rt-14-dev besides scripts/setup.sh's packages.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

all_targets=(cli checkpoint safetensors idx generator_options ui_api csv token_file image)
seconds=30
seed=0      # 0: libFuzzer picks one
runs=-1     # -1: no cap on executions
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds)
      [ $# -ge 2 ] || { echo "fuzz.sh: --seconds needs a value, e.g. --seconds 30" >&2; exit 2; }
      seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#--seconds=}; shift ;;
    --seed)
      [ $# -ge 2 ] || { echo "fuzz.sh: --seed needs a value, e.g. --seed 1" >&2; exit 2; }
      seed=$2; shift 2 ;;
    --runs)
      [ $# -ge 2 ] || { echo "fuzz.sh: --runs needs a value, e.g. --runs 40000" >&2; exit 2; }
      runs=$2; shift 2 ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option '$1' (known: --seconds N, --seed S, --runs N, target names)" >&2; exit 2 ;;
    *)
      if [[ " ${all_targets[*]} " != *" $1 "* ]]; then
        echo "fuzz.sh: unknown target '$1' (targets: ${all_targets[*]})" >&2; exit 2
      fi
      targets+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: --seconds expects a whole number of seconds >= 1, got '$seconds'" >&2; exit 2
fi
if ! [[ "$seed" =~ ^[0-9]+$ ]] || [ ${#seed} -gt 9 ]; then
  echo "fuzz.sh: --seed expects a whole number below 10^9, got '$seed'" >&2; exit 2
fi
if ! [[ "$runs" =~ ^(-1|[0-9]+)$ ]] || [ ${#runs} -gt 12 ]; then
  echo "fuzz.sh: --runs expects a whole number of executions (or -1: no cap), got '$runs'" >&2; exit 2
fi
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")

for tool in clang++-14 clang-14; do
  command -v "$tool" >/dev/null || { echo "fuzz.sh: $tool is missing: apt-get install clang-14 libclang-rt-14-dev" >&2; exit 2; }
done

build=build-fuzz
export CCACHE_BASEDIR="$root"
start=$(date +%s)
if [ ! -f "$build/build.ninja" ]; then
  cmake -S tests/fuzz -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 >/dev/null
fi
cmake --build "$build" -j "$(nproc)" --target $(printf 'fuzz_%s ' "${targets[@]}")
echo "fuzz.sh: build-fuzz built in $(( $(date +%s) - start )) s"

# Leak checks stay off: LibTorch keeps process-lifetime caches that LeakSanitizer would report.
export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_abort=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mkdir -p "$build/crashes" "$build/logs"
failed=()

echo "fuzz.sh: replaying the regression inputs"
for t in "${targets[@]}"; do
  shopt -s nullglob
  inputs=(tests/fuzz/regressions/"$t"/*)
  shopt -u nullglob
  [ ${#inputs[@]} -gt 0 ] || continue
  if "$build/fuzz_$t" -rss_limit_mb=4096 "${inputs[@]}" >"$build/logs/$t.regressions.log" 2>&1; then
    echo "  $t: ${#inputs[@]} inputs, no crash"
  else
    echo "  $t: a regression input crashes again; see $build/logs/$t.regressions.log" >&2
    tail -n 30 "$build/logs/$t.regressions.log" >&2
    failed+=("$t (regression)")
  fi
done

summary=()
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"   # the committed seeds plus what this machine found; never written back
  mkdir -p "$corpus"
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  log="$build/logs/$t.log"
  echo "fuzz.sh: fuzzing $t for $seconds s"
  rc=0
  "$build/fuzz_$t" -max_total_time="$seconds" -seed="$seed" -runs="$runs" -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build/crashes/$t-" "$corpus" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  per_s=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
  if [ "$rc" -ne 0 ]; then
    artifact=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1 | cut -d' ' -f5)
    echo "  $t: CRASH after ${execs:-?} executions; input: ${artifact:-(none written)}; log: $log" >&2
    grep -m 1 -E "ERROR: |volt fuzz |runtime error|==ERROR" "$log" >&2 || tail -n 20 "$log" >&2
    failed+=("$t")
    summary+=("$(printf '%-18s %12s %10s %8s  %s' "$t" "${execs:-?}" "${per_s:-?}" "${cov:-?}" "CRASH")")
  else
    echo "  $t: ${execs:-?} executions (${per_s:-?}/s), coverage ${cov:-?}"
    summary+=("$(printf '%-18s %12s %10s %8s  %s' "$t" "${execs:-?}" "${per_s:-?}" "${cov:-?}" "ok")")
  fi
done

echo
echo "fuzz.sh summary ($seconds s per target):"
printf '%-18s %12s %10s %8s  %s\n' target executions exec/s cov result
printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: FAILED: ${failed[*]} (crashing inputs under $build/crashes/)"
  exit 1
fi
echo "fuzz.sh: no crash in ${#targets[@]} targets"
