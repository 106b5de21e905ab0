#!/usr/bin/env python3
"""The next-byte probabilities of a byte-level language model sgp saved, in
NumPy alone: no sgp code, no safetensors package, no PyTorch.

    python3 sample_numpy.py MODEL.safetensors "PROMPT"

Prints "BYTE PROBABILITY" for each of the 256 bytes that may follow PROMPT's
bytes (UTF-8), as `sgp sample --model-file MODEL --prompt PROMPT --probs`
does. Runs the forward pass of what the gpt:L:C:H preset expands to (embed,
pos, res(...), ln, fc, attn, gelu) and of other sequence specs made of those
and relu, tanh and dropout. The model sees the prompt's last `context` bytes
(input_shape's W) as positions 0, 1, ...; the attention is causal, so the
positions after them do not matter and are left out.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_numpy import gelu, load_safetensors  # noqa: E402  (the same reader and exact GELU)

LN_EPS = 1e-5  # nn/nn_norm.c, PyTorch's default


def expand(spec):
    """The gpt:L:C:H preset as nn/nn_spec.c expand_gpt spells it out; other specs as they are."""
    if not spec.startswith("gpt:"):
        return spec
    L, C, H = (int(v) for v in spec[4:].split(":"))
    block = "res(ln,fc:%d,attn:%d,fc:%d),res(ln,fc:%d,gelu,fc:%d)" % (3 * C, H, C, 4 * C, C)
    return ",".join(["embed:%d,pos" % C] + [block] * L + ["ln,fc"])


def parse(spec):
    """A spec as a list of layers, each a string or ("res", [layers])."""
    ops, depth, start = [], 0, 0
    for i, ch in enumerate(spec + ","):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            op = spec[start:i]
            if op.startswith("res(") and op.endswith(")"):
                ops.append(("res", parse(op[4:-1])))
            else:
                ops.append(op)
            start = i + 1
    return ops


class Model:
    def __init__(self, path):
        meta, self.tensors = load_safetensors(path)
        self.layers = parse(expand(meta["spec"]))
        self.context = int(meta["input_shape"].split(",")[2])
        self.count = {}

    def param(self, kind, bias=True):
        """The next layer of a kind's tensors: numbered in spec order, as sgp names them."""
        self.count[kind] = self.count.get(kind, 0) + 1
        name = "%s%d" % (kind, self.count[kind])
        w = self.tensors[name + ".weight"].astype(np.float64)
        return (w, self.tensors[name + ".bias"].astype(np.float64)) if bias else w

    def run(self, layers, x):
        for op in layers:
            if isinstance(op, tuple):  # res(...): the block's input plus its output
                x = x + self.run(op[1], x)
                continue
            kind, _, arg = op.partition(":")
            if kind == "embed":
                x = self.param("embed", bias=False)[x]
            elif kind == "pos":
                x = x + self.param("pos", bias=False)[: x.shape[0]]
            elif kind == "ln":
                w, b = self.param("ln")
                mean = x.mean(axis=-1, keepdims=True)
                var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
                x = (x - mean) / np.sqrt(var + LN_EPS) * w + b
            elif kind == "fc":
                w, b = self.param("fc")
                x = x @ w.T + b  # PyTorch's layout: weight [out, in]
            elif kind == "attn":
                x = attention(x, int(arg))
            elif kind == "gelu":
                x = gelu(x)
            elif kind == "relu":
                x = np.maximum(x, 0)
            elif kind == "tanh":
                x = np.tanh(x)
            elif kind != "dropout":  # the identity at inference
                raise ValueError("layer %r: this script runs sequence models (gpt:L:C:H) only" % op)
        return x

    def logits(self, tokens):
        """[T][classes] for T <= context token ids."""
        self.count = {}
        return self.run(self.layers, np.asarray(tokens, dtype=np.int64))


def attention(qkv, heads):
    """Causal multi-head self-attention of [T][3C] queries, keys and values, as nn/nn_seq.h."""
    T, C = qkv.shape[0], qkv.shape[1] // 3
    D = C // heads
    q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
    out = np.empty((T, C))
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    for h in range(heads):
        cols = slice(h * D, (h + 1) * D)
        s = q[:, cols] @ k[:, cols].T / math.sqrt(D)
        s[future] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, cols] = (p / p.sum(axis=1, keepdims=True)) @ v[:, cols]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("prompt")
    args = ap.parse_args()
    prompt = os.fsencode(args.prompt)  # the bytes as given on the command line
    if not prompt:
        sys.exit("sample_numpy.py: the prompt is empty")
    m = Model(args.model)
    z = m.logits(list(prompt[-m.context:]))[-1]
    p = np.exp(z - z.max())
    p /= p.sum()
    for byte, prob in enumerate(p):
        print("%d %.9g" % (byte, prob))


if __name__ == "__main__":
    main()
