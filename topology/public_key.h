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
// Plain bytes rather than crypto's PublicKey, so that topology/ needs no crypto header; the two
// names differ so that code using both (the CLI, the node runtime) can include both.
// crypto's PublicKey{bytes} converts.
using PublicKeyBytes = std::array<uint8_t, kPublicKeyBytes>;

// The public key file in a node's key_dir: the one `fednode keygen` writes (crypto/key_files.h
// spells it kPublicKeyFile; a test checks that the two agree).
constexpr const char* kNodePublicKeyFile = "node.pub";

// Decodes hex or base64 (surrounding whitespace ignored). On failure returns nothing and, when
// `why` is given, says what is wrong (characters, length) without echoing the whole text.
std::optional<PublicKeyBytes> decode_public_key(const std::string& text, std::string* why = nullptr);
std::string public_key_hex(const PublicKeyBytes& key);

}  // namespace fednode
