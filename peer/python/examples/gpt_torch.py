#!/usr/bin/env python3
"""A nanoGPT-style byte-level language model in plain PyTorch, trained alone
or as one of N sgp peers through sgp.torch.Optimizer.

The model, data, optimizer, schedule and loop are ordinary PyTorch; with
--cluster the AdamW optimizer is wrapped, and that is the whole change:

    opt = sgp.torch.Optimizer(torch.optim.AdamW(...), cluster=..., steps=...,
                              local_steps=10, outer="nesterov:0.7:0.9", codec="stc:0.04")

Alone (no --cluster) it is the reference: the same total batch and steps.
--device cuda trains on a GPU (sgp mixes a pinned host copy of the
parameters; tests/bench/gpu.sh runs it).

    make data                                                   # the Brown corpus, build/data/brown/brown.txt
    python3 peer/python/examples/gpt_torch.py                   # alone
    build/sgp launch --peers 4 --prepare --run-dir run
    for i in 0 1 2 3; do
        python3 peer/python/examples/gpt_torch.py --cluster run/cluster.conf --id $i \\
            --local-steps 10 --outer nesterov:0.7:0.9 --codec stc:0.04 &
    done

Data: the first --bytes bytes of --text; its last tenth (at most --val-bytes)
is held out, the rest is the training set. Each peer draws its own random
windows of --context bytes (its own stream: the peers' data differ, as the
shards of a real run would), --batch / peers of them a step, so every step
of the run uses --batch windows in all. Ends with "validation loss L" (mean
next-byte cross-entropy in nats, over every held-out byte) and a JSON line
after "summary " (bytes sent, rounds, time, peak RSS, and for a peer
gossip_seconds: what its gossip rounds held the loop for, and
blocking_share: that against the loop's own time; --overlap runs each
round's exchange during the next round's steps).
"""

import argparse
import json
import math
import os
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a 4x GELU MLP."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.heads)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, context):
        super().__init__()
        self.tok, self.pos = nn.Embedding(256, width), nn.Embedding(context, width)
        self.blocks = nn.Sequential(*[Block(width, heads) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, 256)
        for name, p in self.named_parameters():  # GPT-2's initialisation
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02 / (math.sqrt(2 * layers) if name.endswith("proj.weight") else 1.0))
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        return self.head(self.ln(self.blocks(x)))


def load(path, nbytes, val_bytes):
    if not os.path.exists(path):
        sys.exit("gpt_torch: %s not found (`make data` writes the Brown corpus there; or give --text FILE)" % path)
    with open(path, "rb") as f:
        data = torch.frombuffer(bytearray(f.read(nbytes)), dtype=torch.uint8).long()
    if len(data) < 4096:
        sys.exit("gpt_torch: %s has %d bytes; at least 4096 are needed" % (path, len(data)))
    cut = len(data) - min(len(data) // 10, val_bytes)
    return data[:cut], data[cut:]


def evaluate(model, val, T, batch=64):
    """Mean next-byte cross-entropy (nats) over every held-out byte after the first."""
    n = (len(val) - 1) // T
    total = 0.0
    device = next(model.parameters()).device
    model.eval()
    with torch.no_grad():
        for at in range(0, n, batch):
            w = torch.stack([val[i * T:i * T + T + 1] for i in range(at, min(n, at + batch))]).to(device)
            total += F.cross_entropy(model(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1), reduction="sum").item()
    model.train()
    return total / (n * T)


def add_workload_arguments(ap, who="peer"):
    """The options of the workload (data, model, steps, schedule, logging),
    shared with the DDP and DiLoCo baselines of tests/bench/lan_torch_baselines.py."""
    ap.add_argument("--text", default="build/data/brown/brown.txt", help="a text file [the Brown corpus of make data]")
    ap.add_argument("--bytes", type=int, default=1 << 20, help="use the first N bytes of it [1 MiB]")
    ap.add_argument("--val-bytes", type=int, default=64 << 10, help="held out at most [64 KiB]")
    ap.add_argument("--model", default="4:128:4", help="LAYERS:WIDTH:HEADS [4:128:4]")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32, help="windows a step, all %ss together [32]" % who)
    ap.add_argument("--steps", type=int, default=2000, help="optimizer steps of every %s [2000]" % who)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=float, default=0.05, help="share of the steps in linear warm-up [0.05]")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps into --log [0: at the end]")
    ap.add_argument("--log", help="append one JSON line per evaluation: t (s since --t0), step, val_loss")
    ap.add_argument("--t0", type=float, default=None, help="the run's start (time.time()) for --log [now]")
    ap.add_argument("--slow", type=float, default=1.0, help="take F times as long a step's compute (an emulated slow host) [1]")


def adamw(params, lr):
    """The inner optimizer: AdamW with nanoGPT's betas and weight decay."""
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1)


def schedule(opt, a):
    """Linear warm-up over a.warmup of the steps, then cosine decay to zero."""
    warm = max(1, int(a.warmup * a.steps))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / a.steps))))


