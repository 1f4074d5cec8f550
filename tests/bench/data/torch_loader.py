#!/usr/bin/env python3
"""torch_loader.py DIR WORKERS SAMPLES [SIZE] - PyTorch's side of tests/bench/data/run: decode +
augment images/s of torch.utils.data.DataLoader over torchvision.datasets.ImageFolder(DIR/train)
with torchvision's ImageNet training transforms (PIL): RandomResizedCrop(SIZE, default 224),
RandomHorizontalFlip, ToTensor, Normalize(ImageNet mean/std); num_workers WORKERS (each worker
one torch thread, as the DataLoader sets), batch 32, a seeded random order (epochs
concatenated). The first 2 x WORKERS batches are a warm-up (workers starting, caches); then
SAMPLES samples (rounded up to whole batches) are timed by the wall clock, and the CPU time of
the main process and its workers (/proc/PID/stat) over them.
Prints one line: torch images_per_s=X workers=N samples=K seconds=S cpu_s=C images_per_cpu_s=Y."""
import os
import sys
import time

import torch
import torchvision
from torchvision import transforms

BATCH = 32


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    root, workers, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    size = int(sys.argv[4]) if len(sys.argv) > 4 else 224
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    ds = torchvision.datasets.ImageFolder(root + "/train", transform=tf)
    warm = 2 * max(1, workers)
    nbatches = warm + (samples + BATCH - 1) // BATCH
    g = torch.Generator()
    g.manual_seed(1)
    order = []
    while len(order) < nbatches * BATCH:
        order += torch.randperm(len(ds), generator=g).tolist()
    order = order[:nbatches * BATCH]
    loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, sampler=order,
                                         num_workers=workers, drop_last=True)
    it = iter(loader)
    for _ in range(warm):
        next(it)
    pids = [w.pid for w in getattr(it, "_workers", [])]
    c0 = cpu_s(pids) + time.process_time()
    t0 = time.perf_counter()
    n = 0
    for _ in range(nbatches - warm):
        x, _ = next(it)
        n += x.shape[0]
    dt = time.perf_counter() - t0
    cpu = cpu_s(pids) + time.process_time() - c0  # the workers still run: read before the end
    print("torch images_per_s=%.1f workers=%d samples=%d seconds=%.3f cpu_s=%.3f "
          "images_per_cpu_s=%.1f" % (n / dt, workers, n, dt, cpu, n / cpu if cpu > 0 else 0))
    return 0


def cpu_s(pids):
    """User + system CPU seconds of the processes pids (their /proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for pid in pids:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


if __name__ == "__main__":
    sys.exit(main())
