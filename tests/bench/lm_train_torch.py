#!/usr/bin/python3
"""PyTorch reference for `sgp train` on text: the same byte-level GPT
(gpt:L:C:H, nn/MODELS.md), the same data, batches of random windows, AdamW,
warm-up and cosine schedule, evaluated on the same windows, so the learning
curves of the two can be put side by side (tests/bench/lm_curve.sh).

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/bench/lm_train_torch.py \\
        --train train.txt --val val.txt --model gpt:4:128:4 --context 64 --batch 32 --epochs 2

What matches sgp by construction: the model (gpt_step_torch.py's, the one
`make bench` times: pre-norm blocks, one QKV projection, causal attention,
4x GELU MLP, final norm, an untied head with bias, GPT-2's initialisation as
nn_model_init_params draws it), an epoch of
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

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from gpt_step_torch import attention_fn, build_model, parse_gpt  # noqa: E402  the same model as make bench's


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
    _, attn = attention_fn(torch, F, "sdpa")
    train = torch.tensor(list(open(args.train, "rb").read()), dtype=torch.long)
    val = torch.tensor(list(open(args.val, "rb").read()), dtype=torch.long)
    model = build_model(torch, torch.nn, F, L, C, H, T, attn)
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
