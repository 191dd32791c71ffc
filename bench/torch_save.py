#!/usr/bin/python3
"""The Python side of bench/checkpoint_io.cpp: torch.save / torch.load of a state of
float32 tensors with the same shapes, timed here, printed as one JSON line.

    /usr/bin/python3 bench/torch_save.py --tensors 24 --numel 4194304 --path /tmp/x.pt
"""
import argparse
import json
import os
import sys
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tensors", type=int, required=True)
    p.add_argument("--numel", type=int, required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    g = torch.Generator().manual_seed(0)
    state = {"layer%d.weight" % i: torch.randn(a.numel, generator=g) for i in range(a.tensors)}
    t0 = time.perf_counter()
    torch.save(state, a.path)
    t1 = time.perf_counter()
    # torch.save does not fsync; Volt's save does (durability). Time both.
    fd = os.open(a.path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    t2 = time.perf_counter()
    loaded = torch.load(a.path)
    t3 = time.perf_counter()
    assert all(torch.equal(loaded[k], v) for k, v in state.items())
    os.remove(a.path)
    print(json.dumps({"save_s": t1 - t0, "save_fsync_s": t2 - t0, "load_s": t3 - t2,
                      "bytes": a.tensors * a.numel * 4, "torch": torch.__version__}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
