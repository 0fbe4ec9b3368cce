// Gaussian mixtures fitted by EM (FedPFT's per-class summaries): fitting, per-sample
// log-likelihood and sampling. All arithmetic is double precision; features arrive as float32.
//
// Semantics follow scikit-learn's GaussianMixture so that results can be compared with it:
// reg_covar is added to every variance (the diagonal of full covariances), tol bounds the
// change of the mean per-sample log-likelihood between two iterations, the spherical variance
// is the mean of the per-dimension variances, and of n_init runs the one with the highest
// final lower bound is kept. Where scikit-learn fails or silently degrades, fednode differs:
//   - fewer distinct points than K: K is reduced to the number of distinct points (k-means++
//     runs out of points at positive distance); the data is never dropped.
//   - a component whose responsibility mass falls below kCollapsedMass samples is dropped and
//     the remaining weights renormalised (re-seeding it would break the monotone likelihood).
//   - a covariance that is not numerically positive definite is regularised by adding
//     growing multiples of its mean variance to the diagonal; failing that it is replaced by
//     its (floored) diagonal. FitInfo counts how often that happened.
//   - reg_covar = 0 is replaced by 1e-10 times the data's mean variance so that duplicate
//     points cannot produce zero variances.
#pragma once

#include "methods/knowledge.h"
#include "methods/method.h"
#include "core/rng.h"
#include "core/types.h"

#include <cstdint>
#include <vector>

namespace fednode {

// Responsibility mass (in samples) below which a component counts as collapsed.
constexpr double kCollapsedMass = 1e-6;

struct FitInfo {
  int components = 0;              // K of the returned mixture (may be below the requested K)
  int iterations = 0;              // EM iterations of the kept initialisation
  bool converged = false;
  // Mean per-sample log-likelihood at the last iteration, computed in its E-step (the
  // parameters before the last M-step), as scikit-learn's lower_bound_.
  double lower_bound = 0;
  std::vector<double> trace;       // that value for every iteration of the kept run
  int dropped_components = 0;      // collapsed components removed during EM
  int regularised_covariances = 0; // times a covariance needed the Cholesky fallback (per iteration)
  int best_init = 0;               // which of the n_init runs was kept
  int kmeans_iterations = 0;       // Lloyd iterations of the kept initialisation
};

// Throws InputError if the options are unusable.
void validate_gmm_options(const GmmOptions& options, const std::string& where);

// Fits a mixture to the rows of X (n x d, finite). Deterministic for a given seed.
GaussianMixture fit_gmm(const MatrixF& X, const GmmOptions& options, uint64_t seed,
                        FitInfo* info = nullptr);

// EM only, starting from `init` (its type must equal options.covariance). Used by benchmarks
// that start fednode and a reference implementation from the same parameters.
GaussianMixture fit_gmm_from(const MatrixF& X, const GaussianMixture& init,
                             const GmmOptions& options, FitInfo* info = nullptr);

// The starting point fit_gmm uses for one initialisation: k-means++ seeding, then Lloyd
// iterations if options.init is KMeans, then the mixture of the resulting hard clusters.
GaussianMixture initial_mixture(const MatrixF& X, const GmmOptions& options, Rng& rng,
                                int* kmeans_iterations = nullptr);

// log p(x_i) for every row of X.
VectorD score_samples(const GaussianMixture& g, const MatrixF& X);
double mean_log_likelihood(const GaussianMixture& g, const MatrixF& X);

// n draws from the mixture: component counts as `draws` says (ComponentDraws, methods/method.h),
// then Gaussian draws per component (full covariances through their Cholesky factor).
// Rows come grouped by component. Deterministic for a given Rng state, whatever the thread count.
// With `correlation` (the lower Cholesky factor L of a d x d correlation matrix R, unit diagonal),
// a diagonal or spherical component draws mu + sigma * (L z) instead of mu + sigma * z: the same
// means and variances, with correlation R between the dimensions. Refused for full covariances,
// which carry their own.
MatrixF sample_gmm(const GaussianMixture& g, int64_t n, Rng& rng, ComponentDraws draws,
                   const MatrixD* correlation = nullptr);

// k-means on the rows of X. Centers are in the coordinates of X.
struct KMeansResult {
  MatrixD centers;                 // K' x d, K' <= K (K' = number of distinct points if fewer)
  std::vector<int32_t> labels;     // n, in [0, K')
  int iterations = 0;              // Lloyd iterations (0 for seeding only)
};
// Greedy k-means++ seeding (2 + ln K candidates per step, as scikit-learn), then, if lloyd,
// Lloyd iterations until the labels stop changing or the centers move less than tol times the
// data's mean variance (scikit-learn's criterion), at most max_iter times.
KMeansResult kmeans(const MatrixF& X, int K, Rng& rng, bool lloyd, int max_iter = 300,
                    double tol = 1e-4);

// Lower Cholesky factor L (L L^T = S) of a symmetric matrix, with the fallback described
// above. Returns 0 if S was positive definite as given, 1 if it needed regularising.
int robust_cholesky(const MatrixD& S, MatrixD& L);

}  // namespace fednode
