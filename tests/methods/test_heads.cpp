#include "methods/heads/head.h"
#include "methods/heads/train.h"
#include "methods/heads/train_common.h"
#include "core/rng.h"
#include "core/openmp_threads.h"

#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace fednode {
namespace {

// C well-separated Gaussian blobs in d dimensions, `per_class` samples each.
Features blobs(int C, int d, int per_class, uint64_t seed, double spread = 0.3) {
  Rng rng(seed);
  MatrixF centers(C, d);
  for (int c = 0; c < C; ++c)
    for (int j = 0; j < d; ++j) centers(c, j) = static_cast<float>(3.0 * rng.normal());
  Features f;
  f.num_classes = C;
  f.X.resize(C * per_class, d);
  for (int i = 0; i < C * per_class; ++i) {
    const int c = i % C;
    f.y.push_back(c);
    for (int j = 0; j < d; ++j) f.X(i, j) = centers(c, j) + static_cast<float>(spread * rng.normal());
  }
  return f;
}

LinearTrainOptions quick_linear() {
  LinearTrainOptions o;
  o.lr = 1e-2;
  o.epochs = 30;
  o.min_steps = 0;
  o.batch_size = 32;
  o.threads = 1;
  o.seed = 7;
  return o;
}

AdapterTrainOptions quick_adapter() {
  AdapterTrainOptions o;
  o.hidden1 = 32;
  o.hidden2 = 16;
  o.lr = 0.05;
  o.epochs = 40;
  o.min_steps = 0;
  o.batch_size = 16;
  o.threads = 1;
  o.seed = 3;
  return o;
}

bool same_bits(const MatrixF& a, const MatrixF& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), static_cast<size_t>(a.size()) * sizeof(float)) == 0;
}

TEST(LinearHeadTraining, LearnsSeparableProblem) {
  const Features train = blobs(4, 10, 60, 1);
  std::vector<int64_t> tr, te;
  // Labels cycle with period 4, so every fifth row spreads the test rows over all classes.
  for (int64_t i = 0; i < train.size(); ++i) (i % 5 == 4 ? te : tr).push_back(i);
  const auto head = train_linear_head(train.subset(tr), quick_linear());
  EXPECT_EQ(head->kind(), "linear");
  EXPECT_EQ(head->num_classes(), 4);
  EXPECT_EQ(head->dim(), 10);
  EXPECT_GE(head->accuracy(train.subset(te)), 0.99);
}

TEST(LinearHeadTraining, ReportsEveryEpochAndLossFalls) {
  const Features train = blobs(3, 6, 40, 2);
  std::vector<double> losses;
  auto opt = quick_linear();
  opt.epochs = 12;
  train_linear_head(train, opt, [&](int epoch, double loss) {
    EXPECT_EQ(epoch, static_cast<int>(losses.size()));
    losses.push_back(loss);
  });
  ASSERT_EQ(losses.size(), 12u);
  EXPECT_LT(losses.back(), 0.5 * losses.front());

  // 120 samples in batches of 32 are 4 steps an epoch: 50 steps need 13 epochs.
  opt.epochs = 3;
  opt.min_steps = 50;
  losses.clear();
  train_linear_head(train, opt, [&](int, double loss) { losses.push_back(loss); });
  EXPECT_EQ(losses.size(), 13u);
}

TEST(HeadTraining, MinStepsExtendsShortRuns) {
  EXPECT_EQ(training_epochs(60000, 64, 30, 5000), 30);   // 938 steps an epoch: epochs rule
  EXPECT_EQ(training_epochs(1000, 64, 30, 5000), 313);   // 16 steps an epoch
  EXPECT_EQ(training_epochs(10, 64, 3, 7), 7);           // one (short) batch an epoch
  EXPECT_EQ(training_epochs(100, 10, 5, 0), 5);
}

