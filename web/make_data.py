#!/usr/bin/env python3
"""Writes the page's MNIST slice into web/data/: the first TRAIN training and TEST test images
and labels of the real MNIST files, as gzipped IDX files the page fetches (and dygraph's
`Mnist::from_idx_bytes` reads).

Usage: python3 web/make_data.py [--source DIR] [--train N] [--test N]
The source defaults to $DYGRAPH_DATA, else ../shared/data/mnist beside the repository.
"""
import argparse
import gzip
import os
import struct
import sys
from pathlib import Path

WEB = Path(__file__).resolve().parent


def default_source():
    env = os.environ.get("DYGRAPH_DATA")
    candidates = ([Path(env) / "mnist", Path(env)] if env else []) + [WEB.parent.parent / "shared" / "data" / "mnist"]
    for c in candidates:
        if (c / "train-images-idx3-ubyte.gz").is_file() or (c / "train-images-idx3-ubyte").is_file():
            return c
    sys.exit("MNIST not found in " + ", ".join(map(str, candidates)) + "; pass --source DIR")


def read_idx(directory, name):
    for path, opener in ((directory / (name + ".gz"), gzip.open), (directory / name, open)):
        if path.is_file():
            with opener(path, "rb") as f:
                return f.read()
    sys.exit(f"{directory}: neither {name}.gz nor {name} exists")


def slice_idx(raw, count, name):
    dims = raw[3]
    sizes = list(struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims]))
    if count > sizes[0]:
        sys.exit(f"{name} holds {sizes[0]} items, fewer than the {count} asked for")
    item = 1
    for s in sizes[1:]:
        item *= s
    header = raw[:4] + struct.pack(">" + "I" * dims, count, *sizes[1:])
    start = 4 + 4 * dims
    return header + raw[start:start + count * item]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=None)
    p.add_argument("--train", type=int, default=10000)
    p.add_argument("--test", type=int, default=1000)
    args = p.parse_args()
    source = args.source or default_source()
    out = WEB / "data"
    out.mkdir(exist_ok=True)
    for split, count in (("train", args.train), ("t10k", args.test)):
        for kind in ("images-idx3-ubyte", "labels-idx1-ubyte"):
            name = f"{split}-{kind}"
            data = slice_idx(read_idx(source, name), count, name)
            # mtime=0: the same slice gives the same bytes.
            with open(out / (name + ".gz"), "wb") as f:
                f.write(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {args.train} training and {args.test} test images from {source} to {out}")


if __name__ == "__main__":
    main()
