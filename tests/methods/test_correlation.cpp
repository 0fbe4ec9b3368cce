// Synthetic features drawn with the receiver's within-class correlation
// (FedPftOptions::sample_correlation): the estimate, the draws, and the head's training set.
#include "methods/fedpft/correlation.h"
#include "methods/fedpft/fedpft_core.h"
#include "methods/gmm/gmm.h"

#include "../common/expect_error.h"
#include "../common/node_context.h"

#include <Eigen/Cholesky>
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

namespace fednode {
namespace {

MatrixD sample_correlation_of(const MatrixD& X) {
  const MatrixD centred = X.rowwise() - X.colwise().mean();
  const MatrixD cov = centred.transpose() * centred / static_cast<double>(X.rows() - 1);
  const VectorD inv_sd = cov.diagonal().cwiseSqrt().cwiseInverse();
  return inv_sd.asDiagonal() * cov * inv_sd.asDiagonal();
}

// A correlation matrix with strong positive and negative entries (positive definite).
MatrixD known_correlation() {
  MatrixD R(4, 4);
  R << 1.0, 0.8, -0.4, 0.0,  //
      0.8, 1.0, -0.5, 0.1,   //
      -0.4, -0.5, 1.0, 0.3,  //
      0.0, 0.1, 0.3, 1.0;
  return R;
}

// Classes centred far apart, with per-dimension scales 1, 3, 0.5, 2 and correlation R inside
// each class; class 3 holds a single wild row, and dimension 4 never varies within a class.
Features correlated_features(int per_class, uint64_t seed) {
  const MatrixD L = known_correlation().llt().matrixL();
  const double scale[4] = {1.0, 3.0, 0.5, 2.0};
  Rng rng(seed);
  Features f;
  f.num_classes = 4;
  f.X.resize(3 * per_class + 1, 5);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per_class; ++i) {
      VectorD z(4);
      for (int j = 0; j < 4; ++j) z[j] = rng.normal();
      const VectorD x = L * z;
      const int r = c * per_class + i;
      for (int j = 0; j < 4; ++j) f.X(r, j) = static_cast<float>(10.0 * c + scale[j] * x[j]);
      f.X(r, 4) = static_cast<float>(c);
      f.y.push_back(c);
    }
  f.X.row(3 * per_class) << 1e4f, -1e4f, 1e4f, -1e4f, 7.0f;
  f.y.push_back(3);
  return f;
}

TEST(SampleCorrelation, EstimateRecoversTheSharedWithinClassCorrelation) {
  const Features f = correlated_features(5000, 11);
  const WithinClassCorrelation c = within_class_correlation(f);
  EXPECT_EQ(c.residuals, 15000);  // the one-row class is left out
  EXPECT_LT(c.shrinkage, 0.01);
  ASSERT_EQ(c.factor.rows(), 5);
  const MatrixD R = c.factor * c.factor.transpose();
  const MatrixD truth = known_correlation();
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 4; ++b) EXPECT_NEAR(R(a, b), truth(a, b), 0.03) << a << "," << b;
  // The dimension that never varies within a class correlates with nothing.
  for (int a = 0; a < 4; ++a) EXPECT_EQ(R(4, a), 0.0);
  EXPECT_NEAR(R(4, 4), 1.0, 1e-12);
  for (int a = 0; a < 5; ++a) EXPECT_NEAR(R(a, a), 1.0, 1e-12) << a;
}

// Ledoit and Wolf's weight as their paper writes it: the mean squared distance of each residual's
// outer product from S, over the squared distance of S from mu I (capped at 1).
double textbook_ledoit_wolf(const MatrixD& Z) {
  const double n = static_cast<double>(Z.rows());
  const auto p = Z.cols();
  const MatrixD S = Z.transpose() * Z / n;
  const double mu = S.trace() / static_cast<double>(p);
  const double d2 = (S - mu * MatrixD::Identity(p, p)).squaredNorm();
  double b2 = 0;
  for (Eigen::Index k = 0; k < Z.rows(); ++k)
    b2 += (Z.row(k).transpose() * Z.row(k) - S).squaredNorm();
  b2 /= n * n;
  return std::min(b2, d2) / d2;
}

// Two classes in 40 dimensions that share one factor (within-class correlation 0.5).
Features one_factor_features(int rows, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = 2;
  f.X.resize(rows, 40);
  for (int i = 0; i < rows; ++i) {
    const double shared = rng.normal();
    for (int j = 0; j < 40; ++j) f.X(i, j) = static_cast<float>((i % 2) * 5.0 + shared + rng.normal());
    f.y.push_back(i % 2);
  }
  return f;
}

