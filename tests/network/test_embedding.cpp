// What an application embedding fednode::Node can get wrong, and what the node does about it:
// callbacks that throw, a Node destroyed while another thread runs it, two Nodes on one state
// directory, a state directory reused under another configuration, and inconsistent inputs.
// Nodes run in this process on real sockets with real sealing, as docs/embedding.md shows.
#include "in_process.h"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace fednode::testing_network {
namespace {

using namespace std::chrono_literals;

// A two-node FedCGS chain 0 -> 1.
struct Chain : InProcessFederation {
  Chain(const std::string& suite, int base_port) : InProcessFederation(suite, TopologyMode::Linear, 2, base_port, 5) {}
};

TEST(Embedding, ACallbackThatThrowsLosesNothing) {
  Chain chain("embedding", 23800);
  int calls = 0;
  NodeConfig receiver_config = chain.config(1);
  receiver_config.callbacks.knowledge = [&](NodeId, const Knowledge&) {
    if (++calls == 1) throw std::runtime_error("the application's callback failed");
  };
  Node sender(chain.config(0), chain.identity(0));
  Node receiver(std::move(receiver_config), chain.identity(1));
  bool sender_done = false, receiver_done = false;
  int thrown = 0;
  for (int i = 0; i < 2000 && !(sender_done && receiver_done); ++i) {
    if (!sender_done) sender_done = sender.step(10ms);
    if (receiver_done) continue;
    try {
      receiver_done = receiver.step(10ms);
    } catch (const std::runtime_error& e) {
      ++thrown;
      EXPECT_STREQ(e.what(), "the application's callback failed");
    }
  }
  ASSERT_TRUE(sender_done && receiver_done);
  EXPECT_EQ(thrown, 1);
  EXPECT_EQ(calls, 1) << "the knowledge arrived once and was used once";
  const NodeResult& got = receiver.result();
  EXPECT_EQ(to_string(got.status), std::string("finished"));
  EXPECT_EQ(got.contributors, (Contributors{0, 1}));
  EXPECT_TRUE(got.missing.empty());
  EXPECT_EQ(to_string(sender.result().status), std::string("finished")) << "the sender got its acknowledgement";
  if (!::testing::Test::HasFailure()) fs::remove_all(chain.f.dir);
}

TEST(Embedding, DestroyingANodeWhileAnotherThreadRunsItWaitsForIt) {
  Chain chain("embedding", 23810);
  auto node = std::make_unique<Node>(chain.config(1), chain.identity(1));  // waits for node 0, which never comes
  NodeResult got;
  // The driver holds the node itself, not the unique_ptr this thread resets (ThreadSanitizer
  // rightly called reading that pointer there while it is reset here a race).
  Node* driven = node.get();
  std::thread driver([&got, driven] { got = driven->run(); });
  std::this_thread::sleep_for(300ms);
  const auto t0 = std::chrono::steady_clock::now();
  node.reset();
  driver.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  EXPECT_EQ(to_string(got.status), std::string("stopped"));
  EXPECT_EQ(read_result(chain.f.state_dir(1)).status, "stopped");
  if (!::testing::Test::HasFailure()) fs::remove_all(chain.f.dir);
}

TEST(Embedding, AStateDirectoryServesOneNodeAtATime) {
  Chain chain("embedding", 23820);
  const fs::path starts = chain.f.state_dir(0) / "starts";
  auto first = std::make_unique<Node>(chain.config(0), chain.identity(0));
  const std::string starts_before = read_text(starts);

  // The same node again: its address is taken, and the running node's state is left alone.
  try {
    Node again(chain.config(0), chain.identity(0));
    ADD_FAILURE() << "a second copy of a running node started";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Address already in use"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(starts), starts_before);

  // Another address, the same state directory.
  NodeConfig moved = chain.config(0);
  for (auto& n : moved.topology.nodes)
    if (n.id == 0) n.address = n.bind = "tcp://127.0.0.1:23829";
  try {
    Node other(std::move(moved), chain.identity(0));
    ADD_FAILURE() << "two nodes ran on one state directory";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is in use by another node"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_text(starts), starts_before);

  first.reset();
  Node restarted(chain.config(0), chain.identity(0));
  EXPECT_EQ(restarted.result().restarts, 1);
  if (!::testing::Test::HasFailure()) fs::remove_all(chain.f.dir);
}

TEST(Embedding, AStateDirectoryIsContinuedOnlyUnderItsConfiguration) {
  Chain chain("embedding", 23830);
  { Node started(chain.config(0), chain.identity(0)); }

  const auto refused = [&](NodeConfig c, const std::string& named) {
    try {
      Node node(std::move(c), chain.identity(0));
      ADD_FAILURE() << "a state directory was continued with other " << named;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("started with another configuration"), std::string::npos) << what;
      EXPECT_NE(what.find(named), std::string::npos) << what;
    }
  };
  NodeConfig other_data = chain.config(0);
  other_data.local.X(0, 0) += 1;
  refused(other_data, "training_sha256");
  NodeConfig other_options = chain.config(0);
  other_options.method.fedcgs.shrinkage = 0.1;
  refused(other_options, "\"shrinkage\": 0 -> \"shrinkage\": 0.1");
  NodeConfig other_seed = chain.config(0);
  other_seed.topology.federation.seed += 1;
  refused(other_seed, "\"seed\"");

  // What may change between restarts: the deadline, the test features, the timing.
  NodeConfig same = chain.config(0);
  same.topology.federation.deadline_seconds = 7;
  same.test = same.test->first(100);
  same.resend_after = 500ms;
  {
    Node continued(std::move(same), chain.identity(0));
    EXPECT_EQ(continued.result().restarts, 1);
  }

  // A damaged record is said to be damaged, and a removed one does not switch the check off.
  const auto refused_because = [&](const std::string& named) {
    try {
      Node node(chain.config(0), chain.identity(0));
      ADD_FAILURE() << "continued: " << named;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  const fs::path record = chain.f.state_dir(0) / "configuration";
  const std::string text = read_text(record);
  std::string edited = text;
  edited.replace(edited.find("fedcgs"), 6, "fedcgX");
  std::ofstream(record, std::ios::trunc) << edited;
  refused_because("configuration' is damaged");
  fs::remove(record);
  refused_because("holds a run but no configuration record");
  std::ofstream(record, std::ios::trunc) << text;
  Node again(chain.config(0), chain.identity(0));
  EXPECT_EQ(again.result().restarts, 2);
  if (!::testing::Test::HasFailure()) fs::remove_all(chain.f.dir);
}

TEST(Embedding, InconsistentInputsAreRefusedWhenTheNodeIsMade) {
  Chain chain("embedding", 23840);
  const auto refused = [&](NodeConfig c, const std::string& named) {
    try {
      Node node(std::move(c), chain.identity(0));
      ADD_FAILURE() << "accepted: " << named;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  };
  NodeConfig wider_test = chain.config(0);
  wider_test.test->X.conservativeResize(Eigen::NoChange, wider_test.test->X.cols() + 1);
  wider_test.test->X.rightCols(1).setZero();
  refused(wider_test, "test features have 785 dimensions");
  NodeConfig more_classes = chain.config(0);
  more_classes.test->num_classes = 12;
  refused(more_classes, "12 classes");
  NodeConfig no_retry = chain.config(0);
  no_retry.retry_initial = 0ms;
  refused(no_retry, "retry_initial must be positive");
  NodeConfig negative_ack = chain.config(0);
  negative_ack.ack_deadline_seconds = -5;
  refused(negative_ack, "ack_deadline_seconds");
  NodeConfig no_data = chain.config(0);  // the chain's first node: nobody sends it anything
  no_data.local = no_data.local.first(0);
  refused(no_data, "has no training features and receives no knowledge");
  NodeConfig duplicate_id = chain.config(0);
  duplicate_id.topology.nodes.push_back(duplicate_id.topology.nodes.front());
  refused(duplicate_id, "duplicate node id 0");
  EXPECT_FALSE(fs::exists(chain.f.state_dir(0) / "starts")) << "refused before the state directory was touched";
  if (!::testing::Test::HasFailure()) fs::remove_all(chain.f.dir);
}

}  // namespace
}  // namespace fednode::testing_network
