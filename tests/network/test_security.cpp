// Attacks on a running node over real sockets: this test plays node 0 of a three-node chain and
// sends node 1 random bytes, frames sealed with a key not in the topology, a tampered ciphertext,
// a frame addressed to node 2, authentic knowledge it must refuse (impossible statistics, a claim
// to hold node 2's data), stream chunks that belong to no stream, a stream with an altered chunk,
// and replays of a genuine frame (as a frame, and as a version-2 stream). Each is rejected (or, for the replay, acknowledged and
// ignored) and the run still completes with exactly the result `fednode simulate` gives.
#include "played_peer.h"

#include "node/secure_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace fednode::testing_network {
namespace {

OptionMap data() {
  return {{"dataset", "fashion-mnist"}, {"train-limit", "2000"}, {"test-limit", "500"}, {"partition", "iid"}};
}

TEST(Security, AttacksOnALiveNodeAreRejectedAndTheRunStillCompletes) {
  const auto dir = test_dir("security");
  const Federation f = make_federation(dir, TopologyMode::Linear, 3, "fedcgs", 23400, {}, data());
  const pid_t node1 = spawn_node(f, 1), node2 = spawn_node(f, 2);

  const RunId run = derive_run_id(run_name(f.topology));
  const SecureChannel real0(load_identity(f.topology.key_dir_of(0)), 0, run, keys_of(f.topology));
  const Knowledge k = played_knowledge(f, 0);

  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(f.topology.node(1).address);

  // 1. Random bytes: no answer (nothing authenticated to answer to).
  std::mt19937 rng(7);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  EXPECT_FALSE(exchange(s, noise, 1500)) << "random bytes must not be answered";

  // 2. A key that is not in the topology, claiming to be node 0.
  PeerKeys to_node1 = {{1, PublicKey{*f.topology.node(1).public_key}}};
  const SecureChannel impostor(Identity::generate(), 0, run, to_node1);
  EXPECT_FALSE(exchange(s, impostor.seal(1, 1, k), 1500)) << "an unknown key must not be answered";

  // 3. The genuine frame with one ciphertext byte flipped.
  const std::string genuine = real0.seal(1, 1, k);
  std::string tampered = genuine;
  tampered[tampered.size() - 20] ^= 0x01;
  EXPECT_FALSE(exchange(s, tampered, 1500)) << "a tampered frame must not be answered";

  // 4. A genuine frame of node 0, but addressed to node 2.
  EXPECT_FALSE(exchange(s, real0.seal(2, 5, k), 1500)) << "a misaddressed frame must not be answered";

  // Authentic frames of node 0 whose knowledge node 1 must refuse, with an error and before
  // storing anything: statistics no float32 features can produce (they would make the merge
  // fail later), and a claim to hold node 2's data, which cannot reach node 0 in a chain.
  ReplayGuard guard;
  auto refusal_of = [&](const std::string& frame, uint64_t id) -> std::optional<ErrorMessage> {
    const auto answer = exchange(s, frame, 20000);
    EXPECT_TRUE(answer) << "an authentic but unusable message must be answered, message " << id;
    if (!answer) return std::nullopt;
    const Message m = real0.open(*answer, guard);
    EXPECT_EQ(m.header.type, MessageType::Error) << "message " << id << " was acknowledged";
    if (m.header.type != MessageType::Error) return std::nullopt;
    EXPECT_EQ(std::get<ErrorMessage>(m.payload).ref_id, id);
    return std::get<ErrorMessage>(m.payload);
  };
  auto expect_refused = [&](const Knowledge& bad, uint64_t id, ErrorReason reason = ErrorReason::Rejected) {
    const auto e = refusal_of(real0.seal(1, id, bad), id);
    if (e) EXPECT_EQ(e->reason, reason) << "message " << id << ": " << e->text;
  };
  Knowledge impossible = k;
  {
    auto& stats = std::get<StatsKnowledge>(impossible.payload);
    const auto j = std::max_element(stats.N.begin(), stats.N.end()) - stats.N.begin();
    stats.A(j, 0) = 1e300;
  }
  expect_refused(impossible, 3);
  Knowledge overclaimed = k;
  overclaimed.contributors = {0, 2};
  expect_refused(overclaimed, 4);
  // Knowledge for another feature space (another backbone) is incompatible, not rejected
  // (docs/protocol.md, 5.5).
  Knowledge other_backbone = k;
  other_backbone.backbone_fingerprint = "another backbone";
  expect_refused(other_backbone, 9, ErrorReason::Incompatible);
  // A payload that does not decode is malformed, and its authenticated sender is told why.
  const auto undecodable = refusal_of(real0.seal_encoded(1, 10, MessageType::Knowledge, std::string("\x93\x01", 2)), 10);
  if (undecodable) {
    EXPECT_EQ(undecodable->reason, ErrorReason::Malformed);
    EXPECT_FALSE(undecodable->text.empty());
    EXPECT_EQ(undecodable->text.find("payload refused"), std::string::npos) << undecodable->text;
  }

  // 6. Version-2 streams (docs/protocol.md section 12): a chunk of no stream is dropped without
  //    an answer; a stream whose chunk 2 was altered is refused at that chunk, unanswered, and
  //    nothing of it is used.
  auto stream_messages = [&](uint64_t id) {
    auto stream = real0.seal_stream(1, id, MessageType::Knowledge, encode_payload(k), StreamCipher::ChaCha20Poly1305,
                                    65536);
    std::vector<std::string> out;
    for (size_t i = 0; i < stream->count(); ++i) {
      out.push_back(stream->take(i));
    }
    return out;
  };
  std::vector<std::string> altered = stream_messages(6);
  ASSERT_GT(altered.size(), 4u);
  EXPECT_FALSE(exchange(s, altered[2], 1500)) << "a chunk of no stream must not be answered";
  altered[2][altered[2].size() - 20] ^= 0x01;
  for (size_t i = 0; i + 1 < altered.size(); ++i) s.send(zmq::buffer(altered[i]), zmq::send_flags::none);
  EXPECT_FALSE(exchange(s, altered.back(), 1500)) << "a stream with an altered chunk must not be answered";

  // The genuine frame: stored and acknowledged.
  auto reply = exchange(s, genuine, 20000);
  ASSERT_TRUE(reply) << "node 1 did not acknowledge the genuine knowledge";
  const Message ack = real0.open(*reply, guard);
  ASSERT_EQ(ack.header.type, MessageType::Ack);
  EXPECT_EQ(std::get<Ack>(ack.payload).acked_id, 1u);

  // 5. The same frame replayed: acknowledged again (it may be a resend) and not used twice.
  reply = exchange(s, genuine, 3000);
  if (reply) EXPECT_EQ(real0.open(*reply, guard).header.type, MessageType::Ack);
  // 7. ...and as a stream under the same id: a replay from its first message on, acknowledged at
  //    once; its chunks are dropped unread.
  const std::vector<std::string> again = stream_messages(1);
  reply = exchange(s, again[0], 3000);
  if (reply) EXPECT_EQ(real0.open(*reply, guard).header.type, MessageType::Ack);
  for (size_t i = 1; i < again.size(); ++i) s.send(zmq::buffer(again[i]), zmq::send_flags::none);

  EXPECT_EQ(wait_exit(node1, 120), 0);
  EXPECT_EQ(wait_exit(node2, 120), 0);
  const NodeOutcome got = read_result(f.state_dir(1));
  EXPECT_EQ(got.status, "finished");
  EXPECT_EQ(got.contributors, (std::vector<long>{0, 1}));
  EXPECT_GE(got.frames_rejected, 9);
  EXPECT_GE(got.duplicates, 2);
  const std::string log = read_text(f.state_dir(1) / "node.log");
  EXPECT_NE(log.find("header-tampered"), std::string::npos) << log;
  EXPECT_NE(log.find("ciphertext-tampered"), std::string::npos) << log;
  EXPECT_NE(log.find("wrong-recipient"), std::string::npos) << log;
  EXPECT_NE(log.find("chunk 2 of " + std::to_string(altered.size()) + " does not authenticate"), std::string::npos) << log;
  EXPECT_NE(log.find("is too large for the class's count"), std::string::npos) << log;
  EXPECT_NE(log.find("contributor 2's data cannot reach node 0"), std::string::npos) << log;
  EXPECT_EQ(log.find(read_text(fs::path(f.topology.key_dir_of(1)) / "node.key").substr(20, 64)), std::string::npos)
      << "the secret key must never reach a log";

  const CliRun sim = run_cli(f.simulate_args((dir / "report.json").string()));
  ASSERT_EQ(sim.code, 0) << sim.output;
  const auto expected = read_report(dir / "report.json");
  ASSERT_EQ(expected.size(), 3u);
  EXPECT_DOUBLE_EQ(got.accuracy, expected[1].accuracy) << "the attacks changed the result";
  const NodeOutcome last = read_result(f.state_dir(2));
  EXPECT_EQ(last.contributors, (std::vector<long>{0, 1, 2}));
  EXPECT_DOUBLE_EQ(last.accuracy, expected[2].accuracy);
  if (!::testing::Test::HasFailure()) fs::remove_all(dir);
}

}  // namespace
}  // namespace fednode::testing_network
