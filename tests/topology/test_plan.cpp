// Routing and completion: each mode's plans, the graph merge rule checked by simulating every
// piece of knowledge, and the bookkeeping of PlanProgress.
#include "helpers.h"
#include "topology/builders.h"
#include "topology/plan.h"

#include <algorithm>
#include <map>
#include <set>

namespace fednode {
namespace {

using test::edges;
using test::federation;
using test::nodes;
using Ids = std::vector<NodeId>;

Contributors range(NodeId a, NodeId b) {
  Contributors c;
  for (NodeId i = a; i <= b; ++i) c.insert(i);
  return c;
}

TEST(TopologyPlan, ChainAccumulates) {
  const Topology t = test::parse(federation("linear") + nodes(5) + edges({{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
  const auto plans = plan_all(t);
  ASSERT_EQ(plans.size(), 5u);
  EXPECT_EQ(plans[0].wait_for, Ids{});
  EXPECT_EQ(plans[0].forward_to, Ids{1});
  EXPECT_EQ(plans[2].wait_for, Ids{1});
  EXPECT_EQ(plans[2].forward_to, Ids{3});
  EXPECT_EQ(plans[4].wait_for, Ids{3});
  EXPECT_EQ(plans[4].forward_to, Ids{});
  for (const auto& p : plans) {
    EXPECT_TRUE(p.fits_head);
    EXPECT_TRUE(p.forward_merged);
    EXPECT_FALSE(p.has_phase2());
    EXPECT_EQ(p.expected_contributors, range(0, p.id));
    EXPECT_DOUBLE_EQ(p.deadline_seconds, kDefaultDeadlineSeconds);
    EXPECT_DOUBLE_EQ(p.return_deadline_seconds, 0);  // no phase 2
  }
  EXPECT_EQ(plans[2].peers(), (Ids{1, 3}));
  EXPECT_EQ(plans[3].sources, (std::map<NodeId, Contributors>{{2, range(0, 2)}}));
  EXPECT_TRUE(plans[0].sources.empty());
  EXPECT_TRUE(plans[2].expects(1, PlanMessage::Knowledge));
  EXPECT_FALSE(plans[2].expects(3, PlanMessage::Knowledge));
  EXPECT_FALSE(plans[2].expects(1, PlanMessage::Head));
}

TEST(TopologyPlan, ChainOrderComesFromEdgesNotIds) {
  const Topology t = test::parse(federation("linear") + nodes(3) + edges({{2, 0}, {0, 1}}));
  EXPECT_EQ(plan_for(t, 2).wait_for, Ids{});
  EXPECT_EQ(plan_for(t, 0).wait_for, Ids{2});
  EXPECT_EQ(plan_for(t, 1).expected_contributors, (Contributors{0, 1, 2}));
  EXPECT_EQ(plan_for(t, 0).expected_contributors, (Contributors{0, 2}));
}

TEST(TopologyPlan, RingMakesASecondPass) {
  const Topology t = test::parse(federation("ring") + nodes(4) + edges({{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  const auto p = plan_all(t);
  // First pass 0 -> 1 -> 2 -> 3; node 3 then holds everything and hands it to 0, and the
  // complete knowledge travels 0 -> 1 -> 2.
  EXPECT_EQ(p[0].wait_for, Ids{});
  EXPECT_EQ(p[0].forward_to, Ids{1});
  EXPECT_EQ(p[0].complete_from, NodeId{3});
  EXPECT_EQ(p[0].complete_to, NodeId{1});
  EXPECT_EQ(p[1].wait_for, Ids{0});
  EXPECT_EQ(p[1].complete_from, NodeId{0});
  EXPECT_EQ(p[1].complete_to, NodeId{2});
  EXPECT_EQ(p[2].forward_to, Ids{3});
  EXPECT_EQ(p[2].complete_from, NodeId{1});
  EXPECT_FALSE(p[2].complete_to);
  EXPECT_EQ(p[3].wait_for, Ids{2});
  EXPECT_EQ(p[3].forward_to, Ids{});
  EXPECT_FALSE(p[3].complete_from);
  EXPECT_EQ(p[3].complete_to, NodeId{0});
  EXPECT_FALSE(p[3].has_phase2());
  for (const auto& q : p) {
    EXPECT_TRUE(q.fits_head);
    EXPECT_EQ(q.expected_contributors, range(0, 3));
  }
  // Phase 2 waits one deadline more than the first-pass waits still ahead: node 0's complete
  // knowledge comes after 1, 2 and 3 have each waited for their predecessor.
  const double d = kDefaultDeadlineSeconds;
  EXPECT_DOUBLE_EQ(p[0].return_deadline_seconds, 4 * d);
  EXPECT_DOUBLE_EQ(p[1].return_deadline_seconds, 3 * d);
  EXPECT_DOUBLE_EQ(p[2].return_deadline_seconds, 2 * d);
  EXPECT_DOUBLE_EQ(p[3].return_deadline_seconds, 0);
  EXPECT_EQ(p[2].sources, (std::map<NodeId, Contributors>{{1, range(0, 1)}}));
  EXPECT_EQ(p[3].sources, (std::map<NodeId, Contributors>{{2, range(0, 2)}}));
  EXPECT_TRUE(p[0].sources.empty());
  EXPECT_TRUE(p[1].expects(0, PlanMessage::Complete));
  EXPECT_TRUE(p[1].expects(0, PlanMessage::Knowledge));
  EXPECT_FALSE(p[3].expects(2, PlanMessage::Complete));
}

// Under secure aggregation a chain makes the ring's second pass, as if its tail were linked to its
// start (here 2 -> 0 -> 1 -> 3, ids out of order), and only the tail fits a head in phase 1.
TEST(TopologyPlan, AMaskedChainMakesTheRingsSecondPass) {
  const Topology t = test::parse(federation("linear") + nodes(4) + edges({{2, 0}, {0, 1}, {1, 3}}));
  PlanOptions masked;
  masked.secure_aggregation = true;
  const auto p = plan_all(t, masked);
  EXPECT_EQ(p[2].wait_for, Ids{});
  EXPECT_EQ(p[2].forward_to, Ids{0});
  EXPECT_EQ(p[2].complete_from, NodeId{3});
  EXPECT_EQ(p[2].complete_to, NodeId{0});
  EXPECT_EQ(p[0].complete_from, NodeId{2});
  EXPECT_EQ(p[0].complete_to, NodeId{1});
  EXPECT_EQ(p[1].forward_to, Ids{3});
  EXPECT_EQ(p[1].complete_from, NodeId{0});
  EXPECT_FALSE(p[1].complete_to);
  EXPECT_EQ(p[3].wait_for, Ids{1});
  EXPECT_FALSE(p[3].complete_from);
  EXPECT_EQ(p[3].complete_to, NodeId{2});
  EXPECT_EQ(p[1].sources, (std::map<NodeId, Contributors>{{0, Contributors{0, 2}}}));
  for (const auto& q : p) {
    EXPECT_EQ(q.fits_head, q.id == 3) << q.id;
    EXPECT_EQ(q.expected_contributors, range(0, 3));
  }
  EXPECT_DOUBLE_EQ(p[2].return_deadline_seconds, 4 * kDefaultDeadlineSeconds);
  // A ring keeps its passes; only its last node fits a head in phase 1.
  const Topology ring = test::parse(federation("ring") + nodes(3) + edges({{0, 1}, {1, 2}, {2, 0}}));
  for (const auto& q : plan_all(ring, masked)) {
    EXPECT_EQ(q.fits_head, q.id == 2) << q.id;
    EXPECT_EQ(q.has_phase2(), q.id != 2) << q.id;
  }
}

void check_merges_lose_nothing(const Topology& t, const PlanOptions& options = {});

// A graph under secure aggregation: its sinks send on to one collector (most ancestors, then
// the largest id), which alone fits a head in phase 1 and hands the total on in topological order.
TEST(TopologyPlan, AMaskedGraphCollectsAtOneSinkAndHandsTheTotalBack) {
  // 0 -> 1 -> 3, 0 -> 2 -> 4, 1 -> 4: sinks 3 ({0,1,3}) and 4 ({0,1,2,4}); 4 collects.
  const Topology t = test::parse(federation("graph") + nodes(5) + edges({{0, 1}, {1, 3}, {0, 2}, {2, 4}, {1, 4}}));
  PlanOptions masked;
  masked.secure_aggregation = true;
  const auto p = plan_all(t, masked);
  EXPECT_EQ(p[3].forward_to, Ids{4});
  EXPECT_EQ(p[4].wait_for, (Ids{1, 2, 3}));
  EXPECT_FALSE(p[4].complete_from);
  EXPECT_EQ(p[4].complete_to, NodeId{0});
  EXPECT_EQ(p[0].complete_from, NodeId{4});
  EXPECT_EQ(p[0].complete_to, NodeId{1});
  EXPECT_EQ(p[3].complete_from, NodeId{2});
  EXPECT_FALSE(p[3].complete_to);
  for (const auto& q : p) {
    EXPECT_EQ(q.fits_head, q.id == 4) << q.id;
    EXPECT_EQ(q.expected_contributors, range(0, 4)) << q.id;
  }
  // 4 waits for 0..2 (longest chain 0 -> 1 -> 3 -> 4, three waits), then the total reaches
  // 3 fourth.
  EXPECT_DOUBLE_EQ(p[3].return_deadline_seconds, (3 + 1 + 3) * kDefaultDeadlineSeconds);
  check_merges_lose_nothing(t, masked);
  EXPECT_THROW(plan_all(test::parse(federation("graph") + nodes(3) + edges({{0, 1}, {1, 2}}) +
                                    "[[edge]]\nfrom = 2\nto = 0\nfeedback = true\n"),
                        masked),
               InputError);
}

TEST(TopologyPlan, RingStartsWhereTheFileSays) {
  const Topology t = test::parse(federation("ring", "start = 7") + test::node(7) + test::node(3) + test::node(5) +
                                 edges({{3, 5}, {5, 7}, {7, 3}}));
  const auto a = plan_for(t, 7), b = plan_for(t, 3), c = plan_for(t, 5);
  EXPECT_EQ(a.wait_for, Ids{});
  EXPECT_EQ(b.wait_for, Ids{7});
  EXPECT_EQ(c.wait_for, Ids{3});
  EXPECT_EQ(c.complete_to, NodeId{7});  // 5 is the last of the first pass
  EXPECT_EQ(a.complete_from, NodeId{5});
  EXPECT_EQ(a.complete_to, NodeId{3});
  EXPECT_FALSE(b.complete_to);
}

TEST(TopologyPlan, TwoNodeRing) {
  const Topology t = test::parse(federation("ring") + nodes(2) + edges({{0, 1}, {1, 0}}));
  const auto a = plan_for(t, 0), b = plan_for(t, 1);
  EXPECT_EQ(a.forward_to, Ids{1});
  EXPECT_EQ(a.complete_from, NodeId{1});
  EXPECT_FALSE(a.complete_to);
  EXPECT_EQ(b.complete_to, NodeId{0});
  EXPECT_FALSE(b.complete_from);
}

TEST(TopologyPlan, StarHubFitsAndSendsTheHeadBack) {
  std::vector<std::pair<int, int>> e;
  for (int i = 1; i <= 8; ++i) e.push_back({i, 0});
  const Topology t = test::parse(federation("star", "hub = 0") + nodes(9) + edges(e));
  const auto hub = plan_for(t, "0");
  EXPECT_EQ(hub.wait_for, (Ids{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(hub.send_head_to, (Ids{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(hub.forward_to, Ids{});
  EXPECT_TRUE(hub.fits_head);
  EXPECT_FALSE(hub.has_phase2());
  ASSERT_EQ(hub.sources.size(), 8u);
  for (const auto& [leaf, can_hold] : hub.sources) EXPECT_EQ(can_hold, Contributors{leaf}) << "a leaf holds only itself";
  for (NodeId leaf = 1; leaf <= 8; ++leaf) {
    const auto p = plan_for(t, leaf);
    EXPECT_EQ(p.wait_for, Ids{});
    EXPECT_EQ(p.forward_to, Ids{0});
    EXPECT_FALSE(p.fits_head);
    EXPECT_EQ(p.head_from, NodeId{0});
    EXPECT_TRUE(p.has_phase2());
    EXPECT_EQ(p.expected_contributors, range(0, 8));
    EXPECT_TRUE(p.expects(0, PlanMessage::Head));
    EXPECT_DOUBLE_EQ(p.return_deadline_seconds, 2 * kDefaultDeadlineSeconds) << "the hub's wait, then its own";
    EXPECT_FALSE(p.expects(0, PlanMessage::Knowledge));
  }
}

TEST(TopologyPlan, DiamondSinkWaitsForBothBranchesAndCountsTheSourceOnce) {
  const Topology t = test::parse(federation("graph") + nodes(4) + edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}}));
  const auto p = plan_all(t);
  EXPECT_EQ(p[0].forward_to, (Ids{1, 2}));
  EXPECT_EQ(p[1].wait_for, Ids{0});
  EXPECT_EQ(p[2].wait_for, Ids{0});
  EXPECT_EQ(p[3].wait_for, (Ids{1, 2}));
  EXPECT_EQ(p[3].forward_to, Ids{});
  EXPECT_EQ(p[3].expected_contributors, range(0, 3));
  EXPECT_EQ(p[1].expected_contributors, (Contributors{0, 1}));
  // 1 and 2 both carry 0's data to 3: merged they would overlap partially ({0,1} and {0,2}),
  // so the later one (2) relays 0's piece and its own summary instead.
  EXPECT_TRUE(p[0].forward_merged);
  EXPECT_TRUE(p[1].forward_merged);
  EXPECT_FALSE(p[2].forward_merged);
}

TEST(TopologyPlan, FeedbackEdgeBringsKnowledgeBackLate) {
  const Topology t = test::parse(federation("graph") + nodes(3) + edges({{0, 1}, {1, 2}}) +
                                 "[[edge]]\nfrom = 2\nto = 0\nfeedback = true\n");
  const auto p = plan_all(t);
  EXPECT_EQ(p[0].wait_for, Ids{});
  EXPECT_EQ(p[0].late_from, Ids{2});
  EXPECT_TRUE(p[0].has_phase2());
  EXPECT_EQ(p[0].expected_contributors, range(0, 2));
  EXPECT_EQ(p[2].feedback_to, Ids{0});
  EXPECT_EQ(p[2].forward_to, Ids{});
  EXPECT_EQ(p[1].expected_contributors, (Contributors{0, 1}));
  EXPECT_TRUE(p[0].expects(2, PlanMessage::Knowledge));
  EXPECT_EQ(p[0].sources, (std::map<NodeId, Contributors>{{2, range(0, 2)}}));
  EXPECT_DOUBLE_EQ(p[0].return_deadline_seconds, 3 * kDefaultDeadlineSeconds) << "1 and 2 wait first";
}

TEST(TopologyPlan, DescriptionsReadLikeTheSemantics) {
  const Topology diamond = test::parse(federation("graph") + nodes(3) + test::node(3, "name = \"sink\"") +
                                       edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}}));
  EXPECT_EQ(describe_plan(diamond, plan_for(diamond, 2)), "node 2: waits for 0; relays to 3; fits its head; finished after phase 1");
  EXPECT_EQ(describe_plan(diamond, plan_for(diamond, 3)), "node 3 (sink): waits for 1, 2; fits its head; finished after phase 1");
  const Topology ring = test::parse(federation("ring") + nodes(3) + edges({{0, 1}, {1, 2}, {2, 0}}));
  EXPECT_EQ(describe_plan(ring, plan_for(ring, 0)),
            "node 0: forwards to 1; fits its head; refits on the complete knowledge from 2; passes the complete "
            "knowledge to 1; finished after phase 2");
  EXPECT_EQ(describe_plan(ring, plan_for(ring, 2)),
            "node 2: waits for 1; fits its head; passes the complete knowledge to 0; finished after phase 1");
  const Topology star = test::parse(federation("star", "hub = 0") + nodes(3) + edges({{1, 0}, {2, 0}}));
  EXPECT_EQ(describe_plan(star, plan_for(star, 0)),
            "node 0: waits for 1, 2; fits its head; sends the head to 1, 2; finished after phase 1");
  EXPECT_EQ(describe_plan(star, plan_for(star, 1)), "node 1: forwards to 0; takes the head of 0; finished after phase 2");
}

TEST(TopologyPlan, UnknownIdIsAnError) {
  const Topology t = test::parse(federation("linear") + nodes(2) + edges({{0, 1}}));
  EXPECT_THROW(plan_for(t, NodeId{5}), InputError);
  EXPECT_THROW(plan_for(t, std::string("n5")), InputError);
}

// A node refuses Knowledge whose contributors lie outside plan.sources of its sender: nothing a
// genuine sender forwards may.
void expect_within_sources(const NodePlan& at, NodeId from, const std::vector<Contributors>& pieces) {
  const auto it = at.sources.find(from);
  ASSERT_NE(it, at.sources.end()) << "node " << at.id << " has no sources for " << from;
  for (const auto& piece : pieces)
    EXPECT_TRUE(std::includes(it->second.begin(), it->second.end(), piece.begin(), piece.end()))
        << "node " << at.id << " would refuse a genuine piece from " << from;
}

// Plays the one-shot run of a graph with sets of contributors standing for knowledge: every node
// combines what it holds the way the contributor rules do (pieces inside another are dropped),
// and the test fails if two pieces that meet overlap partially (one would be lost) or if a node
// does not end up with exactly its expected contributors.
// Under secure aggregation the collector's must be everyone, and the complete knowledge it sends
// must reach every other node once.
void check_merges_lose_nothing(const Topology& t, const PlanOptions& options) {
  const auto plans = plan_all(t, options);
  std::map<NodeId, const NodePlan*> plan;
  for (const auto& p : plans) plan[p.id] = &p;
  std::map<NodeId, std::vector<Contributors>> outbox;  // what each node sends (phase 1)
  std::map<NodeId, std::vector<Contributors>> holds;   // after phase 1

  auto combine = [&](std::vector<Contributors> pieces, NodeId at) {
    std::vector<Contributors> kept;
    for (size_t i = 0; i < pieces.size(); ++i) {
      bool inside = false;
      for (size_t j = 0; j < pieces.size() && !inside; ++j)
        inside = j != i && std::includes(pieces[j].begin(), pieces[j].end(), pieces[i].begin(), pieces[i].end()) &&
                 (pieces[j] != pieces[i] || j < i);
      if (!inside) kept.push_back(pieces[i]);
    }
    for (size_t i = 0; i < kept.size(); ++i)
      for (size_t j = i + 1; j < kept.size(); ++j)
        for (NodeId c : kept[i])
          EXPECT_EQ(kept[j].count(c), 0u) << "node " << at << ": pieces overlap partially on " << c;
    return kept;
  };

  // Topological order: repeatedly run any node whose inputs have all been sent.
  std::set<NodeId> done;
  while (done.size() < plans.size()) {
    bool progressed = false;
    for (const auto& p : plans) {
      if (done.count(p.id)) continue;
      if (!std::all_of(p.wait_for.begin(), p.wait_for.end(), [&](NodeId u) { return done.count(u) > 0; })) continue;
      std::vector<Contributors> in{{p.id}};
      for (NodeId u : p.wait_for) {
        expect_within_sources(p, u, outbox[u]);
        in.insert(in.end(), outbox[u].begin(), outbox[u].end());
      }
      holds[p.id] = combine(in, p.id);
      Contributors all;
      for (const auto& c : holds[p.id]) all.insert(c.begin(), c.end());
      if (p.forward_merged) outbox[p.id] = {all};
      else outbox[p.id] = holds[p.id];
      done.insert(p.id);
      progressed = true;
    }
    ASSERT_TRUE(progressed) << "the plans deadlock";
  }
  for (const auto& p : plans) {
    std::vector<Contributors> in = holds[p.id];
    for (NodeId s : p.late_from) {
      expect_within_sources(p, s, outbox[s]);
      in.insert(in.end(), outbox[s].begin(), outbox[s].end());
    }
    Contributors all;
    for (const auto& c : combine(in, p.id)) all.insert(c.begin(), c.end());
    if (p.complete_from) all = p.expected_contributors;  // checked below: the total comes
    EXPECT_EQ(all, p.expected_contributors) << "node " << p.id;
  }
  if (!options.secure_aggregation) return;
  std::vector<NodeId> collectors;
  for (const auto& p : plans)
    if (p.fits_head) collectors.push_back(p.id);
  ASSERT_EQ(collectors.size(), 1u);
  EXPECT_FALSE(plan[collectors[0]]->complete_from);
  std::set<NodeId> reached{collectors[0]};
  for (auto to = plan[collectors[0]]->complete_to; to; to = plan[*to]->complete_to) {
    ASSERT_TRUE(reached.insert(*to).second) << "the complete knowledge comes to " << *to << " twice";
    EXPECT_TRUE(plan[*to]->expects(*plan[*to]->complete_from, PlanMessage::Complete));
  }
  EXPECT_EQ(reached.size(), plans.size());
}

TEST(TopologyPlan, GraphMergesNeverLoseOrDoubleCountAContributor) {
  check_merges_lose_nothing(test::parse(federation("graph") + nodes(4) + edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}})));
  // Two diamonds stacked, a wide fan-in, and a multitree (which may merge everywhere).
  check_merges_lose_nothing(test::parse(federation("graph") + nodes(7) +
                                        edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {3, 5}, {4, 6}, {5, 6}})));
  check_merges_lose_nothing(test::parse(federation("graph") + nodes(6) +
                                        edges({{0, 5}, {1, 5}, {2, 5}, {3, 5}, {4, 5}, {0, 1}, {1, 2}})));
  const Topology tree = test::parse(federation("graph") + nodes(5) + edges({{0, 2}, {1, 2}, {2, 3}, {2, 4}}));
  check_merges_lose_nothing(tree);
  for (const auto& p : plan_all(tree)) EXPECT_TRUE(p.forward_merged) << p.id;
  // With feedback edges closing cycles.
  check_merges_lose_nothing(test::parse(federation("graph") + nodes(4) + edges({{0, 1}, {0, 2}, {1, 3}, {2, 3}}) +
                                        "[[edge]]\nfrom = 3\nto = 0\nfeedback = true\n[[edge]]\nfrom = 3\nto = 1\n"
                                        "feedback = true\n"));
  // Random graphs from the builder, with a feedback edge added from the last node to the first;
  // without it, under secure aggregation too (its sinks sending on to one collector).
  PlanOptions masked;
  masked.secure_aggregation = true;
  for (int n = 3; n <= 14; ++n)
    for (uint64_t seed = 0; seed < 12; ++seed) {
      TopologyBuildOptions o;
      o.mode = TopologyMode::Graph;
      o.nodes = n;
      o.seed = seed;
      Topology t = build_topology(o);
      SCOPED_TRACE("graph of " + std::to_string(n) + " nodes, seed " + std::to_string(seed));
      check_merges_lose_nothing(t);
      check_merges_lose_nothing(t, masked);
      t.edges.push_back({static_cast<NodeId>(n - 1), 0, true, 0});
      bool closes = true;
      try {
        validate_topology(t, false);
      } catch (const InputError&) {
        closes = false;  // the last node is not below node 0 in this graph
      }
      if (closes) check_merges_lose_nothing(t);
    }
}

TEST(PlanProgress, ChainNodeWaitsThenFinishes) {
  const Topology t = test::parse(federation("linear") + nodes(3) + edges({{0, 1}, {1, 2}}));
  PlanProgress source(plan_for(t, 0));
  EXPECT_TRUE(source.ready_to_merge());
  source.merged();
  EXPECT_TRUE(source.finished());

  PlanProgress mid(plan_for(t, 1));
  EXPECT_FALSE(mid.ready_to_merge());
  EXPECT_EQ(mid.awaiting(), Ids{0});
  EXPECT_FALSE(mid.received(2, PlanMessage::Knowledge));  // not an in-neighbour
  EXPECT_FALSE(mid.received(0, PlanMessage::Head));
  EXPECT_FALSE(mid.ready_to_merge());
  EXPECT_TRUE(mid.received(0, PlanMessage::Knowledge));
  EXPECT_TRUE(mid.received(0, PlanMessage::Knowledge));  // a repeat changes nothing
  EXPECT_TRUE(mid.ready_to_merge());
  EXPECT_FALSE(mid.ready_to_complete());
  mid.merged();
  EXPECT_TRUE(mid.finished());
  EXPECT_EQ(mid.missing(), Ids{});
  EXPECT_EQ(mid.awaiting(), Ids{});
}

TEST(PlanProgress, DeadlineGivesUpOnSilentSenders) {
  const Topology t = test::parse(federation("graph") + nodes(4) + edges({{0, 3}, {1, 3}, {2, 3}}));
  PlanProgress sink(plan_for(t, 3));
  EXPECT_TRUE(sink.received(1, PlanMessage::Knowledge));
  EXPECT_EQ(sink.awaiting(), (Ids{0, 2}));
  sink.deadline_passed();
  EXPECT_TRUE(sink.ready_to_merge());
  EXPECT_EQ(sink.missing(), (Ids{0, 2}));
  sink.merged();
  EXPECT_TRUE(sink.finished());
  // A late arrival is still accepted (the runtime merges it and refits) and no longer missing.
  EXPECT_TRUE(sink.received(2, PlanMessage::Knowledge));
  EXPECT_EQ(sink.missing(), Ids{0});
}

TEST(PlanProgress, StarLeafWaitsForTheHead) {
  const Topology t = test::parse(federation("star", "hub = 0") + nodes(3) + edges({{1, 0}, {2, 0}}));
  PlanProgress leaf(plan_for(t, 1));
  EXPECT_TRUE(leaf.ready_to_merge());
  EXPECT_TRUE(leaf.received(0, PlanMessage::Head));  // early: kept for phase 2
  leaf.merged();
  EXPECT_EQ(leaf.stage(), PlanProgress::Stage::Return);
  EXPECT_TRUE(leaf.ready_to_complete());
  leaf.completed();
  EXPECT_TRUE(leaf.finished());

  PlanProgress other(plan_for(t, 2));
  other.merged();
  EXPECT_FALSE(other.ready_to_complete());
  EXPECT_EQ(other.awaiting(), Ids{0});
  other.deadline_passed();
  EXPECT_TRUE(other.ready_to_complete());
  EXPECT_EQ(other.missing(), Ids{0});
  other.completed();
  EXPECT_TRUE(other.finished());

  PlanProgress hub(plan_for(t, 0));
  EXPECT_FALSE(hub.received(1, PlanMessage::Head));
  EXPECT_TRUE(hub.received(1, PlanMessage::Knowledge));
  EXPECT_TRUE(hub.received(2, PlanMessage::Knowledge));
  EXPECT_TRUE(hub.ready_to_merge());
  hub.merged();
  EXPECT_TRUE(hub.finished());
}

TEST(PlanProgress, RingNodeTakesTheCompleteKnowledge) {
  const Topology t = test::parse(federation("ring") + nodes(3) + edges({{0, 1}, {1, 2}, {2, 0}}));
  PlanProgress first(plan_for(t, 0));
  EXPECT_TRUE(first.ready_to_merge());
  first.merged();
  EXPECT_FALSE(first.finished());
  EXPECT_FALSE(first.received(2, PlanMessage::Knowledge));
  EXPECT_TRUE(first.received(2, PlanMessage::Complete));
  EXPECT_TRUE(first.ready_to_complete());
  first.completed();
  EXPECT_TRUE(first.finished());
  PlanProgress last(plan_for(t, 2));
  EXPECT_TRUE(last.received(1, PlanMessage::Knowledge));
  last.merged();
  EXPECT_TRUE(last.finished());
}

}  // namespace
}  // namespace fednode
