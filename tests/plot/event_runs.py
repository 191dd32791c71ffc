#!/usr/bin/env python3
"""volt plot on a TensorBoard run: a short training with logger=tensorboard only, then
`volt plot RUN_DIR` must read its event file (no metrics.csv there) and draw the curves;
a byte flipped in the event file must be refused with the file named (CRC check)."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

ap = argparse.ArgumentParser()
ap.add_argument("--volt", required=True)
ap.add_argument("--example", required=True)
args = ap.parse_args()

tmp = tempfile.mkdtemp(prefix="volt_plot_events.")
try:
    train = subprocess.run([args.example, "--trainer.max_epochs", "2", "--trainer.limit_train_batches", "12",
                            "--trainer.limit_val_batches", "3", "--trainer.logger", "tensorboard",
                            "--trainer.log_every_n_steps", "2", "--trainer.enable_progress_bar", "false",
                            "--trainer.default_root_dir", tmp], capture_output=True, text=True, timeout=300)
    assert train.returncode == 0, train.stdout + train.stderr
    run = os.path.join(tmp, "lightning_logs", "version_0")
    events = [f for f in os.listdir(run) if f.startswith("events.out.tfevents.")]
    assert len(events) == 1 and not os.path.exists(os.path.join(run, "metrics.csv")), os.listdir(run)

    out = os.path.join(tmp, "curves.svg")
    r = subprocess.run([args.volt, "plot", run, "--out", out], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert events[0] in r.stdout, r.stdout
    for metric in ("train_loss", "val_acc", "val_loss"):
        assert metric in r.stdout, f"no {metric} panel: {r.stdout}"
    svg = open(out).read()
    assert svg.count("<polyline") >= 2 and "train_loss" in svg, svg[:400]
    # The logs folder above the run finds it too.
    r = subprocess.run([args.volt, "plot", tmp, "--metrics", "train_loss", "--out", os.path.join(tmp, "a.png")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "1 run, 1 panel" in r.stdout, r.stdout + r.stderr

    damaged = os.path.join(tmp, "damaged")
    os.makedirs(damaged)
    data = bytearray(open(os.path.join(run, events[0]), "rb").read())
    data[len(data) // 2] ^= 0x10
    open(os.path.join(damaged, events[0]), "wb").write(bytes(data))
    bad_out = os.path.join(tmp, "bad.png")
    r = subprocess.run([args.volt, "plot", damaged, "--out", bad_out], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, r.stdout + r.stderr
    assert events[0] in r.stderr and "CRC" in r.stderr.upper(), r.stderr
    assert not os.path.exists(bad_out), "a refused plot wrote its output"
    print("volt plot read the event file of a tensorboard-only run and refused a damaged copy:",
          r.stderr.strip().splitlines()[-1][:160])
finally:
    shutil.rmtree(tmp, ignore_errors=True)
