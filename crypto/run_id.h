// Run ids: what binds every message to one run, so that frames of another run (or of an earlier
// run under the same keys) are refused (docs/security.md, "Replays across runs").
#pragma once

#include "crypto/keys.h"

#include <string>
#include <string_view>

namespace fednode {

// A deterministic run id from a name (e.g. the topology's run name): BLAKE2b-128 of
// "fednode/1 run id" || name. Every node of a run must use the same one, and a new run must
// use a new one.
RunId derive_run_id(std::string_view name);
RunId random_run_id();
// "run-" and 16 random hex digits (64 bits from libsodium's CSPRNG): a fresh run name for a new
// topology file. Not drawn from the seeded streams: it must differ between runs, not reproduce.
std::string random_run_name();

}  // namespace fednode
