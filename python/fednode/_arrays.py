"""Data from Python to the module: (X, y) as NumPy arrays, torch tensors read through NumPy."""
import numpy as np

from ._errors import InputError


def numpy_of(value):
    """A torch.Tensor as NumPy (no copy for a CPU tensor); anything else as it is."""
    if hasattr(value, "detach") and hasattr(value, "numpy"):
        return value.detach().cpu().numpy()
    return value


def rows(data, what):
    """(X, y) checked: X numbers, y integer labels in [0, 2^31 - 1)."""
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise InputError(f"{what}: give (X, y), a matrix of features and a vector of labels")
    X = np.asarray(numpy_of(data[0]))
    y = np.asarray(numpy_of(data[1]))
    if X.dtype.kind not in "fiu":
        raise InputError(f"{what}: X holds {X.dtype}, not numbers")
    if y.dtype.kind not in "iu":
        raise InputError(f"{what}: y holds {y.dtype}; labels are integers 0 .. classes-1")
    if y.size and (y.min() < 0 or y.max() >= 2**31 - 1):
        raise InputError(f"{what}: label {y.min() if y.min() < 0 else y.max()} is outside [0, 2^31 - 1)")
    return X, y
