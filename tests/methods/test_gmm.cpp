#include "methods/gmm/blocks.h"
#include "core/parallel.h"
#include "methods/gmm/gmm.h"
#include "methods/gmm/simd_diag.h"

#include <Eigen/Cholesky>
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>

namespace fednode {
namespace {

const CovarianceType kTypes[] = {CovarianceType::Full, CovarianceType::Diag,
                                 CovarianceType::Spherical};

// A mixture with well-separated means (or, with spread < 1, overlapping ones).
GaussianMixture known_mixture(CovarianceType type, int K, int d, double spread, uint64_t seed) {
  Rng rng(seed);
  GaussianMixture g;
  g.type = type;
  g.weights = VectorD::Zero(K);
  for (int k = 0; k < K; ++k) g.weights[k] = 1.0 + k;  // unequal weights
  g.weights /= g.weights.sum();
  g.means = MatrixD::Zero(K, d);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < d; ++j) g.means(k, j) = spread * 10.0 * rng.normal();
  switch (type) {
    case CovarianceType::Diag:
      g.covariances.resize(K, d);
      for (int k = 0; k < K; ++k)
        for (int j = 0; j < d; ++j) g.covariances(k, j) = 0.5 + 1.5 * rng.uniform();
      break;
    case CovarianceType::Spherical:
      g.covariances.resize(K, 1);
      for (int k = 0; k < K; ++k) g.covariances(k, 0) = 0.5 + 1.5 * rng.uniform();
      break;
    case CovarianceType::Full:
      g.covariances.resize(K * d, d);
      for (int k = 0; k < K; ++k) {
        MatrixD A(d, d);
        for (int i = 0; i < d; ++i)
          for (int j = 0; j < d; ++j) A(i, j) = rng.normal();
        g.covariances.block(k * d, 0, d, d) = A * A.transpose() / d + 0.5 * MatrixD::Identity(d, d);
      }
      break;
  }
  return g;
}

GmmOptions options_for(CovarianceType type, int K) {
  GmmOptions o;
  o.covariance = type;
  o.components = K;
  return o;
}

// Index of the fitted component nearest to a true mean.
int nearest(const GaussianMixture& g, const VectorD& mu) {
  int best = 0;
  for (int k = 1; k < g.components(); ++k)
    if ((g.means.row(k).transpose() - mu).norm() < (g.means.row(best).transpose() - mu).norm())
      best = k;
  return best;
}

MatrixD component_covariance(const GaussianMixture& g, int k) {
  const int d = g.dim();
  switch (g.type) {
    case CovarianceType::Full: return g.covariances.block(k * d, 0, d, d);
    case CovarianceType::Diag: return g.covariances.row(k).transpose().asDiagonal();
    case CovarianceType::Spherical: return g.covariances(k, 0) * MatrixD::Identity(d, d);
  }
  return {};
}

class GmmTypes : public ::testing::TestWithParam<CovarianceType> {};

TEST_P(GmmTypes, RecoversWellSeparatedMixture) {
  const CovarianceType type = GetParam();
  const GaussianMixture truth = known_mixture(type, 3, 5, 1.0, 11);
  Rng rng(12);
  const MatrixF X = sample_gmm(truth, 3000, rng, ComponentDraws::Multinomial);
  FitInfo info;
  const GaussianMixture fit = fit_gmm(X, options_for(type, 3), 13, &info);
  ASSERT_EQ(fit.components(), 3);
  EXPECT_TRUE(info.converged);
  std::set<int> matched;
  for (int k = 0; k < 3; ++k) {
    const int m = nearest(fit, truth.means.row(k).transpose());
    matched.insert(m);
    EXPECT_LT((fit.means.row(m) - truth.means.row(k)).norm(), 0.2) << "component " << k;
    EXPECT_NEAR(fit.weights[m], truth.weights[k], 0.03);
    const MatrixD diff = component_covariance(fit, m) - component_covariance(truth, k);
    EXPECT_LT(diff.norm() / component_covariance(truth, k).norm(), 0.2) << "component " << k;
  }
  EXPECT_EQ(matched.size(), 3u);  // one fitted component per true one
  EXPECT_NO_THROW(fit.validate("fit"));
}

TEST_P(GmmTypes, LogLikelihoodNeverDecreases) {
  const CovarianceType type = GetParam();
  const GaussianMixture truth = known_mixture(type, 4, 4, 0.12, 21);  // heavily overlapping
  Rng rng(22);
  const MatrixF X = sample_gmm(truth, 1500, rng, ComponentDraws::Multinomial);
  GmmOptions o = options_for(type, 5);
  o.tol = 0;
  o.max_iter = 60;
  FitInfo info;
  fit_gmm(X, o, 23, &info);
  ASSERT_EQ(static_cast<int>(info.trace.size()), info.iterations);
  ASSERT_GE(info.trace.size(), 10u);
  for (size_t i = 1; i < info.trace.size(); ++i)
    EXPECT_GE(info.trace[i], info.trace[i - 1] - 1e-10 * std::abs(info.trace[i - 1]))
        << "iteration " << i;
  EXPECT_GT(info.trace.back(), info.trace.front());
  EXPECT_EQ(info.lower_bound, info.trace.back());
}

TEST_P(GmmTypes, SamplingMatchesMoments) {
  const CovarianceType type = GetParam();
  const int d = 3;
  const GaussianMixture g = known_mixture(type, 2, d, 0.3, 31);
  Rng rng(32);
  const int64_t n = 20000;
  const MatrixF S = sample_gmm(g, n, rng, ComponentDraws::Multinomial);
  ASSERT_EQ(S.rows(), n);
  ASSERT_TRUE(S.allFinite());
  // Mixture moments: mean = sum w mu, covariance = sum w (Sigma + mu mu^T) - mean mean^T.
  const VectorD mean = g.means.transpose() * g.weights;
  MatrixD cov = -mean * mean.transpose();
  for (int k = 0; k < 2; ++k)
    cov += g.weights[k] * (component_covariance(g, k) +
                           g.means.row(k).transpose() * g.means.row(k));
  const MatrixD Sd = S.cast<double>();
  const VectorD sample_mean = Sd.colwise().mean().transpose();
  const MatrixD centred = Sd.rowwise() - sample_mean.transpose();
  const MatrixD sample_cov = centred.transpose() * centred / static_cast<double>(n - 1);
  for (int j = 0; j < d; ++j) {
    const double se = std::sqrt(cov(j, j) / static_cast<double>(n));
    EXPECT_NEAR(sample_mean[j], mean[j], 4.5 * se) << "dimension " << j;
    for (int l = 0; l < d; ++l)
      EXPECT_NEAR(sample_cov(j, l), cov(j, l), 0.05 * std::sqrt(cov(j, j) * cov(l, l)))
          << "entry " << j << "," << l;
  }
  // Component counts follow the weights.
  Rng again(32);
  const MatrixF S2 = sample_gmm(g, n, again, ComponentDraws::Multinomial);
  EXPECT_EQ(S, S2);
}

TEST_P(GmmTypes, FewerDistinctPointsThanComponentsReducesK) {
  const CovarianceType type = GetParam();
  const GmmOptions o = options_for(type, 10);
  MatrixF three(3, 4);
  three << 1, 2, 3, 4, 5, 6, 7, 8, -1, 0, 2, 9;
  FitInfo info;
  GaussianMixture g = fit_gmm(three, o, 1, &info);
  EXPECT_EQ(g.components(), 3);
  EXPECT_EQ(info.components, 3);
  EXPECT_NO_THROW(g.validate("three points"));

  MatrixF two_distinct(7, 4);
  for (int i = 0; i < 7; ++i) two_distinct.row(i) = three.row(i % 2);
  g = fit_gmm(two_distinct, o, 2);
  EXPECT_EQ(g.components(), 2);
  EXPECT_NO_THROW(g.validate("two distinct points"));
  EXPECT_TRUE(score_samples(g, two_distinct).allFinite());

  g = fit_gmm(three.topRows(1), o, 3);
  EXPECT_EQ(g.components(), 1);
  EXPECT_NO_THROW(g.validate("one point"));
  EXPECT_TRUE(g.means.row(0).isApprox(three.row(0).cast<double>()));
}

TEST_P(GmmTypes, DuplicatesAndConstantDimensionsStayFinite) {
  const CovarianceType type = GetParam();
  Rng rng(41);
  MatrixF X(300, 6);
  for (int i = 0; i < 100; ++i)
    for (int j = 0; j < 6; ++j) X(i, j) = static_cast<float>(j == 2 ? 7.0 : rng.normal() + (i % 3) * 5);
  X.middleRows(100, 100) = X.topRows(100);  // every point three times
  X.bottomRows(100) = X.topRows(100);
  for (const double reg : {1e-6, 0.0}) {
    GmmOptions o = options_for(type, 4);
    o.reg_covar = reg;
    FitInfo info;
    const GaussianMixture g = fit_gmm(X, o, 42, &info);
    EXPECT_NO_THROW(g.validate("duplicates"));
    EXPECT_TRUE(std::isfinite(info.lower_bound));
    EXPECT_TRUE(score_samples(g, X).allFinite());
    Rng s(43);
    EXPECT_TRUE(sample_gmm(g, 500, s, ComponentDraws::Multinomial).allFinite());
  }
}

TEST_P(GmmTypes, ScoreMatchesDirectFormula) {
  const CovarianceType type = GetParam();
  const int d = 4;
  const GaussianMixture g = known_mixture(type, 3, d, 0.3, 51);
  Rng rng(52);
  const MatrixF X = sample_gmm(g, 40, rng, ComponentDraws::Multinomial);
  const VectorD scores = score_samples(g, X);
  for (int i = 0; i < X.rows(); ++i) {
    const VectorD x = X.row(i).cast<double>().transpose();
    double p = 0;
    for (int k = 0; k < 3; ++k) {
      const MatrixD S = component_covariance(g, k);
      const Eigen::LLT<MatrixD> llt(S);
      const VectorD r = x - g.means.row(k).transpose();
      const double maha = r.dot(llt.solve(r));
      const double logdet = 2 * MatrixD(llt.matrixL()).diagonal().array().log().sum();
      p += g.weights[k] * std::exp(-0.5 * (d * std::log(2 * M_PI) + logdet + maha));
    }
    EXPECT_NEAR(scores[i], std::log(p), 1e-9 * std::max(1.0, std::abs(std::log(p)))) << "row " << i;
  }
  EXPECT_NEAR(mean_log_likelihood(g, X), scores.mean(), 1e-12);
}

TEST_P(GmmTypes, FitFromInitialMixtureEqualsFit) {
  const CovarianceType type = GetParam();
  const GaussianMixture truth = known_mixture(type, 3, 3, 0.5, 61);
  Rng rng(62);
  const MatrixF X = sample_gmm(truth, 600, rng, ComponentDraws::Multinomial);
  const GmmOptions o = options_for(type, 3);
  const GaussianMixture a = fit_gmm(X, o, 63);
  Rng init_rng(63);
  const GaussianMixture init = initial_mixture(X, o, init_rng);
  const GaussianMixture b = fit_gmm_from(X, init, o);
  EXPECT_EQ(a.means, b.means);
  EXPECT_EQ(a.covariances, b.covariances);
  EXPECT_EQ(a.weights, b.weights);
}

TEST_P(GmmTypes, ThreadCountDoesNotChangeTheResult) {
  const CovarianceType type = GetParam();
  // Large enough that the passes and the sampling do run in parallel (kParallelFlops).
  const GaussianMixture truth = known_mixture(type, 3, 48, 0.3, 71);
  Rng rng(72);
  const MatrixF X = sample_gmm(truth, 6000, rng, ComponentDraws::Multinomial);
  GmmOptions o = options_for(type, 4);
  o.max_iter = 15;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const GaussianMixture one = fit_gmm(X, o, 73);
  Rng r1(74);
  const MatrixF s1 = sample_gmm(one, 5000, r1, ComponentDraws::Multinomial);
  omp_set_num_threads(3);
  const GaussianMixture three = fit_gmm(X, o, 73);
  Rng r3(74);
  const MatrixF s3 = sample_gmm(three, 5000, r3, ComponentDraws::Multinomial);
  omp_set_num_threads(saved);
  EXPECT_EQ(one.means, three.means);
  EXPECT_EQ(one.covariances, three.covariances);
  EXPECT_EQ(s1, s3);
}

// n rows drawn from a known mixture (seed, seed + 1), options that run exactly `iterations` EM
// iterations, and a start from one iteration of fit_gmm (seed + 2): two runs that should agree
// begin from the same place.
struct FixedFit {
  MatrixF X;
  GmmOptions options;
  GaussianMixture init;
};
FixedFit fixed_fit(CovarianceType type, int K, int d, double spread, int64_t n, int iterations, uint64_t seed) {
  FixedFit f;
  Rng rng(seed + 1);
  f.X = sample_gmm(known_mixture(type, K, d, spread, seed), n, rng, ComponentDraws::Multinomial);
  f.options = options_for(type, K);
  f.options.tol = 0;
  f.options.max_iter = iterations;
  GmmOptions start = f.options;
  start.max_iter = 1;
  f.init = fit_gmm(f.X, start, seed + 2);
  return f;
}

TEST_P(GmmTypes, VectorKernelsAgreeWithBlasPath) {
  // Odd sizes on purpose: d not a multiple of 8, K above one tile of 10, rows not a multiple
  // of anything. Without AVX-512 or AVX2 both runs take the BLAS path and agree trivially.
  const CovarianceType type = GetParam();
  const FixedFit fit = fixed_fit(type, 13, 13, 0.4, 1301, 6, 131);
  const MatrixF& X = fit.X;
  const GmmOptions& o = fit.options;
  const GaussianMixture& init = fit.init;
  ASSERT_EQ(init.components(), 13);
  gmm_detail::set_simd_kernels_enabled(false);
  FitInfo blas_info;
  const GaussianMixture blas = fit_gmm_from(X, init, o, &blas_info);
  const VectorD blas_scores = score_samples(blas, X);
  gmm_detail::set_simd_kernels_enabled(true);
  FitInfo simd_info;
  const GaussianMixture simd = fit_gmm_from(X, init, o, &simd_info);
  const VectorD simd_scores = score_samples(blas, X);
  ASSERT_EQ(simd.components(), blas.components());
  EXPECT_TRUE(simd.means.isApprox(blas.means, 1e-9));
  EXPECT_TRUE(simd.covariances.isApprox(blas.covariances, 1e-9));
  EXPECT_TRUE(simd.weights.isApprox(blas.weights, 1e-9));
  EXPECT_TRUE(simd_scores.isApprox(blas_scores, 1e-12));
  for (size_t i = 0; i < blas_info.trace.size(); ++i)
    EXPECT_NEAR(simd_info.trace[i], blas_info.trace[i], 1e-10 * std::abs(blas_info.trace[i]));

  // Beyond 128 columns the vector E-step works in slices and carries its partial sums from one
  // slice to the next: d = 137 crosses a slice boundary.
  const GaussianMixture wide = known_mixture(type, 3, 137, 0.3, 134);
  Rng wide_rng(135);
  const MatrixF W = sample_gmm(wide, 301, wide_rng, ComponentDraws::Multinomial);
  gmm_detail::set_simd_kernels_enabled(false);
  const VectorD wide_blas = score_samples(wide, W);
  gmm_detail::set_simd_kernels_enabled(true);
  EXPECT_TRUE(score_samples(wide, W).isApprox(wide_blas, 1e-12));
}

// The kernels are one source compiled for AVX-512 and for AVX2: every lane sees the same
// operations in the same order and the lanes are reduced in the same order, so a fit should
// give the same bits with either, separated or overlapping. Checked to 1e-12 (a compiler
// is free to contract a product and a sum differently for the two). Needs a CPU with both.
TEST_P(GmmTypes, Avx2KernelsAgreeWithAvx512Kernels) {
  const CovarianceType type = GetParam();
  if (type == CovarianceType::Full) GTEST_SKIP() << "no vector kernels for full covariances";
  if (!gmm_detail::cpu_has_avx512_kernels()) GTEST_SKIP() << "this CPU has no AVX-512";
  for (const double spread : {1.0, 0.05}) {
    const FixedFit fit = fixed_fit(type, 13, 137, spread, 1601, 5, 151);
    const GaussianMixture wide = fit_gmm_from(fit.X, fit.init, fit.options);
    gmm_detail::set_avx512_kernels_allowed(false);
    const GaussianMixture narrow = fit_gmm_from(fit.X, fit.init, fit.options);
    gmm_detail::set_avx512_kernels_allowed(true);
    EXPECT_TRUE(narrow.weights.isApprox(wide.weights, 1e-12)) << "spread " << spread;
    EXPECT_TRUE(narrow.means.isApprox(wide.means, 1e-12)) << "spread " << spread;
    EXPECT_TRUE(narrow.covariances.isApprox(wide.covariances, 1e-12)) << "spread " << spread;
  }
}

// The M-step that visits only nonzero responsibilities feeds the dense kernel's accumulators the
// same terms in the same order: forced on every block, separated or overlapping, it gives the
// same bits. (Full covariances have no such kernels: nothing to compare.)
TEST_P(GmmTypes, SparseMstepGivesTheDenseBits) {
  const CovarianceType type = GetParam();
  if (type == CovarianceType::Full || !gmm_detail::simd_kernels_active()) GTEST_SKIP();
  for (const double spread : {1.0, 0.05}) {  // exact zeros everywhere / hardly any
    const FixedFit fit = fixed_fit(type, 12, 37, spread, 1501, 5, 141);
    const MatrixF& X = fit.X;
    const GmmOptions& o = fit.options;
    const GaussianMixture& init = fit.init;
    gmm_detail::set_mstep_kernel(gmm_detail::MstepKernel::Dense);
    FitInfo dense_info;
    const GaussianMixture dense = fit_gmm_from(X, init, o, &dense_info);
    gmm_detail::set_mstep_kernel(gmm_detail::MstepKernel::Sparse);
    FitInfo sparse_info;
    const GaussianMixture sparse = fit_gmm_from(X, init, o, &sparse_info);
    gmm_detail::set_mstep_kernel(gmm_detail::MstepKernel::Auto);
    EXPECT_EQ(sparse.weights, dense.weights) << "spread " << spread;
    EXPECT_EQ(sparse.means, dense.means) << "spread " << spread;
    EXPECT_EQ(sparse.covariances, dense.covariances) << "spread " << spread;
    EXPECT_EQ(sparse_info.trace, dense_info.trace) << "spread " << spread;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCovarianceTypes, GmmTypes, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Gmm, SameSeedSameMixtureDifferentSeedDifferentDraws) {
  const GaussianMixture truth = known_mixture(CovarianceType::Diag, 3, 4, 0.5, 81);
  Rng rng(82);
  const MatrixF X = sample_gmm(truth, 800, rng, ComponentDraws::Multinomial);
  const GmmOptions o = options_for(CovarianceType::Diag, 3);
  EXPECT_EQ(fit_gmm(X, o, 5).means, fit_gmm(X, o, 5).means);
  Rng a(9), b(9), c(10);
  for (const ComponentDraws draws : {ComponentDraws::Multinomial, ComponentDraws::Systematic}) {
    Rng a(9), b(9), c(10);
    const MatrixF sa = sample_gmm(truth, 100, a, draws), sb = sample_gmm(truth, 100, b, draws),
                  sc = sample_gmm(truth, 100, c, draws);
    EXPECT_EQ(sa, sb) << to_string(draws);
    EXPECT_NE(sa, sc) << to_string(draws);
  }
}

// How many of the rows of X each component drew: components are 1 000 apart along the first
// dimension with unit variances, so the nearest mean names the component.
std::vector<int64_t> draws_per_component(const GaussianMixture& g, const MatrixF& X) {
  std::vector<int64_t> counts(static_cast<size_t>(g.components()), 0);
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    ++counts[static_cast<size_t>(nearest(g, X.row(i).cast<double>().transpose()))];
  return counts;
}

TEST(Gmm, SystematicDrawsGiveEveryComponentTheFloorOrCeilingOfItsShare) {
  // A class of n one-sample components (what a few samples fitted with K >= n give) must be drawn
  // once from each: independent draws would leave about n/e of its samples out of the head's
  // training set, which cost FedPFT 1.4 points on the 100-class set (docs/methods/fedpft.md).
  const auto mixture = [](const std::vector<double>& weights) {
    GaussianMixture g;
    g.type = CovarianceType::Diag;
    const int K = static_cast<int>(weights.size());
    g.weights = Eigen::Map<const VectorD>(weights.data(), K);
    g.means = MatrixD::Zero(K, 2);
    for (int k = 0; k < K; ++k) g.means(k, 0) = 1000.0 * k;
    g.covariances = MatrixD::Ones(K, 2);
    return g;
  };
  const GaussianMixture equal = mixture(std::vector<double>(37, 1.0 / 37));
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    Rng rng(seed);
    const auto counts = draws_per_component(equal, sample_gmm(equal, 37, rng, ComponentDraws::Systematic));
    EXPECT_EQ(counts, std::vector<int64_t>(37, 1)) << "seed " << seed;
  }
  Rng independent(1);
  const auto multinomial = draws_per_component(equal, sample_gmm(equal, 37, independent, ComponentDraws::Multinomial));
  EXPECT_GT(std::count(multinomial.begin(), multinomial.end(), 0), 5);

  // Uneven weights: every count within one of n w_k, and n w_k on average over the offsets.
  const std::vector<double> w = {0.05, 0.3, 0.125, 0.005, 0.52};
  const GaussianMixture uneven = mixture(w);
  for (const int64_t n : {1, 3, 10, 99, 1000}) {
    std::vector<double> mean(w.size(), 0.0);
    const int runs = 400;
    for (int r = 0; r < runs; ++r) {
      Rng rng(static_cast<uint64_t>(1000 * n + r));
      const auto counts = draws_per_component(uneven, sample_gmm(uneven, n, rng, ComponentDraws::Systematic));
      int64_t total = 0;
      for (size_t k = 0; k < w.size(); ++k) {
        const double share = static_cast<double>(n) * w[k];
        EXPECT_GE(counts[k], static_cast<int64_t>(std::floor(share))) << "n " << n << ", component " << k;
        EXPECT_LE(counts[k], static_cast<int64_t>(std::ceil(share))) << "n " << n << ", component " << k;
        mean[k] += static_cast<double>(counts[k]) / runs;
        total += counts[k];
      }
      ASSERT_EQ(total, n);
    }
    for (size_t k = 0; k < w.size(); ++k) {
      // A count is floor or ceil of n w_k, so its standard deviation is at most 1/2.
      EXPECT_NEAR(mean[k], static_cast<double>(n) * w[k], 4.0 * 0.5 / std::sqrt(static_cast<double>(runs)))
          << "n " << n << ", component " << k;
    }
  }
}

TEST(Gmm, SamplesDoNotRepeatAcrossChunks) {
  // Large draws are split into chunks of rows sampled in parallel; each chunk needs its own
  // stream, or a big synthetic set would hold the same features over and over.
  const GaussianMixture g = known_mixture(CovarianceType::Diag, 1, 2, 0.5, 83);
  Rng rng(84);
  const MatrixF X = sample_gmm(g, 5000, rng, ComponentDraws::Multinomial);
  EXPECT_NE(X.row(0), X.row(2048));
  EXPECT_NE(X.row(100), X.row(2048 + 100));
}

TEST(Gmm, ScoreOfAFarPointIsExact) {
  // Every component's log-density is below -745, where exp underflows to zero: only a
  // log-sum-exp that subtracts the row's maximum keeps the score finite and exact.
  GaussianMixture g;
  g.type = CovarianceType::Diag;
  g.weights = VectorD::Constant(2, 0.5);
  g.means = MatrixD::Zero(2, 2);
  g.means(1, 0) = 1.0;
  g.covariances = MatrixD::Ones(2, 2);
  MatrixF X(1, 2);
  X << 100.0f, 0.0f;
  const double s = score_samples(g, X)[0];
  ASSERT_TRUE(std::isfinite(s));
  const double l0 = std::log(0.5) - std::log(2 * M_PI) - 0.5 * 100.0 * 100.0;
  const double l1 = std::log(0.5) - std::log(2 * M_PI) - 0.5 * 99.0 * 99.0;
  const double m = std::max(l0, l1);
  EXPECT_NEAR(s, m + std::log(std::exp(l0 - m) + std::exp(l1 - m)), 1e-9 * std::abs(s));
}

TEST(Gmm, OneFullEmStepMatchesTheTextbookFormulas) {
  Rng rng(85);
  const int n = 400, d = 3, K = 2;
  MatrixF X(n, d);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) X(i, j) = static_cast<float>(rng.normal() + (i % 2) * 3.0 + 0.3 * j);
  GaussianMixture init;
  init.type = CovarianceType::Full;
  init.weights = VectorD::Constant(K, 0.5);
  init.means = MatrixD::Zero(K, d);
  init.means.row(1).setConstant(1.0);  // far from the second cluster: the means move a lot
  init.covariances = MatrixD::Zero(K * d, d);
  for (int k = 0; k < K; ++k) init.covariances.block(k * d, 0, d, d) = 2.0 * MatrixD::Identity(d, d);
  GmmOptions o = options_for(CovarianceType::Full, K);
  o.max_iter = 1;
  o.tol = 0;
  o.reg_covar = 1e-6;
  const GaussianMixture g = fit_gmm_from(X, init, o);
  ASSERT_EQ(g.components(), K);
  MatrixD R(n, K);  // responsibilities under init
  for (int i = 0; i < n; ++i) {
    VectorD l(K);
    for (int k = 0; k < K; ++k) {
      const MatrixD S = component_covariance(init, k);
      const Eigen::LLT<MatrixD> llt(S);
      const VectorD t = X.row(i).cast<double>().transpose() - init.means.row(k).transpose();
      const double logdet = 2 * MatrixD(llt.matrixL()).diagonal().array().log().sum();
      l[k] = std::log(init.weights[k]) - 0.5 * (d * std::log(2 * M_PI) + logdet + t.dot(llt.solve(t)));
    }
    const VectorD e = (l.array() - l.maxCoeff()).exp();
    R.row(i) = (e / e.sum()).transpose();
  }
  for (int k = 0; k < K; ++k) {
    const double nk = R.col(k).sum();
    VectorD mu = VectorD::Zero(d);
    for (int i = 0; i < n; ++i) mu += R(i, k) * X.row(i).cast<double>().transpose();
    mu /= nk;
    MatrixD C = MatrixD::Zero(d, d);
    for (int i = 0; i < n; ++i) {
      const VectorD t = X.row(i).cast<double>().transpose() - mu;
      C += R(i, k) * t * t.transpose();
    }
    C = C / nk + 1e-6 * MatrixD::Identity(d, d);
    EXPECT_NEAR(g.weights[k], nk / n, 1e-10);
    EXPECT_LT((g.means.row(k).transpose() - mu).norm(), 1e-8);
    EXPECT_LT((component_covariance(g, k) - C).norm(), 1e-8 * C.norm());
  }
}

