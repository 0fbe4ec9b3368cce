// NumPy arrays in and out of fednode's matrices.
#pragma once

#include "core/types.h"

#include <pybind11/numpy.h>

#include <string>

namespace fednode::python {

// A float32 C-contiguous array is read in place; anything else is converted once (a copy).
using RowsArray = pybind11::array_t<float, pybind11::array::c_style | pybind11::array::forcecast>;
using LabelsArray = pybind11::array_t<int32_t, pybind11::array::c_style | pybind11::array::forcecast>;

// (X, y) lent as rows, num_classes left 0 for the caller. Throws InputError naming `what` for
// shapes that do not fit. The arrays must outlive the rows.
FeatureRows lend(const RowsArray& X, const LabelsArray& y, const std::string& what);
// The same copied into Features the caller owns, with `num_classes` classes, or when it is 0 the
// count its labels imply (features/npy.h, infer_num_classes: absurd counts refused).
Features features_of(const RowsArray& X, const LabelsArray& y, const std::string& what, int num_classes);
// A 2-dimensional features matrix, checked, as MatrixF (one copy).
MatrixF matrix_of(const RowsArray& X, const std::string& what);

pybind11::array_t<float> to_numpy(const MatrixF& m);
pybind11::array_t<int32_t> to_numpy(const Labels& labels);

}  // namespace fednode::python
