#!/usr/bin/env python3
"""A PyTorch program as one node of a federation (docs/python.md, "A node").

It reads Fashion-MNIST (Debian's dataset-fashion-mnist) itself, computes features with its own
PyTorch model -- MobileNetV2's ImageNet features, the TorchScript file bundled in models/, run by
PyTorch at 64 x 64 pixels -- and joins a 3-node chain n0 -> n1 -> n2 as n1, beside two `fednode
run` processes that read their shares of the same features from .npy files. Then it classifies
its own held-out images with the head the federation gave it, and compares with a head trained on
its data alone.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/chain_with_pytorch.py [--work DIR]
        [--train 6000] [--test 1000] [--method fedpft|fedcgs|fedtc] [--fednode build/fednode]

Everything it makes (features, keys, the topology file, the nodes' state) goes into --work.
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

import fednode

ROOT = Path(__file__).resolve().parents[2]
FASHION = Path(os.environ.get("FEDNODE_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
FINGERPRINT = "pytorch mobilenet_v2 imagenet features at 64 px"


def read_idx(name):
    """An IDX file of Fashion-MNIST as a NumPy array (images [n, 28, 28] or labels [n])."""
    path = FASHION / name
    with (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")) as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape).copy()


def find(prefix):
    for name in sorted(os.listdir(FASHION)):
        if name.startswith(prefix):
            return name
    sys.exit(f"no {prefix}* in {FASHION}: install dataset-fashion-mnist (scripts/setup.sh)")


def features(model, images, batch=256):
    """The program's own feature extraction: gray to RGB in [0, 1], 64 x 64, through the model."""
    out = []
    with torch.inference_mode():
        for start in range(0, len(images), batch):
            x = torch.from_numpy(images[start:start + batch]).float().div(255).unsqueeze(1)
            x = F.interpolate(x, size=(64, 64), mode="bilinear", align_corners=False).repeat(1, 3, 1, 1)
            out.append(model(x).reshape(len(x), -1))
    return torch.cat(out).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="chain_with_pytorch")
    ap.add_argument("--train", type=int, default=6000)
    ap.add_argument("--test", type=int, default=1000)
    ap.add_argument("--method", default="fedpft")
    ap.add_argument("--port", type=int, default=7300)
    ap.add_argument("--fednode", default=shutil.which("fednode") or str(ROOT / "build" / "fednode"))
    args = ap.parse_args()
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    model = torch.jit.load(str(ROOT / "models" / "mobilenet_v2_imagenet_features.pt")).eval()
    images, labels = read_idx(find("train-images"))[:args.train], read_idx(find("train-labels"))[:args.train]
    test_images = read_idx(find("t10k-images"))[:args.test]
    test_labels = read_idx(find("t10k-labels"))[:args.test].astype(np.int64)
    print(f"extracting features of {len(images)} + {len(test_images)} images with PyTorch", flush=True)
    X, Xt = features(model, images), features(model, test_images)
    y = labels.astype(np.int64)

    # Three shares: n0's and n2's for the fednode processes, as .npy files; n1's stays here.
    rng = np.random.default_rng(1)
    shares = np.array_split(rng.permutation(len(y)), 3)
    own_test = Xt[: len(Xt) // 2], test_labels[: len(Xt) // 2]       # what n1 scores its head on
    held_out = Xt[len(Xt) // 2:], test_labels[len(Xt) // 2:]         # what n1 classifies at the end
    topology = ["[federation]", 'mode = "linear"', f'method = "{args.method}"', "seed = 1",
                "deadline_seconds = 300.0", ""]
    for i in range(3):
        if not (work / "keys" / f"n{i}" / "node.pub").exists():
            fednode.keygen(work / "keys" / f"n{i}")
        topology += ["[[node]]", f"id = {i}", f'name = "n{i}"', f'address = "tcp://127.0.0.1:{args.port + i}"',
                     f'key_dir = "keys/n{i}"', f'state_dir = "state/n{i}"']
        if i != 1:
            for part, array in (("train-features", X[shares[i]]), ("train-labels", y[shares[i]].astype(np.int32)),
                                ("test-features", own_test[0]), ("test-labels", own_test[1].astype(np.int32))):
                np.save(work / f"n{i}_{part}.npy", array)
                topology.append(f'data.{part} = "n{i}_{part}.npy"')
            topology += ['data.partition = "none"', "data.num-classes = 10", f'data.backbone-fingerprint = "{FINGERPRINT}"']
        topology.append("")
    topology += ["[[edge]]", 'from = "n0"', 'to = "n1"', "", "[[edge]]", 'from = "n1"', 'to = "n2"', ""]
    (work / "chain.toml").write_text("\n".join(topology))
    shutil.rmtree(work / "state", ignore_errors=True)  # a fresh run each time

    print(f"starting n0 and n2 ({args.fednode} run); this program is n1", flush=True)
    others = [subprocess.Popen([args.fednode, "run", "--topology", str(work / "chain.toml"), "--id", f"n{i}", "--quiet"])
              for i in (0, 2)]
    try:
        node = fednode.Node(work / "chain.toml", "n1", features=(X[shares[1]], y[shares[1]]), test=own_test,
                            backbone_fingerprint=FINGERPRINT,
                            on_log=lambda level, line: print(f"  [n1] {line}", flush=True))
        result = node.run()
    finally:
        codes = [p.wait(timeout=600) for p in others]
    print(f"n1: {result['status']}, contributors {result['contributors']}, accuracy {result['accuracy']:.4f}; "
          f"n0 and n2 exited {codes}")

    classifier = node.classifier()
    Xh, yh = held_out
    federated = float(np.mean(classifier.predict(Xh) == yh))
    alone = fednode.simulate(train=(X[shares[1]], y[shares[1]]), test=held_out, method=args.method, nodes=1,
                             baselines=False)["nodes"][0]["accuracy"]
    print(f"held-out images: {federated:.4f} with the federation's {classifier.kind} head "
          f"(trained on nodes {classifier.contributors}), {alone:.4f} with n1's data alone")
    return 0 if result["status"] == "finished" and codes == [0, 0] else 1


if __name__ == "__main__":
    sys.exit(main())
