// Key files, as `fednode keygen --out DIR` writes them:
//   DIR/node.key  "fednode-secret-key:" + 64 hex digits + "\n", mode 0600
//   DIR/node.pub  64 hex digits + "\n": the text that goes into topology files
// Writing never overwrites an existing key; loading refuses a secret key that other users can
// read or write, as ssh does.
#pragma once

#include "crypto/keys.h"

#include <string>

namespace fednode {

constexpr const char* kSecretKeyFile = "node.key";
constexpr const char* kPublicKeyFile = "node.pub";

// Writes `identity` into `dir` (created with mode 0700 if missing). Throws InputError if either
// file exists already, or on any I/O failure (then nothing is left behind).
void write_identity(const std::string& dir, const Identity& identity);
// generate() + write_identity(); returns the public key to print.
PublicKey write_new_identity(const std::string& dir);

// DIR/node.key, checked against DIR/node.pub when that exists.
Identity load_identity(const std::string& dir);
Identity load_secret_key_file(const std::string& path);
PublicKey load_public_key_file(const std::string& path);

}  // namespace fednode
