#include "methods/gmm/density.h"

#include "methods/gmm/gmm.h"
#include "methods/gmm/simd_diag.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fednode::gmm_detail {

namespace {
const double kLog2Pi = std::log(2.0 * M_PI);

double log_weight(double w) {
  return w > 0 ? std::log(w) : -std::numeric_limits<double>::infinity();
}
}  // namespace

ComponentDensity::ComponentDensity(const GaussianMixture& g, const VectorD& offset)
    : type_(g.type), K_(g.components()), d_(g.dim()) {
  means_ = g.means.rowwise() - offset.transpose();
  simd_ = type_ != CovarianceType::Full && simd_kernels_active();
  constant_.resize(K_);
  const double dd = static_cast<double>(d_);
  switch (type_) {
    case CovarianceType::Diag: {
      // log N = -1/2 [d log 2pi + sum log var + sum (x^2 p - 2 x mu p + mu^2 p)], so that one
      // product of the block [x, x^2] with W gives every data-dependent term.
      W_.resize(2 * d_, K_);
      for (int k = 0; k < K_; ++k) {
        double logdet = 0, mu2p = 0;
        for (Index j = 0; j < d_; ++j) {
          const double var = g.covariances(k, j), p = 1.0 / var, mu = means_(k, j);
          logdet += std::log(var);
          mu2p += mu * mu * p;
          W_(j, k) = mu * p;
          W_(d_ + j, k) = -0.5 * p;
        }
        constant_[k] = log_weight(g.weights[k]) - 0.5 * (dd * kLog2Pi + logdet + mu2p);
      }
      break;
    }
    case CovarianceType::Spherical: {
      W_.resize(d_, K_);
      precision_.resize(K_);
      for (int k = 0; k < K_; ++k) {
        const double var = g.covariances(k, 0), p = 1.0 / var;
        precision_[k] = p;
        for (Index j = 0; j < d_; ++j) W_(j, k) = means_(k, j) * p;
        constant_[k] = log_weight(g.weights[k]) -
                       0.5 * (dd * kLog2Pi + dd * std::log(var) + means_.row(k).squaredNorm() * p);
      }
      break;
    }
    case CovarianceType::Full: {
      // x^T P_k - mu_k^T P_k with P_k = L_k^{-T}: one product of the block with the
      // concatenated factors whitens the rows for every component at once.
      chol_.resize(static_cast<size_t>(K_));
      P_.resize(d_, static_cast<Index>(K_) * d_);
      b_.resize(static_cast<Index>(K_) * d_);
      for (int k = 0; k < K_; ++k) {
        MatrixD& L = chol_[static_cast<size_t>(k)];
        regularised_ += robust_cholesky(g.covariances.block(k * d_, 0, d_, d_), L);
        const MatrixD Linv =
            L.triangularView<Eigen::Lower>().solve(MatrixD::Identity(d_, d_));
        P_.block(0, k * d_, d_, d_) = Linv.transpose();
        b_.segment(k * d_, d_) = Linv * means_.row(k).transpose();
        constant_[k] = log_weight(g.weights[k]) - 0.5 * dd * kLog2Pi - L.diagonal().array().log().sum();
      }
      break;
    }
  }
  if (simd_) {
    Wm_ = simd_pack_weights(W_.data(), d_, K_);
    if (type_ == CovarianceType::Diag) Wp_ = simd_pack_weights(W_.data() + d_ * K_, d_, K_);
  }
}

Index ComponentDensity::rows_per_block() const {
  if (simd_) return std::clamp<Index>((512 * 1024 / 8) / ((d_ + 7) / 8 * 8), 16, 256);
  return block_rows(width() + scratch_width());
}

