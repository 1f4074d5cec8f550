#!/usr/bin/python3
"""PyTorch as a second implementation of a GPT's training step: reads what
build/tests/gpt_ref wrote into DIR (the model's sizes, hetpipe's initial parameters, the
token ids and labels, and hetpipe's logits, mean loss and gradients), builds the same GPT-2
style model in PyTorch (float64, so that it is the reference: pre-norm blocks, causal
attention written out, GELU tanh, layer norm eps 1e-5, a head without bias whose weights are
their own copy of the token matrix), loads the parameters in hetpipe's layout and compares.
Tolerances (hetpipe computes in float32; measured on gpt-tiny: logits 6e-7, gradients 1.1e-6
of their tensor's largest): logits within 1e-5 + 1e-5 relative, the loss within 1e-6
relative, every gradient within 1e-5 of the largest of its tensor. Also checks
that the tied copy starts equal to the token matrix and reports the tied gradient (the sum
of the two copies'). Prints what it compared; exits non-zero on a mismatch."""
import math
import sys

import numpy as np
import torch

d = sys.argv[1]
B, T, V, C, L, H, tie = (int(x) for x in open(d + "/meta.txt").read().split())
params = np.fromfile(d + "/params.bin", dtype=np.float32).astype(np.float64)
grads = np.fromfile(d + "/grads.bin", dtype=np.float32).astype(np.float64)
tok = torch.from_numpy(np.fromfile(d + "/tokens.bin", dtype=np.int32).astype(np.int64)).view(B, T)
lab = torch.from_numpy(np.fromfile(d + "/labels.bin", dtype=np.int32).astype(np.int64)).view(B, T)
logits_hp = np.fromfile(d + "/logits.bin", dtype=np.float32).reshape(B, T, V)
loss_hp = float(open(d + "/loss.txt").read())

# hetpipe's layout: embed (wte [V, C], wpe [T, C]); per block ln1 (g, b), qkv (W [3C, C], b),
# proj (W [C, C], b), ln2 (g, b), fc (W [4C, C], b), fc2 (W [C, 4C], b); head ln_f (g, b), W [V, C]
shapes = [("wte", (V, C)), ("wpe", (T, C))]
for i in range(L):
    shapes += [(f"h{i}.ln1.g", (C,)), (f"h{i}.ln1.b", (C,)), (f"h{i}.qkv.w", (3 * C, C)),
               (f"h{i}.qkv.b", (3 * C,)), (f"h{i}.proj.w", (C, C)), (f"h{i}.proj.b", (C,)),
               (f"h{i}.ln2.g", (C,)), (f"h{i}.ln2.b", (C,)), (f"h{i}.fc.w", (4 * C, C)),
               (f"h{i}.fc.b", (4 * C,)), (f"h{i}.fc2.w", (C, 4 * C)), (f"h{i}.fc2.b", (C,))]
shapes += [("lnf.g", (C,)), ("lnf.b", (C,)), ("head.w", (V, C))]
total = sum(math.prod(s) for _, s in shapes)
if total != params.size or total != grads.size:
    sys.exit(f"gpt_equiv: {params.size} parameters in the file, the layout has {total}")
torch.set_default_dtype(torch.float64)
P, G, off = {}, {}, 0
for name, s in shapes:
    n = math.prod(s)
    P[name] = torch.tensor(params[off:off + n].reshape(s), requires_grad=True)
    G[name] = grads[off:off + n].reshape(s)
    off += n


def ln(x, g, b):
    return torch.nn.functional.layer_norm(x, (C,), g, b, 1e-5)


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


x = P["wte"][tok] + P["wpe"][torch.arange(T)]
mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
dh = C // H
for i in range(L):
    h = ln(x, P[f"h{i}.ln1.g"], P[f"h{i}.ln1.b"]) @ P[f"h{i}.qkv.w"].T + P[f"h{i}.qkv.b"]
    q, k, v = (t.view(B, T, H, dh).transpose(1, 2) for t in h.split(C, dim=2))
    s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
    a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
    x = x + a.transpose(1, 2).reshape(B, T, C) @ P[f"h{i}.proj.w"].T + P[f"h{i}.proj.b"]
    h = gelu(ln(x, P[f"h{i}.ln2.g"], P[f"h{i}.ln2.b"]) @ P[f"h{i}.fc.w"].T + P[f"h{i}.fc.b"])
    x = x + h @ P[f"h{i}.fc2.w"].T + P[f"h{i}.fc2.b"]
logits = ln(x, P["lnf.g"], P["lnf.b"]) @ P["head.w"].T
loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), lab.reshape(-1))
loss.backward()

bad = 0
z = logits.detach().numpy()
err = np.abs(logits_hp - z) - (1e-5 + 1e-5 * np.abs(z))
print(f"logits [{B}, {T}, {V}]: largest difference {np.abs(logits_hp - z).max():.3g}")
bad += int((err > 0).sum())
print(f"loss: hetpipe {loss_hp:.7f}, PyTorch {loss.item():.7f}")
if abs(loss_hp - loss.item()) > 1e-6 * abs(loss.item()):
    bad += 1
worst = 0.0
for name, _ in shapes:
    ref = P[name].grad.numpy()
    scale = max(np.abs(ref).max(), 1e-30)
    diff = np.abs(G[name] - ref).max()
    worst = max(worst, diff / scale)
    if diff > 1e-5 * scale:
        print(f"gradient of {name}: differs by {diff:.3g} (largest {scale:.3g})")
        bad += 1
print(f"gradients of {len(shapes)} tensors: largest difference {worst:.3g} of the tensor's largest")
if tie:
    if not np.array_equal(params[:V * C], params[-V * C:]):
        print("the head's tied copy does not start equal to the token matrix")
        bad += 1
    tied = P["wte"].grad + P["head.w"].grad
    print(f"tied token matrix: gradient (the sum of both copies') norm {tied.norm().item():.6g}")
if bad:
    sys.exit(f"gpt_equiv: {bad} mismatches")
print("gpt_equiv: ok")
