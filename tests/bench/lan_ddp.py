#!/usr/bin/env python3
"""The PyTorch baseline of tests/bench/lan.sh: data-parallel all-reduce (DDP
over gloo), plain or with the PowerSGD communication hook, on the workload of
`sgp launch --peers N --epochs 10` (make demo's run).

One process per rank (lan.sh starts one in each emulated host's network
namespace). What is matched to sgp's defaults (`sgp peer --help`, nn/):

  data       the embedded MNIST subset, the IDX .gz files of nn/data (8,000
             train / 2,000 test), pixels / 255, no other normalisation
  shards     the training set shuffled once with the run seed and cut in N
             contiguous parts floor(r*n/N) .. floor((r+1)*n/N) (sgp's iid rule,
             with numpy's generator instead of sgp's), each rank its own part,
             reshuffled every epoch
  model      784-256-10, ReLU (sgp's mlp:256), He-normal weights
             (std sqrt(2 / fan_in)), zero biases
  batch      --batch is the TOTAL batch (64), so batch / N per rank; DDP
             averages the gradients, i.e. one step on the mean loss of 64
  optimizer  SGD lr 0.1, momentum 0.9, Nesterov, weight decay 5e-4 (L2 on every
             parameter, torch.optim.SGD semantics = nn_sgd_step)
  schedule   nn_lr_at: linear warm-up over 1 epoch (step s gets (s+1)/warm),
             then cosine to 0 over the remaining epochs, set every step;
             steps per epoch ceil(8000 / 64) = 125, as sgp's rounds per epoch

Rank 0 evaluates the model on the 2,000 test images every --eval-every steps
and at the end, and writes one JSON line per evaluation to --log:
{"t": seconds since --t0, "step", "epoch", "test_accuracy", "lr"}, and a
summary JSON to --summary. All ranks agree to stop early (a MAX all-reduce of
a flag at every evaluation point) once --time-cap seconds since --t0 have
passed: the run is then marked "capped".
"""
import argparse
import datetime
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np


def load_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load_split(data_dir, prefix):
    x = load_idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    y = load_idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    x = x.reshape(x.shape[0], -1).astype(np.float32) / np.float32(255.0)
    return x, y.astype(np.int64)


