#include "methods/fedpft/correlation.h"

#include "methods/gmm/gmm.h"
#include "core/rng.h"

#include <Eigen/Eigenvalues>
#include <Eigen/QR>
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
// Subspace iteration (Halko, Martinsson & Tropp 2011, Alg. 4.4): extra directions carried beside
// the wanted ones, and power passes; enough that the leading directions of a correlation matrix
// agree with a full eigendecomposition to well below the float16 the sketch travels in.
constexpr Eigen::Index kOversampling = 16;
constexpr int kPowerPasses = 6;
constexpr uint64_t kSubspaceStartSeed = 0x736B65746368ULL;  // fixed: the sketch is a function of the data

// The residuals' standardised second moment over the dimensions that vary within some class.
struct StandardisedScatter {
  VectorD variance;                   // d, within-class variances; 0 for dimensions that never vary
  std::vector<Eigen::Index> varying;  // dimensions with a positive variance
  MatrixD S;                          // p x p over `varying`: the residuals' correlation, unit diagonal
  double fourth_moment = 0;           // sum over residuals of ||z||^4, for the Ledoit-Wolf weight
  int64_t residuals = 0;
};

StandardisedScatter standardised_scatter(const Features& local) {
  StandardisedScatter out;
  const Eigen::Index n = local.X.rows(), d = local.X.cols();
  if (d > INT_MAX / 2) throw InputError("within-class correlation: dimension " + std::to_string(d) + " is too large");
  const auto counts = local.class_counts();
  auto used = [&](Eigen::Index i) { return counts[static_cast<size_t>(local.y[static_cast<size_t>(i)])] >= 2; };

  MatrixD means = MatrixD::Zero(local.num_classes, d);
  for (Eigen::Index i = 0; i < n; ++i)
    if (used(i)) means.row(local.y[static_cast<size_t>(i)]) += local.X.row(i).cast<double>();
  for (int c = 0; c < local.num_classes; ++c)
    if (counts[static_cast<size_t>(c)] >= 2) means.row(c) /= static_cast<double>(counts[static_cast<size_t>(c)]);

  out.variance = VectorD::Zero(d);
  for (Eigen::Index i = 0; i < n; ++i)
    if (used(i)) {
      out.variance += (local.X.row(i).cast<double>() - means.row(local.y[static_cast<size_t>(i)])).transpose().cwiseAbs2();
      ++out.residuals;
    }
  if (out.residuals < 2) {
    out.residuals = 0;
    out.variance.setZero();
    return out;
  }
  out.variance /= static_cast<double>(out.residuals);

  for (Eigen::Index j = 0; j < d; ++j)
    if (out.variance[j] > 0) out.varying.push_back(j);
  const auto p = static_cast<Eigen::Index>(out.varying.size());
  out.S = MatrixD::Zero(p, p);
  if (p == 0) return out;
  VectorD inverse_sd(p);
  for (Eigen::Index v = 0; v < p; ++v) inverse_sd[v] = 1.0 / std::sqrt(out.variance[out.varying[static_cast<size_t>(v)]]);
  const Eigen::Index chunk = std::min({n, std::max(kMinChunkRows, kChunkScalars / p), Eigen::Index{INT_MAX}});
  MatrixD buf(chunk, p);
  Eigen::Index rows = 0;
  auto flush = [&] {
    if (rows == 0) return;
    for (Eigen::Index r = 0; r < rows; ++r) out.fourth_moment += std::pow(buf.row(r).squaredNorm(), 2);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(p), static_cast<int>(rows), 1.0,
                buf.data(), static_cast<int>(p), 1.0, out.S.data(), static_cast<int>(p));
    rows = 0;
  };
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!used(i)) continue;
    const auto label = local.y[static_cast<size_t>(i)];
    for (Eigen::Index v = 0; v < p; ++v) {
      const Eigen::Index j = out.varying[static_cast<size_t>(v)];
      buf(rows, v) = (static_cast<double>(local.X(i, j)) - means(label, j)) * inverse_sd[v];
    }
    if (++rows == chunk) flush();
  }
  flush();
  out.S = out.S.selfadjointView<Eigen::Upper>();
  out.S /= static_cast<double>(out.residuals);
  return out;
}

// R's Cholesky factor with its rows scaled to unit length. R may have a unit diagonal only up to
// rounding, or need regularising (its diagonal then grows): scaling each row of L is scaling R to
// a unit diagonal (D L (D L)^T = D R D), so every synthetic dimension keeps exactly the variance
// the mixture gives it.
MatrixD unit_diagonal_factor(const MatrixD& R) {
  MatrixD L;
  robust_cholesky(R, L);
  for (Eigen::Index j = 0; j < L.rows(); ++j) L.row(j) /= L.row(j).norm();
  return L;
}

