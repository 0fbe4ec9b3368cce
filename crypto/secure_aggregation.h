// Pairwise masks for secure aggregation (Bonawitz et al., CCS 2017, "one-time pads from pairwise
// agreements"), made from the keys the topology already lists, so that no key-advertisement round
// is needed (docs/privacy.md, "Secure aggregation").
//
// The seed of the pair {i, j} in one mask group is BLAKE2b-256 of
//   "fednode/1 secagg mask" || X25519(sk_i, pk_j) || run id || group tag || min(i, j) || max(i, j)
// (tag: 8 bytes, ids: 4 bytes, little-endian). Both ends compute it (X25519 is symmetric), nobody
// else can, and a seed revealed to recover from a dropout says nothing of the long-term keys or
// of any other group's seeds. ChaCha20 keyed by the seed, with a 64-bit stream number as its
// nonce (one stream per part masked), expands it to one ring element (core/fixed_ring.h) per entry. Node i adds mask_ij for every j > i in the group and subtracts it
// for every j < i, so the masks of a whole group cancel in the sum of its members' values.
#pragma once

#include "core/contributors.h"
#include "core/fixed_ring.h"
#include "core/secret_rng.h"
#include "core/types.h"
#include "crypto/keys.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

namespace fednode {

using MaskSeed = SecretKey32;

// A node's self-mask seed for one run (double masking, Bonawitz et al.: the star's leaves add
// ChaCha20(self seed) on top of their pair masks, so that a piece arriving after its pair seeds
// were revealed for a dropout still says nothing): derive_run_secret of "fednode/1 secagg self
// mask" (crypto/noise_key.h). Secret until the node reveals it as a survivor; the same on a restart.
MaskSeed self_mask_seed(const Identity& me, const RunId& run);

// Throws SecurityError(InvalidKey) for a peer key that is a low-order point.
MaskSeed pairwise_mask_seed(const Identity& me, NodeId me_id, const PublicKey& peer, NodeId peer_id, const RunId& run,
                            uint64_t group_tag);

// The consistency round of a star's unmasking round (docs/privacy.md, "Dropouts"): a key per
// pair, derived like the pair seed but under another context, so that a pair seed revealed for a
// dropout gives the hub nothing towards forging a tag.
MaskSeed consistency_key(const Identity& me, NodeId me_id, const PublicKey& peer, NodeId peer_id, const RunId& run,
                         uint64_t group_tag);
// Survivor `from`'s statement to survivor `to` that the hub told it this split: BLAKE2b-256
// keyed by their consistency key over both ids (so that a tag cannot be reflected back to its
// sender) and the two lists.
using ConsistencyTag = std::array<uint8_t, 32>;
ConsistencyTag consistency_tag(const MaskSeed& key, NodeId from, NodeId to, const Contributors& survivors,
                               const Contributors& dropped);
// In constant time.
bool tags_equal(const ConsistencyTag& a, const ConsistencyTag& b);

// values[k] += mask[k] (or -= with `subtract`) for k < n, mask = ChaCha20(seed, nonce = stream
// as 8 little-endian bytes after 4 zero bytes) read as ring elements, entry k from bytes
// [16k, 16k + 16).
void apply_mask(const MaskSeed& seed, uint64_t stream, Ring128* values, size_t n, bool subtract);

// Node `me`'s masks for `group` (node id -> public key; must hold `me`): adds the mask of every
// other member, with the sign of the pair's order.
void add_pairwise_masks(Ring128* values, size_t n, uint64_t stream, const Identity& me, NodeId me_id,
                        const std::map<NodeId, PublicKey>& group, const RunId& run, uint64_t group_tag);

}  // namespace fednode