TEST(Gmm, MoreInitialisationsNeverEndLower) {
  const GaussianMixture truth = known_mixture(CovarianceType::Diag, 5, 3, 0.2, 91);
  Rng rng(92);
  const MatrixF X = sample_gmm(truth, 1000, rng, ComponentDraws::Multinomial);
  GmmOptions o = options_for(CovarianceType::Diag, 5);
  FitInfo one, four;
  fit_gmm(X, o, 93, &one);
  o.n_init = 4;
  fit_gmm(X, o, 93, &four);
  EXPECT_GE(four.lower_bound, one.lower_bound);
  EXPECT_GE(four.best_init, 0);
  EXPECT_LT(four.best_init, 4);
}

TEST(Gmm, KMeansPlusPlusOnlyInitialisationFits) {
  const GaussianMixture truth = known_mixture(CovarianceType::Spherical, 3, 3, 1.0, 95);
  Rng rng(96);
  const MatrixF X = sample_gmm(truth, 900, rng, ComponentDraws::Multinomial);
  GmmOptions o = options_for(CovarianceType::Spherical, 3);
  o.init = GmmOptions::Init::KMeansPlusPlus;
  FitInfo info;
  const GaussianMixture g = fit_gmm(X, o, 97, &info);
  EXPECT_EQ(info.kmeans_iterations, 0);
  EXPECT_EQ(g.components(), 3);
  for (int k = 0; k < 3; ++k)
    EXPECT_LT((g.means.row(nearest(g, truth.means.row(k).transpose())) - truth.means.row(k)).norm(), 0.3);
}