// The `rank` leading eigenpairs of the symmetric positive semi-definite S, largest first.
void leading_eigenpairs(const MatrixD& S, Eigen::Index rank, MatrixD& vectors, VectorD& values) {
  const Eigen::Index p = S.rows();
  if (rank + kOversampling >= p / 2) {  // small or nearly full: the dense solver is as quick
    Eigen::SelfAdjointEigenSolver<MatrixD> eig(S);
    vectors = eig.eigenvectors().rightCols(rank).rowwise().reverse();
    values = eig.eigenvalues().tail(rank).reverse();
    return;
  }
  Rng rng(kSubspaceStartSeed);
  MatrixD Q(p, rank + kOversampling);
  for (Eigen::Index j = 0; j < Q.cols(); ++j)
    for (Eigen::Index i = 0; i < p; ++i) Q(i, j) = rng.normal();
  for (int pass = 0; pass <= kPowerPasses; ++pass) {
    const MatrixD Y = S * Q;
    Q = Eigen::HouseholderQR<MatrixD>(Y).householderQ() * MatrixD::Identity(p, Y.cols());
  }
  // Rayleigh-Ritz on the subspace found.
  const MatrixD T = Q.transpose() * S * Q;
  Eigen::SelfAdjointEigenSolver<MatrixD> eig(T);
  vectors = (Q * eig.eigenvectors().rightCols(rank)).rowwise().reverse();
  values = eig.eigenvalues().tail(rank).reverse();
}

}  // namespace

WithinClassCorrelation within_class_correlation(const Features& local) {
  local.validate("features to estimate the within-class correlation from");
  WithinClassCorrelation out;
  StandardisedScatter sc = standardised_scatter(local);
  out.residuals = sc.residuals;
  if (sc.residuals < 2) return out;
  const Eigen::Index d = local.X.cols(), p = static_cast<Eigen::Index>(sc.varying.size());
  MatrixD R = MatrixD::Identity(d, d);  // dimensions that never vary keep R's identity rows
  if (p >= 2) {
    MatrixD& S = sc.S;
    const auto m = static_cast<double>(sc.residuals);
    // Ledoit & Wolf (2004), in scikit-learn's form: the identity's weight is the estimated
    // variance of S's entries over their spread around the target mu I, capped at 1.
    const double mu = S.trace() / static_cast<double>(p);
    const double spread = (S - mu * MatrixD::Identity(p, p)).squaredNorm();
    const double noise = std::min(sc.fourth_moment / (m * m) - S.squaredNorm() / m, spread);
    out.shrinkage = spread > 0 ? std::max(0.0, noise) / spread : 1.0;
    S *= 1 - out.shrinkage;  // in place: at d in the thousands each p x p copy is tens of MB
    S.diagonal().array() += out.shrinkage * mu;
    for (Eigen::Index a = 0; a < p; ++a)
      for (Eigen::Index b = 0; b < p; ++b) R(sc.varying[static_cast<size_t>(a)], sc.varying[static_cast<size_t>(b)]) = S(a, b);
  }
  out.factor = unit_diagonal_factor(R);
  return out;
}

CovarianceSketch sketch_within_class(const Features& local, int rank) {
  local.validate("features to sketch the within-class covariance of");
  if (rank < 1) throw InputError("covariance sketch: rank must be at least 1, got " + std::to_string(rank));
  const StandardisedScatter sc = standardised_scatter(local);
  CovarianceSketch out;
  out.residuals = sc.residuals;
  out.variances = sc.variance;
  const auto p = static_cast<Eigen::Index>(sc.varying.size());
  const Eigen::Index r = std::min<Eigen::Index>(rank, p);
  out.factor = MatrixD::Zero(0, local.X.cols());
  if (r == 0) return out;
  MatrixD vectors;
  VectorD values;
  leading_eigenpairs(sc.S, r, vectors, values);
  Eigen::Index kept = 0;
  while (kept < r && values[kept] > 0) ++kept;  // a rank-deficient S has nothing more to give
  out.factor = MatrixD::Zero(kept, local.X.cols());
  for (Eigen::Index i = 0; i < kept; ++i)
    for (Eigen::Index v = 0; v < p; ++v) {
      const Eigen::Index j = sc.varying[static_cast<size_t>(v)];
      out.factor(i, j) = std::sqrt(values[i]) * vectors(v, i) * std::sqrt(sc.variance[j]);
    }
  return out;
}

