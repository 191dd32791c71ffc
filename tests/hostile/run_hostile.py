#!/usr/bin/env python3
"""Runs Volt's hostile-input cases: bad input against every entry point, each in a fresh folder.

Each case (one JSON object per line in tests/hostile/cases/*.jsonl; lines starting with # are
comments) names a command, the files to create first, the exit code it must end with, the text
its output must contain (the bad value, named back to the user), and what it may write. A case
fails on:
  - another exit code, or death by a signal (a crash);
  - a timeout (a hang);
  - output that lacks an expected text, or that shows an internal error: "terminate called",
    "INTERNAL ASSERT", "Exception raised from", a LibTorch or glibc stack trace;
  - a file or folder created in the case's folder that the case does not allow (a refused
    run writes nothing).

    run_hostile.py --build BUILD_DIR [--cases FILE_OR_DIR ...] [--filter SUBSTRING] [-j N] [--list]

Placeholders in "cmd", "files" and "env": @VOLT@ (BUILD/tools/volt/volt), @EXAMPLE@
(BUILD/examples/fashion_mnist/fashion_mnist), @VOLTNEW@ (BUILD/tools/generator/volt-new),
@FMNIST@ (the Fashion-MNIST folder of Debian's dataset-fashion-mnist), @TMP@ (the case's
folder, also its working directory). Ends with "N passed, N failed" (and ", N skipped").
"""
import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

FMNIST = "/usr/share/datasets/fashion-mnist"
# Text that only an internal failure prints: a user must never see it.
INTERNAL = ("terminate called", "INTERNAL ASSERT", "Exception raised from", "frame #0", "Aborted (core dumped)",
            "Segmentation fault", "AddressSanitizer", "please report a bug to PyTorch")
KNOWN_FIELDS = {"name", "cmd", "files", "env", "exit", "expect", "writes", "timeout", "stdin", "needs"}


class CaseError(Exception):
    pass


def load_cases(paths):
    cases, names = [], set()
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".jsonl"))
        else:
            files.append(p)
    for path in files:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                where = f"{path}:{lineno}"
                try:
                    case = json.loads(line)
                except json.JSONDecodeError as e:
                    raise CaseError(f"{where}: not valid JSON ({e})")
                if not isinstance(case, dict) or "name" not in case or "cmd" not in case or "exit" not in case:
                    raise CaseError(f"{where}: a case needs at least \"name\", \"cmd\" and \"exit\"")
                unknown = set(case) - KNOWN_FIELDS
                if unknown:
                    raise CaseError(f"{where}: unknown field(s) {sorted(unknown)}; known: {sorted(KNOWN_FIELDS)}")
                if case["name"] in names:
                    raise CaseError(f"{where}: the case name {case['name']!r} is used twice")
                names.add(case["name"])
                case["_where"] = where
                cases.append(case)
    return cases


def substitute(value, subs):
    if isinstance(value, str):
        for k, v in subs.items():
            value = value.replace(k, v)
        return value
    if isinstance(value, list):
        return [substitute(v, subs) for v in value]
    if isinstance(value, dict):
        return {k: substitute(v, subs) for k, v in value.items()}
    return value


def make_files(tmp, specs, subs):
    made = set()
    for spec in specs or []:
        if "path_hex" in spec:
            rel = os.fsdecode(bytes.fromhex(spec["path_hex"]))
        else:
            rel = substitute(spec["path"], subs)
        path = os.path.join(tmp, rel)
        os.makedirs(os.path.dirname(path) or tmp, exist_ok=True)
        kind = spec.get("kind", "file")
        if kind == "dir":
            os.makedirs(path, exist_ok=True)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "symlink":
            os.symlink(substitute(spec["target"], subs), path)
        elif "copy" in spec:
            shutil.copyfile(substitute(spec["copy"], subs), path)
        else:
            data = bytes.fromhex(spec["hex"]) if "hex" in spec else substitute(spec.get("text", ""), subs).encode()
            with open(path, "wb") as f:
                f.write(data)
        if "mode" in spec:
            os.chmod(path, int(spec["mode"], 8))
        made.add(os.path.normpath(rel))
        # Every parent folder counts as made by the case too.
        parent = os.path.dirname(os.path.normpath(rel))
        while parent:
            made.add(parent)
            parent = os.path.dirname(parent)
    return made


def tree(tmp):
    out = set()
    for dirpath, dirnames, filenames in os.walk(tmp):
        for n in dirnames + filenames:
            out.add(os.path.normpath(os.path.relpath(os.path.join(dirpath, n), tmp)))
    return out


