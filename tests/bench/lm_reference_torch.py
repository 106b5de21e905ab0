#!/usr/bin/python3
"""Reference rows for the byte-level GPT's bytes-against-loss frontier, in
PyTorch: one process, DDP, DiLoCo and SparseLoCo on sgp's gpt:L:C:H, the
same text, total batch, tokens, AdamW and schedule for every row.

    OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 tests/bench/lm_reference_torch.py \\
        --train build/bench/text/train.txt --val build/bench/text/val.txt \\
        alone ddp diloco:10:0.7:0.9 sparseloco:10:64

Rows (positional, run in order):
  alone                 one process, the whole batch, no bytes.
  ddp                   W workers, 1/W of the batch each, gradients averaged
                        every step (computed exactly as one weighted batch):
                        a ring all-reduce of fp32 gradients a step,
                        2 (W-1)/W * 4 P bytes sent per worker.
  diloco:H:LR:MOM       W workers with their own AdamW states; every H inner
                        steps (and at the last step) the mean pseudo-gradient
                        (global - worker) steps the global model by SGD with
                        Nesterov momentum MOM (plain SGD when MOM is 0) at
                        outer learning rate LR; workers restart from the
                        global model. Bytes per sync: a ring all-reduce of
                        the fp32 pseudo-gradient, as ddp's step.
  sparseloco:H:K        as the SparseLoCo authors run it (tplr-ai/templar's
                        prepare_gradient_dict, compress.py and outer_step):
                        error buffer e = 0.95 e + pseudo-gradient; e cut in
                        4,096-value chunks (2-D tensors in blocks of up to
                        64 x 64, 1-D tensors in chunks of up to 4,096); the
                        top K by magnitude of each chunk kept; their values
                        quantised to 2 bits per tensor (mean shift, 4 bins
                        of 6 sigma / 4, each bin decoded as the mean of the
                        values in it); what was sent (after quantisation)
                        subtracted from e. The W messages are gathered;
                        each worker's values clipped to the median of the
                        workers' norms (per tensor), then averaged per
                        coordinate over the workers that sent it; the
                        global model steps by outer lr 1, no momentum.
                        Bytes per sync: a ring all-gather, (W-1) * message;
                        message = K indices at 12 bits + K values at 2 bits
                        a chunk, plus each tensor's shift and 4-entry lookup
                        (5 fp32).

Every row: the same model initialisation, the same random windows (a batch
of --batch windows a step, worker w taking its 1/W share), AdamW (lr, betas
0.9 0.999, eps 1e-8, weight decay on every parameter, as sgp's), the inner
learning rate at each inner step by sgp's schedule (nn_lr_at: linear warm-up,
cosine to zero), as in one process. The workers are simulated one after
another in this process (exact for the losses). The validation loss is that
of the shared (global) model, on sgp's evaluation windows, at --curve points
and at the end (after the sync at the last step).

Output: progress on stderr, one JSON line per row on stdout as it ends, then
a table (row, validation loss, vs alone, bytes per worker, fewer than ddp).
Run it with Debian's /usr/bin/python3 (python3-torch); a benchmark
reference, not a dependency of sgp.
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from gpt_step_torch import attention_fn, build_model, parse_gpt  # noqa: E402  make bench's model
from lm_train_torch import evaluate, lr_at  # noqa: E402  sgp's schedule and evaluation windows

CHUNK_SIDE = 64      # templar's target_chunk: 2-D blocks of 64 x 64 = 4,096 values
CHUNK_1D = 4096      # 1-D tensors in chunks of 4,096 (Covenant-72B, section 4.1)
EF_DECAY = 0.95      # templar's momentum_decay
Q_BINS, Q_SIGMAS = 4, 6  # templar's quantization_bins, quantization_range
IDX_BITS, VAL_BITS = 12, 2
QPARAM_BYTES = 4 * (1 + Q_BINS)  # a tensor's shift and lookup table, fp32


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_row(spec):
    f = spec.split(":")
    try:
        if f[0] in ("alone", "ddp") and len(f) == 1:
            return {"system": f[0]}
        if f[0] == "diloco" and len(f) == 4:
            r = {"system": "diloco", "H": int(f[1]), "outer_lr": float(f[2]), "outer_momentum": float(f[3])}
            if r["H"] >= 1 and r["outer_lr"] > 0 and 0 <= r["outer_momentum"] < 1:
                return r
        if f[0] == "sparseloco" and len(f) == 3:
            r = {"system": "sparseloco", "H": int(f[1]), "k": int(f[2])}
            if r["H"] >= 1 and r["k"] >= 2:
                return r
    except ValueError:
        pass
    sys.exit("lm_reference_torch: row '%s': expected alone, ddp, diloco:H:LR:MOM or sparseloco:H:K" % spec)


def largest_divisor_upto(n, cap):
    """templar's _get_smaller_split: the largest divisor of n that is <= cap."""
    return max(d for d in range(1, min(n, cap) + 1) if n % d == 0)


