#include "methods/fedpft/dp.h"

#include "methods/dp/accounting.h"

#include <cmath>
#include <string>

namespace fednode {

void validate_dp_parameters(double epsilon, double delta, const std::string& where) {
  validate_dp_target(epsilon, delta, where);
}

double dp_noise_sigma(int64_t n, double epsilon, double delta) {
  return 4.0 / (static_cast<double>(n) * epsilon) * std::sqrt(5.0 * std::log(4.0 / delta));
}

int64_t clip_rows_to_unit_norm(MatrixD& X) {
  int64_t clipped = 0;
  for (Eigen::Index i = 0; i < X.rows(); ++i) {
    const double norm = X.row(i).norm();
    if (norm > 1.0) {
      X.row(i) /= norm;
      ++clipped;
    }
  }
  return clipped;
}

GaussianMixture dp_gaussian(const MatrixF& X, double epsilon, double delta, double eigen_floor,
                            SecretRng& noise, EigenArithmetic arithmetic, MatrixD* at_floor, int max_at_floor) {
  validate_dp_parameters(epsilon, delta, "DP-FedPFT");
  const Eigen::Index n = X.rows(), d = X.cols();
  if (n <= 0 || d <= 0) throw InputError("DP-FedPFT: no data to summarise");
  if (!all_finite(X)) throw InputError("DP-FedPFT: features hold NaN or Inf");
  if (!(eigen_floor > 0)) throw InputError("DP-FedPFT: eigenvalue floor must be positive");

  MatrixD F = X.cast<double>();
  clip_rows_to_unit_norm(F);
  const VectorD mean = F.colwise().mean().transpose();
  const MatrixD centred = F.rowwise() - mean.transpose();
  MatrixD cov = centred.transpose() * centred / static_cast<double>(n);

  const double sigma = dp_noise_sigma(n, epsilon, delta);
  VectorD noisy_mean = mean;
  for (Eigen::Index j = 0; j < d; ++j) noisy_mean[j] += sigma * noise.normal();
  for (Eigen::Index i = 0; i < d; ++i)
    for (Eigen::Index j = i; j < d; ++j) {
      const double e = sigma * noise.normal();
      cov(i, j) += e;
      if (j != i) cov(j, i) += e;
    }

  // Projection onto the PSD cone (post-processing, so privacy is kept), with a positive floor
  // so that the result is a usable, positive definite covariance.
  const MatrixD projected = psd_projection(cov, eigen_floor, arithmetic, at_floor, max_at_floor);
  GaussianMixture g;
  g.type = CovarianceType::Full;
  g.weights = VectorD::Ones(1);
  g.means = noisy_mean.transpose();
  g.covariances = projected;
  return g;
}

}  // namespace fednode