TEST(SampleCorrelation, ShrinkageIsLedoitWolfAndGrowsWhenResidualsAreFewAgainstTheDimension) {
  // 30 rows in 40 dimensions: S is singular, and the identity gets a real weight.
  const Features f = one_factor_features(30, 5);
  const WithinClassCorrelation c = within_class_correlation(f);
  // The same residuals, standardised, by hand.
  MatrixD Z = f.X.cast<double>();
  for (int cls = 0; cls < 2; ++cls) {
    VectorD mean = VectorD::Zero(40);
    for (int i = cls; i < 30; i += 2) mean += Z.row(i).transpose() / 15.0;
    for (int i = cls; i < 30; i += 2) Z.row(i) -= mean.transpose();
  }
  const VectorD sd = (Z.colwise().squaredNorm() / 30.0).cwiseSqrt().transpose();
  Z = Z * sd.cwiseInverse().asDiagonal();
  EXPECT_NEAR(c.shrinkage, textbook_ledoit_wolf(Z), 1e-9);
  EXPECT_GT(c.shrinkage, 0.05);
  // And the factor is that of the shrunk matrix: off the diagonal, (1 - weight) times S.
  const MatrixD S = Z.transpose() * Z / 30.0;
  const MatrixD shrunk = c.factor * c.factor.transpose();
  for (int a = 0; a < 40; ++a)
    for (int b = 0; b < a; ++b) ASSERT_NEAR(shrunk(a, b), (1 - c.shrinkage) * S(a, b), 1e-9) << a << "," << b;
  // A hundred times the rows pin the correlation down: far less shrinkage, R(0, 1) near 0.5.
  const WithinClassCorrelation many = within_class_correlation(one_factor_features(3000, 6));
  EXPECT_LT(many.shrinkage, c.shrinkage / 10);
  EXPECT_NEAR((many.factor * many.factor.transpose())(0, 1), 0.5, 0.05);
  // Still a correlation matrix: unit diagonal, positive definite (the factor exists).
  const MatrixD R = c.factor * c.factor.transpose();
  for (int j = 0; j < 40; ++j) EXPECT_NEAR(R(j, j), 1.0, 1e-12);
  EXPECT_TRUE(c.factor.allFinite());
}

TEST(SampleCorrelation, NothingToEstimateWithoutAClassOfTwoRows) {
  Features f;
  f.num_classes = 3;
  f.X = MatrixF::Random(3, 4);
  f.y = {0, 1, 2};
  const WithinClassCorrelation c = within_class_correlation(f);
  EXPECT_EQ(c.factor.size(), 0);
  EXPECT_EQ(c.residuals, 0);
}

TEST(SampleCorrelation, ASingularEstimateIsRegularisedAndKeepsAUnitDiagonal) {
  // One class of two rows: the residuals are r and -r, so S = r r^T has rank 1, Ledoit-Wolf sees
  // no spread between the residuals (weight 0), and the Cholesky factor needs a jitter.
  Features f;
  f.num_classes = 2;
  f.X.resize(3, 3);
  f.X << 1, 2, 3,  //
      3, 1, 4,     //
      9, 9, 9;
  f.y = {0, 0, 1};
  const WithinClassCorrelation c = within_class_correlation(f);
  EXPECT_EQ(c.residuals, 2);
  EXPECT_EQ(c.shrinkage, 0.0);
  ASSERT_TRUE(c.factor.allFinite());
  const MatrixD R = c.factor * c.factor.transpose();
  for (int j = 0; j < 3; ++j) EXPECT_NEAR(R(j, j), 1.0, 1e-12) << j;
  // r = (-1, 0.5, -0.5) standardised is (-1, 1, -1): perfectly (anti-)correlated dimensions.
  EXPECT_NEAR(R(0, 1), -1.0, 1e-4);
  EXPECT_NEAR(R(0, 2), 1.0, 1e-4);
}

class CorrelatedSampling : public ::testing::TestWithParam<CovarianceType> {};

TEST_P(CorrelatedSampling, KeepsEveryComponentsMeansAndVariancesAndAddsTheCorrelation) {
  GaussianMixture g;
  g.type = GetParam();
  g.weights = VectorD::Constant(2, 0.5);
  g.means.resize(2, 4);
  g.means << 1, 2, 3, 4,  //
      -20, -30, -40, -50;
  if (g.type == CovarianceType::Diag) {
    g.covariances.resize(2, 4);
    g.covariances << 4, 1, 0.25, 9,  //
        1, 16, 1, 0.01;
  } else {
    g.covariances.resize(2, 1);
    g.covariances << 4, 0.25;
  }
  const MatrixD L = known_correlation().llt().matrixL();
  Rng rng(3);
  const MatrixF S = sample_gmm(g, 60000, rng, ComponentDraws::Multinomial, &L);
  // Rows come grouped by component; the two are far apart, so each row's component is plain.
  for (int k = 0; k < 2; ++k) {
    std::vector<Eigen::Index> rows;
    for (Eigen::Index i = 0; i < S.rows(); ++i)
      if ((S(i, 0) > -8) == (k == 0)) rows.push_back(i);
    MatrixD part(static_cast<Eigen::Index>(rows.size()), 4);
    for (size_t i = 0; i < rows.size(); ++i) part.row(static_cast<Eigen::Index>(i)) = S.row(rows[i]).cast<double>();
    const double n = static_cast<double>(part.rows());
    ASSERT_GT(n, 25000);
    for (int j = 0; j < 4; ++j) {
      const double var = g.type == CovarianceType::Diag ? g.covariances(k, j) : g.covariances(k, 0);
      EXPECT_NEAR(part.col(j).mean(), g.means(k, j), 4.5 * std::sqrt(var / n)) << k << "," << j;
      const double sample_var = (part.col(j).array() - part.col(j).mean()).square().sum() / (n - 1);
      EXPECT_NEAR(sample_var / var, 1.0, 0.03) << k << "," << j;
    }
    const MatrixD R = sample_correlation_of(part);
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) EXPECT_NEAR(R(a, b), known_correlation()(a, b), 0.02) << k << ": " << a << "," << b;
  }
  // The same uniform and normal draws as without the correlation: only their mixing differs.
  Rng again(3);
  const MatrixF plain = sample_gmm(g, 60000, again, ComponentDraws::Multinomial);
  EXPECT_EQ(plain.col(0), S.col(0));  // row 0 of L is (1, 0, 0, 0)
  EXPECT_NE(plain.col(1), S.col(1));
}