// LibTorch's first parallel operation would set the thread count OpenMP and fednode's pool share to
// LibTorch's own guess (1 on the project's 2-core machines); training a head must leave OpenMP's
// default in place, so that EM after it still runs on every core.
TEST(HeadTraining, LeavesOpenMpsDefaultThreadCountInPlace) {
  const Features train = blobs(3, 6, 20, 5);
  auto opt = quick_linear();
  opt.epochs = 1;
  opt.threads = 0;  // LibTorch's setting, whatever it is
  train_linear_head(train, opt);
  EXPECT_EQ(omp_get_max_threads(), openmp_thread_default());
}

// LibTorch's OpenMP team and OpenBLAS's pool spinning on the same cores made adapter training 3x
// slower (docs/performance.md): beside more than one LibTorch thread, OpenBLAS runs alone, and
// its setting comes back afterwards.
TEST(HeadTraining, OpenBlasRunsSingleThreadedBesideSeveralTorchThreadsOnly) {
  const int saved = openblas_get_num_threads();
  openblas_set_num_threads(2);
  const Features train = blobs(3, 6, 20, 4);
  auto linear = quick_linear();
  auto adapter = quick_adapter();
  linear.epochs = adapter.epochs = 1;
  for (int threads : {1, 2}) {
    linear.threads = adapter.threads = threads;
    int during = -1;
    train_linear_head(train, linear, [&](int, double) { during = openblas_get_num_threads(); });
    EXPECT_EQ(during, threads > 1 ? 1 : 2) << "linear, " << threads << " LibTorch threads";
    EXPECT_EQ(openblas_get_num_threads(), 2);
    during = -1;
    train_adapter_head(train, adapter, [&](int, double) { during = openblas_get_num_threads(); });
    EXPECT_EQ(during, threads > 1 ? 1 : 2) << "adapter, " << threads << " LibTorch threads";
    EXPECT_EQ(openblas_get_num_threads(), 2);
  }
  openblas_set_num_threads(saved);
}

TEST(LinearHeadTraining, SameSeedSameBitsDifferentSeedDifferent) {
  const Features train = blobs(3, 12, 50, 3);
  for (int threads : {1, 2}) {
    auto opt = quick_linear();
    opt.threads = threads;
    // Two threads on a busy two-core machine spin in OpenMP barriers: keep that case short.
    if (threads > 1) opt.epochs = 2;
    opt.standardize = true;
    const auto a = train_linear_head(train, opt);
    const auto b = train_linear_head(train, opt);
    EXPECT_TRUE(same_bits(a->weights(), b->weights())) << threads << " threads";
    EXPECT_TRUE(same_bits(a->bias().transpose(), b->bias().transpose())) << threads << " threads";
    opt.seed += 1;
    const auto c = train_linear_head(train, opt);
    EXPECT_FALSE(same_bits(a->weights(), c->weights()));
  }
}

TEST(LinearHeadTraining, StandardisationIsFoldedIntoWeights) {
  // Columns on wildly different scales and offsets: standardisation matters here.
  Features raw = blobs(3, 5, 60, 4);
  for (int j = 0; j < raw.dim(); ++j)
    raw.X.col(j) = (raw.X.col(j).array() * std::pow(10.0f, static_cast<float>(j - 2)) + 50.0f * j).matrix();
  raw.X.col(4).setConstant(3.0f);  // a constant column must pass through unharmed
  const Standardizer s = fit_standardizer(raw.X);
  EXPECT_DOUBLE_EQ(s.scale(4), 1.0);
  Features z = raw;
  const VectorF shift = s.mean.cast<float>(), inv = s.scale.cwiseInverse().cast<float>();
  for (Eigen::Index i = 0; i < z.X.rows(); ++i)
    z.X.row(i) = ((raw.X.row(i) - shift.transpose()).array() * inv.transpose().array()).matrix();

  auto opt = quick_linear();
  opt.standardize = true;
  const auto folded = train_linear_head(raw, opt);
  opt.standardize = false;
  const auto plain = train_linear_head(z, opt);
  const MatrixF a = folded->scores(raw.X), b = plain->scores(z.X);
  EXPECT_LT((a - b).cwiseAbs().maxCoeff(), 1e-3f * std::max(1.0f, b.cwiseAbs().maxCoeff()));
  EXPECT_EQ(folded->predict(raw.X), plain->predict(z.X));
  EXPECT_GE(folded->accuracy(raw), 0.99);
}

