// The node machine alone: events in, actions out, no sockets, files or clocks. What the
// networked node and the simulator both rely on: a node acts once its inputs are in, gives up
// on a sender at its deadline, refits when that sender's knowledge comes late, and a star leaf
// takes its hub's head, or waits a deadline for a refit that covers its own data.
#include "core/rng.h"
#include "node/admission.h"
#include "node/machine.h"
#include "node/state_store.h"
#include "node/step.h"
#include "topology/builders.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace fednode {
namespace {

Features blobs(int n_per_class, int classes, int d, uint64_t seed) {
  Rng rng(seed);
  Features f;
  f.num_classes = classes;
  f.X.resize(n_per_class * classes, d);
  for (int c = 0; c < classes; ++c)
    for (int i = 0; i < n_per_class; ++i) {
      for (int j = 0; j < d; ++j) f.X(c * n_per_class + i, j) = static_cast<float>(3.0 * (j % classes == c) + rng.normal());
      f.y.push_back(c);
    }
  return f;
}

// A federation of FedCGS machines over a built topology, each with its own blobs.
struct Federation {
  Topology topology;
  std::vector<NodePlan> plans;
  std::unique_ptr<Method> method;
  std::vector<Features> local;
  std::vector<std::unique_ptr<Machine>> machines;

