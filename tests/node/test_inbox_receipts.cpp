// The inbox's receipts (docs/protocol.md 5.4), with a real transport on loopback and a DEALER
// playing node 0 of a two-node chain towards node 1's inbox: whom node 1 waits for, and for what.
// No processes: each frame is handed to the inbox by the test, so the moments that a kill hits
// by chance in the multi-process tests (a sender gone before its message could be acknowledged)
// come here every time.
#include "../common/labelled_blobs.h"
#include "../common/node_context.h"
#include "../common/temp_dir.h"
#include "node/inbox.h"
#include "node/step.h"
#include "topology/builders.h"

#include <gtest/gtest.h>
#include <zmq.hpp>

#include <chrono>
#include <thread>

namespace fednode {
namespace {

constexpr int kClasses = 3, kDim = 4;
constexpr uint64_t kSeed = 5;

class InboxReceipts : public ::testing::Test {
 protected:
  static constexpr int kPort = 24230;

  void SetUp() override {
    TopologyBuildOptions b;
    b.mode = TopologyMode::Linear;
    b.nodes = 2;
    b.method = "fedcgs";
    topology_ = build_topology(b);
    MethodOptions o;
    o.method = "fedcgs";
    method_ = make_method(o);
    local_ = test::labelled_blobs(60, kDim, kClasses, 101);
    MachineConfig m;
    m.topology = &topology_;
    m.plan = plan_for(topology_, 1);
    m.method = method_.get();
    m.local = &local_;
    m.ctx = test::node_context(1, kClasses, kDim, kSeed);
    machine_ = std::make_unique<Machine>(m);
    machine_->restart(false, false, nullptr, {}, 0.0);
    admission_ = std::make_unique<Admission>(*machine_, nullptr);

    Identity id0 = Identity::generate(), id1 = Identity::generate();
    const PublicKey key0 = id0.public_key(), key1 = id1.public_key();
    const RunId run = derive_run_id("inbox-receipts");
    node0_ = std::make_unique<SecureChannel>(std::move(id0), 0, run, PeerKeys{{1, key1}});
    node1_ = std::make_unique<SecureChannel>(std::move(id1), 1, run, PeerKeys{{0, key0}});
    store_ = std::make_unique<StateStore>(dir_.path().string(), run, uint64_t{1} << 30);
    transport_ = std::make_unique<Transport>(1, "tcp://127.0.0.1:" + std::to_string(kPort));
    OutboxTiming timing{std::chrono::milliseconds(1), std::chrono::milliseconds(300000), 60.0};
    outbox_ = std::make_unique<Outbox>(*store_, *transport_, timing, Say{}, [](NodeId id) { return std::to_string(id); });
    inbox_ = std::make_unique<Inbox>(*node1_, *store_, *transport_, *outbox_, *admission_, Say{},
                                     [](NodeId id) { return std::to_string(id); }, Pacing{0});

    knowledge_ = method_->summarize(test::labelled_blobs(60, kDim, kClasses, 100), test::node_context(0, kClasses, kDim, kSeed));
  }

