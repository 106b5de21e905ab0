#!/usr/bin/env python3
"""Classify MNIST-format images with a model file sgp saved, in NumPy alone:
no sgp code, no safetensors package, no PyTorch.

    python3 safetensors_numpy.py MODEL.safetensors t10k-images-idx3-ubyte.gz [--limit 100]

Prints "index,class,probability" per image. Reads the file as the
safetensors format says (8-byte little-endian header length, JSON header,
raw tensors) and runs the forward pass of a model made of fully connected
layers and element-wise activations: the mlp presets (mlp, mlp:W1,W2,...) or
a spec of fc, relu, tanh, gelu, flatten and dropout layers.
"""
import argparse
import gzip
import json
import math

import numpy as np


def load_safetensors(path):
    """(metadata dict, {name: float32 array}) from a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = blob[8 + n:]
    tensors = {}
    for name, t in header.items():
        if t["dtype"] != "F32":
            raise ValueError("%s: %s is %s, this script reads F32" % (path, name, t["dtype"]))
        begin, end = t["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype="<f4").reshape(t["shape"])
    return meta, tensors


def layers_of(spec):
    """The spec as a list of layer names; the mlp presets expanded."""
    if spec == "mlp" or spec.startswith("mlp:"):
        widths = spec[4:].split(",") if spec.startswith("mlp:") else []
        out = []
        for w in widths:
            out += ["fc:" + w, "relu"]
        return out + ["fc"]
    return spec.split(",")


def gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def forward(spec, tensors, x):
    """Logits for x [n, features]: fc layers are named fc1, fc2, ... in order."""
    fc = 0
    for layer in layers_of(spec):
        kind = layer.split(":")[0]
        if kind == "fc":
            fc += 1
            w, b = tensors["fc%d.weight" % fc], tensors["fc%d.bias" % fc]
            x = x @ w.T + b  # PyTorch's layout: weight [out, in]
        elif kind == "relu":
            x = np.maximum(x, 0)
        elif kind == "tanh":
            x = np.tanh(x)
        elif kind == "gelu":
            x = gelu(x)
        elif kind in ("flatten", "dropout"):  # dropout is the identity at inference
            pass
        else:
            raise ValueError("layer %r: this script runs fc and activation layers only" % layer)
    return x


def read_idx_images(path, limit):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    n, rows, cols = (int.from_bytes(raw[4 * i:4 * i + 4], "big") for i in (1, 2, 3))
    if int.from_bytes(raw[:4], "big") != 0x803:
        raise ValueError("%s: not IDX images" % path)
    n = min(n, limit) if limit else n
    pixels = np.frombuffer(raw, dtype=np.uint8, count=n * rows * cols, offset=16)
    return pixels.reshape(n, rows * cols).astype(np.float32) / np.float32(255)  # as sgp: value / 255


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("images")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    meta, tensors = load_safetensors(args.model)
    x = read_idx_images(args.images, args.limit)
    logits = forward(meta["spec"], tensors, x).astype(np.float64)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    for i, row in enumerate(p):
        k = int(np.argmax(row))
        print("%d,%d,%.9g" % (i, k, row[k]))


if __name__ == "__main__":
    main()
