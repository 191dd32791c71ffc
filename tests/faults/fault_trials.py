#!/usr/bin/env python3
"""Fault trials: real processes killed at random moments, and what must hold afterwards.

  fault_trials.py ddp-kill        --program volt_dist_program --volt volt [--repeat 10]
  fault_trials.py checkpoint-kill --program volt_dist_program --volt volt [--repeat 30]
  fault_trials.py sigterm-resume  --program volt_dist_program --volt volt [--repeat 6]

ddp-kill: a 2-rank ddp job (under `volt launch`, or ddp's own subprocess launcher) loses one rank to
SIGKILL from outside at a random moment: every process of the job is gone within the bound (/proc), the
job exits non-zero, and its report names the rank and the signal.
checkpoint-kill: a run whose ModelCheckpoint writes a checkpoint every step is SIGKILLed at a random moment:
every .ckpt on disk loads (`volt inspect`), and a resume from the newest trains on.
sigterm-resume: a 2-rank ddp job (ddp's own launcher) gets SIGTERM at a random moment, at rank 0, which
passes it on (--signal-every-rank: at every rank at once, as systemd or pkill would send it); it stops with
interrupted.ckpt, and the run resumed from it ends with weights bitwise equal to a run never interrupted.
The program is tests/distributed/dist_program.cpp. Moments come from --seed (default: the time), printed
so that a failure can be replayed. Exit status 1 when a trial fails, with what was seen.
"""
import argparse
import glob
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KILL_BOUND_S = 10.0  # every process of a job is gone this long after one rank was killed
RUN_TIMEOUT_S = 60.0


