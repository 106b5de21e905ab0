#!/usr/bin/python3
"""PyTorch reference for tests/bench/gpt_step.c: the same byte-level GPT, batch,
context and training step (forward + next-token cross-entropy over every
position + backward + torch.optim.AdamW, lr 1e-3, weight decay 0.01), timed the
same way, printing the same one-line key=value result.

    /usr/bin/python3 tests/bench/gpt_step_torch.py --model gpt:4:128:4 --context 64 --batch 32 --threads 1 --seconds 3
    tokens_per_second=51234.5 samples_per_second=800.5 steps=... params=867328 data=brown ...

The model is sgp's gpt:L:C:H (nn/MODELS.md) in plain PyTorch: nn.Embedding(256, C),
a learned position nn.Parameter [T, C], L pre-norm blocks (LayerNorm,
Linear(C, 3C), causal scaled-dot-product attention over H heads, Linear(C, C),
residual; LayerNorm, Linear(C, 4C), GELU (exact), Linear(4C, C), residual), a
final LayerNorm and a Linear(C, 256) head with bias; no weight tying, no
dropout; GPT-2's initialisation as sgp's. Same parameter count as sgp's
(params= in both outputs; run.sh checks they agree).

Attention: F.scaled_dot_product_attention(is_causal=True) where torch has it
(2.0+); Debian's torch 1.13 has it only as F._scaled_dot_product_attention
(same arguments, returns (output, weights); on CPU its math path: bmm, softmax,
bmm), which is used there (attn=sdpa or attn=_sdpa in the output; --attn math
writes the masked softmax out by hand instead).

Data: windows of context + 1 bytes at random offsets of --text (default
build/data/brown/brown.txt of this repository), 8 batches gathered before the
clock starts and cycled, as gpt_step.c does; random bytes if the file cannot
be read (data=random): the speed does not depend on the values.

Run it with Debian's /usr/bin/python3 (python3-torch); a benchmark reference
only, not a dependency of the project.
"""

import argparse
import math
import os
import sys
import time

N_BATCHES = 8
RANDOM_BYTES = 1 << 20


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="gpt:4:128:4", help="gpt:LAYERS:WIDTH:HEADS (default gpt:4:128:4)")
    p.add_argument("--context", type=int, default=64, help="tokens per window (default 64)")
    p.add_argument("--batch", type=int, default=32, help="windows per step (default 32)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--seconds", type=float, default=3.0, help="time steps for about S seconds (default 3)")
    p.add_argument("--steps", type=int, default=0, help="time exactly N steps instead (overrides --seconds)")
    p.add_argument("--warmup-steps", type=int, default=2, help="untimed steps first (default 2)")
    p.add_argument("--lr", type=float, default=1e-3, help="learning rate (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (default 0.01)")
    p.add_argument("--foreach", choices=("default", "0", "1"), default="default",
                   help="AdamW's foreach argument: default (None: torch's choice; False on CPU in 1.13), 0 or 1")
    p.add_argument("--attn", choices=("sdpa", "math"), default="sdpa",
                   help="sdpa: (_)scaled_dot_product_attention(is_causal=True); math: masked softmax by hand")
    p.add_argument("--text", default=None, help="text file (default build/data/brown/brown.txt of this repo)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--describe", action="store_true", help="print torch's version and BLAS and exit")
    a = p.parse_args()
    if a.batch < 1 or a.context < 1 or a.threads < 1 or a.seconds <= 0 or a.steps < 0 or a.warmup_steps < 0:
        p.error("batch, context and threads must be >= 1, seconds > 0, steps and warmup-steps >= 0")
    return a


def parse_gpt(spec):
    try:
        name, L, C, H = spec.split(":")
        L, C, H = int(L), int(C), int(H)
    except ValueError:
        sys.exit("gpt_step_torch: model '%s': expected gpt:LAYERS:WIDTH:HEADS" % spec)
    if name != "gpt" or L < 1 or C < 1 or H < 1 or C % H:
        sys.exit("gpt_step_torch: model '%s': expected gpt:LAYERS:WIDTH:HEADS, width a multiple of heads" % spec)
    return L, C, H


def attention_fn(torch, F, kind):
    """(name, f(q, k, v) -> causal attention output), q k v [B, H, T, D]."""
    if kind == "sdpa":
        if hasattr(F, "scaled_dot_product_attention"):
            return "sdpa", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)
        if hasattr(F, "_scaled_dot_product_attention"):  # torch 1.13: (query, key, value, mask, dropout, need_w, causal)
            return "_sdpa", lambda q, k, v: F._scaled_dot_product_attention(q, k, v, None, 0.0, False, True)[0]
    masks = {}

    def math_attn(q, k, v):
        T = q.shape[-2]
        if T not in masks:
            masks[T] = torch.ones(T, T, dtype=torch.bool).triu(1)
        s = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
        return torch.softmax(s.masked_fill(masks[T], float("-inf")), dim=-1) @ v
    return "math", math_attn


