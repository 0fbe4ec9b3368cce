// How one node reaches a neighbour, from the topology file alone (docs/deployment.md): it dials a
// neighbour that accepts connections; it answers on the connection an unreachable neighbour dials
// to it; and two unreachable neighbours meet at a relay that both dial.
#pragma once

#include "topology/topology.h"

#include <string>
#include <vector>

namespace fednode {

struct PeerReach {
  enum class Way {
    Dial,    // the peer listens at `address` (empty: to be found by discovery)
    Answer,  // the peer dials this node; frames to it go back on that connection
    Relay,   // both dial a relay; `relays` in the order to try them
  };
  Way way = Way::Dial;
  std::string address;
  std::vector<const TopologyRelay*> relays;  // point into the topology
};

// Throws InputError naming both nodes when neither can be reached and the file lists no relay
// for them: the relays an edge between them names with `via` (graph mode), else every relay.
PeerReach reach(const Topology& topology, NodeId self, NodeId peer);

}  // namespace fednode
