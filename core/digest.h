// SHA-256 over bytes and files (libsodium), for backbone fingerprints and feature-cache integrity.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace fednode {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& text) { update(text.data(), text.size()); }
  // Streams a whole file; throws InputError naming the file when it cannot be read.
  void update_file(const std::string& path);
  // Lowercase hex of the 32-byte digest. The object is finished afterwards.
  std::string hex();

 private:
  // Opaque storage for crypto_hash_sha256_state, so libsodium stays out of this header.
  alignas(16) std::array<unsigned char, 128> state_{};
  bool finished_ = false;
};

std::string sha256_hex(const std::string& bytes);
std::string sha256_file_hex(const std::string& path);

}  // namespace fednode
