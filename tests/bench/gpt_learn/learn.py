#!/usr/bin/python3
"""PyTorch's side of the learning comparison (run and README.md here): trains the GPT of
tests/cli/gpt_torch.py in float32 on one thread from hetpipe's initial parameters on the token
sequences hetpipe train trains on, in its order (what build/tests/gpt_learn wrote into DIR),
with the same optimizer: AdamW (decay on the blocks' linear weights only; the tied token
matrix one parameter), linear warm-up then a cosine to 0 (runtime/lrsched.h), clipping to
the global norm. Then the mean loss over the validation windows hetpipe evaluates.
Usage: learn.py DIR LR WARMUP CLIP WD BETA1 BETA2 EPS [HETPIPE_STEP_LOG [HETPIPE_PARAMS]]
Prints "torch_val_loss X" and "torch_train_s X"; with hetpipe's --step-log, the loss of its
first steps against ours (the same initial parameters and minibatches: equal to float32
rounding); with its --save-params, the validation loss of hetpipe's final parameters
evaluated here ("torch_eval_of_hetpipe X": hetpipe's own evaluation, checked)."""
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli"))
import gpt_torch  # noqa: E402

d = sys.argv[1]
lr, warmup, clip, wd, b1, b2, eps = (float(x) for x in sys.argv[2:9])
torch.set_num_threads(1)
B, T, V, C, L, H, tie, S, NV = (int(x) for x in open(d + "/meta.txt").read().split())
shapes = gpt_torch.layout(V, T, C, L)


def ids(name, *shape):
    return torch.from_numpy(np.fromfile(d + "/" + name, dtype=np.int32).astype(np.int64)).view(*shape)


tx, ty = ids("train_x.bin", S, B, T), ids("train_y.bin", S, B, T)
vx, vy = ids("val_x.bin", NV, T), ids("val_y.bin", NV, T)


def validate(P):
    """The mean loss per position over the validation windows, in batches of B."""
    total = 0.0
    with torch.no_grad():
        for i in range(0, NV, B):
            z = gpt_torch.forward(P, vx[i:i + B], H, L)
            total += torch.nn.functional.cross_entropy(
                z.reshape(-1, V), vy[i:i + B].reshape(-1), reduction="sum").item()
    return total / (NV * T)


P = gpt_torch.load(np.fromfile(d + "/params0.bin", dtype=np.float32), shapes, tie)
opt = gpt_torch.adamw(P, lr, (b1, b2), eps, wd)
losses, nclip = [], 0
t0 = time.time()
for s in range(S):
    for g in opt.param_groups:
        g["lr"] = gpt_torch.lr_at(s, lr, int(warmup), S)
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(gpt_torch.forward(P, tx[s], H, L).reshape(-1, V),
                                             ty[s].reshape(-1))
    loss.backward()
    nclip += torch.nn.utils.clip_grad_norm_(list(P.values()), clip).item() > clip
    opt.step()
    losses.append(loss.item())
train_s = time.time() - t0
print(f"torch: {S} steps of {B} x {T} tokens in {train_s:.1f} s, {nclip} clipped at {clip}; "
      f"mean training loss of the last 32 steps {np.mean(losses[-32:]):.4f}")
print(f"torch_train_s {train_s:.1f}")
print(f"torch_val_loss {validate(P):.6f}")
if len(sys.argv) > 9:
    hp = [float(line.split(",")[1]) for line in open(sys.argv[9]).readlines()[1:]]
    k = min(10, len(hp))
    rel = max(abs(hp[i] - losses[i]) / losses[i] for i in range(k))
    print(f"first {k} steps' losses: largest relative difference {rel:.2g} (step 0: hetpipe "
          f"{hp[0]:.7f}, torch {losses[0]:.7f})")
    late = np.mean(hp[-32:])
    print(f"mean training loss of the last 32 steps: hetpipe {late:.4f}, torch "
          f"{np.mean(losses[-32:]):.4f}")
if len(sys.argv) > 10:
    flat = np.fromfile(sys.argv[10], dtype=np.float32)
    print(f"torch_eval_of_hetpipe {validate(gpt_torch.load(flat, shapes, tie)):.6f}")
    if tie and not np.array_equal(flat[:V * C], flat[-V * C:]):
        print("hetpipe's two tied copies differ after training")
    elif tie:
        print(f"hetpipe's two tied copies bit-identical after {S} steps")
