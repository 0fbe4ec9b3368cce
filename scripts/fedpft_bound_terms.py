#!/usr/bin/python3
"""How large is the EM term of FedPFT's server-side bound (Theorem 4.2) on real features?

The theorem bounds the head's 0-1 loss on real features by twice its loss on synthetic ones plus,
per client and class, L = sqrt(KL(F || G) / 2), F the class's feature distribution and G its
Gaussian mixture. KL cannot be computed (F is unknown), but it has a lower bound that can:
KL of a marginal never exceeds KL of the joint, and on the dimensions S that vary within the class
    KL_S(F || G) = CE_S(F, G) - H(F_S) >= CE_S(F, G) - H_gauss(Cov(F_S)),
because no distribution with a given covariance has more entropy than the Gaussian. CE is
measured on held-out features, and the log-determinant of the sample covariance is corrected
for its known bias. If L >= 1 for one client's class, the bound says nothing.

usage: fedpft_bound_terms.py TRAIN_X.npy TRAIN_y.npy TEST_X.npy TEST_y.npy [K] [covariance]
(fednode extract writes such files; needs python3-sklearn and python3-scipy)
"""
import sys

import numpy as np
from scipy.special import digamma
from sklearn.mixture import GaussianMixture


def main():
    if len(sys.argv) not in (5, 6, 7):
        sys.exit(__doc__)
    X = np.load(sys.argv[1]).astype(np.float64)
    y = np.load(sys.argv[2])
    Xt = np.load(sys.argv[3]).astype(np.float64)
    yt = np.load(sys.argv[4])
    K = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    cov = sys.argv[6] if len(sys.argv) > 6 else "diag"
    if cov != "diag":
        sys.exit("only diag: its marginals are read off the mixture directly")
    print("class  n     dims  CE_S     H_gauss  KL >=   L >=")
    for c in np.unique(y):
        Xc = X[y == c]
        n = len(Xc)
        g = GaussianMixture(K, covariance_type="diag", reg_covar=1e-6, random_state=0).fit(Xc)
        S = np.cov(Xc, rowvar=False)
        keep = np.where(np.diag(S) > 1e-3)[0]
        d = len(keep)
        if d >= n:
            print(f"{c:5d}  {n:5d}  too few samples for {d} varying dimensions")
            continue
        marginal = GaussianMixture(K, covariance_type="diag")
        marginal.weights_ = g.weights_
        marginal.means_ = g.means_[:, keep]
        marginal.covariances_ = g.covariances_[:, keep]
        marginal.precisions_cholesky_ = 1.0 / np.sqrt(marginal.covariances_)
        ce = -marginal.score(Xt[yt == c][:, keep])
        _, logdet = np.linalg.slogdet(S[np.ix_(keep, keep)])
        bias = np.sum(digamma((n - np.arange(1, d + 1)) / 2.0) - np.log((n - 1) / 2.0))
        h_gauss = 0.5 * (d * np.log(2 * np.pi * np.e) + logdet - bias)
        kl = ce - h_gauss
        print(f"{c:5d}  {n:5d}  {d:4d}  {ce:7.1f}  {h_gauss:7.1f}  {kl:6.1f}  {np.sqrt(max(kl, 0) / 2):5.2f}")


if __name__ == "__main__":
    main()
