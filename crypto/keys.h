// Node identities: one X25519 key pair per node (libsodium). The public key names the node in
// topology files; the secret key never leaves the node, is never printed, and is wiped from
// memory when its Identity is destroyed. docs/security.md explains why one X25519 key (no
// separate Ed25519 signing key) authenticates senders.
#pragma once

#include "core/types.h"

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <string_view>

namespace fednode {

constexpr size_t kKeyBytes = 32;

// Initialises libsodium once per process; every crypto entry point calls it.
void ensure_sodium();

struct PublicKey {
  std::array<uint8_t, kKeyBytes> bytes{};

  std::string to_hex() const;     // 64 lowercase hex digits: the form topology files use
  std::string to_base64() const;  // 44 characters, standard alphabet, padded
  // Accepts 64 hex digits or 44 (padded) / 43 (unpadded) base64 characters, surrounding
  // whitespace ignored. Throws SecurityError(InvalidKey) naming `where`.
  static PublicKey parse(std::string_view text, const std::string& where);

  bool operator==(const PublicKey& o) const { return bytes == o.bytes; }
  bool operator!=(const PublicKey& o) const { return bytes != o.bytes; }
  bool operator<(const PublicKey& o) const { return bytes < o.bytes; }
};
std::ostream& operator<<(std::ostream& out, const PublicKey& key);  // hex

class Identity {
 public:
  static Identity generate();
  // Deterministic, from a 32-byte seed: for tests and the documented worked example only. A
  // real node's identity comes from generate() (via `fednode keygen`).
  static Identity from_seed(const std::array<uint8_t, 32>& seed);
  // From a 32-byte X25519 secret key; throws SecurityError(InvalidKey) naming `where`.
  static Identity from_secret(const uint8_t* secret, size_t size, const std::string& where);

  Identity(Identity&& other) noexcept;
  Identity& operator=(Identity&& other) noexcept;
  Identity(const Identity&) = delete;
  Identity& operator=(const Identity&) = delete;
  ~Identity();

  const PublicKey& public_key() const { return public_; }

 private:
  Identity() = default;
  friend struct SecretKeyAccess;  // crypto/*.cpp only: key agreement and key files

  std::array<uint8_t, kKeyBytes> secret_{};
  PublicKey public_;
};

}  // namespace fednode
