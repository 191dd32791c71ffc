#!/usr/bin/env bash
# CI for the templates: renders every template with its default options, builds it against an
# installed Volt (one build per template, ccache on, -j2), runs it for a few batches on CPU by
# following its README (follow_readme.sh), and runs its ctest smoke test. Then one launch-mode
# project (--distributed launch --nproc-per-node 2) the same way, and one xla-tpu project whose TPU run goes
# through Volt's TPU emulation (see follow_readme.sh). Then the loggers and the profiler (issue 18): a project
# with --logger csv,tensorboard --profiler simple must leave metrics.csv, event files and fit-profile.txt in one
# lightning_logs/version_0 folder, and one with --logger none --profiler pytorch a Chrome trace fit-trace.json.
# usage: generated_projects.sh VOLT_NEW_BINARY VOLT_PREFIX [TEMPLATE ...]
set -euo pipefail
volt_new=$(realpath "$1")
prefix=$(realpath "$2")
shift 2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
templates=("$@")
if [ ${#templates[@]} -eq 0 ]; then
  mapfile -t templates < <("$volt_new" --list-templates | cut -d: -f1)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CCACHE_BASEDIR=$work
status=0
project() {  # NAME DIR VOLT_NEW_ARGS...
  local name=$1 dir=$2
  shift 2
  echo "== $name: volt new $name $*"
  "$volt_new" "$name" --output "$dir" --zip "$work/$name.zip" --notebook "$work/$name.ipynb" "$@"
  python3 - "$work/$name.zip" "$work/$name.ipynb" "$name" <<'PY'
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
assert z.testzip() is None, "zip CRC error"
assert all(n.startswith(sys.argv[3] + "/") and ".." not in n.split("/") for n in z.namelist()), z.namelist()
nb = json.load(open(sys.argv[2]))
assert nb["nbformat"] == 4 and nb["cells"], "not an nbformat 4 notebook"
PY
  # The notebook against nbformat's own schema (Debian python3-nbformat, for Debian's python3).
  /usr/bin/python3 -c 'import nbformat, sys; nbformat.validate(nbformat.read(sys.argv[1], as_version=4))' \
    "$work/$name.ipynb" || { echo "   $name.ipynb is not a valid nbformat 4 notebook (needs python3-nbformat)"; return 1; }
  local start=$(date +%s%N)
  (cd "$dir" && cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" >build.log 2>&1 &&
     cmake --build build -j2 >>build.log 2>&1) || { cat "$dir/build.log"; return 1; }
  echo "   build: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  bash "$here/follow_readme.sh" "$dir" "$prefix" 2>&1 | tee "$dir/follow.log"  # kept for the checks below
}
logs_written() {  # DIR PATTERN...: each pattern (relative to DIR) names a non-empty file
  local dir=$1 pattern found
  shift
  for pattern in "$@"; do
    found=$(cd "$dir" && compgen -G "$pattern" | head -n 1) || true
    if [ -z "$found" ] || [ ! -s "$dir/$found" ]; then
      echo "   $dir: nothing written at $pattern"
      return 1
    fi
    echo "   written: $found ($(stat -c %s "$dir/$found") bytes)"
  done
}
for t in "${templates[@]}"; do
  name=${t//-/_}_app
  if ! project "$name" "$work/$name" --template "$t"; then
    echo "FAILED: template $t"
    status=1
  fi
done
if [ $# -eq 0 ] || [[ " $* " == *" minimal "* ]]; then
  if ! project launch_app "$work/launch_app" --template minimal --distributed launch --nproc-per-node 2; then
    echo "FAILED: launch-mode project"
    status=1
  fi
fi
if [ $# -eq 0 ] || [[ " $* " == *" image-classification "* ]]; then
  # The image-classification project on a folder of images (issue 19): 3 classes of PNG and JPEG files of different
  # sizes and colours, written by the test with python3-pil (libpng, libjpeg-turbo), one unreadable file among them,
  # which must fail the run naming that file; without it the run trains 2 epochs and tests.
  app=$work/image_classification_app
  imgs=$work/image_folder
  /usr/bin/python3 - "$imgs" <<'PY'
import os, random, sys
from PIL import Image
root, rng = sys.argv[1], random.Random(7)
for c, (name, colour) in enumerate([("cat", (200, 40, 40)), ("dog", (40, 200, 40)), ("owl", (40, 40, 200))]):
    os.makedirs(os.path.join(root, name))
    for i in range(12):
        w, h = rng.randint(20, 60), rng.randint(20, 60)
        img = Image.new("RGB", (w, h), tuple(max(0, min(255, v + rng.randint(-30, 30))) for v in colour))
        for _ in range(40):
            img.putpixel((rng.randrange(w), rng.randrange(h)), (rng.randrange(256),) * 3)
        img.save(os.path.join(root, name, f"{i:02d}." + ("png" if i % 2 else "jpg")), quality=90)
PY
  printf 'not an image' > "$imgs/dog/broken.png"
  run_folder() { (cd "$app" && ./build/image_classification_app --data.image_folder "$imgs" --data.val_size 6 \
                    --data.batch_size 8 --trainer.max_epochs 2 --trainer.default_root_dir folder_runs "$@" 2>&1); }
  if [ ! -x "$app/build/image_classification_app" ]; then
    echo "FAILED: image folder run (the image-classification project was not built)"
    status=1
  elif out=$(run_folder); then
    echo "$out" | tail -n 5
    echo "FAILED: image folder run with an unreadable file succeeded"
    status=1
  elif ! echo "$out" | grep -q "broken.png"; then
    echo "$out" | tail -n 20
    echo "FAILED: image folder run with an unreadable file did not name it"
    status=1
  else
    echo "   unreadable file reported: $(echo "$out" | grep -m1 -o '[^ ]*broken.png[^ ]*')"
    rm "$imgs/dog/broken.png"
    if ! out=$(run_folder) || ! echo "$out" | grep -q "image folder $imgs: 3 classes" ||
       ! echo "$out" | grep -q "test accuracy:"; then
      echo "$out" | tail -n 20
      echo "FAILED: image folder run"
      status=1
    else
      echo "   image folder run: $(echo "$out" | grep -m1 'classes'), $(echo "$out" | grep -m1 'test accuracy:')"
    fi
  fi
fi
if [ $# -eq 0 ] || [[ " $* " == *" image-classification "* ]]; then
  # backend xla-tpu: its README's TPU run, on Volt's TPU emulation (8 spawned processes), one epoch.
  if ! project xla_app "$work/xla_app" --template image-classification --backend xla-tpu --max-epochs 1; then
    echo "FAILED: xla-tpu project"
    status=1
  fi
fi
if [ $# -eq 0 ] || [[ " $* " == *" minimal "* ]]; then
  # Both loggers write into the folder of one version (the first logger decides it); the README's quick run and
  # its resume are the only training runs, so a version_2 would mean they did not.
  if ! project logs_app "$work/logs_app" --template minimal --logger csv,tensorboard --profiler simple ||
     ! logs_written "$work/logs_app" lightning_logs/version_0/metrics.csv \
         'lightning_logs/version_0/events.out.tfevents.*' lightning_logs/version_0/fit-profile.txt ||
     [ -e "$work/logs_app/lightning_logs/version_2" ]; then
    echo "FAILED: csv + tensorboard + simple profiler project"
    status=1
  fi
  # No logger: the profiler writes where the program runs (default_root_dir).
  if ! project trace_app "$work/trace_app" --template minimal --logger none --profiler pytorch ||
     ! logs_written "$work/trace_app" fit-trace.json ||
     ! /usr/bin/python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); e = t["traceEvents"] if isinstance(t, dict) else t; assert e, "no trace events"' \
         "$work/trace_app/fit-trace.json"; then
    echo "FAILED: pytorch profiler project without a logger"
    status=1
  fi
fi
if [ $# -eq 0 ] || [[ " $* " == *" minimal "* ]]; then
  # The handler and logger options (issues 20, 21): an output folder, a checkpoint name, stop on NaN, the logging
  # interval, a time limit (an hour: the run ends at max_epochs first), the learning-rate finder before fit (its
  # suggestion printed, checked below). The README's resume line continues the quick check into version_1, at epoch 1.
  if ! project options_app "$work/options_app" --template minimal --stop-on-nan true \
         --checkpoint-filename 'best-{epoch}' --default-root-dir runs --log-every-n-steps 2 --max-time 00:01:00:00 --lr-find true ||
     ! logs_written "$work/options_app" runs/lightning_logs/version_0/metrics.csv \
         'runs/lightning_logs/version_0/checkpoints/best-epoch=0.ckpt' \
         'runs/lightning_logs/version_1/checkpoints/best-epoch=1.ckpt' ||
     [ -e "$work/options_app/lightning_logs" ] ||
     ! grep -q "lr_find suggests a learning rate of" "$work/options_app/follow.log"; then
    echo "FAILED: handler and logger options project"
    status=1
  fi
fi
exit $status
