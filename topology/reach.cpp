#include "topology/reach.h"

#include <algorithm>

namespace fednode {

PeerReach reach(const Topology& topology, NodeId self, NodeId peer) {
  const TopologyNode& me = topology.node(self);
  const TopologyNode& other = topology.node(peer);
  PeerReach r;
  if (other.reachable) {
    r.way = PeerReach::Way::Dial;
    r.address = other.address;
    return r;
  }
  if (me.reachable) {
    r.way = PeerReach::Way::Answer;
    return r;
  }
  r.way = PeerReach::Way::Relay;
  for (const auto& e : topology.edges)
    if ((e.from == self && e.to == peer) || (e.from == peer && e.to == self))
      for (const auto& name : e.via) {
        const TopologyRelay* relay = &topology.relay(name);
        if (std::find(r.relays.begin(), r.relays.end(), relay) == r.relays.end()) r.relays.push_back(relay);
      }
  if (r.relays.empty())
    for (const auto& relay : topology.relays) r.relays.push_back(&relay);
  if (r.relays.empty())
    throw InputError(topology.source + ": " + topology.describe(self) + " and " + topology.describe(peer) +
                     " both have reachable = false and exchange messages, so they can only meet at a relay: list one "
                     "in a [[relay]] section (docs/deployment.md)");
  return r;
}

}  // namespace fednode
