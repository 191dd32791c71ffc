# Shared by the launcher tests (sourced): skipping, free ports, the example's arguments,
# and the checks on what its ranks print. Every test makes its own folder under /tmp and
# removes it, with any process of its job still running, on every exit path.

skip() {
  echo "SKIPPED: $*"
  exit 77
}

fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# A TCP port nobody listens on now (the machine is shared: never a fixed port).
free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The Fashion-MNIST example as a small 2-rank ddp job.
FMNIST_DIR=/usr/share/datasets/fashion-mnist
example_args() {
  echo --trainer.strategy ddp --trainer.accelerator cpu --trainer.devices 2 --trainer.max_epochs 1 \
    --trainer.limit_train_batches 20 --trainer.limit_val_batches 5 --trainer.limit_test_batches 5 \
    --trainer.enable_progress_bar false --trainer.enable_model_summary false
}

need_example() {
  [ -x "$1" ] || skip "the example $1 is not built"
  [ -r "$FMNIST_DIR/train-images-idx3-ubyte.gz" ] || skip "no Fashion-MNIST at $FMNIST_DIR (dataset-fashion-mnist)"
}

# The weights digest the example prints per rank of a multi-process job, for `rank`.
digest_of() {  # FILE RANK
  sed -n "s/.*weights digest (global rank $2 of 2): \([0-9a-f]*\).*/\1/p" "$1" | tail -n 1
}

# Both ranks printed a digest, and the two are equal: bitwise-identical weights.
check_same_weights() {  # FILE WHAT
  local d0 d1
  d0=$(digest_of "$1" 0)
  d1=$(digest_of "$1" 1)
  [ -n "$d0" ] && [ -n "$d1" ] || fail "$2: a rank printed no weights digest (rank 0: '$d0', rank 1: '$d1'); see $1"
  [ "$d0" = "$d1" ] || fail "$2: the ranks ended with different weights (digests $d0 and $d1)"
  echo "$2: both ranks end with weights digest $d0"
}

# PIDs of processes whose command line mentions `text` (this test's folder).
pids_mentioning() {
  local p cmd
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    cmd=$(tr '\0' ' ' 2>/dev/null < "$p/cmdline") || continue
    [[ "$cmd" == *"$1"* ]] && echo "${p#/proc/}"
  done
}

# Kills, by PID, what is left of the job (a run that failed half-way) and says so.
reap_leftovers() {  # TEXT
  local left
  left=$(pids_mentioning "$1" | tr '\n' ' ')
  if [ -n "$left" ]; then
    echo "killing processes left behind: $left" >&2
    # shellcheck disable=SC2086
    kill -KILL $left 2>/dev/null
    return 1
  fi
  return 0
}
