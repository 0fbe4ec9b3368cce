#include "core/digest.h"

#include "core/types.h"

#include <sodium.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

namespace fednode {

namespace {

static_assert(sizeof(crypto_hash_sha256_state) <= 128, "Sha256 storage too small");

crypto_hash_sha256_state* as_state(std::array<unsigned char, 128>& storage) {
  return reinterpret_cast<crypto_hash_sha256_state*>(storage.data());
}

}  // namespace

Sha256::Sha256() {
  // sodium_init is idempotent and thread-safe; SHA-256 itself needs no runtime setup, but calling
  // it here keeps libsodium's CPU-feature detection in one place for every later user.
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
  crypto_hash_sha256_init(as_state(state_));
}

void Sha256::update(const void* data, size_t size) {
  if (finished_) throw std::logic_error("Sha256::update after hex()");
  crypto_hash_sha256_update(as_state(state_), static_cast<const unsigned char*>(data), size);
}

void Sha256::update_file(const std::string& path) {
  require_regular_file(path, "file to hash");
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw InputError(path + ": cannot open for hashing: " + std::strerror(errno));
  std::array<unsigned char, 1 << 16> buffer;
  for (;;) {
    const size_t got = std::fread(buffer.data(), 1, buffer.size(), f.get());
    if (got > 0) update(buffer.data(), got);
    if (got < buffer.size()) {
      if (std::ferror(f.get())) throw InputError(path + ": read error while hashing");
      break;
    }
  }
}

std::string Sha256::hex() {
  if (finished_) throw std::logic_error("Sha256::hex called twice");
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(as_state(state_), digest);
  finished_ = true;
  static const char* digits = "0123456789abcdef";
  std::string out(2 * sizeof digest, '0');
  for (size_t i = 0; i < sizeof digest; ++i) {
    out[2 * i] = digits[digest[i] >> 4];
    out[2 * i + 1] = digits[digest[i] & 15];
  }
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  Sha256 h;
  h.update(bytes);
  return h.hex();
}

std::string sha256_file_hex(const std::string& path) {
  Sha256 h;
  h.update_file(path);
  return h.hex();
}

}  // namespace fednode
