#!/usr/bin/env bash
# The one script for a GPU machine (docs/gpu.md): PyTorch from pip with CUDA, no Debian development packages, no
# network. Finds LibTorch through that PyTorch (torch.utils.cmake_prefix_path, its C++ ABI flag), builds Volt's
# library, the CUDA tests and the GPU benchmark in Release with every core, runs them and prints one summary, each
# phase inside a time budget (8 minutes in all). What the machine lacks (yaml-cpp, nlohmann-json, GoogleTest,
# libpng, libjpeg, zlib) comes in .gpu-deps, made here by scripts/gpu-deps.sh and carried with the tree.
#   bash scripts/gpu-check.sh                 on the GPU machine (build-gpu/)
#   bash scripts/gpu-check.sh --cpu-dry-run   here: Debian's LibTorch, 2 jobs, -O0, the tests expected to skip,
#                                             the benchmarks' --tiny runs; budgets printed, not enforced (build-gpu-dry/)
# Logs go to the build folder's logs/ and, when $OUT is set (the device machine's return folder), to $OUT too.
# Exit status: 0 when every phase passed, 1 otherwise.
set -uo pipefail

src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$src"
mode=gpu
for arg in "$@"; do
  case "$arg" in
    --cpu-dry-run) mode=dry ;;
    -h|--help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "volt gpu-check: unknown argument '$arg' (known: --cpu-dry-run)" >&2; exit 2 ;;
  esac
done
say() { echo "volt gpu-check: $*"; }
deps=${VOLT_GPU_DEPS:-$src/.gpu-deps}
if [ "$mode" = gpu ]; then
  build=build-gpu jobs=$(nproc) python=${VOLT_PYTHON:-python3}
else
  build=build-gpu-dry jobs=${VOLT_GPU_DRY_JOBS:-2} python=${VOLT_PYTHON:-/usr/bin/python3}
fi
logs=$build/logs
mkdir -p "$logs"
if [ "$mode" = dry ] && [ ! -f "$deps/SOURCES" ] && [ -z "${VOLT_GPU_DEPS:-}" ]; then
  bash "$src/scripts/gpu-deps.sh" "$deps" || exit 1
fi
start_all=$(date +%s)

# Budgets in seconds; 510 in all.
declare -A budget=([probe]=15 [configure]=45 [build]=300 [tests]=60 [bench]=50 [python]=40)
phases=(probe configure build tests bench python)
declare -A took result
failed=0

# run_phase NAME CMD...: runs CMD with the phase's budget (enforced on the GPU machine), its output in logs/NAME.log.
run_phase() {
  local name=$1 rc t0
  shift
  t0=$(date +%s)
  say "--- $name (budget ${budget[$name]} s)"
  # Each phase in a shell of its own (its set -e stays there; timeout can stop it with its children).
  if [ "$mode" = gpu ]; then
    timeout --kill-after=5 "${budget[$name]}" bash -c '"$@"' "$name" "$@" >"$logs/$name.log" 2>&1
  else
    bash -c '"$@"' "$name" "$@" >"$logs/$name.log" 2>&1
  fi
  rc=$?
  took[$name]=$(($(date +%s) - t0))
  tail -n 15 "$logs/$name.log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    result[$name]="over budget (stopped after ${budget[$name]} s)"
  elif [ "$rc" -ne 0 ]; then
    result[$name]="failed (exit $rc; $logs/$name.log)"
  fi
  [ "$rc" -eq 0 ] || failed=1
  return "$rc"
}

