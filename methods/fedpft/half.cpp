#include "methods/fedpft/half.h"

#include "methods/gmm/lapack.h"

#include "core/float16.h"

#include <cmath>
#include <limits>
#include <sstream>

namespace fednode {

namespace {

// float16 keeps 11 significant bits (relative error 2^-12) down to kHalfSmallestNormal; below it
// precision runs out. Means or variances that lose more than this, relative to their size (their
// norm, so that a few tiny entries beside large ones do not count), are refused.
constexpr double kMaxRelativeLoss = 1e-2;

void check_loss(const MatrixD& exact, const MatrixD& rounded, const std::string& where, const char* what) {
  const double size = exact.norm(), loss = (rounded - exact).norm();
  if (!(loss > kMaxRelativeLoss * size)) return;
  std::ostringstream msg;
  msg << where << ": " << what << " of this size (largest " << exact.cwiseAbs().maxCoeff() << ") lose "
      << 100.0 * loss / size << " % of their value as float16, whose full precision ends at " << kHalfSmallestNormal
      << "; use the float32 transfer, or scale the features up";
  throw InputError(msg.str());
}

double to_half(double v, const std::string& where, const char* what) {
  if (!std::isfinite(v) || std::abs(v) > kHalfMax) {
    std::ostringstream msg;
    msg << where << ": " << what << " " << v << " cannot travel as float16 (largest is 65504); use the float32 transfer";
    throw InputError(msg.str());
  }
  return static_cast<double>(round_to_half(static_cast<float>(v)));
}

// Smallest float16 value >= v (v > 0).
double half_at_least(double v) {
  double h = static_cast<double>(round_to_half(static_cast<float>(v)));
  if (h < v) h = static_cast<double>(half_to_float(static_cast<uint16_t>(float_to_half(static_cast<float>(h)) + 1)));
  return h;
}

// The least variance that travels: `floor`, rounded up to a positive float16.
double least_variance(double floor) { return half_at_least(std::max(floor, kHalfSmallestSubnormal)); }

// `least` is least_variance(floor), formed once per mixture: it took three conversions a value.
double positive_variance(double v, double floor, double least, const std::string& where) {
  const double h = to_half(std::max(v, floor), where, "variance");
  return h >= least ? h : least;
}

}  // namespace

GaussianMixture round_mixture_to_half(const GaussianMixture& g, double variance_floor,
                                      const std::string& where, const MatrixD* probes) {
  g.validate(where);
  GaussianMixture out = g;
  const double least = least_variance(variance_floor);
  const Eigen::Index K = g.components(), d = g.dim();
  for (Eigen::Index k = 0; k < K; ++k) out.weights[k] = to_half(g.weights[k], where, "weight");
  if (!(out.weights.sum() > 0)) throw InputError(where + ": every weight rounds to zero in float16");
  for (Eigen::Index k = 0; k < K; ++k)
    for (Eigen::Index j = 0; j < d; ++j) out.means(k, j) = to_half(g.means(k, j), where, "mean");
  check_loss(g.means, out.means, where, "means");
  switch (g.type) {
    case CovarianceType::Diag:
    case CovarianceType::Spherical:
      for (Eigen::Index k = 0; k < out.covariances.rows(); ++k)
        for (Eigen::Index j = 0; j < out.covariances.cols(); ++j)
          out.covariances(k, j) = positive_variance(g.covariances(k, j), variance_floor, least, where);
      check_loss(g.covariances.cwiseMax(least), out.covariances, where, "variances");
      break;
    case CovarianceType::Full:
      for (Eigen::Index k = 0; k < K; ++k) {
        const MatrixD S = g.covariances.block(k * d, 0, d, d);
        MatrixD R(d, d);
        for (Eigen::Index i = 0; i < d; ++i) {
          R(i, i) = positive_variance(S(i, i), variance_floor, least, where);
          for (Eigen::Index j = i + 1; j < d; ++j) R(i, j) = R(j, i) = to_half(S(i, j), where, "covariance");
        }
        check_loss(S.diagonal().cwiseMax(least), R.diagonal(), where, "variances");
        // Rounding moves each entry by up to 2^-11 relative, which can break positive
        // definiteness of an ill-conditioned matrix: add a growing diagonal jitter.
        const double base = std::max(R.diagonal().mean() * std::ldexp(1.0, -10), variance_floor);
        // The first step t in [0, 40) whose jitter base * 2^t makes R positive definite, or the
        // diagonal alone if none does. More diagonal keeps a matrix positive definite, so the
        // first such step is found by doubling, then bisection: a dozen factorisations at most,
        // where trying every step took up to 40 (at d = 1 280 each takes tens of milliseconds,
        // and DP-FedPFT's noisy covariances need many steps). A step whose jitter float16 cannot
        // hold ends the search like a positive definite one: the steps before it decide, and if
        // none of them does, rounding it reports the overflow, as trying every step in turn did.
        const auto jittered = [&](int t) {
          MatrixD J = R;
          const double jitter = base * std::ldexp(1.0, t);
          for (Eigen::Index i = 0; i < d; ++i) J(i, i) = to_half(R(i, i) + jitter, where, "variance");
          return J;
        };
        MatrixD at_hi;  // step hi's matrix, kept so that it is not formed again
        const auto ends_search = [&](int t) {
          MatrixD candidate;
          try {
            candidate = jittered(t);
          } catch (const InputError&) {
            at_hi.resize(0, 0);  // formed again below, to report the overflow
            return true;
          }
          if (!lapack_positive_definite(candidate)) return false;
          at_hi = std::move(candidate);
          return true;
        };
        MatrixD J;
        if (!(K == 1 && probes && shown_not_positive_definite(R, *probes)) && lapack_positive_definite(R)) {
          J = std::move(R);
        } else {
          int lo = -1, hi = 40;  // step lo does not end the search; hi does, or is past the last
          for (int t = 0, stride = 1; t < 40; t = lo + (stride *= 2)) {
            if (ends_search(t)) {
              hi = t;
              break;
            }
            lo = t;
          }
          while (hi - lo > 1) {
            const int mid = (lo + hi) / 2;
            (ends_search(mid) ? hi : lo) = mid;
          }
          if (hi < 40) {
            J = at_hi.size() ? std::move(at_hi) : jittered(hi);
          } else {
            J = MatrixD::Zero(d, d);
            J.diagonal() = R.diagonal();
          }
        }
        out.covariances.block(k * d, 0, d, d) = J;
      }
      break;
  }
  return out;
}

CovarianceSketch round_sketch_to_half(const CovarianceSketch& s, const std::string& where) {
  CovarianceSketch out = s;
  for (Eigen::Index j = 0; j < out.variances.size(); ++j)
    out.variances[j] = to_half(out.variances[j], where, "within-class variance");
  for (Eigen::Index i = 0; i < out.factor.rows(); ++i)
    for (Eigen::Index j = 0; j < out.factor.cols(); ++j)
      out.factor(i, j) = to_half(out.factor(i, j), where, "covariance sketch entry");
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
