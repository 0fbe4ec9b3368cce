// Sealed protocol messages between nodes: what gets through, and every reason something does not.
#include "node/secure_channel.h"

#include "../protocol/samples.h"
#include "core/rng.h"

#include <gtest/gtest.h>

namespace fednode {
namespace {

std::array<uint8_t, 32> seed(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return s;
}

Identity node_identity(NodeId n) { return Identity::from_seed(seed(static_cast<uint8_t>(n))); }

// Nodes 1, 2 and 3 know each other; node 4 exists but is in nobody's allow list.
PeerKeys allow_list() {
  PeerKeys peers;
  for (NodeId n : {1u, 2u, 3u}) peers[n] = node_identity(n).public_key();
  return peers;
}

const RunId kRun = derive_run_id("test run");

SecureChannel channel(NodeId n, const RunId& run = kRun) {
  PeerKeys peers = allow_list();
  peers[n] = node_identity(n).public_key();  // node 4 knows everyone, nobody knows node 4
  return SecureChannel(node_identity(n), n, run, peers);
}

// The knowledge of docs/protocol.md's worked example: small, and every field set.
Knowledge stats_knowledge() { return test::worked_example_knowledge(); }

RejectedMessage rejection(const SecureChannel& c, std::string_view frame, ReplayGuard& guard) {
  try {
    c.open(frame, guard);
  } catch (const RejectedMessage& e) {
    return e;
  }
  ADD_FAILURE() << "the frame was accepted";
  return RejectedMessage(SecurityCode::Malformed, "accepted");
}

// Rebuilds a frame from (possibly altered) parts.
std::string reframe(const std::string& frame, const std::function<void(std::string& header, std::string& tag,
                                                                        std::string& nonce, std::string& ct)>& edit) {
  const FrameView f = decode_frame(frame, Limits{});
  std::string header(f.header), tag(f.header_tag), nonce(f.nonce), ct(f.ciphertext);
  edit(header, tag, nonce, ct);
  return encode_frame({header, tag, nonce, ct});
}

TEST(SecureChannel, DeliversEveryMessageType) {
  const SecureChannel one = channel(1), two = channel(2);
  ReplayGuard guard;
  const std::string frame = one.seal(2, 1, stats_knowledge());
  const Message m = two.open(frame, guard);
  EXPECT_EQ(m.header.from, 1u);
  EXPECT_EQ(m.header.to, 2u);
  EXPECT_EQ(m.header.msg_id, 1u);
  EXPECT_EQ(m.header.type, MessageType::Knowledge);
  EXPECT_EQ(std::get<StatsKnowledge>(std::get<Knowledge>(m.payload).payload).N, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(std::get<Ack>(one.open(two.seal(1, 1, Ack{1}), guard).payload).acked_id, 1u);
  Hello hello;
  hello.node = 1;
  hello.method = "fedcgs";
  hello.backbone_fingerprint = "pixels";
  hello.dim = 2;
  hello.num_classes = 2;
  EXPECT_EQ(std::get<Hello>(two.open(one.seal(2, 2, hello), guard).payload).method, "fedcgs");
  EXPECT_EQ(std::get<ErrorMessage>(two.open(one.seal(2, 3, ErrorMessage{ErrorReason::Busy, 2, false, "x"}), guard)
                                       .payload)
                .reason,
            ErrorReason::Busy);
  EXPECT_EQ(guard.highest(1), 3u);
  // The header is readable on the wire; the payload is not.
  EXPECT_EQ(frame.find("pixels"), std::string::npos);
}

TEST(SecureChannel, CompleteKeepsItsTypeThroughSealAndOpen) {
  // The ring's previous node sends knowledge and then complete knowledge over one link; the
  // receiver tells them apart by the authenticated header alone.
  const SecureChannel one = channel(1), two = channel(2);
  ReplayGuard guard;
  const Message first = two.open(one.seal(2, 1, stats_knowledge()), guard);
  const Message second = two.open(one.seal(2, 2, stats_knowledge(), {}, MessageType::Complete), guard);
  EXPECT_EQ(first.header.type, MessageType::Knowledge);
  EXPECT_EQ(second.header.type, MessageType::Complete);
  EXPECT_EQ(std::get<StatsKnowledge>(std::get<Knowledge>(second.payload).payload).N, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(std::get<Knowledge>(second.payload).contributors, (Contributors{1}));

  // Changing the type on the wire is a header edit, caught like any other.
  const std::string complete = one.seal(2, 3, stats_knowledge(), {}, MessageType::Complete);
  const std::string relabelled = reframe(complete, [](std::string& header, std::string&, std::string&, std::string&) {
    EnvelopeHeader h = decode_header(header, Limits{});
    h.type = MessageType::Knowledge;
    header = encode_header(h);
  });
  EXPECT_EQ(rejection(two, relabelled, guard).code, SecurityCode::HeaderTampered);

  for (MessageType wrong : {MessageType::Hello, MessageType::Head, MessageType::Ack, MessageType::Error})
    EXPECT_THROW(one.seal(2, 4, stats_knowledge(), {}, wrong), InputError) << to_string(wrong);
}

// Large knowledge is encoded into the frame and encrypted in place; small knowledge takes the
// plaintext path. Both must give canonical frames that open to the same knowledge.
TEST(SecureChannel, LargeAndSmallKnowledgeSealToCanonicalFrames) {
  const SecureChannel one = channel(1), two = channel(2);
  ReplayGuard guard;
  uint64_t id = 1;
  for (int d : {4, 600, 3000}) {  // 0.6 KB, 96 KB, 480 KB of float32 tensors (half that in float16)
    Knowledge k;
    k.contributors = {1};
    k.backbone_fingerprint = "pixels";
    k.dim = d;
    k.num_classes = 3;
    GmmKnowledge g;
    for (int c = 0; c < 2; ++c) {
      ClassMixture m;
      m.label = c;
      m.count = 5;
      m.mixture.type = CovarianceType::Diag;
      m.mixture.weights = VectorD::Constant(10, 0.1);
      m.mixture.means = MatrixD::Constant(10, d, 0.25 * (c + 1));
      m.mixture.covariances = MatrixD::Constant(10, d, 0.5);
      g.classes.push_back(m);
    }
    k.payload = g;
    for (Precision p : {Precision::Float32, Precision::Float16}) {
      const std::string frame = one.seal(2, id++, k, {p});
      const FrameView f = decode_frame(frame, Limits{});
      EXPECT_EQ(encode_frame(f), frame) << "d = " << d;
      EXPECT_EQ(f.ciphertext.size(), encode_payload(k, {p}).size() + kAeadTagBytes);
      const Message m = two.open(frame, guard);
      const auto& back = std::get<GmmKnowledge>(std::get<Knowledge>(m.payload).payload);
      ASSERT_EQ(back.classes.size(), 2u);
      EXPECT_EQ(back.classes[1].mixture.means, g.classes[1].mixture.means);
      EXPECT_EQ(back.classes[0].mixture.covariances, g.classes[0].mixture.covariances);
    }
  }
}

// What a node does with a received frame: decrypt it where it lies. Same message, same plaintext
// as open(), and the plaintext lies inside the frame; a tampered frame is refused and its
// ciphertext wiped, the replay window untouched.
TEST(SecureChannel, OpeningInPlaceMatchesOpening) {
  const SecureChannel one = channel(1), two = channel(2);
  Knowledge big = stats_knowledge();
  auto& s = std::get<StatsKnowledge>(big.payload);
  big.dim = 300;  // 400 KB of statistics
  s.A = MatrixD::Constant(2, 300, 0.75);
  s.B = MatrixD::Identity(300, 300);
  uint64_t id = 1;
  for (const Knowledge& k : {stats_knowledge(), big}) {
    const std::string sealed = one.seal(2, id++, k);
    ReplayGuard a, b;
    std::string plaintext;
    const Message m = two.open(sealed, a, &plaintext);
    std::string frame = sealed;
    const OpenedFrame n = two.open_in_place(frame.data(), frame.size(), b);
    EXPECT_EQ(b.senders(), 0u) << "opening records nothing: the caller records what it uses";
    const Payload payload = decode_opened(n, Limits{});
    b.accept(n.header.from, n.header.msg_id);
    const std::string_view in_place = n.plaintext;
    EXPECT_EQ(in_place, plaintext);
    EXPECT_GE(in_place.data(), frame.data());
    EXPECT_LE(in_place.data() + in_place.size(), frame.data() + frame.size());
    EXPECT_EQ(n.header.msg_id, m.header.msg_id);
    EXPECT_EQ(std::get<StatsKnowledge>(std::get<Knowledge>(payload).payload).A, std::get<StatsKnowledge>(k.payload).A);
    EXPECT_EQ(b.highest(1), m.header.msg_id);

    std::string tampered = reframe(sealed, [](std::string&, std::string&, std::string&, std::string& ct) { ct[3] ^= 1; });
    const FrameView f = decode_frame(tampered, Limits{});
    const size_t at = static_cast<size_t>(f.ciphertext.data() - tampered.data());
    const size_t plain = f.ciphertext.size() - kAeadTagBytes;
    ReplayGuard c;
    try {
      two.open_in_place(tampered.data(), tampered.size(), c);
      ADD_FAILURE() << "a tampered frame opened";
    } catch (const RejectedMessage& e) {
      EXPECT_EQ(e.code, SecurityCode::CiphertextTampered);
    }
    EXPECT_EQ(tampered.substr(at, plain), std::string(plain, '\0')) << "the refused ciphertext was not wiped";
    EXPECT_EQ(c.senders(), 0u);
  }
}

TEST(SecureChannel, LargeKnowledgeForAnUnknownNodeIsRefused) {
  Knowledge k = stats_knowledge();
  auto& s = std::get<StatsKnowledge>(k.payload);
  k.dim = 200;  // 160 KB of statistics: the in-place path
  s.A = MatrixD::Constant(2, 200, 0.25);
  s.B = MatrixD::Identity(200, 200);
  EXPECT_THROW(channel(1).seal(4, 1, k), InputError);
  ReplayGuard guard;
  EXPECT_EQ(std::get<StatsKnowledge>(std::get<Knowledge>(channel(2).open(channel(1).seal(2, 1, k), guard).payload).payload)
                .A.cols(),
            200);
}

TEST(SecureChannel, RandomRunNamesAreFreshAndWellFormed) {
  const std::string a = random_run_name(), b = random_run_name();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a.substr(0, 4), "run-");
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 4), std::string::npos) << a;
}

TEST(SecureChannel, EachRejectionHasItsCode) {
  const SecureChannel one = channel(1), two = channel(2), three = channel(3), outsider = channel(4);
  const std::string good = one.seal(2, 10, stats_knowledge());
  ReplayGuard guard;

  RejectedMessage e = rejection(two, "definitely not a frame", guard);
  EXPECT_EQ(e.code, SecurityCode::Malformed);
  EXPECT_TRUE(e.protocol_code.has_value());
  EXPECT_FALSE(e.header.has_value());

  e = rejection(three, good, guard);  // addressed to node 2
  EXPECT_EQ(e.code, SecurityCode::WrongRecipient);
  ASSERT_TRUE(e.header.has_value());
  EXPECT_FALSE(e.authenticated);

  e = rejection(two, channel(1, derive_run_id("last week's run")).seal(2, 10, stats_knowledge()), guard);
  EXPECT_EQ(e.code, SecurityCode::WrongRun);

  e = rejection(two, outsider.seal(2, 10, stats_knowledge()), guard);
  EXPECT_EQ(e.code, SecurityCode::UnknownSender);
  EXPECT_NE(std::string(e.what()).find("node 4"), std::string::npos);

  // Node 4 claiming to be node 1: the allow list has node 1's key, node 4 does not hold its secret.
  PeerKeys peers = allow_list();
  peers.erase(1);
  const SecureChannel impostor(node_identity(4), 1, kRun, peers);
  e = rejection(two, impostor.seal(2, 10, stats_knowledge()), guard);
  EXPECT_EQ(e.code, SecurityCode::HeaderTampered);

  // The msg_id raised in transit, e.g. to slip past the replay window.
  e = rejection(two, reframe(good, [](std::string& h, std::string&, std::string&, std::string&) {
                  EnvelopeHeader header = decode_header(h, Limits{});
                  header.msg_id = 5000;
                  h = encode_header(header);
                }),
                guard);
  EXPECT_EQ(e.code, SecurityCode::HeaderTampered);

  e = rejection(two, reframe(good, [](std::string&, std::string&, std::string&, std::string& ct) { ct[7] ^= 4; }),
                guard);
  EXPECT_EQ(e.code, SecurityCode::CiphertextTampered);
  EXPECT_FALSE(e.authenticated);

  // A header from another, authentic message glued onto this ciphertext.
  const std::string other = one.seal(2, 11, Ack{3});
  const FrameView of = decode_frame(other, Limits{});
  e = rejection(two, reframe(good, [&](std::string& h, std::string& tag, std::string&, std::string&) {
                  h = std::string(of.header);
                  tag = std::string(of.header_tag);
                }),
                guard);
  EXPECT_EQ(e.code, SecurityCode::CiphertextTampered);

  // None of that touched the replay state: the genuine message still gets through, once.
  EXPECT_EQ(guard.senders(), 0u);
  EXPECT_NO_THROW(two.open(good, guard));
  e = rejection(two, good, guard);
  EXPECT_EQ(e.code, SecurityCode::Replayed);
  EXPECT_TRUE(e.authenticated);  // safe to answer with another Ack
  ASSERT_TRUE(e.header.has_value());
  EXPECT_EQ(e.header->msg_id, 10u);
}

TEST(SecureChannel, VersionAndPayloadErrorsAfterSealing) {
  const Identity one = node_identity(1);
  const SecureChannel two = channel(2);
  const MessageKeys keys = MessageKeys::for_sending(one, node_identity(2).public_key());
  auto frame_with = [&](const std::string& header, const std::string& payload) {
    const Sealed s = seal(keys, header, payload);
    return encode_frame({header, std::string(reinterpret_cast<const char*>(s.header_tag.data()), 16),
                         std::string(reinterpret_cast<const char*>(s.nonce.data()), 24), s.ciphertext});
  };
  EnvelopeHeader h;
  h.type = MessageType::Ack;
  h.from = 1;
  h.to = 2;
  h.msg_id = 1;
  h.run = kRun;
  ReplayGuard guard;

  // A payload that is not what the header says it is: authentic, but refused, and not recorded.
  RejectedMessage e = rejection(two, frame_with(encode_header(h), "\x81\xa5" "acked" "\xa1x"), guard);
  EXPECT_EQ(e.code, SecurityCode::MalformedPayload);
  EXPECT_TRUE(e.authenticated);
  EXPECT_EQ(e.protocol_code, ProtocolErrorCode::WrongType);
  EXPECT_EQ(guard.senders(), 0u);

  // A frame claiming to come from the receiver itself.
  EnvelopeHeader self = h;
  self.from = 2;
  const MessageKeys to_self = MessageKeys::for_sending(node_identity(2), node_identity(2).public_key());
  const std::string self_header = encode_header(self);
  const Sealed s = seal(to_self, self_header, encode_payload(Ack{1}));
  e = rejection(two,
                encode_frame({self_header, std::string(reinterpret_cast<const char*>(s.header_tag.data()), 16),
                              std::string(reinterpret_cast<const char*>(s.nonce.data()), 24), s.ciphertext}),
                guard);
  EXPECT_EQ(e.code, SecurityCode::UnknownSender);
  EXPECT_NE(std::string(e.what()).find("itself"), std::string::npos);

  // A newer protocol version: the header cannot even be read.
  std::string v3 = encode_header(h);
  ASSERT_EQ(v3.substr(1, 8), "\xa7version");
  v3[9] = 3;
  e = rejection(two, frame_with(v3, encode_payload(Ack{1})), guard);
  EXPECT_EQ(e.code, SecurityCode::UnsupportedVersion);
  EXPECT_EQ(e.protocol_code, ProtocolErrorCode::UnsupportedVersion);
}

TEST(SecureChannel, ARestartedNodeStillRefusesReplays) {
  const SecureChannel one = channel(1);
  const std::string frame = one.seal(2, 42, stats_knowledge());
  std::string persisted;
  {
    const SecureChannel two = channel(2);
    ReplayGuard guard;
    two.open(frame, guard);
    persisted = guard.serialize();  // what the node writes before acknowledging
  }
  const SecureChannel two_again = channel(2);
  ReplayGuard restored = ReplayGuard::deserialize(persisted, "replay state");
  EXPECT_EQ(rejection(two_again, frame, restored).code, SecurityCode::Replayed);
  EXPECT_NO_THROW(two_again.open(one.seal(2, 43, Ack{1}), restored));
}

TEST(SecureChannel, ConfigurationErrors) {
  PeerKeys peers = allow_list();
  EXPECT_THROW(SecureChannel(node_identity(2), 1, kRun, peers), InputError);  // node 1's key is not ours
  peers[9] = PublicKey{};  // all zeros: a low-order point
  try {
    SecureChannel(node_identity(1), 1, kRun, peers);
    ADD_FAILURE() << "accepted a low-order peer key";
  } catch (const SecurityError& e) {
    EXPECT_EQ(e.code, SecurityCode::InvalidKey);
  }
  EXPECT_THROW(channel(1).seal(4, 1, Ack{1}), InputError);
  EXPECT_NE(derive_run_id("a"), derive_run_id("b"));
  EXPECT_EQ(derive_run_id("a"), derive_run_id("a"));
  EXPECT_NE(random_run_id(), random_run_id());
}

// Whatever the bytes, open() either returns exactly what was sealed or throws RejectedMessage.
TEST(SecureChannel, MutatedFramesNeverGetThroughAltered) {
  const SecureChannel one = channel(1), two = channel(2);
  const std::string good = one.seal(2, 1, stats_knowledge());
  const FrameView original = decode_frame(good, Limits{});
  Rng rng = Rng::stream(99, Purpose::Generic);
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string m = good;
    for (uint64_t r = 1 + rng.below(3); r > 0; --r) {
      const size_t pos = rng.below(m.size());
      switch (rng.below(3)) {
        case 0: m[pos] = static_cast<char>(m[pos] ^ (1u << rng.below(8))); break;
        case 1: m.resize(pos); break;
        default: m.insert(pos, 1, static_cast<char>(rng.below(256))); break;
      }
      if (m.empty()) break;
    }
    ReplayGuard guard;
    try {
      const Message msg = two.open(m, guard);
      ++accepted;
      const FrameView f = decode_frame(m, Limits{});
      EXPECT_EQ(f.header, original.header);
      EXPECT_EQ(f.ciphertext, original.ciphertext);
    } catch (const RejectedMessage&) {
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception: " << e.what();
    }
  }
  EXPECT_LT(accepted, 30);  // only mutations that undo themselves or never changed the frame
}

}  // namespace
}  // namespace fednode
