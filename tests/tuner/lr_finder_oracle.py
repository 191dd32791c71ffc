"""Lightning 2.2.5's learning-rate finder on given raw losses: its schedulers, _LRCallback and _LRFinder.suggestion,
driven by a stand-in trainer in the order Lightning's loop calls them (batch start, optimizer step, batch end,
scheduler step). Prints one JSON object per case; floats as float.hex() so that the C++ side compares bits.

Run with /usr/bin/python3 and the oracle's PYTHONPATH (tests/tuner/lr_finder_test.cpp does).
usage: lr_finder_oracle.py CASES.json  (a list of {mode, min_lr, max_lr, num_training, threshold, raw})
"""
import json
import sys
from types import SimpleNamespace

import compat  # noqa: F401  (../shared/oracle: torch 1.13 on Python 3.11)
import torch
from lightning.pytorch.tuner.lr_finder import _ExponentialLR, _LinearLR, _LRCallback, _LRFinder


def run(case):
    n = case["num_training"]
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=case["min_lr"])
    for group in optimizer.param_groups:  # as _LRFinder._exchange_scheduler
        group["lr"] = case["min_lr"]
        group["initial_lr"] = case["min_lr"]
    cls = _LinearLR if case["mode"] == "linear" else _ExponentialLR
    scheduler = cls(optimizer, case["max_lr"], n)
    callback = _LRCallback(n, case["threshold"], progress_bar_refresh_rate=0)
    trainer = SimpleNamespace(fit_loop=SimpleNamespace(batch_idx=0), accumulate_grad_batches=1, global_step=0,
                              should_stop=False, lr_scheduler_configs=[SimpleNamespace(scheduler=scheduler)],
                              strategy=SimpleNamespace(broadcast=lambda x: x))
    stopped_at = None
    for k in range(n):
        trainer.fit_loop.batch_idx = k
        callback.on_train_batch_start(trainer, None, None, k)
        optimizer.step()
        trainer.global_step = k + 1
        callback.on_train_batch_end(trainer, None, torch.tensor(case["raw"][k]), None, k)
        scheduler.step()
        if trainer.should_stop:
            stopped_at = k
            break
    finder = _LRFinder(case["mode"], case["min_lr"], case["max_lr"], n)
    finder.results = {"lr": callback.lrs, "loss": callback.losses}
    suggestion = finder.suggestion()
    return {"lrs": [float(x).hex() for x in callback.lrs], "losses": [float(x).hex() for x in callback.losses],
            "stopped_at": stopped_at, "index": finder._optimal_idx,
            "suggestion": None if suggestion is None else float(suggestion).hex()}


def main():
    with open(sys.argv[1]) as f:
        cases = json.load(f)
    print(json.dumps([run(c) for c in cases]))


if __name__ == "__main__":
    main()
