#!/usr/bin/env bash
# The Fashion-MNIST example under a real Slurm (slurm-wlm): a one-node cluster on loopback that
# this test starts (slurmctld + slurmd, configuration, state and spool in a temporary folder,
# no munge: auth/none, cred/none) and stops by PID on every exit path.
#  1. `srun -n 2`: a 2-rank ddp job; both ranks end with bitwise-identical weights.
#  2. The same job under sbatch --requeue, signalled with SIGUSR1 mid-epoch (what
#     `#SBATCH --signal=USR1@90` sends to the job's tasks): Volt saves hpc_ckpt_1.ckpt and
#     requeues the job (slurm_auto_requeue); Slurm starts it again, it resumes from that
#     checkpoint and ends bitwise equal to the uninterrupted job of 1.
#   slurm_test.sh <fashion_mnist binary>
set -u
here=$(cd "$(dirname "$0")" && pwd)
. "$here/common.sh"
example=$(readlink -f "${1:?usage: slurm_test.sh <fashion_mnist binary>}")
for tool in slurmctld slurmd srun sbatch scancel scontrol sinfo; do
  command -v $tool >/dev/null || skip "no $tool (Debian package slurm-wlm)"
done
[ "$(id -u)" = 0 ] || skip "a Slurm of its own needs root here (SlurmUser=root, slurmd)"
plugins=$(dirname "$(dpkg -L slurm-wlm-basic-plugins 2>/dev/null | grep -m1 '/auth_none.so$')" 2>/dev/null)
[ -n "$plugins" ] && [ -e "$plugins/cred_none.so" ] || skip "Slurm's auth/none and cred/none plug-ins are not installed"
need_example "$example"