// Constant means no spread relative to the data, not below an absolute size: features of 1e-30
// are as informative as features of 1.
TEST(LinearHeadTraining, TinyFeaturesAreNotTakenForConstantOnes) {
  const Features unit = blobs(3, 6, 40, 11);
  Features tiny = unit;
  tiny.X *= 1e-30f;
  const Standardizer s = fit_standardizer(tiny.X);
  for (Eigen::Index j = 0; j < s.scale.size(); ++j) EXPECT_LT(s.scale(j), 1e-28) << "column " << j;
  const double expected = train_linear_head(unit, quick_linear())->accuracy(unit);
  EXPECT_GE(expected, 0.99);
  EXPECT_EQ(train_linear_head(tiny, quick_linear())->accuracy(tiny), expected);

  Features constant = unit;
  constant.X.setConstant(1e-30f);  // all constant: every column passes through
  const Standardizer c = fit_standardizer(constant.X);
  EXPECT_EQ(c.scale, VectorD::Ones(6));
}

TEST(LinearHeadTraining, RejectsBadInput) {
  Features empty;
  empty.num_classes = 3;
  empty.X.resize(0, 4);
  EXPECT_THROW(train_linear_head(empty, quick_linear()), InputError);

  Features bad = blobs(3, 4, 5, 5);
  bad.y[7] = 3;
  EXPECT_THROW(train_linear_head(bad, quick_linear()), InputError);
  bad.y[7] = -1;
  EXPECT_THROW(train_linear_head(bad, quick_linear()), InputError);

  Features nan = blobs(3, 4, 5, 5);
  nan.X(2, 1) = std::nanf("");
  EXPECT_THROW(train_linear_head(nan, quick_linear()), InputError);

  Features mismatch = blobs(3, 4, 5, 5);
  mismatch.y.pop_back();
  EXPECT_THROW(train_linear_head(mismatch, quick_linear()), InputError);

  const Features ok = blobs(2, 3, 5, 6);
  auto opt = quick_linear();
  opt.lr = 0;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt = quick_linear();
  opt.lr.reset();
  opt.choice.lrs = {};
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt.choice.lrs = {1e-3, -1.0};
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt.choice.lrs = {1e-3};
  opt.choice.fraction = 1.0;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt = quick_linear();
  opt.epochs = 0;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt = quick_linear();
  opt.batch_size = 0;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt = quick_linear();
  opt.min_steps = -1;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);
  opt = quick_linear();
  opt.weight_decay = -1;
  EXPECT_THROW(train_linear_head(ok, opt), InputError);

  auto aopt = quick_adapter();
  aopt.momentum = 1.0;
  EXPECT_THROW(train_adapter_head(ok, aopt), InputError);
  aopt = quick_adapter();
  aopt.min_steps = -5;
  EXPECT_THROW(train_adapter_head(ok, aopt), InputError);
  aopt = quick_adapter();
  aopt.hidden1 = 0;
  EXPECT_THROW(train_adapter_head(ok, aopt), InputError);
  EXPECT_THROW(train_adapter_head(empty, quick_adapter()), InputError);
}

