// LAN discovery, the deciding half (docs/lan.md, "Discovery"): which address to dial for each peer
// whose address the topology leaves out, from the beacons heard (node/beacon_socket.h).
//
// A beacon is a hint that anyone on the LAN can forge. One is taken as a candidate only when it is
// of this run and names a node of the topology with the very public key the topology lists for it;
// the rest are ignored (and said once per sender and reason). A candidate is then only dialled:
// the transport's CurveZMQ handshake, which needs the secret half of that key, is what makes it the
// peer. A candidate that has not passed the handshake within `trial` gives way to the next one
// heard, in turn, so a forged beacon pointing elsewhere costs a few seconds, never the run; one that
// passed is kept while its connection lives. Static addresses never come here: they win.
#pragma once

#include "core/contributors.h"
#include "core/log.h"
#include "node/beacon_socket.h"

#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fednode {

class PeerFinder {
 public:
  using Clock = std::chrono::steady_clock;
  struct Timing {
    std::chrono::milliseconds trial{3000};   // to pass the handshake before the next candidate is tried
    std::chrono::milliseconds fresh{5000};   // a candidate not heard for longer is not tried again
  };
  using Say = fednode::Say;
  using Namer = std::function<std::string(NodeId)>;
  static constexpr size_t kMaxCandidates = 8;  // per peer: a flood of forged beacons cannot grow memory

  // `keys`: every node of the topology and its public key; `sought`: the peers to find.
  PeerFinder(std::map<NodeId, std::array<uint8_t, 32>> keys, NodeId self, std::set<NodeId> sought, RunTag run,
             Say say, Namer name, Timing timing);
  PeerFinder(std::map<NodeId, std::array<uint8_t, 32>> keys, NodeId self, std::set<NodeId> sought, RunTag run,
             Say say, Namer name)
      : PeerFinder(std::move(keys), self, std::move(sought), run, std::move(say), std::move(name), Timing{}) {}

  // Takes in one datagram: a candidate address for a sought peer, or ignored (said once per host
  // and reason: not a beacon, another run, a node not in the topology, a key not that node's).
  void hear(const HeardBeacon& heard, Clock::time_point now);

  // The address to dial `peer` at now; empty while none is known. `proven`: the connection to the
  // current one passed the handshake (Transport::handshaken).
  std::string address_for(NodeId peer, bool proven, Clock::time_point now);

  const std::set<NodeId>& sought() const { return sought_; }
  // Beacons ignored so far, by reason ("another run", "key not the node's", ...).
  const std::map<std::string, int64_t>& ignored() const { return ignored_; }

 private:
  struct Candidate {
    std::string address;
    Clock::time_point heard, tried{};
  };
  struct Search {
    std::vector<Candidate> candidates;
    std::string current;
    Clock::time_point since{};  // when `current` was chosen, or last seen proven
    bool proven = false;        // `current` passed the handshake (said once)
  };
  // Counts and, the first time for this host and reason, says why a datagram is no use.
  void ignore(const std::string& host, const std::string& reason, const std::string& detail);
  // The fresh candidate other than the current one that was tried longest ago, or null.
  Candidate* next_candidate(Search& s, Clock::time_point now);

  std::map<NodeId, std::array<uint8_t, 32>> keys_;
  NodeId self_;
  std::set<NodeId> sought_;
  RunTag run_;
  Say say_;
  Namer name_;
  Timing timing_;
  std::map<NodeId, Search> searches_;
  std::map<std::string, int64_t> ignored_;
  std::set<std::pair<std::string, std::string>> said_;  // (host, reason) already said; bounded below
};

}  // namespace fednode
