// From a NodeConfig to the pieces a node is made of: the checks a config must pass before a node
// touches its state directory, the allow list of peer keys, and the machine's settings.
#pragma once

#include "node/machine.h"
#include "node/node.h"
#include "node/secure_channel.h"
#include "topology/plan.h"

#include <atomic>
#include <memory>

namespace fednode {

// Throws InputError for a config that cannot run: no run name, an invalid topology, another
// method than the topology's, bad timing, inconsistent features, nothing to send or fit on.
void check_node_config(const NodeConfig& config, const NodePlan& plan);

// Every node of the topology and its public key; throws InputError for a node without one.
PeerKeys peer_keys(const Topology& topology);

// The machine's settings for this node (its say and callbacks are the caller's to add).
MachineConfig machine_config(const NodeConfig& config, const NodePlan& plan, const Method& method,
                             const std::atomic<bool>* stop);

// The transport's options: the config's, with the message limit and, when the topology asks for
// hop encryption, the node's CURVE keys and every peer's as the allow list.
TransportOptions transport_options(const NodeConfig& config, std::shared_ptr<const CurveKeyPair> curve_keys);

// The first message on every link this node sends on.
Hello hello_of(const NodeConfig& config);

}  // namespace fednode