// The validation split takes its rows from the training set it is given, and from nothing else:
// every row lands in exactly one part, a part's rows are the training rows it names, every class
// of two or more samples gives up about `fraction` of them (and keeps at least one), a class of
// one sample keeps it, and the same seed draws the same split.
TEST(ValidationSplit, IsDrawnFromTheTrainingRowsOnly) {
  Features train = blobs(5, 6, 20, 21);
  // Class 4 keeps a single sample, class 3 two.
  std::vector<int64_t> rows;
  int seen3 = 0, seen4 = 0;
  for (int64_t i = 0; i < train.size(); ++i) {
    const int c = train.y[static_cast<size_t>(i)];
    if ((c == 3 && seen3++ >= 2) || (c == 4 && seen4++ >= 1)) continue;
    rows.push_back(i);
  }
  train = train.subset(rows);
  const ValidationSplit s = split_for_validation(train, 0.2, 99);
  ASSERT_EQ(s.fit_rows.size() + s.validation_rows.size(), static_cast<size_t>(train.size()));
  std::vector<int> part(static_cast<size_t>(train.size()), 0);
  for (int64_t r : s.fit_rows) part[static_cast<size_t>(r)] += 1;
  for (int64_t r : s.validation_rows) part[static_cast<size_t>(r)] += 2;
  for (int p : part) EXPECT_TRUE(p == 1 || p == 2) << "a row in neither or both parts";
  EXPECT_TRUE(same_bits(s.validation.X, train.subset(s.validation_rows).X));
  EXPECT_TRUE(same_bits(s.fit.X, train.subset(s.fit_rows).X));
  EXPECT_EQ(s.validation.y, train.subset(s.validation_rows).y);
  std::vector<int> held(5, 0), kept(5, 0);
  for (int y : s.validation.y) ++held[static_cast<size_t>(y)];
  for (int y : s.fit.y) ++kept[static_cast<size_t>(y)];
  for (int c = 0; c < 3; ++c) EXPECT_EQ(held[static_cast<size_t>(c)], 4) << "class " << c;  // 20% of 20
  EXPECT_EQ(held[3], 1);
  EXPECT_EQ(kept[3], 1);
  EXPECT_EQ(held[4], 0);
  EXPECT_EQ(kept[4], 1);
  EXPECT_EQ(split_for_validation(train, 0.2, 99).validation_rows, s.validation_rows);
  EXPECT_NE(split_for_validation(train, 0.2, 100).validation_rows, s.validation_rows);
}

// With lr unset, each candidate is scored on the held-out rows and the winner is trained on the
// whole set for the epochs that scored best: the head is exactly the one a fixed lr and that many
// epochs give. A rate far too small to learn in the budget loses to one that learns.
TEST(HeadChoice, PicksTheRateThatLearnsAndTrainsItOnTheWholeSet) {
  const Features all = blobs(6, 12, 40, 31, 1.5);
  std::vector<int64_t> tr, te;
  for (int64_t i = 0; i < all.size(); ++i) (i % 5 == 4 ? te : tr).push_back(i);
  const Features train = all.subset(tr), test = all.subset(te);

  auto opt = quick_linear();
  opt.lr.reset();
  opt.choice.lrs = {1e-7, 3e-2};
  HeadChoice chosen;
  const auto head = train_linear_head(train, opt, {}, &chosen);
  ASSERT_EQ(chosen.tried.size(), 2u);
  EXPECT_EQ(chosen.lr, 3e-2);
  EXPECT_GT(chosen.tried[1].accuracy, chosen.tried[0].accuracy);
  EXPECT_EQ(chosen.validation_samples, 6 * 6);  // 20% of each class's 32 rows, rounded
  EXPECT_GE(head->accuracy(test), 0.9);
  EXPECT_NE(chosen.summary().find("chosen on"), std::string::npos) << chosen.summary();

  auto fixed = quick_linear();
  fixed.lr = chosen.lr;
  fixed.epochs = chosen.epochs;
  fixed.min_steps = 0;
  const auto same = train_linear_head(train, fixed);
  EXPECT_TRUE(same_bits(head->weights(), same->weights()));

  auto adapter = quick_adapter();
  adapter.lr.reset();
  adapter.choice.lrs = {1e-7, 0.05};
  HeadChoice adapter_chosen;
  const auto a = train_adapter_head(train, adapter, {}, &adapter_chosen);
  EXPECT_EQ(adapter_chosen.lr, 0.05);
  EXPECT_GE(a->accuracy(test), 0.9);
}