  // Node 0's side: a DEALER connected to node 1, as a (restarted) node 0 makes one.
  std::unique_ptr<zmq::socket_t> connect() {
    auto s = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
    s->set(zmq::sockopt::linger, 0);
    s->connect("tcp://127.0.0.1:" + std::to_string(kPort));
    return s;
  }
  Hello hello(std::vector<uint32_t> versions) const {
    Hello h;
    h.versions = std::move(versions);
    h.node = 0;
    h.method = "fedcgs";
    h.backbone_fingerprint = test::node_context(0, kClasses, kDim, kSeed).backbone_fingerprint;
    h.dim = kDim;
    h.num_classes = kClasses;
    return h;
  }
  // Sends `frame` from `s`, and hands what node 1's transport receives to its inbox.
  Incoming arrive(zmq::socket_t& s, const std::string& frame) {
    s.send(zmq::buffer(frame), zmq::send_flags::none);
    for (int i = 0; i < 200; ++i)
      if (auto in = transport_->receive(std::chrono::milliseconds(50))) return std::move(*in);
    ADD_FAILURE() << "node 1 received nothing";
    return {};
  }
  void deliver(zmq::socket_t& s, const std::string& frame) {
    Incoming in = arrive(s, frame);
    inbox_->handle(in, 0.0);
  }
  // Node 0's reading of node 1's answers on `s`: the ack's own id for each message id acked.
  std::map<uint64_t, uint64_t> acks(zmq::socket_t& s, int wait_ms = 2000) {
    std::map<uint64_t, uint64_t> out;
    zmq::pollitem_t item{s.handle(), 0, ZMQ_POLLIN, 0};
    while (zmq::poll(&item, 1, std::chrono::milliseconds(wait_ms)) > 0) {
      zmq::message_t m;
      if (!s.recv(m)) break;
      const Message msg = node0_->open(m.to_string(), guard_);
      if (msg.header.type == MessageType::Ack) out[std::get<Ack>(msg.payload).acked_id] = msg.header.msg_id;
      wait_ms = 200;
    }
    return out;
  }
  void send_receipt(zmq::socket_t& s, uint64_t ack_id) {
    Ack receipt;
    receipt.acked_id = ack_id;
    deliver(s, node0_->seal(1, next_id_++, Payload(receipt)));
  }
  // Node 1's side: answers drained, as its node loop does before it reminds.
  void settle_answers() {
    for (int i = 0; i < 5; ++i)
      if (auto in = transport_->receive(std::chrono::milliseconds(20))) inbox_->handle(*in, 0.0);
  }

