"""The comparator of the conformance harness: for every configuration, the observables of the
Lightning run and of the Volt run side by side; prints agree / the exact differences per
configuration and a summary line. A difference passes only when known_differences.json lists
it (configuration and observable) with a reason and a section of docs/lightning-differences.md.

    compare.py CONFIGS RESULTS_DIR WORK_DIR [--known FILE] [--docs FILE]

RESULTS_DIR/{lightning,volt}/<name>.json are the sides' results, WORK_DIR/{lightning,volt}/<name>/
their run folders (metrics.csv, .ckpt files)."""
import argparse
import json
import os
import sys

import conformance_common as common

# In the order they are reported. Refusals compare only "accepted" (and that Volt's is a volt::Error).
PROCESS_OBSERVABLES = ("train_batches_per_epoch", "global_step", "current_epoch", "should_stop", "sanity_batches",
                       "val_runs", "early_stopping", "best_model_paths")
OBSERVABLES = ("accepted", "error_kind") + PROCESS_OBSERVABLES + (
    "checkpoints", "csv.files", "csv.columns", "csv.header_order", "csv.rows")


def _short(value):
    return json.dumps(value, sort_keys=True, allow_nan=True)


def _row_text(row):
    vals = ",".join(f"{k}={_short(v)}" for k, v in sorted(row["values"].items()) if k not in ("step", "epoch"))
    return f"step={_short(row['step'])} epoch={_short(row['epoch'])} cols={','.join(row['columns'])}" + (
        f" vals={vals}" if vals else "")


