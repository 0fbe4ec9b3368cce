// Secure aggregation in a run (docs/privacy.md, "Secure aggregation"): which mask group a node's
// knowledge is masked for, the pairwise seeds it needs (computed where its identity is, before
// the secure channel takes the identity over), and the masking the node's method applies to its
// own summary (NodeContext::masking). The networked node and the simulator both use it, so a run
// gives the same result either way.
//
// A star's leaves form one group, and the hub reads only their sum. On a chain or a ring every
// node is in the group: the first pass carries sums that stay masked until its last node adds its
// own piece, and the total it reads then travels back as the ring's complete knowledge (a chain
// gains that second pass: PlanOptions::masked_first_pass).
#pragma once

#include "crypto/keys.h"
#include "crypto/secure_aggregation.h"
#include "methods/method.h"
#include "topology/plan.h"

#include <map>
#include <memory>
#include <optional>

namespace fednode {

struct MaskPlan {
  Contributors group;     // every member masks with every other; the masks cancel in their sum
  uint64_t tag = 1;       // names the group in the seeds (crypto/secure_aggregation.h)
  bool counts_only = false;
};

// How secure aggregation changes the plans of `topology`'s nodes (topology/plan.h).
PlanOptions plan_options(const Topology& topology, const MethodOptions& method);

// The group `plan`'s node masks its knowledge for; nullopt when it masks nothing (secure
// aggregation off, or a star's hub, which sends only its head). Throws InputError for a
// topology secure aggregation does not cover (a graph), or a group in which someone would read
// a single other node's statistics.
std::optional<MaskPlan> mask_plan(const Topology& topology, const NodePlan& plan, const MethodOptions& method);

// The node's seed with every other member of the group.
std::map<NodeId, MaskSeed> mask_seeds(const Identity& me, NodeId me_id, const MaskPlan& plan,
                                      const std::map<NodeId, PublicKey>& keys, const RunId& run);

// What the node's method masks its own summary with (NodeContext::masking): node `me` adds the
// stream of every pair seed, or subtracts it when the peer's id is the smaller.
std::shared_ptr<const LocalMasking> local_masking(NodeId me, const MaskPlan& plan, std::map<NodeId, MaskSeed> seeds);

// A simulation has no key pairs: it makes them, and its run id, from the seed (as public as the
// seed, which is what a simulation is for).
Identity simulation_identity(uint64_t seed, NodeId node);
RunId simulation_run_id(uint64_t seed);

}  // namespace fednode
