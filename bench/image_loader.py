#!/usr/bin/python3
"""torchvision's side of bench/image_loader: ImageFolder + RandomResizedCrop(224) + RandomHorizontalFlip +
ToTensor + Normalize through torch's DataLoader, one timed epoch per line of output.

  image_loader.py ROOT --workers W --batch-size B --epochs E
prints one JSON line per epoch: {"workers": W, "images": N, "seconds": S}
"""
import argparse
import json
import time

import torch
import torchvision.transforms as T
from torchvision.datasets import ImageFolder


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=1)
    a = p.parse_args()
    torch.manual_seed(0)
    transform = T.Compose([
        T.RandomResizedCrop(224),
        T.RandomHorizontalFlip(),
        T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    ds = ImageFolder(a.root, transform=transform)
    loader = torch.utils.data.DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers,
                                         persistent_workers=a.workers > 0)
    for _ in range(a.epochs):
        start = time.perf_counter()
        n = 0
        for images, targets in loader:
            n += images.shape[0]
        print(json.dumps({"workers": a.workers, "images": n, "seconds": time.perf_counter() - start}), flush=True)


if __name__ == "__main__":
    main()
