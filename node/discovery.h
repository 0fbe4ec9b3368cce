// LAN discovery (docs/lan.md, "Discovery") as a module the node composes: it beacons this node's
// TCP port over UDP from the moment it is made, hears its peers' beacons, and says for each peer
// the topology gives no address which address to dial now (node/peer_finder.h), a beacon being
// believed only once the CurveZMQ handshake proves the key the topology lists for that node.
#pragma once

#include "core/log.h"
#include "crypto/run_id.h"
#include "node/beacon_socket.h"
#include "node/peer_finder.h"
#include "node/transport.h"
#include "topology/topology.h"

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace fednode {

class Discovery {
 public:
  // Starts beaconing `port` at once on `interfaces` (empty: every IPv4 interface that is up) and
  // looks for `sought`. Throws InputError when the UDP socket cannot be opened.
  Discovery(const Topology& topology, NodeId self, const RunId& run, uint16_t port, std::set<NodeId> sought,
            const std::vector<std::string>& interfaces, Say say, std::function<std::string(NodeId)> who);
  Discovery(const Discovery&) = delete;
  Discovery& operator=(const Discovery&) = delete;

  // What the beacons said since the last call: a new address for a sought peer replaces the
  // transport's connection to the old one.
  void find_peers(Transport& transport);

 private:
  std::unique_ptr<BeaconSocket> beacons_;
  std::unique_ptr<PeerFinder> finder_;
};

}  // namespace fednode
