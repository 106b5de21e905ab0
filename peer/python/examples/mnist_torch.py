#!/usr/bin/env python3
"""A PyTorch model and training loop on MNIST, gossiping through sgp.

The model, optimizer and data loop are plain PyTorch; sgp.TorchPeer mixes
the model's parameters with the neighbours' after every optimizer step.
Alone (no --cluster) it is the single-process reference with the same total
batch and epochs.

    python3 peer/python/examples/mnist_torch.py                       # alone
    build/sgp launch --peers 4 --prepare --run-dir run
    for i in 0 1 2 3; do
        python3 peer/python/examples/mnist_torch.py --cluster run/cluster.conf --id $i --codec stc:0.04 &
    done

tests/bench/torch_example.sh runs both and compares accuracy and bytes.
Ends with "test accuracy A%" of its own final model and, as one JSON line
after "summary ", its status (bytes sent, rounds, ...).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import sgp  # noqa: E402
from softmax_numpy import load  # noqa: E402  (the same IDX reader)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", help="cluster file: run as one peer of an sgp run")
    ap.add_argument("--id", type=int, default=-1, help="this peer's id [the MPI/Slurm rank]")
    ap.add_argument("--codec", help="message codec, e.g. stc:0.04 [none]")
    ap.add_argument("--data", default="nn/data", help="directory of the MNIST IDX files [nn/data]")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64, help="total batch of all peers [64]")
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)  # the same initial model on every peer

    x, y = load(a.data, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
    tx, ty = load(a.data, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    x, y, tx, ty = map(torch.from_numpy, (x, y, tx, ty))
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    rounds_per_epoch = (len(x) + a.batch - 1) // a.batch
    peer, me, peers = None, 0, 1
    if a.cluster:
        peer = sgp.TorchPeer(model, cluster=a.cluster, id=a.id, codec=a.codec,
                             rounds=rounds_per_epoch * a.epochs, rounds_per_epoch=rounds_per_epoch)
        s = peer.status()
        me, peers = s["id"], s["peers"]
    shard = torch.arange(me, len(x), peers)
    batch = max(1, a.batch // peers)
    gen = torch.Generator().manual_seed(1000 + me)

    def accuracy():
        with torch.no_grad():
            return float((model(tx).argmax(1) == ty).float().mean())

    order, pos, rnd = shard, len(shard), 0
    while True:
        if pos + batch > len(order):
            order, pos = shard[torch.randperm(len(shard), generator=gen)], 0
        idx = order[pos:pos + batch]
        pos += batch
        opt.zero_grad()
        loss = loss_fn(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        done = peer.step() if peer else rnd + 1 == rounds_per_epoch * a.epochs
        rnd += 1
        if rnd % rounds_per_epoch == 0:
            print("peer %d: epoch %d  loss %.4f  test %.2f%%" % (me, rnd // rounds_per_epoch, float(loss),
                  100 * accuracy()), flush=True)
        if done:
            break
    status = {"parameters": int(sum(p.numel() for p in model.parameters()))}
    if peer:
        status.update(peer.status())
        peer.close()
    print("peer %d: test accuracy %.2f%%" % (me, 100 * accuracy()))
    print("summary " + json.dumps(status), flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
