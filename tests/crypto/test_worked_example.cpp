// The worked example of docs/protocol.md is produced by this test: every hex block marked
// <!-- example:NAME --> in the document must equal what the library produces from the
// example's inputs. Run with FEDNODE_PRINT_EXAMPLE=1 to print the blocks.
#include "node/secure_channel.h"
#include "crypto/run_id.h"
#include "crypto/stream.h"
#include "protocol/beacon.h"

#include "../protocol/samples.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

namespace fednode {
namespace {

std::string hex_block(std::string_view bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned char>(bytes[i]));
    out += buf;
    out += (i % 16 == 15 || i + 1 == bytes.size()) ? "\n" : " ";
  }
  return out;
}

std::string raw(const uint8_t* p, size_t n) { return std::string(reinterpret_cast<const char*>(p), n); }

// NAME -> the hex digits of its block, whitespace removed.
std::map<std::string, std::string> document_blocks(const std::string& path) {
  std::ifstream in(path);
  std::map<std::string, std::string> blocks;
  std::string line, name;
  bool inside = false;
  const std::string marker = "<!-- example:";
  while (std::getline(in, line)) {
    if (line.rfind(marker, 0) == 0) {
      name = line.substr(marker.size(), line.find(" -->") - marker.size());
      continue;
    }
    if (!name.empty() && line.rfind("```", 0) == 0) {
      if (inside) {
        inside = false;
        name.clear();
      } else {
        inside = true;
      }
      continue;
    }
    if (inside)
      for (char c : line)
        if (std::isxdigit(static_cast<unsigned char>(c))) blocks[name] += c;
  }
  return blocks;
}

std::string digits(const std::string& block) {
  std::string out;
  for (char c : block)
    if (std::isxdigit(static_cast<unsigned char>(c))) out += c;
  return out;
}

// Every produced block (NAME -> hex) equals docs/protocol.md's block of that name; with
// FEDNODE_PRINT_EXAMPLE=1 they are printed first, ready to paste.
void expect_documented(const std::map<std::string, std::string>& produced) {
  if (std::getenv("FEDNODE_PRINT_EXAMPLE"))
    for (const auto& [name, block] : produced) std::cout << "<!-- example:" << name << " -->\n" << block << "\n";
  const auto documented = document_blocks(std::string(FEDNODE_SOURCE_DIR) + "/docs/protocol.md");
  for (const auto& [name, block] : produced) {
    const auto it = documented.find(name);
    ASSERT_NE(it, documented.end()) << "docs/protocol.md has no block <!-- example:" << name << " -->";
    EXPECT_EQ(it->second, digits(block)) << "docs/protocol.md, block " << name << " should read:\n" << block;
  }
}

TEST(WorkedExample, MatchesDocsProtocolMd) {
  std::array<uint8_t, 32> seed1, seed2;
  seed1.fill(0x01);
  seed2.fill(0x02);
  const Identity n1 = Identity::from_seed(seed1), n2 = Identity::from_seed(seed2);
  const RunId run = derive_run_id("example");

  const Knowledge k = test::worked_example_knowledge();

  EnvelopeHeader h;
  h.type = MessageType::Knowledge;
  h.from = 1;
  h.to = 2;
  h.msg_id = 1;
  h.run = run;
  const std::string header = encode_header(h);
  const std::string payload = encode_payload(k);
  std::array<uint8_t, kSealNonceBytes> nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  const Sealed sealed =
      detail::seal_with_nonce(MessageKeys::for_sending(n1, n2.public_key()), header, payload, nonce);
  const std::string frame = encode_frame({header, raw(sealed.header_tag.data(), 16), raw(nonce.data(), 24),
                                          sealed.ciphertext});

  // The intermediate values an implementer checks against, recomputed from the primitives.
  uint8_t sk1[32], pk1[32], q[32], okm[64];
  crypto_box_seed_keypair(pk1, sk1, seed1.data());
  ASSERT_EQ(crypto_scalarmult(q, sk1, n2.public_key().bytes.data()), 0);
  const std::string kdf_input = "fednode/1 message keys" + raw(q, 32) + raw(n1.public_key().bytes.data(), 32) +
                                raw(n2.public_key().bytes.data(), 32);
  crypto_generichash(okm, 64, reinterpret_cast<const uint8_t*>(kdf_input.data()), kdf_input.size(), nullptr, 0);

  const std::map<std::string, std::string> produced = {
      {"node1-public-key", hex_block(raw(n1.public_key().bytes.data(), 32))},
      {"node2-public-key", hex_block(raw(n2.public_key().bytes.data(), 32))},
      {"run-id", hex_block(raw(run.bytes.data(), 16))},
      {"header", hex_block(header)},
      {"payload", hex_block(payload)},
      {"shared-secret", hex_block(raw(q, 32))},
      {"aead-key", hex_block(raw(okm, 32))},
      {"header-key", hex_block(raw(okm + 32, 32))},
      {"header-tag", hex_block(raw(sealed.header_tag.data(), 16))},
      {"ciphertext", hex_block(sealed.ciphertext)},
      {"frame", hex_block(frame)},
  };
  expect_documented(produced);
  if (::testing::Test::HasFatalFailure()) return;

  // And the frame opens at node 2 into the same knowledge.
  PeerKeys peers{{1, n1.public_key()}, {2, n2.public_key()}};
  std::array<uint8_t, 32> again = seed2;
  const SecureChannel node2(Identity::from_seed(again), 2, run, peers);
  ReplayGuard guard;
  const Message m = node2.open(frame, guard);
  EXPECT_EQ(std::get<StatsKnowledge>(std::get<Knowledge>(m.payload).payload).B, std::get<StatsKnowledge>(k.payload).B);
}

