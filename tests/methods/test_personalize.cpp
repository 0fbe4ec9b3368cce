// Personalised FedCGS (methods/fedcgs/personalize.h): the global means are A / N, the trainer
// learns, is deterministic and folds into a linear head, the alignment changes what it learns, and
// a node's accuracy is weighted by its own class proportions.
#include "methods/fedcgs/personalize.h"
#include "methods/fedcgs/stats.h"

#include "../common/labelled_blobs.h"

#include <gtest/gtest.h>

namespace fednode {
namespace {

TEST(Personalize, GlobalMeansAreTheClassSumsOverTheirCounts) {
  const Features f = test::labelled_blobs(300, 5, 4, 1, 1.0, /*skip_class=*/2);
  std::vector<bool> present;
  const MatrixD mu = global_class_means(compute_stats(f), &present);
  EXPECT_EQ(present, (std::vector<bool>{true, true, false, true}));
  for (int c : {0, 1, 3}) {
    Eigen::RowVectorXd mean = Eigen::RowVectorXd::Zero(5);
    int n = 0;
    for (size_t i = 0; i < f.y.size(); ++i)
      if (f.y[i] == c) {
        mean += f.X.row(static_cast<Eigen::Index>(i)).cast<double>();
        ++n;
      }
    EXPECT_LT((mu.row(c) - mean / n).norm(), 1e-9) << c;
  }
  EXPECT_EQ(mu.row(2).norm(), 0.0);
}

TEST(Personalize, TrainsAFoldedLinearHeadThatTheAlignmentChanges) {
  const Features all = test::labelled_blobs(2000, 8, 4, 2);
  const Features local = test::labelled_blobs(120, 8, 4, 3);
  std::vector<bool> present;
  const MatrixD mu = global_class_means(compute_stats(all), &present);
  PersonalizeOptions o;
  o.from_global_head = false;  // the paper's recipe, from zero
  o.epochs = 200;  // one step an epoch on 120 samples
  o.lr = 0.1;
  o.rank = 4;
  o.seed = 7;
  const auto head = personalize_head(local, mu, present, o);
  EXPECT_EQ(head->dim(), 8);
  EXPECT_EQ(head->num_classes(), 4);
  const Features test_set = test::labelled_blobs(1000, 8, 4, 4);
  std::vector<int64_t> counts(4, 0);
  for (int y : local.y) ++counts[static_cast<size_t>(y)];
  EXPECT_GT(accuracy_in_proportion(head->per_class_accuracy(test_set), counts), 0.9);
  const auto again = personalize_head(local, mu, present, o);
  EXPECT_EQ(again->scores(test_set.X), head->scores(test_set.X)) << "the same seed, the same head";
  PersonalizeOptions alone = o;
  alone.lambda = 0;
  EXPECT_NE(personalize_head(local, mu, present, alone)->scores(test_set.X), head->scores(test_set.X));
  // From a global head (here a local one stands in), at its own smaller default rate.
  PersonalizeOptions from = o;
  from.from_global_head = true;
  from.lr.reset();
  EXPECT_DOUBLE_EQ(from.learning_rate(), 1e-3);
  EXPECT_THROW(personalize_head(local, mu, present, from), InputError) << "no head to start from";
  const auto tuned = personalize_head(local, mu, present, from, head.get());
  EXPECT_GT(accuracy_in_proportion(tuned->per_class_accuracy(test_set), counts), 0.9);
  // A local class the statistics do not know, and bad options, are refused.
  std::vector<bool> missing = present;
  missing[1] = false;
  EXPECT_THROW(personalize_head(local, mu, missing, o), InputError);
  o.lr = 0.0;
  EXPECT_THROW(personalize_head(local, mu, present, o), InputError);
}

TEST(Personalize, AccuracyInProportionWeighsEachClassByTheNodesShare) {
  std::vector<ClassAccuracy> per_class(3);
  per_class[0] = {10, 10};  // 1.0
  per_class[1] = {10, 5};   // 0.5
  per_class[2] = {0, 0};    // not in the test set: left out
  EXPECT_DOUBLE_EQ(accuracy_in_proportion(per_class, {3, 1, 50}), (3 * 1.0 + 1 * 0.5) / 4);
  EXPECT_DOUBLE_EQ(accuracy_in_proportion(per_class, {0, 2, 0}), 0.5);
}

}  // namespace
}  // namespace fednode