T=$(mktemp -d /tmp/volt_slurm_test.XXXXXX)
export SLURM_CONF=$T/slurm.conf
ctld_pid= slurmd_pid=
cleanup() {
  # Jobs first (their steps are slurmd's children), then the daemons, by PID.
  [ -n "$ctld_pid" ] && timeout 10 scancel --full --quiet --partition=volt 2>/dev/null
  for i in $(seq 1 20); do
    [ -z "$(pids_mentioning "$T")" ] && break
    sleep 0.5
  done
  for pid in $slurmd_pid $ctld_pid; do
    kill -TERM "$pid" 2>/dev/null
  done
  for pid in $slurmd_pid $ctld_pid; do
    for i in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$pid" 2>/dev/null
  done
  reap_leftovers "$T" || echo "FAILED: processes of the test were left behind" >&2
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
cd "$T" || exit 1

host=$(hostname)
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
mkdir -p "$T/state" "$T/spool"
# cred_expire: a requeued job waits that long before it may start (default 120 s);
# sched_interval: how often the scheduler looks at pending jobs (default 60 s).
cat > "$SLURM_CONF" <<CONF
ClusterName=volttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/none
CredType=cred/none
AuthInfo=cred_expire=5
ProctrackType=proctrack/linuxproc
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/slurmctld.log
SlurmdLogFile=$T/slurmd.log
ReturnToService=2
KillWait=5
NodeName=$host NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=volt Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
slurmctld -D -f "$SLURM_CONF" > "$T/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -f "$SLURM_CONF" -N "$host" > "$T/slurmd.out" 2>&1 &
slurmd_pid=$!
for i in $(seq 1 40); do
  sinfo -h -o %T 2>/dev/null | grep -q idle && break
  sleep 0.5
done
sinfo -h -o %T 2>/dev/null | grep -q idle || {
  tail -n 20 "$T/slurmctld.log" "$T/slurmd.log" "$T/slurmctld.out" "$T/slurmd.out"
  fail "the test's Slurm did not come up (its node is not idle)"
}
echo "Slurm up: slurmctld (pid $ctld_pid) on 127.0.0.1:$ctld_port, slurmd (pid $slurmd_pid) on $slurmd_port"

# Two epochs of 55 batches: the progress bar prints a line at batch 50 of each epoch
# (its default line_every_n_steps), which tells the test the first epoch is under way.
args=($(example_args) --trainer.max_epochs 2 --trainer.limit_train_batches 55 --trainer.limit_val_batches 3
      --trainer.limit_test_batches 3 --trainer.enable_progress_bar true --data.dir "$FMNIST_DIR")

# 1. srun: a 2-rank job (MASTER_PORT free, not the 15000 + job id default).
start=$(date +%s)
MASTER_PORT=$(free_port) timeout -k 5 60 srun --job-name volt_srun -n 2 --kill-on-bad-exit=1 \
  "$example" "${args[@]}" --trainer.default_root_dir "$T/srun" > "$T/srun.log" 2>&1
rc=$?
echo "srun 2-rank job: exit $rc in $(( $(date +%s) - start )) s"
[ $rc -eq 0 ] || { tail -n 40 "$T/srun.log"; fail "srun exited with $rc"; }
for r in 0 1; do
  grep -q "ranks             global $r, local $r, node 0$" "$T/srun.log" || fail "no rank $r on node 0 in the plans"
done
grep -q "cluster_env       slurm" "$T/srun.log" || fail "the plan does not name the slurm environment"
check_same_weights "$T/srun.log" "srun"
reference=$(digest_of "$T/srun.log" 0)

# 2. sbatch --requeue, SIGUSR1 to the job's tasks mid-epoch, requeued by Volt, resumed.
cat > "$T/job.sh" <<JOB
#!/bin/sh
#SBATCH --job-name=volt_requeue
#SBATCH --ntasks=2
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=$T/requeue.log
echo "volt-test attempt \${SLURM_RESTART_COUNT:-0}"
exec srun --kill-on-bad-exit=1 "$example" ${args[*]} --trainer.default_root_dir "$T/requeue"
JOB
start=$(date +%s)
job=$(MASTER_PORT=$(free_port) sbatch --parsable "$T/job.sh") || fail "sbatch refused the job"
for i in $(seq 1 225); do
  grep -q "step 50/55" "$T/requeue.log" 2>/dev/null && break
  sleep 0.2
done
grep -q "step 50/55" "$T/requeue.log" 2>/dev/null || { cat "$T/requeue.log"; fail "job $job never reached batch 50"; }
scancel --signal=USR1 "$job" || fail "scancel --signal=USR1 $job failed"
echo "job $job: SIGUSR1 sent after $(( $(date +%s) - start )) s"
state=
for i in $(seq 1 120); do
  state=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  case $state in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
restarts=$(scontrol show job "$job" | grep -o 'Restarts=[0-9]*' | cut -d= -f2)
echo "job $job: $state after $restarts requeue(s), $(( $(date +%s) - start )) s in all"
grep -v '^  ' "$T/requeue.log" | grep -Ev '^(epoch|validation|test batch) ' | tail -n 20
[ "$state" = COMPLETED ] || fail "the requeued job ended $state"
[ "$restarts" = 1 ] || fail "the job was requeued $restarts times, not once"
grep -q "received SIGUSR1: .*saved $T/requeue/hpc_ckpt_1.ckpt; requeueing the job" "$T/requeue.log" ||
  fail "Volt did not report the requeue checkpoint before requeueing"
# Said after scontrol returned, when Slurm may already be cancelling the step: not required in the log.
grep -q "requeued job $job (scontrol requeue" "$T/requeue.log" || echo "note: the line after the requeue did not reach the log"
grep -q "volt-test attempt 1" "$T/requeue.log" || fail "the job did not start a second time"
grep -q "resuming from the requeue checkpoint $T/requeue/hpc_ckpt_1.ckpt" "$T/requeue.log" ||
  fail "the second attempt did not resume from hpc_ckpt_1.ckpt"
check_same_weights "$T/requeue.log" "requeued job"
resumed=$(digest_of "$T/requeue.log" 0)
[ "$resumed" = "$reference" ] ||
  fail "the requeued job ended with weights $resumed, the uninterrupted one with $reference (not bitwise exact)"
echo "requeued and resumed job: bitwise equal to the uninterrupted job ($reference)"
echo "slurm: PASSED"
