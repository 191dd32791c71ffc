"""What both Python halves of the conformance harness share: the configuration file's
defaults and checks, the result schema, and reading a run's folder (metrics.csv, .ckpt files).
The C++ side (volt_side.cpp) applies the same defaults; README.md describes all of them."""
import csv
import json
import math
import os

FEATURES = 4

# Keys a configuration may have, and the defaults of its "data" and "model" parts.
CONFIG_KEYS = {"name", "about", "trainer", "data", "model", "callbacks", "ckpt_path"}
DATA_DEFAULTS = {"train": 40, "val": 16, "batch": 4}
MODEL_DEFAULTS = {"lr": 0.1, "val_schedule": [1.0, 0.875, 0.75, 0.625, 0.5, 0.375, 0.25, 0.125],
                  "sanity_value": 64.0, "train_schedule": [], "log_train_epoch": False, "scheduler": None}
TRAINER_KEYS = {"max_epochs", "min_epochs", "max_steps", "min_steps", "limit_train_batches", "limit_val_batches",
                "val_check_interval", "check_val_every_n_epoch", "num_sanity_val_steps", "log_every_n_steps",
                "fast_dev_run", "accumulate_grad_batches", "enable_checkpointing", "logger"}
CALLBACK_KEYS = {
    "ModelCheckpoint": {"filename", "monitor", "mode", "save_top_k", "save_last", "every_n_train_steps",
                        "every_n_epochs", "save_on_train_epoch_end", "auto_insert_metric_name", "dirpath"},
    "EarlyStopping": {"monitor", "min_delta", "patience", "mode", "strict", "check_finite", "stopping_threshold",
                      "divergence_threshold", "check_on_train_epoch_end"},
    "LearningRateMonitor": {"logging_interval", "log_momentum"},
}
# metrics.csv columns whose values are defined to agree (fixed schedules, learning rates);
# others (train_loss) depend on the initial weights and are compared by presence only.
DETERMINISTIC_COLUMNS = ("val_loss", "train_metric", "epoch", "step")
DETERMINISTIC_PREFIXES = ("lr-",)


def to_float(v):
    """A schedule entry: a number, or "nan", "inf", "-inf" (JSON has no literal for them)."""
    if isinstance(v, str):
        if v not in ("nan", "inf", "-inf"):
            raise ValueError(f"schedule value {v!r} is neither a number nor one of 'nan', 'inf', '-inf'")
        return float(v)
    return float(v)


def data_options(cfg):
    return {**DATA_DEFAULTS, **cfg.get("data", {})}


def model_options(cfg):
    return {**MODEL_DEFAULTS, **cfg.get("model", {})}


def load_configs(path):
    """Reads configs.json and checks it: unique names, only keys both sides understand."""
    with open(path, encoding="utf-8") as f:
        configs = json.load(f)
    seen = set()
    for i, cfg in enumerate(configs):
        name = cfg.get("name")
        where = f"{path}: configuration {i} ({name!r})"
        if not isinstance(name, str) or not name or not all(c.isalnum() or c in "_-." for c in name):
            raise ValueError(f"{where}: 'name' must be a non-empty string of letters, digits, '_', '-', '.'")
        if name in seen:
            raise ValueError(f"{where}: the name is used twice; names must be unique")
        seen.add(name)
        for keys, known, what in ((cfg.keys(), CONFIG_KEYS, "key"),
                                  (cfg.get("trainer", {}).keys(), TRAINER_KEYS, "trainer flag"),
                                  (cfg.get("data", {}).keys(), DATA_DEFAULTS.keys(), "data key"),
                                  (cfg.get("model", {}).keys(), MODEL_DEFAULTS.keys(), "model key")):
            unknown = set(keys) - set(known)
            if unknown:
                raise ValueError(f"{where}: unknown {what}(s) {sorted(unknown)}; known: {sorted(known)}")
        for cb in cfg.get("callbacks", []):
            kind = cb.get("type")
            if kind not in CALLBACK_KEYS:
                raise ValueError(f"{where}: callback type {kind!r}; known: {sorted(CALLBACK_KEYS)}")
            unknown = set(cb) - CALLBACK_KEYS[kind] - {"type"}
            if unknown:
                raise ValueError(f"{where}: unknown {kind} argument(s) {sorted(unknown)}")
    return configs


def empty_result(name):
    """The result schema, filled in by each side (see README.md)."""
    return {"name": name, "accepted": True, "error": "", "train_batches_per_epoch": [], "global_step": None,
            "current_epoch": None, "should_stop": None, "sanity_batches": 0, "val_runs": [],
            "early_stopping": None, "best_model_paths": []}


def relative_or_empty(path, root):
    if not path:
        return ""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(root))


def write_json_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _cell(text):
    """A metrics.csv cell as a number (nan/inf included); None when empty."""
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return text


def is_deterministic(column):
    return column in DETERMINISTIC_COLUMNS or column.startswith(DETERMINISTIC_PREFIXES)


def read_run_folder(root):
    """The file observables of one run: the .ckpt files (paths relative to root, sorted) and
    every metrics.csv (header; per row: step, epoch, the columns it has, deterministic values)."""
    ckpts, csvs = [], {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            if f.endswith(".ckpt"):
                ckpts.append(rel)
            elif f == "metrics.csv":
                with open(os.path.join(dirpath, f), newline="", encoding="utf-8") as fh:
                    reader = csv.reader(fh)
                    header = next(reader, [])
                    rows = []
                    for line in reader:
                        cells = dict(zip(header, line))
                        have = sorted(k for k, v in cells.items() if v != "" and k not in ("step", "epoch"))
                        values = {k: _cell(v) for k, v in cells.items() if v != "" and is_deterministic(k)}
                        rows.append({"step": _cell(cells.get("step")), "epoch": _cell(cells.get("epoch")),
                                     "columns": have, "values": values})
                csvs[rel] = {"header": header, "rows": rows}
    return {"checkpoints": sorted(ckpts), "metrics_csv": csvs}


def same_number(a, b):
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
    return a == b
