// Drawing synthetic features from a mixture (FedPFT's receiver side).
#include "methods/gmm/blocks.h"
#include "core/parallel.h"
#include "methods/gmm/gmm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace fednode {

using gmm_detail::Index;

namespace {
// Rows drawn from one sub-stream. Sub-streams are cut by position, not by thread, so that the
// draws are the same whatever the number of threads.
constexpr Index kRowsPerTask = 2048;
// Refuse to materialise more than this many scalars (8 GiB of float32) in one call.
constexpr double kMaxSampleScalars = 2147483648.0;

struct Task {
  int component;
  Index first_row;  // in the output
  Index rows;
  uint64_t seed;
};
}  // namespace

MatrixF sample_gmm(const GaussianMixture& g, int64_t n, Rng& rng, ComponentDraws draws,
                   const MatrixD* correlation) {
  g.validate("mixture to sample from");
  const Index d = g.dim();
  const int K = g.components();
  if (correlation) {
    if (g.type == CovarianceType::Full)
      throw InputError("a correlation to draw with applies to diagonal and spherical mixtures; a full "
                       "covariance carries its own");
    if (correlation->rows() != d || correlation->cols() != d)
      throw InputError("correlation factor is " + std::to_string(correlation->rows()) + "x" +
                       std::to_string(correlation->cols()) + ", the mixture's dimension is " + std::to_string(d));
  }
  if (n < 0) throw InputError("cannot draw a negative number of samples (" + std::to_string(n) + ")");
  if (static_cast<double>(n) * static_cast<double>(d) > kMaxSampleScalars)
    throw InputError("drawing " + std::to_string(n) + " samples of dimension " + std::to_string(d) +
                     " exceeds the limit of 2^31 values");
  MatrixF out(static_cast<Index>(n), d);
  if (n == 0) return out;

  // Component counts: the component whose cumulative-weight interval holds each point u, the
  // points drawn independently (multinomial) or evenly spaced from one offset (systematic).
  VectorD cumulative(K);
  double acc = 0;
  for (int k = 0; k < K; ++k) cumulative[k] = (acc += g.weights[k]);
  std::vector<Index> counts(static_cast<size_t>(K), 0);
  const double offset = draws == ComponentDraws::Systematic ? rng.uniform() : 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double u = draws == ComponentDraws::Systematic
                         ? (offset + static_cast<double>(i)) / static_cast<double>(n) * acc
                         : rng.uniform() * acc;
    int k = static_cast<int>(std::upper_bound(cumulative.data(), cumulative.data() + K, u) -
                             cumulative.data());
    // u < acc always; the guard only protects against weights that round to a flat tail.
    if (k >= K) k = K - 1;
    while (g.weights[k] <= 0 && k > 0) --k;
    ++counts[static_cast<size_t>(k)];
  }
  std::vector<Task> tasks;
  Index row = 0;
  for (int k = 0; k < K; ++k) {
    const uint64_t component_seed = rng.next();
    Index chunk = 0;
    for (Index done = 0; done < counts[static_cast<size_t>(k)]; done += kRowsPerTask, ++chunk) {
      const Index rows = std::min(kRowsPerTask, counts[static_cast<size_t>(k)] - done);
      tasks.push_back({k, row, rows, derive_seed(component_seed, {static_cast<uint64_t>(chunk)})});
      row += rows;
    }
  }

  std::vector<MatrixD> factors;
  if (g.type == CovarianceType::Full) {
    factors.resize(static_cast<size_t>(K));
    for (int k = 0; k < K; ++k)
      if (counts[static_cast<size_t>(k)] > 0)
        robust_cholesky(g.covariances.block(k * d, 0, d, d), factors[static_cast<size_t>(k)]);
  }

  BlasSingleThread single;  // the passes call BLAS from several threads at once
  // Normal draws dominate: about 30 operations each.
  const bool multiplies = g.type == CovarianceType::Full || correlation;
  const double flops = 30.0 * static_cast<double>(n) * static_cast<double>(d) *
                       (multiplies ? 1.0 + static_cast<double>(d) / 15.0 : 1.0);
  for_each_chunk(tasks.size(), flops > gmm_detail::kParallelFlops, [&](size_t t) {
    const Task& task = tasks[t];
    const int k = task.component;
    Rng r(task.seed);
    MatrixD Z(task.rows, d);
    for (Index i = 0; i < task.rows; ++i)
      for (Index j = 0; j < d; ++j) Z(i, j) = r.normal();
    if (correlation)  // every row z becomes L z: Z = Z L^T, L lower triangular
      cblas_dtrmm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, static_cast<int>(task.rows),
                  static_cast<int>(d), 1.0, correlation->data(), static_cast<int>(d), Z.data(), static_cast<int>(d));
    switch (g.type) {
      case CovarianceType::Diag:
        for (Index i = 0; i < task.rows; ++i)
          for (Index j = 0; j < d; ++j)
            out(task.first_row + i, j) =
                static_cast<float>(g.means(k, j) + std::sqrt(g.covariances(k, j)) * Z(i, j));
        break;
      case CovarianceType::Spherical: {
        const double s = std::sqrt(g.covariances(k, 0));
        for (Index i = 0; i < task.rows; ++i)
          for (Index j = 0; j < d; ++j)
            out(task.first_row + i, j) = static_cast<float>(g.means(k, j) + s * Z(i, j));
        break;
      }
      case CovarianceType::Full: {
        // x = mu + L z for every row: X = Z L^T.
        MatrixD Y(task.rows, d);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(task.rows),
                    static_cast<int>(d), static_cast<int>(d), 1.0, Z.data(), static_cast<int>(d),
                    factors[static_cast<size_t>(k)].data(), static_cast<int>(d), 0.0, Y.data(),
                    static_cast<int>(d));
        for (Index i = 0; i < task.rows; ++i)
          for (Index j = 0; j < d; ++j)
            out(task.first_row + i, j) = static_cast<float>(g.means(k, j) + Y(i, j));
        break;
      }
    }
  });
  return out;
}

}  // namespace fednode