TEST_P(CorrelatedSampling, ThreadCountDoesNotChangeTheDraws) {
  GaussianMixture g;
  g.type = GetParam();
  g.weights = VectorD::Constant(3, 1.0 / 3);
  g.means = MatrixD::Random(3, 64);
  g.covariances = g.type == CovarianceType::Diag ? MatrixD::Constant(3, 64, 0.5) : MatrixD::Constant(3, 1, 0.5);
  MatrixD R = MatrixD::Constant(64, 64, 0.3);
  R.diagonal().setOnes();
  const MatrixD L = R.llt().matrixL();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Rng r1(9);
  const MatrixF one = sample_gmm(g, 9000, r1, ComponentDraws::Multinomial, &L);
  omp_set_num_threads(3);
  Rng r3(9);
  const MatrixF three = sample_gmm(g, 9000, r3, ComponentDraws::Multinomial, &L);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, three);
}

INSTANTIATE_TEST_SUITE_P(Types, CorrelatedSampling,
                         ::testing::Values(CovarianceType::Diag, CovarianceType::Spherical),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(SampleCorrelation, SamplingRefusesAFullMixtureOrAFactorOfTheWrongSize) {
  GaussianMixture full;
  full.type = CovarianceType::Full;
  full.weights = VectorD::Ones(1);
  full.means = MatrixD::Zero(1, 4);
  full.covariances = MatrixD::Identity(4, 4);
  const MatrixD L = MatrixD::Identity(4, 4);
  Rng rng(1);
  test::expect_input_error([&] { sample_gmm(full, 10, rng, ComponentDraws::Multinomial, &L); }, {"full covariance carries its own"});
  GaussianMixture diag;
  diag.type = CovarianceType::Diag;
  diag.weights = VectorD::Ones(1);
  diag.means = MatrixD::Zero(1, 3);
  diag.covariances = MatrixD::Ones(1, 3);
  test::expect_input_error([&] { sample_gmm(diag, 10, rng, ComponentDraws::Multinomial, &L); }, {"4x4", "dimension is 3"});
}

NodeContext context(NodeId node) { return test::node_context(node, 4, 5, 99); }

TEST(SampleCorrelation, TheHeadsSyntheticFeaturesCarryTheLocalCorrelationOnlyWhenAsked) {
  FedPftOptions o;
  o.gmm.components = 1;
  o.gmm.covariance = CovarianceType::Diag;
  o.half_precision = false;
  const Knowledge sent = fedpft_summarize(correlated_features(4000, 21), o, context(1));
  const Features local = correlated_features(3000, 22);

  const Features plain = fedpft_training_set({sent}, &local, o, context(2));
  o.sample_correlation = FedPftOptions::SampleCorrelation::Local;
  const Features correlated = fedpft_training_set({sent}, &local, o, context(2));
  ASSERT_EQ(plain.size(), correlated.size());
  EXPECT_EQ(plain.y, correlated.y);
  EXPECT_EQ(plain.X.bottomRows(local.size()), correlated.X.bottomRows(local.size()));

  // Class 0's synthetic rows (the first 4000): diag K=1 sent no correlation; drawn plain they
  // have none, drawn with the receiver's they have its.
  const MatrixD p = sample_correlation_of(plain.X.topRows(4000).leftCols(4).cast<double>());
  const MatrixD c = sample_correlation_of(correlated.X.topRows(4000).leftCols(4).cast<double>());
  EXPECT_NEAR(p(0, 1), 0.0, 0.05);
  EXPECT_NEAR(c(0, 1), 0.8, 0.05);
  EXPECT_NEAR(c(1, 2), -0.5, 0.05);

  // Nothing to estimate from: drawn as the paper draws them.
  FedPftOptions none = o;
  none.sample_correlation = FedPftOptions::SampleCorrelation::None;
  EXPECT_EQ(fedpft_training_set({sent}, nullptr, o, context(2)).X, fedpft_training_set({sent}, nullptr, none, context(2)).X);
}

}  // namespace
}  // namespace fednode