CovarianceSketch combine_sketches(const std::vector<const CovarianceSketch*>& sketches, int rank) {
  if (sketches.empty()) throw InputError("combine_sketches: no sketch to combine");
  const Eigen::Index d = sketches.front()->variances.size();
  CovarianceSketch out;
  Eigen::Index stacked = 0;
  for (const CovarianceSketch* s : sketches) {
    if (s->variances.size() != d || s->factor.cols() != d)
      throw InputError("combine_sketches: sketches of different dimensions");
    out.residuals += s->residuals;
    stacked += s->factor.rows();
  }
  out.variances = VectorD::Zero(d);
  out.factor = MatrixD::Zero(0, d);
  if (out.residuals == 0) return out;
  const auto m = static_cast<double>(out.residuals);
  MatrixD G(stacked, d);
  Eigen::Index row = 0;
  for (const CovarianceSketch* s : sketches) {
    const double w = static_cast<double>(s->residuals) / m;
    out.variances += w * s->variances;
    G.middleRows(row, s->factor.rows()) = std::sqrt(w) * s->factor;
    row += s->factor.rows();
  }
  if (rank <= 0 || stacked <= rank) {
    out.factor = std::move(G);
    return out;
  }
  // The leading directions of the stack's correlation: with G = V Sigma U^T in correlation units,
  // V_r^T G keeps the r largest, in the features' units. The r x r Gram is all that is decomposed.
  VectorD inverse_sd = VectorD::Zero(d);
  for (Eigen::Index j = 0; j < d; ++j)
    if (out.variances[j] > 0) inverse_sd[j] = 1.0 / std::sqrt(out.variances[j]);
  const MatrixD Gs = G * inverse_sd.asDiagonal();
  const MatrixD gram = Gs * Gs.transpose();
  Eigen::SelfAdjointEigenSolver<MatrixD> eig(gram);
  out.factor = eig.eigenvectors().rightCols(rank).transpose() * G;
  return out;
}

WithinClassCorrelation correlation_of(const CovarianceSketch& sketch) {
  WithinClassCorrelation out;
  out.shrinkage = 0;
  out.residuals = sketch.residuals;
  if (sketch.residuals == 0) return out;
  const Eigen::Index d = sketch.variances.size();
  MatrixD C = MatrixD::Zero(d, d);
  if (sketch.factor.rows() > 0)
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(d), static_cast<int>(sketch.factor.rows()), 1.0,
                sketch.factor.data(), static_cast<int>(d), 0.0, C.data(), static_cast<int>(d));
  // The diagonal part is what the truncation left out of each variance; float16 rounding can make
  // it slightly negative, and the low-rank part alone then stands.
  for (Eigen::Index j = 0; j < d; ++j) C(j, j) = std::max(C(j, j), sketch.variances[j]);
  VectorD inverse_sd = VectorD::Zero(d);
  for (Eigen::Index j = 0; j < d; ++j)
    if (C(j, j) > 0) inverse_sd[j] = 1.0 / std::sqrt(C(j, j));
  // Scaled and mirrored from dsyrk's upper triangle in place: at d in the thousands a copy is tens of MB.
  for (Eigen::Index a = 0; a < d; ++a)
    for (Eigen::Index b = a; b < d; ++b) C(b, a) = C(a, b) = inverse_sd[a] * C(a, b) * inverse_sd[b];
  for (Eigen::Index j = 0; j < d; ++j)
    if (inverse_sd[j] == 0) C(j, j) = 1;  // a dimension that never varies stays uncorrelated
  out.factor = unit_diagonal_factor(C);
  return out;
}

void validate_sketch(const CovarianceSketch& s, int dim, int64_t samples, const std::string& where) {
  const std::string at = where + ", within-class covariance sketch";
  if (s.residuals < 0 || s.residuals > samples)
    throw InputError(at + ": " + std::to_string(s.residuals) + " residuals, outside [0, " + std::to_string(samples) +
                     "] (the samples its mixtures stand for)");
  if (s.variances.size() != dim)
    throw InputError(at + ": " + std::to_string(s.variances.size()) + " variances, expected " + std::to_string(dim));
  if (s.factor.cols() != dim || s.factor.rows() > dim)
    throw InputError(at + ": factor is " + std::to_string(s.factor.rows()) + "x" + std::to_string(s.factor.cols()) +
                     ", expected at most " + std::to_string(dim) + " rows of " + std::to_string(dim));
  if (!all_finite(s.variances) || !all_finite(s.factor)) throw InputError(at + ": holds NaN or Inf");
  if ((s.variances.array() < 0).any()) throw InputError(at + ": a variance is negative");
  if (s.residuals == 0 && (s.factor.rows() > 0 || (s.variances.array() != 0).any()))
    throw InputError(at + ": summarises no residuals but is not empty");
}

}  // namespace fednode
