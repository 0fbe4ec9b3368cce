// Sealing: authenticated encryption of one message from one identity to another, with a header
// that travels in the clear but is bound to the ciphertext (docs/protocol.md, "Sealing").
//
//   q          = X25519(own secret key, peer public key)
//   okm        = BLAKE2b-512("fednode/1 message keys" || q || sender_pk || recipient_pk)
//   aead_key   = okm[0..32),  header_key = okm[32..64)
//   header_tag = BLAKE2b-128(key = header_key, header bytes)
//   ciphertext = XChaCha20-Poly1305-IETF(aead_key, random 24-byte nonce, ad = header bytes, payload)
//
// Only the two holders of the secret keys can compute the keys, so a message that opens was
// written by the peer (or by ourselves, which the sender/recipient order in okm rules out for a
// reflected message). The header tag lets a receiver tell a forged or altered header from an
// altered ciphertext; the AEAD's associated data is what binds the two together.
#pragma once

#include "crypto/keys.h"

#include <array>
#include <string>
#include <string_view>

namespace fednode {

constexpr size_t kSealNonceBytes = 24;
constexpr size_t kSealHeaderTagBytes = 16;
constexpr size_t kSealAeadTagBytes = 16;

// The keys for one direction between two identities. Wiped on destruction.
class MessageKeys {
 public:
  // Throws SecurityError(InvalidKey) when the peer key is a low-order point.
  static MessageKeys for_sending(const Identity& self, const PublicKey& recipient);
  static MessageKeys for_receiving(const Identity& self, const PublicKey& sender);
  MessageKeys(const MessageKeys&) = default;
  MessageKeys& operator=(const MessageKeys&) = default;
  ~MessageKeys();

 private:
  MessageKeys() = default;
  friend struct MessageKeysAccess;
  std::array<uint8_t, 32> aead_{};
  std::array<uint8_t, 32> header_{};
};

struct Sealed {
  std::array<uint8_t, kSealNonceBytes> nonce{};
  std::array<uint8_t, kSealHeaderTagBytes> header_tag{};
  std::string ciphertext;  // payload size + kSealAeadTagBytes
};

struct SealedView {
  std::string_view nonce;       // kSealNonceBytes
  std::string_view header_tag;  // kSealHeaderTagBytes
  std::string_view ciphertext;  // >= kSealAeadTagBytes
};

Sealed seal(const MessageKeys& keys, std::string_view header, std::string_view plaintext);
// The same, writing nonce, header tag and ciphertext (plaintext size + kSealAeadTagBytes bytes)
// to caller-provided memory, e.g. straight into a frame buffer.
void seal_into(const MessageKeys& keys, std::string_view header, std::string_view plaintext,
               uint8_t nonce[kSealNonceBytes], uint8_t header_tag[kSealHeaderTagBytes], char* ciphertext);
// The same again, in place: encrypts the `size` bytes at `text` where they are and writes the AEAD
// tag right after them (text must have room for size + kSealAeadTagBytes). The result is what
// seal_into() would write for the same nonce: ciphertext then tag.
void seal_in_place(const MessageKeys& keys, std::string_view header, char* text, size_t size,
                   uint8_t nonce[kSealNonceBytes], uint8_t header_tag[kSealHeaderTagBytes]);
// Throws SecurityError: HeaderTampered when the header tag fails, CiphertextTampered when the
// AEAD fails, Malformed when a field has the wrong length.
std::string open(const MessageKeys& keys, std::string_view header, const SealedView& sealed);
// The same, decrypting in place: `text` is the writable memory sealed.ciphertext views. Returns
// the plaintext, which starts at `text`; when the ciphertext fails to authenticate, `text` is
// wiped before the SecurityError is thrown.
std::string_view open_in_place(const MessageKeys& keys, std::string_view header, const SealedView& sealed,
                               char* text);

// The header tag alone, BLAKE2b-128(key = header_key, header), for a stream's head
// (crypto/stream.h), and its check: SecurityError(HeaderTampered) unless `tag` is the header's.
void header_tag(const MessageKeys& keys, std::string_view header, uint8_t out[kSealHeaderTagBytes]);
void check_header_tag(const MessageKeys& keys, std::string_view header, std::string_view tag);

// One-shot forms that derive the keys for this one message.
Sealed seal(const Identity& sender, const PublicKey& recipient, std::string_view header,
            std::string_view plaintext);
std::string open(const Identity& recipient, const PublicKey& sender, std::string_view header,
                 const SealedView& sealed);

namespace detail {
// A caller-chosen nonce makes sealing deterministic, which only known-answer tests and the
// worked example in docs/protocol.md want. Reusing a nonce with the same keys destroys
// confidentiality: never call this in a node.
Sealed seal_with_nonce(const MessageKeys& keys, std::string_view header, std::string_view plaintext,
                       const std::array<uint8_t, kSealNonceBytes>& nonce);
}  // namespace detail

}  // namespace fednode
