#!/usr/bin/python3
"""PyTorch twin of etc/models/cnn.ini, trained the same way (SGD with momentum and weight
decay, minibatch 64, one thread) on Fashion-MNIST, to compare training images/s with
hetpipe's CPU backend in tests/bench/train_cpu. Prints one line: 'torch_images_per_s X'."""
import gzip
import sys
import time

import numpy as np
import torch
import torch.nn as nn

DATA = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/datasets/fashion-mnist"
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 100
BATCH = int(sys.argv[3]) if len(sys.argv) > 3 else 64
torch.set_num_threads(1)
torch.manual_seed(1)


def images(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    x = np.frombuffer(raw, dtype=np.uint8, offset=16).astype(np.float32) / 255.0
    return torch.from_numpy(((x - 0.2860) / 0.3530).reshape(-1, 1, 28, 28))


def labels(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    return torch.from_numpy(np.frombuffer(raw, dtype=np.uint8, offset=8).astype(np.int64))


x = images(DATA + "/train-images-idx3-ubyte.gz")
y = labels(DATA + "/train-labels-idx1-ubyte.gz")
model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
lossf = nn.CrossEntropyLoss()
perm = torch.randperm(x.shape[0])


def step(i):
    idx = perm[(i * BATCH) % (x.shape[0] - BATCH):][:BATCH]
    opt.zero_grad()
    loss = lossf(model(x[idx]), y[idx])
    loss.backward()
    opt.step()


for i in range(5):
    step(i)
t0 = time.perf_counter()
for i in range(STEPS):
    step(i)
dt = time.perf_counter() - t0
print("torch_images_per_s %.1f" % (STEPS * BATCH / dt))
