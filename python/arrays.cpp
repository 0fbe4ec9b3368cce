#include "python/arrays.h"

#include "features/npy.h"

#include <algorithm>
#include <cstring>

namespace py = pybind11;

namespace fednode::python {

namespace {

// A features matrix: 2-dimensional, with a sane number of columns. `what` names it in errors.
void check_matrix(const RowsArray& X, const std::string& what) {
  if (X.ndim() != 2)
    throw InputError(what + " must be 2-dimensional (samples x features), it has " + std::to_string(X.ndim()) +
                     " dimensions");
  if (X.shape(1) < 1 || X.shape(1) > (1 << 30)) throw InputError(what + " has " + std::to_string(X.shape(1)) + " columns");
}

}  // namespace

MatrixF matrix_of(const RowsArray& X, const std::string& what) {
  check_matrix(X, what);
  return Eigen::Map<const MatrixF>(X.data(), X.shape(0), X.shape(1));
}

FeatureRows lend(const RowsArray& X, const LabelsArray& y, const std::string& what) {
  check_matrix(X, what + ": X");
  if (y.ndim() != 1) throw InputError(what + ": y must be 1-dimensional, it has " + std::to_string(y.ndim()) + " dimensions");
  if (X.shape(0) != y.shape(0))
    throw InputError(what + ": X has " + std::to_string(X.shape(0)) + " rows, y " + std::to_string(y.shape(0)) + " labels");
  FeatureRows rows;
  rows.X = X.data();
  rows.y = y.data();
  rows.n = X.shape(0);
  rows.d = static_cast<int>(X.shape(1));
  return rows;  // num_classes: the caller's to set (--num-classes, or infer_num_classes)
}

Features features_of(const RowsArray& X, const LabelsArray& y, const std::string& what, int num_classes) {
  FeatureRows rows = lend(X, y, what);
  rows.num_classes = num_classes > 0 ? num_classes : infer_num_classes(rows.y, rows.n, what + ": y", "num_classes=");
  return rows.copy();
}

py::array_t<float> to_numpy(const MatrixF& m) {
  py::array_t<float> out({static_cast<py::ssize_t>(m.rows()), static_cast<py::ssize_t>(m.cols())});
  if (m.size() > 0) std::memcpy(out.mutable_data(), m.data(), sizeof(float) * static_cast<size_t>(m.size()));
  return out;
}

py::array_t<int32_t> to_numpy(const Labels& labels) {
  py::array_t<int32_t> out(static_cast<py::ssize_t>(labels.size()));
  if (!labels.empty()) std::memcpy(out.mutable_data(), labels.data(), sizeof(int32_t) * labels.size());
  return out;
}

}  // namespace fednode::python
