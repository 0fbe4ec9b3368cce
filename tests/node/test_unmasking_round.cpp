// Secure aggregation's unmasking round on a star, machine by machine (docs/privacy.md,
// "Dropouts"): a leaf confirms a split to the other survivors before it reveals a seed, answers
// one split only, and none whose survivors' tags do not confirm it; a hub whose survivor does not
// answer discards what it cannot read, and a restarted hub takes its decision back from the
// answers it stored.
#include "../common/labelled_blobs.h"
#include "node/member.h"
#include "node/secure_aggregation.h"
#include "node/wire_message.h"
#include "topology/builders.h"

#include <gtest/gtest.h>

namespace fednode {
namespace {

// A star of FedCGS machines under secure aggregation: hub 0, leaves 1..n-1.
struct Star {
  Topology topology;
  std::vector<NodePlan> plans;
  MethodOptions options;
  std::unique_ptr<Method> method;
  std::vector<Features> local;
  std::map<NodeId, PublicKey> keys;
  std::vector<RunningMember> members;

  explicit Star(int n) {
    TopologyBuildOptions b;
    b.mode = TopologyMode::Star;
    b.nodes = n;
    b.method = "fedcgs";
    b.deadline_seconds = 5;
    topology = build_topology(b);
    options.method = "fedcgs";
    options.secure_aggregation = SecureAggregation::All;
    plans = plan_all(topology, plan_options(options));
    method = make_method(options);
    for (int i = 0; i < n; ++i) local.push_back(test::labelled_blobs(60, 4, 3, 100 + static_cast<uint64_t>(i)));
    for (int i = 0; i < n; ++i) keys[static_cast<NodeId>(i)] = simulation_identity(1, static_cast<NodeId>(i)).public_key();
    for (int i = 0; i < n; ++i) members.push_back(make(i));
  }
  // Node i as both drivers assemble it (node/member.h); started, unless `restarted`.
  RunningMember make(int i, bool restarted = false) const {
    const auto id = static_cast<NodeId>(i);
    MemberInputs in;
    in.topology = &topology;
    in.plan = plans[static_cast<size_t>(i)];
    in.method = method.get();
    in.options = &options;
    in.local = &local[static_cast<size_t>(i)];
    in.seed = 1;
    in.backbone_fingerprint = "test";
    in.num_classes = 3;
    in.dim = 4;
    in.masks = member_masks(topology, in.plan, options, simulation_identity(1, id), id, keys, simulation_run_id(1));
    RunningMember member = start_member(assemble_member(std::move(in)));
    if (!restarted) member.machine->restart(false, false, nullptr, {}, 0.0);
    return member;
  }
  Admission& operator[](int i) { return *members[static_cast<size_t>(i)].admission; }
  Machine& machine(int i) { return *members[static_cast<size_t>(i)].machine; }
};

std::vector<Action> sends(const Actions& actions, MessageType type) {
  std::vector<Action> out;
  for (const auto& a : actions)
    if (a.kind == Action::Kind::Send && wire_type(a) == type) out.push_back(a);
  return out;
}

const Payload& payload_of(const Action& send) { return wire_message(send).payload; }

// Leaf `i`'s masked statistics, as its phase 1 sends them.
std::shared_ptr<const Knowledge> piece_of(Star& s, int i) {
  const auto out = sends(s.machine(i).tick(0.0), MessageType::Knowledge);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0).knowledge;
}

// What leaf `i` answers to `request` (refusal() checked first, as a node does).
std::vector<Action> answer(Star& s, int i, const UnmaskRequest& request, double now = 6.0) {
  const Payload p(request);
  EXPECT_EQ(s[i].refusal(0, MessageType::UnmaskRequest, p), "") << "leaf " << i;
  return sends(s[i].accept(0, 1, MessageType::UnmaskRequest, p, true, now), MessageType::UnmaskReply);
}

const UnmaskReply& reply_of(const std::vector<Action>& answers) { return std::get<UnmaskReply>(payload_of(answers.at(0))); }

TEST(UnmaskingRound, ALeafAnswersOneSplitOfSurvivorsOnly) {
  Star s(4);
  const UnmaskRequest split{{1, 2}, {3}, {}};
  // First the consistency step: tags for the other survivors, no seed.
  const UnmaskReply tags1 = reply_of(answer(s, 1, split));
  const UnmaskReply tags2 = reply_of(answer(s, 2, split));
  ASSERT_TRUE(tags1.consistency());
  EXPECT_EQ(tags1.tags.size(), 1u);
  EXPECT_TRUE(tags1.pair_seeds.empty());
  // Then, with the other survivors' tags, the seeds.
  const std::map<NodeId, UnmaskReply> confirmed{{1, tags1}, {2, tags2}};
  const UnmaskReply seeds = reply_of(answer(s, 1, tagged_request(split, 1, confirmed)));
  EXPECT_FALSE(seeds.consistency());
  EXPECT_EQ(seeds.pair_seeds.size(), 1u);
  EXPECT_EQ(seeds.pair_seeds.count(3), 1u);
  // Another split would give the hub node 3's self seed from it as well as every pair seed with it.
  const Payload other(UnmaskRequest{{1, 2, 3}, {}, {}});
  EXPECT_NE(s[1].refusal(0, MessageType::UnmaskRequest, other).find("names other survivors"), std::string::npos);
  // The same request again (the hub lost the answer in a crash) is answered again.
  const Payload first(split);
  EXPECT_FALSE(s[1].is_repeat(0, MessageType::UnmaskRequest, first));
  EXPECT_EQ(s[1].refusal(0, MessageType::UnmaskRequest, first), "");
  // Only from its hub, naming it among the survivors, splitting exactly the group, and with more
  // than half the leaves surviving.
  EXPECT_NE(s[1].refusal(2, MessageType::UnmaskRequest, first), "");
  EXPECT_NE(s[2].refusal(0, MessageType::UnmaskRequest, Payload(UnmaskRequest{{1, 3}, {2}, {}})).find("not among the survivors"),
            std::string::npos);
  EXPECT_NE(s[2].refusal(0, MessageType::UnmaskRequest, Payload(UnmaskRequest{{1, 2}, {}, {}})).find("not the mask group"),
            std::string::npos);
  Star five(5);
  EXPECT_NE(five[1].refusal(0, MessageType::UnmaskRequest, Payload(UnmaskRequest{{1, 2}, {3, 4}, {}})).find("more than half"),
            std::string::npos);
  // A hub takes no request, a leaf no answer.
  EXPECT_NE(s[0].refusal(1, MessageType::UnmaskRequest, first), "");
  EXPECT_NE(s[1].refusal(2, MessageType::UnmaskReply, Payload(seeds)), "");
}

// The attack a malicious hub would make without the consistency step (docs/privacy.md,
// "Dropouts"): tell leaf 1 it survived and every other leaf that 1 dropped, so that they reveal
// their pair seeds with 1 and 1 its self seed. The others' tags confirm their split, not 1's, and
// the hub cannot make 2's or 3's tag to 1 for 1's split: leaf 1 reveals nothing.
TEST(UnmaskingRound, ALeafToldAnotherSplitThanTheOthersRevealsNoSeed) {
  Star s(5);
  const UnmaskRequest told_1{{1, 2, 3}, {4}, {}};
  const UnmaskRequest told_others{{2, 3, 4}, {1}, {}};
  std::map<NodeId, UnmaskReply> theirs;
  for (int leaf : {2, 3, 4}) theirs[static_cast<NodeId>(leaf)] = reply_of(answer(s, leaf, told_others));
  const UnmaskReply ones = reply_of(answer(s, 1, told_1));
  // The others go on among themselves: their tags agree.
  EXPECT_EQ(s[2].refusal(0, MessageType::UnmaskRequest, Payload(tagged_request(told_others, 2, theirs))), "");
  // Leaf 1 is handed the tags 2 and 3 made (for the other split), then its own tags reflected back.
  UnmaskRequest forged = told_1;
  forged.tags = {theirs[2].tags[0], theirs[3].tags[0]};
  EXPECT_NE(s[1].refusal(0, MessageType::UnmaskRequest, Payload(forged)).find("does not confirm this split"), std::string::npos);
  forged.tags = ones.tags;
  EXPECT_NE(s[1].refusal(0, MessageType::UnmaskRequest, Payload(forged)).find("does not confirm this split"), std::string::npos);
  // Handed over without refusal() (in memory), it still answers nothing.
  EXPECT_TRUE(sends(s[1].accept(0, 2, MessageType::UnmaskRequest, Payload(forged), true, 6.0), MessageType::UnmaskReply).empty());
}

TEST(UnmaskingRound, AHubWhoseSurvivorDoesNotAnswerDiscardsWhatItCannotRead) {
  Star s(4);
  for (int leaf : {1, 2}) s[0].accept(static_cast<NodeId>(leaf), 1, MessageType::Knowledge, Payload(*piece_of(s, leaf)), true, 0.0);
  // Leaf 3 never sends: past the deadline the hub asks 1 and 2 to confirm the split.
  const auto asked = sends(s.machine(0).tick(6.0), MessageType::UnmaskRequest);
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(std::get<UnmaskRequest>(payload_of(asked[0])).dropped, Contributors{3});
  EXPECT_TRUE(std::get<UnmaskRequest>(payload_of(asked[0])).tags.empty());
  // Knowledge from the dropped leaf is refused from now on: the seeds about to come would read it.
  EXPECT_NE(s[0].refusal(3, MessageType::Knowledge, Payload(*piece_of(s, 3))).find("declared dropped"), std::string::npos);
  // Leaf 1 confirms, leaf 2 never does.
  const auto confirmed = answer(s, 1, std::get<UnmaskRequest>(payload_of(asked[0])));
  ASSERT_EQ(confirmed.size(), 1u);
  EXPECT_EQ(s[0].refusal(1, MessageType::UnmaskReply, payload_of(confirmed[0])), "");
  s[0].accept(1, 2, MessageType::UnmaskReply, payload_of(confirmed[0]), true, 6.5);
  EXPECT_TRUE(sends(s.machine(0).tick(10.0), MessageType::UnmaskRequest).empty());  // no seeds asked before everyone confirmed
  EXPECT_TRUE(sends(s.machine(0).tick(10.0), MessageType::Head).empty());  // still within the round's deadline
  const auto heads = sends(s.machine(0).tick(12.0), MessageType::Head);
  ASSERT_FALSE(heads.empty());
  EXPECT_EQ(heads[0].contributors, Contributors{0});
  EXPECT_EQ(s.machine(0).outcome().discarded_from, (std::vector<NodeId>{1, 2}));
}

TEST(UnmaskingRound, ARestartedHubTakesItsDecisionBackFromTheAnswersItHolds) {
  Star s(4);
  std::vector<std::shared_ptr<const Knowledge>> pieces;
  for (int leaf : {1, 2}) {
    pieces.push_back(piece_of(s, leaf));
    s[0].accept(static_cast<NodeId>(leaf), 1, MessageType::Knowledge, Payload(*pieces.back()), true, 0.0);
  }
  const auto asked = sends(s.machine(0).tick(6.0), MessageType::UnmaskRequest);
  ASSERT_EQ(asked.size(), 2u);
  std::vector<Payload> confirmations;
  for (int leaf : {1, 2}) {
    confirmations.push_back(payload_of(answer(s, leaf, std::get<UnmaskRequest>(payload_of(asked[static_cast<size_t>(leaf - 1)]))).at(0)));
    s[0].accept(static_cast<NodeId>(leaf), 2, MessageType::UnmaskReply, confirmations.back(), true, 6.1);
  }
  const auto tagged = sends(s.machine(0).tick(6.2), MessageType::UnmaskRequest);
  ASSERT_EQ(tagged.size(), 2u);
  const auto seeds1 = answer(s, 1, std::get<UnmaskRequest>(payload_of(tagged[0])), 6.3);
  ASSERT_FALSE(reply_of(seeds1).consistency());
  // The hub is killed and started again: what it stored comes back, the confirmations and leaf
  // 1's seeds included.
  RunningMember restarted = s.make(0, /*restarted=*/true);
  Admission* hub = restarted.admission.get();
  for (int leaf : {1, 2})
    hub->accept(static_cast<NodeId>(leaf), 1, MessageType::Knowledge, Payload(*pieces[static_cast<size_t>(leaf - 1)]), false,
                0.0);
  for (int leaf : {1, 2})
    hub->accept(static_cast<NodeId>(leaf), 2, MessageType::UnmaskReply, confirmations[static_cast<size_t>(leaf - 1)], false, 0.0);
  hub->accept(1, 3, MessageType::UnmaskReply, payload_of(seeds1[0]), false, 0.0);
  hub->machine().restart(false, false, nullptr, {}, 0.0);
  // Leaf 3 is still refused, and only leaf 2, which has not sent its seeds, is asked again, with tags.
  EXPECT_NE(hub->refusal(3, MessageType::Knowledge, Payload(*piece_of(s, 3))), "");
  const auto again = sends(hub->machine().tick(6.0), MessageType::UnmaskRequest);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].to, 2u);
  const auto seeds2 = answer(s, 2, std::get<UnmaskRequest>(payload_of(again[0])));
  ASSERT_EQ(seeds2.size(), 1u);
  hub->accept(2, 3, MessageType::UnmaskReply, payload_of(seeds2.at(0)), true, 6.1);
  const auto heads = sends(hub->machine().tick(6.2), MessageType::Head);
  ASSERT_FALSE(heads.empty());
  EXPECT_EQ(heads[0].contributors, (Contributors{0, 1, 2}));
  EXPECT_TRUE(hub->machine().outcome().discarded_from.empty());
}

}  // namespace
}  // namespace fednode
