"""hetpipe's GPT in PyTorch, shared by tests/cli/gpt_equiv.py (float64: the cross-check of a
training step and of AdamW steps) and tests/bench/gpt_learn/learn.py (float32: a learning
run): the parameter layout of hetpipe's text models (common/layers.h), the GPT-2 style
forward pass (pre-norm blocks, causal attention written out, GELU tanh, layer norm eps 1e-5,
a head without bias), the learning rate of runtime/lrsched.h and AdamW's parameter groups
(decay on the blocks' linear weights only, as hp_op_param_tensors)."""
import math

import numpy as np
import torch


def layout(V, T, C, L):
    """hetpipe's order: embed (wte [V, C], wpe [T, C]); per block ln1 (g, b), qkv (W [3C, C],
    b), proj (W [C, C], b), ln2 (g, b), fc (W [4C, C], b), fc2 (W [C, 4C], b); head ln_f (g,
    b), W [V, C] (a tied head's copy of wte)."""
    shapes = [("wte", (V, C)), ("wpe", (T, C))]
    for i in range(L):
        shapes += [(f"h{i}.ln1.g", (C,)), (f"h{i}.ln1.b", (C,)), (f"h{i}.qkv.w", (3 * C, C)),
                   (f"h{i}.qkv.b", (3 * C,)), (f"h{i}.proj.w", (C, C)), (f"h{i}.proj.b", (C,)),
                   (f"h{i}.ln2.g", (C,)), (f"h{i}.ln2.b", (C,)), (f"h{i}.fc.w", (4 * C, C)),
                   (f"h{i}.fc.b", (4 * C,)), (f"h{i}.fc2.w", (C, 4 * C)), (f"h{i}.fc2.b", (C,))]
    return shapes + [("lnf.g", (C,)), ("lnf.b", (C,)), ("head.w", (V, C))]


def load(flat, shapes, shared):
    """The parameters of the flat vector flat (numpy, hetpipe's layout) as leaf tensors of its
    dtype; shared: no "head.w" (the head uses wte: ONE parameter, its gradient the sum)."""
    P, off = {}, 0
    for name, s in shapes:
        n = math.prod(s)
        if not (shared and name == "head.w"):
            P[name] = torch.tensor(flat[off:off + n].reshape(s), requires_grad=True)
        off += n
    if off != flat.size:
        raise SystemExit(f"{flat.size} parameters in the file, the layout has {off}")
    return P


def flatten(P, shapes):
    """The parameters back in hetpipe's layout (numpy; a shared head: wte twice)."""
    return np.concatenate([P.get(name, P["wte"]).detach().numpy().reshape(-1)
                           for name, _ in shapes])


def _ln(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5)


def _gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(P, tok, H, L):
    """The logits [B, T, V] of the token ids tok [B, T] (the head: P["head.w"], else wte)."""
    B, T = tok.shape
    C = P["wte"].shape[1]
    x = P["wte"][tok] + P["wpe"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    dh = C // H
    for i in range(L):
        h = _ln(x, P[f"h{i}.ln1.g"], P[f"h{i}.ln1.b"]) @ P[f"h{i}.qkv.w"].T + P[f"h{i}.qkv.b"]
        q, k, v = (t.view(B, T, H, dh).transpose(1, 2) for t in h.split(C, dim=2))
        s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        x = x + a.transpose(1, 2).reshape(B, T, C) @ P[f"h{i}.proj.w"].T + P[f"h{i}.proj.b"]
        h = _gelu(_ln(x, P[f"h{i}.ln2.g"], P[f"h{i}.ln2.b"]) @ P[f"h{i}.fc.w"].T +
                  P[f"h{i}.fc.b"])
        x = x + h @ P[f"h{i}.fc2.w"].T + P[f"h{i}.fc2.b"]
    return _ln(x, P["lnf.g"], P["lnf.b"]) @ P.get("head.w", P["wte"]).T


def lr_at(s, peak, warmup, total):
    """runtime/lrsched.h: linear warm-up to the peak ((s + 1) / warmup), then a cosine to 0
    at total."""
    if s < warmup:
        return peak * (s + 1) / warmup
    return 0.5 * peak * (1.0 + math.cos(math.pi * (s - warmup) / (total - warmup)))


def adamw(P, lr, betas, eps, wd):
    """torch.optim.AdamW with decay wd on the blocks' linear weights (and an untied head's),
    none on biases, layer norms, the embeddings, a tied head."""
    decay = [p for name, p in P.items()
             if name.endswith(("qkv.w", "proj.w", "fc.w", "fc2.w", "head.w"))]
    rest = [p for p in P.values() if not any(p is q for q in decay)]
    return torch.optim.AdamW([{"params": decay, "weight_decay": wd},
                              {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=betas, eps=eps)
