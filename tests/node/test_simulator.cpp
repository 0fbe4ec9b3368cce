// The in-process federation over every method and topology, on small synthetic features.
#include "core/rng.h"
#include "node/seed_sweep.h"
#include "node/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

namespace fednode {
namespace {

// Well-separated Gaussian classes in d dimensions: every method should learn them. The class
// centres depend on (classes, d) only, so train and test splits drawn with different seeds agree.
Features blobs(int n_per_class, int classes, int d, uint64_t seed) {
  Rng centre_rng(derive_seed(1234, {static_cast<uint64_t>(classes), static_cast<uint64_t>(d)}));
  MatrixF centers(classes, d);
  for (int c = 0; c < classes; ++c)
    for (int j = 0; j < d; ++j) centers(c, j) = static_cast<float>(3.0 * centre_rng.normal());
  Rng rng(seed);
  Features f;
  f.num_classes = classes;
  f.X.resize(n_per_class * classes, d);
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < n_per_class; ++i) {
      const int row = c * n_per_class + i;
      for (int j = 0; j < d; ++j) f.X(row, j) = centers(c, j) + static_cast<float>(rng.normal());
      f.y.push_back(c);
    }
  return f;
}

SimulationOptions small_options(const std::string& method, SimTopology topology, int nodes) {
  SimulationOptions o;
  o.method.method = method;
  o.method.fedpft.gmm.components = 2;
  o.method.fedpft.head.epochs = 30;
  o.method.fedpft.head.lr = 1e-2;
  o.method.fedtc.head.epochs = 60;
  o.method.fedtc.head.min_steps = 300;
  o.method.fedtc.head.lr = 0.05;
  o.method.fedpft.head.min_steps = 0;
  o.topology = topology;
  o.partition.nodes = nodes;
  o.partition.scheme = PartitionScheme::Dirichlet;
  o.partition.dirichlet_alpha = 0.5;
  o.partition.min_samples = 5;
  o.seed = 7;
  o.partition.seed = 7;
  return o;
}

class SimulatorTest : public ::testing::TestWithParam<std::tuple<std::string, SimTopology>> {};

TEST_P(SimulatorTest, EveryNodeLearnsAndEveryContributorIsCounted) {
  const auto [method, topology] = GetParam();
  const Features train = blobs(60, 4, 8, 1), test = blobs(25, 4, 8, 2);
  const int N = 4;
  const SimulationReport r = simulate(train, test, small_options(method, topology, N));
  ASSERT_EQ(r.nodes.size(), static_cast<size_t>(N));
  int64_t held = 0;
  for (const auto& n : r.nodes) held += n.samples;
  EXPECT_EQ(held, train.size());
  // The last node of a chain, every node of a ring and of a star end with everyone's knowledge.
  for (int i = 0; i < N; ++i) {
    const auto& n = r.nodes[i];
    const size_t expected = topology == SimTopology::Linear ? static_cast<size_t>(i + 1) : N;
    EXPECT_EQ(n.contributors.size(), expected) << "node " << i;
    // Early chain nodes may not have seen every class yet; whoever holds everything must learn.
    if (n.contributors.size() == static_cast<size_t>(N)) EXPECT_GT(n.accuracy, 0.9) << method << " node " << i;
  }
  EXPECT_TRUE(r.has_baselines);
  EXPECT_GT(r.centralized_lda, 0.9);
  EXPECT_GT(r.centralized_linear, 0.9);
  EXPECT_GT(r.nodes.back().bytes_received + r.nodes.front().bytes_received, 0);
}

INSTANTIATE_TEST_SUITE_P(
    MethodsAndTopologies, SimulatorTest,
    ::testing::Combine(::testing::Values("fedpft", "fedcgs", "fedtc"),
                       ::testing::Values(SimTopology::Linear, SimTopology::Ring, SimTopology::Star)));

TEST(Simulator, FedCgsEqualsCentralisedLdaOnEveryTopology) {
  const Features train = blobs(50, 5, 6, 3), test = blobs(40, 5, 6, 4);
  for (auto topology : {SimTopology::Linear, SimTopology::Ring, SimTopology::Star})
    for (auto cov : {LdaCovariance::Total, LdaCovariance::Within}) {
      auto o = small_options("fedcgs", topology, 5);
      o.method.fedcgs.covariance = cov;
      const SimulationReport r = simulate(train, test, o);
      // Star and ring: every node; linear: the last node holds everything.
      EXPECT_EQ(r.nodes.back().accuracy, r.centralized_lda) << to_string(topology);
      if (topology != SimTopology::Linear)
        for (const auto& n : r.nodes) EXPECT_EQ(n.accuracy, r.centralized_lda);
    }
}

TEST(Simulator, SameSeedSameReport) {
  const Features train = blobs(40, 3, 5, 5), test = blobs(20, 3, 5, 6);
  auto o = small_options("fedpft", SimTopology::Linear, 3);
  o.baselines = false;
  const auto a = simulate(train, test, o), b = simulate(train, test, o);
  for (size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].accuracy, b.nodes[i].accuracy);
    EXPECT_EQ(a.nodes[i].bytes_sent, b.nodes[i].bytes_sent);
  }
}