// docs/protocol.md, section 11, "Version 2": the same message as a one-chunk stream under
// ChaCha20-Poly1305, every value recomputed from the primitives the page names, and the
// library's stream key checked to open the documented chunk.
TEST(WorkedExample, VersionTwoStreamMatchesDocsProtocolMd) {
  std::array<uint8_t, 32> seed1, seed2;
  seed1.fill(0x01);
  seed2.fill(0x02);
  const Identity n1 = Identity::from_seed(seed1), n2 = Identity::from_seed(seed2);
  const std::string payload = encode_payload(test::worked_example_knowledge());

  EnvelopeHeader h;
  h.version = kStreamVersion;
  h.type = MessageType::Knowledge;
  h.from = 1;
  h.to = 2;
  h.msg_id = 1;
  h.run = derive_run_id("example");
  h.stream = StreamLayout{"chacha20-poly1305", payload.size(), 1024};
  const std::string header = encode_header(h);
  const MessageKeys keys = MessageKeys::for_sending(n1, n2.public_key());
  uint8_t tag[kSealHeaderTagBytes];
  header_tag(keys, header, tag);

  // The stream nonce, fixed for the example (a node draws it at random), and the derivations.
  uint8_t nonce[kStreamNonceBytes];
  for (size_t i = 0; i < sizeof nonce; ++i) nonce[i] = static_cast<uint8_t>(0x20 + i);
  uint8_t sk1[32], pk1[32], q[32], okm[64];
  crypto_box_seed_keypair(pk1, sk1, seed1.data());
  ASSERT_EQ(crypto_scalarmult(q, sk1, n2.public_key().bytes.data()), 0);
  const std::string kdf_input = "fednode/1 message keys" + raw(q, 32) + raw(n1.public_key().bytes.data(), 32) +
                                raw(n2.public_key().bytes.data(), 32);
  crypto_generichash(okm, 64, reinterpret_cast<const uint8_t*>(kdf_input.data()), kdf_input.size(), nullptr, 0);
  const std::string key_input = std::string("fednode/2 stream key") + '\x01' + raw(nonce, sizeof nonce);
  uint8_t stream_key[32];
  crypto_generichash(stream_key, 32, reinterpret_cast<const uint8_t*>(key_input.data()), key_input.size(), okm, 32);
  uint8_t chunk_nonce[12] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};  // chunk 0, the last
  std::string chunk(payload.size() + 16, '\0');
  crypto_aead_chacha20poly1305_ietf_encrypt_detached(
      reinterpret_cast<unsigned char*>(chunk.data()), reinterpret_cast<unsigned char*>(chunk.data()) + payload.size(), nullptr,
      reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), reinterpret_cast<const unsigned char*>(header.data()),
      header.size(), nullptr, chunk_nonce, stream_key);
  const std::string frame = encode_frame({header, raw(tag, sizeof tag), raw(nonce, sizeof nonce), chunk});

  const std::map<std::string, std::string> produced = {
      {"v2-header", hex_block(header)},
      {"v2-header-tag", hex_block(raw(tag, sizeof tag))},
      {"v2-stream-key", hex_block(raw(stream_key, sizeof stream_key))},
      {"v2-chunk-nonce", hex_block(raw(chunk_nonce, sizeof chunk_nonce))},
      {"v2-chunk", hex_block(chunk)},
      {"v2-frame", hex_block(frame)},
  };
  expect_documented(produced);
  if (::testing::Test::HasFatalFailure()) return;

  // The library's key for this nonce opens the chunk, as node 2 would; under another index or
  // without the last flag it does not.
  const StreamKey key = StreamKey::for_opening(MessageKeys::for_receiving(n2, n1.public_key()), StreamCipher::ChaCha20Poly1305, nonce);
  std::string opened(payload.size(), '\0');
  const auto* chunk_tag = reinterpret_cast<const uint8_t*>(chunk.data() + payload.size());
  ASSERT_TRUE(key.open_chunk(0, true, header, chunk.data(), payload.size(), chunk_tag, opened.data()));
  EXPECT_EQ(opened, payload);
  EXPECT_FALSE(key.open_chunk(0, false, header, chunk.data(), payload.size(), chunk_tag, opened.data()));
  EXPECT_FALSE(key.open_chunk(1, true, header, chunk.data(), payload.size(), chunk_tag, opened.data()));
}

// docs/protocol.md, section 13: the beacon of the example, byte for byte where the page gives it.
TEST(WorkedExample, DiscoveryBeacon) {
  Beacon b;
  b.run = beacon_run_tag(derive_run_id("seed run"));
  b.node = 3;
  b.port = 7300;
  const std::string bytes = encode_beacon(b);
  const std::string expected_head = "\x46\x4e\x44\x42\x01\x00\x1c\x84\x00\x00\x00\x03\x5e\xed\x52\x7d\xd3\x73\x8b\xb9";
  EXPECT_EQ(bytes.substr(0, expected_head.size()), expected_head);
}

}  // namespace
}  // namespace fednode
