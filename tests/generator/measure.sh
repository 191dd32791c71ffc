#!/usr/bin/env bash
# Measures what docs/performance.md reports for volt new:
#   1. wall time of `volt-new` and of `volt new` (process start to exit, files written and synced),
#      median and min of N runs, for each template;
#   2. a generated project's cold build (fresh build folder, ccache disabled): configure, then build -j2.
# usage: measure.sh VOLT_NEW VOLT_BINARY VOLT_PREFIX [N=20] [TEMPLATES for the build: image-classification]
set -euo pipefail
volt_new=$(realpath "$1"); volt=$(realpath "$2"); prefix=$(realpath "$3"); n=${4:-20}
shift $(( $# < 4 ? $# : 4 ))
builds=("$@"); [ ${#builds[@]} -gt 0 ] || builds=(image-classification)
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$volt_new" "$volt" "$work" "$n" <<'PY'
import statistics, subprocess, sys, time
volt_new, volt, work, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
templates = [l.split(":")[0] for l in subprocess.check_output([volt_new, "--list-templates"], text=True).splitlines()]
for label, cmd in (("volt-new", [volt_new]), ("volt new", [volt, "new"])):
    for t in templates:
        times = []
        for i in range(n):
            out = f"{work}/{t}_{label.replace(' ', '_')}_{i}"
            start = time.perf_counter()
            subprocess.run(cmd + [f"p{i}", "--template", t, "--output", out, "--zip", out + ".zip",
                                  "--notebook", out + ".ipynb"], check=True, stdout=subprocess.DEVNULL)
            times.append((time.perf_counter() - start) * 1000)
        print(f"{label:9s} {t:21s} median {statistics.median(times):6.1f} ms  min {min(times):6.1f} ms  (n={n}, with --zip and --notebook)")
PY
for t in "${builds[@]}"; do
  d=$work/build_${t//-/_}
  "$volt_new" "${t//-/_}" --template "$t" --output "$d" >/dev/null
  cd "$d"
  s=$(date +%s%N)
  CCACHE_DISABLE=1 cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  c=$(date +%s%N)
  CCACHE_DISABLE=1 cmake --build build -j2 >/dev/null
  e=$(date +%s%N)
  echo "cold build $t: configure $(( (c - s) / 1000000 )) ms, build -j2 $(( (e - c) / 1000000 )) ms, total $(( (e - s) / 1000000 )) ms (ccache off; load average $(cut -d' ' -f1-3 /proc/loadavg))"
  cd - >/dev/null
done
