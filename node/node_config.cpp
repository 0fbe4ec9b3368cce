#include "node/node_config.h"

namespace fednode {

void check_node_config(const NodeConfig& config, const NodePlan& plan) {
  const auto& topo = config.topology;
  if (config.run_name.empty()) throw InputError("the node needs a run name (its run id derives from it)");
  validate_topology(topo);  // load_topology did, but an application may build one in memory
  if (config.method.method != topo.federation.method)
    throw InputError("the node runs " + config.method.method + " but " + topo.source + " says " +
                     topo.federation.method);
  const std::string self = "node " + std::to_string(config.id);
  const auto bad = [&](const std::string& what) { throw InputError(self + "'s " + what); };
  if (config.retry_initial.count() <= 0) bad("retry_initial must be positive");
  if (config.retry_max < config.retry_initial) bad("retry_max must be at least retry_initial");
  if (!(config.ack_deadline_seconds > 0 && config.ack_deadline_seconds <= kMaxDeadlineSeconds))
    bad("ack_deadline_seconds must lie in (0, " + std::to_string(static_cast<int64_t>(kMaxDeadlineSeconds)) + "]");
  config.local.validate(self + "'s training features");
  if (config.local.size() == 0 && plan.wait_for.empty() && plan.late_from.empty())
    throw InputError(self + " has no training features and receives no knowledge in " + topo.source +
                     ": it would have nothing to send or to fit a head on");
  if (!config.test) return;
  config.test->validate(self + "'s test features");
  // Found out here rather than when the finished head is scored.
  if (config.test->dim() != config.local.dim() || config.test->num_classes != config.local.num_classes)
    throw InputError(self + "'s test features have " + std::to_string(config.test->dim()) + " dimensions and " +
                     std::to_string(config.test->num_classes) + " classes, its training features " +
                     std::to_string(config.local.dim()) + " and " + std::to_string(config.local.num_classes));
}

PeerKeys peer_keys(const Topology& topology) {
  PeerKeys keys;
  for (const auto& n : topology.nodes) {
    if (!n.public_key) throw InputError(topology.describe(n.id) + " has no public key");
    PublicKey key;
    key.bytes = *n.public_key;
    keys[n.id] = key;
  }
  return keys;
}

MachineConfig machine_config(const NodeConfig& config, const NodePlan& plan, const Method& method,
                             const std::atomic<bool>* stop) {
  MachineConfig m;
  m.topology = &config.topology;
  m.plan = plan;
  m.method = &method;
  m.local = &config.local;
  m.ctx.node = config.id;
  m.ctx.seed = config.topology.federation.seed;
  m.ctx.backbone_fingerprint = config.backbone_fingerprint;
  m.ctx.num_classes = config.local.num_classes;
  m.ctx.dim = static_cast<int>(config.local.dim());
  m.ctx.stop = stop;
  m.transfer = transfer_precision(config.method);
  return m;
}

TransportOptions transport_options(const NodeConfig& config, std::shared_ptr<const CurveKeyPair> curve_keys) {
  TransportOptions t = config.transport;
  t.max_message_bytes = config.limits.max_message_bytes;
  t.curve = CurveSettings{};
  if (curve_keys) {
    t.curve.keys = std::move(curve_keys);
    t.curve.peers = peer_keys(config.topology);  // the whole topology: the ZAP allow list and the DEALERs' server keys
  }
  return t;
}

Hello hello_of(const NodeConfig& config) {
  Hello h;
  h.node = config.id;
  h.method = config.method.method;
  h.backbone_fingerprint = config.backbone_fingerprint;
  h.dim = static_cast<int>(config.local.dim());
  h.num_classes = config.local.num_classes;
  h.software = "fednode 0.1.0";
  return h;
}

}  // namespace fednode
