"""Runs the conformance suite: every configuration of configs.json through PyTorch Lightning 2.2.5
(one Python process) and through Volt (one C++ program), both at once, then the comparator.

    run_conformance.py --volt BUILD/tests/conformance/volt_conformance --work DIR --oracle-dest DIR [NAME ...]

The oracle is $VOLT_ORACLE_DIR if set, else $VOLT_SOURCE_DIR/../shared/oracle, else
/work/shared/oracle; without it the suite is skipped (exit 77) with the reason. It is unpacked
once into --oracle-dest (a build folder, never shared/) and reused. Exit 0: every configuration agrees or differs only as
known_differences.json allows; 1: differences (printed); 2: the harness could not run."""
import argparse
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import conformance_common as common  # noqa: E402

SKIP = 77
PYTHON = "/usr/bin/python3"  # Debian's, with python3-torch (the python3 on PATH may lack torch)


def find_oracle():
    """The oracle folders looked at, in order, and the first that exists (or None)."""
    tried = []
    if os.environ.get("VOLT_ORACLE_DIR"):  # an explicit choice, no fallback
        candidates = [os.environ["VOLT_ORACLE_DIR"]]
    else:
        # realpath first: normpath below folds "src/.." lexically, which is wrong when src is a link (.ci/run's).
        source = os.path.realpath(os.environ.get("VOLT_SOURCE_DIR") or os.path.join(HERE, "..", ".."))
        candidates = [os.path.join(source, "..", "shared", "oracle"), "/work/shared/oracle"]
    for cand in candidates:
        cand = os.path.normpath(cand)
        tried.append(cand)
        if os.path.isfile(os.path.join(cand, "setup.sh")):
            return tried, cand
    return tried, None


def oracle_pythonpath(oracle, dest):
    """Unpacks the oracle into dest once (its setup.sh checks it with a 5-step fit) and returns the
    PYTHONPATH it printed, kept beside the unpacked tree for the next run."""
    saved = dest.rstrip("/") + ".pythonpath"
    if os.path.isfile(os.path.join(dest, ".ready")) and os.path.isfile(saved):
        with open(saved, encoding="utf-8") as f:
            return f.read().strip()
    proc = subprocess.run(["bash", os.path.join(oracle, "setup.sh"), dest], capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PYTHONPATH=")]
    if proc.returncode != 0 or not lines:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise RuntimeError(f"bash {oracle}/setup.sh {dest} failed (exit {proc.returncode}); its output is above")
    pp = lines[-1][len("PYTHONPATH="):]
    with open(saved + ".tmp", "w", encoding="utf-8") as f:
        f.write(pp + "\n")
    os.replace(saved + ".tmp", saved)
    return pp


def tail(path, n=40):
    with open(path, encoding="utf-8", errors="replace") as f:
        return "".join(f.readlines()[-n:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--volt", required=True, help="the volt_conformance program")
    ap.add_argument("--work", required=True, help="folder for run folders, results and logs (emptied first)")
    ap.add_argument("--oracle-dest", required=True, help="where Lightning is unpacked (kept between runs)")
    ap.add_argument("--configs", default=os.path.join(HERE, "configs.json"))
    ap.add_argument("--known", default=os.path.join(HERE, "known_differences.json"))
    ap.add_argument("names", nargs="*", help="run only these configurations")
    args = ap.parse_args()

    tried, oracle = find_oracle()
    if oracle is None:
        print(f"SKIP: the Lightning oracle is absent (looked in {', '.join(tried)}); "
              f"copy shared/ beside the repository to run the conformance suite")
        return SKIP
    if not os.access(args.volt, os.X_OK):
        print(f"run_conformance: --volt {args.volt} is not an executable; build the volt_conformance target")
        return 2
    configs = common.load_configs(args.configs)
    names = {c["name"] for c in configs}
    unknown = [n for n in args.names if n not in names]
    if unknown:
        print(f"run_conformance: no configuration named {unknown} in {args.configs}")
        return 2
    if args.names:
        configs = [c for c in configs if c["name"] in args.names]

    start = time.monotonic()
    pp = oracle_pythonpath(oracle, os.path.abspath(args.oracle_dest))
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    results = os.path.join(work, "results")
    os.makedirs(results)
    env = dict(os.environ, PYTHONPATH=pp + os.pathsep + HERE, PYTHONDONTWRITEBYTECODE="1")
    sides = {
        "lightning": [PYTHON, os.path.join(HERE, "lightning_side.py"), args.configs, os.path.join(work, "lightning"),
                      os.path.join(results, "lightning")] + args.names,
        "volt": [os.path.abspath(args.volt), args.configs, os.path.join(work, "volt"),
                 os.path.join(results, "volt")] + args.names,
    }
    procs, logs = {}, {}
    for side, cmd in sides.items():
        logs[side] = os.path.join(work, side + ".log")
        with open(logs[side], "w", encoding="utf-8") as log:
            procs[side] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work)
    failed = False
    for side, proc in procs.items():
        rc = proc.wait()
        last = tail(logs[side], 1).strip()
        print(f"{side}: exit {rc}: {last}  (log: {logs[side]})")
        if rc != 0:
            print(f"--- last lines of {logs[side]} ---\n{tail(logs[side])}")
            failed = True
    if failed:
        print("run_conformance: a side did not finish; no comparison")
        return 2
    docs = os.path.join(os.environ.get("VOLT_SOURCE_DIR") or os.path.join(HERE, "..", ".."),
                        "docs", "lightning-differences.md")
    docs_text = open(docs, encoding="utf-8").read() if os.path.exists(docs) else None
    known, problems = compare.load_known(args.known, names, docs_text)
    if args.names:  # a partial run cannot call the other entries stale
        known = {k: v for k, v in known.items() if k[0] in args.names}
    ok = compare.compare_all(configs, results, work, known, problems, os.path.join(work, "report.json"))
    print(f"run_conformance: {time.monotonic() - start:.1f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