def build_model(torch, nn, F, L, C, H, T, attn):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(C)
            self.qkv = nn.Linear(C, 3 * C)
            self.proj = nn.Linear(C, C)
            self.ln2 = nn.LayerNorm(C)
            self.fc = nn.Linear(C, 4 * C)
            self.fc2 = nn.Linear(4 * C, C)

        def forward(self, x):
            B_, T_, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B_, T_, H, C // H).transpose(1, 2) for t in (q, k, v))
            y = attn(q, k, v).transpose(1, 2).reshape(B_, T_, C)
            x = x + self.proj(y)
            return x + self.fc2(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(256, C)
            self.wpe = nn.Parameter(torch.zeros(T, C))
            self.blocks = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)
            self.head = nn.Linear(C, 256)
            # GPT-2's initialisation, as sgp's (nn/MODELS.md): N(0, 0.02), the fc
            # closing a residual block N(0, 0.02 / sqrt(2 L)), biases 0, norms identity.
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    nn.init.zeros_(p)
                elif ".ln" in name or name.startswith("ln_"):
                    nn.init.ones_(p)
                elif name.endswith("proj.weight") or name.endswith("fc2.weight"):
                    nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
                else:
                    nn.init.normal_(p, 0.0, 0.02)

        def forward(self, idx):
            x = self.wte(idx) + self.wpe[: idx.shape[1]]
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    return GPT()


def load_batches(torch, path, B, T, seed):
    """N_BATCHES batches of windows of T + 1 bytes at random offsets: (x [B, T], y [B, T]) long."""
    data = "random"
    buf = None
    try:
        with open(path, "rb") as f:
            raw = f.read()
        if len(raw) >= T + 1:
            buf = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
            data = "brown" if "brown" in os.path.basename(path) else "file"
    except OSError as e:
        print("gpt_step_torch: %s; using random bytes" % e, file=sys.stderr)
    g = torch.Generator().manual_seed(seed)
    if buf is None:
        buf = torch.randint(0, 256, (RANDOM_BYTES,), dtype=torch.uint8, generator=g)
    offs = torch.randint(0, buf.numel() - T, (N_BATCHES * B, 1), generator=g)
    win = buf[offs + torch.arange(T + 1)].long()  # [N_BATCHES * B, T + 1]
    xs, ys = win[:, :T].contiguous(), win[:, 1:].contiguous()
    return [(xs[i * B:(i + 1) * B], ys[i * B:(i + 1) * B]) for i in range(N_BATCHES)], data


def openblas_core():
    """The core of the OpenBLAS mapped into this process (what nn.Linear's sgemm_ runs on), or None."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    except OSError:
        return None
    for path in sorted(paths):
        if "openblas" in os.path.basename(path):
            try:
                lib = ctypes.CDLL(path)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode()
            except (OSError, AttributeError):
                continue
    return None


def main():
    a = parse_args()
    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit("gpt_step_torch: cannot import torch (%s); run with /usr/bin/python3 and python3-torch" % e)
    if a.describe:
        name, _ = attention_fn(torch, F, "sdpa")
        print("torch %s: attention %s; AdamW foreach=None (its default: the per-tensor loop on CPU)" % (
            torch.__version__, {"sdpa": "F.scaled_dot_product_attention", "_sdpa": "F._scaled_dot_product_attention"
                                }.get(name, "masked softmax by hand")))
        return 0

    L, C, H = parse_gpt(a.model)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    here = os.path.dirname(os.path.abspath(__file__))
    path = a.text or os.path.join(here, "..", "..", "build", "data", "brown", "brown.txt")
    batches, data = load_batches(torch, path, a.batch, a.context, a.seed)

    attn_name, attn = attention_fn(torch, F, a.attn)
    model = build_model(torch, nn, F, L, C, H, a.context, attn)
    model.train()
    foreach = {"default": None, "0": False, "1": True}[a.foreach]  # None: on CPU the per-tensor loop
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=a.weight_decay, foreach=foreach)
    n_params = sum(p.numel() for p in model.parameters())

    step = 0
    loss = None

    def one_step():
        nonlocal step, loss
        x, y = batches[step % N_BATCHES]
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, 256), y.view(-1))
        loss.backward()
        opt.step()
        step += 1

    for _ in range(a.warmup_steps):
        one_step()
    loss_first = loss.item() if loss is not None else float("nan")

    timed = 0
    t0 = time.perf_counter()
    if a.steps > 0:
        for _ in range(a.steps):
            one_step()
        timed = a.steps
        t1 = time.perf_counter()
    else:
        while True:
            one_step()
            timed += 1
            t1 = time.perf_counter()
            if t1 - t0 >= a.seconds:
                break
    elapsed = t1 - t0
    sps = timed * a.batch / elapsed
    print("tokens_per_second=%.1f samples_per_second=%.2f steps=%d seconds=%.3f model=%s context=%d batch=%d "
          "threads=%d core=%s params=%d data=%s opt=adamw foreach=%s attn=%s torch=%s "
          "loss_after_warmup=%.4f loss_last=%.4f" % (
              sps * a.context, sps, timed, elapsed, a.model, a.context, a.batch, torch.get_num_threads(),
              openblas_core() or "none", n_params, data, foreach, attn_name, torch.__version__,
              loss_first, loss.item()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
