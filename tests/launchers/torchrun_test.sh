#!/usr/bin/env bash
# The Fashion-MNIST example under Debian's real torchrun (python3-torch), as a 2-rank ddp job:
#  1. torchrun's default static rendezvous (its agent serves the store at MASTER_PORT): both
#     ranks finish and end with bitwise-identical weights;
#  2. rank 1 fails (its data folder does not exist): torchrun's failure summary names Volt's
#     error, read from the error file the failing rank wrote (TORCHELASTIC_ERROR_FILE);
#  3. a program with two ddp Trainers in a row (volt_dist_program --trainers 2): each joins
#     torchrun's store as a process group of its own.
# Debian 12's torchrun (1.13 on Python 3.11) crashes in its default output mode before any
# worker starts, so it runs with `-r 1 -t 1 --log_dir DIR` (docs/distributed.md).
#   torchrun_test.sh <fashion_mnist binary> <volt_dist_program binary>
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
example=$(readlink -f "${1:?usage: torchrun_test.sh <fashion_mnist binary> <volt_dist_program binary>}")
dist_program=$(readlink -f "${2:?usage: torchrun_test.sh <fashion_mnist binary> <volt_dist_program binary>}")
command -v torchrun >/dev/null || skip "no torchrun (Debian package python3-torch)"
/usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null || skip "torchrun's python3-torch does not import"
# Debian 13's python3-torch 2.6 is built without libuv, and its torchrun asks for libuv's TCPStore ("use_libuv was
# requested but PyTorch was build without libuv support"); USE_LIBUV=0 does not reach its static rendezvous.
/usr/bin/python3 - <<'PY' 2>/dev/null || skip "this python3-torch's torchrun needs libuv's TCPStore, which its build lacks (Debian 13)"
import torch.distributed as dist
dist.TCPStore("127.0.0.1", 0, 1, True)
PY
need_example "$example"

T=$(mktemp -d /tmp/volt_torchrun_test.XXXXXX)
cleanup() {
  reap_leftovers "$T" || echo "FAILED: processes of the job were left behind" >&2
  rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1

# 1. A 2-rank job.
port=$(free_port)
start=$(date +%s)
timeout -k 5 100 torchrun --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -r 1 -t 1 --log_dir "$T/logs" --no_python \
  "$example" $(example_args) --data.dir "$FMNIST_DIR" --trainer.default_root_dir "$T/run" > "$T/ddp.log" 2>&1
rc=$?
echo "torchrun 2-rank job: exit $rc in $(( $(date +%s) - start )) s"
[ $rc -eq 0 ] || { tail -n 40 "$T/ddp.log"; fail "torchrun's 2-rank job exited with $rc"; }
grep -q "cluster_env       torchelastic" "$T/ddp.log" || fail "the plan does not name the torchelastic environment"
grep -q "the launcher's store" "$T/ddp.log" || fail "the ranks did not join torchrun's own store (static rendezvous)"
[ "$(grep -c 'test accuracy:' "$T/ddp.log")" -eq 2 ] || fail "not both ranks reported a test accuracy"
check_same_weights "$T/ddp.log" "torchrun"

# 2. Rank 1 fails inside fit: its folder has no Fashion-MNIST files.
port=$(free_port)
start=$(date +%s)
timeout -k 5 100 torchrun --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -r 1 -t 1 --log_dir "$T/logs_fail" --no_python \
  sh -c 'dir=$1; shift; [ "$RANK" = 1 ] && dir=$dir/volt-no-such-folder; exec "$@" --data.dir "$dir"' rank \
  "$FMNIST_DIR" "$example" $(example_args) --trainer.default_root_dir "$T/run_fail" > "$T/fail.log" 2>&1
rc=$?
echo "torchrun job with a failing rank: exit $rc in $(( $(date +%s) - start )) s"
[ $rc -ne 0 ] || fail "the job with a failing rank exited 0"
summary=$(sed -n '/FAILED$/,$p' "$T/fail.log")
[ -n "$summary" ] || { tail -n 40 "$T/fail.log"; fail "torchrun printed no failure summary"; }
echo "$summary"
# Rank 1's own error, as Volt worded it, from its error file.
echo "$summary" | grep -q "DataError: .*volt-no-such-folder" ||
  fail "torchrun's summary does not name Volt's error of rank 1 (DataError ... volt-no-such-folder)"
error_file=$(find "$T/logs_fail" -path '*/1/error.json' | head -n 1)
[ -s "$error_file" ] || fail "rank 1 wrote no error file under $T/logs_fail"
/usr/bin/python3 - "$error_file" <<'PY' || fail "the error file is not in torch.distributed.elastic's format"
import sys
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure
f = ProcessFailure(local_rank=1, pid=1, exitcode=2, error_file=sys.argv[1])
assert isinstance(f.message, dict) and f.message["message"].startswith("DataError: "), f.message
assert f.timestamp > 1700000000, f.timestamp
print("error file read by torch.distributed.elastic:", f.message["message"][:100])
PY
# The root cause is a Volt error (rank 1's, or rank 0's report of the lost peer if it was
# recorded in the same second), never a missing file.
root=$(echo "$summary" | sed -n '/Root Cause/,$p')
echo "$root" | grep -q "error_file: <N/A>" && fail "the root cause has no error file"
echo "$root" | grep -Eq "traceback : (DataError|DistributedError): " || fail "the root cause is not a Volt error"

# 3. Two Trainers, one after the other, in every rank.
port=$(free_port)
timeout -k 5 100 torchrun --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port "$port" \
  -r 1 -t 1 --log_dir "$T/logs_two" --no_python \
  "$dist_program" --strategy ddp --devices 2 --steps 5 --trainers 2 --root "$T/two_root" --out "$T/two" \
  > "$T/two.log" 2>&1
rc=$?
[ $rc -eq 0 ] || { tail -n 30 "$T/two.log"; fail "two Trainers under torchrun: exit $rc"; }
[ -s "$T/two.rank0" ] && [ -s "$T/two.rank1" ] || fail "two Trainers under torchrun: no result of both ranks"
cmp -s <(grep '^p ' "$T/two.rank0") <(grep '^p ' "$T/two.rank1") ||
  fail "two Trainers under torchrun: the ranks ended with different weights"
echo "torchrun, two Trainers in one program: both ranks end with identical weights"
echo "torchrun: PASSED"
