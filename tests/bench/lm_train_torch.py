#!/usr/bin/python3
"""PyTorch reference for `sgp train` on text: the same byte-level GPT
(gpt:L:C:H, nn/MODELS.md), the same data, batches of random windows, AdamW,
warm-up and cosine schedule, evaluated on the same windows, so the learning
curves of the two can be put side by side (tests/bench/lm_curve.sh).

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/bench/lm_train_torch.py \\
        --train train.txt --val val.txt --model gpt:4:128:4 --context 64 --batch 32 --epochs 2

What matches sgp by construction: the model (pre-norm blocks, one QKV
projection, causal attention, 4x GELU MLP, final norm, an untied head with
bias), GPT-2's initialisation as nn_model_init_params draws it (N(0, 0.02),
residual-closing projections N(0, 0.02 / sqrt(R))), an epoch of
bytes / context windows at uniform random offsets, AdamW with decoupled
weight decay on every parameter, nn_lr_at's schedule (linear warm-up counting
the current step as done, then cosine to zero over the remaining epochs), the
loss as the mean next-byte cross-entropy over every position, and the
evaluation windows (stride context, every held-out byte after the first
predicted once). What differs: the random draws (torch's generator, not
sgp's), so the two runs see different windows and start from different
weights of the same distribution.

Prints one line per epoch, then one key=value line for the script.
"""
import argparse
import math
import sys
import time

import torch
import torch.nn.functional as F


def parse_gpt(spec):
    parts = spec.split(":")
    if len(parts) != 4 or parts[0] != "gpt":
        sys.exit("lm_train_torch.py: --model must be gpt:L:C:H, got %r" % spec)
    return int(parts[1]), int(parts[2]), int(parts[3])


def attention(q, k, v):
    """Causal scaled dot-product attention (F.scaled_dot_product_attention with
    is_causal=True where torch has it; Debian 12's torch 1.13 does not)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    return s.masked_fill(mask, float("-inf")).softmax(-1) @ v


class GPT(torch.nn.Module):
    def __init__(self, layers, width, heads, context, vocab=256):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, width)
        self.pos = torch.nn.Parameter(torch.zeros(context, width))
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            self.blocks.append(torch.nn.ModuleDict({
                "ln1": torch.nn.LayerNorm(width), "qkv": torch.nn.Linear(width, 3 * width),
                "proj": torch.nn.Linear(width, width), "ln2": torch.nn.LayerNorm(width),
                "up": torch.nn.Linear(width, 4 * width), "down": torch.nn.Linear(4 * width, width)}))
        self.ln = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocab)
        residual_std = 0.02 / math.sqrt(2 * layers)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("bias"):
                    p.zero_()
                elif ".ln" in name or name.startswith("ln."):
                    p.fill_(1.0)
                elif name.endswith("proj.weight") or name.endswith("down.weight"):
                    p.normal_(0.0, residual_std)
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, idx):
        B, T = idx.shape
        h = self.embed(idx) + self.pos[:T]
        for b in self.blocks:
            q, k, v = b["qkv"](b["ln1"](h)).split(h.shape[-1], dim=2)
            D = h.shape[-1] // self.heads
            q, k, v = (t.view(B, T, self.heads, D).transpose(1, 2) for t in (q, k, v))
            a = attention(q, k, v).transpose(1, 2).reshape(B, T, -1)
            h = h + b["proj"](a)
            h = h + b["down"](F.gelu(b["up"](b["ln2"](h))))
        return self.head(self.ln(h))


def lr_at(base, step, steps_per_epoch, warmup_epochs, total_epochs):
    """nn_lr_at with cosine decay (nn/nn_optim.c)."""
    lr, epoch, warm = base, step / steps_per_epoch, warmup_epochs * steps_per_epoch
    if warm > 0 and step + 1 < warm:
        lr *= (step + 1) / warm
    span = total_epochs - warmup_epochs
    t = (epoch - warmup_epochs) / span if span > 0 else 0.0
    t = min(max(t, 0.0), 1.0)
    return lr * 0.5 * (1.0 + math.cos(math.pi * t))


def evaluate(model, val, T, batch):
    n = (len(val) - 1) // T
    starts = torch.arange(n) * T
    total, hits = 0.0, 0
    model.eval()
    with torch.no_grad():
        for at in range(0, n, batch):
            s = starts[at:at + batch]
            w = torch.stack([val[i:i + T + 1] for i in s.tolist()])
            logits = model(w[:, :-1])
            total += F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1), reduction="sum").item()
            hits += (logits.argmax(-1) == w[:, 1:]).sum().item()
    model.train()
    return total / (n * T), hits / (n * T)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True)
    ap.add_argument("--val", required=True)
    ap.add_argument("--model", default="gpt:4:128:4")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=float, default=0.1, help="epochs of linear warm-up")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    L, C, H = parse_gpt(args.model)
    T = args.context
    train = torch.tensor(list(open(args.train, "rb").read()), dtype=torch.long)
    val = torch.tensor(list(open(args.val, "rb").read()), dtype=torch.long)
    model = GPT(L, C, H, T)
    n_params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=args.weight_decay)
    windows = len(train) // T
    per_epoch = (windows + args.batch - 1) // args.batch
    offsets = torch.arange(T + 1)
    step, tokens, t_train = 0, 0, 0.0
    for e in range(args.epochs):
        t0 = time.time()
        left = windows
        for _ in range(per_epoch):
            B = min(args.batch, left)
            left -= B
            starts = torch.randint(0, len(train) - T, (B,))
            w = train[starts[:, None] + offsets]
            for g in opt.param_groups:
                g["lr"] = lr_at(args.lr, step, per_epoch, args.warmup, args.epochs)
            logits = model(w[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            tokens += B * T
        t_train += time.time() - t0
        vloss, acc = evaluate(model, val, T, 256)
        print("epoch %d/%d  tokens %d  val loss %.4f (%.4f bits/byte)  next byte %.2f%%  %.0f tokens/s" %
              (e + 1, args.epochs, tokens, vloss, vloss / math.log(2), 100 * acc, tokens / t_train), flush=True)
    print("val_loss=%.6f bits_per_byte=%.6f accuracy=%.6f tokens=%d tokens_per_second=%.1f parameters=%d" %
          (vloss, vloss / math.log(2), acc, tokens, tokens / t_train, n_params))


if __name__ == "__main__":
    main()
