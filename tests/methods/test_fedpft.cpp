// FedPFT without head training (fit_head needs the LibTorch trainer; its data is tested through
// fedpft_training_set, which fit_head uses).
#include "methods/fedpft/dp.h"
#include "methods/fedpft/fedpft.h"
#include "methods/fedpft/fedpft_core.h"
#include "methods/fedpft/half.h"
#include "core/float16.h"
#include "methods/gmm/gmm.h"

#include "../common/expect_error.h"
#include "../common/node_context.h"

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <gtest/gtest.h>

#include <cmath>

namespace fednode {
namespace {

constexpr int kDim = 6;
constexpr int kClasses = 4;

// Class c centred at 4c along every axis; node-specific seeds; `missing` class left out.
Features make_features(int per_class, uint64_t seed, int missing = -1, double scale = 1.0) {
  Rng rng(seed);
  Features f;
  f.num_classes = kClasses;
  int rows = 0;
  for (int c = 0; c < kClasses; ++c) rows += c == missing ? 0 : per_class;
  f.X.resize(rows, kDim);
  int r = 0;
  for (int c = 0; c < kClasses; ++c) {
    if (c == missing) continue;
    for (int i = 0; i < per_class; ++i, ++r) {
      for (int j = 0; j < kDim; ++j)
        f.X(r, j) = static_cast<float>(scale * (4.0 * c + (i % 2 ? 1.5 : -1.5) + 0.5 * rng.normal()));
      f.y.push_back(c);
    }
  }
  return f;
}

NodeContext context(NodeId node) { return test::node_context(node, kClasses, kDim, 2024); }

FedPftOptions small_options() {
  FedPftOptions o;
  o.gmm.components = 2;
  o.gmm.covariance = CovarianceType::Diag;
  return o;
}

const GmmKnowledge& gmm(const Knowledge& k) { return std::get<GmmKnowledge>(k.payload); }

bool same_mixture(const GaussianMixture& a, const GaussianMixture& b) {
  return a.type == b.type && a.weights == b.weights && a.means == b.means &&
         a.covariances == b.covariances;
}

bool same_knowledge(const Knowledge& a, const Knowledge& b) {
  if (a.contributors != b.contributors || gmm(a).classes.size() != gmm(b).classes.size()) return false;
  for (size_t i = 0; i < gmm(a).classes.size(); ++i) {
    const auto &x = gmm(a).classes[i], &y = gmm(b).classes[i];
    if (x.label != y.label || x.count != y.count || !same_mixture(x.mixture, y.mixture)) return false;
  }
  return true;
}

TEST(FedPft, SummarizeFitsEveryClassWithDataAndRecordsCounts) {
  const Features local = make_features(40, 1, /*missing=*/2);
  const Knowledge k = fedpft_summarize(local, small_options(), context(7));
  EXPECT_EQ(k.contributors, Contributors{7});
  EXPECT_EQ(k.dim, kDim);
  EXPECT_EQ(k.num_classes, kClasses);
  EXPECT_EQ(k.backbone_fingerprint, "test-backbone");
  EXPECT_STREQ(k.method_name(), "fedpft");
  ASSERT_EQ(gmm(k).classes.size(), 3u);
  const int labels[] = {0, 1, 3};
  for (size_t i = 0; i < 3; ++i) {
    const ClassMixture& cm = gmm(k).classes[i];
    EXPECT_EQ(cm.label, labels[i]);
    EXPECT_EQ(cm.count, 40);
    EXPECT_EQ(cm.mixture.components(), 2);
    EXPECT_NEAR(cm.mixture.means.col(0).mean(), 4.0 * cm.label, 0.3);
  }
  EXPECT_NO_THROW(validate_gmm_knowledge(k, context(7), "own"));
}

TEST(FedPft, ClassWithFewerSamplesThanKIsKeptWithSmallerK) {
  Features local = make_features(30, 2);
  // Class 3 gets only two samples.
  std::vector<int64_t> keep;
  int seen3 = 0;
  for (int64_t i = 0; i < local.size(); ++i)
    if (local.y[static_cast<size_t>(i)] != 3 || seen3++ < 2) keep.push_back(i);
  local = local.subset(keep);
  FedPftOptions o = small_options();
  o.gmm.components = 5;
  const Knowledge k = fedpft_summarize(local, o, context(1));
  ASSERT_EQ(gmm(k).classes.size(), 4u);
  EXPECT_EQ(gmm(k).classes[3].count, 2);
  EXPECT_EQ(gmm(k).classes[3].mixture.components(), 2);
  EXPECT_EQ(gmm(k).classes[0].mixture.components(), 5);
}

TEST(FedPft, HalfPrecisionKnowledgeIsExactlyFloat16AndValid) {
  for (const CovarianceType type :
       {CovarianceType::Full, CovarianceType::Diag, CovarianceType::Spherical}) {
    FedPftOptions o = small_options();
    o.gmm.covariance = type;
    o.half_precision = true;
    const Knowledge k = fedpft_summarize(make_features(50, 3), o, context(2));
    for (const auto& cm : gmm(k).classes) {
      EXPECT_TRUE(is_half_exact(cm.mixture)) << to_string(type);
      EXPECT_NO_THROW(cm.mixture.validate("half"));
      EXPECT_NEAR(cm.mixture.weights.sum(), 1.0, 2e-3);
      if (type == CovarianceType::Full)
        for (int c = 0; c < cm.mixture.components(); ++c) {
          const Eigen::LLT<MatrixD> llt(cm.mixture.covariances.block(c * kDim, 0, kDim, kDim));
          EXPECT_EQ(llt.info(), Eigen::Success);
        }
    }
    o.half_precision = false;
    const Knowledge k32 = fedpft_summarize(make_features(50, 3), o, context(2));
    EXPECT_FALSE(is_half_exact(gmm(k32).classes[0].mixture));
  }
}

// One full Gaussian at the origin with this covariance.
GaussianMixture full_gaussian(const MatrixD& covariance) {
  GaussianMixture g;
  g.type = CovarianceType::Full;
  g.weights = VectorD::Ones(1);
  g.means = MatrixD::Zero(1, covariance.cols());
  g.covariances = covariance;
  return g;
}

// A covariance whose repair needs a diagonal beyond float16's range is refused, naming it; the
// steps the search tried below that range do not stand in for it.
TEST(FedPft, HalfRoundingRefusesAJitterBeyondFloat16) {
  MatrixD covariance(2, 2);
  covariance << 50000.0, 65504.0, 65504.0, 50000.0;  // eigenvalues 115504 and -15504
  const GaussianMixture g = full_gaussian(covariance);
  test::expect_input_error([&] { round_mixture_to_half(g, 1e-6, "the test class"); },
                           {"the test class", "variance", "cannot travel as float16"});
}

TEST(FedPft, HalfRoundingRepairsLostPositiveDefiniteness) {
  // Correlation 1 - 1e-6: positive definite in double, not after 11-bit rounding.
  const double r = 1 - 1e-6;
  MatrixD covariance(3, 3);
  covariance << 1.0, r, r * r, r, 1.0, r, r * r, r, 1.0;
  covariance.diagonal().array() += 1e-7;
  GaussianMixture g = full_gaussian(covariance);
  ASSERT_EQ(Eigen::LLT<MatrixD>(g.covariances).info(), Eigen::Success);
  const GaussianMixture h = round_mixture_to_half(g, 1e-6, "test");
  EXPECT_TRUE(is_half_exact(h));
  EXPECT_EQ(Eigen::LLT<MatrixD>(h.covariances).info(), Eigen::Success);
  EXPECT_TRUE(h.covariances.isApprox(h.covariances.transpose()));
  // Repaired by a jitter on the diagonal, not by dropping the correlations.
  EXPECT_GT(h.covariances(0, 1), 0.99);
  EXPECT_GT(h.covariances(1, 2), 0.99);

  GaussianMixture tiny = g;
  tiny.type = CovarianceType::Diag;
  tiny.covariances = MatrixD::Constant(1, 3, 1e-12);  // below float16's smallest subnormal
  const GaussianMixture th = round_mixture_to_half(tiny, 1e-6, "test");
  EXPECT_TRUE((th.covariances.array() >= 1e-6).all());
  EXPECT_TRUE(is_half_exact(th));
  // The float16 nearest this floor (17 * 2^-24 = 1.013e-6) lies below it: the floor is rounded
  // up, never down.
  const GaussianMixture up = round_mixture_to_half(tiny, 1.04e-6, "test");
  EXPECT_TRUE((up.covariances.array() >= 1.04e-6).all()) << up.covariances;
  EXPECT_TRUE(is_half_exact(up));

  GaussianMixture huge = tiny;
  huge.means(0, 1) = 1e6;
  EXPECT_THROW(round_mixture_to_half(huge, 1e-6, "test"), InputError);
}

// float16 keeps about three significant digits down to 6.1e-5 and ever fewer below: means of
// 1e-8 would arrive as zeros and a head on them would sit at chance. Refused instead, naming the
// way out; so is a value beyond float16's range, printed readably.
TEST(FedPft, HalfTransferRefusesMeansItWouldLose) {
  GaussianMixture g;
  g.type = CovarianceType::Diag;
  g.weights = VectorD::Ones(1);
  g.means = MatrixD::Constant(1, 3, 0.25);
  g.covariances = MatrixD::Constant(1, 3, 1e-2);
  EXPECT_NO_THROW(round_mixture_to_half(g, 1e-6, "class 0"));
  GaussianMixture small = g;
  small.means *= 1e-3;  // 2.5e-4: still within float16's normal range
  EXPECT_NO_THROW(round_mixture_to_half(small, 1e-6, "class 0"));
  small.means = MatrixD::Constant(1, 3, 3e-8);
  test::expect_input_error([&] { round_mixture_to_half(small, 1e-6, "class 2"); },
                           {"class 2", "float16", "float32 transfer"});
  GaussianMixture faint = g;
  faint.covariances = MatrixD::Constant(1, 3, 2.2e-7);  // 3.7 subnormal steps: 8 % off
  test::expect_input_error([&] { round_mixture_to_half(faint, 1e-9, "class 3"); }, {"class 3", "variances"});
  EXPECT_NO_THROW(round_mixture_to_half(faint, 1e-6, "class 3"));  // floored: what was asked for
  GaussianMixture huge = g;
  huge.means(0, 0) = 1.5e30;
  test::expect_input_error([&] { round_mixture_to_half(huge, 1e-6, "class 1"); }, {"class 1", "mean 1.5e+30 "});
}

// reg_covar is absolute: on features whose within-class spread lies below it, the mixtures would
// be reg_covar and little else. Refused with the two ways out, which both work.
TEST(FedPft, SummarizeRefusesFeaturesSpreadLessThanRegCovar) {
  const Features unit = make_features(30, 5);
  const Features tiny = make_features(30, 5, -1, 1e-5);  // within-class variance ~2e-10
  FedPftOptions o = small_options();
  EXPECT_NO_THROW(fedpft_summarize(unit, o, context(0)));
  test::expect_input_error([&] { fedpft_summarize(tiny, o, context(0)); }, {"reg_covar", "--reg-covar"});
  o.gmm.reg_covar = 1e-12;
  // float16 would floor these variances at its smallest subnormal, 6e-8: refused as well.
  test::expect_input_error([&] { fedpft_summarize(tiny, o, context(0)); }, {"float16", "float32 transfer"});
  o.half_precision = false;
  EXPECT_NO_THROW(fedpft_summarize(tiny, o, context(0)));
  FedPftOptions dp = small_options();
  dp.dp = true;  // DP floors its variances on purpose
  EXPECT_NO_THROW(fedpft_summarize(tiny, dp, context(0)));
}

TEST(FedPft, SummarizeIsDeterministic) {
  const Features local = make_features(40, 4);
  const FedPftOptions o = small_options();
  EXPECT_TRUE(same_knowledge(fedpft_summarize(local, o, context(3)), fedpft_summarize(local, o, context(3))));
}

TEST(FedPft, MergeUnitesContributorsAndAddsCounts) {
  const FedPftOptions o = small_options();
  const Knowledge a = fedpft_summarize(make_features(30, 11), o, context(1));
  const Knowledge b = fedpft_summarize(make_features(20, 12, /*missing=*/1), o, context(2));
  const Features local = make_features(10, 13);
  const Knowledge m = fedpft_merge({a, b}, &local, o, context(3));
  EXPECT_EQ(m.contributors, (Contributors{1, 2, 3}));
  ASSERT_EQ(gmm(m).classes.size(), 4u);
  EXPECT_EQ(gmm(m).classes[0].count, 30 + 20 + 10);
  EXPECT_EQ(gmm(m).classes[1].count, 30 + 10);
  for (const auto& cm : gmm(m).classes) {
    EXPECT_NO_THROW(cm.mixture.validate("merged"));
    EXPECT_NEAR(cm.mixture.means.col(0).mean(), 4.0 * cm.label, 0.3);
  }
}

TEST(FedPft, MergeNeverCountsTheLocalDataTwice) {
  const FedPftOptions o = small_options();
  const Features local3 = make_features(25, 21);
  const Knowledge own = fedpft_summarize(local3, o, context(3));
  const Knowledge other = fedpft_summarize(make_features(15, 22), o, context(1));
  // A piece that already contains node 3 (e.g. came back around a ring).
  const Knowledge back = fedpft_merge({other}, &local3, o, context(3));
  ASSERT_EQ(back.contributors, (Contributors{1, 3}));
  const Knowledge again = fedpft_merge({back}, &local3, o, context(3));
  EXPECT_EQ(again.contributors, (Contributors{1, 3}));
  for (const auto& cm : gmm(again).classes) EXPECT_EQ(cm.count, 25 + 15);
  // The node's own summary and the bigger piece: the subset adds nothing.
  const Knowledge with_own = fedpft_merge({back, own}, &local3, o, context(3));
  EXPECT_TRUE(same_knowledge(with_own, again));
  const Features train = fedpft_training_set({back}, &local3, o, context(3));
  EXPECT_EQ(train.size(), 4 * (25 + 15));
}

TEST(FedPft, ReceivingTheSamePieceTwiceChangesNothing) {
  const FedPftOptions o = small_options();
  const Knowledge a = fedpft_summarize(make_features(30, 31), o, context(1));
  const Knowledge b = fedpft_summarize(make_features(30, 32), o, context(2));
  const Features local = make_features(10, 33);
  const Knowledge once = fedpft_merge({a, b}, &local, o, context(4));
  const Knowledge twice = fedpft_merge({a, b, a, b, a}, &local, o, context(4));
  EXPECT_TRUE(same_knowledge(once, twice));
  const Features t1 = fedpft_training_set({a, b}, &local, o, context(4));
  const Features t2 = fedpft_training_set({b, a, a}, &local, o, context(4));
  EXPECT_EQ(t1.X, t2.X);
  EXPECT_EQ(t1.y, t2.y);
}

TEST(FedPft, SingleSourceClassIsForwardedUnchanged) {
  const FedPftOptions o = small_options();
  const Knowledge a = fedpft_summarize(make_features(30, 41), o, context(1));
  const Features local = make_features(12, 42, /*missing=*/2);
  const Knowledge m = fedpft_merge({a}, &local, o, context(5));
  EXPECT_TRUE(same_mixture(gmm(m).classes[2].mixture, gmm(a).classes[2].mixture));
  EXPECT_EQ(gmm(m).classes[2].count, 30);
  EXPECT_FALSE(same_mixture(gmm(m).classes[0].mixture, gmm(a).classes[0].mixture));
}

TEST(FedPft, ForwardedClassIsRoundedToHalfPrecision) {
  // A node that forwards a float32 piece's class as it is would send values float16 cannot
  // carry, or the encoder would round them without the positive-definiteness repair.
  FedPftOptions o = small_options();
  o.half_precision = false;
  const Knowledge a = fedpft_summarize(make_features(30, 43), o, context(1));
  ASSERT_FALSE(is_half_exact(gmm(a).classes[0].mixture));
  o.half_precision = true;
  const Knowledge m = fedpft_merge({a}, nullptr, o, context(5));
  ASSERT_EQ(gmm(m).classes.size(), gmm(a).classes.size());
  for (const auto& cm : gmm(m).classes) EXPECT_TRUE(is_half_exact(cm.mixture)) << "class " << cm.label;
}

TEST(FedPft, MergeWithoutReceivedKnowledgeIsTheLocalSummary) {
  const FedPftOptions o = small_options();
  const Features local = make_features(20, 51);
  EXPECT_TRUE(same_knowledge(fedpft_merge({}, &local, o, context(6)), fedpft_summarize(local, o, context(6))));
  EXPECT_THROW(fedpft_merge({}, nullptr, o, context(6)), InputError);
}

TEST(FedPft, TrainingSetHoldsSamplesToCountPlusLocalFeatures) {
  const FedPftOptions o = small_options();
  const Knowledge a = fedpft_summarize(make_features(30, 61, /*missing=*/0), o, context(1));
  const Features local = make_features(7, 62);
  const Features t = fedpft_training_set({a}, &local, o, context(2));
  EXPECT_EQ(t.num_classes, kClasses);
  EXPECT_NO_THROW(t.validate("training set"));
  const auto counts = t.class_counts();
  EXPECT_EQ(counts, (std::vector<int64_t>{7, 37, 37, 37}));
  // The local rows are there unchanged, after the synthetic ones.
  EXPECT_EQ(t.X.bottomRows(local.size()), local.X);
  // Synthetic rows look like their class.
  for (int64_t i = 0; i < 90; ++i)
    EXPECT_NEAR(t.X.row(i).mean(), 4.0 * t.y[static_cast<size_t>(i)], 3.5) << "row " << i;
  // Without local data: synthetic only.
  EXPECT_EQ(fedpft_training_set({a}, nullptr, o, context(2)).size(), 90);
}

TEST(FedPft, SyntheticMultiplierScalesDrawsAndRepeatsLocalRows) {
  FedPftOptions o = small_options();
  const Knowledge a = fedpft_summarize(make_features(30, 61, /*missing=*/0), o, context(1));
  const Features local = make_features(7, 62);
  o.synthetic_multiplier = 3;
  const Features t = fedpft_training_set({a}, &local, o, context(2));
  // Class proportions are those of multiplier 1: every count is three times as large.
  EXPECT_EQ(t.class_counts(), (std::vector<int64_t>{21, 111, 111, 111}));
  // The 270 synthetic rows come first, then the local rows three times over.
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(t.X.middleRows(270 + r * local.size(), local.size()), local.X) << "copy " << r;
  for (int64_t i = 0; i < 270; ++i)
    EXPECT_NEAR(t.X.row(i).mean(), 4.0 * t.y[static_cast<size_t>(i)], 3.5) << "row " << i;
  // Without local data: synthetic only, three draws per shared sample.
  EXPECT_EQ(fedpft_training_set({a}, nullptr, o, context(2)).size(), 270);
  o.synthetic_multiplier = 0;
  EXPECT_THROW(fedpft_training_set({a}, &local, o, context(2)), InputError);
  o.synthetic_multiplier = kMaxSyntheticMultiplier + 1;
  EXPECT_THROW(fedpft_training_set({a}, &local, o, context(2)), InputError);
}

TEST(FedPft, MergeAndTrainingSetDrawTheSameSyntheticFeatures) {
  FedPftOptions o = small_options();
  o.half_precision = false;
  const Knowledge a = fedpft_summarize(make_features(30, 71), o, context(1));
  const Knowledge b = fedpft_summarize(make_features(30, 72), o, context(2));
  const Features t = fedpft_training_set({a, b}, nullptr, o, context(9));
  // Class 0 of the merge is the EM fit on exactly the class-0 synthetic rows of the set.
  MatrixF class0(60, kDim);
  int r = 0;
  for (int64_t i = 0; i < t.size(); ++i)
    if (t.y[static_cast<size_t>(i)] == 0) class0.row(r++) = t.X.row(i);
  ASSERT_EQ(r, 60);
  const Knowledge m = fedpft_merge({a, b}, nullptr, o, context(9));
  const GaussianMixture refit =
      fit_gmm(class0, o.gmm, derive_seed(2024, {static_cast<uint64_t>(Purpose::KMeansInit), 9, 0}));
  EXPECT_TRUE(same_mixture(gmm(m).classes[0].mixture, refit));
}

TEST(FedPft, EveryNodeAndClassDrawsFromItsOwnStream) {
  // Two classes with identical mixtures, and the same piece received by two nodes: FedPFT's
  // reference code would draw identical features for all four.
  FedPftOptions o = small_options();
  Knowledge k = fedpft_summarize(make_features(20, 81), o, context(1));
  auto& classes = std::get<GmmKnowledge>(k.payload).classes;
  classes[1].mixture = classes[0].mixture;
  const Features at2 = fedpft_training_set({k}, nullptr, o, context(2));
  const Features at3 = fedpft_training_set({k}, nullptr, o, context(3));
  EXPECT_NE(at2.X.middleRows(0, 20), at2.X.middleRows(20, 20));
  EXPECT_NE(at2.X.middleRows(0, 20), at3.X.middleRows(0, 20));
  EXPECT_NE(fedpft_sampling_seed(context(2), {1}, 0), fedpft_sampling_seed(context(2), {1}, 1));
  EXPECT_NE(fedpft_sampling_seed(context(2), {1}, 0), fedpft_sampling_seed(context(3), {1}, 0));
  EXPECT_NE(fedpft_sampling_seed(context(2), {1}, 0), fedpft_sampling_seed(context(2), {1, 4}, 0));
  // Pieces of the same size from different nodes draw differently too.
  EXPECT_NE(fedpft_sampling_seed(context(2), {1}, 0), fedpft_sampling_seed(context(2), {4}, 0));
  EXPECT_EQ(fedpft_sampling_seed(context(2), {1, 4}, 0), fedpft_sampling_seed(context(2), {4, 1}, 0));
  // Same node, same piece: same draws.
  EXPECT_EQ(at2.X, fedpft_training_set({k}, nullptr, o, context(2)).X);
}

TEST(FedPft, RejectsIncompatibleOrMalformedKnowledge) {
  const FedPftOptions o = small_options();
  const Features local = make_features(10, 91);
  const Knowledge good = fedpft_summarize(make_features(20, 92), o, context(1));

  NodeContext other_dim = context(2);
  other_dim.dim = kDim + 1;
  EXPECT_THROW(fedpft_merge({good}, nullptr, o, other_dim), InputError);
  NodeContext other_backbone = context(2);
  other_backbone.backbone_fingerprint = "another";
  EXPECT_THROW(fedpft_merge({good}, &local, o, other_backbone), InputError);

  Knowledge bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].count = 0;
  EXPECT_THROW(fedpft_merge({bad}, &local, o, context(2)), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].count = kMaxClassCount + 1;
  EXPECT_THROW(fedpft_training_set({bad}, &local, o, context(2)), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[1].label = 0;  // duplicate label
  EXPECT_THROW(fedpft_merge({bad}, &local, o, context(2)), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[3].label = kClasses;
  EXPECT_THROW(fedpft_merge({bad}, &local, o, context(2)), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].mixture.covariances(0, 0) = -1;
  EXPECT_THROW(fedpft_training_set({bad}, &local, o, context(2)), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].mixture.means(0, 0) = NAN;
  EXPECT_THROW(fedpft_merge({bad}, &local, o, context(2)), InputError);

  // Method::validate, which a node applies on arrival, refuses what merging would refuse,
  // and a piece whose synthetic samples alone would exceed the training-set limit.
  FedPftOptions many = o;
  many.synthetic_multiplier = kMaxSyntheticMultiplier;
  const auto method = make_fedpft(many);
  EXPECT_NO_THROW(method->validate(good, context(2), "piece"));
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].mixture.means(0, 0) = NAN;
  EXPECT_THROW(method->validate(bad, context(2), "piece"), InputError);
  bad = good;
  std::get<GmmKnowledge>(bad.payload).classes[0].count = kMaxClassCount;
  EXPECT_NO_THROW(make_fedpft(o)->validate(bad, context(2), "piece")) << "fits with one draw per sample";
  EXPECT_THROW(method->validate(bad, context(2), "piece"), InputError);
  EXPECT_THROW(fedpft_training_set({bad}, &local, many, context(2)), InputError);

  Features wrong_classes = local;
  wrong_classes.num_classes = kClasses + 1;
  EXPECT_THROW(fedpft_summarize(wrong_classes, o, context(2)), InputError);
  FedPftOptions bad_options = o;
  bad_options.gmm.components = 0;
  EXPECT_THROW(fedpft_summarize(local, bad_options, context(2)), InputError);
  bad_options = o;
  bad_options.dp = true;
  bad_options.dp_epsilon = 0;
  EXPECT_THROW(fedpft_summarize(local, bad_options, context(2)), InputError);
}

TEST(DpFedPft, SigmaFollowsTheorem41) {
  EXPECT_DOUBLE_EQ(dp_noise_sigma(100, 1.0, 1e-5), 4.0 / 100.0 * std::sqrt(5.0 * std::log(4e5)));
  EXPECT_DOUBLE_EQ(dp_noise_sigma(50, 0.5, 0.01), 4.0 / 25.0 * std::sqrt(5.0 * std::log(400.0)));
  EXPECT_THROW(validate_dp_parameters(1.0, 1.0, "t"), InputError);
  EXPECT_THROW(validate_dp_parameters(-1.0, 0.1, "t"), InputError);
}

// The paper's runs set delta = 1/|D_ic| (section 5): each class's noise follows its own count, and a
// class of one sample, for which that delta guarantees nothing, is not released.
TEST(DpFedPft, ThePapersDeltaIsOneOverEachClassCount) {
  Features local = make_features(30, 131);
  // Class 0 keeps 30 rows, class 1 nine, class 2 one; class 3 all 30.
  std::vector<int64_t> rows;
  std::vector<int> kept(kClasses, 0);
  const int wanted[kClasses] = {30, 9, 1, 30};
  for (int64_t i = 0; i < static_cast<int64_t>(local.size()); ++i) {
    const int c = local.y[static_cast<size_t>(i)];
    if (kept[static_cast<size_t>(c)]++ < wanted[c]) rows.push_back(i);
  }
  local = local.subset(rows);
  FedPftOptions o = small_options();
  o.dp = true;
  o.dp_delta_per_class = true;
  o.half_precision = false;
  const NodeContext ctx = context(3);
  const Knowledge k = fedpft_summarize(local, o, ctx);
  std::vector<int> labels;
  for (const auto& cm : gmm(k).classes) {
    labels.push_back(cm.label);
    const MatrixF X = local.rows_of_class(cm.label);
    ASSERT_EQ(cm.count, X.rows());
    SecretRng noise(*ctx.noise_key, Purpose::DpNoise, ctx.node, static_cast<uint64_t>(cm.label));
    const GaussianMixture expected =
        dp_gaussian(X, o.dp_epsilon, 1.0 / static_cast<double>(X.rows()), o.gmm.reg_covar, noise);
    EXPECT_TRUE(same_mixture(cm.mixture, expected)) << "class " << cm.label;
  }
  EXPECT_EQ(labels, (std::vector<int>{0, 1, 3})) << "class 2 has one sample";
  // With the fixed delta every class is released, the single sample included.
  o.dp_delta_per_class = false;
  EXPECT_EQ(gmm(fedpft_summarize(local, o, ctx)).classes.size(), 4u);
}

TEST(DpFedPft, ClipsRowsToTheUnitBall) {
  MatrixD X(4, 2);
  X << 3, 4, 0.3, 0.4, 0, 0, 0.9, 0.9;  // the last just outside the ball (norm 1.27)
  EXPECT_EQ(clip_rows_to_unit_norm(X), 2);
  EXPECT_NEAR(X.row(0).norm(), 1.0, 1e-15);
  EXPECT_NEAR(X(0, 0), 0.6, 1e-15);
  EXPECT_EQ(X(1, 0), 0.3);
  EXPECT_EQ(X.row(2).norm(), 0.0);
  EXPECT_NEAR(X.row(3).norm(), 1.0, 1e-15);
}

// Rows of norm below one with correlated coordinates.
MatrixF correlated_rows(int n, uint64_t seed) {
  Rng rng(seed);
  MatrixF X(n, 2);
  for (int i = 0; i < n; ++i) {
    const double z1 = rng.normal(), z2 = rng.normal();
    X(i, 0) = static_cast<float>(0.3 * z1);
    X(i, 1) = static_cast<float>(0.3 * (0.8 * z1 + 0.6 * z2));
  }
  return X;
}

MatrixD clipped_covariance(const MatrixF& Xf) {
  MatrixD X = Xf.cast<double>();
  clip_rows_to_unit_norm(X);
  const MatrixD c = X.rowwise() - X.colwise().mean();
  return c.transpose() * c / static_cast<double>(X.rows());
}

TEST(DpFedPft, WithNegligibleNoiseTheCovarianceIsTheOneOverNCovariance) {
  // Theorem 4.1's sensitivity is that of the 1/n covariance; another normalisation would
  // release a statistic the noise was not calibrated for.
  const MatrixF X = correlated_rows(2000, 121);
  SecretRng noise(simulation_noise_key(122), Purpose::DpNoise);
  const GaussianMixture g = dp_gaussian(X, 1e8, 1e-5, 1e-9, noise);  // sigma ~ 1.6e-10
  EXPECT_LT((g.covariances - clipped_covariance(X)).cwiseAbs().maxCoeff(), 1e-8);
}

TEST(DpFedPft, NoiseReachesTheOffDiagonalSymmetrically) {
  const MatrixF X = correlated_rows(20000, 123);
  SecretRng noise(simulation_noise_key(124), Purpose::DpNoise);
  const GaussianMixture g = dp_gaussian(X, 1.0, 1e-5, 1e-6, noise);  // sigma ~ 1.6e-3 << eigenvalues
  EXPECT_GT(std::abs(g.covariances(0, 1) - clipped_covariance(X)(0, 1)), 1e-7);
  EXPECT_DOUBLE_EQ(g.covariances(0, 1), g.covariances(1, 0));
}

TEST(DpFedPft, ZeroRegCovarStillFloorsTheEigenvalues) {
  // reg_covar = 0 means "add none" to EM's variances; DP's projection still needs a positive
  // eigenvalue floor.
  FedPftOptions o = small_options();
  o.dp = true;
  o.gmm.reg_covar = 0;
  const Knowledge k = fedpft_summarize(make_features(50, 125, -1, 0.05), o, context(4));
  for (const auto& cm : gmm(k).classes)
    EXPECT_EQ(Eigen::LLT<MatrixD>(cm.mixture.covariances).info(), Eigen::Success);
}

TEST(DpFedPft, NoiseHasTheTheoremsScaleAndResultIsPositiveDefinite) {
  const int d = 40;
  const int64_t n = 2000;
  Rng data_rng(101);
  MatrixF X(n, d);
  for (int64_t i = 0; i < n; ++i)
    for (int j = 0; j < d; ++j) X(i, j) = static_cast<float>(0.02 * data_rng.normal() + (j == 0 ? 0.5 : 0.0));
  SecretRng noise(simulation_noise_key(102), Purpose::DpNoise);
  const double eps = 1.0, delta = 1e-5, floor = 1e-6;
  const GaussianMixture g = dp_gaussian(X, eps, delta, floor, noise);
  ASSERT_EQ(g.components(), 1);
  ASSERT_EQ(g.type, CovarianceType::Full);
  EXPECT_NO_THROW(g.validate("dp"));
  // Rows have norm < 1, so no clipping: the mean error is the noise alone.
  const VectorD empirical = X.cast<double>().colwise().mean().transpose();
  const VectorD err = g.means.row(0).transpose() - empirical;
  const double sigma = dp_noise_sigma(n, eps, delta);
  const double measured = std::sqrt(err.squaredNorm() / d);
  EXPECT_GT(measured, 0.75 * sigma);
  EXPECT_LT(measured, 1.25 * sigma);
  const Eigen::SelfAdjointEigenSolver<MatrixD> eig(g.covariances);
  EXPECT_GE(eig.eigenvalues().minCoeff(), floor * (1 - 1e-9));
  EXPECT_TRUE(g.covariances.isApprox(g.covariances.transpose(), 1e-14));
  // Few samples: noise dominates, the projection must still give a PD covariance.
  SecretRng noise2(simulation_noise_key(103), Purpose::DpNoise);
  const GaussianMixture small = dp_gaussian(X.topRows(5), eps, delta, floor, noise2);
  EXPECT_EQ(Eigen::LLT<MatrixD>(small.covariances).info(), Eigen::Success);
}

// A noisy covariance of few samples sits at the floor in about half its directions, so float16
// rounding leaves it indefinite; its directions at the floor show that without a factorisation,
// and the rounding with them is the rounding without them, bit for bit, jitter search included.
TEST(DpFedPft, TheFloorsDirectionsProveTheRoundedCovarianceIndefiniteAndChangeNothing) {
  Rng rng(131);
  MatrixF X(12, 96);
  for (Eigen::Index i = 0; i < X.size(); ++i) X.data()[i] = static_cast<float>(0.05 * rng.normal());
  int shown = 0;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    SecretRng noise(simulation_noise_key(132 + seed), Purpose::DpNoise);
    MatrixD at_floor;
    const GaussianMixture g = dp_gaussian(X, 1.0, 1e-5, 1e-6, noise, EigenArithmetic::Single, &at_floor, 8);
    ASSERT_EQ(at_floor.rows(), 8);
    ASSERT_EQ(at_floor.cols(), 96);
    // Each direction is one the projection raised to the floor: the released covariance is the floor there.
    for (Eigen::Index p = 0; p < at_floor.rows(); ++p)
      EXPECT_NEAR(at_floor.row(p).dot(g.covariances * at_floor.row(p).transpose()), 1e-6, 1e-9);
    MatrixD rounded = g.covariances;
    for (Eigen::Index i = 0; i < rounded.size(); ++i)
      rounded.data()[i] = static_cast<double>(round_to_half(static_cast<float>(rounded.data()[i])));
    if (shown_not_positive_definite(rounded, at_floor)) {
      ++shown;
      EXPECT_FALSE(lapack_positive_definite(rounded));
    }
    const GaussianMixture with = round_mixture_to_half(g, 1e-6, "dp", &at_floor);
    const GaussianMixture without = round_mixture_to_half(g, 1e-6, "dp");
    EXPECT_TRUE(with.covariances.cwiseEqual(without.covariances).all());
    EXPECT_TRUE(with.means.cwiseEqual(without.means).all());
  }
  EXPECT_GE(shown, 3) << "the directions at the floor should almost always show the rounding's indefiniteness";
  // A positive definite matrix is never shown otherwise, whatever the probes.
  MatrixF many(400, 96);
  for (Eigen::Index i = 0; i < many.size(); ++i) many.data()[i] = static_cast<float>(rng.normal());
  const MatrixD pd = clipped_covariance(many) + 1e-3 * MatrixD::Identity(96, 96);
  EXPECT_FALSE(shown_not_positive_definite(pd, MatrixD::Identity(96, 96)));
}

TEST(DpFedPft, SummarizeReleasesOneClippedNoisyGaussianPerClass) {
  FedPftOptions o = small_options();
  o.dp = true;
  o.gmm.components = 5;                 // ignored: DP forces K = 1, full
  o.gmm.covariance = CovarianceType::Diag;
  const Features local = make_features(200, 111, -1, 0.05);  // class 3 rows have norm > 1: clipped
  const Knowledge k = fedpft_summarize(local, o, context(4));
  ASSERT_EQ(gmm(k).classes.size(), 4u);
  for (const auto& cm : gmm(k).classes) {
    EXPECT_EQ(cm.mixture.components(), 1);
    EXPECT_EQ(cm.mixture.type, CovarianceType::Full);
    EXPECT_TRUE(is_half_exact(cm.mixture));
    EXPECT_EQ(Eigen::LLT<MatrixD>(cm.mixture.covariances).info(), Eigen::Success);
    EXPECT_LE(cm.mixture.means.row(0).norm(), 1.0 + 10 * dp_noise_sigma(200, 1.0, 1e-5) * std::sqrt(kDim));
  }
  // Seeded per (node, class): the same call gives the same release, another node another one.
  EXPECT_TRUE(same_knowledge(k, fedpft_summarize(local, o, context(4))));
  EXPECT_FALSE(same_mixture(gmm(k).classes[0].mixture, gmm(fedpft_summarize(local, o, context(5))).classes[0].mixture));
}

}  // namespace
}  // namespace fednode
