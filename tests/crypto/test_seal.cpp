// Sealing follows the formula in crypto/seal.h and docs/protocol.md, and every alteration of a
// sealed message is caught and told apart.
#include "crypto/errors.h"
#include "crypto/seal.h"

#include <gtest/gtest.h>
#include <sodium.h>

#include <cstring>

namespace fednode {
namespace {

std::array<uint8_t, 32> seed(uint8_t b) {
  std::array<uint8_t, 32> s;
  s.fill(b);
  return s;
}

SealedView view(const Sealed& s) {
  return {std::string_view(reinterpret_cast<const char*>(s.nonce.data()), s.nonce.size()),
          std::string_view(reinterpret_cast<const char*>(s.header_tag.data()), s.header_tag.size()),
          s.ciphertext};
}

SecurityCode open_code(const Identity& me, const PublicKey& sender, std::string_view header, const SealedView& v) {
  try {
    open(me, sender, header, v);
  } catch (const SecurityError& e) {
    return e.code;
  }
  ADD_FAILURE() << "opened";
  return SecurityCode::Malformed;
}

TEST(CryptoSeal, RoundTrip) {
  const Identity a = Identity::generate(), b = Identity::generate();
  const std::string header = "header bytes", payload = "the payload";
  const Sealed s = seal(a, b.public_key(), header, payload);
  EXPECT_EQ(s.ciphertext.size(), payload.size() + kSealAeadTagBytes);
  EXPECT_EQ(open(b, a.public_key(), header, view(s)), payload);
  // Precomputed keys give the same result as the one-shot forms.
  const MessageKeys send = MessageKeys::for_sending(a, b.public_key());
  const MessageKeys receive = MessageKeys::for_receiving(b, a.public_key());
  EXPECT_EQ(open(receive, header, view(seal(send, header, payload))), payload);
  EXPECT_EQ(open(receive, "", view(seal(send, "", ""))), "");  // empty header and payload: fine
}

TEST(CryptoSeal, InPlaceIsTheSameConstruction) {
  const Identity a = Identity::generate(), b = Identity::generate();
  const MessageKeys send = MessageKeys::for_sending(a, b.public_key());
  const MessageKeys receive = MessageKeys::for_receiving(b, a.public_key());
  const std::string header = "header bytes";
  std::string payload(100000, '\0');
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i % 251);
  std::string text = payload + std::string(kSealAeadTagBytes, '\0');
  std::array<uint8_t, kSealNonceBytes> nonce;
  std::array<uint8_t, kSealHeaderTagBytes> tag;
  seal_in_place(send, header, text.data(), payload.size(), nonce.data(), tag.data());
  EXPECT_NE(text.substr(0, payload.size()), payload);
  const SealedView v{std::string_view(reinterpret_cast<const char*>(nonce.data()), nonce.size()),
                     std::string_view(reinterpret_cast<const char*>(tag.data()), tag.size()), text};
  EXPECT_EQ(open(receive, header, v), payload);
  // Byte for byte what the out-of-place form writes with the same nonce.
  const Sealed same = detail::seal_with_nonce(send, header, payload, nonce);
  EXPECT_EQ(same.ciphertext, text);
  EXPECT_EQ(same.header_tag, tag);
}

TEST(CryptoSeal, FreshNonceEveryTime) {
  const Identity a = Identity::generate(), b = Identity::generate();
  const Sealed s1 = seal(a, b.public_key(), "h", "same"), s2 = seal(a, b.public_key(), "h", "same");
  EXPECT_NE(s1.nonce, s2.nonce);
  EXPECT_NE(s1.ciphertext, s2.ciphertext);
  EXPECT_EQ(s1.header_tag, s2.header_tag);  // the tag covers the header only
}

// An independent implementation of the documented construction, from libsodium primitives.
TEST(CryptoSeal, MatchesTheDocumentedConstruction) {
  const Identity a = Identity::from_seed(seed(1)), b = Identity::from_seed(seed(2));
  std::array<uint8_t, kSealNonceBytes> nonce;
  for (size_t i = 0; i < nonce.size(); ++i) nonce[i] = static_cast<uint8_t>(i);
  const std::string header = "\x81\xa1h\x01", payload = "hello, node 2";
  const Sealed s = detail::seal_with_nonce(MessageKeys::for_sending(a, b.public_key()), header, payload, nonce);

  // Node 2's side of the key agreement: X25519(b_sk, a_pk) = X25519(a_sk, b_pk).
  uint8_t b_pk[32], b_sk[32], q[32];
  crypto_box_seed_keypair(b_pk, b_sk, seed(2).data());
  ASSERT_EQ(crypto_scalarmult(q, b_sk, a.public_key().bytes.data()), 0);
  const std::string context = "fednode/1 message keys";
  std::string input = context + std::string(reinterpret_cast<char*>(q), 32) +
                      std::string(reinterpret_cast<const char*>(a.public_key().bytes.data()), 32) +
                      std::string(reinterpret_cast<char*>(b_pk), 32);
  uint8_t okm[64];
  crypto_generichash(okm, 64, reinterpret_cast<const uint8_t*>(input.data()), input.size(), nullptr, 0);
  uint8_t tag[16];
  crypto_generichash(tag, 16, reinterpret_cast<const uint8_t*>(header.data()), header.size(), okm + 32, 32);
  EXPECT_EQ(std::memcmp(tag, s.header_tag.data(), 16), 0);
  std::string ct(payload.size() + 16, '\0');
  unsigned long long n = 0;
  crypto_aead_xchacha20poly1305_ietf_encrypt(reinterpret_cast<uint8_t*>(ct.data()), &n,
                                             reinterpret_cast<const uint8_t*>(payload.data()), payload.size(),
                                             reinterpret_cast<const uint8_t*>(header.data()), header.size(),
                                             nullptr, nonce.data(), okm);
  EXPECT_EQ(ct, s.ciphertext);
}

TEST(CryptoSeal, TamperingIsCaughtAndToldApart) {
  const Identity a = Identity::generate(), b = Identity::generate(), eve = Identity::generate();
  const std::string header = "header: from a to b, id 7", payload = "knowledge";
  const Sealed s = seal(a, b.public_key(), header, payload);
  const PublicKey& apk = a.public_key();

  std::string h2 = header;
  h2[20] ^= 1;
  EXPECT_EQ(open_code(b, apk, h2, view(s)), SecurityCode::HeaderTampered);

  Sealed c = s;
  c.ciphertext[3] ^= 0x80;
  EXPECT_EQ(open_code(b, apk, header, view(c)), SecurityCode::CiphertextTampered);
  c = s;
  c.ciphertext.back() ^= 1;  // in the Poly1305 tag
  EXPECT_EQ(open_code(b, apk, header, view(c)), SecurityCode::CiphertextTampered);
  c = s;
  c.nonce[0] ^= 1;
  EXPECT_EQ(open_code(b, apk, header, view(c)), SecurityCode::CiphertextTampered);
  c = s;
  c.header_tag[5] ^= 1;
  EXPECT_EQ(open_code(b, apk, header, view(c)), SecurityCode::HeaderTampered);
  c = s;
  c.ciphertext.pop_back();
  EXPECT_EQ(open_code(b, apk, header, view(c)), SecurityCode::CiphertextTampered);

  // Someone else's keys open nothing, in either role.
  EXPECT_EQ(open_code(eve, apk, header, view(s)), SecurityCode::HeaderTampered);
  EXPECT_EQ(open_code(b, eve.public_key(), header, view(s)), SecurityCode::HeaderTampered);
  // Eve cannot write as a: her message to b does not open as a's.
  const Sealed forged = seal(eve, b.public_key(), header, payload);
  EXPECT_EQ(open_code(b, apk, header, view(forged)), SecurityCode::HeaderTampered);
  // Keys are directional: a message from a to b does not open at a as if b had sent it.
  EXPECT_EQ(open_code(a, b.public_key(), header, view(s)), SecurityCode::HeaderTampered);

  SealedView short_nonce = view(s);
  short_nonce.nonce.remove_suffix(1);
  EXPECT_EQ(open_code(b, apk, header, short_nonce), SecurityCode::Malformed);
}

TEST(CryptoSeal, LowOrderKeysAreRefused) {
  const Identity a = Identity::generate();
  PublicKey zero;  // all zeros: X25519 with it gives the all-zero shared secret
  try {
    MessageKeys::for_sending(a, zero);
    ADD_FAILURE() << "accepted a low-order key";
  } catch (const SecurityError& e) {
    EXPECT_EQ(e.code, SecurityCode::InvalidKey);
  }
}

}  // namespace
}  // namespace fednode
