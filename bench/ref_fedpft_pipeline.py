#!/usr/bin/env python3
"""The FedPFT pipeline a user would write without fednode (issue 51, goal 1): the reference that
bench/fedpft_pipeline.sh times `fednode simulate --method fedpft` against, on the same files.

Every client fits scikit-learn's GaussianMixture to each class it holds (K components, diagonal
covariances, k-means initialisation, tol 1e-3, reg_covar 1e-6, max_iter 100: fednode's defaults),
the server draws as many samples from each mixture as the class had, and trains a PyTorch linear
head on them with fednode's fixed recipe (nn.Linear on standardised inputs, Adam lr 1e-4, batch
64, 30 epochs or 5 000 steps, whichever is more), then scores it on the test set. The clients'
data come from a Dirichlet(alpha) label split over N clients, every client holding at least
--min-samples rows, drawn with NumPy from --seed (fednode draws its own split from the same
parameters: the same kind of split, not the same rows).

    /usr/bin/python3 bench/ref_fedpft_pipeline.py --train-X X.npy --train-y y.npy --test-X Xt.npy
        --test-y yt.npy [--nodes 50] [--alpha 0.1] [--components 10] [--threads 2] [--seed 1]

Prints one line: "seconds S fit F sample G head H accuracy A" (wall seconds of the whole pipeline,
data loading excluded, and of its three stages).
"""
import argparse
import os
import time


def dirichlet_split(y, classes, nodes, alpha, min_samples, rng):
    """Per class, shares of its rows drawn from Dirichlet(alpha); redrawn until every client holds
    at least min_samples rows (as fednode's --partition dirichlet is specified)."""
    import numpy as np

    by_class = [np.flatnonzero(y == c) for c in range(classes)]
    for _ in range(1000):
        parts = [[] for _ in range(nodes)]
        for rows in by_class:
            rows = rng.permutation(rows)
            shares = rng.dirichlet([alpha] * nodes)
            cuts = (np.cumsum(shares) * len(rows)).astype(int)[:-1]
            for i, piece in enumerate(np.split(rows, cuts)):
                parts[i].extend(piece.tolist())
        if min(len(p) for p in parts) >= min_samples:
            return [np.array(sorted(p), dtype=np.int64) for p in parts]
    raise SystemExit(f"no Dirichlet({alpha}) split gives every one of {nodes} clients {min_samples} rows")


def main():
    ap = argparse.ArgumentParser()
    for name in ("train-X", "train-y", "test-X", "test-y"):
        ap.add_argument("--" + name, required=True)
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--min-samples", type=int, default=10)
    ap.add_argument("--components", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(a.threads)
    import numpy as np
    import torch
    from sklearn.mixture import GaussianMixture

    torch.set_num_threads(a.threads)
    X, y = np.load(a.train_X), np.load(a.train_y).astype(np.int64)
    Xt, yt = np.load(a.test_X), np.load(a.test_y).astype(np.int64)
    classes = int(max(y.max(), yt.max())) + 1
    rng = np.random.default_rng(a.seed)
    parts = dirichlet_split(y, classes, a.nodes, a.alpha, a.min_samples, rng)

    start = time.perf_counter()
    mixtures = []  # (class, rows it stands for, weights, means, diagonal variances)
    for part in parts:
        for c in np.unique(y[part]):
            Xc = X[part[y[part] == c]].astype(np.float64)
            if len(Xc) < 2:  # scikit-learn fits nothing to one row: the row itself, reg_covar around it
                mixtures.append((int(c), 1, np.ones(1), Xc, np.full_like(Xc, 1e-6)))
                continue
            g = GaussianMixture(min(a.components, len(Xc)), covariance_type="diag", tol=1e-3, reg_covar=1e-6,
                                max_iter=100, init_params="kmeans", random_state=int(rng.integers(2**31)))
            g.fit(Xc)
            mixtures.append((int(c), len(Xc), g.weights_, g.means_, g.covariances_))
    fitted = time.perf_counter()
    synthetic, labels = [], []
    for c, count, weights, means, variances in mixtures:  # what GaussianMixture.sample does
        per_component = rng.multinomial(count, weights / weights.sum())
        for k, m in enumerate(per_component):
            if m:
                synthetic.append((means[k] + np.sqrt(variances[k]) * rng.standard_normal((m, means.shape[1])))
                                 .astype(np.float32))
        labels.append(np.full(count, c))
    S = torch.from_numpy(np.concatenate(synthetic))
    L = torch.from_numpy(np.concatenate(labels))
    sampled = time.perf_counter()

    torch.manual_seed(a.seed)
    mean, std = S.mean(0), S.std(0, unbiased=False).clamp_min(1e-12)
    head = torch.nn.Linear(S.shape[1], classes)
    opt = torch.optim.Adam(head.parameters(), lr=1e-4)
    steps_per_epoch = (len(S) + 63) // 64
    epochs = max(30, -(-5000 // steps_per_epoch))
    Z = (S - mean) / std
    for _ in range(epochs):
        order = torch.randperm(len(Z))
        for b in range(0, len(Z), 64):
            idx = order[b:b + 64]
            loss = torch.nn.functional.cross_entropy(head(Z[idx]), L[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        predicted = head((torch.from_numpy(Xt) - mean) / std).argmax(1).numpy()
    end = time.perf_counter()
    accuracy = float((predicted == yt).mean())
    print(f"seconds {end - start:.3f} fit {fitted - start:.3f} sample {sampled - fitted:.3f} "
          f"head {end - sampled:.3f} accuracy {accuracy:.4f}")


if __name__ == "__main__":
    main()