  Federation(TopologyMode mode, int n, double deadline = 5, const std::string& method_name = "fedcgs") {
    TopologyBuildOptions b;
    b.mode = mode;
    b.nodes = n;
    b.method = method_name;
    b.deadline_seconds = deadline;
    topology = build_topology(b);
    plans = plan_all(topology);
    MethodOptions o;
    o.method = method_name;
    o.fedpft.gmm.components = 2;
    o.fedpft.head_fit = FedPftOptions::HeadFit::Sgd;  // the hub that draws on arrival (below)
    o.fedpft.head.lr = 1e-2;  // a short, fixed recipe: these tests are about the machine
    o.fedpft.head.epochs = 3;
    o.fedpft.head.min_steps = 0;
    method = make_method(o);
    for (int i = 0; i < n; ++i) local.push_back(blobs(20, 3, 4, 100 + i));
    for (int i = 0; i < n; ++i) machines.push_back(std::make_unique<Machine>(config(i)));
    for (auto& m : machines) m->restart(false, false, nullptr, {}, 0.0);
  }
  // Node i's settings: a second machine made from them is node i started again.
  MachineConfig config(int i) const {
    MachineConfig m;
    m.topology = &topology;
    m.plan = plans[i];
    m.method = method.get();
    m.local = &local[i];
    m.ctx.node = static_cast<NodeId>(i);
    m.ctx.backbone_fingerprint = "test";
    m.ctx.num_classes = 3;
    m.ctx.dim = 4;
    return m;
  }
  Machine& operator[](int i) { return *machines[i]; }
};

std::vector<Action> of_kind(const Actions& actions, Action::Kind kind) {
  std::vector<Action> out;
  for (const auto& a : actions)
    if (a.kind == kind) out.push_back(a);
  return out;
}

Payload payload_of(const Action& send) {
  if (send.knowledge) return Payload(*send.knowledge);
  return Payload(HeadMessage{send.head, send.contributors, "test"});
}

// What a machine is handed for another's Send, as a driver hands it: its knowledge, or its head.
Actions hand(Machine& to, NodeId from, const Action& send, double now = 0.0) {
  if (send.knowledge) return to.accept_knowledge(from, 1, send.carries, send.knowledge, true);
  return to.accept_head(from, HeadOffer{send.head, send.contributors, send.class_means}, true, now);
}

TEST(Machine, AChainNodeActsOnceItsInputIsInAndForwardsWhatItMerged) {
  Federation f(TopologyMode::Linear, 3);
  EXPECT_TRUE(f[1].tick(0.0).empty()) << "node 1 waits for node 0";
  const Actions first = f[0].tick(0.0);
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(first[0].kind, Action::Kind::HeadChanged);
  EXPECT_EQ(first[1].kind, Action::Kind::Send);
  EXPECT_EQ(first[1].to, 1u);
  EXPECT_EQ(first[1].counted_bytes, first[1].knowledge->payload_bytes(false));
  EXPECT_EQ(first[2].kind, Action::Kind::PhaseDone);
  EXPECT_EQ(first[3].kind, Action::Kind::Say) << "said once the phase is marked done";
  EXPECT_TRUE(f[0].plan_done());
  EXPECT_EQ(Admission(f[1], nullptr).refusal(0, MessageType::Knowledge, payload_of(first[1])), "");
  EXPECT_NE(Admission(f[2], nullptr).refusal(0, MessageType::Knowledge, payload_of(first[1])), "")
      << "node 0 does not send to node 2";
  EXPECT_TRUE(hand(f[1], 0, first[1], 0.0).empty());
  EXPECT_TRUE(Admission(f[1], nullptr).is_repeat(0, MessageType::Knowledge, payload_of(first[1])));
  const Actions second = f[1].tick(0.0);
  const auto sends = of_kind(second, Action::Kind::Send);
  ASSERT_EQ(sends.size(), 1u);
  EXPECT_EQ(sends[0].knowledge->contributors, (Contributors{0, 1}));
  EXPECT_EQ(f[1].outcome().contributors, (Contributors{0, 1}));
  EXPECT_TRUE(f[1].outcome().missing.empty());
}

TEST(Machine, ASenderPastItsDeadlineIsGivenUpOnAndItsLateKnowledgeRefitsTheHead) {
  Federation f(TopologyMode::Linear, 2, /*deadline=*/5);
  EXPECT_TRUE(f[1].tick(4.9).empty());
  const Actions alone = f[1].tick(5.1);
  EXPECT_EQ(of_kind(alone, Action::Kind::HeadChanged).size(), 1u);
  EXPECT_TRUE(f[1].plan_done());
  EXPECT_EQ(f[1].outcome().contributors, (Contributors{1}));
  EXPECT_EQ(f[1].outcome().missing, (std::vector<NodeId>{0}));
  EXPECT_EQ(f[1].never_delivered(), (std::vector<NodeId>{0}));

  const Actions sent = f[0].tick(0.0);
  const auto to_one = of_kind(sent, Action::Kind::Send);
  ASSERT_EQ(to_one.size(), 1u);
  hand(f[1], 0, to_one[0], 6.0);
  EXPECT_TRUE(f[1].refit_due());
  const Actions refit = f[1].tick(6.0);
  EXPECT_EQ(of_kind(refit, Action::Kind::HeadChanged).size(), 1u);
  EXPECT_FALSE(f[1].refit_due());
  EXPECT_EQ(f[1].outcome().contributors, (Contributors{0, 1}));
  EXPECT_TRUE(f[1].never_delivered().empty()) << "a sender that delivered late is no longer missing";
}

TEST(Machine, AStarLeafTakesItsHubsHead) {
  Federation f(TopologyMode::Star, 3);
  for (int leaf : {1, 2}) {
    const auto sends = of_kind(f[leaf].tick(0.0), Action::Kind::Send);
    ASSERT_EQ(sends.size(), 1u);
    EXPECT_FALSE(f[leaf].outcome().head) << "a leaf does not fit a head in phase 1";
    hand(f[0], static_cast<NodeId>(leaf), sends[0], 0.0);
  }
  const auto heads = of_kind(f[0].tick(0.0), Action::Kind::Send);
  ASSERT_EQ(heads.size(), 2u);
  EXPECT_EQ(heads[0].carries, PlanMessage::Head);
  EXPECT_EQ(heads[0].counted_bytes, head_bytes(*heads[0].head));
  hand(f[1], 0, heads[0], 0.0);
  f[1].tick(0.0);
  EXPECT_TRUE(f[1].plan_done());
  EXPECT_EQ(f[1].outcome().head, heads[0].head);
  EXPECT_EQ(f[1].outcome().contributors, (Contributors{0, 1, 2}));
}

std::string saved(const Head& head) {
  std::ostringstream out;
  head.save(out);
  return out.str();
}

// A 5-node star's hub given its four leaves' knowledge in ascending order, and a second copy of
// it given the same in `order`; both have fitted their heads.
struct TwoHubs {
  std::vector<Action> sends;  // leaf i's at i - 1
  std::unique_ptr<Machine> other;
};
TwoHubs feed_two_hubs(Federation& f, std::initializer_list<int> order) {
  TwoHubs t;
  for (int leaf = 1; leaf < 5; ++leaf) t.sends.push_back(of_kind(f[leaf].tick(0.0), Action::Kind::Send).at(0));
  t.other = std::make_unique<Machine>(f.config(0));
  t.other->restart(false, false, nullptr, {}, 0.0);
  for (int leaf = 1; leaf < 5; ++leaf)
    hand(f[0], static_cast<NodeId>(leaf), t.sends[leaf - 1], 0.0);
  for (int leaf : order)
    hand(*t.other, static_cast<NodeId>(leaf), t.sends[leaf - 1], 0.0);
  EXPECT_EQ(f[0].folded_count(), 4u);
  EXPECT_EQ(t.other->folded_count(), 4u);
  EXPECT_TRUE(t.other->holds_knowledge(3, PlanMessage::Knowledge, t.sends[2].knowledge->contributors))
      << "a folded piece is still known";
  f[0].tick(0.0);
  t.other->tick(0.0);
  EXPECT_TRUE(f[0].outcome().head && t.other->outcome().head);
  return t;
}

// A hub holds one running sum, not a piece per leaf, and the order its leaves answer in does not
// change a bit of its head.
TEST(Machine, AStarHubFoldsItsLeavesStatisticsInAnyOrderAndFitsTheSameHead) {
  Federation f(TopologyMode::Star, 5);
  const TwoHubs t = feed_two_hubs(f, {4, 2, 1, 3});
  ASSERT_TRUE(f[0].outcome().head && t.other->outcome().head);
  EXPECT_EQ(t.other->outcome().contributors, (Contributors{0, 1, 2, 3, 4}));
  EXPECT_EQ(saved(*t.other->outcome().head), saved(*f[0].outcome().head));
}

// FedPFT's mixtures do not add up, but a hub sends nothing on: it draws each leaf's synthetic
// features as they come and keeps those, not the mixtures, and its head is bit for bit the one
// fitted on the pieces themselves, in whatever order they came.
TEST(Machine, AFedPftHubDrawsItsLeavesSamplesOnArrivalAndFitsTheSameHead) {
  Federation f(TopologyMode::Star, 5, 5, "fedpft");
  const TwoHubs t = feed_two_hubs(f, {3, 1, 4, 2});
  ASSERT_TRUE(f[0].outcome().head && t.other->outcome().head);
  EXPECT_EQ(f[0].outcome().contributors, (Contributors{0, 1, 2, 3, 4}));
  EXPECT_EQ(saved(*t.other->outcome().head), saved(*f[0].outcome().head));

  std::vector<Knowledge> pieces;
  for (const Action& a : t.sends) pieces.push_back(*a.knowledge);
  const MachineConfig hub = f.config(0);
  const auto direct = f.method->fit_head(KnowledgeList(pieces), hub.local, hub.ctx);
  EXPECT_EQ(saved(*direct), saved(*f[0].outcome().head));

  Federation chain(TopologyMode::Linear, 3, 5, "fedpft");
  const auto from_zero = of_kind(chain[0].tick(0.0), Action::Kind::Send).at(0);
  hand(chain[1], 0, from_zero, 0.0);
  EXPECT_EQ(chain[1].folded_count(), 0u) << "node 1 merges what it received and sends it on";
}

TEST(Machine, OnlyPiecesNothingWillWantApartAreFolded) {
  Federation f(TopologyMode::Linear, 3);
  const auto from_zero = of_kind(f[0].tick(0.0), Action::Kind::Send).at(0);
  hand(f[1], 0, from_zero, 0.0);
  EXPECT_EQ(f[1].folded_count(), 1u) << "node 0 can send only its own data, and only node 0 can send it";
  const auto from_one = of_kind(f[1].tick(0.0), Action::Kind::Send).at(0);
  hand(f[2], 1, from_one, 0.0);
  EXPECT_EQ(f[2].folded_count(), 0u) << "node 1 sends {0, 1}: held as it is";
  f[2].tick(0.0);
  EXPECT_EQ(f[2].outcome().contributors, (Contributors{0, 1, 2}));
  Federation ring(TopologyMode::Ring, 3);
  const auto ring_zero = of_kind(ring[0].tick(0.0), Action::Kind::Send).at(0);
  hand(ring[1], 0, ring_zero, 0.0);
  EXPECT_EQ(ring[1].folded_count(), 0u) << "a ring's complete knowledge must be able to replace it";
}

TEST(Machine, ALeafLeftOutOfItsHubsHeadWaitsForTheRefitUnlessTheHubRefusedIt) {
  for (bool refused : {false, true}) {
    Federation f(TopologyMode::Star, 3, /*deadline=*/5);
    const auto from_two = of_kind(f[2].tick(0.0), Action::Kind::Send);
    f[1].tick(0.0);
    hand(f[0], 2, from_two[0], 0.0);
    const auto heads = of_kind(f[0].tick(6.0), Action::Kind::Send);  // gave up on leaf 1
    ASSERT_EQ(heads.size(), 2u);
    EXPECT_EQ(heads[0].contributors, (Contributors{0, 2}));
    if (refused) f[1].peer_refused(0);
    hand(f[1], 0, heads[0], 1.0);
    f[1].tick(1.0);
    EXPECT_EQ(f[1].plan_done(), refused) << "waits for a refit only if the hub took its knowledge";
    f[1].tick(6.5);
    EXPECT_TRUE(f[1].plan_done()) << "and no longer than a deadline";
    EXPECT_EQ(f[1].outcome().contributors, (Contributors{0, 2}));
  }
}

TEST(Machine, ARestartWithPhaseOneDoneDoesNotMergeAgain) {
  Federation f(TopologyMode::Linear, 2);
  const auto sends = of_kind(f[0].tick(0.0), Action::Kind::Send);
  const auto head = f[0].outcome().head;
  Machine again(f.config(0));
  again.restart(true, false, head, {0}, 0.0);
  EXPECT_TRUE(again.plan_done());
  EXPECT_TRUE(again.tick(1.0).empty());
  EXPECT_EQ(again.outcome().head, head);
}

}  // namespace
}  // namespace fednode
