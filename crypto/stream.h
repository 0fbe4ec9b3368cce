// Sealing one message as a stream of chunks (protocol version 2, docs/protocol.md section 12), so
// that a multi-megabyte message is encrypted, sent, received and decrypted piece by piece, each
// stage overlapping the next, and a receiver never holds the whole ciphertext at once.
//
//   stream_key = BLAKE2b-256(key = aead_key, "fednode/2 stream key" || cipher id || nonce)
//   chunk i    = AEAD(stream_key, nonce_i = u64le(i) || u32le(last ? 1 : 0), ad = header bytes, P_i)
//
// with aead_key the direction's key of crypto/seal.h and a fresh random 24-byte nonce per message.
// This is the STREAM construction (Hoang, Reyhanitabar, Rogaway, Vizar 2015), which libsodium's
// secretstream also follows: a chunk opens only under its own index and its own "last" flag, so
// chunks that are reordered, dropped, repeated or moved to another message fail, and a stream
// cut short lacks the one chunk that opens as the last. Deriving a key per message keeps the
// 12-byte nonces of the two AEADs collision-free without any counter that would have to survive
// a crash.
//
// Two AEADs: ChaCha20-Poly1305-IETF everywhere, and AES-256-GCM where the CPU has AES-NI and
// carry-less multiplication (as libsodium checks), which is faster there; libcrypto (OpenSSL)
// computes it, libsodium the rest. The cipher is named
// in every header; a receiver states the ones it opens when it acknowledges a hello.
#pragma once

#include "crypto/seal.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace fednode {

enum class StreamCipher : uint8_t { ChaCha20Poly1305 = 1, Aes256Gcm = 2 };

constexpr size_t kStreamNonceBytes = 24;
constexpr size_t kStreamTagBytes = 16;

// The wire names: "chacha20-poly1305", "aes-256-gcm".
const char* to_string(StreamCipher cipher);
std::optional<StreamCipher> stream_cipher_named(std::string_view name);
bool stream_cipher_available(StreamCipher cipher);
// What this machine can open, fastest first (AES-256-GCM first where the CPU accelerates it).
std::vector<StreamCipher> available_stream_ciphers();

// One message's key. Sealing and opening chunks only read it, so threads may share one.
class StreamKey {
 public:
  // A sender's key: draws the message's nonce into `nonce`. Throws SecurityError(Malformed) for a
  // cipher this machine lacks.
  static StreamKey for_sealing(const MessageKeys& keys, StreamCipher cipher, uint8_t nonce[kStreamNonceBytes]);
  static StreamKey for_opening(const MessageKeys& keys, StreamCipher cipher, const uint8_t nonce[kStreamNonceBytes]);
  StreamKey(StreamKey&&) noexcept;
  StreamKey& operator=(StreamKey&&) noexcept;
  ~StreamKey();

  StreamCipher cipher() const { return cipher_; }

  // Writes the ciphertext of in[0, size) to out (out == in encrypts in place; out does not
  // otherwise overlap in) and the chunk's tag.
  void seal_chunk(uint64_t index, bool last, std::string_view ad, const char* in, size_t size, char* out,
                  uint8_t tag[kStreamTagBytes]) const;
  // Checks the tag and writes the plaintext of in[0, size) to out (out == in decrypts in place; out
  // does not otherwise overlap in). False when the chunk does not authenticate under this index
  // and flag; out is then zeros.
  [[nodiscard]] bool open_chunk(uint64_t index, bool last, std::string_view ad, const char* in, size_t size,
                                const uint8_t tag[kStreamTagBytes], char* out) const;

 private:
  struct State;
  StreamKey(const MessageKeys& keys, StreamCipher cipher, const uint8_t nonce[kStreamNonceBytes]);
  StreamCipher cipher_;
  std::unique_ptr<State> state_;
};

}  // namespace fednode
