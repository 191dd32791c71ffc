#!/usr/bin/env bash
# Follows a generated project's README.md step by step: every command in its sh blocks runs as
# written, in the project folder, with VOLT_PREFIX set, except where it cannot run here:
#   - a program run without limit flags (full training) runs with --print-config appended, which reads
#     config.yaml and every flag of that command and stops: the command is checked, not the training;
#   - `volt launch` lines run as written when this Volt has `volt launch` (FOLLOW_README_LAUNCH=1 forces it);
#   - `sbatch`, `gcloud` and the TPU VM's run line need SLURM, a cloud account or a TPU runtime library: their
#     `./build/NAME ...` part is checked the same way (--print-config); the TPU VM's build lines are the ones
#     already run above;
#   - the TPU run on Volt's emulation (a line starting VOLT_TPU_EMULATION=lazy) runs as written, in full;
#   - `tensorboard --logdir DIR` is a server (and a Python package, not Debian's): instead, DIR must hold the
#     TensorBoard event files the run above wrote;
#   - `volt plot ... --out FILE` runs as written when this Volt has `volt plot`, and FILE must then exist.
# usage: follow_readme.sh PROJECT_DIR VOLT_PREFIX
set -euo pipefail
dir=$1
export VOLT_PREFIX=$2
cd "$dir"
name=$(basename "$dir")
commands=$(awk '/^```sh$/{on=1; next} /^```$/{on=0} on' README.md)
[ -n "$commands" ] || { echo "follow_readme: no sh blocks in $dir/README.md"; exit 1; }
ran=0 checked=0
have_launch=${FOLLOW_README_LAUNCH:-0}
if "$VOLT_PREFIX/bin/volt" launch --help >/dev/null 2>&1; then have_launch=1; fi
have_plot=0
if "$VOLT_PREFIX/bin/volt" plot --help >/dev/null 2>&1; then have_plot=1; fi
in_tpu_vm=0
while IFS= read -r line; do
  [ -n "$line" ] || continue
  case "$line" in
    "cd ~/"*) in_tpu_vm=1; echo "  (TPU VM) $line"; continue ;;
  esac
  program_part=""
  if [[ "$line" == *"./build/$name "* || "$line" == *"./build/$name" ]]; then
    program_part="./build/$name${line#*./build/$name}"
  fi
  if [[ "$line" == gcloud* || "$line" == sbatch* ]]; then
    echo "  (needs a cloud account / SLURM) $line"
    [ "$line" == "sbatch run.sbatch" ] && { bash -n run.sbatch; grep -q "srun ./build/$name --config config.yaml" run.sbatch; }
    continue
  fi
  if [ $in_tpu_vm = 1 ] && [[ "$line" == cmake* ]]; then
    echo "  (TPU VM, same as the build above) $line"; continue
  fi
  if [[ "$line" == "tensorboard --logdir "* ]]; then
    logdir=${line#tensorboard --logdir }
    echo "  (a server) $line: checking $logdir for event files instead"
    compgen -G "$logdir/version_*/events.out.tfevents.*" >/dev/null ||
      { echo "follow_readme: no TensorBoard event files under $logdir/version_*"; exit 1; }
    checked=$((checked + 1))
    continue
  fi
  if [[ "$line" == *"/bin/volt plot "* ]]; then
    if [ $have_plot = 0 ]; then echo "  (needs volt plot) $line"; continue; fi
    echo "  run (plot): $line"
    eval "$line"
    plot_out=${line##*--out }
    plot_out=${plot_out%% *}
    [ -s "$plot_out" ] || { echo "follow_readme: '$line' wrote no $plot_out"; exit 1; }
    ran=$((ran + 1))
    continue
  fi
  if [[ "$line" == VOLT_TPU_EMULATION=lazy* ]]; then
    echo "  run (TPU emulation): $line"
    start=$(date +%s)
    eval "$line"
    echo "  (took $(( $(date +%s) - start )) s)"
    ran=$((ran + 1))
    continue
  fi
  if [[ "$line" == *"volt launch"* && $have_launch = 1 && $in_tpu_vm = 0 ]]; then
    echo "  run (launch): $line"
    eval "$line"
    ran=$((ran + 1))
    continue
  fi
  if [ -n "$program_part" ] && [[ "$line" != *limit_train_batches* || "$line" == *"volt launch"* || $in_tpu_vm = 1 ]]; then
    echo "  check: $program_part --print-config"
    out=$(eval "$program_part --print-config")
    grep -q "max_epochs" <<<"$out" || { echo "follow_readme: '$program_part' did not print its config"; exit 1; }
    checked=$((checked + 1))
    continue
  fi
  echo "  run: $line"
  eval "$line"
  ran=$((ran + 1))
done <<<"$commands"
echo "follow_readme: $dir: $ran commands run, $checked checked with --print-config"
