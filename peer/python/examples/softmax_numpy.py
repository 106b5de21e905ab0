#!/usr/bin/env python3
"""Softmax regression on MNIST in NumPy, gossiping through sgp.

Alone it trains on all the data; with --cluster it is one peer of an sgp run
and trains on its shard (every n-th example). The training loop is plain
NumPy; sgp only sees the flat parameter vector after each step.

    python3 peer/python/examples/softmax_numpy.py                 # alone
    build/sgp launch --peers 4 --prepare --run-dir run
    for i in 0 1 2 3; do
        python3 peer/python/examples/softmax_numpy.py --cluster run/cluster.conf --id $i --codec stc:0.1 &
    done

Ends with the line "test accuracy A%" of its own final model.
"""

import argparse
import gzip
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import sgp  # noqa: E402

PIXELS, CLASSES = 784, 10


def read_idx(path, dims):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    if raw[2] != 8 or raw[3] != dims:
        sys.exit("softmax_numpy: %s is not an IDX file of %d dimensions" % (path, dims))
    shape = [int.from_bytes(raw[4 + 4 * k:8 + 4 * k], "big") for k in range(dims)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir, images, labels):
    x = read_idx(os.path.join(data_dir, images), 3).reshape(-1, PIXELS).astype(np.float32) / 255.0
    y = read_idx(os.path.join(data_dir, labels), 1).astype(np.int64)
    return x, y


def probabilities(params, x):
    w = params[:CLASSES * PIXELS].reshape(CLASSES, PIXELS)
    b = params[CLASSES * PIXELS:]
    logits = x @ w.T + b
    logits -= logits.max(axis=1, keepdims=True)
    e = np.exp(logits)
    return e / e.sum(axis=1, keepdims=True)


def accuracy(params, x, y):
    return float((probabilities(params, x).argmax(axis=1) == y).mean())


def sgd_step(params, x, y, lr):
    """params -= lr * mean gradient of the cross-entropy, in place; returns the loss."""
    p = probabilities(params, x)
    loss = -np.log(np.maximum(p[np.arange(len(y)), y], 1e-30)).mean()
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    params[:CLASSES * PIXELS] -= lr * (p.T @ x).reshape(-1)
    params[CLASSES * PIXELS:] -= lr * p.sum(axis=0)
    return float(loss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cluster", help="cluster file: run as one peer of an sgp run")
    ap.add_argument("--id", type=int, default=-1, help="this peer's id [the MPI/Slurm rank]")
    ap.add_argument("--codec", help="message codec, e.g. stc:0.1 [none]")
    ap.add_argument("--data", default="nn/data", help="directory of the MNIST IDX files [nn/data]")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="total batch of all peers [64]")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--round-deadline", type=float, default=0.0,
                    help="seconds a round waits for a late neighbour [0: derived]")
    a = ap.parse_args()

    x, y = load(a.data, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz")
    tx, ty = load(a.data, "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    params = np.zeros(CLASSES * PIXELS + CLASSES, dtype=np.float32)
    rounds_per_epoch = (len(x) + a.batch - 1) // a.batch
    peer, me, peers = None, 0, 1
    if a.cluster:
        peer = sgp.Peer(params, cluster=a.cluster, id=a.id, codec=a.codec, round_deadline=a.round_deadline,
                        rounds=rounds_per_epoch * a.epochs, rounds_per_epoch=rounds_per_epoch)
        s = peer.status()
        me, peers = s["id"], s["peers"]
    shard = np.arange(me, len(x), peers)
    batch = max(1, a.batch // peers)
    rng = np.random.default_rng(1000 + me)
    order, pos, loss, rnd = shard, len(shard), 0.0, 0
    while True:
        if pos + batch > len(order):
            order, pos = rng.permutation(shard), 0
        idx = order[pos:pos + batch]
        pos += batch
        loss += sgd_step(params, x[idx], y[idx], a.lr)
        done = peer.step(params) if peer else rnd + 1 == rounds_per_epoch * a.epochs
        rnd += 1
        if rnd % rounds_per_epoch == 0:
            print("peer %d: epoch %d  loss %.4f  test %.2f%%" % (me, rnd // rounds_per_epoch,
                  loss / rounds_per_epoch, 100 * accuracy(params, tx, ty)), flush=True)
            loss = 0.0
        if done:
            break
    if peer:
        s = peer.status()
        print("peer %d: %d rounds, %d steps, weight %.4f, %.2f MB sent, %d late marks, %d neighbours lost"
              % (me, s["round"], s["local_steps"], s["weight"], s["bytes_sent"] / 1e6, s["late_marks"],
                 s["neighbours_lost"]))
        peer.close()
    print("peer %d: test accuracy %.2f%%" % (me, 100 * accuracy(params, tx, ty)), flush=True)


if __name__ == "__main__":
    main()