void ComponentDensity::evaluate_rows(const MatrixF& X, Index begin, Index rows,
                                     const VectorD& offset, BlockWork& work, double* out) const {
  if (!simd_) {
    work.block.resize(static_cast<size_t>(rows * width()));
    load_block(X, begin, rows, offset, squares(), work.block.data());
    evaluate(work.block.data(), rows, out, work.scratch);
    return;
  }
  const int K = K_;
  const bool spherical = type_ == CovarianceType::Spherical;
  if (spherical) work.scratch.resize(static_cast<size_t>(rows));
  simd_estep({X.data(), d_, begin, rows, offset.data()}, K, Wm_.data(), spherical ? nullptr : Wp_.data(), out,
             spherical ? work.scratch.data() : nullptr, work.carry);
  for (Index i = 0; i < rows; ++i)
    for (int k = 0; k < K; ++k) {
      double v = out[i * K + k] + constant_[k];
      if (spherical) v -= 0.5 * precision_[k] * work.scratch[static_cast<size_t>(i)];
      out[i * K + k] = v;
    }
}

void ComponentDensity::evaluate(const double* block, Index rows, double* out,
                                std::vector<double>& scratch) const {
  if (rows <= 0) return;
  const int K = K_;
  const Index d = d_;
  switch (type_) {
    case CovarianceType::Diag: {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), K,
                  static_cast<int>(2 * d), 1.0, block, static_cast<int>(2 * d), W_.data(), K, 0.0,
                  out, K);
      for (Index i = 0; i < rows; ++i)
        for (int k = 0; k < K; ++k) out[i * K + k] += constant_[k];
      break;
    }
    case CovarianceType::Spherical: {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(rows), K,
                  static_cast<int>(d), 1.0, block, static_cast<int>(d), W_.data(), K, 0.0, out, K);
      scratch.resize(static_cast<size_t>(rows));
      for (Index i = 0; i < rows; ++i) {
        const double norm2 = Eigen::Map<const VectorD>(block + i * d, d).squaredNorm();
        scratch[static_cast<size_t>(i)] = norm2;
        for (int k = 0; k < K; ++k) out[i * K + k] += constant_[k] - 0.5 * precision_[k] * norm2;
      }
      break;
    }
    case CovarianceType::Full: {
      const Index Kd = static_cast<Index>(K) * d;
      scratch.resize(static_cast<size_t>(rows * Kd));
      double* y = scratch.data();
      // Each block of P is upper triangular: one triangular product per component does half
      // the arithmetic of one product with all of P.
      for (int k = 0; k < K; ++k) {
        for (Index i = 0; i < rows; ++i)
          std::copy(block + i * d, block + (i + 1) * d, y + i * Kd + k * d);
        cblas_dtrmm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasNonUnit, static_cast<int>(rows),
                    static_cast<int>(d), 1.0, P_.data() + k * d, static_cast<int>(Kd), y + k * d,
                    static_cast<int>(Kd));
      }
      for (Index i = 0; i < rows; ++i)
        for (int k = 0; k < K; ++k) {
          const double maha = (Eigen::Map<const VectorD>(y + i * Kd + k * d, d) -
                               b_.segment(k * d, d)).squaredNorm();
          out[i * K + k] = constant_[k] - 0.5 * maha;
        }
      break;
    }
  }
}

double normalise_rows(const double* logp, Index rows, int K, double* resp, double* row_ll) {
  double total = 0;
  for (Index i = 0; i < rows; ++i) {
    const double* l = logp + i * K;
    double m = -std::numeric_limits<double>::infinity();
    for (int k = 0; k < K; ++k) m = std::max(m, l[k]);
    double s = 0;
    if (resp) {
      double* r = resp + i * K;
      for (int k = 0; k < K; ++k) s += (r[k] = std::exp(l[k] - m));
      const double inv = 1.0 / s;
      for (int k = 0; k < K; ++k) r[k] *= inv;
    } else {
      for (int k = 0; k < K; ++k) s += std::exp(l[k] - m);
    }
    const double ll = m + std::log(s);
    if (row_ll) row_ll[i] = ll;
    total += ll;
  }
  return total;
}

}  // namespace fednode::gmm_detail
