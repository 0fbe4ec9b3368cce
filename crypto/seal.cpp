#include "crypto/seal.h"

#include "crypto/aead.h"
#include "crypto/errors.h"
#include "crypto/secret_access.h"

#include <sodium.h>

#include <cstring>

namespace fednode {

static_assert(crypto_aead_xchacha20poly1305_ietf_NPUBBYTES == kSealNonceBytes, "XChaCha20 nonce");
static_assert(crypto_aead_xchacha20poly1305_ietf_ABYTES == kSealAeadTagBytes, "Poly1305 tag");
static_assert(crypto_aead_xchacha20poly1305_ietf_KEYBYTES == 32, "XChaCha20 key");

namespace {

constexpr char kKeyContext[] = "fednode/1 message keys";  // 22 bytes, no terminator on the wire

MessageKeys derive(const Identity& self, const PublicKey& peer, const PublicKey& sender, const PublicKey& recipient) {
  ensure_sodium();
  uint8_t q[crypto_scalarmult_BYTES];
  if (crypto_scalarmult(q, SecretKeyAccess::secret(self).data(), peer.bytes.data()) != 0) {
    sodium_memzero(q, sizeof(q));
    throw SecurityError(SecurityCode::InvalidKey,
                        "public key " + peer.to_hex() + " is a low-order point: no shared secret");
  }
  uint8_t okm[64];
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, sizeof(okm));
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kKeyContext), sizeof(kKeyContext) - 1);
  crypto_generichash_update(&st, q, sizeof(q));
  crypto_generichash_update(&st, sender.bytes.data(), sender.bytes.size());
  crypto_generichash_update(&st, recipient.bytes.data(), recipient.bytes.size());
  crypto_generichash_final(&st, okm, sizeof(okm));
  MessageKeys keys = MessageKeysAccess::make();
  std::memcpy(MessageKeysAccess::aead(keys).data(), okm, 32);
  std::memcpy(MessageKeysAccess::header(keys).data(), okm + 32, 32);
  sodium_memzero(q, sizeof(q));
  sodium_memzero(okm, sizeof(okm));
  sodium_memzero(&st, sizeof(st));
  return keys;
}

const uint8_t* u8(std::string_view s) { return reinterpret_cast<const uint8_t*>(s.data()); }

}  // namespace

MessageKeys MessageKeys::for_sending(const Identity& self, const PublicKey& recipient) {
  return derive(self, recipient, self.public_key(), recipient);
}

MessageKeys MessageKeys::for_receiving(const Identity& self, const PublicKey& sender) {
  return derive(self, sender, sender, self.public_key());
}

MessageKeys::~MessageKeys() {
  sodium_memzero(aead_.data(), aead_.size());
  sodium_memzero(header_.data(), header_.size());
}

void header_tag(const MessageKeys& keys, std::string_view header, uint8_t out[kSealHeaderTagBytes]) {
  ensure_sodium();
  crypto_generichash(out, kSealHeaderTagBytes, reinterpret_cast<const uint8_t*>(header.data()), header.size(),
                     MessageKeysAccess::header(keys).data(), 32);
}

void check_header_tag(const MessageKeys& keys, std::string_view header, std::string_view tag) {
  uint8_t expected[kSealHeaderTagBytes];
  header_tag(keys, header, expected);
  if (tag.size() != kSealHeaderTagBytes || crypto_verify_16(expected, u8(tag)) != 0)
    throw SecurityError(SecurityCode::HeaderTampered,
                        "header tag does not verify: the header was altered or not written by the claimed sender");
}

namespace detail {

Sealed seal_with_nonce(const MessageKeys& keys, std::string_view header, std::string_view plaintext,
                       const std::array<uint8_t, kSealNonceBytes>& nonce) {
  ensure_sodium();
  Sealed s;
  s.nonce = nonce;
  header_tag(keys, header, s.header_tag.data());
  s.ciphertext.resize(plaintext.size() + kSealAeadTagBytes);
  uint8_t* c = reinterpret_cast<uint8_t*>(s.ciphertext.data());
  aead::encrypt(c, u8(plaintext), plaintext.size(), header, s.nonce.data(), MessageKeysAccess::aead(keys).data(),
                c + plaintext.size());
  return s;
}

}  // namespace detail

