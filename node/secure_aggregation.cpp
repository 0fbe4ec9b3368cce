#include "node/secure_aggregation.h"

#include "core/rng.h"
#include "crypto/run_id.h"

#include <array>
#include <stdexcept>

namespace fednode {

PlanOptions plan_options(const Topology& topology, const MethodOptions& method) {
  PlanOptions o;
  o.masked_first_pass = method.secure_aggregation != SecureAggregation::Off &&
                        (topology.federation.mode == TopologyMode::Linear || topology.federation.mode == TopologyMode::Ring);
  return o;
}

std::optional<MaskPlan> mask_plan(const Topology& topology, const NodePlan& plan, const MethodOptions& method) {
  if (method.secure_aggregation == SecureAggregation::Off) return std::nullopt;
  MaskPlan m;
  m.counts_only = method.secure_aggregation == SecureAggregation::Counts;
  switch (topology.federation.mode) {
    case TopologyMode::Star: {
      const NodeId hub = *topology.federation.hub;
      for (const auto& n : topology.nodes)
        if (n.id != hub) m.group.insert(n.id);
      if (plan.id == hub) return std::nullopt;
      if (m.group.size() < 2)
        throw InputError("secure aggregation needs at least two leaves: the hub would read a single leaf's statistics");
      return m;
    }
    case TopologyMode::Linear:
    case TopologyMode::Ring:
      for (const auto& n : topology.nodes) m.group.insert(n.id);
      // The last node of the first pass reads the total; with two nodes that is the other's piece.
      if (m.group.size() < 3)
        throw InputError(std::string("secure aggregation on a ") + to_string(topology.federation.mode) +
                         " topology needs at least three nodes: with two, the node that reads the total reads the "
                         "other's statistics");
      return m;
    case TopologyMode::Graph: break;
  }
  throw InputError(
      "secure aggregation covers star, linear and ring topologies, not graph: a graph's relays forward pieces apart, "
      "and no node there is sure to hold every member's piece (docs/privacy.md, \"Secure aggregation\")");
}

std::map<NodeId, MaskSeed> mask_seeds(const Identity& me, NodeId me_id, const MaskPlan& plan,
                                      const std::map<NodeId, PublicKey>& keys, const RunId& run) {
  std::map<NodeId, MaskSeed> seeds;
  for (NodeId peer : plan.group) {
    if (peer == me_id) continue;
    const auto key = keys.find(peer);
    if (key == keys.end()) throw InputError("secure aggregation: node " + std::to_string(peer) + " has no public key");
    seeds[peer] = pairwise_mask_seed(me, me_id, key->second, peer, run, plan.tag);
  }
  return seeds;
}

std::shared_ptr<const LocalMasking> local_masking(NodeId me, const MaskPlan& plan, std::map<NodeId, MaskSeed> seeds) {
  auto m = std::make_shared<LocalMasking>();
  m->group = plan.group;
  m->counts_only = plan.counts_only;
  m->add_masks = [me, seeds = std::move(seeds)](uint64_t stream, Ring128* values, size_t n) {
    for (const auto& [peer, seed] : seeds) apply_mask(seed, stream, values, n, /*subtract=*/peer < me);
  };
  return m;
}

Identity simulation_identity(uint64_t seed, NodeId node) {
  std::array<uint8_t, 32> bytes{};
  uint64_t state = derive_seed(seed, {static_cast<uint64_t>(Purpose::Generic), 0x5ECA66, static_cast<uint64_t>(node)});
  for (size_t b = 0; b < bytes.size(); b += 8) {
    const uint64_t word = splitmix64(state);
    for (size_t k = 0; k < 8; ++k) bytes[b + k] = static_cast<uint8_t>(word >> (8 * k));
  }
  return Identity::from_seed(bytes);
}

RunId simulation_run_id(uint64_t seed) { return derive_run_id("fednode simulate, seed " + std::to_string(seed)); }

}  // namespace fednode
