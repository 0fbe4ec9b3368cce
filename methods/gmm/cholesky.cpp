// robust_cholesky: the one place that decides what to do with a covariance that is not
// numerically positive definite (EM's M-step, received mixtures, 16-bit rounding).
#include "methods/gmm/gmm.h"

#include "methods/gmm/lapack.h"

#include <cmath>

namespace fednode {

namespace {
bool try_llt(const MatrixD& S, MatrixD& L) {
  MatrixD l;
  if (!lapack_cholesky(S, l)) return false;
  L = std::move(l);
  return true;
}
}  // namespace

int robust_cholesky(const MatrixD& S, MatrixD& L) {
  const Eigen::Index d = S.rows();
  if (try_llt(S, L)) return 0;
  // Jitter relative to the matrix's own scale, growing until the factorisation succeeds.
  double scale = S.diagonal().cwiseAbs().mean();
  if (!(scale > 0) || !std::isfinite(scale)) scale = 1.0;
  MatrixD J = S;
  for (int t = 0; t <= 12; ++t) {
    const double jitter = scale * std::pow(10.0, t - 10);
    J.diagonal() = S.diagonal().array() + jitter;
    if (try_llt(J, L)) return 1;
  }
  // The diagonal alone, floored: always positive definite.
  L = MatrixD::Zero(d, d);
  for (Eigen::Index j = 0; j < d; ++j) {
    const double v = S(j, j);
    L(j, j) = std::sqrt(std::isfinite(v) && v > scale * 1e-10 ? v : scale * 1e-10);
  }
  return 1;
}

}  // namespace fednode
