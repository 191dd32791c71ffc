#!/usr/bin/env bash
# The Fashion-MNIST example under Open MPI's real mpirun (openmpi-bin), as a 2-rank ddp job on
# one node: Volt reads the ranks from OMPI_COMM_WORLD_* (no MPI library), both ranks are on
# node 0 (OMPI_COMM_WORLD_NODE_RANK is a per-node index, 1 for the second rank), and both end
# with bitwise-identical weights.
#   mpirun_test.sh <fashion_mnist binary>
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
example=$(readlink -f "${1:?usage: mpirun_test.sh <fashion_mnist binary>}")
command -v mpirun >/dev/null || skip "no mpirun (Debian package openmpi-bin)"
mpirun --version 2>/dev/null | grep -q "Open MPI" || skip "mpirun is not Open MPI's"
need_example "$example"

T=$(mktemp -d /tmp/volt_mpirun_test.XXXXXX)
cleanup() {
  reap_leftovers "$T" || echo "FAILED: processes of the job were left behind" >&2
  rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1

as_root=()
[ "$(id -u)" = 0 ] && as_root=(--allow-run-as-root)
port=$(free_port)
start=$(date +%s)
# --output-filename: each rank's output in its own file; MASTER_PORT: a free port (the
# machine is shared), passed to every rank with -x.
timeout -k 5 100 mpirun "${as_root[@]}" --oversubscribe -np 2 --output-filename "$T/out" \
  -x MASTER_PORT="$port" --mca btl self,tcp \
  "$example" $(example_args) --data.dir "$FMNIST_DIR" --trainer.default_root_dir "$T/run" > "$T/mpirun.log" 2>&1
rc=$?
echo "mpirun 2-rank job: exit $rc in $(( $(date +%s) - start )) s"
[ $rc -eq 0 ] || { tail -n 40 "$T/mpirun.log"; find "$T/out" -type f -exec tail -n 20 {} +; fail "mpirun exited with $rc"; }
for r in 0 1; do
  f=$(find "$T/out" -path "*rank.$r/stdout" | head -n 1)
  [ -s "$f" ] || fail "no output of rank $r under $T/out"
  grep -q "cluster_env       mpi" "$f" || fail "rank $r: the plan does not name the mpi environment"
  grep -q "ranks             global $r, local $r, node 0$" "$f" ||
    fail "rank $r: expected 'global $r, local $r, node 0', the plan says: $(grep 'ranks ' "$f")"
  echo "rank $r: $(grep 'ranks ' "$f" | sed 's/^ *//')"
  cat "$f" >> "$T/all.log"
done
check_same_weights "$T/all.log" "mpirun"
echo "mpirun: PASSED"
