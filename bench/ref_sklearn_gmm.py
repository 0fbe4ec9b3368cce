"""Reference timing for bench_em: scikit-learn's GaussianMixture.fit on the data and initial
parameters bench_em wrote, with the same tol, max_iter and reg_covar.

Reads raw little-endian float64 files from --dir:
  X.f64            n x d
  weights.f64      K
  means.f64        K x d
  precisions.f64   diag: K x d, spherical: K, full: K x d x d (inverse covariances)
Prints one JSON object: median wall and CPU (all threads) seconds of fit(), iterations, converged, the final lower bound
and the mean log-likelihood of X under the fitted mixture (score(X)).

scikit-learn's fit() estimates a throw-away mixture from its own init_params before it applies
weights_init/means_init/precisions_init. The subclass below skips that estimation and starts
directly from the given parameters, so that the time measured is EM alone (in scikit-learn's
favour). fit() still ends with the extra E-step scikit-learn always does.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
from sklearn.mixture import GaussianMixture
from sklearn.mixture._gaussian_mixture import _compute_precision_cholesky

from ref_raw import load


class PresetGaussianMixture(GaussianMixture):
    def _initialize_parameters(self, X, random_state):
        self.weights_ = np.asarray(self.weights_init, dtype=np.float64)
        self.means_ = np.asarray(self.means_init, dtype=np.float64)
        if self.covariance_type == "full":
            self.precisions_cholesky_ = np.array(
                [np.linalg.cholesky(p) for p in self.precisions_init])
        else:
            self.precisions_cholesky_ = np.sqrt(self.precisions_init)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--d", type=int, required=True)
    ap.add_argument("--k", type=int, required=True)
    ap.add_argument("--type", choices=["full", "diag", "spherical"], required=True)
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--max-iter", type=int, required=True)
    ap.add_argument("--reg-covar", type=float, required=True)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    X = load(os.path.join(a.dir, "X.f64"), (a.n, a.d))
    w = load(os.path.join(a.dir, "weights.f64"), (a.k,))
    m = load(os.path.join(a.dir, "means.f64"), (a.k, a.d))
    pshape = {"full": (a.k, a.d, a.d), "diag": (a.k, a.d), "spherical": (a.k,)}[a.type]
    p = load(os.path.join(a.dir, "precisions.f64"), pshape)

    times, cpu = [], []
    g = None
    for _ in range(a.repeats):
        g = PresetGaussianMixture(
            n_components=a.k, covariance_type=a.type, tol=a.tol, reg_covar=a.reg_covar,
            max_iter=a.max_iter, n_init=1, weights_init=w, means_init=m, precisions_init=p,
            random_state=0)
        c0, t0 = time.process_time(), time.perf_counter()
        g.fit(X)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(json.dumps({
        "seconds": statistics.median(times),
        "all_seconds": times,
        "cpu_seconds": statistics.median(cpu),
        "iterations": int(g.n_iter_),
        "converged": bool(g.converged_),
        "lower_bound": float(g.lower_bound_),
        "mean_loglik": float(g.score(X)),
        "sklearn": __import__("sklearn").__version__,
    }))


if __name__ == "__main__":
    main()
