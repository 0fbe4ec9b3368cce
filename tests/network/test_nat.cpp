// Nodes that accept no connections (reachable = false) and relays, as real processes on loopback:
// a chain whose hidden nodes meet at a `fednode relay` ends exactly as `fednode simulate` does, so
// does a star of hidden leaves answered by their hub, and so does a chain whose relay is killed
// (SIGKILL) in the middle of a transfer and started again. A hostile relay (hostile_relay.h) that
// drops, duplicates, cuts, flips and swaps frames gets every altered frame refused and changes
// nothing; one that swallows everything ends the run by its deadlines. The same across real NAT
// routers is scripts/netns_nat_test.sh.
#include "federation.h"
#include "hostile_relay.h"
#include "tcp_relay.h"

#include "crypto/key_files.h"

#include <gtest/gtest.h>

#include <csignal>
#include <limits>
#include <set>

namespace fednode::testing_network {
namespace {

OptionMap nat_data() {
  return {{"dataset", "fashion-mnist"}, {"train-limit", "2000"}, {"test-limit", "400"}, {"partition", "dirichlet"},
          {"dirichlet-alpha", "0.5"}};
}

// Hides `hidden` (no address, reachable = false) and lists relay r1 at `address`, listening on
// `bind` (empty: its address), with a key of its own; `first`, when given, is listed before it as
// r0, with a key but nobody running it.
void hide(Federation& f, const std::set<NodeId>& hidden, const std::string& address, const std::string& bind = "",
          const std::string& first = "") {
  for (auto& n : f.topology.nodes)
    if (hidden.count(n.id)) {
      n.reachable = false;
      n.address.clear();
      n.bind.clear();
    }
  TopologyRelay r;
  r.name = "r1";
  r.address = address;
  r.bind = bind;
  r.key_dir = "keys/r1";
  r.public_key_text = write_new_identity((f.dir / "keys" / "r1").string()).to_hex();
  f.topology.relays = {r};
  if (!first.empty()) {
    TopologyRelay r0 = r;
    r0.name = "r0";
    r0.address = first;
    r0.bind.clear();
    r0.key_dir = "keys/r0";
    r0.public_key_text = write_new_identity((f.dir / "keys" / "r0").string()).to_hex();
    f.topology.relays.insert(f.topology.relays.begin(), r0);
  }
  save_again(f);
}

// `fednode relay` for r1 in the background, its output appended to relay.log beside the file.
pid_t spawn_relay(const Federation& f) {
  return spawn_cli({"relay", "--topology", f.file.string(), "--name", "r1"}, (f.dir / "relay.log").string());
}

void stop(pid_t pid) {
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid, 10), 0) << "the relay did not stop cleanly on SIGTERM";
}

// Every node started, and each one's exit code.
std::vector<int> run_all(const Federation& f, double seconds = 180) {
  std::vector<pid_t> pids;
  for (NodeId id : f.topology.ids()) pids.push_back(spawn_node(f, id));
  std::vector<int> codes;
  for (pid_t p : pids) codes.push_back(wait_exit(p, seconds));
  return codes;
}

void expect_all_exit(const Federation& f, const std::vector<int>& codes, int want) {
  for (size_t i = 0; i < codes.size(); ++i)
    EXPECT_EQ(codes[i], want) << "node " << i << ":\n" << read_text(f.state_dir(static_cast<NodeId>(i)) / "node.log");
}

TEST(Nat, AChainOfHiddenNodesMeetsAtARelayAndEqualsSimulate) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  Federation f = make_federation(dir, TopologyMode::Linear, 5, "fedcgs", 24500, {}, nat_data());
  f.topology.federation.hop_encryption = HopEncryption::Curve;  // the relay admits the file's keys only
  // 0 -> 1 and 3 -> 4 meet at the relay; 1 dials 2; 2 answers 3 on the connection 3 dialled.
  hide(f, {0, 1, 3, 4}, "tcp://127.0.0.1:24509");
  const pid_t relay = spawn_relay(f);
  expect_all_exit(f, run_all(f), 0);
  stop(relay);
  expect_every_node_equals_simulate(f);
  const std::string log = read_text(dir / "relay.log");
  EXPECT_NE(log.find("CurveZMQ, admitting the 5 node keys"), std::string::npos) << log;
  EXPECT_NE(log.find("on 4 circuits; 0 refused"), std::string::npos) << log;
  EXPECT_NE(read_text(f.state_dir(0) / "node.log").find("through relay 'r1'"), std::string::npos);
  EXPECT_NE(read_text(f.state_dir(2) / "node.log").find("node 3 (n3) accepts no connections"), std::string::npos);
}

TEST(Nat, AStarOfHiddenLeavesIsAnsweredByItsHub) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  Federation f = make_federation(dir, TopologyMode::Star, 4, "fedcgs", 24510, {}, nat_data());
  std::set<NodeId> leaves;
  for (NodeId id : f.topology.ids())
    if (id != *f.topology.federation.hub) leaves.insert(id);
  hide(f, leaves, "tcp://127.0.0.1:24519");  // listed, but no edge needs it
  expect_all_exit(f, run_all(f), 0);
  expect_every_node_equals_simulate(f);
}