TEST(Simulator, ReportIsCompleteJson) {
  const Features train = blobs(30, 3, 4, 8), test = blobs(10, 3, 4, 9);
  auto o = small_options("fedcgs", SimTopology::Star, 3);
  std::ostringstream s;
  write_report_json(simulate(train, test, o), s);
  const std::string json = s.str();
  for (const char* key : {"\"nodes\"", "\"centralized\"", "\"linear\"", "\"lda\"", "\"local_only\"",
                          "\"bytes_sent\"", "\"wall_time_seconds\"", "\"seed\"", "\"parameters\""})
    EXPECT_NE(json.find(key), std::string::npos) << key;
}

TEST(SeedSweep, MeanAndSampleStandardDeviation) {
  const MeanSd m = mean_sd({1, 2, 3, 4});
  EXPECT_DOUBLE_EQ(m.mean, 2.5);
  EXPECT_DOUBLE_EQ(m.sd, std::sqrt(5.0 / 3.0));  // divides by n - 1
  EXPECT_EQ(m.count, 4);
  const MeanSd same = mean_sd({0.772, 0.772, 0.772});
  EXPECT_EQ(same.mean, 0.772);
  EXPECT_EQ(same.sd, 0.0);
  EXPECT_TRUE(std::isnan(mean_sd({0.5}).sd));
  EXPECT_EQ(mean_sd({0.5}).mean, 0.5);
  EXPECT_TRUE(std::isnan(mean_sd({}).mean));
}

TEST(SeedSweep, EveryRunIsTheSingleSeedRunAndTheSummaryIsItsSpread) {
  const Features train = blobs(40, 3, 5, 5), test = blobs(20, 3, 5, 6);
  auto o = small_options("fedpft", SimTopology::Linear, 3);
  const SeedSweepReport sweep = simulate_seeds(train.rows(), test, o, {3, 5});
  ASSERT_EQ(sweep.runs.size(), 2u);
  ASSERT_EQ(sweep.nodes.size(), 3u);
  std::vector<double> accuracy_of_last, gap_of_last, linear;
  bool partitions_differ = false;
  for (size_t k = 0; k < 2; ++k) {
    const uint64_t seed = sweep.seeds[k];
    o.seed = o.partition.seed = seed;
    const SimulationReport alone = simulate(train, test, o);
    const SimulationReport& run = sweep.runs[k];
    EXPECT_EQ(run.options.seed, seed);
    EXPECT_EQ(run.centralized_linear, alone.centralized_linear);
    EXPECT_EQ(run.centralized_lda, alone.centralized_lda);
    for (size_t i = 0; i < run.nodes.size(); ++i) {
      EXPECT_EQ(run.nodes[i].samples, alone.nodes[i].samples) << "seed " << seed << " node " << i;
      EXPECT_EQ(run.nodes[i].accuracy, alone.nodes[i].accuracy) << "seed " << seed << " node " << i;
      EXPECT_EQ(run.nodes[i].bytes_sent, alone.nodes[i].bytes_sent) << "seed " << seed << " node " << i;
      EXPECT_EQ(run.nodes[i].local_only_accuracy, alone.nodes[i].local_only_accuracy);
      partitions_differ |= run.nodes[i].samples != sweep.runs[1 - k].nodes[i].samples;
    }
    accuracy_of_last.push_back(run.nodes.back().accuracy);
    gap_of_last.push_back(run.nodes.back().accuracy - run.centralized_linear);
    linear.push_back(run.centralized_linear);
  }
  EXPECT_TRUE(partitions_differ) << "the seed must reach the partition";
  EXPECT_EQ(sweep.nodes.back().accuracy.mean, mean_sd(accuracy_of_last).mean);
  EXPECT_EQ(sweep.nodes.back().accuracy.sd, mean_sd(accuracy_of_last).sd);
  EXPECT_EQ(sweep.nodes.back().minus_centralized_linear.mean, mean_sd(gap_of_last).mean);
  EXPECT_EQ(sweep.centralized_linear.mean, mean_sd(linear).mean);

  std::ostringstream json;
  write_seed_sweep_json(sweep, json);
  for (const char* key : {"\"fednode_seed_sweep\"", "\"summary\"", "\"minus_centralized_linear\"", "\"runs\"",
                          "\"fednode_report\""})
    EXPECT_NE(json.str().find(key), std::string::npos) << key;
}

TEST(SeedSweep, RefusesNoSeedsAndRepeatedSeeds) {
  const Features train = blobs(20, 2, 4, 1), test = blobs(10, 2, 4, 2);
  const auto o = small_options("fedcgs", SimTopology::Linear, 2);
  EXPECT_THROW(simulate_seeds(train.rows(), test, o, {}), InputError);
  EXPECT_THROW(simulate_seeds(train.rows(), test, o, {4, 1, 4}), InputError);
}

TEST(Simulator, RejectsMismatchedDimensionsAndTinyStars) {
  const Features train = blobs(10, 2, 4, 1), test = blobs(10, 2, 5, 2);
  EXPECT_THROW(simulate(train, test, small_options("fedcgs", SimTopology::Linear, 2)), InputError);
  const Features test_ok = blobs(10, 2, 4, 2);
  EXPECT_THROW(simulate(train, test_ok, small_options("fedcgs", SimTopology::Star, 1)), InputError);
}

}  // namespace
}  // namespace fednode
