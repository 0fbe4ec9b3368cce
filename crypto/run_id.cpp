#include "crypto/run_id.h"

#include <sodium.h>

#include <algorithm>
#include <array>

namespace fednode {

RunId derive_run_id(std::string_view name) {
  ensure_sodium();
  static constexpr char kContext[] = "fednode/1 run id";
  RunId run;
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, run.bytes.size());
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kContext), sizeof(kContext) - 1);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(name.data()), name.size());
  crypto_generichash_final(&st, run.bytes.data(), run.bytes.size());
  return run;
}

std::array<uint8_t, 8> beacon_run_tag(const RunId& run) {
  ensure_sodium();
  static constexpr char kContext[] = "fednode/1 beacon";
  std::array<uint8_t, 16> hash;
  crypto_generichash_state st;
  crypto_generichash_init(&st, nullptr, 0, hash.size());
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(kContext), sizeof(kContext) - 1);
  crypto_generichash_update(&st, run.bytes.data(), run.bytes.size());
  crypto_generichash_final(&st, hash.data(), hash.size());
  std::array<uint8_t, 8> tag;
  std::copy(hash.begin(), hash.begin() + tag.size(), tag.begin());
  return tag;
}

RunId random_run_id() {
  ensure_sodium();
  RunId run;
  randombytes_buf(run.bytes.data(), run.bytes.size());
  return run;
}

std::string random_run_name() {
  ensure_sodium();
  std::array<uint8_t, 8> bytes;
  randombytes_buf(bytes.data(), bytes.size());
  std::string hex(2 * bytes.size() + 1, '\0');
  sodium_bin2hex(hex.data(), hex.size(), bytes.data(), bytes.size());
  hex.pop_back();  // the terminator sodium_bin2hex writes
  return "run-" + hex;
}

}  // namespace fednode
