"""What the Python references share: reading the raw little-endian float64 files the C++
benchmarks write (bench_common.h, write_raw), with their shape checked."""
import numpy as np


def load(path, shape):
    a = np.fromfile(path, dtype="<f8")
    if a.size != int(np.prod(shape)):
        raise SystemExit(f"{path}: {a.size} values, expected {shape}")
    return a.reshape(shape)
