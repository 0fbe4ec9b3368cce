#include "methods/fedpft/half.h"

#include "methods/float16.h"

#include <Eigen/Cholesky>

#include <cmath>
#include <limits>

namespace fednode {

namespace {

constexpr double kHalfMax = 65504.0;
constexpr double kHalfMinPositive = 5.9604644775390625e-08;  // 2^-24, the smallest subnormal

double to_half(double v, const std::string& where, const char* what) {
  if (!std::isfinite(v) || std::abs(v) > kHalfMax)
    throw InputError(where + ": " + what + " " + std::to_string(v) +
                     " cannot travel as float16 (largest is 65504); use the float32 transfer");
  return static_cast<double>(round_to_half(static_cast<float>(v)));
}

// Smallest float16 value >= v (v > 0).
double half_at_least(double v) {
  double h = static_cast<double>(round_to_half(static_cast<float>(v)));
  if (h < v) h = static_cast<double>(half_to_float(static_cast<uint16_t>(float_to_half(static_cast<float>(h)) + 1)));
  return h;
}

double positive_variance(double v, double floor, const std::string& where) {
  const double f = half_at_least(std::max(floor, kHalfMinPositive));
  const double h = to_half(std::max(v, floor), where, "variance");
  return h >= f ? h : f;
}

bool positive_definite(const MatrixD& S) {
  Eigen::LLT<MatrixD> llt(S);
  return llt.info() == Eigen::Success && (MatrixD(llt.matrixL()).diagonal().array() > 0).all();
}

}  // namespace

GaussianMixture round_mixture_to_half(const GaussianMixture& g, double variance_floor,
                                      const std::string& where) {
  g.validate(where);
  GaussianMixture out = g;
  const Eigen::Index K = g.components(), d = g.dim();
  for (Eigen::Index k = 0; k < K; ++k) out.weights[k] = to_half(g.weights[k], where, "weight");
  if (!(out.weights.sum() > 0)) throw InputError(where + ": every weight rounds to zero in float16");
  for (Eigen::Index k = 0; k < K; ++k)
    for (Eigen::Index j = 0; j < d; ++j) out.means(k, j) = to_half(g.means(k, j), where, "mean");
  switch (g.type) {
    case CovarianceType::Diag:
    case CovarianceType::Spherical:
      for (Eigen::Index k = 0; k < out.covariances.rows(); ++k)
        for (Eigen::Index j = 0; j < out.covariances.cols(); ++j)
          out.covariances(k, j) = positive_variance(g.covariances(k, j), variance_floor, where);
      break;
    case CovarianceType::Full:
      for (Eigen::Index k = 0; k < K; ++k) {
        const MatrixD S = g.covariances.block(k * d, 0, d, d);
        MatrixD R(d, d);
        for (Eigen::Index i = 0; i < d; ++i) {
          R(i, i) = positive_variance(S(i, i), variance_floor, where);
          for (Eigen::Index j = i + 1; j < d; ++j) R(i, j) = R(j, i) = to_half(S(i, j), where, "covariance");
        }
        // Rounding moves each entry by up to 2^-11 relative, which can break positive
        // definiteness of an ill-conditioned matrix: add a growing diagonal jitter.
        const double base = std::max(R.diagonal().mean() * std::ldexp(1.0, -10), variance_floor);
        MatrixD J = R;
        for (int t = 0; t < 40 && !positive_definite(J); ++t) {
          const double jitter = base * std::ldexp(1.0, t);
          for (Eigen::Index i = 0; i < d; ++i) J(i, i) = to_half(R(i, i) + jitter, where, "variance");
        }
        if (!positive_definite(J)) {
          J = MatrixD::Zero(d, d);
          J.diagonal() = R.diagonal();
        }
        out.covariances.block(k * d, 0, d, d) = J;
      }
      break;
  }
  return out;
}

bool is_half_exact(const GaussianMixture& g) {
  auto exact = [](const auto& m) {
    for (Eigen::Index i = 0; i < m.rows(); ++i)
      for (Eigen::Index j = 0; j < m.cols(); ++j) {
        const double v = m(i, j);
        if (static_cast<double>(round_to_half(static_cast<float>(v))) != v) return false;
      }
    return true;
  };
  return exact(g.weights) && exact(g.means) && exact(g.covariances);
}

}  // namespace fednode
