// Secure aggregation in a run (docs/privacy.md, "Secure aggregation"): which mask group a node's
// knowledge is masked for, the pairwise seeds it needs (computed where its identity is, before
// the secure channel takes the identity over), and the hook that masks what it sends. The
// networked node and the simulator both use it, so a run gives the same result either way.
// Built for stars: the leaves form one group, and the hub reads only their sum.
#pragma once

#include "crypto/keys.h"
#include "crypto/secure_aggregation.h"
#include "methods/method.h"
#include "topology/plan.h"

#include <functional>
#include <map>
#include <optional>

namespace fednode {

struct MaskPlan {
  Contributors group;     // every member masks with every other; the masks cancel in their sum
  uint64_t tag = 1;       // names the group in the seeds (crypto/secure_aggregation.h)
  bool counts_only = false;
};

// The group `plan`'s node masks its knowledge for; nullopt when it masks nothing (secure
// aggregation off, or a star's hub, which sends only its head). Throws InputError for a topology
// secure aggregation does not cover yet (everything but a star).
std::optional<MaskPlan> mask_plan(const Topology& topology, const NodePlan& plan, const MethodOptions& method);

// The node's seed with every other member of the group.
std::map<NodeId, MaskSeed> mask_seeds(const Identity& me, NodeId me_id, const MaskPlan& plan,
                                      const std::map<NodeId, PublicKey>& keys, const RunId& run);

// What the machine calls on each piece of knowledge it sends (MachineConfig::mask_outgoing): the
// statistics encoded into the ring (methods/fedcgs/masked_stats.h) and masked.
std::function<void(Knowledge&)> masking_hook(NodeId me, MaskPlan plan, std::map<NodeId, MaskSeed> seeds);

}  // namespace fednode