// Nothing to hold out (every class has one sample): the first candidate is used, and said so.
TEST(HeadChoice, WithOneSampleAClassTheFirstCandidateIsUsedUntried) {
  const Features train = blobs(4, 5, 1, 41);
  auto opt = quick_linear();
  opt.lr.reset();
  opt.choice.lrs = {1e-2, 1e-1};
  HeadChoice chosen;
  train_linear_head(train, opt, {}, &chosen);
  EXPECT_EQ(chosen.validation_samples, 0);
  EXPECT_EQ(chosen.lr, 1e-2);
  EXPECT_TRUE(chosen.tried.empty());
  EXPECT_NE(chosen.summary().find("not chosen"), std::string::npos);
}

TEST(AdapterHeadTraining, LearnsSeparableProblemAndIsDeterministic) {
  const Features all = blobs(5, 16, 40, 8);
  std::vector<int64_t> tr, te;
  for (int64_t i = 0; i < all.size(); ++i) (i % 6 == 5 ? te : tr).push_back(i);
  const auto head = train_adapter_head(all.subset(tr), quick_adapter());
  EXPECT_EQ(head->kind(), "adapter");
  EXPECT_EQ(head->layers()[0].W.rows(), 32);
  EXPECT_EQ(head->layers()[1].W.rows(), 16);
  EXPECT_EQ(head->num_classes(), 5);
  EXPECT_GE(head->accuracy(all.subset(te)), 0.98);

  const auto again = train_adapter_head(all.subset(tr), quick_adapter());
  for (size_t l = 0; l < 3; ++l) EXPECT_TRUE(same_bits(head->layers()[l].W, again->layers()[l].W));
  auto other = quick_adapter();
  other.seed = 4;
  EXPECT_FALSE(same_bits(head->layers()[0].W, train_adapter_head(all.subset(tr), other)->layers()[0].W));
}

// The adapter's first layer starts with biases of about 1/sqrt(d); features far below that scale
// (unit-norm embeddings, or these at 1e-2) used to leave it at chance. Divided by their RMS value
// for training, the size of the features changes nothing, and the head still takes raw features.
TEST(AdapterHeadTraining, TheScaleOfTheFeaturesDoesNotMatter) {
  const Features all = blobs(4, 8, 50, 12);
  std::vector<int64_t> tr, te;
  for (int64_t i = 0; i < all.size(); ++i) (i % 5 == 4 ? te : tr).push_back(i);
  const Features train = all.subset(tr), test = all.subset(te);
  const double unit = train_adapter_head(train, quick_adapter())->accuracy(test);
  EXPECT_GE(unit, 0.95);
  for (float scale : {1e-2f, 1e-8f, 1e6f}) {
    Features tr_s = train, te_s = test;
    tr_s.X *= scale;
    te_s.X *= scale;
    EXPECT_NEAR(train_adapter_head(tr_s, quick_adapter())->accuracy(te_s), unit, 0.02) << "scale " << scale;
  }
}

TEST(AdapterHeadTraining, EigenForwardMatchesTorchForward) {
  const Features train = blobs(4, 24, 20, 9);
  auto opt = quick_adapter();
  opt.hidden1 = 64;
  opt.hidden2 = 48;
  opt.epochs = 5;
  const auto head = train_adapter_head(train, opt);
  // Inputs on several scales, and a zero row, whose hidden activations are all ReLU-zero or tiny.
  MatrixF X(train.X.rows() + 2, train.dim());
  X.topRows(train.X.rows()) = train.X;
  X.row(train.X.rows()).setZero();
  X.row(train.X.rows() + 1) = -1000.0f * train.X.row(0);
  const MatrixF eigen = head->scores(X), torch = adapter_scores_torch(*head, X);
  ASSERT_EQ(eigen.rows(), torch.rows());
  ASSERT_EQ(eigen.cols(), torch.cols());
  EXPECT_LT((eigen - torch).cwiseAbs().maxCoeff(), 1e-4f);
  EXPECT_THROW(adapter_scores_torch(*head, MatrixF::Zero(2, 3)), InputError);
}

// --- Head interface: prediction bookkeeping and the file format ---

