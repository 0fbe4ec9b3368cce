// crypto/aead: the segmented, two-stage XChaCha20-Poly1305 must be libsodium's, byte for byte,
// at every size around the segment and block boundaries, in place or not, on one thread or two;
// and it must refuse (and wipe) whatever libsodium refuses.
#include "crypto/aead.h"

#include "core/rng.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sodium.h>

#include <cstring>
#include <vector>

namespace fednode {
namespace {

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  Rng rng = Rng::stream(seed, Purpose::Generic);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng.next() >> 56);
  return v;
}

struct Reference {
  std::vector<uint8_t> ciphertext;
  uint8_t tag[aead::kTagBytes];
};

Reference libsodium(const std::vector<uint8_t>& plain, std::string_view ad, const uint8_t* nonce, const uint8_t* key) {
  Reference r;
  r.ciphertext.resize(plain.size());
  uint8_t empty = 0;  // libsodium declares the ciphertext non-null, even an empty one
  crypto_aead_xchacha20poly1305_ietf_encrypt_detached(plain.empty() ? &empty : r.ciphertext.data(), r.tag, nullptr, plain.data(), plain.size(),
                                                      reinterpret_cast<const uint8_t*>(ad.data()), ad.size(), nullptr,
                                                      nonce, key);
  return r;
}

class AeadThreads : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    saved_ = omp_get_max_threads();
    omp_set_num_threads(GetParam());
  }
  void TearDown() override { omp_set_num_threads(saved_); }
  int saved_ = 1;
};

TEST_P(AeadThreads, EqualsLibsodiumAtEverySize) {
  const auto key = random_bytes(aead::kKeyBytes, 1), nonce = random_bytes(aead::kNonceBytes, 2);
  const size_t mib = size_t{1} << 20, segment = 256 * 1024;
  const std::vector<size_t> sizes = {0, 1, 15, 16, 17, 63, 64, 65, mib - 1, mib, mib + 1, mib + 63, mib + 64,
                                     mib + segment - 1, mib + segment + 1, 3 * mib + 17, 5140614};
  const std::string ads[] = {"", "h", std::string(16, 'a'), std::string(37, 'b')};
  uint64_t seed = 10;
  for (size_t size : sizes)
    for (const std::string& ad : ads) {
      const auto plain = random_bytes(size, seed++);
      const Reference want = libsodium(plain, ad, nonce.data(), key.data());
      // Out of place, then in place.
      std::vector<uint8_t> ct(size), text = plain;
      uint8_t tag[aead::kTagBytes], tag2[aead::kTagBytes];
      aead::encrypt(ct.data(), plain.data(), size, ad, nonce.data(), key.data(), tag);
      aead::encrypt(text.data(), text.data(), size, ad, nonce.data(), key.data(), tag2);
      ASSERT_EQ(ct, want.ciphertext) << "size " << size << ", ad " << ad.size();
      ASSERT_EQ(text, want.ciphertext) << "in place, size " << size;
      ASSERT_EQ(0, std::memcmp(tag, want.tag, sizeof tag)) << "size " << size << ", ad " << ad.size();
      ASSERT_EQ(0, std::memcmp(tag2, want.tag, sizeof tag)) << "in place, size " << size;
      std::vector<uint8_t> back(size);
      ASSERT_TRUE(aead::decrypt(back.data(), ct.data(), size, ad, nonce.data(), key.data(), tag)) << size;
      ASSERT_EQ(back, plain);
      ASSERT_TRUE(aead::decrypt(text.data(), text.data(), size, ad, nonce.data(), key.data(), tag)) << size;
      ASSERT_EQ(text, plain) << "in place, size " << size;
    }
}

TEST_P(AeadThreads, RefusesAndWipesWhatLibsodiumRefuses) {
  const auto key = random_bytes(aead::kKeyBytes, 3), nonce = random_bytes(aead::kNonceBytes, 4);
  for (size_t size : {size_t{100}, size_t{3} << 20}) {
    const auto plain = random_bytes(size, 5);
    const Reference good = libsodium(plain, "header", nonce.data(), key.data());
    // A flipped bit in the first, a middle and the last byte of the ciphertext, in the tag, in the
    // associated data, and a wrong nonce.
    for (int tamper = 0; tamper < 6; ++tamper) {
      std::vector<uint8_t> text = good.ciphertext;
      uint8_t tag[aead::kTagBytes];
      std::memcpy(tag, good.tag, sizeof tag);
      std::string ad = "header";
      auto n = nonce;
      switch (tamper) {
        case 0: text[0] ^= 1; break;
        case 1: text[size / 2] ^= 0x80; break;
        case 2: text[size - 1] ^= 2; break;
        case 3: tag[15] ^= 1; break;
        case 4: ad[0] = 'H'; break;
        case 5: n[23] ^= 1; break;
      }
      EXPECT_FALSE(aead::decrypt(text.data(), text.data(), size, ad, n.data(), key.data(), tag))
          << "size " << size << ", tamper " << tamper;
      EXPECT_EQ(text, std::vector<uint8_t>(size, 0)) << "refused plaintext not wiped, size " << size;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OneAndTwoThreads, AeadThreads, ::testing::Values(1, 2));

}  // namespace
}  // namespace fednode
