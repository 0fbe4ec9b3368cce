#include "crypto/aead.h"

#include "crypto/keys.h"
#include "core/parallel.h"

#include <sodium.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

namespace fednode::aead {

static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == kKeyBytes, "key size");
static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == kNonceBytes, "nonce size");
static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == kTagBytes, "tag size");

namespace {

const uint8_t* u8(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

// A multiple of ChaCha20's 64-byte block, so that each segment starts on a block counter; small
// enough that the follower waits little behind the leader, large enough that handing over costs
// nothing measurable (20 segments for a 5 MB message).
constexpr size_t kSegmentBytes = 256 * 1024;

// How far the leading stage has got, in segments; the following stage waits on it.
class Progress {
 public:
  void done(size_t segments) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = segments;
    }
    ready_.notify_one();
  }
  void wait_for(size_t segments) {
    std::unique_lock<std::mutex> lock(mutex_);
    ready_.wait(lock, [&] { return done_ >= segments; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  size_t done_ = 0;
};

// The IETF ChaCha20-Poly1305 construction under XChaCha20's derived key, as libsodium builds it:
// subkey = HChaCha20(key, nonce[0..16)), 12-byte nonce = 0^4 || nonce[16..24), Poly1305 key = the
// first 32 bytes of keystream block 0, message keystream from block 1, and the MAC over
// ad || pad16 || ciphertext || pad16 || le64(|ad|) || le64(|ciphertext|).
class Construction {
 public:
  Construction(const uint8_t nonce[kNonceBytes], const uint8_t key[kKeyBytes]) {
    crypto_core_hchacha20(subkey_, nonce, key, nullptr);
    std::copy(nonce + 16, nonce + 24, nonce12_ + 4);
    uint8_t block0[64] = {};
    crypto_stream_chacha20_ietf(block0, sizeof block0, nonce12_, subkey_);
    crypto_onetimeauth_poly1305_init(&mac_, block0);
    sodium_memzero(block0, sizeof block0);
  }
  ~Construction() {
    sodium_memzero(subkey_, sizeof subkey_);
    sodium_memzero(&mac_, sizeof mac_);
  }
  Construction(const Construction&) = delete;
  Construction& operator=(const Construction&) = delete;

  void xor_keystream(uint8_t* out, const uint8_t* in, size_t offset, size_t length) const {
    crypto_stream_chacha20_ietf_xor_ic(out + offset, in + offset, length, nonce12_,
                                       static_cast<uint32_t>(1 + offset / 64), subkey_);
  }
  void mac_begin(std::string_view ad) {
    crypto_onetimeauth_poly1305_update(&mac_, u8(ad), ad.size());
    pad(ad.size());
  }
  void mac_update(const uint8_t* data, size_t length) { crypto_onetimeauth_poly1305_update(&mac_, data, length); }
  void mac_end(size_t ad_size, size_t size, uint8_t tag[kTagBytes]) {
    pad(size);
    uint8_t lengths[16];
    for (int i = 0; i < 8; ++i) {
      lengths[i] = static_cast<uint8_t>(static_cast<uint64_t>(ad_size) >> (8 * i));
      lengths[8 + i] = static_cast<uint8_t>(static_cast<uint64_t>(size) >> (8 * i));
    }
    crypto_onetimeauth_poly1305_update(&mac_, lengths, sizeof lengths);
    crypto_onetimeauth_poly1305_final(&mac_, tag);
  }

 private:
  void pad(size_t length) {
    static const uint8_t zeros[16] = {};
    crypto_onetimeauth_poly1305_update(&mac_, zeros, (0x10 - length) & 0xf);
  }

  uint8_t subkey_[32];
  uint8_t nonce12_[12] = {};
  crypto_onetimeauth_poly1305_state mac_;
};

size_t segments_of(size_t size) { return (size + kSegmentBytes - 1) / kSegmentBytes; }
size_t segment_length(size_t s, size_t size) { return std::min(kSegmentBytes, size - s * kSegmentBytes); }

// Stage 0 leads and stage 1 follows, on two threads of the pool, or one after the other (0 first)
// when the pool has one thread or is busy; in either order nothing waits for what cannot come.
void run_stages(const std::function<void()>& lead, const std::function<void()>& follow) {
  for_each_chunk(2, true, [&](size_t stage) { stage == 0 ? lead() : follow(); });
}

}  // namespace

void encrypt(uint8_t* out, const uint8_t* in, size_t size, std::string_view ad, const uint8_t nonce[kNonceBytes],
             const uint8_t key[kKeyBytes], uint8_t tag[kTagBytes]) {
  ensure_sodium();  // selects libsodium's fastest ChaCha20 and Poly1305 for this CPU
  uint8_t empty = 0;
  if (size == 0) out = &empty;  // libsodium declares the ciphertext non-null, even an empty one
  if (size < kParallelAeadBytes) {
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(out, tag, nullptr, in, size, u8(ad), ad.size(), nullptr,
                                                        nonce, key);
    return;
  }
  Construction c(nonce, key);
  Progress encrypted;
  const size_t segments = segments_of(size);
  run_stages(
      [&] {
        for (size_t s = 0; s < segments; ++s) {
          c.xor_keystream(out, in, s * kSegmentBytes, segment_length(s, size));
          encrypted.done(s + 1);
        }
      },
      [&] {
        c.mac_begin(ad);
        for (size_t s = 0; s < segments; ++s) {
          encrypted.wait_for(s + 1);
          c.mac_update(out + s * kSegmentBytes, segment_length(s, size));
        }
        c.mac_end(ad.size(), size, tag);
      });
}

bool decrypt(uint8_t* out, const uint8_t* in, size_t size, std::string_view ad, const uint8_t nonce[kNonceBytes],
             const uint8_t key[kKeyBytes], const uint8_t tag[kTagBytes]) {
  ensure_sodium();
  const uint8_t empty = 0;
  if (size == 0) in = &empty;  // libsodium declares the ciphertext non-null, even an empty one
  if (size < kParallelAeadBytes)
    return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(out, nullptr, in, size, tag, u8(ad), ad.size(),
                                                               nonce, key) == 0;
  Construction c(nonce, key);
  Progress authenticated;
  uint8_t computed[kTagBytes];
  const size_t segments = segments_of(size);
  run_stages(
      [&] {
        c.mac_begin(ad);
        for (size_t s = 0; s < segments; ++s) {
          c.mac_update(in + s * kSegmentBytes, segment_length(s, size));
          authenticated.done(s + 1);
        }
        c.mac_end(ad.size(), size, computed);
      },
      [&] {
        for (size_t s = 0; s < segments; ++s) {
          authenticated.wait_for(s + 1);  // in place, the MAC must have read this segment first
          c.xor_keystream(out, in, s * kSegmentBytes, segment_length(s, size));
        }
      });
  const bool ok = crypto_verify_16(computed, tag) == 0;
  sodium_memzero(computed, sizeof computed);
  if (!ok) sodium_memzero(out, size);
  return ok;
}

}  // namespace fednode::aead
