// DP-FedPFT (FedPFT paper, Theorem 4.1): one Gaussian per class, released through the Gaussian
// mechanism. With features clipped to ||f||_2 <= 1, adding N(0, sigma^2) noise to every entry of
// the empirical mean and covariance, sigma = 4 / (n eps) * sqrt(5 ln(4 / delta)), and projecting
// the covariance onto the positive semi-definite cone is (eps, delta)-differentially private.
#pragma once

#include "methods/knowledge.h"
#include "core/secret_rng.h"
#include "methods/gmm/lapack.h"

#include <cstdint>

namespace fednode {

// Throws InputError unless eps > 0 and 0 < delta < 1 (both finite).
void validate_dp_parameters(double epsilon, double delta, const std::string& where);

// The theorem's noise standard deviation for a class of n samples.
double dp_noise_sigma(int64_t n, double epsilon, double delta);

// Scales every row with ||x||_2 > 1 down to norm 1; returns how many rows were scaled.
int64_t clip_rows_to_unit_norm(MatrixD& X);

// The released Gaussian (K = 1, full covariance) of the rows of X: clipping, empirical mean and
// covariance (divided by n, as EM's single component), noise drawn from `noise` (mean first,
// then the upper triangle of the covariance row by row, mirrored so the noise is symmetric;
// secret, core/secret_rng.h),
// then eigenvalues clamped at `eigen_floor` (> 0) so the covariance is positive definite. The
// eigen-decomposition's arithmetic follows the release's precision (methods/gmm/lapack.h): single
// for a float16 release, whose rounding is a thousand times coarser than its errors.
// `at_floor`, if given, receives up to `max_at_floor` directions along which the covariance was
// raised to the floor (psd_projection): the probes round_mixture_to_half can use.
GaussianMixture dp_gaussian(const MatrixF& X, double epsilon, double delta, double eigen_floor,
                            SecretRng& noise, EigenArithmetic arithmetic = EigenArithmetic::Double,
                            MatrixD* at_floor = nullptr, int max_at_floor = 0);

}  // namespace fednode