TEST(Nat, ARelayKilledInTheMiddleOfATransferLosesNothing) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 24520, {}, nat_data());
  // The nodes reach the relay through a link of 1 MB/s, so that each 2.5 MB message takes seconds.
  hide(f, {0, 1, 2}, "tcp://127.0.0.1:24528", "tcp://127.0.0.1:24529");
  TcpRelay slow_link(24528, 24529, std::numeric_limits<int64_t>::max(), 1'000'000);
  pid_t relay = spawn_relay(f);
  std::vector<pid_t> pids;
  for (NodeId id : f.topology.ids()) pids.push_back(spawn_node(f, id));
  // The relay's first count (once a second) comes while node 0's knowledge is crossing.
  ASSERT_TRUE(wait_for_log(dir / "relay.log", "frames ("));
  ::kill(relay, SIGKILL);
  ::waitpid(relay, nullptr, 0);
  ::usleep(1'000'000);
  const size_t before = read_text(dir / "relay.log").size();
  relay = spawn_relay(f);
  std::vector<int> codes;
  for (pid_t p : pids) codes.push_back(wait_exit(p, 180));
  expect_all_exit(f, codes, 0);
  stop(relay);
  expect_every_node_equals_simulate(f);
  // The second relay carried the rest.
  EXPECT_NE(read_text(dir / "relay.log").find("frames (", before), std::string::npos);
}

TEST(Nat, NodesMoveOnToTheNextRelayWhenTheFirstIsDown) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 24550, {}, nat_data());
  hide(f, {0, 1, 2}, "tcp://127.0.0.1:24559", "", "tcp://127.0.0.1:24558");  // r0, listed first, never runs
  const pid_t relay = spawn_relay(f);
  expect_all_exit(f, run_all(f), 0);
  stop(relay);
  expect_every_node_equals_simulate(f);
  EXPECT_NE(read_text(f.state_dir(1) / "node.log").find("relay 'r0' has not been reachable"), std::string::npos);
}

TEST(Nat, EveryFrameAHostileRelayAltersIsRefusedAndChangesNothing) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  // One diagonal component per class: each knowledge message is one frame (under the 64 KiB
  // where streams begin), so that every harm meets a whole message of its own.
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedpft", 24530,
                                 {{"components", "1"}, {"covariance", "diag"}}, nat_data());
  hide(f, {0, 1, 2}, "tcp://127.0.0.1:24539");
  HostileRelay relay(24539, HostileRelay::Mode::Tamper);
  expect_all_exit(f, run_all(f), 0);
  const HostileRelay::Tally t = relay.finish();
  // Two circuits carry knowledge (0 -> 1, 1 -> 2): each saw every kind of harm once.
  EXPECT_EQ(t.cut, 2);
  EXPECT_EQ(t.flipped, 2);
  EXPECT_EQ(t.dropped, 2);
  EXPECT_EQ(t.swapped, 2);
  EXPECT_EQ(t.duplicated, 2);
  for (NodeId id : {1u, 2u}) {
    const NodeOutcome o = read_result(f.state_dir(id));
    // The cut and the flipped frame never open; the held one, come late, and the second copy
    // are authentic repeats of a message already stored: acknowledged, and nothing of them used.
    EXPECT_EQ(o.frames_rejected, 2) << "node " << id << ":\n" << read_text(f.state_dir(id) / "node.log");
    EXPECT_EQ(o.duplicates, 2) << "node " << id;
  }
  expect_every_node_equals_simulate(f);  // nothing altered was used
}

TEST(Nat, AStreamAHostileRelayAltersIsDroppedWholeAndSentAgain) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  // FedCGS statistics of 2.5 MB travel as streams of 256 KiB chunks: harm to any chunk ends the
  // whole stream at its recipient, which uses none of it.
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 24560, {}, nat_data());
  hide(f, {0, 1, 2}, "tcp://127.0.0.1:24569");
  HostileRelay relay(24569, HostileRelay::Mode::Tamper);
  expect_all_exit(f, run_all(f), 0);
  const HostileRelay::Tally t = relay.finish();
  EXPECT_EQ(t.cut + t.flipped + t.dropped + t.swapped + t.duplicated, 10);
  for (NodeId id : {1u, 2u})
    EXPECT_GE(read_result(f.state_dir(id)).frames_rejected, 1) << "node " << id;
  expect_every_node_equals_simulate(f);
}

TEST(Nat, ARelayThatSwallowsEverythingEndsTheRunByItsDeadlines) {
  const fs::path dir = test_dir("nat");
  const RemovedUnlessFailed cleanup{dir};
  Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 24540, {}, nat_data());
  f.topology.federation.deadline_seconds = 4;
  f.topology.federation.ack_deadline_seconds = 4;
  hide(f, {0, 1, 2}, "tcp://127.0.0.1:24549");
  HostileRelay relay(24549, HostileRelay::Mode::BlackHole);
  expect_all_exit(f, run_all(f, 120), 3);  // incomplete: a deadline passed (docs/node.md, "Exit status")
  EXPECT_GT(relay.finish().dropped, 0);
  for (NodeId id : f.topology.ids()) {
    const NodeOutcome o = read_result(f.state_dir(id));
    EXPECT_EQ(o.status, "incomplete") << "node " << id;
    // Nothing reached anyone: each node fitted on its own data alone.
    EXPECT_EQ(o.contributors, std::vector<long>{static_cast<long>(id)}) << "node " << id;
  }
}

}  // namespace
}  // namespace fednode::testing_network
