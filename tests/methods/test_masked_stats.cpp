// FedCGS statistics under secure aggregation: encoding into the ring and reading a complete sum
// back gives the statistics, a sum short of its group cannot be read and says who is missing, and
// the hub's FedCGS head on the masked pieces of a whole group equals the head on plain ones.
#include "crypto/run_id.h"
#include "crypto/secure_aggregation.h"
#include "methods/fedcgs/fedcgs.h"
#include "methods/fedcgs/masked_stats.h"
#include "core/rng.h"

#include "../common/labelled_blobs.h"
#include "../common/node_context.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace fednode {
namespace {

Features blobs(int n, int d, int classes, uint64_t seed) { return test::labelled_blobs(n, d, classes, seed, 2.0); }

Identity identity(NodeId id) {
  std::array<uint8_t, 32> seed{};
  seed[0] = static_cast<uint8_t>(id + 1);
  seed[7] = 0x33;
  return Identity::from_seed(seed);
}

// What node `id` of `group` sends: its statistics encoded and masked.
Knowledge masked_piece(const Features& f, NodeId id, const Contributors& group, bool counts_only) {
  const RunId run = derive_run_id("masked-stats-test");
  Knowledge k;
  k.contributors = {id};
  k.backbone_fingerprint = "test-backbone";
  k.dim = static_cast<int>(f.dim());
  k.num_classes = f.num_classes;
  StatsKnowledge s = encode_for_masking(compute_stats(f), group, counts_only, "test");
  std::map<NodeId, PublicKey> keys;
  for (NodeId m : group) keys[m] = identity(m).public_key();
  add_masks(*s.masked, [&](uint64_t stream, Ring128* values, size_t n) {
    add_pairwise_masks(values, n, stream, identity(id), id, keys, run, 1);
  });
  k.payload = std::move(s);
  return k;
}

TEST(MaskedStats, EncodingAndReadingBackGivesTheStatistics) {
  const Features f = blobs(300, 5, 3, 1);
  const StatsKnowledge plain = compute_stats(f);
  for (bool counts_only : {false, true}) {
    const StatsKnowledge enc = encode_for_masking(plain, {4}, counts_only, "test");
    ASSERT_TRUE(enc.masked);
    EXPECT_EQ(enc.masked->A.size(), counts_only ? 0u : 15u);
    EXPECT_EQ(enc.masked->B.size(), counts_only ? 0u : 15u);
    EXPECT_EQ(enc.N, (std::vector<int64_t>{0, 0, 0}));
    const StatsKnowledge back = unmask(enc, {4}, "test");
    EXPECT_FALSE(back.masked);
    EXPECT_EQ(back.N, plain.N);
    EXPECT_LT((back.A - plain.A).cwiseAbs().maxCoeff(), 1e-12);
    EXPECT_LT((back.B - plain.B).cwiseAbs().maxCoeff(), 1e-10);
  }
  StatsKnowledge huge = plain;
  huge.B(0, 0) = 1e17;
  EXPECT_THROW(encode_for_masking(huge, {4}, false, "test"), InputError);
}

TEST(MaskedStats, TheHubsHeadOnAWholeGroupsMaskedPiecesEqualsThePlainOne) {
  const Contributors group = {1, 2, 3, 4};
  std::vector<Features> parts;
  for (NodeId id : group) parts.push_back(blobs(200 + 40 * static_cast<int>(id), 6, 4, 10 + id));
  const Features hub_data = blobs(150, 6, 4, 99), test = blobs(600, 6, 4, 100);
  const auto method = make_fedcgs(FedCgsOptions{});
  const NodeContext hub = test::node_context(0, 4, 6, 7);
  for (bool counts_only : {false, true}) {
    std::vector<Knowledge> plain, masked;
    for (size_t i = 0; i < parts.size(); ++i) {
      const NodeId id = static_cast<NodeId>(i + 1);
      plain.push_back(method->summarize(parts[i], test::node_context(id, 4, 6, 7)));
      masked.push_back(masked_piece(parts[i], id, group, counts_only));
    }
    const auto plain_head = method->fit_head(KnowledgeList(plain), &hub_data, hub);
    const auto masked_head = method->fit_head(KnowledgeList(masked), &hub_data, hub);
    EXPECT_EQ(masked_head->predict(test.X), plain_head->predict(test.X)) << "counts_only " << counts_only;
    // One leaf short, the masks do not cancel: the hub cannot read the sum, and says whose piece is missing.
    std::vector<Knowledge> short_of_one(masked.begin(), masked.end() - 1);
    try {
      method->fit_head(KnowledgeList(short_of_one), &hub_data, hub);
      FAIL() << "a masked sum short of its group was read";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("without the pieces of {4}"), std::string::npos) << e.what();
    }
  }
}

TEST(MaskedStats, WhatTheHubReceivesFromOneLeafIsUnrelatedToItsStatistics) {
  const Features f = blobs(400, 6, 3, 5);
  const StatsKnowledge plain = compute_stats(f);
  const Knowledge piece = masked_piece(f, 2, {1, 2, 3}, false);
  const MaskedStats& m = *std::get<StatsKnowledge>(piece.payload).masked;
  // Read as statistics, each entry is a uniform ring element: magnitudes near 2^55, not counts
  // in the hundreds or sums in the thousands.
  for (size_t c = 0; c < m.N.size(); ++c) EXPECT_GT(std::abs(from_fixed_ring(m.N[c])), 1e6) << c;
  size_t near = 0;
  for (size_t i = 0; i < m.A.size(); ++i)
    near += std::abs(from_fixed_ring(m.A[i]) - plain.A(static_cast<Eigen::Index>(i / 6), static_cast<Eigen::Index>(i % 6))) < 1e6;
  EXPECT_EQ(near, 0u);
}

}  // namespace
}  // namespace fednode
