#!/usr/bin/env python3
"""A many-class, few-sample benchmark made from what these machines have (issue 26, section 1).

    /usr/bin/python3 scripts/make_manyclass.py TRAIN_PREFIX TEST_PREFIX OUT_PREFIX
        [--sub 10] [--train-per-class 57] [--test-per-class 20] [--seed 0]

TRAIN_PREFIX and TEST_PREFIX are `fednode extract` outputs (PREFIX_X.npy float32 [n, d],
PREFIX_y.npy int32 [n]), e.g. MobileNetV2 features of Fashion-MNIST's two splits. Every class is
split into SUB sub-classes by k-means on that class's training features (scikit-learn KMeans,
n_init 4, seeded); every training and test feature gets the label class * SUB + its nearest
centre among its own class's centres. Then TRAIN_PER_CLASS training and TEST_PER_CLASS test rows
are drawn from each new class (seeded; a smaller class keeps all it has). Writes
OUT_train_X.npy, OUT_train_y.npy, OUT_test_X.npy, OUT_test_y.npy and prints the class sizes.

Why this construction: no many-class image set is on these machines, and relabelling the whole
feature space by k-means would make the classes Voronoi cells, which a linear head separates
exactly; splitting each real class keeps the real task (which garment) and adds many small,
adjacent classes inside each, so that a federation sees about 100 classes with tens of samples
each, on real backbone features. The sub-classes inside a class are themselves Voronoi cells of
that class's centres, so they are easier than real fine-grained classes would be: the numbers on
this set speak to many classes and few samples, not to fine-grained recognition.
"""
import argparse
import sys

import numpy as np
from sklearn.cluster import KMeans


def load(prefix):
    X = np.load(prefix + "_X.npy")
    y = np.load(prefix + "_y.npy")
    if X.ndim != 2 or y.ndim != 1 or len(X) != len(y):
        sys.exit(f"make_manyclass: {prefix}_X.npy / _y.npy are not a feature matrix and its labels")
    return X.astype(np.float32), y.astype(np.int64)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("train_prefix")
    ap.add_argument("test_prefix")
    ap.add_argument("out_prefix")
    ap.add_argument("--sub", type=int, default=10)
    ap.add_argument("--train-per-class", type=int, default=57)
    ap.add_argument("--test-per-class", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    Xtr, ytr = load(a.train_prefix)
    Xte, yte = load(a.test_prefix)
    if Xtr.shape[1] != Xte.shape[1]:
        sys.exit("make_manyclass: the two splits have different feature dimensions")
    classes = int(max(ytr.max(), yte.max())) + 1
    new_tr = np.empty_like(ytr)
    new_te = np.empty_like(yte)
    for c in range(classes):
        tr, te = ytr == c, yte == c
        if tr.sum() < a.sub:
            sys.exit(f"make_manyclass: class {c} has {tr.sum()} training rows, fewer than --sub {a.sub}")
        km = KMeans(n_clusters=a.sub, n_init=4, random_state=a.seed + c).fit(Xtr[tr])
        new_tr[tr] = c * a.sub + km.labels_
        if te.any():
            new_te[te] = c * a.sub + km.predict(Xte[te])
    rng = np.random.default_rng(a.seed)

    def draw(y, per_class):
        keep = []
        for k in range(classes * a.sub):
            rows = np.flatnonzero(y == k)
            keep.extend(rng.permutation(rows)[:per_class].tolist())
        return np.sort(np.array(keep, dtype=np.int64))

    ktr, kte = draw(new_tr, a.train_per_class), draw(new_te, a.test_per_class)
    out = {"train": (Xtr[ktr], new_tr[ktr]), "test": (Xte[kte], new_te[kte])}
    for split, (X, y) in out.items():
        np.save(f"{a.out_prefix}_{split}_X.npy", np.ascontiguousarray(X, dtype=np.float32))
        np.save(f"{a.out_prefix}_{split}_y.npy", y.astype(np.int32))
        sizes = np.bincount(y, minlength=classes * a.sub)
        print(f"{split}: {len(y)} rows, {classes * a.sub} classes, per class min {sizes.min()} "
              f"median {int(np.median(sizes))} max {sizes.max()}, d = {X.shape[1]}")


if __name__ == "__main__":
    main()
