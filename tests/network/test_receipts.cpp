// Whom a finished node waits for before it closes (docs/protocol.md 5.4, docs/node.md "What a
// restart guarantees"). This test plays node 0 of a two-node chain, as another implementation
// would: it says hello to node 1 (a real `fednode run`), sends its knowledge, and sends no
// receipt. A hello that does not list version 3 promises none, and node 1 closes at once; one
// that lists it promises receipts, and node 1, finished, keeps answering, acknowledging again
// about once a second, until they come. Node 1's ack deadline is 60 s, far beyond either wait.
#include "played_peer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <set>

namespace fednode::testing_network {
namespace {

using Clock = std::chrono::steady_clock;

struct PlayedChain {
  Federation f;
  pid_t node1 = -1;
  std::unique_ptr<SecureChannel> node0;
  ReplayGuard guard;
  zmq::context_t ctx;
  std::unique_ptr<zmq::socket_t> socket;
  uint64_t next_id = 1;

  PlayedChain(const fs::path& dir, int base_port) {
    f = make_federation(dir, TopologyMode::Linear, 2, "fedcgs", base_port, {},
                        {{"dataset", "fashion-mnist"}, {"train-limit", "1000"}, {"test-limit", "200"}});
    f.topology.federation.ack_deadline_seconds = 60;
    save_again(f);
    node1 = spawn_node(f, 1);
    node0 = std::make_unique<SecureChannel>(load_identity(f.topology.key_dir_of(0)), 0,
                                            derive_run_id(run_name(f.topology)), keys_of(f.topology));
    socket = std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    socket->connect(f.topology.node(1).address);
  }
  ~PlayedChain() {
    if (node1 > 0 && ::waitpid(node1, nullptr, WNOHANG) == 0) {
      ::kill(node1, SIGKILL);
      ::waitpid(node1, nullptr, 0);
    }
  }

  // Sends `p` and returns the id of node 1's ack of it (0 when none came).
  uint64_t send(const Payload& p) {
    const uint64_t id = next_id++;
    const auto reply = exchange(*socket, node0->seal(1, id, p), 60000);
    if (!reply) return 0;
    const Message m = node0->open(*reply, guard);
    if (m.header.type != MessageType::Ack || std::get<Ack>(m.payload).acked_id != id) return 0;
    return m.header.msg_id;
  }

  // Hello (listing `versions`) and knowledge, each acknowledged.
  void deliver(std::vector<uint32_t> versions) {
    Hello hello;
    hello.versions = std::move(versions);
    hello.node = 0;
    hello.method = "fedcgs";
    hello.backbone_fingerprint = "pixels";
    hello.dim = 784;
    hello.num_classes = 10;
    hello.software = "a peer played by test_receipts";
    EXPECT_NE(send(Payload(hello)), 0u) << "node 1 did not acknowledge the hello";
    EXPECT_NE(send(Payload(played_knowledge(f, 0))), 0u) << "node 1 did not acknowledge the knowledge";
  }

  fs::path log() const { return f.state_dir(1) / "node.log"; }
};

TEST(Receipts, APeerWhoseHelloPromisesNoReceiptsIsNotWaitedFor) {
  const auto dir = test_dir("receipts");
  PlayedChain chain(dir, 24200);
  chain.deliver({kProtocolVersion, kStreamVersion});
  const auto acknowledged = Clock::now();
  EXPECT_EQ(wait_exit(chain.node1, 60), 0) << read_text(chain.log());
  chain.node1 = -1;
  // Its head takes a moment to fit; then about 1.5 s of closing, not a minute of waiting.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - acknowledged).count(), 30.0) << read_text(chain.log());
  EXPECT_EQ(read_result(chain.f.state_dir(1)).status, "finished");
  EXPECT_EQ(read_text(chain.log()).find("to confirm it stored my acknowledgement"), std::string::npos);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

TEST(Receipts, APeerWhoseHelloPromisesReceiptsIsWaitedForUntilTheyCome) {
  const auto dir = test_dir("receipts");
  PlayedChain chain(dir, 24210);
  chain.deliver({kProtocolVersion, kStreamVersion, kReceiptsVersion});
  ASSERT_TRUE(wait_for_log(chain.log(), "to confirm it stored my acknowledgement")) << read_text(chain.log());
  // Finished, and still answering: its acks of the hello and of the knowledge come again.
  EXPECT_NE(read_text(chain.log()).find("finished"), std::string::npos);
  int status = 0;
  ASSERT_EQ(::waitpid(chain.node1, &status, WNOHANG), 0) << "node 1 closed without the receipts it was promised";
  std::set<uint64_t> acked_again;
  for (int i = 0; i < 10 && acked_again.size() < 2; ++i)
    if (const auto frame = receive_frame(*chain.socket, 3000)) {
      const Message m = chain.node0->open(*frame, chain.guard);
      if (m.header.type == MessageType::Ack) acked_again.insert(std::get<Ack>(m.payload).acked_id);
    }
  EXPECT_EQ(acked_again, (std::set<uint64_t>{1, 2})) << "node 1 reminds of both messages it acknowledged";

  // The receipts: an ack of each ack node 1 sends from now on, as fednode answers them.
  const auto answered = Clock::now();
  int exit_code = -2;
  while (exit_code == -2 && Clock::now() - answered < std::chrono::seconds(30)) {
    if (const auto frame = receive_frame(*chain.socket, 200)) {
      const Message m = chain.node0->open(*frame, chain.guard);
      Ack receipt;
      receipt.acked_id = m.header.msg_id;
      chain.socket->send(zmq::buffer(chain.node0->seal(1, chain.next_id++, Payload(receipt))), zmq::send_flags::none);
    }
    if (::waitpid(chain.node1, &status, WNOHANG) == chain.node1) {
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      chain.node1 = -1;  // reaped
    }
  }
  EXPECT_EQ(exit_code, 0) << read_text(chain.log());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - answered).count(), 15.0)
      << "node 1 closes once the receipts came, not at its ack deadline\n" << read_text(chain.log());
  EXPECT_EQ(read_result(chain.f.state_dir(1)).status, "finished");
  EXPECT_EQ(read_text(chain.log()).find("closing without the receipt"), std::string::npos) << read_text(chain.log());
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace fednode::testing_network
