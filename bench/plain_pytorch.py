#!/usr/bin/python3
"""The model of bench/trainer_vs_loop.cpp as a plain Python PyTorch loop.

Same data (the first N Fashion-MNIST training images from Debian's dataset-fashion-mnist),
model, optimizer, batch size and thread count; prints steps/s so that the figure sits
next to the C++ ones. Needs Debian's python3-torch (run it with /usr/bin/python3, not a
pyenv python):

    /usr/bin/python3 bench/plain_pytorch.py --model cnn --train-size 8192 --threads 2
"""
import argparse
import gzip
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch import nn

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def make_net(kind):
    if kind == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def epoch_seconds(args, x, y):
    torch.manual_seed(1234)
    net = make_net(args.model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    n = x.shape[0]
    batches = n // args.batch_size
    start = time.perf_counter()
    for epoch in range(args.epochs):
        gen = torch.Generator().manual_seed(1234 + epoch)
        perm = torch.randperm(n, generator=gen)
        for b in range(batches):
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            loss = loss_fn(net(x.index_select(0, idx)), y.index_select(0, idx))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return (time.perf_counter() - start) / args.epochs, batches


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=["mlp", "cnn"], default="cnn")
    p.add_argument("--train-size", type=int, default=8192)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    args = p.parse_args()
    path = os.path.join(DATA, "train-images-idx3-ubyte.gz")
    if not os.path.exists(path):
        sys.exit(f"plain_pytorch.py: {path} is missing; apt-get install dataset-fashion-mnist")
    torch.set_num_threads(args.threads)
    images = read_idx(path)[:args.train_size]
    labels = read_idx(os.path.join(DATA, "train-labels-idx1-ubyte.gz"))[:args.train_size]
    x = torch.from_numpy(images.astype(np.float32) / 255.0).unsqueeze(1)
    y = torch.from_numpy(labels.astype(np.int64))
    times = []
    for _ in range(args.rounds):
        seconds, batches = epoch_seconds(args, x, y)
        times.append(seconds)
    med = statistics.median(times)
    print(f"python pytorch {torch.__version__} model={args.model} images={x.shape[0]} batch={args.batch_size} "
          f"threads={args.threads} allocator={os.environ.get('GLIBC_TUNABLES', 'glibc default')}: "
          f"{med:.3f} s/epoch, {batches / med:.1f} steps/s")


if __name__ == "__main__":
    main()