  test::TempDir dir_{"fednode_inbox_receipts"};
  Topology topology_;
  std::unique_ptr<Method> method_;
  Features local_;
  std::unique_ptr<Machine> machine_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<SecureChannel> node0_, node1_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Outbox> outbox_;
  std::unique_ptr<Inbox> inbox_;
  Knowledge knowledge_;
  zmq::context_t ctx_;
  ReplayGuard guard_;
  uint64_t next_id_ = 1;
};

TEST_F(InboxReceipts, AHelloWithoutVersion3PromisesNoReceipts) {
  auto s = connect();
  deliver(*s, node0_->seal(1, next_id_++, Payload(hello({1, 2}))));
  deliver(*s, node0_->seal(1, next_id_++, knowledge_));
  EXPECT_EQ(acks(*s).size(), 2u);
  EXPECT_TRUE(inbox_->awaiting_receipts().empty()) << "a peer that promised no receipts is not waited for";
}

// docs/protocol.md 5.4: an ack naming an id node 1 never used is ignored, and does not make its
// sender one that sends receipts (issue 50, item 5: a peer built from the spec without receipts
// sent one stray ack, and its receiver waited a minute at close).
TEST_F(InboxReceipts, AStrayAckDoesNotMakeItsSenderOneThatSendsReceipts) {
  auto s = connect();
  deliver(*s, node0_->seal(1, next_id_++, Payload(hello({1, 2}))));
  deliver(*s, node0_->seal(1, next_id_++, knowledge_));
  EXPECT_EQ(acks(*s).size(), 2u);
  send_receipt(*s, 999999);
  EXPECT_TRUE(inbox_->awaiting_receipts().empty());
}

// The sender's connection is gone by the time its message was stored: the ack cannot go out,
// and the message is still awaited, so that the resend of a restarted sender finds node 1.
TEST_F(InboxReceipts, AMessageWhoseAckCouldNotGoOutIsWaitedForUntilTheResendsReceipt) {
  auto first = connect();
  deliver(*first, node0_->seal(1, next_id_++, Payload(hello({1, 2, 3}))));
  const auto hello_acked = acks(*first);
  ASSERT_EQ(hello_acked.count(1), 1u);
  EXPECT_EQ(inbox_->awaiting_receipts(), std::vector<NodeId>{0}) << "the hello promised receipts";
  send_receipt(*first, hello_acked.at(1));
  EXPECT_TRUE(inbox_->awaiting_receipts().empty());

  const uint64_t knowledge_id = next_id_++;
  const std::string knowledge = node0_->seal(1, knowledge_id, knowledge_);
  Incoming in = arrive(*first, knowledge);
  first.reset();  // killed: its connection goes away before node 1 stored and acknowledged
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = !transport_->reply(in, "probe");
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(gone) << "node 1's transport still reaches the closed connection";
  inbox_->handle(in, 0.0);
  EXPECT_EQ(inbox_->awaiting_receipts(), std::vector<NodeId>{0})
      << "the stored message is awaited although its ack could not go out";

  // Restarted: the same knowledge frame again, on a new connection.
  auto second = connect();
  deliver(*second, knowledge);
  const auto acked = acks(*second);
  ASSERT_EQ(acked.count(knowledge_id), 1u) << "the resend is acknowledged";
  send_receipt(*second, acked.at(knowledge_id));
  EXPECT_TRUE(inbox_->awaiting_receipts().empty());
}

// A sender restarted after its knowledge was acknowledged on its first connection, and before
// it sent any receipt: the resend's receipt comes on the new connection, and node 1's reminder
// of the hello's ack, whose receipt the old process never sent, follows it there.
TEST_F(InboxReceipts, RemindersFollowTheSendersNewestConnection) {
  auto first = connect();
  deliver(*first, node0_->seal(1, next_id_++, Payload(hello({1, 2, 3}))));
  const uint64_t knowledge_id = next_id_++;
  const std::string knowledge = node0_->seal(1, knowledge_id, knowledge_);
  deliver(*first, knowledge);
  EXPECT_EQ(acks(*first).size(), 2u);
  first.reset();

  auto second = connect();
  deliver(*second, knowledge);
  const auto acked = acks(*second);
  ASSERT_EQ(acked.count(knowledge_id), 1u) << "the resend is acknowledged";
  send_receipt(*second, acked.at(knowledge_id));
  EXPECT_EQ(inbox_->awaiting_receipts(), std::vector<NodeId>{0}) << "the hello's receipt is still missing";

  inbox_->remind(std::chrono::milliseconds(0));
  const auto reminded = acks(*second);
  ASSERT_EQ(reminded.count(1), 1u) << "the hello's ack comes again, on the new connection";
  send_receipt(*second, reminded.at(1));
  settle_answers();
  EXPECT_TRUE(inbox_->awaiting_receipts().empty());
}

// docs/protocol.md section 12: a stream that does not finish is dropped, counted and said, and
// nothing of it is used: one whose sender began another stream, one whose chunks stopped coming,
// and one still unfinished when the node closes (issue 50, item 6).
TEST_F(InboxReceipts, UnfinishedStreamsAreDroppedCountedAndNeverUsed) {
  auto s = connect();
  deliver(*s, node0_->seal(1, next_id_++, Payload(hello({1, 2}))));
  const std::string plaintext(5000, 'x');  // five chunks of 1 KiB
  const auto stream = [&](uint64_t id) {
    return node0_->seal_stream(1, id, MessageType::Knowledge, plaintext, StreamCipher::ChaCha20Poly1305, 1024);
  };
  auto first = stream(next_id_++);
  deliver(*s, first->take(0));
  deliver(*s, first->take(1));
  EXPECT_EQ(inbox_->tally().streams_abandoned, 0);
  auto second = stream(next_id_++);
  deliver(*s, second->take(0));
  EXPECT_EQ(inbox_->tally().streams_abandoned, 1) << "its sender began another stream";
  const int64_t dropped_before = inbox_->tally().chunks_dropped;
  deliver(*s, first->take(2));
  EXPECT_EQ(inbox_->tally().chunks_dropped, dropped_before + 1) << "a chunk of the replaced stream";
  deliver(*s, second->take(1));

  inbox_->drop_stalled_streams(std::chrono::milliseconds(60000));
  EXPECT_EQ(inbox_->tally().streams_abandoned, 1) << "not silent long enough";
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  inbox_->drop_stalled_streams(std::chrono::milliseconds(10));
  EXPECT_EQ(inbox_->tally().streams_abandoned, 2) << "its chunks stopped coming";
  deliver(*s, second->take(2));
  EXPECT_EQ(inbox_->tally().chunks_dropped, dropped_before + 2) << "a chunk of the dropped stream";

  auto third = stream(next_id_++);
  deliver(*s, third->take(0));
  inbox_->drop_unfinished_streams();
  EXPECT_EQ(inbox_->tally().streams_abandoned, 3) << "unfinished at close";
  EXPECT_EQ(inbox_->tally().messages_received, 1) << "only the hello was taken";
  EXPECT_EQ(inbox_->tally().frames_rejected, 0);
  EXPECT_EQ(acks(*s).size(), 1u) << "only the hello was acknowledged";
}

}  // namespace
}  // namespace fednode
