#!/usr/bin/env python3
"""The PyTorch baselines of tests/bench/lan_torch.sh: the GPT of
peer/python/examples/gpt_torch.py trained by N ranks over torch.distributed
(gloo), one process per rank (lan_torch.sh starts one in each emulated host's
network namespace).

  --system ddp     DistributedDataParallel: the gradients are all-reduced
                   (averaged) every step, then clipped and stepped, so every
                   step is one step on the mean loss of --batch windows, as
                   gpt_torch.py alone
  --system diloco  DiLoCo: every rank takes --local-steps (H) AdamW steps on
                   its own, then the pseudo-gradient anchor - params is
                   all-reduced (averaged over ranks) and an outer SGD step
                   (--outer-lr 0.7, --outer-momentum 0.9, Nesterov) is taken
                   on the anchor; params = anchor. The inner AdamW keeps its
                   state across rounds. The last round may be shorter.

The same as gpt_torch.py (imported from there: GPT, load, evaluate): the
model and its initialisation (torch.manual_seed(--seed) before building it,
so every rank starts from the same model), the data (the first --bytes of
--text, its last tenth held out, each rank its own random windows from
torch.Generator().manual_seed(1000 * seed + rank)), --batch / world windows
a rank a step, AdamW (betas 0.9, 0.95, weight decay 0.1), linear warm-up and
cosine decay, gradient clipping at 1.0. Rank 0 evaluates every --eval-every
steps and at the end, and appends {"t": s since --t0, "step", "peer": 0,
"val_loss"} to --log (gpt_torch.py's format); it ends with "validation loss
L" and "summary {json}".

--slow F emulates a host F times slower in compute: after each step the rank
sleeps F - 1 times that step's own compute time, the time spent in the
collectives (timed by a synchronous DDP communication hook, or around
DiLoCo's all-reduce) left out.
"""

import argparse
import datetime
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "peer", "python", "examples"))
import gpt_torch  # noqa: E402  (GPT, load, evaluate; its main() runs only as __main__)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--system", choices=("ddp", "diloco"), required=True)
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--init", required=True, help="torch.distributed init_method, tcp://ADDR:PORT")
    gpt_torch.add_workload_arguments(ap, who="rank")
    ap.add_argument("--local-steps", type=int, default=10, help="diloco: inner steps a round (H) [10]")
    ap.add_argument("--outer-lr", type=float, default=0.7, help="diloco: outer Nesterov SGD learning rate [0.7]")
    ap.add_argument("--outer-momentum", type=float, default=0.9, help="diloco: outer momentum [0.9]")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds a collective may wait [1800]")
    a = ap.parse_args()
    t0 = time.time() if a.t0 is None else a.t0
    layers, width, heads = (int(v) for v in a.model.split(":"))
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=a.init, rank=a.rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    me, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(a.seed)  # the same initial model on every rank
    train, val = gpt_torch.load(a.text, a.bytes, a.val_bytes)
    model = gpt_torch.GPT(layers, width, heads, a.context)
    params = list(model.parameters())
    comm = [0.0]  # seconds in collectives this step

    net = model
    if a.system == "ddp":
        def timed_allreduce(state, bucket):
            # the default hook's work (sum, / world), synchronously, so that its time is known
            t = time.time()
            buf = bucket.buffer()
            dist.all_reduce(buf)
            buf.div_(world)
            comm[0] += time.time() - t
            fut = torch.futures.Future()
            fut.set_result(buf)
            return fut
        net = nn.parallel.DistributedDataParallel(model)
        net.register_comm_hook(None, timed_allreduce)
    else:
        anchor = [p.detach().clone() for p in params]
        outer = torch.optim.SGD(anchor, lr=a.outer_lr, momentum=a.outer_momentum,
                                nesterov=a.outer_momentum > 0)

    opt = gpt_torch.adamw(params, a.lr)
    sched = gpt_torch.schedule(opt, a)
    per_rank = max(1, a.batch // world)
    gen = torch.Generator().manual_seed(1000 * a.seed + me)
    sent = 0  # payload bytes this rank handed to all-reduce

    def log_eval(step, loss=None):
        if me == 0 and a.log:
            loss = gpt_torch.evaluate(model, val, a.context) if loss is None else loss
            with open(a.log, "a") as f:
                f.write(json.dumps({"t": time.time() - t0, "step": step, "peer": 0, "val_loss": loss}) + "\n")

    nparam = sum(p.numel() for p in params)
    print("%s rank %d of %d: %d parameters, %d training bytes, %d held out" % (
        a.system, me, world, nparam, len(train), len(val)), flush=True)
    rounds = 0
    for step in range(a.steps):
        t_step = time.time()
        comm[0] = 0.0
        w = gpt_torch.windows(train, a.context, per_rank, gen)
        loss = F.cross_entropy(net(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1))
        loss.backward()
        if a.system == "ddp":
            sent += 4 * nparam
            rounds += 1
        nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sched.step()
        if a.system == "diloco" and ((step + 1) % a.local_steps == 0 or step + 1 == a.steps):
            with torch.no_grad():
                delta = torch.cat([(q - p).reshape(-1) for q, p in zip(anchor, params)])
                t = time.time()
                dist.all_reduce(delta)
                comm[0] += time.time() - t
                sent += 4 * delta.numel()
                delta.div_(world)
                at = 0
                for q in anchor:
                    q.grad = delta[at:at + q.numel()].view_as(q).clone()
                    at += q.numel()
                outer.step()
                for q, p in zip(anchor, params):
                    p.copy_(q)
            rounds += 1
        if a.slow > 1:
            time.sleep((a.slow - 1) * max(0.0, time.time() - t_step - comm[0]))
        if a.eval_every and (step + 1) % a.eval_every == 0:
            log_eval(step + 1)
        if (step + 1) % max(1, a.steps // 10) == 0:
            print("%s rank %d: step %d  loss %.4f" % (a.system, me, step + 1, loss.item()), flush=True)
    v = gpt_torch.evaluate(model, val, a.context) if me == 0 else float("nan")
    if not a.eval_every or a.steps % a.eval_every:
        log_eval(a.steps, v)
    summary = {"system": a.system, "rank": me, "parameters": nparam, "steps": a.steps, "rounds": rounds,
               "allreduce_payload_bytes": sent, "seconds": time.time() - t0}
    if me == 0:
        summary["validation_loss"] = v
        print("%s rank 0: validation loss %.4f" % (a.system, v))
    print("summary " + json.dumps(summary), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
