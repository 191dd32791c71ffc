#!/usr/bin/env bash
# CI for the templates: renders every template with its default options, builds it against an
# installed Volt (one build per template, ccache on, -j2), runs it for a few batches on CPU by
# following its README (follow_readme.sh), and runs its ctest smoke test. Then one launch-mode
# project (--distributed launch --nproc-per-node 2) the same way, and one xla-tpu project whose TPU run goes
# through Volt's TPU emulation (see follow_readme.sh).
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
  bash "$here/follow_readme.sh" "$dir" "$prefix"
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
  # backend xla-tpu: its README's TPU run, on Volt's TPU emulation (8 spawned processes), one epoch.
  if ! project xla_app "$work/xla_app" --template image-classification --backend xla-tpu --max-epochs 1; then
    echo "FAILED: xla-tpu project"
    status=1
  fi
fi
exit $status
