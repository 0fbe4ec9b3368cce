#!/usr/bin/python3
"""Regenerates the .npy fixtures in npy/ with real NumPy, so the reader is tested against files
NumPy itself wrote (every format version, byte order, dtype and memory order we accept).
Run: /usr/bin/python3 tests/features/data/make_npy_fixtures.py"""
import os
import numpy as np
from numpy.lib import format as npf

out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "npy")
os.makedirs(out, exist_ok=True)

# Values exactly representable in float16, so every dtype must read back the same numbers.
X = (np.arange(12, dtype=np.float64).reshape(3, 4) - 5.0) / 4.0

def save(name, arr, version=None):
    with open(os.path.join(out, name), "wb") as f:
        npf.write_array(f, arr, version=version, allow_pickle=False)

for order in "<>":
    for size in (2, 4, 8):
        save(f"x_{'le' if order == '<' else 'be'}_f{size}.npy", X.astype(f"{order}f{size}"))
save("x_fortran_f4.npy", np.asfortranarray(X.astype("<f4")))
save("x_fortran_be_f2.npy", np.asfortranarray(X.astype(">f2")))
save("x_v2.npy", X.astype("<f4"), version=(2, 0))
save("x_v3.npy", X.astype("<f4"), version=(3, 0))
save("x_empty.npy", np.zeros((0, 5), dtype="<f4"))

y = np.array([0, 3, 1, 2, 3, 0, 1], dtype=np.int64)
for order in "<>":
    for kind in "iu":
        for size in (1, 2, 4, 8):
            save(f"y_{'le' if order == '<' else 'be'}_{kind}{size}.npy", y.astype(f"{order}{kind}{size}"))
save("y_column.npy", y.astype("<i8").reshape(-1, 1))
save("y_negative.npy", np.array([0, 1, -2, 3], dtype="<i4"))
save("y_float.npy", y.astype("<f4"))
save("x_nan.npy", np.where(np.arange(12).reshape(3, 4) == 6, np.nan, X).astype("<f4"))
save("x_inf_fortran.npy", np.asfortranarray(np.where(np.arange(12).reshape(3, 4) == 9, -np.inf, X).astype("<f2")))
save("x_f8_overflow.npy", np.where(np.arange(12).reshape(3, 4) == 5, 1e300, X).astype("<f8"))
save("x_rank3.npy", np.zeros((2, 3, 4), dtype="<f4"))
save("x_int.npy", np.zeros((2, 3), dtype="<i4"))
save("x_complex.npy", np.zeros((2, 3), dtype="<c8"))
save("x_structured.npy", np.zeros(3, dtype=[("a", "<f4"), ("b", "<i4")]))
