#!/usr/bin/python3
"""Python's side of bench/tokenizer: sentencepiece encodes the corpus line by line (each line with its line break,
one batched encode call on THREADS threads), the ids go to a uint16 file (written and fsynced), which is
memory-mapped with numpy and cut into {input, target} windows of CONTEXT tokens at STRIDE, collated into int64
torch tensors of BATCH windows, as a PyTorch user writes it.

  tokenizer.py MODEL CORPUS OUT --threads T --context C --stride S --batch-size B --rounds R
prints one JSON line per round: {"threads": T, "tokens": N, "windows": W, "seconds": S, "encode_seconds": E}
"""
import argparse
import json
import os
import time

import numpy as np
import sentencepiece as spm
import torch


def corpus_lines(text):
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def one_round(sp, a):
    start = time.perf_counter()
    with open(a.corpus, encoding="utf-8", newline="") as f:
        lines = corpus_lines(f.read())
    encoded = sp.encode(lines, num_threads=a.threads)
    n = sum(len(ids) for ids in encoded)
    flat = np.fromiter((i for ids in encoded for i in ids), dtype=np.uint16, count=n)
    with open(a.out, "wb") as f:
        flat.tofile(f)
        f.flush()
        os.fsync(f.fileno())
    encode_seconds = time.perf_counter() - start
    data = np.memmap(a.out, dtype=np.uint16, mode="r")
    windows = (len(data) - a.context - 1) // a.stride + 1
    span = np.arange(a.context)
    for first in range(0, windows, a.batch_size):
        starts = np.arange(first, min(first + a.batch_size, windows)) * a.stride
        offsets = starts[:, None] + span
        x = torch.from_numpy(data[offsets].astype(np.int64))
        y = torch.from_numpy(data[offsets + 1].astype(np.int64))
        assert x.shape == y.shape
    seconds = time.perf_counter() - start
    del data
    return {"threads": a.threads, "tokens": n, "windows": windows, "seconds": seconds,
            "encode_seconds": encode_seconds}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("corpus")
    p.add_argument("out")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--stride", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(1)
    sp = spm.SentencePieceProcessor(model_file=a.model)
    for _ in range(a.rounds):
        print(json.dumps(one_round(sp, a)), flush=True)


if __name__ == "__main__":
    main()
