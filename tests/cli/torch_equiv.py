#!/usr/bin/python3
"""PyTorch as a second implementation of a whole training run: loads the initial parameters,
sample indices and per-step losses that build/tests/torch_ref wrote into DIR, trains the
same CNN in PyTorch (float32, one thread, SGD lr 0.01 momentum 0.9 weight decay 5e-4) on the
same minibatches, and compares every step's loss and the final parameters.
Tolerances: the two differ only by float32 reassociation (OpenBLAS vs oneDNN), which SGD
with momentum and batch norm amplifies about 3x per step (measured: parameters agree to
4e-7 after 1 step, 1e-5 after 6, 1e-4 after 9), so run 5 steps (the default of
tests/cli/cli.bats): per-step loss within 1e-5 + 1e-4 relative; final parameters within 1e-4 of
the largest parameter magnitude. A 10% error in one term of one layer's gradient misses
these by orders of magnitude. Prints what it compared and exits non-zero on a mismatch.
With --adamw (torch_ref DIR N adamw) the steps are torch.optim.AdamW's (lr 1e-3, betas 0.9 and
0.95, eps 1e-8, weight decay 0.1 on the conv and linear weights only) after
clip_grad_norm_(1.0), with the same tolerances: measured 9e-6 after 5 steps, 2e-4 after 10
(Adam divides by the root of small second moments, which amplifies reassociation more)."""
import gzip
import sys

import numpy as np
import torch
import torch.nn as nn

args = [a for a in sys.argv[1:] if not a.startswith("-")]
d = args[0]
data = args[1] if len(args) > 1 else "/usr/share/datasets/fashion-mnist"
torch.set_num_threads(1)

with gzip.open(data + "/train-images-idx3-ubyte.gz", "rb") as f:
    x = np.frombuffer(f.read(), dtype=np.uint8, offset=16).astype(np.float32) / np.float32(255.0)
x = torch.from_numpy(((x - np.float32(0.2860)) / np.float32(0.3530)).reshape(-1, 1, 28, 28))
with gzip.open(data + "/train-labels-idx1-ubyte.gz", "rb") as f:
    y = torch.from_numpy(np.frombuffer(f.read(), dtype=np.uint8, offset=8).astype(np.int64))

model = nn.Sequential(
    nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))
p0 = torch.from_numpy(np.fromfile(d + "/params0.bin", dtype=np.float32))
params = list(model.parameters())  # conv1.w, bn1.g, bn1.b, conv2.w, bn2.g, bn2.b, fc1.w, fc1.b, ...
n = sum(p.numel() for p in params)
assert n == p0.numel(), "parameter count %d vs %d" % (n, p0.numel())
off = 0
with torch.no_grad():
    for p in params:
        p.copy_(p0[off:off + p.numel()].view_as(p))
        off += p.numel()
idx = torch.from_numpy(np.fromfile(d + "/indices.bin", dtype=np.int32).astype(np.int64)).view(-1, 64)
ours = [float(v) for v in open(d + "/losses.txt")]
adamw = "--adamw" in sys.argv
if adamw:  # decay on the conv and linear weights only (layers.h, hp_op_param_tensors)
    decay = [p for p in params if p.dim() > 1]
    rest = [p for p in params if p.dim() <= 1]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
else:
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
lossf = nn.CrossEntropyLoss()
bad = 0
worst = 0.0
for s in range(idx.shape[0]):
    opt.zero_grad()
    loss = lossf(model(x[idx[s]]), y[idx[s]])
    loss.backward()
    if adamw:
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if "-v" in sys.argv:
            print("step %d: gradient norm %.6f" % (s, norm.item()))
    opt.step()
    err = abs(loss.item() - ours[s])
    if "-v" in sys.argv:
        print("step %d: hetpipe %.7f pytorch %.7f diff %.2e" % (s, ours[s], loss.item(), err))
    tol = 1e-5 + 1e-4 * abs(loss.item())
    worst = max(worst, err / tol)
    if err > tol:
        print("FAIL step %d: hetpipe loss %.6f, pytorch %.6f" % (s, ours[s], loss.item()))
        bad += 1
print("losses: %d steps, last %.7f (hetpipe) vs %.7f (pytorch), worst error %.2f of tolerance"
      % (idx.shape[0], ours[-1], loss.item(), worst))
p1 = torch.from_numpy(np.fromfile(d + "/params1.bin", dtype=np.float32))
mine = torch.cat([p.detach().reshape(-1) for p in params])
diff = (mine - p1).abs().max().item()
scale = p1.abs().max().item()
print("final parameters: max difference %.3g (largest parameter %.3g)" % (diff, scale))
if diff > 1e-4 * scale:
    print("FAIL final parameters differ")
    bad += 1
print("torch_equiv: %s" % ("ok" if bad == 0 else "%d mismatches" % bad))
sys.exit(1 if bad else 0)