def processes_with(marker):
    """pid -> command line of every process (but this one) whose command line holds `marker`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            found[int(pid)] = cmd
    return found


def ranks_running(marker, world_size, rank0_pid=None):
    """{rank: pid} once all `world_size` ranks of a job run, else None. `rank0_pid`: rank 0 is that process
    (ddp's own launcher: the program started by hand is rank 0 and has no RANK variable)."""
    ranks = {}
    for pid in processes_with(marker):
        rank = 0 if pid == rank0_pid else rank_of(pid)
        if rank is not None and 0 <= rank < world_size:
            ranks[rank] = pid
    return ranks if len(ranks) == world_size else None


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
        return int(env.get(b"RANK", b"-1"))
    except (OSError, ValueError):
        return None


class Job:
    """A command run in its own session, stdout and stderr merged into a file."""

    def __init__(self, cmd, log, env=None):
        self.cmd, self.log_path = cmd, log
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=dict(os.environ, **(env or {})))

    def wait(self, timeout=RUN_TIMEOUT_S):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            rc = None
        self.log.close()
        return rc

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()

    def cleanup(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()


def wait_for(predicate, timeout, step=0.01):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


def run(cmd, timeout=RUN_TIMEOUT_S, env=None):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    return r.returncode, r.stdout.decode(errors="replace")


def read_result(path):
    fields, params = {}, []
    with open(path) as f:
        for line in f:
            key, _, value = line.strip().partition(" ")
            if key == "p":
                params.append(value)  # exact hex floats: compared as text, bitwise
            else:
                fields[key] = value
    return fields, params


class Trials:
    def __init__(self, name, repeat):
        self.name, self.repeat, self.failures, self.passed = name, repeat, [], 0

    def fail(self, i, what, output=""):
        tail = "\n".join(output.strip().splitlines()[-25:])
        self.failures.append(f"trial {i}: {what}" + (f"\n--- output (tail) ---\n{tail}" if tail else ""))
        print(f"  trial {i}: FAILED: {what}", flush=True)

    def finish(self, started):
        print(f"{self.name}: {self.passed} of {self.repeat} trials passed in {time.monotonic() - started:.1f} s",
              flush=True)
        for f in self.failures:
            print(f, file=sys.stderr)
        return 0 if not self.failures and self.passed == self.repeat else 1


def ddp_kill(args, tmp, rng):
    trials, started = Trials("ddp-kill", args.repeat), time.monotonic()
    modes = [("volt launch", 1), ("volt launch", 0), ("ddp subprocess launcher", 1)]
    for i in range(args.repeat):
        mode, victim = modes[i % len(modes)]
        out = os.path.join(tmp, f"ddp_kill_{i}")
        port = str(29610 + i)
        train = [args.program, "--out", out, "--root", out + "_root", "--strategy", "ddp", "--devices", "2",
                 "--steps", "1000000", "--samples", "6400"]
        cmd = ([args.volt, "launch", "--nproc-per-node", "2", "--master-port", port, "--"] + train
               if mode == "volt launch" else train)
        job = Job(cmd, out + ".log", env={"MASTER_PORT": port})
        try:
            if mode == "volt launch":
                ranks = wait_for(lambda: ranks_running(out + " ", 2), timeout=20)
            else:  # rank 0 is the program started here (no RANK variable); it starts rank 1
                ranks = wait_for(lambda: ranks_running(out + " ", 2, job.proc.pid), timeout=20)
            if not ranks or victim not in ranks:
                trials.fail(i, f"{mode}: the two ranks did not start", job.output())
                continue
            delay = rng.uniform(0.1, 2.5)
            time.sleep(delay)
            killed_at = time.monotonic()
            os.kill(ranks[victim], signal.SIGKILL)
            gone = wait_for(lambda: not processes_with(out + " "), timeout=KILL_BOUND_S, step=0.02)
            gone_after = time.monotonic() - killed_at
            rc = job.wait(timeout=KILL_BOUND_S)
            output = job.output()
            what = f"{mode}, rank {victim} killed {delay:.2f} s after start"
            if not gone:
                trials.fail(i, f"{what}: processes left {KILL_BOUND_S} s later: {processes_with(out + ' ')}", output)
            elif rc is None or rc == 0:
                trials.fail(i, f"{what}: the job exited with {rc}, not a failure", output)
            elif not re.search(rf"rank {victim} \(pid {ranks[victim]}\b", output) or "SIGKILL" not in output:
                trials.fail(i, f"{what}: the report does not name rank {victim} (pid {ranks[victim]}) and SIGKILL",
                            output)
            else:
                trials.passed += 1
                print(f"  trial {i}: {what}: job gone in {gone_after:.2f} s, exit {rc}, rank and SIGKILL reported",
                      flush=True)
        finally:
            job.cleanup()
    return trials.finish(started)


def inspect(volt, path):
    rc, output = run([volt, "inspect", path, "--json"])
    try:
        report = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
    except ValueError:
        report = {}
    return rc, report, output


def checkpoint_kill(args, tmp, rng):
    trials, started = Trials("checkpoint-kill", args.repeat), time.monotonic()
    files_checked = temp_left = temp_after = mid_write = 0
    for i in range(args.repeat):
        root = os.path.join(tmp, f"ckpt_kill_{i}")
        # One batch per epoch: the default ModelCheckpoint writes a checkpoint at every step.
        common = [args.program, "--root", root, "--strategy", "single_device", "--devices", "1", "--checkpoint", "1",
                  "--samples", "8", "--batch", "8"]
        job = Job(common + ["--out", root + "_a", "--steps", "1000000"], root + ".log")
        try:
            ckpts = lambda: glob.glob(os.path.join(root, "**", "*.ckpt"), recursive=True)
            if not wait_for(ckpts, timeout=20):
                trials.fail(i, "no checkpoint was written", job.output())
                continue
            delay = rng.uniform(0.0, 0.4)
            time.sleep(delay)
            os.kill(job.proc.pid, signal.SIGKILL)
            job.wait()
        finally:
            job.cleanup()
        temp_files = lambda: [f for f in glob.glob(os.path.join(root, "**", ".*"), recursive=True) if ".tmp." in f]
        temps = len(temp_files())
        temp_left += temps
        mid_write += temps > 0
        newest, newest_step, bad = None, -1, []
        on_disk = sorted(ckpts())
        for path in on_disk:
            files_checked += 1
            rc, report, output = inspect(args.volt, path)
            step = report.get("meta", {}).get("global_step") if rc == 0 else None
            if rc != 0 or report.get("kind") != "checkpoint" or not isinstance(step, int):
                bad.append(f"{os.path.basename(path)} (volt inspect exit {rc}): {output.strip()[-300:]}")
            elif step > newest_step:
                newest, newest_step = path, step
        what = f"killed {delay:.2f} s after the first checkpoint"
        if bad:
            trials.fail(i, f"{what}: checkpoints that do not load: " + "; ".join(bad))
            continue
        if newest is None:
            trials.fail(i, f"{what}: no checkpoint left on disk")
            continue
        rc, output = run(common + ["--out", root + "_b", "--ckpt", newest, "--steps", str(newest_step + 3)])
        if rc != 0:
            trials.fail(i, f"{what}: the resume from {os.path.basename(newest)} failed (exit {rc})", output)
            continue
        fields, _ = read_result(root + "_b.rank0")
        if fields.get("global_step") != str(newest_step + 3):
            trials.fail(i, f"{what}: resumed at step {newest_step}, ended at {fields.get('global_step')}, "
                           f"not {newest_step + 3}", output)
            continue
        temp_after += len(temp_files())
        trials.passed += 1
        print(f"  trial {i}: {what}{' (mid-write: a temporary file was left)' if temps else ''}: {len(on_disk)} "
              f"checkpoints load, resumed from step {newest_step}", flush=True)
        shutil.rmtree(root, ignore_errors=True)
    print(f"checkpoint-kill: {files_checked} checkpoint files loaded with volt inspect; {mid_write} kills landed "
          f"inside a write, leaving {temp_left} temporary files; {temp_after} were still there after the resumes")
    return trials.finish(started)


def sigterm_resume(args, tmp, rng):
    trials, started = Trials("sigterm-resume", args.repeat), time.monotonic()
    steps = "600"
    common = ["--strategy", "ddp", "--devices", "2", "--steps", steps, "--shuffle", "1", "--samples", "320",
              "--checkpoint", "1"]
    base = os.path.join(tmp, "sigterm_full")
    rc, output = run([args.program, "--out", base, "--root", base + "_root"] + common, env={"MASTER_PORT": "29640"})
    if rc != 0:
        trials.fail("baseline", f"the uninterrupted run failed (exit {rc})", output)
        return trials.finish(started)
    _, expected = read_result(base + ".rank0")
    attempts = 0
    while trials.passed + len(trials.failures) < args.repeat and attempts < args.repeat + 6:
        attempts += 1
        i = trials.passed + len(trials.failures)
        everyone = args.signal_every_rank
        out, root = os.path.join(tmp, f"sigterm_{attempts}"), os.path.join(tmp, f"sigterm_{attempts}_root")
        port = {"MASTER_PORT": str(29641 + attempts)}
        job = Job([args.program, "--out", out + "_part", "--root", root] + common, out + ".log", env=port)
        try:
            ckpts = lambda: glob.glob(os.path.join(root, "**", "*.ckpt"), recursive=True)
            if not wait_for(ckpts, timeout=30):
                trials.fail(i, "training did not start (no checkpoint)", job.output())
                continue
            delay = rng.uniform(0.0, 1.0)
            time.sleep(delay)
            ranks = ranks_running(out + "_part ", 2, job.proc.pid) or {0: job.proc.pid}
            targets = list(ranks.values()) if everyone else [ranks[0]]
            for p in targets:
                os.kill(p, signal.SIGTERM)
            rc = job.wait()
            output = job.output()
        finally:
            job.cleanup()
        what = f"SIGTERM to {'every rank' if everyone else 'rank 0'} {delay:.2f} s after the first checkpoint"
        interrupted = glob.glob(os.path.join(root, "**", "interrupted.ckpt"), recursive=True)
        if rc == -signal.SIGTERM and not interrupted and glob.glob(os.path.join(root, "**", f"*step={steps}.ckpt"),
                                                                   recursive=True):
            # Training had ended (its last checkpoint is there) and fit had returned: the program's own
            # default action for SIGTERM applies again.
            print(f"  trial {i}: {what}: training had finished first; not a trial, tried again", flush=True)
            continue
        if rc != 0:
            trials.fail(i, f"{what}: the interrupted run exited {rc}", output)
            continue
        fields, _ = read_result(out + "_part.rank0")
        if fields.get("global_step") == steps:
            print(f"  trial {i}: {what}: the run had finished first; not a trial, tried again", flush=True)
            continue
        if len(interrupted) != 1:
            trials.fail(i, f"{what}: stopped at step {fields.get('global_step')} without one interrupted.ckpt "
                           f"({interrupted})", output)
            continue
        rc, output = run([args.program, "--out", out + "_resumed", "--root", root, "--ckpt", interrupted[0]] + common,
                         env=port)
        if rc != 0:
            trials.fail(i, f"{what}: the resume failed (exit {rc})", output)
            continue
        r0 = read_result(out + "_resumed.rank0")
        r1 = read_result(out + "_resumed.rank1")
        if r0[1] != expected or r1[1] != expected or r0[0].get("global_step") != steps:
            trials.fail(i, f"{what}: stopped at step {fields.get('global_step')}; the resumed run's weights are not "
                           f"bitwise those of the uninterrupted run", output)
            continue
        trials.passed += 1
        print(f"  trial {i}: {what}: stopped at step {fields.get('global_step')}, resumed to {steps}, weights "
              f"bitwise equal", flush=True)
    return trials.finish(started)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trial", choices=["ddp-kill", "checkpoint-kill", "sigterm-resume"])
    parser.add_argument("--program", required=True, help="build/tests/volt_dist_program")
    parser.add_argument("--volt", required=True, help="build/tools/volt/volt")
    parser.add_argument("--repeat", type=int, help="trials (default: 10, 30, 6)")
    parser.add_argument("--signal-every-rank", action="store_true",
                        help="sigterm-resume: signal every rank at once (as systemd or pkill would), not rank 0 only")
    parser.add_argument("--seed", type=int, default=int(time.time()), help="seeds the random moments")
    args = parser.parse_args()
    args.repeat = args.repeat or {"ddp-kill": 10, "checkpoint-kill": 30, "sigterm-resume": 6}[args.trial]
    for path in (args.program, args.volt):
        if not os.access(path, os.X_OK):
            parser.error(f"{path} is not an executable; build it first")
    print(f"{args.trial}: {args.repeat} trials, --seed {args.seed}", flush=True)
    rng = random.Random(args.seed)
    tmp = tempfile.mkdtemp(prefix=f"volt_faults_{args.trial}_")
    try:
        status = {"ddp-kill": ddp_kill, "checkpoint-kill": checkpoint_kill, "sigterm-resume": sigterm_resume}[
            args.trial](args, tmp, rng)
    finally:
        if os.environ.get("VOLT_FAULTS_KEEP"):
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(status)


if __name__ == "__main__":
    main()
