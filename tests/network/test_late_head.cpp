// Heads that come late, both ways round. A star leaf that gave up on its hub's head and fitted
// one on its own data still takes the hub's head when it comes before the leaf has closed; a
// leaf that came after the hub gave up on it gets the head the hub refits with its knowledge.
// The nodes run in this process as an embedding application runs them (real sockets, real
// sealing), so the test decides exactly when each one steps.
#include "in_process.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

namespace fednode::testing_network {
namespace {

using namespace std::chrono_literals;

TEST(LateHead, ALeafThatGaveUpTakesTheHubsHeadWhenItStillComes) {
  InProcessFederation star("late_head", TopologyMode::Star, 2, 23360, 0.5);
  const Federation& f = star.f;
  const NodeId hub = *f.topology.federation.hub;
  const NodeId leaf = hub == 0 ? 1 : 0;
  std::vector<std::string> leaf_log;
  auto config_for = [&](NodeId id) {
    NodeConfig c = star.config(id);
    if (id == leaf) c.callbacks.progress = [&](const std::string& line) { leaf_log.push_back(line); };
    return c;
  };

  Node leaf_node(config_for(leaf), star.identity(leaf));
  ASSERT_DOUBLE_EQ(plan_for(f.topology, leaf).return_deadline_seconds, 1.0);
  // Past its deadline the leaf fits a head on its own data; its knowledge is still unacknowledged,
  // so it keeps running.
  for (const auto until = std::chrono::steady_clock::now() + 1500ms; std::chrono::steady_clock::now() < until;)
    ASSERT_FALSE(leaf_node.step(20ms));
  EXPECT_EQ(leaf_node.result().missing, std::vector<NodeId>{hub});

  Node hub_node(config_for(hub), star.identity(hub));
  bool leaf_done = false, hub_done = false;
  for (int i = 0; i < 3000 && !(leaf_done && hub_done); ++i) {
    if (!hub_done) hub_done = hub_node.step(10ms);
    if (!leaf_done) leaf_done = leaf_node.step(10ms);
  }
  ASSERT_TRUE(leaf_done && hub_done);
  const NodeResult& got = leaf_node.result();
  std::string log;
  for (const auto& line : leaf_log) log += line + "\n";
  EXPECT_EQ(to_string(got.status), std::string("finished")) << log;
  EXPECT_EQ(got.contributors, (Contributors{0, 1})) << log;
  EXPECT_TRUE(got.missing.empty()) << log;
  EXPECT_DOUBLE_EQ(got.accuracy, hub_node.result().accuracy) << "the hub's head, scored on the same test set";
  EXPECT_NE(log.find("which came after the deadline"), std::string::npos) << log;
  // What the leaf wrote when it closed says the same.
  const NodeOutcome written = read_result(f.state_dir(leaf));
  EXPECT_EQ(written.status, "finished");
  EXPECT_EQ(written.contributors, (std::vector<long>{0, 1}));
  if (!::testing::Test::HasFailure()) fs::remove_all(f.dir);
}

// A star of a hub and two leaves where leaf `late` starts only after the hub gave up on it and
// sent the other leaf a head without it.
struct LateLeafStar {
  InProcessFederation star;
  NodeId hub = 0, early = 0, late = 0;
  std::map<NodeId, std::vector<std::string>> logs;

