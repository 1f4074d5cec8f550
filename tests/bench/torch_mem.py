#!/usr/bin/env python3
"""torch_mem.py MODEL BATCH - one training step of torchvision's MODEL (resnet152 or vgg19, random
weights, in-place ReLU as torchvision builds them) at BATCH x 3 x 224 x 224 on the CPU: forward,
cross-entropy, backward, SGD with momentum. tests/bench/memory reads this process's peak resident
set size (/usr/bin/time) at two batch sizes; the slope is the per-sample memory."""
import sys

import torch
import torchvision


def main():
    name, batch = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    torch.manual_seed(1)
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, 224, 224)
    y = torch.randint(0, 1000, (batch,))
    loss = torch.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print("%s batch %d loss %.4f" % (name, batch, loss.item()))


if __name__ == "__main__":
    main()
