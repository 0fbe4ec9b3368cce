// Secure aggregation in a run (docs/privacy.md, "Secure aggregation"): which mask group a node's
// knowledge is masked for, the pairwise seeds it needs (computed where its identity is, before
// the secure channel takes the identity over), and the masking the node's method applies to its
// own summary (NodeContext::masking). The networked node and the simulator both use it, so a run
// gives the same result either way.
//
// A star's leaves form one group, and the hub reads only their sum. On a chain or a ring every
// node is in the group: the first pass carries sums that stay masked until its last node adds its
// own piece, and the total it reads then travels back as the ring's complete knowledge (a chain
// gains that second pass: PlanOptions::secure_aggregation). A graph likewise, its collector
// sink reading the total.
#pragma once

#include "crypto/keys.h"
#include "crypto/secure_aggregation.h"
#include "methods/method.h"
#include "protocol/messages.h"
#include "topology/plan.h"

#include <map>
#include <memory>
#include <optional>

namespace fednode {

struct MaskPlan {
  Contributors group;       // every member masks with every other; the masks cancel in their sum
  uint64_t tag = 1;         // names the group in the seeds (crypto/secure_aggregation.h)
  bool counts_only = false;
  bool member = true;       // masks its own summary; false for a star's hub, which reads the sum
  // A star: every leaf adds a self mask too (double masking), and the hub runs the unmasking
  // round that removes the self masks and recovers from leaves that dropped out.
  bool unmasking_round = false;
};

// What a member masks with. Secret: only the node itself computes them.
struct MaskSecrets {
  std::map<NodeId, MaskSeed> pairs;  // with every other member
  std::optional<MaskSeed> self;      // with MaskPlan::unmasking_round
  std::map<NodeId, MaskSeed> consistency;  // with every other member, with MaskPlan::unmasking_round
};

// How secure aggregation changes the nodes' plans (topology/plan.h).
PlanOptions plan_options(const MethodOptions& method);

// The group `plan`'s node takes part in; nullopt when secure aggregation is off. Throws
// InputError for a topology secure aggregation does not cover (a graph), or a group in which
// someone would read a single other node's statistics.
std::optional<MaskPlan> mask_plan(const Topology& topology, const NodePlan& plan, const MethodOptions& method);

// The member's seeds (none for a node that is not a member).
MaskSecrets mask_secrets(const Identity& me, NodeId me_id, const MaskPlan& plan,
                         const std::map<NodeId, PublicKey>& keys, const RunId& run);

// What the node's method masks its own summary with (NodeContext::masking): node `me` adds the
// stream of every pair seed, or subtracts it when the peer's id is the smaller, and its self mask.
std::shared_ptr<const LocalMasking> local_masking(NodeId me, const MaskPlan& plan, const MaskSecrets& secrets);

// The unmasking round's consistency step (docs/privacy.md, "Dropouts"). A leaf answers a split
// only when more than half the leaves survive in it: two disjoint groups, each told the other
// dropped, cannot then both be answered. Empty when it may; otherwise why not.
std::string too_few_survivors(const MaskPlan& plan, const UnmaskRequest& request);
// A survivor's first answer: its consistency tag to every other survivor.
UnmaskReply consistency_reply(NodeId me, const UnmaskRequest& request, const MaskSecrets& secrets);
// The hub's second request to survivor `to`: the split, with the tag every other survivor
// addressed to `to` (from their consistency answers, which must all be in).
UnmaskRequest tagged_request(const UnmaskRequest& decision, NodeId to, const std::map<NodeId, UnmaskReply>& answers);
// Empty when every tag of a second request is the one its sender makes for this split;
// otherwise who did not say so (the hub told it another split, or forged the tag).
std::string inconsistent_tags(NodeId me, const UnmaskRequest& tagged, const MaskSecrets& secrets);

// A survivor's answer to the hub's second request: its self seed and its pair seeds with the
// dropped (UnmaskReply). Throws std::logic_error for a node without those secrets.
UnmaskReply unmask_reply(const UnmaskRequest& request, const MaskSecrets& secrets);

// What a star's hub removes from the leaves' masked sum once every survivor answered
// (NodeContext::unmasking): each survivor's self mask, and the masks it shared with each dropped
// leaf, with the sign it added them with.
std::shared_ptr<const Unmasking> unmasking(const MaskPlan& plan, const UnmaskRequest& decision,
                                           const std::map<NodeId, UnmaskReply>& replies);

// A simulation has no key pairs: it makes them, and its run id, from the seed (as public as the
// seed, which is what a simulation is for).
Identity simulation_identity(uint64_t seed, NodeId node);
RunId simulation_run_id(uint64_t seed);

}  // namespace fednode
