#!/usr/bin/env python3
"""examples/train_fashion.c's model and training step in PyTorch, on the CPU: the reference of
bench_train (a benchmark-only dependency, Debian's python3-torch, as numpy is for bench_ops).

The same network (conv3x3 1->16 padding 1, relu, max_pool2d 2, conv3x3 16->32 padding 1, relu,
max_pool2d 2, linear 1568->10, torch's default initialisation), cross entropy, Adam with
torch's defaults (lr 1e-3), pixels / 255 (ToTensor, no normalisation), on the same IDX files.

  --steps N [--warmup W]   time N training steps after W warm-up steps on the batches of
                           consecutive training images (0-63, 64-127, ...), then as many
                           forward passes alone (torch.no_grad()) on the same batches, and
                           print one JSON line: median and mean ms per step and per forward,
                           the losses, torch's version
  --serve                  answer commands on standard input, one line each, until its end:
                           "train FIRST COUNT" runs COUNT training steps on the batches FIRST ..
                           (batch s: images s * batch ..) and prints "ms T1 .. Tn loss L1 Ln"
                           (each step's ms, the first and last loss); "forward FIRST COUNT"
                           runs as many forward passes alone and prints "ms T1 .. Tn"
                           (bench_train's alternating rounds)
  --epochs N               train N epochs (shuffled every epoch from --seed), print the test
                           accuracy after each: the accuracy Kiln's one-epoch run compares with
"""
import argparse
import gzip
import json
import os
import statistics
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def load(directory, prefix):
    """(images (N, 1, 28, 28) float32 in [0, 1], labels (N) int64) of prefix-*-ubyte.gz."""
    with gzip.open(os.path.join(directory, f"{prefix}-images-idx3-ubyte.gz")) as f:
        data = f.read()
    magic, n, rows, cols = struct.unpack(">IIII", data[:16])
    if magic != 0x803 or len(data) != 16 + n * rows * cols:
        sys.exit(f"train_torch.py: {prefix} images: not an IDX file of unsigned bytes")
    images = np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, rows, cols)
    with gzip.open(os.path.join(directory, f"{prefix}-labels-idx1-ubyte.gz")) as f:
        data = f.read()
    magic, m = struct.unpack(">II", data[:8])
    if magic != 0x801 or m != n or len(data) != 8 + n:
        sys.exit(f"train_torch.py: {prefix} labels: not {n} IDX labels")
    labels = np.frombuffer(data, np.uint8, offset=8)
    return (torch.from_numpy(images.astype(np.float32) / 255.0),
            torch.from_numpy(labels.astype(np.int64)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def batch_of(images, labels, s, batch):
    """Batch s of consecutive images (wrapping around the end, as bench_train's Kiln side)."""
    rows = torch.arange(s * batch, (s + 1) * batch) % len(images)
    return images[rows], labels[rows]


def serve(model, opt, images, labels, batch):
    """bench_train's side of its alternating rounds (--serve)."""
    for line in sys.stdin:
        words = line.split()
        if len(words) != 3 or words[0] not in ("train", "forward"):
            sys.exit(f"train_torch.py --serve: not a command: {line.strip()!r}")
        first, count = int(words[1]), int(words[2])
        times, losses = [], []
        for s in range(first, first + count):
            x, y = batch_of(images, labels, s, batch)
            start = time.perf_counter()
            if words[0] == "train":
                losses.append(step(model, opt, x, y))
            else:
                with torch.no_grad():
                    model(x).numpy()
            times.append((time.perf_counter() - start) * 1e3)
        reply = "ms " + " ".join(f"{t:.4f}" for t in times)
        if losses:
            reply += f" loss {losses[0]:.6f} {losses[-1]:.6f}"
        print(reply, flush=True)


def accuracy(model, images, labels, batch=1000):
    right = 0
    with torch.no_grad():
        for i in range(0, len(images), batch):
            right += (model(images[i:i + batch]).argmax(1) == labels[i:i + batch]).sum().item()
    return right / len(images)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default=os.environ.get("KILN_FASHION_DATA")
                   or "/usr/share/datasets/fashion-mnist")
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--epochs", type=int, default=0)
    p.add_argument("--serve", action="store_true")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    images, labels = load(a.data, "train")
    model = Net()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if a.serve:
        serve(model, opt, images, labels, a.batch)
        return
    if a.steps:
        times, losses = [], []
        for s in range(a.warmup + a.steps):
            x, y = images[s * a.batch:(s + 1) * a.batch], labels[s * a.batch:(s + 1) * a.batch]
            start = time.perf_counter()
            losses.append(step(model, opt, x, y))
            if s >= a.warmup:
                times.append((time.perf_counter() - start) * 1e3)
        forward = []
        with torch.no_grad():
            for s in range(a.warmup + a.steps):
                x = images[s * a.batch:(s + 1) * a.batch]
                start = time.perf_counter()
                model(x).numpy()
                if s >= a.warmup:
                    forward.append((time.perf_counter() - start) * 1e3)
        print(json.dumps({"ms_per_step_median": statistics.median(times),
                          "ms_per_step_mean": statistics.fmean(times),
                          "forward_ms_median": statistics.median(forward),
                          "forward_ms_mean": statistics.fmean(forward), "steps": a.steps,
                          "warmup": a.warmup, "batch": a.batch, "threads": a.threads,
                          "first_loss": losses[0], "last_loss": losses[-1],
                          "torch": torch.__version__}))
    if a.epochs:
        test_images, test_labels = load(a.data, "t10k")
        g = torch.Generator().manual_seed(a.seed)
        for epoch in range(1, a.epochs + 1):
            start, total, order = time.perf_counter(), 0.0, torch.randperm(len(images), generator=g)
            for i in range(0, len(images), a.batch):
                idx = order[i:i + a.batch]
                total += step(model, opt, images[idx], labels[idx])
            steps = (len(images) + a.batch - 1) // a.batch
            print(f"epoch {epoch}/{a.epochs}: test accuracy "
                  f"{100 * accuracy(model, test_images, test_labels):.2f}%, mean training loss "
                  f"{total / steps:.4f}, {steps} steps in {time.perf_counter() - start:.1f} s "
                  f"(torch {torch.__version__}, {a.threads} threads)", flush=True)


if __name__ == "__main__":
    main()
