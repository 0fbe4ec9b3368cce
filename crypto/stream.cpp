#include "crypto/stream.h"

#include "crypto/errors.h"
#include "crypto/secret_access.h"

#include <sodium.h>

#include <cstring>
#include <new>

namespace fednode {

static_assert(crypto_aead_chacha20poly1305_ietf_NPUBBYTES == 12, "ChaCha20-Poly1305-IETF nonce");
static_assert(crypto_aead_aes256gcm_NPUBBYTES == 12, "AES-256-GCM nonce");
static_assert(crypto_aead_chacha20poly1305_ietf_ABYTES == kStreamTagBytes, "Poly1305 tag");
static_assert(crypto_aead_aes256gcm_ABYTES == kStreamTagBytes, "GCM tag");

namespace {

constexpr char kStreamKeyContext[] = "fednode/2 stream key";  // 20 bytes, no terminator

void chunk_nonce(uint64_t index, bool last, uint8_t nonce[12]) {
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<uint8_t>(index >> (8 * i));
  nonce[8] = last ? 1 : 0;
  nonce[9] = nonce[10] = nonce[11] = 0;
}

const uint8_t* u8(const char* p) { return reinterpret_cast<const uint8_t*>(p); }
uint8_t* u8(char* p) { return reinterpret_cast<uint8_t*>(p); }

}  // namespace

// AES-GCM's expanded key schedule wants 16-byte alignment, which operator new of this struct
// gives (alignas).
struct StreamKey::State {
  uint8_t key[32];
  alignas(16) crypto_aead_aes256gcm_state aes;
  ~State() { sodium_memzero(this, sizeof *this); }
};

const char* to_string(StreamCipher cipher) {
  switch (cipher) {
    case StreamCipher::ChaCha20Poly1305: return "chacha20-poly1305";
    case StreamCipher::Aes256Gcm: return "aes-256-gcm";
  }
  return "?";
}

std::optional<StreamCipher> stream_cipher_named(std::string_view name) {
  for (StreamCipher c : {StreamCipher::ChaCha20Poly1305, StreamCipher::Aes256Gcm})
    if (name == to_string(c)) return c;
  return std::nullopt;
}

bool stream_cipher_available(StreamCipher cipher) {
  ensure_sodium();
  if (cipher == StreamCipher::Aes256Gcm) return crypto_aead_aes256gcm_is_available() == 1;
  return cipher == StreamCipher::ChaCha20Poly1305;
}

std::vector<StreamCipher> available_stream_ciphers() {
  std::vector<StreamCipher> out;
  // Measured on the development machine (docs/performance.md): 5.14 MB in 256 KiB chunks,
  // AES-256-GCM 2.8 ms, ChaCha20-Poly1305 4.4 ms on one core.
  if (stream_cipher_available(StreamCipher::Aes256Gcm)) out.push_back(StreamCipher::Aes256Gcm);
  out.push_back(StreamCipher::ChaCha20Poly1305);
  return out;
}

StreamKey::StreamKey(const MessageKeys& keys, StreamCipher cipher, const uint8_t nonce[kStreamNonceBytes])
    : cipher_(cipher), state_(std::make_unique<State>()) {
  if (!stream_cipher_available(cipher))
    throw SecurityError(SecurityCode::Malformed,
                        std::string("the cipher ") + to_string(cipher) + " is not available on this machine");
  const uint8_t id = static_cast<uint8_t>(cipher);
  crypto_generichash_state st;
  crypto_generichash_init(&st, MessageKeysAccess::aead(keys).data(), 32, sizeof state_->key);
  crypto_generichash_update(&st, u8(kStreamKeyContext), sizeof(kStreamKeyContext) - 1);
  crypto_generichash_update(&st, &id, 1);
  crypto_generichash_update(&st, nonce, kStreamNonceBytes);
  crypto_generichash_final(&st, state_->key, sizeof state_->key);
  sodium_memzero(&st, sizeof st);
  if (cipher == StreamCipher::Aes256Gcm) crypto_aead_aes256gcm_beforenm(&state_->aes, state_->key);
}

StreamKey StreamKey::for_sealing(const MessageKeys& keys, StreamCipher cipher, uint8_t nonce[kStreamNonceBytes]) {
  ensure_sodium();
  randombytes_buf(nonce, kStreamNonceBytes);
  return StreamKey(keys, cipher, nonce);
}

StreamKey StreamKey::for_opening(const MessageKeys& keys, StreamCipher cipher, const uint8_t nonce[kStreamNonceBytes]) {
  return StreamKey(keys, cipher, nonce);
}

StreamKey::StreamKey(StreamKey&&) noexcept = default;
StreamKey& StreamKey::operator=(StreamKey&&) noexcept = default;
StreamKey::~StreamKey() = default;

void StreamKey::seal_chunk(uint64_t index, bool last, std::string_view ad, const char* in, size_t size, char* out,
                           uint8_t tag[kStreamTagBytes]) const {
  uint8_t nonce[12];
  chunk_nonce(index, last, nonce);
  if (cipher_ == StreamCipher::Aes256Gcm)
    crypto_aead_aes256gcm_encrypt_detached_afternm(u8(out), tag, nullptr, u8(in), size, u8(ad.data()), ad.size(),
                                                   nullptr, nonce, &state_->aes);
  else
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(u8(out), tag, nullptr, u8(in), size, u8(ad.data()),
                                                       ad.size(), nullptr, nonce, state_->key);
}

bool StreamKey::open_chunk(uint64_t index, bool last, std::string_view ad, const char* in, size_t size,
                           const uint8_t tag[kStreamTagBytes], char* out) const {
  uint8_t nonce[12];
  chunk_nonce(index, last, nonce);
  const int rc =
      cipher_ == StreamCipher::Aes256Gcm
          ? crypto_aead_aes256gcm_decrypt_detached_afternm(u8(out), nullptr, u8(in), size, tag, u8(ad.data()),
                                                           ad.size(), nonce, &state_->aes)
          : crypto_aead_chacha20poly1305_ietf_decrypt_detached(u8(out), nullptr, u8(in), size, tag, u8(ad.data()),
                                                               ad.size(), nonce, state_->key);
  if (rc != 0) {
    sodium_memzero(out, size);
    return false;
  }
  return true;
}

}  // namespace fednode
