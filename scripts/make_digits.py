#!/usr/bin/env python3
"""scikit-learn's digits as a second small benchmark (issue 26, section 1).

    /usr/bin/python3 scripts/make_digits.py OUT_PREFIX [--test-fraction 0.3] [--seed 0]

The 1 797 8x8 handwritten digits that ship inside scikit-learn (no download), 10 classes of about
180 images, as 64 pixel features scaled to [0, 1]; a stratified, seeded train/test split. Writes
OUT_train_X.npy (float32), OUT_train_y.npy (int32), OUT_test_X.npy, OUT_test_y.npy, which
`fednode simulate --train-features ... --test-features ...` takes as they are.

Why: a real image set, of another domain than Fashion-MNIST and a tenth of its size per class, on
which the heads' defaults must hold as well (few samples per node at 50 nodes: about 25).
"""
import argparse

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_prefix")
    ap.add_argument("--test-fraction", type=float, default=0.3)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    digits = load_digits()
    X = (digits.data / 16.0).astype(np.float32)
    y = digits.target.astype(np.int32)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=a.test_fraction, stratify=y, random_state=a.seed)
    for part, (Xp, yp) in {"train": (Xtr, ytr), "test": (Xte, yte)}.items():
        np.save(f"{a.out_prefix}_{part}_X.npy", np.ascontiguousarray(Xp))
        np.save(f"{a.out_prefix}_{part}_y.npy", np.ascontiguousarray(yp))
    print(f"digits: {len(ytr)} training and {len(yte)} test images, {X.shape[1]} features, "
          f"{len(np.unique(y))} classes ({np.bincount(ytr).min()}-{np.bincount(ytr).max()} training images a class)")


if __name__ == "__main__":
    main()
