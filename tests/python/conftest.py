"""Shared data for the Python module's tests: the build tree's package (PYTHONPATH, set by ctest)
and fednode's executable (FEDNODE_CLI) to compare with."""
import os

import numpy as np
import pytest


@pytest.fixture(scope="session")
def cli():
    return os.environ.get("FEDNODE_CLI", "fednode")


def blobs(n, d, classes, seed, spread=0.6):
    """Overlapping Gaussian classes: hard enough that methods and nodes differ in accuracy."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(classes, d)) * spread
    y = rng.integers(0, classes, n)
    X = (centres[y] + rng.normal(size=(n, d))).astype(np.float32)
    return X, y


@pytest.fixture(scope="session")
def data():
    return blobs(3000, 24, 6, seed=1), blobs(800, 24, 6, seed=2)


@pytest.fixture(scope="session")
def npy_files(tmp_path_factory, data):
    """The same data as the four .npy files `fednode simulate` reads."""
    folder = tmp_path_factory.mktemp("npy")
    (X, y), (Xt, yt) = data
    files = {}
    for name, array in (("train-features", X), ("train-labels", y.astype(np.int32)),
                        ("test-features", Xt), ("test-labels", yt.astype(np.int32))):
        files[name] = str(folder / (name + ".npy"))
        np.save(files[name], array)
    return files