TEST(Head, PerClassAccuracyCounts) {
  // Scores = x: the prediction is the argmax column.
  LinearHead head("linear", MatrixF::Identity(3, 3), VectorF::Zero(3));
  Features test;
  test.num_classes = 3;
  test.X.resize(6, 3);
  test.X << 1, 0, 0,   // true 0, predicted 0
            0, 1, 0,   // true 0, predicted 1
            0, 1, 0,   // true 1, predicted 1
            0, 0, 1,   // true 1, predicted 2
            0, 0, 1,   // true 1, predicted 2
            0, 0, 1;   // true 2, predicted 2
  test.y = {0, 0, 1, 1, 1, 2};
  const auto pc = head.per_class_accuracy(test);
  ASSERT_EQ(pc.size(), 3u);
  EXPECT_EQ(pc[0].total, 2);
  EXPECT_EQ(pc[0].correct, 1);
  EXPECT_EQ(pc[1].total, 3);
  EXPECT_EQ(pc[1].correct, 1);
  EXPECT_EQ(pc[2].total, 1);
  EXPECT_EQ(pc[2].correct, 1);
  EXPECT_DOUBLE_EQ(pc[1].value(), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(head.accuracy(test), 0.5);

  // A test set may know more classes than the head was trained on: those are counted, never
  // predicted.
  Features wider = test;
  wider.num_classes = 5;
  wider.X.conservativeResize(7, 3);
  wider.X.row(6) << 1, 0, 0;
  wider.y.push_back(4);
  const auto pw = head.per_class_accuracy(wider);
  ASSERT_EQ(pw.size(), 5u);
  EXPECT_EQ(pw[4].total, 1);
  EXPECT_EQ(pw[4].correct, 0);
  EXPECT_EQ(pw[3].total, 0);

  Features bad = test;
  bad.y[2] = 7;
  EXPECT_THROW(head.per_class_accuracy(bad), InputError);
  bad = test;
  bad.y.pop_back();
  EXPECT_THROW(head.accuracy(bad), InputError);
  EXPECT_THROW(head.per_class_accuracy(bad), InputError);
}

std::unique_ptr<Head> round_trip(const Head& h) {
  std::stringstream buf;
  h.save(buf);
  return Head::load(buf, "round trip");
}

std::string bytes_of(const Head& h) {
  std::ostringstream out;
  h.save(out);
  return out.str();
}

std::unique_ptr<AdapterHead> small_adapter() {
  std::vector<AdapterHead::Layer> layers(3);
  Rng rng(11);
  const int sizes[4] = {6, 8, 5, 3};
  for (int i = 0; i < 3; ++i) {
    layers[i].W.resize(sizes[i + 1], sizes[i]);
    layers[i].b.resize(sizes[i + 1]);
    pytorch_default_init(rng, layers[i].W, layers[i].b);
  }
  return std::make_unique<AdapterHead>(std::move(layers));
}

TEST(AdapterHead, ScoresStayFiniteWhenAHiddenLayerIsAllZero) {
  // ReLU can zero a whole hidden layer; normalising it must divide by torch's epsilon, not by 0.
  std::vector<AdapterHead::Layer> layers(3);
  layers[0].W = MatrixF::Ones(4, 3);
  layers[0].b = VectorF::Constant(4, -100.0f);  // every pre-activation negative
  layers[1].W = MatrixF::Ones(5, 4);
  layers[1].b = VectorF::Constant(5, 1.0f);
  layers[2].W = MatrixF::Ones(2, 5);
  layers[2].b = VectorF::Zero(2);
  const AdapterHead head(std::move(layers));
  const MatrixF s = head.scores(MatrixF::Ones(2, 3));
  EXPECT_TRUE(s.allFinite()) << s;
}

TEST(HeadFile, RoundTripsLinearLdaAndAdapter) {
  Rng rng(12);
  MatrixF W(4, 6);
  VectorF b(4);
  pytorch_default_init(rng, W, b);
  const MatrixF X = MatrixF::Random(9, 6);
  for (const std::string kind : {"linear", "lda"}) {
    const LinearHead head(kind, W, b);
    const auto back = round_trip(head);
    ASSERT_EQ(back->kind(), kind);
    const auto* lin = dynamic_cast<const LinearHead*>(back.get());
    ASSERT_NE(lin, nullptr);
    EXPECT_TRUE(same_bits(lin->weights(), W));
    EXPECT_TRUE(same_bits(lin->bias().transpose(), b.transpose()));
    EXPECT_TRUE(same_bits(back->scores(X), head.scores(X)));
  }
  const auto adapter = small_adapter();
  const auto back = round_trip(*adapter);
  ASSERT_EQ(back->kind(), "adapter");
  const auto* ad = dynamic_cast<const AdapterHead*>(back.get());
  ASSERT_NE(ad, nullptr);
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_TRUE(same_bits(ad->layers()[l].W, adapter->layers()[l].W));
    EXPECT_TRUE(same_bits(ad->layers()[l].b.transpose(), adapter->layers()[l].b.transpose()));
  }
  EXPECT_TRUE(same_bits(back->scores(X), adapter->scores(X)));
}

