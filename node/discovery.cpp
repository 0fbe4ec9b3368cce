#include "node/discovery.h"

#include <array>
#include <map>

namespace fednode {

Discovery::Discovery(const Topology& topology, NodeId self, const RunId& run, uint16_t port, std::set<NodeId> sought,
                     const std::vector<std::string>& interfaces, Say say, std::function<std::string(NodeId)> who) {
  std::map<NodeId, std::array<uint8_t, 32>> keys;
  for (const auto& n : topology.nodes)
    if (n.public_key) keys[n.id] = *n.public_key;
  Beacon own;
  own.run = beacon_run_tag(run);
  own.node = self;
  own.port = port;
  own.key = keys.at(self);  // CurveZMQ hops, checked: every node has its key
  BeaconSocketOptions options;
  options.port = static_cast<uint16_t>(topology.federation.discovery_port);
  options.interfaces = interfaces;
  beacons_ = std::make_unique<BeaconSocket>(own, options);
  std::string to, looking;
  for (const auto& d : beacons_->destinations()) to += (to.empty() ? "" : ", ") + d;
  for (NodeId peer : sought) looking += (looking.empty() ? "" : ", ") + who(peer);
  say("discovery: beaconing TCP port " + std::to_string(own.port) + " on UDP port " + std::to_string(options.port) +
      " to " + (to.empty() ? "no interface yet" : to) + (looking.empty() ? "" : "; looking for " + looking));
  finder_ = std::make_unique<PeerFinder>(std::move(keys), self, std::move(sought), own.run, std::move(say), std::move(who));
}

void Discovery::find_peers(Transport& transport) {
  const auto t = PeerFinder::Clock::now();
  for (const HeardBeacon& heard : beacons_->take_heard()) finder_->hear(heard, t);
  for (NodeId peer : finder_->sought()) transport.add_peer(peer, finder_->address_for(peer, transport.handshaken(peer), t));
}

}  // namespace fednode
