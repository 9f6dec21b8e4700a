#!/usr/bin/env python3
"""Splits an IDX image set (MNIST's and Fashion-MNIST's layout) into a training and a dev part.

  split_idx.py --images TRAIN-images-idx3-ubyte.gz --dev 5000 --output DIR [--overwrite]

Reads the images and the labels file beside them (NAME-images-idx3-ubyte[.gz] ->
NAME-labels-idx1-ubyte[.gz], as lmkit finds it) and writes DIR/train-images-idx3-ubyte.gz,
DIR/train-labels-idx1-ubyte.gz (the first N - dev images) and DIR/dev-images-idx3-ubyte.gz,
DIR/dev-labels-idx1-ubyte.gz (the last dev images), gzipped IDX files lmkit-finetune --task
image-classification reads. The order is the file's: Fashion-MNIST's training file is shuffled
already, and a held-out dev part keeps the test set out of picking the best epoch.

Exits 2 with one `error:` line for bad arguments, a file that is not IDX, counts that differ,
or an output folder holding a split already (without --overwrite).
"""
import argparse
import gzip
import os
import struct
import sys


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def read(path):
    if not os.path.isfile(path):
        fail(f"{path}: no such file")
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            fail(f"{path}: not a readable gzip file ({e})")
    return raw


def idx(path, dims):
    """(header dimensions, data bytes) of an unsigned-byte IDX file of `dims` dimensions."""
    raw = read(path)
    magic = 0x800 + dims
    if len(raw) < 4 + 4 * dims or struct.unpack(">I", raw[:4])[0] != magic:
        fail(f"{path}: not an IDX file of {dims} dimension(s) (magic 0x{magic:08x})")
    shape = struct.unpack(">" + "I" * dims, raw[4:4 + 4 * dims])
    size = 1
    for d in shape:
        size *= d
    data = raw[4 + 4 * dims:]
    if len(data) != size:
        fail(f"{path}: its header describes {size} bytes of data, it holds {len(data)}")
    return shape, data


def write(path, dims, shape, data):
    with gzip.open(path, "wb", compresslevel=6) as f:
        f.write(struct.pack(">I", 0x800 + dims) + struct.pack(">" + "I" * dims, *shape) + data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", required=True)
    ap.add_argument("--dev", type=int, required=True, help="images held out at the end")
    ap.add_argument("--output", required=True)
    ap.add_argument("--overwrite", action="store_true")
    a = ap.parse_args()
    name = os.path.basename(a.images)
    if "images-idx3-ubyte" not in name:
        fail(f"--images {a.images}: not named as MNIST's images (NAME-images-idx3-ubyte[.gz]); its labels are found by that name")
    labels = os.path.join(os.path.dirname(a.images), name.replace("images-idx3-ubyte", "labels-idx1-ubyte"))
    if os.path.exists(a.output) and not os.path.isdir(a.output):
        fail(f"--output {a.output} is a file, not a folder")
    outputs = [os.path.join(a.output, f"{part}-{kind}.gz") for part in ("train", "dev")
               for kind in ("images-idx3-ubyte", "labels-idx1-ubyte")]
    for path in outputs:
        if os.path.exists(path) and not a.overwrite:
            fail(f"{path} exists (give --overwrite to replace it)")
    (n, h, w), pixels = idx(a.images, 3)
    (m,), classes = idx(labels, 1)
    if m != n:
        fail(f"{labels}: {m} labels for the {n} images of {a.images}")
    if not 0 < a.dev < n:
        fail(f"--dev {a.dev}: must leave images on both sides of the split (1 .. {n - 1})")
    os.makedirs(a.output, exist_ok=True)
    keep = n - a.dev
    write(outputs[0], 3, (keep, h, w), pixels[:keep * h * w])
    write(outputs[1], 1, (keep,), classes[:keep])
    write(outputs[2], 3, (a.dev, h, w), pixels[keep * h * w:])
    write(outputs[3], 1, (a.dev,), classes[keep:])
    print(f"{a.output}: train {keep} and dev {a.dev} images of {h}x{w} from {a.images}")


if __name__ == "__main__":
    main()