def allowed(path, writes):
    for w in writes:
        w = os.path.normpath(w)
        if path == w or path.startswith(w + os.sep) or w.startswith(path + os.sep):
            return True
    return False


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_case(case, build, keep):
    tmp = tempfile.mkdtemp(prefix="volt-hostile-")
    subs = {"@VOLT@": os.path.join(build, "tools/volt/volt"),
            "@EXAMPLE@": os.path.join(build, "examples/fashion_mnist/fashion_mnist"),
            "@VOLTNEW@": os.path.join(build, "tools/generator/volt-new"),
            "@FMNIST@": FMNIST, "@TMP@": tmp}
    try:
        for need in case.get("needs", []):
            if not os.path.exists(substitute(need, subs)):
                return "skip", f"needs {substitute(need, subs)}"
        cmd = substitute(case["cmd"], subs)
        if not os.path.exists(cmd[0]) and shutil.which(cmd[0]) is None:
            return "fail", f"the program {cmd[0]} does not exist (build it first)"
        made = make_files(tmp, case.get("files"), subs)
        before = tree(tmp)
        env = dict(os.environ)
        env.pop("VOLT_DEBUG", None)
        env.update(substitute(case.get("env", {}), subs))
        timeout = float(case.get("timeout", 20))
        start = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            out, _ = proc.communicate(input=case.get("stdin", "").encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            proc.communicate()
            return "fail", f"hung: no exit within {timeout:g} s"
        finally:
            kill_group(proc)  # nothing of the case may outlive it
        elapsed = time.monotonic() - start
        text = out.decode("utf-8", "backslashreplace")
        problems = []
        if proc.returncode < 0:
            problems.append(f"killed by signal {signal.Signals(-proc.returncode).name}")
        elif proc.returncode != case["exit"]:
            problems.append(f"exit code {proc.returncode}, expected {case['exit']}")
        for bad in INTERNAL:
            if bad in text:
                problems.append(f"internal error text in the output: {bad!r}")
        for want in substitute(case.get("expect", []), subs):
            if want not in text:
                problems.append(f"the output lacks {want!r}")
        writes = substitute(case.get("writes", []), subs)
        created = sorted(p for p in tree(tmp) - before - made if not allowed(p, writes))
        if created:
            problems.append("wrote " + ", ".join(created[:5]) + (" ..." if len(created) > 5 else ""))
        if problems:
            tail = "\n".join("      | " + l for l in text.strip().splitlines()[-8:])
            return "fail", "; ".join(problems) + "\n" + tail
        return "pass", f"{elapsed:.2f} s"
    finally:
        if keep:
            print(f"  kept {tmp}")
        else:
            # A case may have left a folder without write permission: restore it first.
            for dirpath, dirnames, _ in os.walk(tmp):
                for d in dirnames:
                    p = os.path.join(dirpath, d)
                    if not os.path.islink(p):
                        os.chmod(p, os.stat(p).st_mode | stat.S_IRWXU)
            shutil.rmtree(tmp, ignore_errors=True)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True, help="the build folder (holds tools/volt/volt, examples/...)")
    ap.add_argument("--cases", nargs="*", default=[os.path.join(here, "cases")], help="case files or folders")
    ap.add_argument("--filter", default="", help="only cases whose name contains this")
    ap.add_argument("-j", type=int, default=2, help="cases run at once")
    ap.add_argument("--keep", action="store_true", help="keep each case's folder")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    if not os.path.isdir(build):
        print(f"hostile: the build folder {build} does not exist; build first (bash scripts/setup.sh)")
        return 2
    try:
        cases = [c for c in load_cases(args.cases) if args.filter in c["name"]]
    except (CaseError, OSError) as e:
        print(f"hostile: {e}")
        return 2
    if args.list:
        for c in cases:
            print(c["name"])
        return 0
    if not cases:
        print(f"hostile: no case matches (cases: {args.cases}, filter {args.filter!r})")
        return 2
    counts = {"pass": 0, "fail": 0, "skip": 0}
    failed = []
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.j)) as pool:
        futures = {pool.submit(run_case, c, build, args.keep): c for c in cases}
        for fut in concurrent.futures.as_completed(futures):
            c = futures[fut]
            try:
                verdict, detail = fut.result()
            except Exception as e:  # a broken case definition, not a Volt failure
                verdict, detail = "fail", f"the case could not run: {e!r}"
            counts[verdict] += 1
            if verdict == "fail":
                failed.append(c["name"])
                print(f"FAIL {c['name']} ({c['_where']}): {detail}", flush=True)
            elif verdict == "skip":
                print(f"skip {c['name']}: {detail}", flush=True)
            done = sum(counts.values())
            if done % 25 == 0:
                print(f"hostile: {done}/{len(cases)} cases run", flush=True)
    print(f"hostile: {len(cases)} cases over {len({c['_where'].rsplit(':', 1)[0] for c in cases})} files "
          f"in {time.monotonic() - start:.0f} s")
    if failed:
        print("hostile: failed: " + ", ".join(sorted(failed)))
    line = f"{counts['pass']} passed, {counts['fail']} failed"
    if counts["skip"]:
        line += f", {counts['skip']} skipped"
    print(line)
    return 1 if counts["fail"] else 0


if __name__ == "__main__":
    sys.exit(main())
