// A node's configuration: built from a topology file (node_config, what `fednode run` does and an
// application may do too), and taken apart into the pieces a node is made of: the checks a config
// must pass before a node touches its state directory, the allow list of peer keys, the
// machine's settings, the transport's options and the hello.
#pragma once

#include "node/head_io.h"
#include "node/machine.h"
#include "node/member.h"
#include "node/node.h"
#include "node/secure_channel.h"
#include "topology/plan.h"

#include <atomic>
#include <functional>
#include <string>
#include <memory>

namespace fednode {

// How node_config loads a node's data.
struct NodeSetup {
  bool quiet = false;                       // no extraction progress on stderr
  const std::atomic<bool>* stop = nullptr;  // ends a backbone's extraction (Interrupted)
  std::function<void(const std::string&)> progress;  // "loading data", "holds N samples"
};

// The NodeConfig of node `id_or_name` (its id or name) of `topology`, as `fednode run` makes it:
// its data from [federation.data] / [node.data], loaded, partitioned like every other node's and
// expanded; its method options from [federation.options] / [node.options]; the run name. The
// state directory is the topology's. Throws InputError naming the file and the node for an
// unknown or misplaced option, a bad value or no data; Interrupted when `stop` becomes true
// while a backbone extracts features.
NodeConfig node_config(const Topology& topology, const std::string& id_or_name, const NodeSetup& setup = {});

// The same without its data, which the caller gives (config.local, test, backbone_fingerprint,
// class_names, recipe): an application or the Python module with features of its own.
NodeConfig node_config_without_data(const Topology& topology, const std::string& id_or_name);

// The method options the topology gives node `id` ([federation.options], [node.options]), for an
// application that brings its own data. Throws InputError as node_config does.
MethodOptions method_options_for(const Topology& topology, NodeId id);

// Throws InputError for a config that cannot run: no run name, an invalid topology, another
// method than the topology's, bad timing, inconsistent features, nothing to send or fit on.
void check_node_config(const NodeConfig& config, const NodePlan& plan);

// [federation.limits] over the protocol's defaults; InputError naming the file's line.
Limits limits_of(const Topology& topology);

// Every node of the topology and its public key; throws InputError for a node without one.
PeerKeys peer_keys(const Topology& topology);

// What assemble_member (node/member.h) builds this node's machine from (its say, callbacks and
// stop flag are the caller's to add).
MemberInputs member_inputs(const NodeConfig& config, const NodePlan& plan, const Method& method, const SecretKey32& noise_key,
                           MemberMasks masks);

// The transport's options: the config's, with the message limit and, when the topology asks for
// hop encryption, the node's CURVE keys and every peer's as the allow list.
TransportOptions transport_options(const NodeConfig& config, std::shared_ptr<const CurveKeyPair> curve_keys);

// What the node's head files say about its heads (node/head_io.h): method, run, node, classes and
// the feature recipe, when the recipe gives the config's fingerprint and width.
HeadCard head_card(const NodeConfig& config);

// The first message on every link this node sends on.
Hello hello_of(const NodeConfig& config);

}  // namespace fednode
