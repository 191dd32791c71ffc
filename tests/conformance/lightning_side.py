"""The Lightning side of the conformance harness: runs every configuration of configs.json
through PyTorch Lightning 2.2.5 (the oracle) in this one process, each in its own folder,
and writes one result JSON per configuration (the schema is in README.md).

Run with /usr/bin/python3 and the oracle's PYTHONPATH (run_conformance.py does both):
    lightning_side.py CONFIGS WORKDIR OUTDIR [NAME ...]
"""
import logging
import os
import shutil
import sys
import time
import traceback
import warnings

import compat  # noqa: F401  (must come before lightning: torch 1.13 + Python 3.11 fix)
import torch
import lightning.pytorch as pl
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.loggers import CSVLogger
from torch.utils.data import DataLoader, TensorDataset

import conformance_common as common


def schedule_value(schedule, index):
    """The index-th entry, the last one repeated past the end (the same rule as the C++ side)."""
    return common.to_float(schedule[min(index, len(schedule) - 1)])


class ConformanceModule(pl.LightningModule):
    """A Linear(4, 1) regression whose logged validation metric follows a fixed schedule."""

    def __init__(self, cfg):
        super().__init__()
        self.layer = torch.nn.Linear(common.FEATURES, 1)
        self.cfg = cfg
        self.model_cfg = common.model_options(cfg)
        self.train_batches = {}  # epoch -> training_step calls
        self.sanity_batches = 0
        self.val_runs = []  # [epoch, batches into the epoch, global_step, val batches]
        self.val_run_index = 0
        self.batches_this_epoch = 0

    def on_train_epoch_start(self):
        self.batches_this_epoch = 0

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        epoch = self.current_epoch
        self.train_batches[epoch] = self.train_batches.get(epoch, 0) + 1
        self.batches_this_epoch += 1
        m = self.model_cfg
        self.log("train_loss", loss, on_step=True, on_epoch=m["log_train_epoch"])
        if m["train_schedule"]:
            value = schedule_value(m["train_schedule"], epoch)
            self.log("train_metric", torch.tensor(value), on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.layer(x)
        m = self.model_cfg
        if self.trainer.sanity_checking:
            self.sanity_batches += 1
            value = m["sanity_value"]
        else:
            if batch_idx == 0:
                self.val_runs.append([self.current_epoch, self.batches_this_epoch, self.global_step, 0])
            self.val_runs[-1][3] += 1
            value = schedule_value(m["val_schedule"], len(self.val_runs) - 1)
        self.log("val_loss", torch.tensor(value), on_step=False, on_epoch=True)

    def configure_optimizers(self):
        m = self.model_cfg
        opt = torch.optim.SGD(self.parameters(), lr=m["lr"])
        sched = m["scheduler"]
        if not sched:
            return opt
        if sched["type"] != "StepLR":
            raise ValueError(f"scheduler type {sched['type']!r} is not one the harness knows (StepLR)")
        s = torch.optim.lr_scheduler.StepLR(opt, step_size=sched["step_size"], gamma=sched["gamma"])
        conf = {"scheduler": s, "interval": sched.get("interval", "epoch"), "frequency": sched.get("frequency", 1)}
        if sched.get("name"):
            conf["name"] = sched["name"]
        return {"optimizer": opt, "lr_scheduler": conf}


def make_loader(n, batch, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, common.FEATURES, generator=g)
    y = torch.randn(n, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=False)


def make_callbacks(cfg):
    out = []
    for c in cfg.get("callbacks", []):
        kind, args = c["type"], {k: v for k, v in c.items() if k != "type"}
        for key in ("min_delta", "stopping_threshold", "divergence_threshold"):
            if key in args and args[key] is not None:
                args[key] = common.to_float(args[key])
        if kind == "ModelCheckpoint":
            out.append(ModelCheckpoint(**args))
        elif kind == "EarlyStopping":
            out.append(EarlyStopping(**args))
        elif kind == "LearningRateMonitor":
            out.append(LearningRateMonitor(**args))
        else:
            raise ValueError(f"callback type {kind!r} is not one the harness knows")
    return out


def run_one(cfg, root):
    result = common.empty_result(cfg["name"])
    data = common.data_options(cfg)
    module = None
    trainer = None
    try:
        torch.manual_seed(0)
        module = ConformanceModule(cfg)
        callbacks = make_callbacks(cfg)
        flags = dict(cfg.get("trainer", {}))
        use_logger = flags.pop("logger", True)
        logger = CSVLogger(save_dir=root, name="lightning_logs") if use_logger else False
        trainer = pl.Trainer(accelerator="cpu", devices=1, enable_progress_bar=False, enable_model_summary=False,
                             default_root_dir=root, logger=logger, callbacks=callbacks, **flags)
        train = make_loader(data["train"], data["batch"], 1)
        val = make_loader(data["val"], data["batch"], 2) if data["val"] > 0 else None
        trainer.fit(module, train_dataloaders=train, val_dataloaders=val, ckpt_path=cfg.get("ckpt_path"))
    except Exception as e:  # the configuration was refused: record how, compare only that it was
        result["accepted"] = False
        result["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:300]
    if module is not None:
        result["train_batches_per_epoch"] = [module.train_batches.get(e, 0) for e in
                                             range(max(module.train_batches, default=-1) + 1)]
        result["sanity_batches"] = module.sanity_batches
        result["val_runs"] = module.val_runs
    if trainer is not None:
        result["global_step"] = trainer.global_step
        result["current_epoch"] = trainer.current_epoch
        result["should_stop"] = bool(trainer.should_stop)
        for cb in trainer.callbacks:
            if isinstance(cb, EarlyStopping):
                result["early_stopping"] = {"stopped_epoch": cb.stopped_epoch, "wait_count": cb.wait_count}
        result["best_model_paths"] = [common.relative_or_empty(cb.best_model_path, root)
                                      for cb in trainer.callbacks
                                      if isinstance(cb, ModelCheckpoint) and cb.best_model_path]
    return result


def main(argv):
    configs_path, workdir, outdir = argv[1], argv[2], argv[3]
    only = set(argv[4:])
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning.fabric").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    configs = common.load_configs(configs_path)
    os.makedirs(outdir, exist_ok=True)
    start = time.monotonic()
    count = 0
    for cfg in configs:
        if only and cfg["name"] not in only:
            continue
        root = os.path.join(workdir, cfg["name"])
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(root)
        try:
            result = run_one(cfg, root)
        except Exception:  # a harness bug, not a refusal: say so loudly, keep the others going
            traceback.print_exc()
            result = common.empty_result(cfg["name"])
            result["harness_error"] = traceback.format_exc().splitlines()[-1]
        common.write_json_atomic(os.path.join(outdir, cfg["name"] + ".json"), result)
        count += 1
    print(f"lightning: {count} configurations in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
