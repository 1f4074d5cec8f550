#!/usr/bin/python3
"""PyTorch as a second implementation of a GPT's training step: reads what
build/tests/gpt_ref wrote into DIR (the model's sizes, hetpipe's initial parameters, the
token ids and labels, and hetpipe's logits, mean loss and gradients), builds the same GPT-2
style model in PyTorch (gpt_torch.py here; float64, so that it is the reference; the head's
weights their own copy of the token matrix), loads the parameters in hetpipe's layout and compares.
Tolerances (hetpipe computes in float32; measured on gpt-tiny: logits 6e-7, gradients 1.1e-6
of their tensor's largest): logits within 1e-5 + 1e-5 relative, the loss within 1e-6
relative, every gradient within 1e-5 of the largest of its tensor. Also checks
that the tied copy starts equal to the token matrix and reports the tied gradient (the sum
of the two copies').

Then the STEPS AdamW steps gpt_ref took after that first backward (adamw.txt: 10 steps,
weight decay 0.1, betas 0.9 and 0.95, eps 1e-8, peak rate 3e-3 after 3 steps of warm-up, a
cosine to 0, clipping at global norm 0.75, which clips 7 of the 10 steps: 0-3, 5, 8, 9, not
4, 6, 7), on the same minibatches, in PyTorch from the same initial parameters: the tied
token matrix ONE parameter used by the embedding and the head (its gradient the sum of both
uses', as hp_net_tie_sum makes each of hetpipe's copies), torch.optim.AdamW with two groups
(decay on the blocks' linear weights only, not on biases, layer norms, the embeddings, the
tied head), clip_grad_norm_, the rate of runtime/lrsched.h recomputed here. Per step: the
rate within 1e-7 relative, the loss within 1e-5 relative, the norm before clipping within
1e-4 relative (measured 1e-6), clipped on both sides or neither; some steps but not all
clipped. After the steps, each of hetpipe's tensors (both tied copies against the one shared
parameter): the root mean square difference within 2e-4 of the root mean square update
(measured 3.3e-5; without weight decay on qkv 4.6e-3, decaying the tied matrix 5.3e-3), and
every element within 1e-2 of the sum of the rates (measured 1.5e-3: an element whose
gradient is near 0 gets a step of up to the rate from Adam's m / sqrt(v) of float32 rounding
noise; the attention's key bias, whose gradient is 0 in exact arithmetic (softmax is
invariant to q . b_k on a whole row), is such, and is left out of the root mean square). The
two tied copies must be bit-identical after the steps. Prints what it compared; exits
non-zero on a mismatch."""
import math
import sys

import numpy as np
import torch

import gpt_torch

d = sys.argv[1]
B, T, V, C, L, H, tie = (int(x) for x in open(d + "/meta.txt").read().split())
params = np.fromfile(d + "/params.bin", dtype=np.float32).astype(np.float64)
grads = np.fromfile(d + "/grads.bin", dtype=np.float32).astype(np.float64)
tok = torch.from_numpy(np.fromfile(d + "/tokens.bin", dtype=np.int32).astype(np.int64)).view(B, T)
lab = torch.from_numpy(np.fromfile(d + "/labels.bin", dtype=np.int32).astype(np.int64)).view(B, T)
logits_hp = np.fromfile(d + "/logits.bin", dtype=np.float32).reshape(B, T, V)
loss_hp = float(open(d + "/loss.txt").read())

shapes = gpt_torch.layout(V, T, C, L)
if grads.size != params.size:
    sys.exit(f"gpt_equiv: {params.size} parameters, {grads.size} gradients")
torch.set_default_dtype(torch.float64)
P = gpt_torch.load(params, shapes, False)
G, off = {}, 0
for name, s in shapes:
    G[name] = grads[off:off + math.prod(s)].reshape(s)
    off += math.prod(s)

logits = gpt_torch.forward(P, tok, H, L)
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


