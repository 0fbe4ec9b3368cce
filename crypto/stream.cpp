#include "crypto/stream.h"

#include "crypto/errors.h"
#include "crypto/secret_access.h"

#include <openssl/evp.h>
#include <sodium.h>

#include <climits>
#include <cstring>
#include <new>
#include <stdexcept>

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

// AES-256-GCM is OpenSSL's (libcrypto): the same AEAD as libsodium's, byte for byte (the tests
// seal with one and compare with the other), at 2.4x its speed on the machines we measured
// (docs/performance.md: 5 MiB in 256 KiB chunks, 1.18 ms against 2.79 ms). Fetched once; a
// context per chunk, so that threads sharing a StreamKey share nothing mutable. Null where
// libcrypto's configuration leaves it out: the cipher is then not offered (stream_cipher_available).
const EVP_CIPHER* fetched_aes256gcm() {
  static EVP_CIPHER* const cipher = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return cipher;
}

const EVP_CIPHER* aes256gcm() {
  const EVP_CIPHER* cipher = fetched_aes256gcm();
  if (!cipher) throw std::runtime_error("OpenSSL's libcrypto offers no AES-256-GCM here (its default provider did not load)");
  return cipher;
}

class GcmContext {
 public:
  GcmContext() : ctx_(EVP_CIPHER_CTX_new()) {
    if (!ctx_) throw std::bad_alloc();
  }
  ~GcmContext() { EVP_CIPHER_CTX_free(ctx_); }  // cleanses the key schedule
  GcmContext(const GcmContext&) = delete;
  GcmContext& operator=(const GcmContext&) = delete;
  EVP_CIPHER_CTX* get() const { return ctx_; }

 private:
  EVP_CIPHER_CTX* ctx_;
};

// The chunk sizes of the protocol are far below INT_MAX; a caller's larger buffer is an error
// here rather than a silently truncated encryption.
int evp_length(size_t size, const char* what) {
  if (size > static_cast<size_t>(INT_MAX))
    throw std::length_error(std::string("AES-256-GCM: ") + what + " of " + std::to_string(size) + " bytes is too long");
  return static_cast<int>(size);
}

void gcm_seal(const uint8_t key[32], const uint8_t nonce[12], std::string_view ad, const char* in, size_t size,
              char* out, uint8_t tag[kStreamTagBytes]) {
  const int ad_len = evp_length(ad.size(), "associated data"), len = evp_length(size, "a chunk");
  GcmContext ctx;
  int written = 0, tail = 0;
  if (EVP_EncryptInit_ex2(ctx.get(), aes256gcm(), key, nonce, nullptr) != 1 ||
      (ad_len > 0 && EVP_EncryptUpdate(ctx.get(), nullptr, &written, u8(ad.data()), ad_len) != 1) ||
      (len > 0 && EVP_EncryptUpdate(ctx.get(), u8(out), &written, u8(in), len) != 1) ||
      EVP_EncryptFinal_ex(ctx.get(), u8(out) + (len > 0 ? written : 0), &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kStreamTagBytes), tag) != 1)
    throw std::runtime_error("AES-256-GCM: OpenSSL failed to seal a chunk");
}

bool gcm_open(const uint8_t key[32], const uint8_t nonce[12], std::string_view ad, const char* in, size_t size,
              const uint8_t tag[kStreamTagBytes], char* out) {
  const int ad_len = evp_length(ad.size(), "associated data"), len = evp_length(size, "a chunk");
  GcmContext ctx;
  int written = 0, tail = 0;
  uint8_t expected[kStreamTagBytes];
  std::memcpy(expected, tag, kStreamTagBytes);  // the control call takes a non-const pointer
  if (EVP_DecryptInit_ex2(ctx.get(), aes256gcm(), key, nonce, nullptr) != 1 ||
      (ad_len > 0 && EVP_DecryptUpdate(ctx.get(), nullptr, &written, u8(ad.data()), ad_len) != 1) ||
      (len > 0 && EVP_DecryptUpdate(ctx.get(), u8(out), &written, u8(in), len) != 1) ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kStreamTagBytes), expected) != 1) {
    // libcrypto writes the plaintext before it checks the tag (libsodium checks first): nothing
    // unauthenticated may stay behind, here nor when the tag fails (open_chunk wipes it then).
    sodium_memzero(out, size);
    throw std::runtime_error("AES-256-GCM: OpenSSL failed to open a chunk");
  }
  return EVP_DecryptFinal_ex(ctx.get(), u8(out) + (len > 0 ? written : 0), &tail) == 1;
}

}  // namespace

struct StreamKey::State {
  uint8_t key[32];
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
  // libsodium's test says whether the CPU accelerates AES-GCM (AES-NI and carry-less
  // multiplication): without, ChaCha20-Poly1305 is the faster of the two.
  if (cipher == StreamCipher::Aes256Gcm) return crypto_aead_aes256gcm_is_available() == 1 && fetched_aes256gcm();
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
    gcm_seal(state_->key, nonce, ad, in, size, out, tag);
  else
    crypto_aead_chacha20poly1305_ietf_encrypt_detached(u8(out), tag, nullptr, u8(in), size, u8(ad.data()),
                                                       ad.size(), nullptr, nonce, state_->key);
}

bool StreamKey::open_chunk(uint64_t index, bool last, std::string_view ad, const char* in, size_t size,
                           const uint8_t tag[kStreamTagBytes], char* out) const {
  uint8_t nonce[12];
  chunk_nonce(index, last, nonce);
  const bool opened =
      cipher_ == StreamCipher::Aes256Gcm
          ? gcm_open(state_->key, nonce, ad, in, size, tag, out)
          : crypto_aead_chacha20poly1305_ietf_decrypt_detached(u8(out), nullptr, u8(in), size, tag, u8(ad.data()),
                                                               ad.size(), nonce, state_->key) == 0;
  if (!opened) {
    sodium_memzero(out, size);
    return false;
  }
  return true;
}

}  // namespace fednode