void expect_rejected(const std::string& bytes, const std::string& why) {
  std::istringstream in(bytes);
  EXPECT_THROW(Head::load(in, why), InputError) << why;
}

TEST(HeadFile, RejectsEveryTruncation) {
  const LinearHead lin("linear", MatrixF::Random(3, 4), VectorF::Random(3));
  const auto adapter = small_adapter();
  for (const std::string full : {bytes_of(lin), bytes_of(*adapter)})
    for (size_t len = 0; len < full.size(); ++len) expect_rejected(full.substr(0, len), "truncated");
}

TEST(HeadFile, RejectsCorruption) {
  const LinearHead lin("linear", MatrixF::Random(3, 4), VectorF::Random(3));
  const std::string good = bytes_of(lin);
  auto patch_u64 = [&](size_t offset, uint64_t v) {
    std::string s = good;
    std::memcpy(&s[offset], &v, 8);
    return s;
  };
  // Layout: magic[8] | kind length u64 | kind | W rows u64 | W cols u64 | W | b rows | b cols | b
  const size_t kind_len = 8, w_rows = 16 + 6, w_cols = w_rows + 8, w_data = w_cols + 8;
  const size_t b_rows = w_data + 12 * 4, b_cols = b_rows + 8;

  std::string s = good;
  s[0] = 'X';
  expect_rejected(s, "bad magic");
  expect_rejected(patch_u64(kind_len, 1u << 20), "huge kind string");
  s = good;
  s.replace(16, 6, "linaer");
  expect_rejected(s, "unknown kind");
  expect_rejected(patch_u64(w_rows, 0), "zero rows");
  expect_rejected(patch_u64(w_rows, uint64_t{1} << 40), "implausible rows");
  expect_rejected(patch_u64(w_cols, uint64_t{1} << 27), "rows*cols too large");
  expect_rejected(patch_u64(w_rows, 1u << 20), "shape larger than the data");
  expect_rejected(patch_u64(b_rows, 2), "bias not a vector");
  expect_rejected(patch_u64(b_cols, 2), "bias size mismatch");
  s = good;
  const float nan = std::nanf("");
  std::memcpy(&s[w_data + 4], &nan, 4);
  expect_rejected(s, "NaN weight");

  // An adapter whose layers do not chain.
  std::vector<AdapterHead::Layer> layers = small_adapter()->layers();
  std::ostringstream out;
  out.write("FNHEAD1\0", 8);
  const uint64_t n = 7;
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << "adapter";
  layers[1].W = MatrixF::Random(5, 7);  // expects 7 inputs, layer 0 gives 8
  for (const auto& layer : layers) {
    for (const MatrixF& m : {layer.W, MatrixF(layer.b.transpose())}) {
      const uint64_t r = static_cast<uint64_t>(m.rows()), c = static_cast<uint64_t>(m.cols());
      out.write(reinterpret_cast<const char*>(&r), 8);
      out.write(reinterpret_cast<const char*>(&c), 8);
      out.write(reinterpret_cast<const char*>(m.data()), static_cast<std::streamsize>(m.size() * 4));
    }
  }
  expect_rejected(out.str(), "adapter layers do not chain");
}

}  // namespace
}  // namespace fednode
