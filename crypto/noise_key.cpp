#include "crypto/noise_key.h"

#include "crypto/secret_access.h"

#include <sodium.h>

namespace fednode {

SecretKey32 derive_noise_key(const Identity& identity, const RunId& run) {
  return derive_run_secret(identity, "fednode/1 dp noise", run);
}

SecretKey32 derive_run_secret(const Identity& identity, std::string_view context, const RunId& run) {
  ensure_sodium();
  const auto& secret = SecretKeyAccess::secret(identity);
  crypto_generichash_state st;
  crypto_generichash_init(&st, secret.data(), secret.size(), crypto_generichash_BYTES);
  crypto_generichash_update(&st, reinterpret_cast<const uint8_t*>(context.data()), context.size());
  crypto_generichash_update(&st, run.bytes.data(), run.bytes.size());
  SecretKey32 key;
  static_assert(crypto_generichash_BYTES == 32, "a 256-bit key");
  crypto_generichash_final(&st, key.data(), key.size());
  return key;
}

}  // namespace fednode
