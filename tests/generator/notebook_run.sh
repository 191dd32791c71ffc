#!/usr/bin/env bash
# A generated notebook run end to end and headless, as Colab's "Run all" runs it: `jupyter nbconvert --execute`
# (Debian's python3-nbconvert and python3-ipykernel, on Debian's python3). From the notebook alone it installs what
# is missing, unpacks Volt's source, builds Volt and the project, trains and draws the curves. Two notebooks: the
# image-classification template on the CPU, and the xla-tpu project on Volt's TPU emulation (8 processes).
# usage: notebook_run.sh VOLT_NEW_BINARY
set -euo pipefail
volt_new=$1
py=/usr/bin/python3
if ! "$py" -c 'import nbconvert, ipykernel' 2>/dev/null; then
  echo "python3-nbconvert and python3-ipykernel are not installed (scripts/setup.sh installs them): skipped"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A short run: the notebook's own commands, with the limits a quick check uses.
export VOLT_NOTEBOOK_TRAIN_ARGS="--trainer.limit_train_batches 20 --trainer.limit_val_batches 4 --trainer.limit_test_batches 4"
status=0
run_notebook() {  # NAME EXPECTED_TEXT VOLT_NEW_ARGS...
  local name=$1 expect=$2
  shift 2
  echo "== $name: volt new $name $* --notebook $name.ipynb"
  "$volt_new" "$name" --no-write --notebook "$work/$name.ipynb" "$@"
  # Each notebook in a folder of its own (Colab's /content): each builds Volt from the source it carries.
  export VOLT_NOTEBOOK_ROOT=$work/$name.content
  mkdir -p "$VOLT_NOTEBOOK_ROOT"
  local start=$SECONDS
  if ! "$py" -m nbconvert --to notebook --execute --ExecutePreprocessor.timeout=1500 \
        --output "$name.out.ipynb" "$work/$name.ipynb" >"$work/$name.nbconvert.log" 2>&1; then
    cat "$work/$name.nbconvert.log"
    echo "FAILED: $name: the notebook did not run to the end"
    return 1
  fi
  echo "   ran in $((SECONDS - start)) s"
  "$py" - "$work/$name.out.ipynb" "$expect" <<'PY'
import json, sys
nb = json.load(open(sys.argv[1]))
text, images, errors = [], 0, []
for cell in nb["cells"]:
    for out in cell.get("outputs", []):
        if out["output_type"] == "error":
            errors.append(out["ename"] + ": " + out["evalue"])
        if out["output_type"] == "stream":
            text.append("".join(out["text"]))
        if "image/png" in out.get("data", {}):
            images += 1
all_text = "".join(text)
assert not errors, errors
for want in ["packages present", "LibTorch: the", "bytes of packed source", "Linking CXX shared library",
             "files written", "step 20/20", sys.argv[2], "volt plot: wrote"]:
    assert want in all_text, "the run printed no %r; its output ends:\n%s" % (want, all_text[-3000:])
assert images == 1, "%d images shown, expected the curves" % images
print("   checked: every cell ran, Volt was built from the notebook's source, training ran, the curves are shown")
PY
}
run_notebook nb_image "test accuracy:" --template image-classification --max-epochs 1 || status=1
run_notebook nb_xla "training on the emulated TPU" --template image-classification --backend xla-tpu --max-epochs 1 ||
  status=1
exit $status
