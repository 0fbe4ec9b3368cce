// Random draws that must stay secret from every other party: differential-privacy noise. Rng
// (core/rng.h) is keyed by the federation's seed, which every node's topology file holds, so a
// recipient could redraw noise made with it and subtract it. SecretRng is ChaCha20 (libsodium)
// keyed by a 32-byte secret only the node holds (a networked node derives it from its own secret
// key and the run id, node/node_config.cpp), and still deterministic: a node restarted mid-run
// redraws the same noise, so a resent message is the same release, not a second one.
#pragma once

#include "core/rng.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace fednode {

using SecretKey32 = std::array<uint8_t, 32>;

// The key `fednode simulate` uses for a seed: BLAKE2b of a fixed label and the seed. A
// simulation's noise is then as public as its seed, which is what a simulation needs (the
// same seeds give the same results); only a networked node's noise is secret.
SecretKey32 simulation_noise_key(uint64_t seed);

class SecretRng {
 public:
  // One independent stream per (purpose, node, class), as Rng::stream.
  SecretRng(const SecretKey32& key, Purpose purpose, uint64_t node = 0, uint64_t cls = 0);
  ~SecretRng();
  SecretRng(const SecretRng&) = delete;
  SecretRng& operator=(const SecretRng&) = delete;

  uint64_t next();
  double uniform();  // [0, 1), 53 random bits
  double normal();   // standard normal, Box-Muller, the second value cached

 private:
  void refill();

  SecretKey32 key_{};  // the stream's own key, wiped on destruction
  uint64_t block_ = 0;
  std::vector<uint64_t> buffer_;
  size_t used_ = 0;
  BoxMuller normals_;
};

}  // namespace fednode