void seal_into(const MessageKeys& keys, std::string_view header, std::string_view plaintext,
               uint8_t nonce[kSealNonceBytes], uint8_t tag[kSealHeaderTagBytes], char* ciphertext) {
  ensure_sodium();
  randombytes_buf(nonce, kSealNonceBytes);
  header_tag(keys, header, tag);
  uint8_t* c = reinterpret_cast<uint8_t*>(ciphertext);
  aead::encrypt(c, u8(plaintext), plaintext.size(), header, nonce, MessageKeysAccess::aead(keys).data(),
                c + plaintext.size());
}

void seal_in_place(const MessageKeys& keys, std::string_view header, char* text, size_t size,
                   uint8_t nonce[kSealNonceBytes], uint8_t tag[kSealHeaderTagBytes]) {
  ensure_sodium();
  randombytes_buf(nonce, kSealNonceBytes);
  header_tag(keys, header, tag);
  // The frame holds the ciphertext, then the tag: what the combined form above writes.
  uint8_t* c = reinterpret_cast<uint8_t*>(text);
  aead::encrypt(c, c, size, header, nonce, MessageKeysAccess::aead(keys).data(), c + size);
}

Sealed seal(const MessageKeys& keys, std::string_view header, std::string_view plaintext) {
  ensure_sodium();
  // Random 192-bit nonces never repeat in practice, so no counter state has to survive crashes.
  std::array<uint8_t, kSealNonceBytes> nonce;
  randombytes_buf(nonce.data(), nonce.size());
  return detail::seal_with_nonce(keys, header, plaintext, nonce);
}

namespace {

// What comes before decrypting: the lengths, and the header tag.
void check_sealed(const MessageKeys& keys, std::string_view header, const SealedView& sealed) {
  ensure_sodium();
  if (sealed.nonce.size() != kSealNonceBytes || sealed.header_tag.size() != kSealHeaderTagBytes ||
      sealed.ciphertext.size() < kSealAeadTagBytes)
    throw SecurityError(SecurityCode::Malformed, "sealed message: nonce, header tag or ciphertext has the wrong length");
  check_header_tag(keys, header, sealed.header_tag);
}

// Decrypts sealed.ciphertext into `plaintext` (its size minus the tag; may be the ciphertext's
// own memory). `plaintext` is wiped when the tag fails.
void decrypt(const MessageKeys& keys, std::string_view header, const SealedView& sealed, char* plaintext) {
  const size_t size = sealed.ciphertext.size() - kSealAeadTagBytes;
  if (!aead::decrypt(reinterpret_cast<uint8_t*>(plaintext), u8(sealed.ciphertext), size, header, u8(sealed.nonce),
                     MessageKeysAccess::aead(keys).data(), u8(sealed.ciphertext) + size))
    throw SecurityError(SecurityCode::CiphertextTampered,
                        "ciphertext does not authenticate: the ciphertext or nonce was altered");
}

}  // namespace

std::string open(const MessageKeys& keys, std::string_view header, const SealedView& sealed) {
  check_sealed(keys, header, sealed);
  std::string plaintext(sealed.ciphertext.size() - kSealAeadTagBytes, '\0');
  decrypt(keys, header, sealed, plaintext.data());
  return plaintext;
}

std::string_view open_in_place(const MessageKeys& keys, std::string_view header, const SealedView& sealed,
                               char* text) {
  check_sealed(keys, header, sealed);
  decrypt(keys, header, sealed, text);
  return {text, sealed.ciphertext.size() - kSealAeadTagBytes};
}

Sealed seal(const Identity& sender, const PublicKey& recipient, std::string_view header, std::string_view plaintext) {
  return seal(MessageKeys::for_sending(sender, recipient), header, plaintext);
}

std::string open(const Identity& recipient, const PublicKey& sender, std::string_view header,
                 const SealedView& sealed) {
  return open(MessageKeys::for_receiving(recipient, sender), header, sealed);
}

}  // namespace fednode
