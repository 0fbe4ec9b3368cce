#include "methods/fedtc/fedtc.h"
#include "methods/fedtc/prototypes.h"
#include "core/rng.h"

#include "../common/node_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace fednode {
namespace {

// Per class: samples around a class direction with positive coordinates; `outliers` extra rows
// per class point the opposite way, far out.
Features clustered(int C, int d, int per_class, int outliers, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = C;
  const int n = C * (per_class + outliers);
  f.X.resize(n, d);
  int row = 0;
  for (int c = 0; c < C; ++c) {
    VectorF dir = VectorF::Zero(d);
    for (int j = 0; j < d; ++j) dir(j) = static_cast<float>(0.2 + std::abs(rng.normal()) + ((j % C) == c ? 4.0 : 0.0));
    for (int i = 0; i < per_class + outliers; ++i, ++row) {
      const bool outlier = i >= per_class;
      for (int j = 0; j < d; ++j)
        f.X(row, j) = (outlier ? -50.0f : 1.0f) * dir(j) + static_cast<float>(0.3 * rng.normal());
      f.y.push_back(c);
    }
  }
  return f;
}

NodeContext context(NodeId node, int C, int d, uint64_t seed = 42) { return test::node_context(node, C, d, seed); }

FedTcOptions quick_options() {
  FedTcOptions o;
  o.head.hidden1 = 32;
  o.head.hidden2 = 16;
  o.head.lr = 0.05;
  o.head.epochs = 30;
  o.head.min_steps = 0;
  o.head.batch_size = 16;
  o.head.threads = 1;
  return o;
}

const PrototypeKnowledge& protos(const Knowledge& k) { return std::get<PrototypeKnowledge>(k.payload); }

int64_t rows_of(const Knowledge& k) {
  int64_t r = 0;
  for (const auto& c : protos(k).classes) r += c.prototypes.rows();
  return r;
}

TEST(FedTcPrototypes, KeptCountFollowsAlpha) {
  EXPECT_EQ(kept_count(100, 0.99), 99);
  EXPECT_EQ(kept_count(200, 0.99), 198);
  EXPECT_EQ(kept_count(50, 0.99), 49);
  EXPECT_EQ(kept_count(1, 0.99), 1);   // a lone sample is kept, not the whole class dropped
  EXPECT_EQ(kept_count(7, 1.0), 7);
  EXPECT_EQ(kept_count(10, 0.25), 2);
  // 0.29 * 100 is 28.999999999999996 in binary: the product is floored with a little slack.
  EXPECT_EQ(kept_count(100, 0.29), 29);
  EXPECT_EQ(kept_count(100, 0.57), 57);
  EXPECT_EQ(kept_count(0, 0.5), 0);
  EXPECT_THROW(kept_count(10, 0.0), InputError);
  EXPECT_THROW(kept_count(10, 1.5), InputError);
  EXPECT_THROW(kept_count(10, std::nan("")), InputError);
}

TEST(FedTcPrototypes, FilterDropsPlantedOutliers) {
  const Features f = clustered(1, 8, 198, 2, 1);
  const std::vector<int64_t> kept = filter_outliers(f.X, 0.99);
  ASSERT_EQ(kept.size(), 198u);
  for (int64_t i : kept) EXPECT_LT(i, 198) << "outlier row " << i << " kept";
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_LT(kept[i - 1], kept[i]);
  // Keeping everything keeps the outliers too.
  EXPECT_EQ(filter_outliers(f.X, 1.0).size(), 200u);
}

TEST(FedTcPrototypes, FilterRanksByCosineNotDistance) {
  // A row far away along the mean direction is similar in angle and must be kept; a short row
  // at a right angle is the outlier.
  MatrixF Z(5, 2);
  Z << 1, 0.1f,  1, -0.1f,  1, 0,  100, 0,  0, 0.5f;
  const auto kept = filter_outliers(Z, 0.8);
  EXPECT_EQ(kept, (std::vector<int64_t>{0, 1, 2, 3}));
  // A very short row along the mean is kept too, whereas a long one at 45 degrees is the
  // outlier: a dot product would rank them the other way round.
  Z << 1, 0.05f,  1, -0.05f,  1, 0,  0.01f, 0,  1, 1;
  EXPECT_EQ(filter_outliers(Z, 0.8), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(FedTcPrototypes, BatchMeansCoverEveryKeptSampleOnce) {
  Rng data(3);
  MatrixF Z(23, 4);
  for (Eigen::Index i = 0; i < Z.rows(); ++i)
    for (Eigen::Index j = 0; j < Z.cols(); ++j) Z(i, j) = static_cast<float>(data.normal());
  Rng rng(9);
  const MatrixF P = batch_prototypes(Z, 5, rng);
  ASSERT_EQ(P.rows(), 5);  // ceil(23 / 5)
  // Four full batches of 5 and one of 3: the size-weighted prototypes sum to the sample sum.
  const VectorD weighted = (5.0 * P.topRows(4).cast<double>().colwise().sum() +
                            3.0 * P.row(4).cast<double>()).transpose();
  EXPECT_LT((weighted - Z.cast<double>().colwise().sum().transpose()).cwiseAbs().maxCoeff(), 1e-4);
  // Each prototype is the mean of exactly the rows of one batch: find them back.
  Rng fewer(9);
  const MatrixF P3 = batch_prototypes(Z.topRows(3), 5, fewer);
  ASSERT_EQ(P3.rows(), 1);
  EXPECT_LT((P3.row(0) - Z.topRows(3).colwise().mean()).cwiseAbs().maxCoeff(), 1e-6f);
  Rng one(9);
  const MatrixF P1 = batch_prototypes(Z, 1, one);
  ASSERT_EQ(P1.rows(), 23);
  Rng bad(1);
  EXPECT_THROW(batch_prototypes(Z, 0, bad), InputError);
}

TEST(FedTcMethod, SummarizeFiltersAndBatches) {
  const int C = 3, d = 12;
  Features f = clustered(C, d, 198, 2, 5);
  // Class 2 absent locally: it must not appear in the knowledge.
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < f.size(); ++i)
    if (f.y[static_cast<size_t>(i)] != 2) keep.push_back(i);
  f = f.subset(keep);
  const auto method = make_fedtc(FedTcOptions{});
  const NodeContext ctx = context(4, C, d);
  const Knowledge k = method->summarize(f, ctx);
  EXPECT_EQ(k.contributors, Contributors{4});
  EXPECT_EQ(k.dim, d);
  EXPECT_EQ(k.num_classes, C);
  EXPECT_EQ(k.backbone_fingerprint, "test-backbone");
  EXPECT_STREQ(k.method_name(), "fedtc");
  ASSERT_EQ(protos(k).classes.size(), 2u);
  for (const auto& c : protos(k).classes) {
    EXPECT_EQ(c.count, 198);                  // 0.99 * 200
    EXPECT_EQ(c.prototypes.rows(), 40);       // ceil(198 / 5)
    EXPECT_EQ(c.prototypes.cols(), d);
    // An outlier is -50 times the class direction; one in a batch of five would turn the
    // prototype's coordinate sum negative.
    EXPECT_GT(c.prototypes.rowwise().sum().minCoeff(), 0.0f) << "class " << c.label;
  }

  // Deterministic per (seed, node, class); another node shuffles differently.
  const Knowledge again = method->summarize(f, ctx);
  const Knowledge other = method->summarize(f, context(5, C, d));
  for (size_t i = 0; i < 2; ++i) {
    const MatrixF& a = protos(k).classes[i].prototypes;
    EXPECT_EQ(std::memcmp(a.data(), protos(again).classes[i].prototypes.data(), a.size() * 4), 0);
    EXPECT_NE(std::memcmp(a.data(), protos(other).classes[i].prototypes.data(), a.size() * 4), 0);
  }

  // Outliers listed first in their class: still the kept rows are batched, not the first ones.
  // One batch of all kept rows makes the prototype their mean.
  const int per_class = 98, outliers = 2;
  Rng rng(6);
  Features front;
  front.num_classes = 2;
  front.X.resize(2 * (per_class + outliers), d);
  for (int c = 0, row = 0; c < 2; ++c)
    for (int i = 0; i < per_class + outliers; ++i, ++row) {
      const float sign = i < outliers ? -10.0f : 1.0f;
      for (int j = 0; j < d; ++j)
        front.X(row, j) = sign * (1.0f + ((j % 2) == c ? 4.0f : 0.0f)) + static_cast<float>(0.3 * rng.normal());
      front.y.push_back(c);
    }
  FedTcOptions one_batch;
  one_batch.keep_ratio = 0.98;
  one_batch.batch_size = per_class;
  const Knowledge fk = make_fedtc(one_batch)->summarize(front, context(1, 2, d));
  for (const auto& c : protos(fk).classes) {
    ASSERT_EQ(c.prototypes.rows(), 1);
    const VectorD inliers =
        front.rows_of_class(c.label).bottomRows(per_class).cast<double>().colwise().mean().transpose();
    EXPECT_TRUE(c.prototypes.row(0).transpose().cast<double>().isApprox(inliers, 1e-5)) << "class " << c.label;
  }
}

TEST(FedTcMethod, SummarizeRejectsBadInput) {
  const auto method = make_fedtc(FedTcOptions{});
  const Features f = clustered(2, 6, 10, 0, 1);
  EXPECT_THROW(method->summarize(f, context(1, 2, 7)), InputError);
  EXPECT_THROW(method->summarize(f, context(1, 3, 6)), InputError);
  Features empty;
  empty.num_classes = 2;
  empty.X.resize(0, 6);
  EXPECT_THROW(method->summarize(empty, context(1, 2, 6)), InputError);
  Features nan = f;
  nan.X(3, 3) = std::nanf("");
  EXPECT_THROW(method->summarize(nan, context(1, 2, 6)), InputError);

  FedTcOptions bad;
  bad.keep_ratio = 0.0;
  EXPECT_THROW(make_fedtc(bad), InputError);
  bad.keep_ratio = 1.01;
  EXPECT_THROW(make_fedtc(bad), InputError);
  bad = FedTcOptions{};
  bad.batch_size = 0;
  EXPECT_THROW(make_fedtc(bad), InputError);
}

TEST(FedTcMethod, MergeCountsEveryContributorOnce) {
  const int C = 3, d = 6;
  const auto method = make_fedtc(FedTcOptions{});
  const Knowledge k1 = method->summarize(clustered(C, d, 20, 0, 1), context(1, C, d));
  const Knowledge k2 = method->summarize(clustered(C, d, 30, 0, 2), context(2, C, d));
  const Features local = clustered(C, d, 15, 0, 3);
  const NodeContext ctx3 = context(3, C, d);
  const Knowledge k3 = method->summarize(local, ctx3);

  // Duplicate delivery of k1 changes nothing.
  const Knowledge m = method->merge({k1, k2, k1}, &local, ctx3);
  EXPECT_EQ(m.contributors, (Contributors{1, 2, 3}));
  EXPECT_EQ(rows_of(m), rows_of(k1) + rows_of(k2) + rows_of(k3));
  for (const auto& c : protos(m).classes)
    EXPECT_EQ(c.count, kept_count(20, 0.99) + kept_count(30, 0.99) + kept_count(15, 0.99));
  const Knowledge once = method->merge({k1, k2}, &local, ctx3);
  ASSERT_EQ(protos(once).classes.size(), protos(m).classes.size());
  for (size_t i = 0; i < protos(m).classes.size(); ++i)
    EXPECT_TRUE(protos(once).classes[i].prototypes == protos(m).classes[i].prototypes);

  // Arrival order does not change the pooled knowledge.
  const Knowledge swapped = method->merge({k2, k1}, &local, ctx3);
  for (size_t i = 0; i < protos(m).classes.size(); ++i)
    EXPECT_TRUE(protos(swapped).classes[i].prototypes == protos(m).classes[i].prototypes);

  // A piece that already includes this node: local data is not added again.
  const Knowledge k12 = method->merge({k1, k2}, nullptr, context(1, C, d));
  EXPECT_EQ(k12.contributors, (Contributors{1, 2}));
  const Knowledge k123 = method->merge({k2}, &local, ctx3);  // {2, 3}
  const Knowledge again = method->merge({k123}, &local, ctx3);
  EXPECT_EQ(again.contributors, (Contributors{2, 3}));
  EXPECT_EQ(rows_of(again), rows_of(k123));

  // A subset of a received piece adds nothing; a partial overlap is left out, not summed.
  const Knowledge sub = method->merge({k12, k1}, nullptr, context(9, C, d));
  EXPECT_EQ(sub.contributors, (Contributors{1, 2}));
  EXPECT_EQ(rows_of(sub), rows_of(k12));
  const Knowledge partial = method->merge({k12, k123}, nullptr, context(9, C, d));
  EXPECT_EQ(partial.contributors.size(), 2u);
  EXPECT_EQ(rows_of(partial), rows_of(k12));

  // Local data alone.
  const Knowledge alone = method->merge({}, &local, ctx3);
  EXPECT_EQ(alone.contributors, Contributors{3});
  EXPECT_EQ(rows_of(alone), rows_of(k3));
}

TEST(FedTcMethod, MergeRejectsIncompatibleOrMalformedKnowledge) {
  const int C = 2, d = 4;
  const auto method = make_fedtc(FedTcOptions{});
  const Knowledge good = method->summarize(clustered(C, d, 10, 0, 1), context(1, C, d));
  const NodeContext ctx = context(2, C, d);

  Knowledge other_backbone = good;
  other_backbone.backbone_fingerprint = "another";
  EXPECT_THROW(method->merge({other_backbone}, nullptr, ctx), InputError);

  Knowledge wrong_cols = good;
  std::get<PrototypeKnowledge>(wrong_cols.payload).classes[0].prototypes = MatrixF::Zero(2, d + 1);
  EXPECT_THROW(method->merge({wrong_cols}, nullptr, ctx), InputError);

  Knowledge nan = good;
  std::get<PrototypeKnowledge>(nan.payload).classes[1].prototypes(0, 0) = std::nanf("");
  EXPECT_THROW(method->merge({nan}, nullptr, ctx), InputError);

  Knowledge bad_label = good;
  std::get<PrototypeKnowledge>(bad_label.payload).classes[1].label = C;
  EXPECT_THROW(method->merge({bad_label}, nullptr, ctx), InputError);

  Knowledge twice = good;
  std::get<PrototypeKnowledge>(twice.payload).classes[1].label = 0;
  EXPECT_THROW(method->merge({twice}, nullptr, ctx), InputError);

  Knowledge empty_class = good;
  std::get<PrototypeKnowledge>(empty_class.payload).classes[0].prototypes.resize(0, d);
  EXPECT_THROW(method->merge({empty_class}, nullptr, ctx), InputError);

  Knowledge no_one = good;
  no_one.contributors.clear();
  EXPECT_THROW(method->merge({no_one}, nullptr, ctx), InputError);

  Knowledge overclaimed = good;  // more prototypes than samples behind them
  std::get<PrototypeKnowledge>(overclaimed.payload).classes[0].count = 1;
  EXPECT_THROW(method->merge({overclaimed}, nullptr, ctx), InputError);

  // Method::validate, which a node applies on arrival, refuses each of them too.
  EXPECT_NO_THROW(method->validate(good, ctx, "piece"));
  for (const Knowledge* k : {&other_backbone, &wrong_cols, &nan, &bad_label, &twice, &empty_class, &no_one, &overclaimed})
    EXPECT_THROW(method->validate(*k, ctx, "piece"), InputError);
}

TEST(FedTcMethod, FitHeadLearnsFromPooledPrototypes) {
  // Two nodes with disjoint classes (the label-skew case FedTC targets): neither could
  // classify alone, the pooled prototypes can.
  const int C = 4, d = 16;
  const Features all = clustered(C, d, 120, 0, 21);
  std::vector<int64_t> a, b, test;
  for (int64_t i = 0; i < all.size(); ++i) {
    if (i % 6 == 5) { test.push_back(i); continue; }
    (all.y[static_cast<size_t>(i)] < 2 ? a : b).push_back(i);
  }
  const auto method = make_fedtc(quick_options());
  const Features local_b = all.subset(b);
  const Knowledge ka = method->summarize(all.subset(a), context(1, C, d));
  std::vector<std::string> progress;
  NodeContext ctx = context(2, C, d);
  ctx.progress = [&](const std::string& line) { progress.push_back(line); };
  const auto head = method->fit_head({ka}, &local_b, ctx);
  EXPECT_EQ(head->kind(), "adapter");
  EXPECT_EQ(head->num_classes(), C);
  EXPECT_GE(head->accuracy(all.subset(test)), 0.95);
  EXPECT_FALSE(progress.empty());

  // Same inputs and seed, any arrival order: the same head, bit for bit.
  const Knowledge kb = method->summarize(local_b, context(2, C, d));
  const auto h1 = method->fit_head({ka, kb}, nullptr, context(7, C, d));
  const auto h2 = method->fit_head({kb, ka, ka}, nullptr, context(7, C, d));
  const auto& l1 = dynamic_cast<const AdapterHead&>(*h1).layers();
  const auto& l2 = dynamic_cast<const AdapterHead&>(*h2).layers();
  for (size_t l = 0; l < 3; ++l) EXPECT_TRUE(l1[l].W == l2[l].W);

  EXPECT_THROW(method->fit_head({}, nullptr, context(3, C, d)), InputError);
}

}  // namespace
}  // namespace fednode
