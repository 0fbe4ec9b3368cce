// FedPFT's head in closed form (methods/fedpft/closed_form_head.h): the mixtures' moments are the
// statistics of what they stand for, the head is FedCGS's LDA of them, and its shrinkage is chosen
// on the node's own rows, which are then left out of what the candidates are solved from.
#include "methods/fedpft/closed_form_head.h"
#include "methods/fedpft/fedpft.h"
#include "methods/fedcgs/lda.h"
#include "methods/fedcgs/stats.h"

#include "../common/node_context.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace fednode {
namespace {

constexpr int kDim = 5;
constexpr int kClasses = 3;

// Rows of class c around 3c on every axis, with a spread that differs by axis.
Features rows_of(int per_class, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = kClasses;
  f.X.resize(per_class * kClasses, kDim);
  for (int c = 0, r = 0; c < kClasses; ++c)
    for (int i = 0; i < per_class; ++i, ++r) {
      for (int j = 0; j < kDim; ++j) f.X(r, j) = static_cast<float>(3.0 * c + (1.0 + 0.3 * j) * rng.normal());
      f.y.push_back(c);
    }
  return f;
}

// A mixture of K random components of the given type.
ClassMixture random_mixture(Rng& rng, int label, int64_t count, int K, CovarianceType type) {
  ClassMixture cm;
  cm.label = label;
  cm.count = count;
  GaussianMixture& g = cm.mixture;
  g.type = type;
  g.weights = VectorD(K);
  for (int k = 0; k < K; ++k) g.weights(k) = 0.5 + rng.uniform();
  g.weights /= g.weights.sum();
  g.means = MatrixD(K, kDim);
  for (int k = 0; k < K; ++k)
    for (int j = 0; j < kDim; ++j) g.means(k, j) = 2.0 * rng.normal() + label;
  if (type == CovarianceType::Diag) g.covariances = (MatrixD::Random(K, kDim).array().abs() + 0.1).matrix();
  if (type == CovarianceType::Spherical) g.covariances = (MatrixD::Random(K, 1).array().abs() + 0.1).matrix();
  if (type == CovarianceType::Full) {
    g.covariances = MatrixD(K * kDim, kDim);
    for (int k = 0; k < K; ++k) {
      const MatrixD L = MatrixD::Random(kDim, kDim);
      g.covariances.middleRows(k * kDim, kDim) = L * L.transpose() + MatrixD::Identity(kDim, kDim);
    }
  }
  return cm;
}

TEST(FedPftClosedForm, TheMomentsAreTheStatisticsOfWhatTheMixturesStandFor) {
  Rng rng(7);
  std::vector<ClassMixture> mixtures;  // 900 components: the outer products take two blocks and a rest
  for (int m = 0; m < 300; ++m)
    mixtures.push_back(random_mixture(rng, m % kClasses, 1 + m % 7, 1 + m % 5,
                                      m % 3 == 0 ? CovarianceType::Full
                                                 : (m % 3 == 1 ? CovarianceType::Diag : CovarianceType::Spherical)));
  const Features local = rows_of(4, 3);
  MatrixD A = MatrixD::Zero(kClasses, kDim), B = MatrixD::Zero(kDim, kDim);
  std::vector<int64_t> N(kClasses, 0);
  std::vector<const ClassMixture*> pointers;
  for (const ClassMixture& cm : mixtures) {
    pointers.push_back(&cm);
    const GaussianMixture& g = cm.mixture;
    N[cm.label] += cm.count;
    for (int k = 0; k < g.components(); ++k) {
      const double nw = static_cast<double>(cm.count) * g.weights(k);
      A.row(cm.label) += nw * g.means.row(k);
      MatrixD S(kDim, kDim);
      if (g.type == CovarianceType::Full) S = g.covariances.middleRows(k * kDim, kDim);
      else if (g.type == CovarianceType::Diag) S = g.covariances.row(k).transpose().asDiagonal();
      else S = g.covariances(k, 0) * MatrixD::Identity(kDim, kDim);
      B += nw * (S + g.means.row(k).transpose() * g.means.row(k));
    }
  }
  const StatsKnowledge of_local = compute_stats(local);
  A += of_local.A;
  B += of_local.B;
  for (int c = 0; c < kClasses; ++c) N[c] += of_local.N[c];

  const StatsKnowledge s = mixture_statistics(pointers, &local, kClasses, kDim);
  EXPECT_EQ(s.N, N);
  EXPECT_LT((s.A - A).cwiseAbs().maxCoeff(), 1e-12 * A.cwiseAbs().maxCoeff());
  EXPECT_LT((s.B - B).cwiseAbs().maxCoeff(), 1e-12 * B.cwiseAbs().maxCoeff());
  EXPECT_EQ(s.B, s.B.transpose());
}

// With the receiver's correlation R, a diagonal or spherical component of deviations s stands for
// the covariance diag(s) R diag(s): its variances unchanged, the dimensions correlated.
TEST(FedPftClosedForm, TheReceiversCorrelationShapesTheComponentsCovariances) {
  Rng rng(5);
  std::vector<ClassMixture> mixtures;
  for (int m = 0; m < 40; ++m)
    mixtures.push_back(random_mixture(rng, m % kClasses, 2 + m % 5, 1 + m % 3,
                                      m % 2 ? CovarianceType::Diag : CovarianceType::Spherical));
  std::vector<const ClassMixture*> pointers;
  for (const ClassMixture& cm : mixtures) pointers.push_back(&cm);
  MatrixD R = MatrixD::Identity(kDim, kDim);
  for (int i = 0; i < kDim; ++i)
    for (int j = 0; j < i; ++j) R(i, j) = R(j, i) = 0.3 / (1 + i - j);
  MatrixD B = MatrixD::Zero(kDim, kDim);
  for (const ClassMixture& cm : mixtures) {
    const GaussianMixture& g = cm.mixture;
    for (int k = 0; k < g.components(); ++k) {
      const double nw = static_cast<double>(cm.count) * g.weights(k);
      VectorD sd(kDim);
      for (int j = 0; j < kDim; ++j)
        sd(j) = std::sqrt(g.type == CovarianceType::Diag ? g.covariances(k, j) : g.covariances(k, 0));
      B += nw * (sd.asDiagonal() * R * sd.asDiagonal() + g.means.row(k).transpose() * g.means.row(k));
    }
  }
  const StatsKnowledge with = mixture_statistics(pointers, nullptr, kClasses, kDim, &R);
  EXPECT_LT((with.B - B).cwiseAbs().maxCoeff(), 1e-12 * B.cwiseAbs().maxCoeff());
  const StatsKnowledge without = mixture_statistics(pointers, nullptr, kClasses, kDim);
  EXPECT_LT((with.B.diagonal() - without.B.diagonal()).cwiseAbs().maxCoeff(), 1e-12 * B.cwiseAbs().maxCoeff());
  EXPECT_EQ(with.A, without.A);
}

// Mixtures whose every component is one row with no spread describe exactly those rows: the head
// is then FedCGS's on the rows' own statistics.
TEST(FedPftClosedForm, IsTheLdaOfTheRowsWhenEveryComponentIsOneRow) {
  const Features rows = rows_of(40, 11);
  std::vector<ClassMixture> mixtures(kClasses);
  for (int c = 0; c < kClasses; ++c) {
    std::vector<int64_t> mine;
    for (int64_t i = 0; i < rows.size(); ++i)
      if (rows.y[static_cast<size_t>(i)] == c) mine.push_back(i);
    ClassMixture& cm = mixtures[c];
    cm.label = c;
    cm.count = static_cast<int64_t>(mine.size());
    cm.mixture.weights = VectorD::Constant(cm.count, 1.0 / static_cast<double>(cm.count));
    cm.mixture.means = rows.subset(mine).X.cast<double>();
    cm.mixture.covariances = MatrixD::Zero(cm.count, kDim);
  }
  const Contributors from{1};
  HeadSources sources;
  for (const ClassMixture& cm : mixtures) sources.mixtures.push_back({&cm, &from});
  FedPftOptions options;
  options.head_fit = FedPftOptions::HeadFit::Lda;
  options.lda_shrinkage = 0.3;
  const auto head = fit_closed_form_head(sources, options, test::node_context(0, kClasses, kDim, 1));
  FedCgsOptions lda;
  lda.shrinkage = 0.3;
  const auto expected = fit_lda_head(compute_stats(rows), lda);
  EXPECT_EQ(head->kind(), "lda");
  EXPECT_LT((head->weights() - expected->weights()).cwiseAbs().maxCoeff(), 1e-4 * expected->weights().cwiseAbs().maxCoeff());
  EXPECT_LT((head->bias() - expected->bias()).cwiseAbs().maxCoeff(), 1e-4 * expected->bias().cwiseAbs().maxCoeff());
}

// Two nodes' knowledge arrives at a third with rows of its own: every candidate is scored on those
// rows, solved without them, the least shrinkage within a standard error of the best is kept, and
// the head is solved from everything.
TEST(FedPftClosedForm, ChoosesTheShrinkageOnTheNodesOwnRows) {
  FedPftOptions options;
  options.gmm.components = 3;
  options.head_fit = FedPftOptions::HeadFit::Lda;
  const auto method = make_fedpft(options);
  std::vector<Knowledge> pieces;
  for (NodeId n : {1, 2}) pieces.push_back(method->summarize(rows_of(60, n), test::node_context(n, kClasses, kDim, 5)));
  const KnowledgeList received(pieces);
  const Features own = rows_of(25, 9);
  const NodeContext ctx = test::node_context(0, kClasses, kDim, 5);
  const HeadSources sources = fedpft_head_sources(received, &own, ctx);
  ASSERT_EQ(sources.local, &own);

  ShrinkageChoice choice;
  const auto head = fit_closed_form_head(sources, options, ctx, &choice);
  EXPECT_FALSE(choice.given);
  EXPECT_EQ(choice.validation_samples, own.size());
  ASSERT_EQ(choice.tried.size(), 7u);
  double best = 0;
  for (const auto& t : choice.tried) best = std::max(best, t.accuracy);
  const double standard_error = std::sqrt(best * (1 - best) / static_cast<double>(own.size()));
  double least_within = -1;
  for (const auto& t : choice.tried)
    if (least_within < 0 && t.accuracy >= best - standard_error) least_within = t.shrinkage;
  EXPECT_EQ(choice.shrinkage, least_within);
  EXPECT_NE(choice.summary().find("chosen on this node's 75 local rows"), std::string::npos) << choice.summary();

  // What was chosen, solved from the mixtures and the local rows together.
  std::vector<const ClassMixture*> all;
  for (const auto& m : sources.mixtures) all.push_back(m.mixture);
  const FedCgsOptions lda;
  const auto lapack = LdaScatter::Factorisation::Lapack;
  const auto expected = LdaScatter(mixture_statistics(all, &own, kClasses, kDim), lda, lapack).head(choice.shrinkage);
  EXPECT_EQ(head->weights(), expected->weights());
  EXPECT_EQ(head->bias(), expected->bias());

  // The candidates' scores are those of heads solved without the local rows.
  const LdaScatter rest(mixture_statistics(all, nullptr, kClasses, kDim), lda, lapack);
  for (const auto& tried : choice.tried)
    EXPECT_EQ(tried.accuracy, rest.head(tried.shrinkage)->accuracy(own)) << tried.shrinkage;

  // Given, it is used as it is; the same inputs give the same head.
  options.lda_shrinkage = 0.5;
  ShrinkageChoice given;
  const auto fixed = fit_closed_form_head(sources, options, ctx, &given);
  EXPECT_TRUE(given.given);
  EXPECT_TRUE(given.tried.empty());
  EXPECT_EQ(given.shrinkage, 0.5);
  EXPECT_EQ(fit_closed_form_head(sources, options, ctx)->weights(), fixed->weights());
}

// The digits' seed 1: 167 rows put 0.9 one row ahead of none, which is within a standard error;
// a hundred thousand rows would not be.
TEST(FedPftClosedForm, TakesTheLeastShrinkageWithinAStandardErrorOfTheBest) {
  const std::vector<ShrinkageChoice::Tried> tried{{0.0, 0.9820}, {0.1, 0.9820}, {0.3, 0.9760}, {0.5, 0.9820},
                                                  {0.7, 0.9760}, {0.9, 0.9880}, {1.0, 0.9760}};
  EXPECT_EQ(least_shrinkage_near_best(tried, 167), 0.0);
  EXPECT_EQ(least_shrinkage_near_best(tried, 100000), 0.9);
  EXPECT_EQ(least_shrinkage_near_best({{0.0, 0.5}, {0.5, 1.0}}, 10), 0.5);  // a perfect score has no error
}

// The node alone holds class 2: solved without its rows, no candidate can name that class, and
// every one scores 0 on them; the head, solved from everything, names it.
TEST(FedPftClosedForm, TheCandidatesNeverSeeTheRowsTheyAreScoredOn) {
  FedPftOptions options;
  options.gmm.components = 2;
  options.head_fit = FedPftOptions::HeadFit::Lda;
  const auto method = make_fedpft(options);
  const auto of_classes = [](const Features& f, std::vector<int> classes) {
    std::vector<int64_t> rows;
    for (int64_t i = 0; i < f.size(); ++i)
      if (std::count(classes.begin(), classes.end(), f.y[static_cast<size_t>(i)])) rows.push_back(i);
    return f.subset(rows);
  };
  const std::vector<Knowledge> pieces{
      method->summarize(of_classes(rows_of(60, 1), {0, 1}), test::node_context(1, kClasses, kDim, 5))};
  const KnowledgeList received(pieces);
  const Features own = of_classes(rows_of(30, 2), {2});
  const NodeContext ctx = test::node_context(0, kClasses, kDim, 5);
  ShrinkageChoice choice;
  const auto head = fit_closed_form_head(fedpft_head_sources(received, &own, ctx), options, ctx, &choice);
  ASSERT_EQ(choice.tried.size(), 7u);
  for (const auto& t : choice.tried) EXPECT_EQ(t.accuracy, 0.0) << t.shrinkage;
  EXPECT_EQ(choice.shrinkage, 0.0);
  EXPECT_EQ(head->accuracy(own), 1.0);
}

TEST(FedPftClosedForm, TheMethodsHeadIsTheClosedFormAndNeedsNoDrawnSamples) {
  FedPftOptions options;
  options.gmm.components = 2;
  options.head_fit = FedPftOptions::HeadFit::Lda;
  const auto method = make_fedpft(options);
  const NodeContext ctx = test::node_context(0, kClasses, kDim, 5);
  EXPECT_EQ(method->start_head_sum(ctx), nullptr);  // a star hub keeps the mixtures, draws nothing
  const std::vector<Knowledge> pieces{method->summarize(rows_of(50, 1), test::node_context(1, kClasses, kDim, 5))};
  const KnowledgeList received(pieces);
  const Features own = rows_of(30, 2);
  const auto head = method->fit_head(received, &own, ctx);
  EXPECT_EQ(head->kind(), "lda");
  EXPECT_GT(head->accuracy(rows_of(100, 77)), 0.9);

  // Nothing received (a chain's first node): solved from its own rows.
  const auto alone = method->fit_head(KnowledgeList(), &own, ctx);
  EXPECT_EQ(alone->kind(), "lda");
  EXPECT_GT(alone->accuracy(rows_of(100, 77)), 0.9);
}

// A node that received nothing has no "everything else": each candidate is scored on every fifth
// row, solved from the other four fifths, and the scores are those folds' sums. Fewer rows than
// dimensions leave the unshrunk covariance singular; the folds see it.
TEST(FedPftClosedForm, AloneItChoosesTheShrinkageByFoldsOverItsOwnRows) {
  constexpr int dim = 40, per_class = 12;
  const auto rows = [&](uint64_t seed) {
    Rng rng(seed);
    Features f;
    f.num_classes = kClasses;
    f.X.resize(per_class * kClasses, dim);
    for (int64_t r = 0; r < f.X.rows(); ++r) {
      const int c = static_cast<int>(r % kClasses);  // classes interleaved, as a shuffled partition leaves them
      for (int j = 0; j < dim; ++j) f.X(r, j) = static_cast<float>((j < 3 ? 1.2 * c : 0.0) + rng.normal());
      f.y.push_back(c);
    }
    return f;
  };
  const Features own = rows(21);
  const NodeContext ctx = test::node_context(0, kClasses, dim, 5);
  HeadSources sources;
  sources.local = &own;
  FedPftOptions options;
  ShrinkageChoice choice;
  const auto head = fit_closed_form_head(sources, options, ctx, &choice);
  EXPECT_EQ(choice.folds, 5);
  EXPECT_EQ(choice.validation_samples, own.size());
  ASSERT_EQ(choice.tried.size(), 7u);
  EXPECT_NE(choice.summary().find("36 local rows in 5 folds"), std::string::npos) << choice.summary();

  const StatsKnowledge all = compute_stats(own);
  std::vector<int64_t> correct(choice.tried.size(), 0);
  for (int f = 0; f < 5; ++f) {
    std::vector<int64_t> in_fold;
    for (int64_t i = f; i < own.size(); i += 5) in_fold.push_back(i);
    const Features held = own.subset(in_fold);
    StatsKnowledge rest = compute_stats(held);
    rest.A = all.A - rest.A;
    rest.B = all.B - rest.B;
    for (size_t c = 0; c < rest.N.size(); ++c) rest.N[c] = all.N[c] - rest.N[c];
    const LdaScatter candidates(rest, FedCgsOptions{}, LdaScatter::Factorisation::Lapack);
    for (size_t i = 0; i < choice.tried.size(); ++i)
      correct[i] += std::lround(candidates.head(choice.tried[i].shrinkage)->accuracy(held) *
                                static_cast<double>(held.size()));
  }
  for (size_t i = 0; i < choice.tried.size(); ++i)
    EXPECT_EQ(std::lround(choice.tried[i].accuracy * static_cast<double>(own.size())), correct[i])
        << choice.tried[i].shrinkage;
  EXPECT_GT(choice.shrinkage, 0.0);

  options.lda_shrinkage = 0.0;
  const Features fresh = rows(99);
  EXPECT_GT(head->accuracy(fresh), fit_closed_form_head(sources, options, ctx)->accuracy(fresh) + 0.1);
}

// Auto, the default, is the closed form wherever it reads the mixtures and nothing asks for draws.
TEST(FedPftClosedForm, AutoIsTheClosedFormUnlessTheMixturesOrTheOptionsNeedDraws) {
  using Fit = FedPftOptions::HeadFit;
  const auto used = [](auto change) {
    FedPftOptions o;
    change(o);
    return head_fit_used(o);
  };
  EXPECT_EQ(used([](FedPftOptions&) {}), Fit::Lda);
  EXPECT_EQ(used([](FedPftOptions& o) { o.gmm.covariance = CovarianceType::Spherical; }), Fit::Lda);
  EXPECT_EQ(used([](FedPftOptions& o) { o.gmm.covariance = CovarianceType::Full; }), Fit::Sgd);
  EXPECT_EQ(used([](FedPftOptions& o) { o.dp = true; }), Fit::Sgd);
  EXPECT_EQ(used([](FedPftOptions& o) { o.sample_correlation = FedPftOptions::SampleCorrelation::Local; }), Fit::Sgd);
  EXPECT_EQ(used([](FedPftOptions& o) { o.synthetic_multiplier = 2; }), Fit::Sgd);
  EXPECT_EQ(used([](FedPftOptions& o) { o.head_fit = Fit::Sgd; }), Fit::Sgd);
  EXPECT_EQ(used([](FedPftOptions& o) { o.head_fit = Fit::Lda; }), Fit::Lda);

  const NodeContext ctx = test::node_context(0, kClasses, kDim, 5);
  EXPECT_EQ(make_fedpft(FedPftOptions{})->start_head_sum(ctx), nullptr);
  FedPftOptions full;
  full.gmm.covariance = CovarianceType::Full;
  EXPECT_NE(make_fedpft(full)->start_head_sum(ctx), nullptr);  // drawn from as they arrive, as ever
}

}  // namespace
}  // namespace fednode