TEST(Gmm, CollapsedComponentIsDroppedAndWeightsRenormalised) {
  const GaussianMixture truth = known_mixture(CovarianceType::Diag, 2, 3, 1.0, 101);
  Rng rng(102);
  const MatrixF X = sample_gmm(truth, 500, rng, ComponentDraws::Multinomial);
  GaussianMixture init = truth;
  init.weights.conservativeResize(3);
  init.weights << 0.4, 0.4, 0.2;
  init.means.conservativeResize(3, 3);
  init.means.row(2).setConstant(1e4);  // nowhere near the data: no responsibility at all
  init.covariances.conservativeResize(3, 3);
  init.covariances.row(2).setConstant(1.0);
  FitInfo info;
  const GaussianMixture g = fit_gmm_from(X, init, options_for(CovarianceType::Diag, 3), &info);
  EXPECT_EQ(g.components(), 2);
  EXPECT_GE(info.dropped_components, 1);
  EXPECT_NEAR(g.weights.sum(), 1.0, 1e-12);
  EXPECT_NO_THROW(g.validate("after drop"));
}

TEST(Gmm, KMeansFindsSeparatedClustersAndCountsDistinctPoints) {
  MatrixF X(60, 2);
  Rng rng(111);
  for (int i = 0; i < 60; ++i) {
    X(i, 0) = static_cast<float>((i % 3) * 20 + 0.3 * rng.normal());
    X(i, 1) = static_cast<float>(0.3 * rng.normal());
  }
  Rng r(112);
  const KMeansResult km = kmeans(X, 3, r, true);
  ASSERT_EQ(km.centers.rows(), 3);
  std::set<long> centres;
  for (int k = 0; k < 3; ++k) centres.insert(std::lround(km.centers(k, 0) / 20.0));
  EXPECT_EQ(centres, (std::set<long>{0, 1, 2}));
  for (int i = 0; i < 60; ++i) EXPECT_EQ(km.labels[i], km.labels[i % 3]);

  MatrixF dup(10, 2);
  for (int i = 0; i < 10; ++i) dup.row(i) << static_cast<float>(i % 4), 1.0f;
  Rng r2(113);
  EXPECT_EQ(kmeans(dup, 8, r2, true).centers.rows(), 4);
}