# --- probe: PyTorch, its LibTorch and ABI, CUDA, the deps folder.
probe() {
  set -e
  command -v "$python" >/dev/null || { echo "no $python"; return 1; }
  "$python" - <<'PY' >"$build/torch.env"
import torch
print("torch_version=%s" % torch.__version__)
print("torch_prefix=%s" % torch.utils.cmake_prefix_path)
print("torch_abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("torch_cuda=%s" % (torch.version.cuda or "none"))
print("gpus=%d" % torch.cuda.device_count())
print("gpu_name=%s" % (torch.cuda.get_device_name(0).replace(" ", "_") if torch.cuda.device_count() else "none"))
PY
  cat "$build/torch.env"
  [ -f "$deps/SOURCES" ] || { echo "no $deps (make it with scripts/gpu-deps.sh and carry it)"; return 1; }
  echo "deps: $deps ($(du -sh "$deps" | cut -f1)); $(grep -c ' ' "$deps/SOURCES") packages"
  # Debian's C++ libraries are built with the C++11 ABI; a PyTorch without it cannot link them.
  # shellcheck disable=SC1090
  . "$build/torch.env"
  [ "$torch_abi" = 1 ] || { echo "this PyTorch uses the pre-C++11 ABI (_GLIBCXX_USE_CXX11_ABI=0); .gpu-deps holds C++11-ABI builds"; return 1; }
  for tool in cmake ninja g++; do command -v "$tool" >/dev/null || { echo "no $tool on PATH"; return 1; }; done
  echo "cmake $(cmake --version | head -n1 | awk '{print $3}'), ninja $(ninja --version), $(g++ --version | head -n1)"
  if [ "$mode" = gpu ]; then
    command -v nvcc >/dev/null && nvcc --version | tail -n2 | head -n1
    [ "$gpus" -ge 1 ] || { echo "PyTorch sees no GPU"; return 1; }
  fi
}
torch_dir() {
  # shellcheck disable=SC1090
  . "$build/torch.env"
  if [ -f "$torch_prefix/Torch/TorchConfig.cmake" ]; then
    echo "$torch_prefix/Torch"
  elif [ "$mode" = dry ] && [ -f /usr/lib/x86_64-linux-gnu/cmake/Torch/TorchConfig.cmake ]; then
    echo /usr/lib/x86_64-linux-gnu/cmake/Torch  # Debian's python3-torch names a folder it does not ship
  fi
}

configure() {
  set -e
  local tdir
  tdir=$(torch_dir)
  [ -n "$tdir" ] || { echo "no TorchConfig.cmake under torch.utils.cmake_prefix_path"; return 1; }
  echo "Torch_DIR=$tdir"
  local cuda_args=()
  if [ "$mode" = gpu ]; then
    # LibTorch's CMake looks for NVTX 3 in its own source tree unless USE_SYSTEM_NVTX; CUDA ships it.
    [ -d /usr/local/cuda ] && cuda_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda -DCMAKE_INCLUDE_PATH=/usr/local/cuda/include)
    cuda_args+=(-DUSE_SYSTEM_NVTX=ON)
    # Hopper (sm_90); Volt compiles no kernels of its own, LibTorch's CMake wants the list.
    cuda_args+=(-DTORCH_CUDA_ARCH_LIST=9.0 -DCMAKE_CUDA_ARCHITECTURES=90)
  fi
  # The dry run compiles with -O0 (about twice as fast on 2 cores; VOLT_GPU_DRY_FLAGS to change it): it checks that
  # everything builds, links and runs, not how fast. The GPU machine builds with Release's -O3.
  [ "$mode" = gpu ] || cuda_args+=("-DCMAKE_CXX_FLAGS_RELEASE=${VOLT_GPU_DRY_FLAGS:--O0 -DNDEBUG}")
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DTorch_DIR=$tdir" "-DCMAKE_PREFIX_PATH=$deps" \
    -DVOLT_BUILD_TOOLS=OFF -DVOLT_BUILD_UI=OFF -DVOLT_BUILD_EXAMPLES=OFF -DVOLT_BUILD_BENCH=ON \
    -DVOLT_BUILD_TESTS=ON -DVOLT_BUILD_CUDA_TESTS_ONLY=ON "${cuda_args[@]}"
  # Every dependency Debian provided must come from the deps folder, not from this machine.
  local bad=0 var value
  for var in yaml-cpp_DIR nlohmann_json_DIR GTest_DIR ZLIB_LIBRARY_RELEASE PNG_LIBRARY_RELEASE JPEG_LIBRARY_RELEASE; do
    value=$(sed -n "s/^$var:[A-Z]*=//p" "$build/CMakeCache.txt")
    case "$value" in
      "$deps"/*) echo "$var=$value" ;;
      *) echo "$var=$value is not in $deps"; bad=1 ;;
    esac
  done
  [ "$bad" -eq 0 ]
  if [ "$mode" = gpu ]; then grep -q "LibTorch has CUDA" "$build/CMakeCache.txt" "$logs/configure.log"; fi
}

# -k 0: a file that fails does not hide the others' errors (the log lists every one).
build_all() { cmake --build "$build" -j "$jobs" --target volt volt_cuda_tests gpu_lm gpu_cnn -- -k 0; }

cuda_tests() {
  set -e
  local bin=$build/tests/cuda/volt_cuda_tests rc=0
  "$bin" --gtest_color=no || rc=$?
  if [ "$rc" -ge 128 ]; then
    # A crash hides which test it was (gtest's output stops mid-test): each test alone, then a backtrace
    # of the first that crashes (cuda-gdb debugs host code too; the GPU machine has no gdb).
    echo "volt_cuda_tests died (exit $rc); each test alone:"
    local t crashed=""
    for t in $("$bin" --gtest_list_tests | awk '/^[^ ]/ {s = $1} /^  / {print s $1}'); do
      "$bin" --gtest_color=no --gtest_brief=1 "--gtest_filter=$t" >/dev/null 2>&1 && echo "  ok      $t" ||
        { echo "  FAILED  $t (exit $?)"; [ -n "$crashed" ] || crashed=$t; }
    done
    if [ -n "$crashed" ] && command -v cuda-gdb >/dev/null; then
      timeout 60 cuda-gdb -q -batch -ex run -ex bt --args "$bin" "--gtest_filter=$crashed" 2>&1 | tail -n 40
    fi
  fi
  [ "$rc" -eq 0 ]
  local out=$logs/tests.log
  if [ "$mode" = dry ]; then
    # No GPU here: every test must have skipped, naming why.
    local ran skipped
    ran=$(sed -n 's/^\[==========\] \([0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$out" | tail -n1)
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) tests\{0,1\}, listed below:.*/\1/p' "$out" | tail -n1)
    echo "ran ${ran:-?}, skipped ${skipped:-0}"
    [ -n "$ran" ] && [ "${skipped:-0}" = "$ran" ]
  fi
}

