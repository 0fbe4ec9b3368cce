#include "core/secret_rng.h"

#include <sodium.h>

#include <cstring>
#include <stdexcept>

namespace fednode {
namespace {

constexpr size_t kWordsPerRefill = 512;  // 4 KiB of ChaCha20 output at a time

void init_sodium() {
  if (sodium_init() < 0) throw std::runtime_error("libsodium failed to initialise");
}

void put_u64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

}  // namespace

SecretKey32 simulation_noise_key(uint64_t seed) {
  init_sodium();
  static const char kLabel[] = "fednode/1 simulated dp noise";
  uint8_t input[sizeof kLabel + 8];
  std::memcpy(input, kLabel, sizeof kLabel);
  put_u64(input + sizeof kLabel, seed);
  SecretKey32 key;
  crypto_generichash(key.data(), key.size(), input, sizeof input, nullptr, 0);
  return key;
}

SecretRng::SecretRng(const SecretKey32& key, Purpose purpose, uint64_t node, uint64_t cls) {
  init_sodium();
  // The stream's key is a keyed BLAKE2b of its coordinates, so streams never share output and
  // knowing one stream's key says nothing of another's.
  uint8_t coordinates[24];
  put_u64(coordinates, static_cast<uint64_t>(purpose));
  put_u64(coordinates + 8, node);
  put_u64(coordinates + 16, cls);
  crypto_generichash(key_.data(), key_.size(), coordinates, sizeof coordinates, key.data(), key.size());
}

SecretRng::~SecretRng() {
  sodium_memzero(key_.data(), key_.size());
  if (!buffer_.empty()) sodium_memzero(buffer_.data(), buffer_.size() * sizeof(uint64_t));
}

void SecretRng::refill() {
  buffer_.resize(kWordsPerRefill);
  uint8_t nonce[crypto_stream_chacha20_NONCEBYTES];
  static_assert(crypto_stream_chacha20_NONCEBYTES == 8, "the block counter is the 64-bit nonce");
  put_u64(nonce, block_++);
  crypto_stream_chacha20(reinterpret_cast<unsigned char*>(buffer_.data()), buffer_.size() * sizeof(uint64_t), nonce,
                         key_.data());
  // Byte order: the words are read as the machine stores them; every supported platform is
  // little-endian (docs/protocol.md says so for the wire as well).
  used_ = 0;
}

uint64_t SecretRng::next() {
  if (used_ == buffer_.size()) refill();
  return buffer_[used_++];
}

double SecretRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SecretRng::normal() {
  return normals_.draw([this] { return uniform(); });
}

}  // namespace fednode
