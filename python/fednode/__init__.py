"""fednode in Python: its simulator, a node of a federation, and the model a federation trained,
from fednode's C++ core, with NumPy arrays (or torch tensors) in (docs/python.md).

    import fednode
    report = fednode.simulate(train=(X, y), test=(Xt, yt), method="fedcgs", topology="star",
                              nodes=50, partition="dirichlet", dirichlet_alpha=0.05, seed=0)
    node = fednode.Node("chain.toml", "n1", features=(X, y), backbone_fingerprint="my-resnet")
    result = node.run()
    labels = node.classifier().predict(X_new)

Keywords are the command line's options with underscores for dashes; errors are fednode.Error
subclasses (InputError and UsageError are also ValueErrors) carrying the command's exit status.
"""
import os as _os

from . import _fednode
from ._errors import Error, InputError, NetworkError, SecurityError, UsageError
from ._node import Node
from ._simulate import simulate

Classifier = _fednode.Classifier

__all__ = ["simulate", "Node", "Classifier", "load_topology", "keygen", "extract", "Error", "InputError",
           "UsageError", "NetworkError", "SecurityError"]


def load_topology(path):
    """A topology file read and checked as every node reads it: a dict with its mode, method, run,
    seed, hub, nodes (id, name, address, public_key, key_dir, state_dir, ...) and edges
    (from, to, feedback). Raises InputError naming the file and line of what is wrong."""
    return _fednode.load_topology(_os.fspath(path))


def keygen(dir):
    """Writes a new key pair into `dir` (node.key, node.pub) as `fednode keygen --out DIR` does;
    returns the public key in hex, for a topology file."""
    return _fednode.keygen(_os.fspath(dir))


def extract(dataset=None, *, images=None, split="train", limit=None, backbone="default", input_size=0,
            threads=0, batch_size=32, cache=True, progress=False, skip_bad=False, dataset_dir=None,
            cache_dir=None, optimize=False):
    """Features of Fashion-MNIST (dataset="fashion-mnist", split="train" or "test") or of an image
    folder (images=DIR, one sub-folder per class) through a TorchScript backbone with its sidecar
    (backbone="default" is the bundled MobileNetV2), as `fednode extract` computes them, through
    the same feature cache (cache=False: neither read nor write it). The keywords are its options.

    Returns (X, y, info): X float32 [n, d] (owning the extraction's matrix: no copy), y int32 [n],
    info a dict with class_names, fingerprint (what backbone_fingerprint= must say), description,
    skipped and ignored files."""
    def path(p):
        return _os.fspath(p) if p else ""

    return _fednode.extract(dataset or "", path(images), split, -1 if limit is None else int(limit),
                            path(backbone), int(input_size), int(threads), int(batch_size), bool(cache),
                            bool(progress), bool(skip_bad), path(dataset_dir), path(cache_dir), bool(optimize))