// Eleven points on a line in two groups, five clusters: k-means++ puts three seeds among the
// seven left-hand points, and after the first Lloyd step the centres on either side of the
// middle one of those have moved closer to its four points than it is, so its cluster is empty
// (found by searching seeded random data sets for this case). The empty cluster must take over the point
// farthest from its centre, as scikit-learn does; dividing its zero sum by its zero count would
// give a NaN centre instead.
TEST(Gmm, KMeansRefillsAClusterThatLloydEmptied) {
  const float values[] = {-4.52303219f, -4.89315176f, -4.94117928f, 5.33072758f, -4.34432793f, -4.16896915f,
                          5.7114048f,   -4.87465239f, -4.90108681f, 5.26075745f, 5.80104494f};
  MatrixF X(11, 1);
  for (int i = 0; i < 11; ++i) X(i, 0) = values[i];
  Rng rng(1);
  const KMeansResult km = kmeans(X, 5, rng, true);
  ASSERT_EQ(km.centers.rows(), 5);
  std::vector<int> members(5, 0);
  std::vector<double> sums(5, 0.0);
  for (int i = 0; i < 11; ++i) {
    ASSERT_GE(km.labels[i], 0);
    ASSERT_LT(km.labels[i], 5);
    ++members[static_cast<size_t>(km.labels[i])];
    sums[static_cast<size_t>(km.labels[i])] += values[i];
  }
  for (int k = 0; k < 5; ++k) {
    ASSERT_TRUE(std::isfinite(km.centers(k, 0))) << "cluster " << k;
    EXPECT_GT(members[static_cast<size_t>(k)], 0) << "cluster " << k;
    EXPECT_NEAR(km.centers(k, 0), sums[static_cast<size_t>(k)] / members[static_cast<size_t>(k)], 1e-5)
        << "cluster " << k << " is not the mean of its points";
  }
}

