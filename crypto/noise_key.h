// The key of a node's differential-privacy noise (core/secret_rng.h): BLAKE2b-256 keyed by the
// node's X25519 secret key, of "fednode/1 dp noise" || run id. Only the node can compute it, so
// no recipient can redraw the noise; it is the same on every start of the node in one run, so a
// node restarted mid-run sends the same noisy values again (one release, not two), and another
// run under the same keys draws other noise.
#pragma once

#include "core/secret_rng.h"
#include "crypto/keys.h"

#include <string_view>

namespace fednode {

SecretKey32 derive_noise_key(const Identity& identity, const RunId& run);

// The same construction for another per-run secret of the node, named by `context` (e.g.
// secure aggregation's self-mask seed, crypto/secure_aggregation.h).
SecretKey32 derive_run_secret(const Identity& identity, std::string_view context, const RunId& run);

}  // namespace fednode
