#!/usr/bin/python3
"""PyTorch reference for tests/bench/train_step.c: the same model, batch and
training step (forward + cross-entropy + backward + SGD momentum 0.9, no weight
decay), timed the same way, printing the same one-line key=value result.

    /usr/bin/python3 tests/bench/train_step_torch.py --model mlp:256,256 --batch 64 --threads 1 --seconds 3
    samples_per_second=91234.5 steps=4277 seconds=3.000 model=mlp:256,256 batch=64 threads=1 ...

Data: the same MNIST subset sgp embeds, read from nn/data/*.gz next to this
repository (8 consecutive batches gathered before the clock starts and then
cycled, as train_step.c does). If those files cannot be read it falls back to
random tensors of the same shapes (data=random in the output); the speed of
these dense float32 kernels does not depend on the values.

Run it with Debian's /usr/bin/python3 (python3-torch); it is a benchmark
reference only, not a dependency of the project. Thread count: torch's
intra-op threads via torch.set_num_threads; the BLAS behind nn.Linear reads
OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, which run.sh sets to the same value.
"""

import argparse
import gzip
import os
import struct
import sys
import time

N_BATCHES = 8


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="mlp:256,256",
                   help="a spec in sgp's layer language (nn/MODELS.md) or a preset: mlp, mlp:W1,W2,..., lenet")
    p.add_argument("--batch", type=int, default=64, help="samples per step (default 64)")
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    p.add_argument("--seconds", type=float, default=3.0, help="time steps for about S seconds (default 3)")
    p.add_argument("--steps", type=int, default=0, help="time exactly N steps instead (overrides --seconds)")
    p.add_argument("--warmup-steps", type=int, default=20, help="untimed steps first (default 20)")
    p.add_argument("--lr", type=float, default=0.01, help="learning rate (default 0.01)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data", default=None, help="directory with the MNIST .gz files (default: nn/data of this repo)")
    p.add_argument("--describe", action="store_true", help="print torch's version and BLAS/backends and exit")
    a = p.parse_args()
    if a.batch < 1 or a.threads < 1 or a.seconds <= 0 or a.steps < 0 or a.warmup_steps < 0:
        p.error("batch and threads must be >= 1, seconds > 0, steps and warmup-steps >= 0")
    return a


def loaded_libs():
    """Shared objects mapped into this process, by real path."""
    libs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                if path.startswith("/") and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    return libs


def openblas_info():
    """(core, threads) of the OpenBLAS mapped into this process, or (None, None).
    Debian's libblas.so.3 (what torch's sgemm_ calls resolve to) is a thin
    wrapper over libopenblas.so.0, so this is the copy torch computes with."""
    import ctypes
    for path in loaded_libs():
        if "openblas" in os.path.basename(path):
            try:
                lib = ctypes.CDLL(path)
                lib.openblas_get_corename.restype = ctypes.c_char_p
                return lib.openblas_get_corename().decode(), lib.openblas_get_num_threads()
            except (OSError, AttributeError):
                continue
    return None, None


def describe(torch, nn):
    """What torch computes with, found by running it: the ops a Linear and a
    Conv2d dispatch to and the BLAS / oneDNN libraries mapped in."""
    import re
    cfg = torch.__config__.show()
    info = re.search(r"BLAS_INFO=([^,\s]*)", cfg)
    m = nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.Flatten(), nn.Linear(6 * 28 * 28, 10))
    with torch.autograd.profiler.profile() as prof:
        m(torch.rand(8, 1, 28, 28)).sum().backward()
    ops = sorted({e.name for e in prof.function_events
                  if e.name in ("aten::addmm", "aten::mm", "aten::mkldnn_convolution", "aten::thnn_conv2d",
                                "aten::_slow_conv2d_forward", "aten::mkldnn_linear")})
    libs = [p for p in loaded_libs() if re.search(r"blas|lapack|dnnl|mkl", os.path.basename(p))]
    core, threads = openblas_info()
    print("torch %s: BLAS_INFO=%s (sgemm_ through libblas.so.3); ops: %s; OpenBLAS core %s; libraries: %s" % (
        torch.__version__, info.group(1) if info else "?", ", ".join(ops), core or "not loaded",
        " ".join(libs) or "none found"))


PRESETS = {"lenet": "conv:6:5:pad=2,relu,maxpool:2,conv:16:5,relu,maxpool:2,flatten,fc:120,relu,fc:84,relu,fc"}


def expand(spec):
    """sgp's presets (nn/nn_spec.c) as layer specs."""
    if spec in PRESETS:
        return PRESETS[spec]
    if spec == "mlp" or spec.startswith("mlp:"):
        widths = spec[4:].split(",") if spec != "mlp" else []
        return ",".join(["flatten"] + ["fc:%s,relu" % w for w in widths] + ["fc"])
    return spec


