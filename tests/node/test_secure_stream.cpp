// Version-2 streams (node/secure_stream.h): a message sealed chunk by chunk opens to exactly what
// was sent, over real sockets too, and a stream whose chunks are reordered, repeated, altered or
// spliced from another message is refused with the reason named.
#include "node/secure_stream.h"

#include "../protocol/samples.h"

#include <gtest/gtest.h>

#include <thread>

namespace fednode {
namespace {

Identity node_identity(NodeId n) {
  std::array<uint8_t, 32> s;
  s.fill(static_cast<uint8_t>(n));
  return Identity::from_seed(s);
}

const RunId kRun = derive_run_id("stream test");

SecureChannel channel(NodeId n) {
  PeerKeys peers;
  for (NodeId m : {1u, 2u}) peers[m] = node_identity(m).public_key();
  return SecureChannel(node_identity(n), n, kRun, peers);
}

// FedCGS statistics with d = 120: about 60 KB of float64, many 4 KiB chunks.
Knowledge large_knowledge() {
  Knowledge k = test::worked_example_knowledge();
  auto& s = std::get<StatsKnowledge>(k.payload);
  const int d = 120;
  k.dim = d;
  s.A = Eigen::MatrixXd::Constant(2, d, 0.25);
  s.B = Eigen::MatrixXd::Identity(d, d) * 3.0;
  for (int i = 0; i + 1 < d; ++i) s.B(i, i + 1) = s.B(i + 1, i) = 0.5;
  return k;
}

std::vector<std::string> messages_of(OutgoingMessages& stream) {
  std::vector<std::string> out;
  for (size_t i = 0; i < stream.count(); ++i) {
    out.push_back(stream.take(i));
    EXPECT_EQ(out.back().size(), stream.size(i));
  }
  return out;
}

Knowledge receive_all(const SecureChannel& c, std::vector<std::string> messages, ReplayGuard& guard) {
  auto head = c.open_head(messages[0].data(), messages[0].size(), guard);
  EXPECT_TRUE(std::holds_alternative<std::unique_ptr<IncomingStream>>(head));
  auto& stream = *std::get<std::unique_ptr<IncomingStream>>(head);
  for (size_t i = 1; i < messages.size(); ++i) {
    EXPECT_FALSE(stream.complete());
    EXPECT_TRUE(is_chunk_message(messages[i]));
    stream.add(decode_chunk(messages[i], Limits{}));
  }
  EXPECT_TRUE(stream.complete());
  const OpenedFrame opened = stream.opened();
  Payload payload = decode_opened(opened, Limits{});
  guard.accept(opened.header.from, opened.header.msg_id);
  return std::get<Knowledge>(std::move(payload));
}

SecurityCode refusal(const std::function<void()>& f) {
  try {
    f();
  } catch (const RejectedMessage& e) {
    return e.code;
  }
  ADD_FAILURE() << "accepted";
  return SecurityCode::Malformed;
}

class Streams : public ::testing::TestWithParam<StreamCipher> {
 protected:
  void SetUp() override {
    if (!stream_cipher_available(GetParam())) GTEST_SKIP() << to_string(GetParam()) << " needs AES-NI here";
  }
  SecureChannel one = channel(1), two = channel(2);
  Knowledge knowledge = large_knowledge();
  std::vector<std::string> seal(uint64_t msg_id, uint32_t chunk = 4096) {
    auto stream = one.seal_stream(2, msg_id, MessageType::Knowledge, encode_payload(knowledge), GetParam(), chunk);
    EXPECT_EQ(stream->header().version, kStreamVersion);
    return messages_of(*stream);
  }
};

TEST_P(Streams, AStreamOpensToWhatWasSent) {
  ReplayGuard guard;
  const auto messages = seal(1);
  ASSERT_GT(messages.size(), 10u);
  const Knowledge back = receive_all(two, messages, guard);
  EXPECT_EQ(encode_payload(back), encode_payload(knowledge));
  // Its head names the layout, in the authenticated header.
  const EnvelopeHeader h = decode_header(decode_frame(messages[0], Limits{}).header, Limits{});
  ASSERT_TRUE(h.stream);
  EXPECT_EQ(h.stream->cipher, to_string(GetParam()));
  EXPECT_EQ(h.stream->bytes, encode_payload(knowledge).size());
  EXPECT_EQ(h.stream->chunk, 4096u);
  // The same message again is a replay, refused at its head before any chunk is opened.
  auto again = seal(1);
  EXPECT_EQ(refusal([&] { two.open_head(again[0].data(), again[0].size(), guard); }), SecurityCode::Replayed);
}

TEST_P(Streams, AOneChunkStreamOpensLikeAFrame) {
  ReplayGuard guard;
  auto messages = seal(1, 1u << 20);
  ASSERT_EQ(messages.size(), 1u);
  auto head = two.open_head(messages[0].data(), messages[0].size(), guard);
  ASSERT_TRUE(std::holds_alternative<OpenedFrame>(head));
  EXPECT_EQ(encode_payload(std::get<Knowledge>(decode_opened(std::get<OpenedFrame>(head), Limits{}))),
            encode_payload(knowledge));
  const Message m = two.open(seal(2, 1u << 20)[0], guard);
  EXPECT_EQ(m.header.msg_id, 2u);
}

TEST_P(Streams, ReorderedRepeatedAlteredOrSplicedChunksAreRefused) {
  const auto messages = seal(5);
  auto start = [&](ReplayGuard& guard) {
    std::string head = messages[0];
    return std::move(std::get<std::unique_ptr<IncomingStream>>(two.open_head(head.data(), head.size(), guard)));
  };
  ReplayGuard guard;
  // Chunks are opened in batches, so an altered one is refused by the time the stream would
  // complete: feeds chunks 1, 2, ... with chunk k replaced, and says why the stream was refused.
  auto refusal_with = [&](size_t k, const std::string& replacement) {
    auto s = start(guard);
    std::vector<std::string> chunks(messages.begin() + 1, messages.end());
    chunks[k - 1] = replacement;
    return refusal([&] {
      for (const std::string& c : chunks) s->add(decode_chunk(c, Limits{}));
      EXPECT_FALSE(s->complete());
    });
  };
  {
    auto s = start(guard);
    EXPECT_EQ(refusal([&] { s->add(decode_chunk(messages[2], Limits{})); }), SecurityCode::Malformed) << "skipped";
  }
  {
    auto s = start(guard);
    s->add(decode_chunk(messages[1], Limits{}));
    EXPECT_EQ(refusal([&] { s->add(decode_chunk(messages[1], Limits{})); }), SecurityCode::Malformed) << "repeated";
  }
  std::string altered = messages[1];
  altered[altered.size() - 100] ^= 1;
  EXPECT_EQ(refusal_with(1, altered), SecurityCode::CiphertextTampered);
  // Chunk 3 of a resend of the same message: same id and index, another nonce, so another key.
  const auto resend = seal(5);
  EXPECT_EQ(refusal_with(3, resend[3]), SecurityCode::CiphertextTampered);
  {
    // The last chunk relabelled with an earlier index: its nonce says "last", so it opens nowhere else.
    auto s = start(guard);
    const ChunkView last = decode_chunk(messages.back(), Limits{});
    ChunkView moved = last;
    moved.index = 1;
    EXPECT_NE(refusal([&] { s->add(moved); }), SecurityCode::Replayed);
  }
  // An edited layout in the head (here: its chunk size) fails the header tag.
  std::string head = messages[0];
  const FrameView f = decode_frame(head, Limits{});
  EnvelopeHeader h = decode_header(f.header, Limits{});
  h.stream->chunk = 8192;
  const std::string forged = encode_frame({encode_header(h), f.header_tag, f.nonce, f.ciphertext});
  std::string forged_copy = forged;
  EXPECT_EQ(refusal([&] { two.open_head(forged_copy.data(), forged_copy.size(), guard); }),
            SecurityCode::HeaderTampered);
  // A version-1 opener refuses a longer stream instead of misreading it.
  std::string copy = messages[0];
  EXPECT_EQ(refusal([&] { two.open_in_place(copy.data(), copy.size(), guard); }), SecurityCode::Malformed);
}

TEST_P(Streams, AStreamCrossesRealSocketsAsTheQueueTakesIt) {
  Transport a(1, "tcp://127.0.0.1:23771"), b(2, "tcp://127.0.0.1:23772");
  a.add_peer(2, "tcp://127.0.0.1:23772");
  // 60 KB in 4 KiB chunks: far more messages than the peer's queue of one takes at once.
  knowledge = large_knowledge();
  std::unique_ptr<OutgoingMessages> stream =
      one.seal_stream(2, 1, MessageType::Knowledge, encode_payload(knowledge), GetParam(), 4096);
  const size_t count = stream->count();
  ASSERT_TRUE(a.send(2, stream));
  EXPECT_FALSE(a.send(2, std::string("overtaking"))) << "nothing overtakes a stream";
  std::vector<std::string> received;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::thread sender([&] {
    while (a.sending(2) && std::chrono::steady_clock::now() < deadline) a.receive(std::chrono::milliseconds(10));
  });
  while (received.size() < count && std::chrono::steady_clock::now() < deadline)
    if (auto in = b.receive(std::chrono::milliseconds(100))) received.emplace_back(in->frame.view());
  sender.join();
  ASSERT_EQ(received.size(), count);
  ReplayGuard guard;
  EXPECT_EQ(encode_payload(receive_all(two, received, guard)), encode_payload(knowledge));
}

INSTANTIATE_TEST_SUITE_P(Ciphers, Streams, ::testing::Values(StreamCipher::ChaCha20Poly1305, StreamCipher::Aes256Gcm),
                         [](const auto& info) {
                           return info.param == StreamCipher::Aes256Gcm ? "Aes256Gcm" : "ChaCha20Poly1305";
                         });

}  // namespace
}  // namespace fednode