class Chunker:
    """A tensor's view as [chunks, chunk values] and back (2-D: h x w blocks)."""

    def __init__(self, shape, size=None):
        self.shape = tuple(shape)
        if size:  # a flat vector in runs of size values (sgp's chunks), its length a multiple of size
            self.size = size
        elif len(shape) == 2:
            self.h, self.w = largest_divisor_upto(shape[0], CHUNK_SIDE), largest_divisor_upto(shape[1], CHUNK_SIDE)
            self.size = self.h * self.w
        else:
            self.size = largest_divisor_upto(shape[0], CHUNK_1D)
        self.chunks = math.prod(self.shape) // self.size

    def split(self, x):
        if len(self.shape) == 2:
            R, C = self.shape
            return x.reshape(R // self.h, self.h, C // self.w, self.w).permute(0, 2, 1, 3).reshape(self.chunks, -1)
        return x.reshape(self.chunks, self.size)

    def join(self, c):
        if len(self.shape) == 2:
            R, C = self.shape
            return c.reshape(R // self.h, C // self.w, self.h, self.w).permute(0, 2, 1, 3).reshape(self.shape)
        return c.reshape(self.shape)

    def k(self, K):
        """templar's _clamp_topk: at most the chunk, at least 2, even."""
        k = max(min(K, self.size), 2)
        return k - k % 2

    def message_bytes(self, K, quant="tensor"):
        n = self.chunks * self.k(K)
        lookup = {"tensor": QPARAM_BYTES, "chunk": self.chunks * 2 * Q_BINS, "signs": 2 * Q_BINS}[quant]
        return (n * IDX_BITS + 7) // 8 + (n * VAL_BITS + 7) // 8 + lookup


def quantise(v):
    """templar's _quantize_values at 4 bins: the decoded values (what the receivers see)."""
    shift = v.mean()
    c = v - shift
    std = c.norm() / math.sqrt(max(c.numel() - 1, 1))
    scale = Q_SIGMAS * std / Q_BINS
    if not torch.isfinite(scale) or scale == 0:
        scale = torch.tensor(1.0)
    q = (c / scale + Q_BINS // 2).round().clamp(0, Q_BINS - 1).long().flatten()
    sums = torch.zeros(Q_BINS).scatter_add_(0, q, c.flatten())
    counts = torch.zeros(Q_BINS).scatter_add_(0, q, torch.ones_like(c.flatten()))
    lookup = torch.where(counts > 0, sums / counts.clamp(min=1), torch.zeros_like(sums))
    return (lookup[q] + shift).reshape(v.shape)


def quantise_per_chunk(v):
    """sgp's sparseloco codec (compress/codec_sparseloco.c): per chunk (a row of v), a value's code is its
    sign and whether its magnitude is above the row's mean magnitude; each code decodes as the mean of the
    row's values that got it, in bf16."""
    code = (v < 0).long() + 2 * (v.abs() > v.abs().mean(-1, keepdim=True)).long()
    sums = torch.zeros(v.shape[0], Q_BINS).scatter_add_(1, code, v)
    counts = torch.zeros(v.shape[0], Q_BINS).scatter_add_(1, code, torch.ones_like(v))
    levels = (sums / counts.clamp(min=1)).bfloat16().float()
    return levels.gather(1, code)


def sparseloco_encode(e, ch, K, quant="tensor"):
    """Top-K a chunk of the error buffer e, quantised; e less what is sent. Returns (idx, values)."""
    x = ch.split(e)
    idx = x.abs().topk(ch.k(K), dim=-1, largest=True, sorted=False).indices
    v = x.gather(-1, idx)
    if quant == "tensor":
        vals = quantise(v)
    elif quant == "chunk":
        vals = quantise_per_chunk(v)
    else:  # sgp's levels, one set for the whole message (tensor)
        vals = quantise_per_chunk(v.reshape(1, -1)).reshape(v.shape)
    sent = torch.zeros_like(x).scatter_(-1, idx, vals)
    e.sub_(ch.join(sent))
    return idx, vals


def median_clip(norms):
    """Each worker's scale: its message (or tensor) norm brought down to the median of the workers'."""
    return torch.clamp(torch.median(norms) / (norms + 1e-8), max=1.0)


def sparseloco_aggregate(msgs, ch, shape, mean_over, scales=None):
    """templar's batch_decompress: median-norm clip (per tensor, or the given scales a worker), then a mean
    per coordinate over the senders ('picked', scatter_reduce mean, include_self=False) or over all workers
    ('all', the paper's Eq. 2)."""
    if scales is None:
        scales = median_clip(torch.stack([v.norm() for _, v in msgs]))
    idx = torch.cat([i for i, _ in msgs], dim=-1)
    vals = torch.cat([v * s for (_, v), s in zip(msgs, scales)], dim=-1)
    out = torch.zeros(ch.chunks, ch.size)
    if mean_over == "picked":
        out.scatter_reduce_(-1, idx, vals, reduce="mean", include_self=False)  # torch 1.13's beta warning: off
    else:
        out.scatter_add_(-1, idx, vals).div_(len(msgs))
    return ch.join(out).reshape(shape)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="+", help="alone | ddp | diloco:H:LR:MOM | sparseloco:H:K")
    ap.add_argument("--train", required=True, help="training text (bytes)")
    ap.add_argument("--val", required=True, help="validation text (bytes)")
    ap.add_argument("--train-bytes", type=int, default=0, help="use only the first N bytes of --train (0: all)")
    ap.add_argument("--model", default="gpt:4:128:4")
    ap.add_argument("--context", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32, help="total windows a step, over all workers")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=0.006, help="inner AdamW learning rate (default 0.006)")
    ap.add_argument("--warmup", type=float, default=0.1, help="epochs of linear warm-up")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--sparse-mean", choices=("picked", "all"), default="picked",
                    help="sparseloco's average: per coordinate over the workers that sent it (the authors' code, "
                         "default) or over all workers (the paper's Eq. 2)")
    ap.add_argument("--sparse-chunks", choices=("blocks", "flat"), default="blocks",
                    help="sparseloco's chunks: each tensor's own (64 x 64 blocks, 1-D runs; the authors', default) "
                         "or runs of 4,096 values of all parameters laid end to end (sgp's)")
    ap.add_argument("--sparse-clip", choices=("tensor", "message"), default="tensor",
                    help="sparseloco's median-norm clip: per tensor (the authors', default) or per whole message "
                         "(sgp's)")
    ap.add_argument("--sparse-quant", choices=("tensor", "chunk", "signs"), default="tensor",
                    help="sparseloco's 2-bit values: the authors' statistical quantiser, one lookup a tensor "
                         "(default); sgp's four bf16 levels (sign, above the mean magnitude or not) a chunk; or "
                         "those four levels once for a whole tensor (signs)")
    ap.add_argument("--sparse-decay", type=float, default=EF_DECAY, help="sparseloco's error-buffer decay (0.95)")
    ap.add_argument("--shard", choices=("none", "contiguous"), default="none",
                    help="the workers' data: windows of the whole text for every worker (default), or worker w's "
                         "windows from its own contiguous 1/W of the text, as sgp's peers take their text shards "
                         "(nn/nn_shard.c)")
    ap.add_argument("--curve", type=int, default=4, help="validation points along the run, the end included "
                    "(default 4; each costs a pass over --val)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    rows = [(r, parse_row(r)) for r in args.rows]
    import warnings
    warnings.filterwarnings("ignore", message="scatter_reduce")
    torch.set_num_threads(args.threads)
    L, C, Hh = parse_gpt(args.model)
    T, W = args.context, args.workers
    if args.batch % W:
        sys.exit("lm_reference_torch: --batch %d is not a multiple of --workers %d" % (args.batch, W))
    _, attn = attention_fn(torch, F, "sdpa")
    raw = open(args.train, "rb").read()
    if args.train_bytes > 0:
        raw = raw[:args.train_bytes]
    train = torch.tensor(list(raw), dtype=torch.long)
    val = torch.tensor(list(open(args.val, "rb").read()), dtype=torch.long)
    windows = len(train) // T
    per_epoch = (windows + args.batch - 1) // args.batch
    steps = per_epoch * args.epochs
    offsets = torch.arange(T + 1)
    bounds = [round(len(train) * w / W) for w in range(W + 1)]
    slices = list(zip(bounds[:-1], bounds[1:]))  # --shard contiguous: worker w's bytes, as sgp's text shards
    results = []
    for spec, row in rows:
        torch.manual_seed(args.seed)
        glob = build_model(torch, torch.nn, F, L, C, Hh, T, attn)
        P = sum(p.numel() for p in glob.parameters())
        gparams = list(glob.parameters())
        allreduce = 2 * (W - 1) / W * 4 * P
        system, H = row["system"], row.get("H", 1)
        make_opt = lambda ps: torch.optim.AdamW(ps, lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                                                weight_decay=args.weight_decay)
        if system in ("alone", "ddp"):
            opt = make_opt(gparams)
        else:
            import copy
            workers = [copy.deepcopy(glob) for _ in range(W)]
            wparams = [list(m.parameters()) for m in workers]
            opts = [make_opt(ps) for ps in wparams]
        if system == "diloco":
            mom = row["outer_momentum"]
            outer = torch.optim.SGD(gparams, lr=row["outer_lr"], momentum=mom, nesterov=mom > 0)
        if system == "sparseloco":
            flat = args.sparse_chunks == "flat"
            padded = -(-P // CHUNK_1D) * CHUNK_1D
            chunkers = [Chunker((padded,), CHUNK_1D)] if flat else [Chunker(p.shape) for p in gparams]
            ef = [[torch.zeros(ch.shape) for ch in chunkers] for _ in range(W)]
            message = sum(ch.message_bytes(row["k"], args.sparse_quant) for ch in chunkers)
            sent_values = sum(ch.chunks * ch.k(row["k"]) for ch in chunkers)
        per_sync = {"alone": 0, "ddp": allreduce, "diloco": allreduce}.get(system) if system != "sparseloco" \
            else (W - 1) * message
        gen = torch.Generator().manual_seed(args.seed)
        curve_at = sorted({max(1, round(steps * i / args.curve)) for i in range(1, args.curve + 1)} | {steps})
        curve, sent, syncs, tokens, step = [], 0.0, 0, 0, 0
        t0 = time.time()
        log("[%s] %d parameters, %d workers, %d steps of %d windows x %d, %s bytes a sync per worker" % (
            spec, P, W if system != "alone" else 1, steps, args.batch, T, "%.0f" % per_sync))
        for e in range(args.epochs):
            left = windows
            for _ in range(per_epoch):
                B = min(args.batch, left)
                left -= B
                if args.shard == "contiguous" and system != "alone":  # worker w: windows of its slice only
                    per = [len(x) for x in torch.tensor_split(torch.arange(B), W)]
                    starts = torch.cat([lo + torch.randint(0, hi - lo - T, (k,), generator=gen)
                                        for (lo, hi), k in zip(slices, per)])
                else:
                    starts = torch.randint(0, len(train) - T, (B,), generator=gen)
                w = train[starts[:, None] + offsets]
                lr = lr_at(args.lr, step, per_epoch, args.warmup, args.epochs)
                shares = [s for s in torch.tensor_split(w, W) if len(s)]
                if system in ("alone", "ddp"):
                    for g in opt.param_groups:
                        g["lr"] = lr
                    logits = glob(w[:, :-1])
                    if system == "alone":
                        loss = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1))
                    else:  # the mean over workers of each one's mean loss: DDP's averaged gradient, exactly
                        per = F.cross_entropy(logits.reshape(-1, 256), w[:, 1:].reshape(-1), reduction="none")
                        weight = torch.cat([torch.full((len(s) * T,), 1.0 / (len(s) * T * len(shares)))
                                            for s in shares])
                        loss = (per * weight).sum()
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    if system == "ddp":
                        sent += per_sync
                        syncs += 1
                else:
                    for m, o, s in zip(workers, opts, shares):
                        for g in o.param_groups:
                            g["lr"] = lr
                        loss = F.cross_entropy(m(s[:, :-1]).reshape(-1, 256), s[:, 1:].reshape(-1))
                        o.zero_grad(set_to_none=True)
                        loss.backward()
                        o.step()
                step += 1
                tokens += B * T
                if system in ("diloco", "sparseloco") and (step % H == 0 or step == steps):
                    with torch.no_grad():
                        if system == "diloco":
                            for i, p in enumerate(gparams):
                                p.grad = p - torch.stack([ps[i] for ps in wparams]).mean(0)
                            outer.step()
                        else:
                            msgs = [[] for _ in chunkers]
                            for wi in range(W):
                                delta = [p - q for p, q in zip(gparams, wparams[wi])]
                                if flat:
                                    delta = [F.pad(torch.cat([d.flatten() for d in delta]), (0, padded - P))]
                                for u, d in enumerate(delta):
                                    ef[wi][u].mul_(args.sparse_decay).add_(d)  # outer lr 1 as templar's alpha
                                    msgs[u].append(sparseloco_encode(ef[wi][u], chunkers[u], row["k"],
                                                                     args.sparse_quant))
                            scales = None
                            if args.sparse_clip == "message":
                                norms = torch.stack([torch.stack([v.norm() for _, v in m]) for m in msgs])
                                scales = median_clip(norms.square().sum(0).sqrt())
                            update = [sparseloco_aggregate(m, ch, ch.shape, args.sparse_mean, scales)
                                      for m, ch in zip(msgs, chunkers)]
                            if flat:
                                update = list(update[0][:P].split([p.numel() for p in gparams]))
                            for p, u in zip(gparams, update):
                                p.sub_(u.reshape(p.shape))
                        for ps in wparams:
                            for q, p in zip(ps, gparams):
                                q.copy_(p)
                    sent += per_sync
                    syncs += 1
                if step in curve_at:
                    vloss, _ = evaluate(glob, val, T, 256)
                    curve.append([step, tokens, round(sent), vloss])
                    log("[%s] step %d/%d  tokens %d  val loss %.4f  sent %.1f MB a worker  %.0f s" % (
                        spec, step, steps, tokens, vloss, sent / 1e6, time.time() - t0))
        vloss = curve[-1][3] if curve and curve[-1][0] == steps else evaluate(glob, val, T, 256)[0]
        curve = [c[:3] + [round(c[3], 6)] for c in curve]
        r = {"row": spec, **row, "workers": 1 if system == "alone" else W, "shard": args.shard, "val_loss": round(vloss, 6),
             "bits_per_byte": round(vloss / math.log(2), 6),
             "bytes_per_worker": round(sent), "syncs": syncs, "bytes_per_sync": round(per_sync),
             "tokens": tokens, "steps": steps, "parameters": P, "lr": args.lr, "batch": args.batch,
             "context": T, "model": args.model, "seconds": round(time.time() - t0, 1), "curve": curve}
        if system == "sparseloco":
            r.update({"message_bytes": message, "values_sent": sent_values, "sparse_mean": args.sparse_mean,
                      "sparse_chunks": args.sparse_chunks, "sparse_clip": args.sparse_clip,
                      "sparse_quant": args.sparse_quant, "sparse_decay": args.sparse_decay})
        print(json.dumps(r), flush=True)
        results.append(r)
    alone = next((r for r in results if r["system"] == "alone"), None)
    ddp_bytes = steps * 2 * (W - 1) / W * 4 * results[0]["parameters"]
    print("%s, context %d, total batch %d, %d tokens, AdamW lr %g, %d workers; bytes: sent per worker" % (
        args.model, T, args.batch, results[0]["tokens"], args.lr, W))
    print("%-24s %9s %9s %12s %9s" % ("row", "val loss", "vs alone", "MB a worker", "fewer"))
    for r in results:
        vs = "%+.2f%%" % (100 * (r["val_loss"] / alone["val_loss"] - 1)) if alone else "-"
        fewer = "%.0fx" % (ddp_bytes / r["bytes_per_worker"]) if r["bytes_per_worker"] else "-"
        print("%-24s %9.4f %9s %12.2f %9s" % (r["row"], r["val_loss"], vs, r["bytes_per_worker"] / 1e6, fewer))


if __name__ == "__main__":
    main()