TEST(Gmm, KMeansStopsOnceCentresMoveLessThanTol) {
  // Overlapping points: Lloyd keeps relabelling a few of them for many iterations, so only the
  // tolerance on the centres' shift can end the run early.
  MatrixF X(300, 2);
  Rng rng(114);
  for (Eigen::Index i = 0; i < X.rows(); ++i)
    for (Eigen::Index j = 0; j < 2; ++j) X(i, j) = static_cast<float>(rng.normal());
  Rng exact_rng(115), loose_rng(115);
  const KMeansResult exact = kmeans(X, 6, exact_rng, true, 300, 0.0);
  const KMeansResult loose = kmeans(X, 6, loose_rng, true, 300, 1e6);
  EXPECT_GT(exact.iterations, 2);
  EXPECT_EQ(loose.iterations, 1);
}

TEST(Gmm, RejectsBadInput) {
  MatrixF X = MatrixF::Ones(10, 2);
  X(0, 0) = 1.0f;
  GmmOptions o;
  EXPECT_THROW(fit_gmm(MatrixF(0, 3), o, 1), InputError);
  MatrixF bad = X;
  bad(3, 1) = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(fit_gmm(bad, o, 1), InputError);
  o.components = 0;
  EXPECT_THROW(fit_gmm(X, o, 1), InputError);
  o = GmmOptions();
  o.tol = -1;
  EXPECT_THROW(fit_gmm(X, o, 1), InputError);
  o = GmmOptions();
  o.max_iter = 0;
  EXPECT_THROW(fit_gmm(X, o, 1), InputError);
  o = GmmOptions();
  o.reg_covar = std::numeric_limits<double>::infinity();
  EXPECT_THROW(fit_gmm(X, o, 1), InputError);
  o = GmmOptions();
  const GaussianMixture g = fit_gmm(X, o, 1);
  GmmOptions full = o;
  full.covariance = CovarianceType::Full;
  EXPECT_THROW(fit_gmm_from(X, g, full), InputError);
  EXPECT_THROW(score_samples(g, MatrixF::Ones(3, 5)), InputError);
  Rng rng(1);
  EXPECT_THROW(sample_gmm(g, -1, rng, ComponentDraws::Multinomial), InputError);
  GaussianMixture broken = g;
  broken.covariances(0, 0) = -1;
  EXPECT_THROW(sample_gmm(broken, 5, rng, ComponentDraws::Multinomial), InputError);
  GaussianMixture unnormalised = known_mixture(CovarianceType::Diag, 2, 2, 1.0, 7);
  unnormalised.weights << 0.75, 0.75;
  EXPECT_THROW(unnormalised.validate("weights"), InputError);
}

