// Ready-made topologies: linear, ring, star and graph federations of N nodes on consecutive
// ports, for `fednode topology` and for tests. Keys come from the caller (crypto/ makes them).
#pragma once

#include "topology/topology.h"

#include <functional>
#include <map>
#include <string>

namespace fednode {

// Given a node (its key_dir already set, as written) and that directory resolved, returns its
// public key as hex or base64 text, or "" to leave the key to key_dir/node.pub. The CLI's
// provider generates the identity in the directory and returns its public key.
using PublicKeyProvider = std::function<std::string(const TopologyNode& node, const std::string& key_dir)>;
PublicKeyProvider keys_from_map(std::map<NodeId, std::string> keys);

struct TopologyBuildOptions {
  TopologyMode mode = TopologyMode::Linear;
  int nodes = 0;                     // ids 0..nodes-1, names n0..n<nodes-1>
  std::string host = "127.0.0.1";    // addresses tcp://host:(base_port + id)
  bool addresses = true;             // false: none, for LAN discovery (`fednode run --discover`)
  int base_port = 7000;
  std::string method = "fedcgs";
  std::string run;                   // [federation] run; empty: none (run_name's default)
  uint64_t seed = 0;                 // the federation's seed; also draws the random graph
  double deadline_seconds = kDefaultDeadlineSeconds;
  double ack_deadline_seconds = kDefaultAckDeadlineSeconds;
  double silence_seconds = kDefaultSilenceSeconds;
  int64_t receive_window = kDefaultReceiveWindow;  // [federation] receive_window
  HopEncryption hop_encryption = HopEncryption::Auto;  // [federation] hop_encryption
  OptionMap options;                 // [federation.options]
  OptionMap data;                    // [federation.data]
  std::string key_root;              // non-empty: node i gets key_dir = key_root/n<i>
  std::string state_root = "state";  // node i gets state_dir = state_root/n<i>
  std::string base_dir = ".";        // where the file will live: relative paths resolve here
  PublicKeyProvider public_key;      // may be empty
};

// Star: node 0 is the hub (as in `fednode simulate`). Ring: starts at node 0. Graph: the
// diamond 0 -> {1, 2} -> 3 for 4 nodes, otherwise a random connected DAG drawn from the seed
// in which every node but 0 has an edge from an earlier node. The result passes
// validate_topology except, when no keys were provided or found, for the keys: save_topology
// refuses to write it unless asked for a keyless file explicitly.
Topology build_topology(const TopologyBuildOptions& options);

}  // namespace fednode
