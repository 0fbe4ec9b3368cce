// Internal to crypto/: the one way to reach an Identity's secret key, for key agreement and for
// writing key files. Nothing outside crypto/*.cpp includes this.
#pragma once

#include "crypto/keys.h"
#include "crypto/seal.h"

namespace fednode {

struct SecretKeyAccess {
  static const std::array<uint8_t, kKeyBytes>& secret(const Identity& id) { return id.secret_; }
};

// The two keys of one direction (crypto/seal.h), for sealing a whole frame (seal.cpp) or a
// stream of chunks (stream.cpp).
struct MessageKeysAccess {
  static std::array<uint8_t, 32>& aead(MessageKeys& k) { return k.aead_; }
  static std::array<uint8_t, 32>& header(MessageKeys& k) { return k.header_; }
  static const std::array<uint8_t, 32>& aead(const MessageKeys& k) { return k.aead_; }
  static const std::array<uint8_t, 32>& header(const MessageKeys& k) { return k.header_; }
  static MessageKeys make() { return MessageKeys(); }
};

}  // namespace fednode
