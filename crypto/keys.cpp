#include "crypto/keys.h"

#include "crypto/errors.h"

#include <sodium.h>

#include <cctype>
#include <mutex>
#include <ostream>
#include <stdexcept>

namespace fednode {

static_assert(crypto_box_PUBLICKEYBYTES == kKeyBytes && crypto_box_SECRETKEYBYTES == kKeyBytes &&
                  crypto_scalarmult_BYTES == kKeyBytes,
              "fednode keys are X25519 keys");

void ensure_sodium() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = sodium_init() >= 0; });
  if (!ok) throw std::runtime_error("libsodium failed to initialise");
}

std::string PublicKey::to_hex() const {
  ensure_sodium();
  char buf[2 * kKeyBytes + 1];
  sodium_bin2hex(buf, sizeof(buf), bytes.data(), bytes.size());
  return std::string(buf, 2 * kKeyBytes);
}

std::string PublicKey::to_base64() const {
  ensure_sodium();
  char buf[sodium_base64_ENCODED_LEN(kKeyBytes, sodium_base64_VARIANT_ORIGINAL)];
  sodium_bin2base64(buf, sizeof(buf), bytes.data(), bytes.size(), sodium_base64_VARIANT_ORIGINAL);
  return std::string(buf);
}

PublicKey PublicKey::parse(std::string_view text, const std::string& where) {
  ensure_sodium();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  PublicKey key;
  size_t len = 0;
  const char* end = nullptr;
  int rc = -1;
  if (text.size() == 2 * kKeyBytes) {
    rc = sodium_hex2bin(key.bytes.data(), key.bytes.size(), text.data(), text.size(), nullptr, &len, &end);
  } else if (text.size() == 44 || text.size() == 43) {
    rc = sodium_base642bin(key.bytes.data(), key.bytes.size(), text.data(), text.size(), nullptr, &len, &end,
                           text.size() == 44 ? sodium_base64_VARIANT_ORIGINAL
                                             : sodium_base64_VARIANT_ORIGINAL_NO_PADDING);
  } else {
    throw SecurityError(SecurityCode::InvalidKey,
                        where + ": a public key is 64 hex digits or 44 base64 characters, found " +
                            std::to_string(text.size()) + " characters");
  }
  if (rc != 0 || len != kKeyBytes || end != text.data() + text.size())
    throw SecurityError(SecurityCode::InvalidKey, where + ": public key is not valid " +
                                                      std::string(text.size() == 2 * kKeyBytes ? "hex" : "base64"));
  return key;
}

std::ostream& operator<<(std::ostream& out, const PublicKey& key) { return out << key.to_hex(); }

Identity Identity::generate() {
  ensure_sodium();
  Identity id;
  crypto_box_keypair(id.public_.bytes.data(), id.secret_.data());
  return id;
}

Identity Identity::from_seed(const std::array<uint8_t, 32>& seed) {
  ensure_sodium();
  Identity id;
  crypto_box_seed_keypair(id.public_.bytes.data(), id.secret_.data(), seed.data());
  return id;
}

Identity Identity::from_secret(const uint8_t* secret, size_t size, const std::string& where) {
  ensure_sodium();
  if (size != kKeyBytes)
    throw SecurityError(SecurityCode::InvalidKey, where + ": secret key has " + std::to_string(size) +
                                                      " bytes, expected 32");
  Identity id;
  std::copy(secret, secret + kKeyBytes, id.secret_.begin());
  if (crypto_scalarmult_base(id.public_.bytes.data(), id.secret_.data()) != 0)
    throw SecurityError(SecurityCode::InvalidKey, where + ": secret key is not a usable X25519 key");
  return id;
}

Identity::Identity(Identity&& other) noexcept : secret_(other.secret_), public_(other.public_) {
  sodium_memzero(other.secret_.data(), other.secret_.size());
}

Identity& Identity::operator=(Identity&& other) noexcept {
  if (this != &other) {
    secret_ = other.secret_;
    public_ = other.public_;
    sodium_memzero(other.secret_.data(), other.secret_.size());
  }
  return *this;
}

Identity::~Identity() { sodium_memzero(secret_.data(), secret_.size()); }

}  // namespace fednode
