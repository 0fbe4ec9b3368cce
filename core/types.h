// The vocabulary every folder shares: feature matrices, labels, node ids, contributor sets.
// Kept free of LibTorch so that including it is cheap.
#pragma once

#include "core/contributors.h"

#include <Eigen/Core>

#include <array>
#include <atomic>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fednode {

// Row-major so that one sample is one contiguous row, as in .npy files and on the wire.
using MatrixF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixD = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using VectorF = Eigen::VectorXf;
using VectorD = Eigen::VectorXd;
using Labels = std::vector<int32_t>;

// Whether every entry is finite, reading a matrix's storage in order. Eigen's allFinite() walks a
// row-major matrix column by column: a cache miss per entry on large ones, 3.2 ms against 0.34 ms
// at 1 024 x 1 024 (DP-FedPFT checks several such covariances per class).
template <typename Scalar, int Rows, int Cols, int Options, int MaxRows, int MaxCols>
bool all_finite(const Eigen::Matrix<Scalar, Rows, Cols, Options, MaxRows, MaxCols>& m) {
  return Eigen::Map<const Eigen::Matrix<Scalar, Eigen::Dynamic, 1>>(m.data(), m.size()).allFinite();
}
// Blocks, maps and expressions: Eigen's own walk.
template <typename Derived>
bool all_finite(const Eigen::DenseBase<Derived>& m) {
  return m.allFinite();
}

// Names one run of a federation. Message ids restart with every run, so without it a message
// recorded in an earlier run with the same keys could be replayed into a fresh one.
struct RunId {
  std::array<uint8_t, 16> bytes{};
  std::string to_hex() const;
  bool operator==(const RunId& o) const { return bytes == o.bytes; }
  bool operator!=(const RunId& o) const { return bytes != o.bytes; }
};

struct Features;

// Labelled rows someone else owns and lends, read in place: a Features' own, or a NumPy array the
// Python module passes without a copy. What is taken from them (a node's share) is copied out.
struct FeatureRows {
  const float* X = nullptr;  // n x d, row-major, contiguous
  const int32_t* y = nullptr;
  int64_t n = 0;
  int d = 0;
  int num_classes = 0;

  Eigen::Map<const MatrixF> matrix() const { return {X, static_cast<Eigen::Index>(n), d}; }
  // Throws InputError naming `what` and the first label outside [0, num_classes) or non-finite value.
  void validate(const std::string& what) const;
  Features subset(const std::vector<int64_t>& rows) const;
  Features copy() const;
  // The first n rows (all of them when n < 0 or n >= this->n).
  FeatureRows first(int64_t count) const;
};

// A labelled matrix of backbone outputs. Never leaves a node.
struct Features {
  MatrixF X;             // n x d
  Labels y;              // n, each in [0, num_classes)
  int num_classes = 0;

  int64_t size() const { return static_cast<int64_t>(X.rows()); }
  int dim() const { return static_cast<int>(X.cols()); }

  // Throws InputError naming the first inconsistency.
  void validate(const std::string& what) const;
  // Its rows, lent: valid while it lives and is not changed.
  FeatureRows rows() const { return {X.data(), y.data(), size(), dim(), num_classes}; }

  // Rows whose label is `c`, in their original order.
  MatrixF rows_of_class(int c) const;
  std::vector<int64_t> class_counts() const;
  Features subset(const std::vector<int64_t>& rows) const;
  // The first n rows (all of them when n < 0 or n >= size()).
  Features first(int64_t n) const;
};

// Thrown for bad user input (files, options, bytes): the message names what and where.
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown when this machine cannot listen on an address (in use, not one of its own, a name that
// does not resolve). An InputError, since the address comes from the user's file; its own type lets
// the CLI's exit status tell a network problem from a bad file (docs/cli.md, "Exit status").
struct NetworkError : InputError {
  using InputError::InputError;
};

// Thrown at an interruption point once a stop flag is set (NodeContext::stop, RunOptions::stop):
// the caller asked for it, so it is not an error.
struct Interrupted : std::runtime_error {
  Interrupted() : std::runtime_error("interrupted: asked to stop") {}
};

// An interruption point: throws Interrupted when `stop` is set and true.
inline void interruption_point(const std::atomic<bool>* stop) {
  if (stop && stop->load(std::memory_order_relaxed)) throw Interrupted();
}

// Throws InputError unless `path` is a regular file (or a link to one), saying what it is
// instead: missing, a directory, or another kind of file. `what` names the file's role
// ("backbone model file"). An unreadable file is left to the caller's open, which says why.
void require_regular_file(const std::string& path, const std::string& what);

}  // namespace fednode