def _same(a, b):
    """Equality where NaN equals NaN (a NaN schedule value on both sides agrees)."""
    if isinstance(a, float) and isinstance(b, float):
        return common.same_number(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def diff_rows(lrows, vrows):
    """Row-by-row differences of two metrics.csv files, as text lines (all of them)."""
    out = []
    for i in range(max(len(lrows), len(vrows))):
        lr = lrows[i] if i < len(lrows) else None
        vr = vrows[i] if i < len(vrows) else None
        if lr is not None and vr is not None and _same(lr, vr):
            continue
        out.append(f"row {i}: lightning {_row_text(lr) if lr else '(none)'} | volt {_row_text(vr) if vr else '(none)'}")
    return out


def differences(lres, vres, lrun, vrun):
    """[(observable, detail text)] for one configuration; empty when everything agrees."""
    diffs = []
    for side, res in (("lightning", lres), ("volt", vres)):
        if res is None:
            return [("result", f"{side} wrote no result")]
        if res.get("harness_error"):
            return [("harness", f"{side} side harness error: {res['harness_error']}")]
    if lres["accepted"] != vres["accepted"]:
        return [("accepted", f"lightning {'accepted' if lres['accepted'] else 'refused'} "
                             f"({lres['error'] or 'ran'}) | volt {'accepted' if vres['accepted'] else 'refused'} "
                             f"({vres['error'] or 'ran'})")]
    if not lres["accepted"]:
        kind = vres.get("error_kind", "")
        if not kind.startswith("volt::"):
            diffs.append(("error_kind", f"volt refused with {kind or 'an unknown exception'}, not a volt::Error: "
                                        f"{vres['error']}"))
        return diffs
    for key in PROCESS_OBSERVABLES:
        if not _same(lres.get(key), vres.get(key)):
            diffs.append((key, f"lightning {_short(lres.get(key))} | volt {_short(vres.get(key))}"))
    if lrun["checkpoints"] != vrun["checkpoints"]:
        only_l = [c for c in lrun["checkpoints"] if c not in vrun["checkpoints"]]
        only_v = [c for c in vrun["checkpoints"] if c not in lrun["checkpoints"]]
        diffs.append(("checkpoints", f"only lightning {_short(only_l)} | only volt {_short(only_v)}"))
    lcsv, vcsv = lrun["metrics_csv"], vrun["metrics_csv"]
    if sorted(lcsv) != sorted(vcsv):
        diffs.append(("csv.files", f"lightning {_short(sorted(lcsv))} | volt {_short(sorted(vcsv))}"))
    for path in sorted(set(lcsv) & set(vcsv)):
        lh, vh = lcsv[path]["header"], vcsv[path]["header"]
        if sorted(lh) != sorted(vh):
            diffs.append(("csv.columns", f"{path}: only lightning {_short(sorted(set(lh) - set(vh)))} | "
                                         f"only volt {_short(sorted(set(vh) - set(lh)))}"))
        elif lh != vh:
            diffs.append(("csv.header_order", f"{path}: lightning {','.join(lh)} | volt {','.join(vh)}"))
        rows = diff_rows(lcsv[path]["rows"], vcsv[path]["rows"])
        if rows:
            diffs.append(("csv.rows", f"{path}: {len(lcsv[path]['rows'])} rows | {len(vcsv[path]['rows'])} rows\n"
                          + "\n".join("      " + r for r in rows)))
    return diffs


def load_known(path, config_names, docs_text):
    """known_differences.json: a list of {"config": name or [names], "observable": name or [names],
    "reason", "doc"};
    "doc" is text of docs/lightning-differences.md (a heading or a table entry) that describes it.
    Returns ({(config, observable): entry}, [problems with the file])."""
    if not os.path.exists(path):
        return {}, []
    with open(path, encoding="utf-8") as f:
        entries = json.load(f)
    return load_known_entries(entries, config_names, docs_text, os.path.basename(path))


def load_known_entries(entries, config_names, docs_text, source="known_differences.json"):
    problems = []
    known = {}
    for i, e in enumerate(entries):
        where = f"{source} entry {i}"
        missing = [k for k in ("config", "observable", "reason", "doc") if not e.get(k)]
        if missing:
            problems.append(f"{where}: lacks {missing}")
            continue
        observables = [e["observable"]] if isinstance(e["observable"], str) else e["observable"]
        for obs in observables:
            if obs not in OBSERVABLES:
                problems.append(f"{where}: observable {obs!r} is not one of {list(OBSERVABLES)}")
        if docs_text is None:
            problems.append(f"{where}: docs/lightning-differences.md does not exist; each allowed difference "
                            f"must be described there (section {e['doc']!r})")
        elif e["doc"] not in docs_text:
            problems.append(f"{where}: docs/lightning-differences.md does not contain {e['doc']!r} (the heading "
                            f"or table entry that describes this difference)")
        for name in ([e["config"]] if isinstance(e["config"], str) else e["config"]):
            if name not in config_names:
                problems.append(f"{where}: configuration {name!r} is not in configs.json")
            for obs in observables:
                if (name, obs) in known:
                    problems.append(f"{where}: ({name}, {obs}) is listed twice")
                known[(name, obs)] = e
    return known, problems


def compare_all(configs, results_dir, work_dir, known, problems=(), report_path=None):
    """Prints the report (and writes it as JSON to report_path: per differing configuration its
    differences); returns True when every difference is allow-listed and nothing is stale."""
    agree = allowed_only = differ = 0
    used = set()
    report = {}
    for cfg in configs:
        name = cfg["name"]
        res = []
        for side in ("lightning", "volt"):
            p = os.path.join(results_dir, side, name + ".json")
            if os.path.exists(p):
                with open(p, encoding="utf-8") as f:
                    res.append(json.load(f))
            else:
                res.append(None)
        runs = [common.read_run_folder(os.path.join(work_dir, side, name)) for side in ("lightning", "volt")]
        diffs = differences(res[0], res[1], runs[0], runs[1])
        if not diffs:
            agree += 1
            print(f"agree   {name}")
            continue
        unexplained = [d for d in diffs if (name, d[0]) not in known]
        used.update((name, d[0]) for d in diffs if (name, d[0]) in known)
        if unexplained:
            differ += 1
            print(f"DIFFER  {name}")
        else:
            allowed_only += 1
            print(f"known   {name}")
        report[name] = []
        for obs, text in diffs:
            entry = known.get((name, obs))
            tag = f" [known: {entry['reason']}]" if entry else ""
            print(f"    {obs}: {text}{tag}")
            report[name].append({"observable": obs, "detail": text, "known": bool(entry)})
    stale = sorted(k for k in known if k not in used)
    for name, obs in stale:
        print(f"STALE   allow-list entry ({name}, {obs}): the configuration agrees there now; remove the entry")
    for p in problems:
        print(f"BAD     {p}")
    ok = differ == 0 and not stale and not problems
    print(f"conformance: {len(configs)} configurations: {agree} agree, {allowed_only} differ only as allow-listed, "
          f"{differ} differ, {len(stale)} stale allow-list entries, {len(problems)} allow-list problems: "
          f"{'PASS' if ok else 'FAIL'}")
    if report_path:
        common.write_json_atomic(report_path, {"differences": report, "stale": [list(k) for k in stale],
                                               "problems": list(problems), "pass": ok})
    return ok


def main(argv=None):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("configs")
    ap.add_argument("results_dir")
    ap.add_argument("work_dir")
    ap.add_argument("--known", default=os.path.join(here, "known_differences.json"))
    ap.add_argument("--docs", default=os.path.join(here, "..", "..", "docs", "lightning-differences.md"))
    args = ap.parse_args(argv)
    configs = common.load_configs(args.configs)
    docs_text = open(args.docs, encoding="utf-8").read() if os.path.exists(args.docs) else None
    known, problems = load_known(args.known, {c["name"] for c in configs}, docs_text)
    return 0 if compare_all(configs, args.results_dir, args.work_dir, known, problems) else 1


if __name__ == "__main__":
    sys.exit(main())
