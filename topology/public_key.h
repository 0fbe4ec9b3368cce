// Public keys as they appear in topology files: 32 bytes written as 64 hex digits or as
// base64 (standard or URL-safe alphabet, padding optional). Only parsing and printing live
// here; generating and using keys is crypto/'s business.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace fednode {

// libsodium's X25519 and Ed25519 public keys are both this long.
constexpr size_t kPublicKeyBytes = 32;
using PublicKey = std::array<uint8_t, kPublicKeyBytes>;

// Decodes hex or base64 (surrounding whitespace ignored). On failure returns nothing and, when
// `why` is given, says what is wrong (characters, length) without echoing the whole text.
std::optional<PublicKey> decode_public_key(const std::string& text, std::string* why = nullptr);
std::string public_key_hex(const PublicKey& key);

}  // namespace fednode
