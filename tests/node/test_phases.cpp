// run_admitting: when the pieces a node holds fail together, each one that makes the work fail
// is discarded and the others are kept.
#include "node/phases.h"

#include <gtest/gtest.h>

#include <numeric>

namespace fednode {
namespace {

ReceivedPiece piece(NodeId from, uint64_t seq, int64_t samples) {
  ReceivedPiece p;
  p.from = from;
  p.seq = seq;
  Knowledge k;
  k.contributors = {from};
  k.payload = StatsKnowledge{};
  std::get<StatsKnowledge>(k.payload).N = {samples};
  p.knowledge = std::make_shared<const Knowledge>(std::move(k));
  return p;
}

// Stands in for a merge that fails beyond a budget of samples (as FedPFT's training-set limit)
// or on a piece it cannot use at all (a negative count); returns who it combined.
struct BudgetedWork {
  int64_t budget;
  int* calls;
  std::vector<NodeId> operator()(const std::vector<ReceivedPiece>& pieces) const {
    ++*calls;
    int64_t total = 0;
    std::vector<NodeId> used;
    for (const auto& p : pieces) {
      const int64_t n = std::get<StatsKnowledge>(p.knowledge->payload).N[0];
      if (n < 0) throw InputError("node " + std::to_string(p.from) + ": negative count");
      total += n;
      used.push_back(p.from);
    }
    if (total > budget) throw InputError("over budget");
    return used;
  }
};

struct Outcome {
  std::vector<NodeId> used;
  std::vector<std::string> failures;
  std::vector<std::pair<NodeId, std::string>> discarded;
  int calls = 0;
};

Outcome run(const std::vector<ReceivedPiece>& pieces, int64_t budget) {
  Outcome o;
  o.used = run_admitting(
      pieces, BudgetedWork{budget, &o.calls}, [&](const std::string& why) { o.failures.push_back(why); },
      [&](const ReceivedPiece& p, const std::string& why) { o.discarded.emplace_back(p.from, why); });
  return o;
}

TEST(RunAdmitting, WorkThatSucceedsRunsOnceOnEveryPiece) {
  const Outcome o = run({piece(3, 1, 10), piece(1, 1, 10)}, 100);
  EXPECT_EQ(o.used, (std::vector<NodeId>{3, 1})) << "the pieces as held, not re-sorted";
  EXPECT_EQ(o.calls, 1);
  EXPECT_TRUE(o.failures.empty());
  EXPECT_TRUE(o.discarded.empty());
}

TEST(RunAdmitting, APieceThatFailsAloneIsDiscardedAndTheOthersKept) {
  const Outcome o = run({piece(2, 1, -1), piece(1, 1, 10), piece(3, 1, 10)}, 100);
  EXPECT_EQ(o.used, (std::vector<NodeId>{1, 3}));
  ASSERT_EQ(o.failures.size(), 1u);
  EXPECT_EQ(o.failures[0], "node 2: negative count");
  ASSERT_EQ(o.discarded.size(), 1u);
  EXPECT_EQ(o.discarded[0].first, 2u);
  EXPECT_EQ(o.discarded[0].second, "node 2: negative count");
}

TEST(RunAdmitting, PiecesThatFailTogetherAreAdmittedInInputOrder) {
  // 1 and 2 fit the budget alone but not together; 3 still fits beside 1.
  const Outcome o = run({piece(2, 1, 60), piece(3, 1, 30), piece(1, 1, 60)}, 100);
  EXPECT_EQ(o.used, (std::vector<NodeId>{1, 3}));
  ASSERT_EQ(o.discarded.size(), 1u);
  EXPECT_EQ(o.discarded[0].first, 2u);
  EXPECT_EQ(o.discarded[0].second, "over budget");
  EXPECT_EQ(o.calls, 1 + 3) << "the failed run, then one per piece; the last success is reused";
}

TEST(RunAdmitting, WithEveryPieceDiscardedTheWorkRunsOnNone) {
  const Outcome o = run({piece(1, 1, -1), piece(2, 1, -5)}, 100);
  EXPECT_TRUE(o.used.empty());
  EXPECT_EQ(o.discarded.size(), 2u);
}

TEST(RunAdmitting, FailureWithoutAnyPieceIsTheCallersError) {
  int calls = 0;
  const auto never = [](const std::string&) { FAIL() << "nothing to admit"; };
  const auto none = [](const ReceivedPiece&, const std::string&) { FAIL() << "nothing to discard"; };
  EXPECT_THROW(run_admitting(std::vector<ReceivedPiece>{}, BudgetedWork{-1, &calls}, never, none), InputError);
}

}  // namespace
}  // namespace fednode
