"""Runs a module `fednode export` wrote, in PyTorch, on the images or features `fednode predict`
classified, and compares its logits with predict's (--logits CSV). Written from docs/cli.md's
description of the module, not from the C++ code: IDX files read with NumPy, images with PIL,
the module with torch.jit.load.

  check_export.py MODEL.pt PREDICTIONS.csv (--fashion-mnist DIR --split S --limit N | --images DIR | --features X.npy)

prints "rows N max_abs_diff D max_abs_logit L argmax_equal 0|1 sidecar_classes C".
Run with Debian's /usr/bin/python3 (python3-torch, python3-numpy, python3-pil).
"""
import argparse
import csv
import gzip
import json
import os

import numpy as np
import torch


def idx_images(folder, split, limit):
    stem = "train" if split == "train" else "t10k"
    name = [f for f in os.listdir(folder) if f.startswith(stem + "-images-idx3-ubyte")][0]
    data = open(os.path.join(folder, name), "rb").read()
    if name.endswith(".gz"):
        data = gzip.decompress(data)
    count, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    count = min(count, limit)
    return np.frombuffer(data, dtype=np.uint8, offset=16)[: count * rows * cols].reshape(count, 1, rows, cols)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("predictions")
    ap.add_argument("--fashion-mnist")
    ap.add_argument("--split", default="test")
    ap.add_argument("--limit", type=int, default=1 << 40)
    ap.add_argument("--images")
    ap.add_argument("--features")
    a = ap.parse_args()
    torch.set_num_threads(1)
    module = torch.jit.load(a.model)
    rows = list(csv.DictReader(open(a.predictions, newline="")))
    classes = len([k for k in rows[0] if k.startswith("logit_")])
    expected = np.array([[float(r["logit_%d" % k]) for k in range(classes)] for r in rows], dtype=np.float64)
    with torch.no_grad():
        if a.fashion_mnist:
            got = module(torch.from_numpy(idx_images(a.fashion_mnist, a.split, a.limit).copy())).numpy()
        elif a.images:
            from PIL import Image
            out = []
            for r in rows:  # images of any size, one at a time, as read_image would give them: [C, H, W] uint8
                pixels = np.array(Image.open(os.path.join(a.images, r["item"])))
                pixels = pixels[:, :, None] if pixels.ndim == 2 else pixels[:, :, :3]
                out.append(module(torch.from_numpy(pixels.transpose(2, 0, 1).copy())).numpy()[0])
            got = np.array(out)
        else:
            got = module(torch.from_numpy(np.load(a.features))).numpy()
    sidecar = json.load(open(a.model + ".json"))
    print("rows %d max_abs_diff %.9g max_abs_logit %.9g argmax_equal %d sidecar_classes %d" % (
        len(rows), np.abs(got - expected).max(), np.abs(expected).max(),
        int((got.argmax(1) == expected.argmax(1)).all()), len(sidecar["class_names"])))


if __name__ == "__main__":
    main()
