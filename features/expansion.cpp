#include "features/expansion.h"

#include "core/rng.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace fednode {

void validate(const FeatureExpansion& e) {
  if (e.dim < 0 || e.dim > kMaxExpansionDim)
    throw InputError("feature expansion dimension must lie in [0, " + std::to_string(kMaxExpansionDim) +
                     "] (0: off), got " + std::to_string(e.dim));
}

MatrixF expansion_projection(int in_dim, const FeatureExpansion& e) {
  validate(e);
  if (in_dim < 1) throw InputError("feature expansion of features with dimension " + std::to_string(in_dim));
  // One stream for the whole matrix, filled row by row: the layout, not the thread count or the
  // data, decides which draw lands where.
  Rng rng = Rng::stream(e.seed, Purpose::FeatureExpansion, static_cast<uint64_t>(e.dim),
                        static_cast<uint64_t>(in_dim));
  const double scale = 1.0 / std::sqrt(static_cast<double>(in_dim));  // keeps W f at f's scale
  MatrixF W(e.dim, in_dim);
  for (Eigen::Index i = 0; i < W.rows(); ++i)
    for (Eigen::Index j = 0; j < W.cols(); ++j) W(i, j) = static_cast<float>(rng.normal() * scale);
  return W;
}

Features expand_features(Features f, const FeatureExpansion& e) {
  validate(e);
  if (!e.enabled()) return f;
  return expand_rows(f.rows(), e);
}

Features expand_rows(const FeatureRows& rows, const FeatureExpansion& e) {
  validate(e);
  if (!e.enabled()) return rows.copy();
  const MatrixF W = expansion_projection(rows.d, e);
  Features out;
  out.num_classes = rows.num_classes;
  out.y.assign(rows.y, rows.y + rows.n);
  MatrixF& Z = out.X;
  Z.resize(rows.n, e.dim);
  // OpenBLAS's sgemm, as FedCGS's Gram matrix uses dsyrk: Eigen's own product was 5x slower on
  // two cores (bench/bench_expansion.cpp). A block of rows at a time, so that the ReLU runs on
  // rows still in cache.
  constexpr Eigen::Index kBlock = 2048;
  for (Eigen::Index r = 0; r < Z.rows(); r += kBlock) {
    const Eigen::Index n = std::min(kBlock, Z.rows() - r);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), e.dim, rows.d, 1.0f,
                rows.X + r * rows.d, rows.d, W.data(), rows.d, 0.0f, Z.data() + r * e.dim, e.dim);
    Z.middleRows(r, n) = Z.middleRows(r, n).cwiseMax(0.0f);
  }
  return out;
}

std::string expanded_fingerprint(const std::string& fingerprint, const FeatureExpansion& e) {
  validate(e);
  if (!e.enabled()) return fingerprint;
  return fingerprint + "+relu-projection-" + std::to_string(e.dim) + "-seed-" + std::to_string(e.seed);
}

}  // namespace fednode
