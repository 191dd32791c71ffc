#!/usr/bin/env bash
# Multi-node for real: two network namespaces joined by a veth pair, each a "node" with its
# own address. `volt launch` starts rank 0 on node 0 (10.77.X.1, the rendezvous address) and
# rank 1 on node 1 (10.77.X.2); both train, and must end with identical weights; then fsdp the same way,
# which must end with ddp's weights. The
# namespaces and every process in them are removed on every exit path.
#   multinode_test.sh VOLT_BINARY DIST_PROGRAM
set -euo pipefail
volt=$1
program=$2
if ! command -v ip >/dev/null; then
  # ctest reports this as skipped (SKIP_RETURN_CODE 77): the Debian 13 chroot of
  # scripts/test-trixie.sh has no iproute2; the Debian 12 run (scripts/setup.sh installs it) runs it.
  echo "multinode: SKIPPED: no 'ip' command (install iproute2)" >&2
  exit 77
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "multinode: needs root (ip netns); run the tests as root, as CI does" >&2
  exit 1
fi
id=$(( $$ % 200 + 20 ))
n0="volt-n0-$$"
n1="volt-n1-$$"
v0="vv0-$$"
v1="vv1-$$"
out=$(mktemp -d)
cleanup() {
  for ns in "$n0" "$n1"; do
    if ip netns list | grep -q "^$ns\b"; then
      pids=$(ip netns pids "$ns" 2>/dev/null || true)
      [ -n "$pids" ] && kill -9 $pids 2>/dev/null || true
      ip netns del "$ns" 2>/dev/null || true
    fi
  done
  ip link del "$v0" 2>/dev/null || true
  rm -rf "$out"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$n0"
ip netns add "$n1"
ip link add "$v0" type veth peer name "$v1"
ip link set "$v0" netns "$n0"
ip link set "$v1" netns "$n1"
ip -n "$n0" addr add "10.77.$id.1/24" dev "$v0"
ip -n "$n1" addr add "10.77.$id.2/24" dev "$v1"
for ns in "$n0" "$n1"; do ip -n "$ns" link set lo up; done
ip -n "$n0" link set "$v0" up
ip -n "$n1" link set "$v1" up
ip netns exec "$n1" ping -c 1 -W 2 "10.77.$id.1" >/dev/null 2>&1 || echo "multinode: note: ping unavailable or blocked" >&2

master="10.77.$id.1"
echo "multinode: node 0 = $n0 ($master), node 1 = $n1 (10.77.$id.2)"
# run_job STRATEGY OUT PORT: one rank on each node, through `volt launch`.
run_job() {
  local args=(--strategy "$1" --devices 1 --nodes 2 --steps 10 --batch 8 --out "$2" --rendezvous-timeout 30 --timeout 60)
  timeout 120 ip netns exec "$n0" "$volt" launch --nnodes 2 --node-rank 0 --nproc-per-node 1 \
    --master-addr "$master" --master-port "$3" -- "$program" "${args[@]}" &
  local p0=$!
  timeout 120 ip netns exec "$n1" "$volt" launch --nnodes 2 --node-rank 1 --nproc-per-node 1 \
    --master-addr "$master" --master-port "$3" -- "$program" "${args[@]}" &
  local p1=$!
  local rc0=0 rc1=0
  wait "$p0" || rc0=$?
  wait "$p1" || rc1=$?
  if [ "$rc0" -ne 0 ] || [ "$rc1" -ne 0 ]; then
    echo "multinode: FAILED ($1): node 0 exited $rc0, node 1 exited $rc1" >&2
    exit 1
  fi
  for r in 0 1; do
    grep -q '^world_size 2$' "$2.rank$r" || { echo "multinode: $1 rank $r did not see a world of 2" >&2; exit 1; }
    grep -q '^global_step 10$' "$2.rank$r" || { echo "multinode: $1 rank $r did not finish 10 steps" >&2; exit 1; }
  done
  if ! cmp -s <(grep '^p ' "$2.rank0") <(grep '^p ' "$2.rank1"); then
    echo "multinode: FAILED ($1): the two nodes ended with different weights" >&2
    exit 1
  fi
}
run_job ddp "$out/r" 29600
echo "multinode: OK: 2 nodes trained 10 steps with ddp over the veth link and ended with identical weights ($(grep -c '^p ' "$out/r.rank0") values)"
# fsdp over the same link: every parameter all-gathered and reduce-scattered across the nodes. On 2
# ranks its average (g0 + g1) / 2 and ddp's g0 / 2 + g1 / 2 are the same floats (halving is exact), so
# the weights must be ddp's bit for bit.
run_job fsdp "$out/f" 29601
if ! cmp -s <(grep '^p ' "$out/r.rank0") <(grep '^p ' "$out/f.rank0"); then
  echo "multinode: FAILED: fsdp over 2 nodes ended with other weights than ddp" >&2
  exit 1
fi
echo "multinode: OK: fsdp (FULL_SHARD) over 2 nodes ended with ddp's weights bit for bit"