def split_top(spec):
    """The comma-separated items of a spec, res(...) kept whole."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    items.append(spec[start:])
    return items


def build_layers(torch, nn, spec, shape, n_classes):
    """nn.Modules for a spec in sgp's layer language (nn/MODELS.md), tracking
    the shape (C, H, W) or (N,) once flat; returns (modules, shape)."""
    class Residual(nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, x):
            return x + self.body(x)

    mods = []
    for item in split_top(spec):
        if item.startswith("res(") and item.endswith(")"):
            inner, out_shape = build_layers(torch, nn, item[4:-1], shape, n_classes)
            if out_shape != shape:
                sys.exit("train_step_torch: res(...) changes the shape %s -> %s" % (shape, out_shape))
            mods.append(Residual(nn.Sequential(*inner)))
            continue
        name, *args = item.split(":")
        pos = [int(a) for a in args if "=" not in a] if name != "dropout" else []
        opt = dict(a.split("=") for a in args if "=" in a)
        if name == "fc":
            n = pos[0] if pos else n_classes
            if len(shape) == 3:
                mods.append(nn.Flatten())
            mods.append(nn.Linear(int(torch.tensor(shape).prod()), n))
            shape = (n,)
        elif name == "flatten":
            mods.append(nn.Flatten())
            shape = (int(torch.tensor(shape).prod()),)
        elif name == "conv":
            c, k, st, pad = pos[0], pos[1], int(opt.get("stride", 1)), int(opt.get("pad", 0))
            mods.append(nn.Conv2d(shape[0], c, k, stride=st, padding=pad))
            shape = (c, (shape[1] + 2 * pad - k) // st + 1, (shape[2] + 2 * pad - k) // st + 1)
        elif name in ("maxpool", "avgpool"):
            if not pos:
                mods.append(nn.AvgPool2d(shape[1]))
                shape = (shape[0], 1, 1)
            else:
                k, st = pos[0], int(opt.get("stride", pos[0]))
                mods.append((nn.MaxPool2d if name == "maxpool" else nn.AvgPool2d)(k, stride=st))
                shape = (shape[0], (shape[1] - k) // st + 1, (shape[2] - k) // st + 1)
        elif name in ("relu", "gelu", "tanh"):
            mods.append({"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}[name]())
        elif name == "dropout":
            mods.append(nn.Dropout(float(args[0])))
        elif name == "gn":
            mods.append(nn.GroupNorm(pos[0], shape[0]))
        elif name == "ln":
            mods.append(nn.LayerNorm(list(shape)))
        else:
            sys.exit("train_step_torch: unknown layer '%s' in '%s'" % (item, spec))
    return mods, shape


def build_model(nn, spec, n_classes):
    import torch
    mods, _ = build_layers(torch, nn, expand(spec), (1, 28, 28), n_classes)
    return nn.Sequential(*mods)


def read_idx_gz(path, magic):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    got, n = struct.unpack(">II", raw[:8])
    if got != magic:
        raise ValueError("%s: bad magic" % path)
    if magic == 0x803:
        rows, cols = struct.unpack(">II", raw[8:16])
        return raw[16:], n, rows, cols
    return raw[8:], n


def load_batches(torch, data_dir, B):
    """N_BATCHES consecutive windows of the training set (wrapping), as train_step.c gathers them."""
    img, n, rows, cols = read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 0x803)
    lbl, n_l = read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 0x801)
    if n_l != n or rows != 28 or cols != 28:
        raise ValueError("unexpected MNIST shapes")
    x = torch.frombuffer(bytearray(img), dtype=torch.uint8).reshape(n, 1, rows, cols).float() / 255.0
    y = torch.frombuffer(bytearray(lbl), dtype=torch.uint8).long()
    idx = torch.arange(N_BATCHES * B) % n
    xs, ys = x[idx].contiguous(), y[idx].contiguous()
    return [(xs[i * B:(i + 1) * B], ys[i * B:(i + 1) * B]) for i in range(N_BATCHES)]


def main():
    a = parse_args()
    try:
        import torch
        import torch.nn as nn
    except ImportError as e:
        sys.exit("train_step_torch: cannot import torch (%s); run with /usr/bin/python3 and python3-torch" % e)
    if a.describe:
        describe(torch, nn)
        return 0

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    data_dir = a.data or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "nn", "data")
    try:
        batches, data = load_batches(torch, data_dir, a.batch), "mnist"
    except (OSError, ValueError) as e:
        print("train_step_torch: %s; using random data" % e, file=sys.stderr)
        batches = [(torch.rand(a.batch, 1, 28, 28), torch.randint(0, 10, (a.batch,))) for _ in range(N_BATCHES)]
        data = "random"

    model = build_model(nn, a.model, 10)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9, weight_decay=0.0, nesterov=False)
    loss_fn = nn.CrossEntropyLoss()
    n_params = sum(p.numel() for p in model.parameters())

    step = 0
    loss = None

    def one_step():
        nonlocal step, loss
        x, y = batches[step % N_BATCHES]
        # set_to_none: the cheapest zeroing (sgp's backward overwrites instead of accumulating).
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        step += 1

    for _ in range(a.warmup_steps):
        one_step()
    loss_first = loss.item() if loss is not None else float("nan")

    timed = 0
    t0 = time.perf_counter()
    if a.steps > 0:
        for _ in range(a.steps):
            one_step()
        timed = a.steps
        t1 = time.perf_counter()
    else:
        while True:
            one_step()
            timed += 1
            t1 = time.perf_counter()
            if t1 - t0 >= a.seconds:
                break
    elapsed = t1 - t0
    loss_last = loss.item()
    core, blas_threads = openblas_info()
    print("samples_per_second=%.1f steps=%d seconds=%.3f model=%s batch=%d threads=%d core=%s blas_threads=%s "
          "torch=%s params=%d data=%s loss_after_warmup=%.4f loss_last=%.4f" % (
              timed * a.batch / elapsed, timed, elapsed, a.model, a.batch, torch.get_num_threads(),
              core or "none", blas_threads if blas_threads is not None else "none",
              torch.__version__, n_params, data, loss_first, loss_last))
    return 0


if __name__ == "__main__":
    sys.exit(main())
