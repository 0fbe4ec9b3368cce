// A star leaf that gave up on its hub's head and fitted one on its own data still takes the
// hub's head when it comes before the leaf has closed. Both nodes run in this process as an
// embedding application runs them (real sockets, real sealing), so the test decides exactly
// when each one steps: the leaf waits out its deadline before the hub even exists.
#include "in_process.h"

#include <gtest/gtest.h>

#include <chrono>

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

}  // namespace
}  // namespace fednode::testing_network