  LateLeafStar(int base_port) : star("late_head", TopologyMode::Star, 3, base_port, 2.0) {
    hub = *star.f.topology.federation.hub;
    for (NodeId id : star.f.topology.ids())
      if (id != hub) (early == late ? early : late) = id;
  }
  NodeConfig config(NodeId id) {
    NodeConfig c = star.config(id);
    c.callbacks.progress = [this, id](const std::string& line) { logs[id].push_back(line); };
    return c;
  }
  std::unique_ptr<Node> make(NodeId id) { return std::make_unique<Node>(config(id), star.identity(id)); }
  bool said(NodeId id, const std::string& part) const {
    const auto it = logs.find(id);
    if (it == logs.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(),
                       [&](const std::string& line) { return line.find(part) != std::string::npos; });
  }
  std::string log(NodeId id) const {
    std::string s = "--- node " + std::to_string(id) + "\n";
    if (const auto it = logs.find(id); it != logs.end())
      for (const auto& line : it->second) s += line + "\n";
    return s;
  }
  std::string all_logs() const { return log(hub) + log(early) + log(late); }
};

// Steps every node in `nodes` (null once closed) until all have closed or `limit` has passed.
bool step_until_closed(std::vector<std::unique_ptr<Node>*> nodes, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  std::vector<bool> closed(nodes.size(), false);
  while (std::chrono::steady_clock::now() < until) {
    bool all = true;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (!closed[i]) closed[i] = (*nodes[i])->step(10ms);
      all = all && closed[i];
    }
    if (all) return true;
  }
  return false;
}

// The hub and the early leaf run until the early leaf has its head and has closed (an
// application would have exited); then the late leaf comes. The hub takes its knowledge, refits,
// and offers the new head to both leaves: the late leaf, which waits for it, takes it; the early
// one is gone, and the hub gives its offer up instead of waiting for it.
void expect_the_late_leaf_gets_the_refit(LateLeafStar& s, std::unique_ptr<Node>& hub_node,
                                         std::unique_ptr<Node>& late_node, bool hub_gives_up_offers) {
  ASSERT_TRUE(step_until_closed({&hub_node, &late_node}, 30s)) << s.all_logs();
  const Contributors everyone{0, 1, 2};
  const NodeResult& late = late_node->result();
  EXPECT_EQ(to_string(late.status), std::string("finished")) << s.all_logs();
  EXPECT_EQ(late.contributors, everyone) << s.all_logs();
  EXPECT_TRUE(s.said(s.late, "leaves out this node's data; waiting up to 2 s")) << s.all_logs();
  EXPECT_TRUE(s.said(s.late, "received a refitted head from")) << s.all_logs();
  const NodeResult& hub = hub_node->result();
  EXPECT_EQ(hub.contributors, everyone) << s.all_logs();
  EXPECT_DOUBLE_EQ(late.accuracy, hub.accuracy) << "the hub's refitted head, scored on the same test set";
  // The late leaf's knowledge came after the hub's deadline but did come, and the hub's head
  // covers it: the hub is not short of anything (the early leaf, which kept a head without the
  // late leaf's data, is, and says so).
  EXPECT_EQ(to_string(hub.status), std::string("finished")) << s.all_logs();
  EXPECT_TRUE(hub.missing.empty()) << s.all_logs();
  EXPECT_TRUE(s.said(s.hub, "missed the deadline of 2 s")) << s.all_logs();
  EXPECT_TRUE(hub.unacknowledged.empty()) << "an offer nobody took is not an unacknowledged send";
  EXPECT_TRUE(s.said(s.hub, "offering the refitted head to {")) << s.all_logs();
  // Unless the hub stopped waiting for acknowledgements first.
  if (hub_gives_up_offers) EXPECT_TRUE(s.said(s.hub, "did not acknowledge head")) << s.all_logs();
  const NodeOutcome written = read_result(s.star.f.state_dir(s.late));
  EXPECT_EQ(written.status, "finished");
  EXPECT_EQ(written.contributors, (std::vector<long>{0, 1, 2}));
}

TEST(LateHead, ALeafThatCameAfterTheHubsDeadlineGetsTheHeadRefittedWithItsData) {
  LateLeafStar s(23900);
  auto hub_node = s.make(s.hub);
  auto early_node = s.make(s.early);
  const auto until = std::chrono::steady_clock::now() + 30s;
  bool early_closed = false;
  while (!early_closed && std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(hub_node->step(10ms)) << "the hub waits for the late leaf's acknowledgement";
    early_closed = early_node->step(10ms);
  }
  ASSERT_TRUE(early_closed) << s.all_logs();
  EXPECT_EQ(to_string(early_node->result().status), std::string("incomplete"));
  EXPECT_EQ(early_node->result().contributors, (Contributors{s.hub, s.early})) << s.all_logs();
  EXPECT_TRUE(s.said(s.early, ", short of the plan's {0,1,2}")) << s.all_logs();
  early_node.reset();

  // What the hub's state directory held before the late leaf came: a hub killed after it stored
  // the late knowledge and before it refitted is this, plus that knowledge (below).
  const fs::path hub_dir = s.star.f.state_dir(s.hub), before_late = s.star.f.dir / "hub_before_late";
  fs::copy(hub_dir, before_late, fs::copy_options::recursive);

  auto late_node = s.make(s.late);
  expect_the_late_leaf_gets_the_refit(s, hub_node, late_node, true);
  hub_node.reset();
  late_node.reset();

  // The late knowledge stored, the head not refitted: restarted there, the hub refits and offers.
  int copied = 0;
  for (const auto& e : fs::directory_iterator(hub_dir / "inbox"))
    if (std::stoul(e.path().filename().string().substr(0, 10)) == s.late) {  // inbox/FROM-ID.msg
      fs::copy_file(e.path(), before_late / "inbox" / e.path().filename());
      ++copied;
    }
  ASSERT_EQ(copied, 1) << "the late leaf sent the hub one piece of knowledge";
  s.logs.clear();
  NodeConfig restarted = s.config(s.hub);
  restarted.state_dir = before_late.string();
  restarted.ack_deadline_seconds = 0.5;  // the leaves are gone: nobody acknowledges the hub's resends
  auto again = std::make_unique<Node>(restarted, s.star.identity(s.hub));
  ASSERT_TRUE(step_until_closed({&again}, 30s)) << s.all_logs();
  EXPECT_EQ(again->result().contributors, (Contributors{0, 1, 2})) << s.all_logs();
  EXPECT_TRUE(s.said(s.hub, "refitting the head with knowledge that came after phase 1: {0,1,2}")) << s.all_logs();
  EXPECT_TRUE(s.said(s.hub, "offering the refitted head to {")) << s.all_logs();
  if (!::testing::Test::HasFailure()) fs::remove_all(s.star.f.dir);
}

// The same, but the hub has finished (it stopped waiting for the late leaf's acknowledgement)
// and is closing when the late leaf's knowledge comes: it goes back to its plan and refits,
// instead of only storing and acknowledging the knowledge.
TEST(LateHead, KnowledgeThatComesWhileTheHubClosesIsStillUsed) {
  LateLeafStar s(23910);
  NodeConfig hub_config = s.config(s.hub);
  hub_config.ack_deadline_seconds = 0.6;
  auto hub_node = std::make_unique<Node>(hub_config, s.star.identity(s.hub));
  auto early_node = s.make(s.early);
  const auto until = std::chrono::steady_clock::now() + 30s;
  bool early_closed = false;
  while (!(early_closed && s.said(s.hub, "incomplete")) && std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(hub_node->step(10ms)) << "closing lasts at least a second" << s.all_logs();
    if (!early_closed) early_closed = early_node->step(10ms);
  }
  ASSERT_TRUE(early_closed && s.said(s.hub, "incomplete")) << s.all_logs();
  early_node.reset();

  auto late_node = s.make(s.late);
  expect_the_late_leaf_gets_the_refit(s, hub_node, late_node, false);
  EXPECT_TRUE(s.said(s.hub, "knowledge came while closing; refitting")) << s.all_logs();
  // The hub stopped waiting (its ack deadline) while its offer to the early leaf was still open:
  // that offer is noted as given up, so running the hub's command again does not make it again.
  const fs::path outbox = s.star.f.state_dir(s.hub) / "outbox";
  int frames = 0;
  for (const auto& e : fs::directory_iterator(outbox)) {
    if (e.path().extension() != ".frame") continue;
    ++frames;
    fs::path stem = e.path();
    stem.replace_extension();
    EXPECT_TRUE(fs::exists(stem.string() + ".acked") || fs::exists(stem.string() + ".given_up")) << e.path();
  }
  EXPECT_GT(frames, 0);
  if (!::testing::Test::HasFailure()) fs::remove_all(s.star.f.dir);
}

}  // namespace
}  // namespace fednode::testing_network