TEST(Gmm, WorkerPoolRunsEveryChunkOnceRethrowsAndNests) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(3);
  std::vector<std::atomic<int>> hits(64);
  for_each_chunk(hits.size(), true, [&](size_t c) { ++hits[c]; });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  // A body that calls in again runs its inner chunks on its own thread instead of deadlocking.
  std::atomic<int> inner{0};
  for_each_chunk(4, true, [&](size_t) {
    for_each_chunk(5, true, [&](size_t) { ++inner; });
  });
  EXPECT_EQ(inner.load(), 20);
  EXPECT_THROW(for_each_chunk(16, true,
                                          [](size_t c) {
                                            if (c == 3) throw std::runtime_error("chunk 3");
                                          }),
               std::runtime_error);
  std::atomic<int> after{0};  // still usable after an exception
  for_each_chunk(16, true, [&](size_t) { ++after; });
  EXPECT_EQ(after.load(), 16);
  omp_set_num_threads(saved);
}

TEST(Gmm, RobustCholeskyRegularisesIndefiniteMatrices) {
  MatrixD pd(2, 2);
  pd << 4, 1, 1, 3;
  MatrixD L;
  EXPECT_EQ(robust_cholesky(pd, L), 0);
  EXPECT_TRUE((L * L.transpose()).isApprox(pd, 1e-14));

  MatrixD singular = MatrixD::Ones(3, 3);  // rank one
  EXPECT_EQ(robust_cholesky(singular, L), 1);
  EXPECT_TRUE(L.allFinite());
  EXPECT_TRUE((L.diagonal().array() > 0).all());
  EXPECT_LT((L * L.transpose() - singular).norm(), 1e-6);

  MatrixD indefinite(2, 2);
  indefinite << 1, 2, 2, 1;
  EXPECT_EQ(robust_cholesky(indefinite, L), 1);
  EXPECT_TRUE(L.allFinite());
  EXPECT_TRUE((L.diagonal().array() > 0).all());
  // Regularised by a growing diagonal jitter first, which keeps the correlation...
  EXPECT_NEAR((L * L.transpose())(0, 1), 2.0, 1e-9);

  // ...and only when no jitter helps (here NaN correlations) by the diagonal alone, whose
  // positive entries are kept as they are.
  MatrixD broken(2, 2);
  broken << 4, std::nan(""), std::nan(""), 9;
  EXPECT_EQ(robust_cholesky(broken, L), 1);
  EXPECT_NEAR(L(0, 0), 2.0, 1e-12);
  EXPECT_NEAR(L(1, 1), 3.0, 1e-12);
  EXPECT_EQ(L(1, 0), 0.0);
}

TEST(Gmm, FullCovarianceOnDegenerateSubspaceStaysFinite) {
  // Points on a line in 4 dimensions: every empirical covariance is singular.
  MatrixF X(200, 4);
  Rng rng(121);
  for (int i = 0; i < 200; ++i) {
    const double t = rng.normal() + (i % 2) * 10;
    X.row(i) << static_cast<float>(t), static_cast<float>(2 * t), static_cast<float>(-t), 1.0f;
  }
  FitInfo info;
  const GaussianMixture g = fit_gmm(X, options_for(CovarianceType::Full, 2), 122, &info);
  EXPECT_NO_THROW(g.validate("line"));
  EXPECT_TRUE(score_samples(g, X).allFinite());
  Rng s(123);
  EXPECT_TRUE(sample_gmm(g, 100, s, ComponentDraws::Multinomial).allFinite());
}

}  // namespace
}  // namespace fednode