def lr_at(base, step, spe, warmup_epochs, total_epochs):
    """nn/nn_optim.c nn_lr_at with cosine decay."""
    epoch = step / spe
    lr = base
    warm = warmup_epochs * spe
    if warm > 0 and step + 1 < warm:
        lr *= (step + 1) / warm
    span = total_epochs - warmup_epochs
    t = (epoch - warmup_epochs) / span if span > 0 else 0.0
    t = min(max(t, 0.0), 1.0)
    return lr * 0.5 * (1.0 + math.cos(math.pi * t))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True, help="init_method, e.g. tcp://10.77.0.1:29500")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../nn/data"))
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64, help="total batch over all ranks")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--nesterov", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--powersgd", type=int, default=0, help="PowerSGD rank (0: plain all-reduce)")
    ap.add_argument("--powersgd-start", type=int, default=10,
                    help="steps of plain all-reduce before PowerSGD (torch wants > 1 with error feedback)")
    ap.add_argument("--eval-every", type=int, default=25, help="steps between evaluations (rank 0)")
    ap.add_argument("--time-cap", type=float, default=0, help="stop after this many seconds since --t0 (0: none)")
    ap.add_argument("--t0", type=float, default=None, help="time.time() of the start of the run [now]")
    ap.add_argument("--log", default=None, help="rank 0: JSON lines, one per evaluation")
    ap.add_argument("--summary", default=None, help="rank 0: JSON summary")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    t0 = a.t0 if a.t0 is not None else time.time()

    import torch
    import torch.distributed as dist
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.set_num_threads(a.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass

    xtr, ytr = load_split(a.data, "train")
    xte, yte = load_split(a.data, "t10k")
    n = xtr.shape[0]
    perm = np.random.RandomState(a.seed).permutation(n)
    lo, hi = a.rank * n // a.world, (a.rank + 1) * n // a.world
    shard = perm[lo:hi]
    per_batch = max(a.batch // a.world, 1)
    spe = (n + per_batch * a.world - 1) // (per_batch * a.world)
    total_steps = spe * a.epochs
    xtr_t, ytr_t = torch.from_numpy(xtr), torch.from_numpy(ytr)
    xte_t, yte_t = torch.from_numpy(xte), torch.from_numpy(yte)

    dist.init_process_group("gloo", init_method=a.init, rank=a.rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=300))
    t_ready = time.time() - t0

    torch.manual_seed(a.seed)
    model = nn.Sequential(nn.Linear(784, a.hidden), nn.ReLU(), nn.Linear(a.hidden, 10))
    with torch.no_grad():
        for m in model:
            if isinstance(m, nn.Linear):
                m.weight.normal_(0.0, math.sqrt(2.0 / m.in_features))
                m.bias.zero_()
    ddp = DDP(model)  # broadcasts rank 0's parameters
    hook = "allreduce"
    if a.powersgd > 0:
        from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD
        state = powerSGD.PowerSGDState(process_group=None, matrix_approximation_rank=a.powersgd,
                                       start_powerSGD_iter=a.powersgd_start, min_compression_rate=2,
                                       use_error_feedback=True, warm_start=True, random_seed=a.seed)
        ddp.register_comm_hook(state, powerSGD.powerSGD_hook)
        hook = "powersgd:%d" % a.powersgd
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum, nesterov=a.nesterov,
                          weight_decay=a.weight_decay)

    log = open(a.log, "w") if (a.log and a.rank == 0) else None

    def evaluate():
        model.eval()
        with torch.no_grad():
            acc = (model(xte_t).argmax(1) == yte_t).float().mean().item()
        model.train()
        return acc

    def record(step, acc, lr, **extra):
        if log:
            rec = {"t": time.time() - t0, "step": step, "epoch": step / spe, "test_accuracy": acc, "lr": lr}
            rec.update(extra)
            log.write(json.dumps(rec) + "\n")
            log.flush()

    record(0, evaluate() if a.rank == 0 else -1, 0.0)
    rng = np.random.RandomState(a.seed * 1000003 + a.rank)
    step, capped, loss_v, lr = 0, False, float("nan"), 0.0
    order, pos = rng.permutation(shard), 0
    while step < total_steps:
        if pos + per_batch > len(order):  # a new epoch's order for the rest
            order, pos = np.concatenate([order[pos:], rng.permutation(shard)]), 0
        idx = torch.from_numpy(order[pos:pos + per_batch])
        pos += per_batch
        lr = lr_at(a.lr, step, spe, a.warmup, a.epochs)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(ddp(xtr_t[idx]), ytr_t[idx])
        loss.backward()
        opt.step()
        step += 1
        if step % a.eval_every == 0 or step % spe == 0 or step == total_steps:
            if a.time_cap > 0:
                flag = torch.tensor([1.0 if time.time() - t0 > a.time_cap else 0.0])
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                capped = flag.item() > 0 and step < total_steps
            loss_v = loss.item()
            if a.rank == 0:
                record(step, evaluate(), lr, loss=loss_v)
            if capped:
                break
    wall = time.time() - t0
    if a.rank == 0:
        acc = evaluate()
        if a.summary:
            with open(a.summary, "w") as f:
                json.dump({"system": "ddp", "hook": hook, "world": a.world, "test_accuracy": acc,
                           "epochs": a.epochs, "steps": step, "total_steps": total_steps, "epochs_done": step / spe,
                           "capped": capped, "wall_seconds": wall, "ready_seconds": t_ready,
                           "train_loss_last": loss_v, "parameters": sum(p.numel() for p in model.parameters())},
                          f, indent=2)
                f.write("\n")
        print("rank 0: %s, %d ranks, %d/%d steps, test accuracy %.2f%%, %.1f s%s"
              % (hook, a.world, step, total_steps, 100 * acc, wall, " (capped)" if capped else ""))
    if log:
        log.close()
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