def adamw_steps():
    """The STEPS AdamW steps of gpt_ref from the same initial parameters, the tied token
    matrix ONE parameter (its gradient the sum of the embedding's and the head's), weight
    decay on the blocks' linear weights only; returns the mismatches."""
    conf = open(d + "/adamw.txt").read().split()
    S, clip, peak, warmup, wd, b1, b2, eps = (float(x) for x in conf)
    S, warmup = int(S), int(warmup)
    ours = [[float(x) for x in line.split()] for line in open(d + "/steps.txt")]
    after = np.fromfile(d + "/params_after.bin", dtype=np.float32).astype(np.float64)
    toks = np.fromfile(d + "/steps_tokens.bin", dtype=np.int32).astype(np.int64).reshape(S, B, T)
    labs = np.fromfile(d + "/steps_labels.bin", dtype=np.int32).astype(np.int64).reshape(S, B, T)
    Q = gpt_torch.load(params, shapes, tie)
    opt = gpt_torch.adamw(Q, peak, (b1, b2), eps, wd)
    nbad, nclip = 0, 0
    for s in range(S):
        lr = gpt_torch.lr_at(s, peak, warmup, S)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        tk, lb = torch.from_numpy(toks[s]), torch.from_numpy(labs[s])
        if s == 0 and not (torch.equal(tk, tok) and torch.equal(lb, lab)):
            print("the first step's minibatch is not the one compared above")
            nbad += 1
        logits = gpt_torch.forward(Q, tk, H, L)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), lb.reshape(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(Q.values()), clip).item()
        opt.step()
        h_lr, h_loss, h_norm = ours[s]
        nclip += norm > clip
        print(f"step {s}: lr {lr:.6g} loss {loss.item():.7f} (hetpipe {h_loss:.7f}) gradient norm "
              f"{norm:.6f} (hetpipe {h_norm:.6f}){', clipped' if norm > clip else ''}")
        if (abs(h_lr - lr) > 1e-7 * lr or abs(h_loss - loss.item()) > 1e-5 * loss.item() or
                abs(h_norm - norm) > 1e-4 * norm or (h_norm > clip) != (norm > clip)):
            print(f"step {s}: the rate, loss or norm differs")
            nbad += 1
    if not 0 < nclip < S:
        print(f"clip {clip} clipped {nclip} of {S} steps: choose one that clips some, not all")
        nbad += 1
    lr_sum = sum(gpt_torch.lr_at(k, peak, warmup, S) for k in range(S))
    worst, worst_rms, off = 0.0, 0.0, 0
    for name, s in shapes:
        n = math.prod(s)
        ref = Q.get(name, Q["wte"]).detach().numpy().reshape(-1)
        diff, upd = after[off:off + n] - ref, ref - params[off:off + n]
        worst = max(worst, np.abs(diff).max() / lr_sum)
        if np.abs(diff).max() > 1e-2 * lr_sum:
            print(f"{name} after {S} steps: differs by {np.abs(diff).max():.3g} (the rates sum "
                  f"to {lr_sum:.3g})")
            nbad += 1
        if name.endswith("qkv.b"):  # the key bias's gradient is 0 in exact arithmetic
            diff, upd = np.delete(diff, np.s_[C:2 * C]), np.delete(upd, np.s_[C:2 * C])
        rms = math.sqrt(np.mean(diff ** 2) / max(np.mean(upd ** 2), 1e-300))
        worst_rms = max(worst_rms, rms)
        if rms > 2e-4:
            print(f"{name} after {S} steps: root mean square difference {rms:.3g} of the update's")
            nbad += 1
        off += n
    print(f"parameters after {S} AdamW steps ({nclip} clipped at {clip}): largest difference "
          f"{worst:.3g} of the sum of the rates, root mean square difference {worst_rms:.3g} of "
          f"the update's (the worst tensor)")
    if tie and not np.array_equal(after[:V * C], after[-V * C:]):
        print("the tied copies differ after the steps")
        nbad += 1
    elif tie:
        print(f"tied token matrix: hetpipe's two copies bit-identical after {S} steps")
    return nbad


bad += adamw_steps()
if bad:
    sys.exit(f"gpt_equiv: {bad} mismatches")
print("gpt_equiv: ok")
