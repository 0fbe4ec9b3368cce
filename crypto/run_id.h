// Run ids: what binds every message to one run, so that frames of another run (or of an earlier
// run under the same keys) are refused (docs/security.md, "Replays across runs").
#pragma once

#include "crypto/keys.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fednode {

// A deterministic run id from a name (e.g. the topology's run name): BLAKE2b-128 of
// "fednode/1 run id" || name. Every node of a run must use the same one, and a new run must
// use a new one.
RunId derive_run_id(std::string_view name);
RunId random_run_id();
// What a discovery beacon says of its run (protocol/beacon.h): the first 8 bytes of BLAKE2b-128
// of "fednode/1 beacon" || run id. Enough to tell runs on one LAN apart; it does not give the run
// id itself to whoever listens.
std::array<uint8_t, 8> beacon_run_tag(const RunId& run);
// "run-" and 16 random hex digits (64 bits from libsodium's CSPRNG): a fresh run name for a new
// topology file. Not drawn from the seeded streams: it must differ between runs, not reproduce.
std::string random_run_name();

}  // namespace fednode
