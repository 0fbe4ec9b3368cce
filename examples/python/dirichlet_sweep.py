#!/usr/bin/env python3
"""fednode.simulate over Dirichlet label skews, plotted (docs/python.md, "The simulator").

Features of Fashion-MNIST through the bundled MobileNetV2 (fednode.extract, cached in
~/.cache/fednode), then one simulated 10-node chain per alpha and method, and a plot of every
node's accuracy along the chain (node i's head has seen nodes 0..i) for each alpha, beside the
centralised linear head on the same features.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/dirichlet_sweep.py [--out sweep.png]
        [--train 10000] [--test 2000] [--alphas 0.05,0.1,0.5,1,10] [--methods fedcgs,fedpft]
"""
import argparse
import sys

import matplotlib

matplotlib.use("Agg")  # a file, no display
import matplotlib.pyplot as plt  # noqa: E402

import fednode  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="sweep.png")
    ap.add_argument("--train", type=int, default=10000)
    ap.add_argument("--test", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--alphas", default="0.05,0.1,0.5,1,10")
    ap.add_argument("--methods", default="fedcgs,fedpft")
    args = ap.parse_args()
    alphas = [float(a) for a in args.alphas.split(",")]
    methods = args.methods.split(",")

    X, y, info = fednode.extract("fashion-mnist", split="train", limit=args.train, input_size=64, progress=True)
    Xt, yt, _ = fednode.extract("fashion-mnist", split="test", limit=args.test, input_size=64, progress=True)
    print(f"{X.shape[0]} + {Xt.shape[0]} images as {X.shape[1]} features ({info['description']})")

    fig, axes = plt.subplots(1, len(methods), figsize=(5 * len(methods), 4), sharey=True, squeeze=False)
    for ax, method in zip(axes[0], methods):
        centralised = None
        for alpha in alphas:
            report = fednode.simulate(train=(X, y), test=(Xt, yt), class_names=info["class_names"], method=method,
                                      topology="linear", nodes=args.nodes, partition="dirichlet",
                                      dirichlet_alpha=alpha, seed=1, baselines=centralised is None,
                                      backbone_fingerprint=info["fingerprint"])
            if centralised is None:
                centralised = report["centralized"]["linear"]
            accuracies = [node["accuracy"] for node in report["nodes"]]
            print(f"{method} alpha {alpha:g}: " + " ".join(f"{a:.3f}" for a in accuracies))
            ax.plot(range(len(accuracies)), accuracies, marker="o", label=f"alpha {alpha:g}")
        ax.set_xticks(range(args.nodes))
        ax.axhline(centralised, color="black", linestyle="--", label=f"centralised linear {centralised:.3f}")
        ax.set_xlabel("node along the chain (its head has seen nodes 0..i)")
        ax.set_title(f"{method}, {args.nodes}-node chain, Dirichlet label skew")
        ax.legend(loc="lower right", fontsize="small")
    axes[0][0].set_ylabel("accuracy of each node's head")
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
