// What a curious node sees under secure aggregation (docs/privacy.md, "Who learns what"): every
// piece of knowledge a star's hub and a chain's second node accept is recorded, and none of it
// gives away a single node's statistics, even with the pair seeds of colluding nodes removed.
// With the seeds of every other member removed, the node's own counts come back exactly: the
// masks, and nothing else, are what hide them.
#include "../common/labelled_blobs.h"
#include "crypto/secure_aggregation.h"
#include "node/secure_aggregation.h"
#include "node/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

namespace fednode {
namespace {

struct Recorded {
  NodeId to = 0, from = 0;
  Knowledge knowledge;
};

struct Views {
  SimulationReport report;
  std::vector<Recorded> seen;
};

Views run(SimTopology topology, int nodes, SecureAggregation mode) {
  SimulationOptions o;
  o.method.method = "fedcgs";
  o.method.secure_aggregation = mode;
  o.topology = topology;
  o.partition.nodes = nodes;
  o.partition.scheme = PartitionScheme::Dirichlet;
  o.partition.dirichlet_alpha = 0.5;
  o.seed = 9;
  o.baselines = false;
  Views r;
  o.on_knowledge = [&r](NodeId to, NodeId from, const Knowledge& k) { r.seen.push_back({to, from, k}); };
  const Features train = test::labelled_blobs(1200, 6, 4, 1);
  const Features test_set = test::labelled_blobs(400, 6, 4, 2);
  r.report = simulate(train, test_set, o);
  return r;
}

// `member`'s masked counts with the masks it shares with `removed` taken off (as those nodes,
// who know the pair seeds, could), read as numbers.
std::vector<double> counts_without(const MaskedStats& masked, NodeId member, const std::vector<NodeId>& removed,
                                   uint64_t seed, bool self_mask_too = false) {
  std::vector<Ring128> n = masked.N;
  const RunId run_id = simulation_run_id(seed);
  if (self_mask_too)
    apply_mask(self_mask_seed(simulation_identity(seed, member), run_id), /*stream=*/1, n.data(), n.size(), /*subtract=*/true);
  for (NodeId peer : removed) {
    const MaskSeed s = pairwise_mask_seed(simulation_identity(seed, peer), peer,
                                          simulation_identity(seed, member).public_key(), member, run_id, 1);
    apply_mask(s, /*stream=*/1, n.data(), n.size(), /*subtract=*/!(peer < member));  // undoes what `member` added
  }
  std::vector<double> v;
  for (Ring128 x : n) v.push_back(from_fixed_ring(x));
  return v;
}

// Every value far from any count of at most the whole training set: ring-sized noise.
bool garbage(const std::vector<double>& values) {
  for (double v : values)
    if (std::abs(v) < 1e6) return false;
  return true;
}

std::vector<double> as_doubles(const std::vector<int64_t>& v) { return std::vector<double>(v.begin(), v.end()); }

TEST(SecureAggregationViews, AStarsHubReadsNoLeafsStatisticsEvenWithAColludingLeaf) {
  const Views r = run(SimTopology::Star, 6, SecureAggregation::All);
  std::map<NodeId, const Knowledge*> from_leaf;
  for (const Recorded& s : r.seen) {
    ASSERT_EQ(s.to, 0u) << "only the hub receives knowledge in a star";
    from_leaf[s.from] = &s.knowledge;
  }
  ASSERT_EQ(from_leaf.size(), 5u);
  for (const auto& [leaf, k] : from_leaf) {
    const auto& stats = std::get<StatsKnowledge>(k->payload);
    ASSERT_TRUE(stats.masked);
    // Nothing travels in the clear: the plain parts are zero, the masked ones read as noise.
    EXPECT_TRUE(stats.A.isZero() && stats.B.isZero()) << "leaf " << leaf;
    EXPECT_EQ(stats.N, std::vector<int64_t>(4, 0)) << "leaf " << leaf;
    std::vector<double> a, b;
    for (Ring128 x : stats.masked->A) a.push_back(from_fixed_ring(x));
    for (Ring128 x : stats.masked->B) b.push_back(from_fixed_ring(x));
    EXPECT_TRUE(garbage(a) && garbage(b)) << "leaf " << leaf;
    EXPECT_TRUE(garbage(counts_without(*stats.masked, leaf, {}, 9))) << "leaf " << leaf;
    // A colluding leaf gives the hub its own pair seed with this leaf: three more still hide it.
    const NodeId colluder = leaf == 1 ? 2 : 1;
    EXPECT_TRUE(garbage(counts_without(*stats.masked, leaf, {colluder}, 9))) << "leaf " << leaf;
    // Every other leaf colluding: the leaf's self mask still hides its counts (double masking);
    // with the self seed it reveals as a survivor in the unmasking round too, they come back:
    // the test can tell hidden from shown, and n - 2 leaves colluding with the hub learn the last
    // leaf's statistics, as the sum and their own would tell them anyway.
    std::vector<NodeId> others;
    for (NodeId o = 1; o <= 5; ++o)
      if (o != leaf) others.push_back(o);
    EXPECT_TRUE(garbage(counts_without(*stats.masked, leaf, others, 9))) << "leaf " << leaf;
    const std::vector<double> shown = counts_without(*stats.masked, leaf, others, 9, /*self_mask_too=*/true);
    const std::vector<double> truth = as_doubles(r.report.nodes[leaf].class_counts);
    ASSERT_EQ(shown.size(), truth.size());
    for (size_t c = 0; c < truth.size(); ++c) EXPECT_NEAR(shown[c], truth[c], 1e-9) << "leaf " << leaf;
  }
  // What the hub reads is the sum, and every node's head stands on everyone's data.
  for (const SimNodeResult& n : r.report.nodes) EXPECT_EQ(n.contributors.size(), 6u);
}

TEST(SecureAggregationViews, AChainsSecondNodeNoLongerSeesTheFirstNodesStatistics) {
  for (SecureAggregation mode : {SecureAggregation::All, SecureAggregation::Counts}) {
    const Views r = run(SimTopology::Linear, 5, mode);
    const Knowledge* first = nullptr;
    for (const Recorded& s : r.seen)
      if (s.to == 1 && s.knowledge.contributors == Contributors{0}) {
        ASSERT_EQ(first, nullptr) << "node 1 receives one piece of node 0's alone, in the first pass";
        EXPECT_EQ(s.from, 0u);
        first = &s.knowledge;
      }
    ASSERT_NE(first, nullptr);
    const auto& stats = std::get<StatsKnowledge>(first->payload);
    ASSERT_TRUE(stats.masked);
    EXPECT_EQ(stats.N, std::vector<int64_t>(4, 0));
    // Node 1 removes the mask it shares with node 0, and node 2 colludes with its own: the masks
    // node 0 shares with nodes 3 and 4 still hide its counts.
    EXPECT_TRUE(garbage(counts_without(*stats.masked, 0, {1}, 9)));
    EXPECT_TRUE(garbage(counts_without(*stats.masked, 0, {1, 2}, 9)));
    const std::vector<double> shown = counts_without(*stats.masked, 0, {1, 2, 3, 4}, 9);
    const std::vector<double> truth = as_doubles(r.report.nodes[0].class_counts);
    for (size_t c = 0; c < truth.size(); ++c) EXPECT_NEAR(shown[c], truth[c], 1e-9);
    if (mode == SecureAggregation::All) {
      EXPECT_TRUE(stats.A.isZero() && stats.B.isZero());
    } else {
      EXPECT_FALSE(stats.A.isZero());  // the paper's cheaper option hides the counts alone
    }
    // Node 1 learns nothing until the total comes back: everything else it accepts is that.
    for (const Recorded& s : r.seen)
      if (s.to == 1 && &s.knowledge != first) {
        EXPECT_EQ(s.knowledge.contributors, (Contributors{0, 1, 2, 3, 4}));
        EXPECT_FALSE(std::get<StatsKnowledge>(s.knowledge.payload).masked);
      }
    for (const SimNodeResult& n : r.report.nodes) EXPECT_EQ(n.contributors.size(), 5u);
  }
}

}  // namespace
}  // namespace fednode
