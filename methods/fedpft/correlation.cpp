#include "methods/fedpft/correlation.h"

#include "methods/gmm/gmm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <vector>

namespace fednode {

namespace {

// Rows standardised per dsyrk call (about 2 MB of doubles at d = 1280): see methods/fedcgs/stats.cpp.
constexpr Eigen::Index kChunkScalars = Eigen::Index{1} << 18;
constexpr Eigen::Index kMinChunkRows = 384;

}  // namespace

WithinClassCorrelation within_class_correlation(const Features& local) {
  local.validate("features to estimate the within-class correlation from");
  WithinClassCorrelation out;
  const Eigen::Index n = local.X.rows(), d = local.X.cols();
  if (d > INT_MAX / 2) throw InputError("within-class correlation: dimension " + std::to_string(d) + " is too large");
  const auto counts = local.class_counts();
  auto used = [&](Eigen::Index i) { return counts[static_cast<size_t>(local.y[static_cast<size_t>(i)])] >= 2; };

  MatrixD means = MatrixD::Zero(local.num_classes, d);
  for (Eigen::Index i = 0; i < n; ++i)
    if (used(i)) means.row(local.y[static_cast<size_t>(i)]) += local.X.row(i).cast<double>();
  for (int c = 0; c < local.num_classes; ++c)
    if (counts[static_cast<size_t>(c)] >= 2) means.row(c) /= static_cast<double>(counts[static_cast<size_t>(c)]);

  VectorD variance = VectorD::Zero(d);
  for (Eigen::Index i = 0; i < n; ++i)
    if (used(i)) {
      variance += (local.X.row(i).cast<double>() - means.row(local.y[static_cast<size_t>(i)])).transpose().cwiseAbs2();
      ++out.residuals;
    }
  if (out.residuals < 2) return out;
  const auto m = static_cast<double>(out.residuals);
  variance /= m;

  // Only dimensions that vary within some class can correlate; the others keep R's identity rows.
  std::vector<Eigen::Index> varying;
  for (Eigen::Index j = 0; j < d; ++j)
    if (variance[j] > 0) varying.push_back(j);
  const auto p = static_cast<Eigen::Index>(varying.size());
  MatrixD R = MatrixD::Identity(d, d);
  if (p >= 2) {
    VectorD inverse_sd(p);
    for (Eigen::Index v = 0; v < p; ++v) inverse_sd[v] = 1.0 / std::sqrt(variance[varying[static_cast<size_t>(v)]]);
    const Eigen::Index chunk = std::min({n, std::max(kMinChunkRows, kChunkScalars / p), Eigen::Index{INT_MAX}});
    MatrixD buf(chunk, p);
    MatrixD S = MatrixD::Zero(p, p);
    double fourth_moment = 0;  // sum over residuals of ||z||^4, for the Ledoit-Wolf weight
    Eigen::Index rows = 0;
    auto flush = [&] {
      if (rows == 0) return;
      for (Eigen::Index r = 0; r < rows; ++r) fourth_moment += std::pow(buf.row(r).squaredNorm(), 2);
      cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(p), static_cast<int>(rows), 1.0,
                  buf.data(), static_cast<int>(p), 1.0, S.data(), static_cast<int>(p));
      rows = 0;
    };
    for (Eigen::Index i = 0; i < n; ++i) {
      if (!used(i)) continue;
      const auto label = local.y[static_cast<size_t>(i)];
      for (Eigen::Index v = 0; v < p; ++v) {
        const Eigen::Index j = varying[static_cast<size_t>(v)];
        buf(rows, v) = (static_cast<double>(local.X(i, j)) - means(label, j)) * inverse_sd[v];
      }
      if (++rows == chunk) flush();
    }
    flush();
    S = S.selfadjointView<Eigen::Upper>();
    S /= m;

    // Ledoit & Wolf (2004), in scikit-learn's form: the identity's weight is the estimated
    // variance of S's entries over their spread around the target mu I, capped at 1.
    const double mu = S.trace() / static_cast<double>(p);
    const double spread = (S - mu * MatrixD::Identity(p, p)).squaredNorm();
    const double noise = std::min(fourth_moment / (m * m) - S.squaredNorm() / m, spread);
    out.shrinkage = spread > 0 ? std::max(0.0, noise) / spread : 1.0;
    S *= 1 - out.shrinkage;  // in place: at d in the thousands each p x p copy is tens of MB
    S.diagonal().array() += out.shrinkage * mu;
    for (Eigen::Index a = 0; a < p; ++a)
      for (Eigen::Index b = 0; b < p; ++b) R(varying[static_cast<size_t>(a)], varying[static_cast<size_t>(b)]) = S(a, b);
  }
  robust_cholesky(R, out.factor);
  // S has a unit diagonal only up to rounding, and had R needed regularising its diagonal grew:
  // scaling each row of L to unit length is scaling R to a unit diagonal (D L (D L)^T = D R D),
  // so every synthetic dimension keeps exactly the variance the mixture gives it.
  for (Eigen::Index j = 0; j < d; ++j) out.factor.row(j) /= out.factor.row(j).norm();
  return out;
}

}  // namespace fednode
