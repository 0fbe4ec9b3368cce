"""Reference for bench_correlation: scikit-learn's ledoit_wolf on the standardised within-class
residuals bench_correlation wrote, timed here, and compared with fednode's shrunk correlation.

Reads raw little-endian float64 files from --dir:
  Z.f64   n x d   residuals (rows minus their class mean), each column scaled to unit variance
  R.f64   d x d   fednode's within_class_correlation (the factor's L L^T)
Prints one JSON object: median wall seconds of ledoit_wolf(Z, assume_centered=True) (Z is
already centred and scaled, so this is the estimator alone, in scikit-learn's favour), its
shrinkage, and the largest |difference| between its shrunk covariance and fednode's R.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
from sklearn.covariance import ledoit_wolf

from ref_raw import load


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    Z = load(os.path.join(a.dir, "Z.f64"), (a.n, a.d))
    R = load(os.path.join(a.dir, "R.f64"), (a.d, a.d))
    times = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        shrunk, shrinkage = ledoit_wolf(Z, assume_centered=True)
        times.append(time.perf_counter() - t0)
    print(json.dumps({
        "seconds": statistics.median(times),
        "shrinkage": float(shrinkage),
        "max_abs_diff": float(np.max(np.abs(shrunk - R))),
    }))


if __name__ == "__main__":
    main()
