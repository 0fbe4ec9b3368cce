// Internal to crypto/: the one way to reach an Identity's secret key, for key agreement and for
// writing key files. Nothing outside crypto/*.cpp includes this.
#pragma once

#include "crypto/keys.h"

namespace fednode {

struct SecretKeyAccess {
  static const std::array<uint8_t, kKeyBytes>& secret(const Identity& id) { return id.secret_; }
};

}  // namespace fednode