def windows(train, context, n, gen):
    """n random windows of context + 1 bytes of the training set."""
    starts = torch.randint(0, len(train) - context - 1, (n,), generator=gen)
    return torch.stack([train[s:s + context + 1] for s in starts.tolist()])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_workload_arguments(ap)
    ap.add_argument("--device", default="cpu", help="where the model trains: cpu, cuda, cuda:1, ... [cpu]")
    ap.add_argument("--cluster", help="cluster file: run as one peer of an sgp run")
    ap.add_argument("--id", type=int, default=-1, help="this peer's id [the MPI/Slurm rank]")
    ap.add_argument("--local-steps", type=int, help="optimizer steps a gossip round [1; the recipe's]")
    ap.add_argument("--outer", help="outer optimizer, e.g. nesterov:0.7:0.9 [none]")
    ap.add_argument("--codec", help="message codec, e.g. stc:0.04 [none: float32]")
    ap.add_argument("--overlap", action="store_true", help="run each round's exchange during the next steps")
    ap.add_argument("--recipe", choices=["lm"], help="lm: the exact sparse all-gather with SparseLoCo's message "
                    "(a cluster with the complete topology: sgp launch --prepare --topology complete)")
    ap.add_argument("--dead-timeout", type=float, help="seconds of silence before a neighbour is routed around "
                    "[libsgp's]; raise it where the peers' steps starve their network threads of CPU")
    ap.add_argument("--checkpoint", help="the gossip state's checkpoint file (written at the end; the starting "
                    "parameters are kept beside it, FILE.origin, instead of in memory) [none]")
    ap.add_argument("--gossip-log", help="sgp's event log (JSON lines: rounds, faults, the ledger, memory by part "
                    "at the end) [none]")
    a = ap.parse_args()
    layers, width, heads = (int(v) for v in a.model.split(":"))
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)  # the same initial model on every peer
    train, val = load(a.text, a.bytes, a.val_bytes)
    model = GPT(layers, width, heads, a.context).to(a.device)
    inner = adamw(model.parameters(), a.lr)
    opt, me, peers = inner, 0, 1
    if a.cluster:
        import sgp.torch
        opt = sgp.torch.Optimizer(inner, cluster=a.cluster, id=a.id, steps=a.steps, local_steps=a.local_steps,
                                  outer=a.outer, codec=a.codec, overlap=a.overlap, recipe=a.recipe, model=model,
                                  **({"dead_timeout": a.dead_timeout} if a.dead_timeout else {}),
                                  **({"checkpoint": a.checkpoint} if a.checkpoint else {}),
                                  **({"log": a.gossip_log} if a.gossip_log else {}))
        me, peers = opt.id, opt.peers
    sched = schedule(opt, a)  # on the wrapper: schedulers drive it as any optimizer
    per_peer = max(1, a.batch // peers)
    gen = torch.Generator().manual_seed(1000 * a.seed + me)
    t0 = time.time() if a.t0 is None else a.t0

    def log_eval(step, loss=None):
        if a.log:
            loss = evaluate(model, val, a.context) if loss is None else loss
            with open(a.log, "a") as f:
                f.write(json.dumps({"t": time.time() - t0, "step": step, "peer": me, "val_loss": loss}) + "\n")

    print("peer %d of %d: %d parameters, %d training bytes, %d held out" % (
        me, peers, sum(p.numel() for p in model.parameters()), len(train), len(val)), flush=True)
    loop_seconds = 0.0  # the training loop's, evaluations left out
    for step in range(a.steps):
        t_step, gossip_before = time.time(), getattr(opt, "gossip_seconds", 0.0)
        w = windows(train, a.context, per_peer, gen).to(a.device)
        loss = F.cross_entropy(model(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if a.slow > 1:  # (the step's compute: a gossip round's waiting is the network's, not the host's)
            time.sleep((a.slow - 1) * (time.time() - t_step - (getattr(opt, "gossip_seconds", 0.0) - gossip_before)))
        loop_seconds += time.time() - t_step
        if a.eval_every and (step + 1) % a.eval_every == 0:
            log_eval(step + 1)
        if (step + 1) % max(1, a.steps // 10) == 0:
            print("peer %d: step %d  loss %.4f" % (me, step + 1, loss.item()), flush=True)
        if a.cluster and opt.done:
            break
    v = evaluate(model, val, a.context)
    if not a.eval_every or (step + 1) % a.eval_every:
        log_eval(step + 1, v)
    summary = {"parameters": sum(p.numel() for p in model.parameters()), "steps": step + 1,
               "validation_loss": v, "seconds": time.time() - t0, "loop_seconds": loop_seconds,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.device(a.device).type == "cuda":
        summary["peak_device_mb"] = torch.cuda.max_memory_allocated(a.device) / 2**20
    if a.cluster:
        # what the gossip rounds held the loop for, against the steps' own time
        summary.update(opt.status(), gossip_seconds=opt.gossip_seconds,
                       blocking_share=opt.gossip_seconds / max(1e-9, loop_seconds - opt.gossip_seconds))
        opt.close()
    print("peer %d: validation loss %.4f" % (me, v))
    print("summary " + json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
