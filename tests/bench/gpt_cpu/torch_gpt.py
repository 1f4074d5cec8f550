"""PyTorch's side of tests/bench/gpt_cpu/run: the GPT-2 of hetpipe's text models written as a
PyTorch user writes it (nanoGPT's layout): token and position embeddings, pre-norm blocks
(LayerNorm eps 1e-5, one qkv Linear, causal attention, an output projection, a 4x MLP with
tanh GELU), a final LayerNorm and a head without bias tied to the token matrix; float32,
AdamW (lr 3e-4, betas 0.9 0.95, weight decay 0.1 on the weight matrices), cross-entropy over
every position; one thread. Attention: F.scaled_dot_product_attention(is_causal=True) where
the torch has it (2.0 and later; what nanoGPT uses), else written out (softmax of masked
scores; --attn manual forces that). STEPS timed steps on random tokens after one untimed.
Prints key=value lines as bench_gpt_cpu does: s_per_step (the median of the steps' CPU
times, the process's), wall_s_per_step (of their wall times), base_kib (VmRSS after
importing torch, before the model), peak_kib (VmHWM at the end).
Usage: torch_gpt.py MODEL.ini BATCH [STEPS] [--attn sdpa|manual]"""
import configparser
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def status_kib(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def read_model(path):
    """(context T, vocabulary V, width C, blocks L, heads H) of a hetpipe text model .ini"""
    cp = configparser.ConfigParser(inline_comment_prefixes=(";",))
    cp.read(path)
    T = int(cp["model"]["input"].split("x")[0])
    V = int(cp["model"]["classes"])
    C = int(cp["embed"]["width"])
    L = int(cp["block"].get("repeat", "1"))
    H = int(cp["block"]["heads"])
    return T, V, C, L, H


class Block(nn.Module):
    def __init__(self, C, H, sdpa):
        super().__init__()
        self.H, self.sdpa = H, sdpa
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.fc2 = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.shape
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2)
                   for t in self.qkv(x).split(C, dim=2))
        if self.sdpa:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            a = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ v
        return self.proj(a.transpose(1, 2).reshape(B, T, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, T, V, C, L, H, sdpa):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H, sdpa) for _ in range(L))
        self.lnf = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.head.weight = self.wte.weight  # tied
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tok):
        x = self.wte(tok) + self.wpe(torch.arange(tok.size(1)))
        for b in self.blocks:
            x = b(x)
        return self.head(self.lnf(x))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    attn = "manual" if "--attn" in sys.argv and sys.argv[sys.argv.index("--attn") + 1] == "manual" \
        else "sdpa"
    args = [a for a in args if a not in ("sdpa", "manual")]
    path, batch = args[0], int(args[1])
    steps = int(args[2]) if len(args) > 2 else 5
    torch.set_num_threads(1)
    torch.manual_seed(1)
    sdpa = attn == "sdpa" and hasattr(F, "scaled_dot_product_attention")
    base = status_kib("VmRSS")
    T, V, C, L, H = read_model(path)
    model = GPT(T, V, C, L, H, sdpa)
    decay = [p for p in model.parameters() if p.dim() == 2 and p is not model.wte.weight
             and p is not model.wpe.weight]
    other = [p for p in model.parameters() if all(p is not q for q in decay)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    times, walls = [], []
    for s in range(steps + 1):
        tok = torch.randint(0, V, (batch, T))
        lab = torch.randint(0, V, (batch, T))
        t0, c0 = time.perf_counter(), time.process_time()
        loss = F.cross_entropy(model(tok).view(-1, V), lab.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if s > 0:
            times.append(dc)
            walls.append(dt)
        print(f"torch_gpt: step {s}: {dt:.3f} s, loss {loss.item():.4f}", file=sys.stderr)
    print(f"model={path}\nparams={sum(p.numel() for p in model.parameters())}")
    print(f"attention={'sdpa' if sdpa else 'manual'}\ntorch={torch.__version__}")
    print(f"s_per_step={statistics.median(times):.4f}")
    print(f"wall_s_per_step={statistics.median(walls):.4f}")
    print(f"base_kib={base}\npeak_kib={status_kib('VmHWM')}")


main()