bench() {
  set -e
  if [ "$mode" = gpu ]; then
    "$build/bench/gpu_lm" --steps 30 --warmup 5 --rounds 2
    "$build/bench/gpu_cnn" --steps 300 --warmup 20 --rounds 2
  else
    "$build/bench/gpu_lm" --tiny
    "$build/bench/gpu_cnn" --tiny
  fi
}

python_bench() {
  if [ "$mode" = gpu ]; then
    PYTHONUNBUFFERED=1 "$python" bench/gpu_lm.py --steps 30 --warmup 5 --rounds 2
  else
    PYTHONUNBUFFERED=1 "$python" bench/gpu_lm.py --tiny
  fi
}

export src mode deps build jobs python logs
export -f probe torch_dir configure build_all cuda_tests bench python_bench
run_phase probe probe || true
if [ -z "${result[probe]:-}" ]; then
  run_phase configure configure || true
fi
[ -n "${result[configure]:-}" ] || [ -z "${took[configure]:-}" ] || run_phase build build_all || true
if [ -n "${took[build]:-}" ] && [ -z "${result[build]:-}" ]; then
  run_phase tests cuda_tests || true
  run_phase bench bench || true
fi
[ -z "${result[probe]:-}" ] && run_phase python python_bench || true

# --- summary
value() { sed -n "s/^RESULT $1 .*$2=\([^ ]*\).*/\1/p" "$logs/$3.log" 2>/dev/null | tail -n1; }
volt_tps=$(value gpu_lm volt_tokens_per_s bench) hand_tps=$(value gpu_lm hand_tokens_per_s bench)
ratio=$(value gpu_lm volt_over_hand bench) fpt=$(value gpu_lm flops_per_token bench)
py_tps=$(value gpu_lm.py tokens_per_s python)
cnn_volt=$(value gpu_cnn volt_steps_per_s bench) cnn_hand=$(value gpu_cnn hand_steps_per_s bench)
[ -n "${took[tests]:-}" ] && [ -z "${result[tests]:-}" ] &&
  result[tests]="ok: $(grep -E '^\[  (PASSED  |SKIPPED |FAILED  )\] [0-9]+ tests?' "$logs/tests.log" | sed 's/, listed below://' | tr -s ' ' | tr '\n' ' ')"
[ -n "${took[bench]:-}" ] && [ -z "${result[bench]:-}" ] &&
  result[bench]="ok: volt ${volt_tps:-?} tokens/s, hand ${hand_tps:-?} tokens/s, volt/hand ${ratio:-?}; CNN volt ${cnn_volt:-?} steps/s, hand ${cnn_hand:-?}"
[ -n "${took[python]:-}" ] && [ -z "${result[python]:-}" ] && result[python]="ok: plain PyTorch ${py_tps:-?} tokens/s"
[ -n "${took[probe]:-}" ] && [ -z "${result[probe]:-}" ] &&
  result[probe]="ok: $(tr '\n' ' ' <"$build/torch.env")"
for p in configure build; do [ -n "${took[$p]:-}" ] && [ -z "${result[$p]:-}" ] && result[$p]=ok; done
{
  echo "volt gpu-check summary ($([ "$mode" = gpu ] && echo "GPU machine, $jobs jobs" || echo "CPU dry run, $jobs jobs: budgets not enforced"))"
  total_budget=0
  for p in "${phases[@]}"; do
    total_budget=$((total_budget + budget[$p]))
    printf '  %-9s budget %3d s  took %4s s  %s\n' "$p" "${budget[$p]}" "${took[$p]:--}" "${result[$p]:-not run}"
  done
  printf '  %-9s budget %3d s  took %4d s\n' total "$total_budget" "$(($(date +%s) - start_all))"
  if [ -n "$volt_tps" ] && [ -n "$hand_tps" ] && [ -n "$fpt" ]; then
    awk -v v="$volt_tps" -v h="$hand_tps" -v p="${py_tps:-0}" -v f="$fpt" -v peak=989e12 'BEGIN {
      printf "  tokens/s: volt %.0f, hand-written LibTorch %.0f, plain PyTorch %s\n", v, h, (p > 0 ? sprintf("%.0f", p) : "-")
      printf "  volt/hand %.3f (issue 22 asks >= 0.99)%s\n", v / h, (p > 0 ? sprintf(", volt/PyTorch %.3f", v / p) : "")
      printf "  MFU vs 989 TFLOP/s (H200 dense bf16): volt %.1f%%, hand %.1f%%%s (issue 22 asks >= 40%%)\n",
             100 * v * f / peak, 100 * h * f / peak, (p > 0 ? sprintf(", PyTorch %.1f%%", 100 * p * f / peak) : "")
    }'
  fi
  [ "$failed" -eq 0 ] && echo "  result: every phase passed" || echo "  result: FAILED (logs in $logs)"
} | tee "$logs/summary.txt"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
  cp "$logs"/summary.txt "$logs"/*.log "$OUT"/ 2>/dev/null || true
fi
exit "$failed"
