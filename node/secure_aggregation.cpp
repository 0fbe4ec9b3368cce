#include "node/secure_aggregation.h"

#include "core/rng.h"
#include "crypto/run_id.h"

#include <array>
#include <stdexcept>

namespace fednode {

PlanOptions plan_options(const MethodOptions& method) {
  PlanOptions o;
  o.secure_aggregation = method.secure_aggregation != SecureAggregation::Off;
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
      m.member = plan.id != hub;
      m.unmasking_round = true;
      if (m.group.size() < 2)
        throw InputError("secure aggregation needs at least two leaves: the hub would read a single leaf's statistics");
      return m;
    }
    case TopologyMode::Linear:
    case TopologyMode::Ring:
    case TopologyMode::Graph:
      for (const auto& n : topology.nodes) m.group.insert(n.id);
      // The last node of the first pass (a graph's sink) reads the total; with two nodes that is
      // the other's piece.
      if (m.group.size() < 3)
        throw InputError(std::string("secure aggregation on a ") + to_string(topology.federation.mode) +
                         " topology needs at least three nodes: with two, the node that reads the total reads the "
                         "other's statistics");
      return m;
  }
  throw std::logic_error("mask_plan: unknown topology mode");
}

MaskSecrets mask_secrets(const Identity& me, NodeId me_id, const MaskPlan& plan,
                         const std::map<NodeId, PublicKey>& keys, const RunId& run) {
  MaskSecrets secrets;
  if (!plan.member) return secrets;
  for (NodeId peer : plan.group) {
    if (peer == me_id) continue;
    const auto key = keys.find(peer);
    if (key == keys.end()) throw InputError("secure aggregation: node " + std::to_string(peer) + " has no public key");
    secrets.pairs[peer] = pairwise_mask_seed(me, me_id, key->second, peer, run, plan.tag);
  }
  if (plan.unmasking_round) {
    secrets.self = self_mask_seed(me, run);
    for (NodeId peer : plan.group)
      if (peer != me_id) secrets.consistency[peer] = consistency_key(me, me_id, keys.at(peer), peer, run, plan.tag);
  }
  return secrets;
}

std::shared_ptr<const LocalMasking> local_masking(NodeId me, const MaskPlan& plan, const MaskSecrets& secrets) {
  auto m = std::make_shared<LocalMasking>();
  m->group = plan.group;
  m->counts_only = plan.counts_only;
  m->add_masks = [me, secrets](uint64_t stream, Ring128* values, size_t n) {
    for (const auto& [peer, seed] : secrets.pairs) apply_mask(seed, stream, values, n, /*subtract=*/peer < me);
    if (secrets.self) apply_mask(*secrets.self, stream, values, n, /*subtract=*/false);
  };
  return m;
}

std::string too_few_survivors(const MaskPlan& plan, const UnmaskRequest& request) {
  if (2 * request.survivors.size() > plan.group.size()) return "";
  return "it names " + std::to_string(request.survivors.size()) + " survivors of " + std::to_string(plan.group.size()) +
         " leaves, and a leaf answers only when more than half survive (two splits of half could each unmask the "
         "other half's sum)";
}

UnmaskReply consistency_reply(NodeId me, const UnmaskRequest& request, const MaskSecrets& secrets) {
  UnmaskReply r;
  r.survivors = request.survivors;
  r.dropped = request.dropped;
  for (NodeId to : request.survivors)
    if (to != me) r.tags.push_back(consistency_tag(secrets.consistency.at(to), me, to, request.survivors, request.dropped));
  return r;
}

UnmaskRequest tagged_request(const UnmaskRequest& decision, NodeId to, const std::map<NodeId, UnmaskReply>& answers) {
  UnmaskRequest r{decision.survivors, decision.dropped, {}};
  for (NodeId from : decision.survivors) {
    if (from == to) continue;
    // `from`'s tags skip `from` itself: `to`'s place among the others.
    size_t at = 0;
    for (NodeId s : decision.survivors) {
      if (s == to) break;
      if (s != from) ++at;
    }
    r.tags.push_back(answers.at(from).tags.at(at));
  }
  return r;
}

std::string inconsistent_tags(NodeId me, const UnmaskRequest& tagged, const MaskSecrets& secrets) {
  size_t i = 0;
  for (NodeId from : tagged.survivors) {
    if (from == me) continue;
    const auto key = secrets.consistency.find(from);
    if (key == secrets.consistency.end() || i >= tagged.tags.size() ||
        !tags_equal(tagged.tags[i], consistency_tag(key->second, from, me, tagged.survivors, tagged.dropped)))
      return "node " + std::to_string(from) + "'s consistency tag does not confirm this split (the hub may have told it "
             "another): no seeds are revealed";
    ++i;
  }
  return "";
}

UnmaskReply unmask_reply(const UnmaskRequest& request, const MaskSecrets& secrets) {
  if (!secrets.self) throw std::logic_error("an unmasking request answered without a self seed");
  UnmaskReply r;
  r.survivors = request.survivors;
  r.dropped = request.dropped;
  r.self_seed = *secrets.self;
  for (NodeId d : request.dropped) r.pair_seeds[d] = secrets.pairs.at(d);
  return r;
}

std::shared_ptr<const Unmasking> unmasking(const MaskPlan& plan, const UnmaskRequest& decision,
                                           const std::map<NodeId, UnmaskReply>& replies) {
  auto u = std::make_shared<Unmasking>();
  u->group = plan.group;
  u->survivors = decision.survivors;
  std::vector<std::pair<NodeId, UnmaskReply>> answers(replies.begin(), replies.end());
  u->remove = [answers](uint64_t stream, Ring128* values, size_t n) {
    for (const auto& [survivor, reply] : answers) {
      apply_mask(reply.self_seed, stream, values, n, /*subtract=*/true);
      // The survivor added the pair mask when the dropped leaf's id is larger, subtracted it otherwise.
      for (const auto& [dropped, seed] : reply.pair_seeds)
        apply_mask(seed, stream, values, n, /*subtract=*/dropped > survivor);
    }
  };
  return u;
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
