#include "node/secure_aggregation.h"

#include "methods/fedcgs/masked_stats.h"

#include <stdexcept>

namespace fednode {

std::optional<MaskPlan> mask_plan(const Topology& topology, const NodePlan& plan, const MethodOptions& method) {
  if (method.secure_aggregation == SecureAggregation::Off) return std::nullopt;
  if (topology.federation.mode != TopologyMode::Star)
    throw InputError("secure aggregation is built for star topologies so far, not " +
                     std::string(to_string(topology.federation.mode)) + " (docs/privacy.md, \"Secure aggregation\")");
  const NodeId hub = *topology.federation.hub;
  MaskPlan m;
  for (const auto& n : topology.nodes)
    if (n.id != hub) m.group.insert(n.id);
  m.counts_only = method.secure_aggregation == SecureAggregation::Counts;
  if (plan.id == hub) return std::nullopt;
  if (m.group.size() < 2)
    throw InputError("secure aggregation needs at least two leaves: the hub would read a single leaf's statistics");
  return m;
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

std::function<void(Knowledge&)> masking_hook(NodeId me, MaskPlan plan, std::map<NodeId, MaskSeed> seeds) {
  return [me, plan = std::move(plan), seeds = std::move(seeds)](Knowledge& k) {
    auto* stats = std::get_if<StatsKnowledge>(&k.payload);
    if (!stats) throw std::logic_error("secure aggregation of knowledge that is not statistics");
    *stats = encode_for_masking(*stats, plan.group, plan.counts_only, "node " + std::to_string(me) + "'s statistics");
    MaskedStats& m = *stats->masked;
    // The masks cover A, N and B in one stream per pair, in masked_entry's order.
    std::vector<Ring128> flat(masked_size(m));
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = *masked_entry(m, i);
    for (const auto& [peer, seed] : seeds) apply_mask(seed, flat.data(), flat.size(), /*subtract=*/peer < me);
    for (size_t i = 0; i < flat.size(); ++i) *masked_entry(m, i) = flat[i];
  };
}

}  // namespace fednode
